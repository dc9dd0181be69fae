//! CUDA engine of Smooth-and-Clip. The cube and the mask go to the GPU once; for every kernel
//! the replacement (`kernels/scfind.cu`), the smoothing (`kernels/filters.cu`), the noise
//! sample, the extremes and the clipping run on the device; the noise statistic is taken over
//! the sample (medians through `stats::select_ranks_device`); only the mask comes back.
//!
//! A cube larger than GPU memory is processed in z-slabs with halos of the largest spectral
//! reach (halo planes taken with the boundary mode, so every mode matches the one-piece
//! result). Each kernel then sweeps the slabs twice: first for the noise sample and extremes
//! (combined over slabs: the same sample as in one piece), then to clip. New detections are
//! marked `NEW` until the sweep ends, so halo planes always see the mask as it was before the
//! kernel, as in one piece.

use std::ops::Range as Span;

use rayon::prelude::*;

use super::cuda_fixed::{fixed_groups, row_ring_slots, x_in_rows, FixedFns, MAX_BOXCARS};
use super::cuda_sofia1::DeviceSample;
use super::{
    extremes_or_nan, merge_extremes, BlockInput, Kernel, NoiseRule, Outcome, Plan, Progress,
    Replace, SampleParts, Statistic, BLANK, DETECTED, MASKED,
};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::transfer::prefault_apart;
use crate::backend::cuda::{
    self, grid_stride, CudaFunction, CudaSlice, DeviceRepr, Gpu, LaunchConfig, PushKernelArg,
};
use crate::cube::filters::{apply_device, extend_index, AxisView, DevicePass, Pass};
use crate::cube::stats::sample::Sampling;
use crate::cube::stats::sofia1::sofia1_fit;
use crate::cube::stats::{count_device, select_ranks_device, Values};
use crate::error::{Error, Result};
use crate::real::Real;

/// Mask bit (device and host during a run): found by the current kernel, not yet `MASKED`.
const NEW: u8 = 4;
const MAX_BLOCKS: usize = 4096;
/// Part of the budget (`Gpu::budget`) kept for the selection kernels and small buffers.
const RESERVE: usize = 256 << 20;

fn cfg(n: usize) -> LaunchConfig {
    grid_stride(n, MAX_BLOCKS)
}

/// Ring slots a thread of `sofia2_boxcars` has for its ring-fed passes
/// (SC_LINE_RING_BYTES / sizeof(T)).
fn line_ring_slots<T>() -> usize {
    64 / std::mem::size_of::<T>()
}

/// Warps a block of `sofia2_boxcar_rows` (SC_ROW_WARPS).
fn row_warps<T>() -> usize {
    16 / std::mem::size_of::<T>()
}

/// Mirrors `struct ScBoxcars` in kernels/scfind.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct ScBoxcars {
    outer: i64,
    n: i64,
    inner: i64,
    top: i64,
    bottom: i64,
    r: [i64; MAX_BOXCARS],
    inv: [f64; MAX_BOXCARS],
    passes: i32,
    has_carry_in: i32,
    has_carry_out: i32,
    prep: i32,
    kind: i32,
    pad: i32,
    value: f64,
}

// SAFETY: plain-old-data with the same C layout as the kernel's struct.
unsafe impl DeviceRepr for ScBoxcars {}

/// The launches of a chain of boxcars of radii `radii` along one axis: consecutive runs of at
/// most MAX_BOXCARS whose ring-fed passes (all of them with `first_fed`, else those after the
/// first) fit their rings (2r+1 slots each) in `slots`; a radius too wide for a ring starts a
/// launch of its own (it cannot be ring-fed at all with `first_fed`: callers check).
fn boxcar_groups(radii: &[usize], first_fed: bool, slots: usize) -> Vec<&[usize]> {
    let ring = |r: usize| 2 * r + 1;
    let mut groups = Vec::new();
    let mut start = 0;
    while start < radii.len() {
        let mut used = if first_fed { ring(radii[start]) } else { 0 };
        let mut end = start + 1;
        while end < radii.len() && end - start < MAX_BOXCARS && used + ring(radii[end]) <= slots {
            used += ring(radii[end]);
            end += 1;
        }
        groups.push(&radii[start..end]);
        start = end;
    }
    groups
}

/// The kernel arguments of one launch of `radii` over `view`, planes top..=bottom.
fn boxcar_args<T: Real>(view: AxisView, radii: &[usize], top: usize, bottom: usize) -> ScBoxcars {
    let mut p = ScBoxcars {
        outer: view.outer as i64,
        n: view.n as i64,
        inner: view.inner as i64,
        top: top as i64,
        bottom: bottom as i64,
        r: [0; MAX_BOXCARS],
        inv: [0.0; MAX_BOXCARS],
        passes: radii.len() as i32,
        has_carry_in: 0,
        has_carry_out: 0,
        prep: 0,
        kind: 0,
        pad: 0,
        value: 0.0,
    };
    for (k, &r) in radii.iter().enumerate() {
        p.r[k] = r as i64;
        p.inv[k] = crate::cube::scfind::running::inverse_width::<T>(r);
    }
    p
}

/// The element-wise kernels for element type T.
struct Fns {
    init_blank: CudaFunction,
    prepare: CudaFunction,
    gather: CudaFunction,
    gather_at: CudaFunction,
    minmax: CudaFunction,
    clip: CudaFunction,
    boxcar: CudaFunction,
    rows: CudaFunction,
    transpose: CudaFunction,
    /// The register-ring boxcars (`sofia2_boxcar_{rows,lines}_r<R>p<P>`) of the plan.
    fixed: FixedFns,
}

impl Fns {
    fn new<T: Real>(gpu: &Gpu, plan: &Plan) -> Result<Self> {
        let f = |name: &str| gpu.function("scfind", &format!("{name}_{}", T::CUDA));
        Ok(Fns {
            fixed: FixedFns::new::<T>(gpu, plan)?,
            init_blank: f("init_blank")?,
            prepare: f("prepare")?,
            gather: f("gather")?,
            gather_at: f("gather_at")?,
            minmax: f("minmax")?,
            clip: f("clip")?,
            boxcar: f("sofia2_boxcars")?,
            rows: f("sofia2_boxcar_rows")?,
            transpose: f("sc_transpose")?,
        })
    }
}

/// Planes [z0, z1) of the cube, loaded with `lo` planes below and `hi` above.
#[derive(Clone, Copy, Debug)]
struct Slab {
    z0: usize,
    z1: usize,
    lo: usize,
    hi: usize,
}

impl Slab {
    fn planes(&self) -> usize {
        self.lo + (self.z1 - self.z0) + self.hi
    }
}

/// Device state of a run.
struct Engine<'a, T: Real> {
    gpu: &'a Gpu,
    plan: &'a Plan,
    fns: Fns,
    plane: usize,
    cube: CudaSlice<T>,
    mask: CudaSlice<u8>,
    a: CudaSlice<T>,
    b: CudaSlice<T>,
    samples: CudaSlice<f64>,
    partial: CudaSlice<f64>,
    /// Exact spectral boxcar across slabs: the running mean at the bottom plane of the slab
    /// above (slabs then run top down), valid when `carry_valid`.
    carry: CudaSlice<T>,
    /// Where the next carry is written (swapped with `carry` after the spectral pass).
    carry_next: CudaSlice<T>,
    carry_valid: bool,
    /// The slab now on the device (cube and mask), if any.
    loaded: Option<(usize, usize, usize, usize)>,
    /// The host mask holds no bit: its planes go up as zeros (a memset, not a copy).
    mask_clear: bool,
    /// Stage marks of `run` (`last_profile()`); None for the Dask stages.
    tl: Option<Timeline>,
}

pub fn run<T: Real>(
    cube: &[T],
    plan: &Plan,
    mask: &mut [u8],
    progress: Progress<'_>,
) -> Result<Outcome> {
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let [nz, ny, nx] = plan.shape;
    let plane = ny * nx;
    let (hlo, mut hhi) = plan
        .kernels
        .iter()
        .map(Kernel::z_reach)
        .fold((0, 0), |a, b| (a.0.max(b.0), a.1.max(b.1)));
    if plan.exact && hhi > 0 {
        // the running mean carried into a slab reads one plane beyond the filter's reach
        hhi += 1;
    }
    let ns = plan.sampling.len(plan.shape);
    let free = gpu.budget()?;
    let fixed =
        ns * 8 + 2 * 8 * MAX_BLOCKS + 2 * plane * std::mem::size_of::<T>() + RESERVE.min(free / 8);
    let per_plane = plane * (3 * std::mem::size_of::<T>() + 1);
    let fit = free.saturating_sub(fixed) / per_plane.max(1);
    let slabs: Vec<Slab> = if fit >= nz && plan.slab_planes.is_none_or(|p| p >= nz) {
        vec![Slab {
            z0: 0,
            z1: nz,
            lo: 0,
            hi: 0,
        }]
    } else {
        let room = fit.saturating_sub(hlo + hhi);
        let step = plan.slab_planes.map_or(room, |p| p.min(room));
        if step == 0 {
            return Err(Error::GpuMemory(format!(
                "GPU memory holds {fit} planes of {ny}x{nx} voxels, too few for a slab with a \
                 halo of {} planes: a slab needs {} bytes, {} bytes are free",
                hlo + hhi,
                fixed + (hlo + hhi + 1) * per_plane,
                free
            )));
        }
        (0..nz)
            .step_by(step)
            .map(|z0| Slab {
                z0,
                z1: (z0 + step).min(nz),
                lo: hlo,
                hi: hhi,
            })
            .collect()
    };
    let cap = slabs.iter().map(Slab::planes).max().unwrap_or(1) * plane;
    // SAFETY (allocs): every buffer is written before it is read (loads, prepare, filters).
    let mut eng = Engine {
        gpu: &gpu,
        plan,
        fns: Fns::new::<T>(&gpu, plan)?,
        plane,
        cube: unsafe { gpu.alloc::<T>(cap)? },
        mask: unsafe { gpu.alloc::<u8>(cap)? },
        a: unsafe { gpu.alloc::<T>(cap)? },
        b: unsafe { gpu.alloc::<T>(cap)? },
        samples: unsafe { gpu.alloc::<f64>(ns)? },
        partial: unsafe { gpu.alloc::<f64>(2 * MAX_BLOCKS)? },
        carry: unsafe { gpu.alloc::<T>(plane.max(1))? },
        carry_next: unsafe { gpu.alloc::<T>(plane.max(1))? },
        carry_valid: false,
        loaded: None,
        mask_clear: false,
        tl: Some(Timeline::start(&gpu)?),
    };
    // Read first: a fresh mask (all zero) is not written here, so its pages are not faulted in
    // on this path (a helper thread does it below, beside the device work).
    let (set, foreign) = mask
        .par_iter()
        .map(|&m| (m != 0, m & !(MASKED | DETECTED) != 0))
        .reduce(|| (false, false), |a, b| (a.0 || b.0, a.1 || b.1));
    if foreign {
        mask.par_iter_mut().for_each(|m| *m &= MASKED | DETECTED);
    }
    eng.mask_clear = !set;
    let keep = plan.returned_bits();
    let out = if slabs.len() == 1 {
        resident(&mut eng, cube, mask, &slabs[0], progress)
    } else {
        let out = eng.run_all(cube, mask, &slabs, progress);
        mask.par_iter_mut().for_each(|m| {
            if *m & NEW != 0 {
                *m |= MASKED;
            }
            *m &= keep;
        });
        out
    };
    let tl = eng.tl.take();
    let out = out?;
    if let Some(tl) = tl {
        tl.finish()?;
    }
    Ok(out)
}

/// The whole cube in one slab: its mask is final on the device (`MASKED | DETECTED` set by
/// every clip, no `NEW`), so it comes down once with only the returned bits and needs no host
/// pass. A mask that went up as zeros is not read on the host at all, so a helper thread maps
/// its pages while the device works and the download copies into resident pages. The helper
/// runs alone, not on the pool (this thread may be a pool worker blocked on it).
fn resident<T: Real>(
    eng: &mut Engine<'_, T>,
    cube: &[T],
    mask: &mut [u8],
    s: &Slab,
    progress: Progress<'_>,
) -> Result<Outcome> {
    let slabs = std::slice::from_ref(s);
    let out = if eng.mask_clear {
        std::thread::scope(|sc| {
            let pages = sc.spawn(|| prefault_apart(&mut *mask, 1));
            let out = eng.run_all(cube, &mut [], slabs, progress);
            if let Err(panic) = pages.join() {
                std::panic::resume_unwind(panic);
            }
            out
        })
    } else {
        eng.run_all(cube, mask, slabs, progress)
    }?;
    let keep = eng.plan.returned_bits();
    eng.store_mask(mask, s, keep)?;
    eng.mark("d2h")?;
    Ok(out)
}

impl<'a, T: Real> Engine<'a, T> {
    /// Every kernel over `slabs`; with one slab the mask stays on the device (`resident`
    /// brings it down), and `mask` is not touched if the device copy started as zeros.
    fn run_all(
        &mut self,
        cube: &[T],
        mask: &mut [u8],
        slabs: &[Slab],
        progress: Progress<'_>,
    ) -> Result<Outcome> {
        let resident = slabs.len() == 1;
        let plan = self.plan;
        // SoFiA-2's spectral running mean starts at the last plane: sweep slabs top down.
        let order: Vec<Slab> = if plan.exact {
            slabs.iter().rev().cloned().collect()
        } else {
            slabs.to_vec()
        };
        let slabs = &order[..];
        // Noise of the original cube.
        let mut ext = None;
        for s in slabs {
            let interior = Slab { lo: 0, hi: 0, ..*s };
            self.load(cube, mask, &interior)?;
            self.sample_and_extremes(&interior, true, &mut ext)?;
        }
        self.mark("h2d")?;
        let rms0 = self.measure(ext)?;
        self.mark("noise")?;
        let mut outcome = Outcome {
            rms0,
            rms: Vec::with_capacity(plan.kernels.len()),
        };
        for (k, ker) in plan.kernels.iter().enumerate() {
            let passes = KernelPasses::new(self.gpu, ker, plan)?;
            let rms = if ker.use_rms0 {
                rms0
            } else {
                let mut ext = None;
                self.carry_valid = false;
                for s in slabs {
                    self.load(cube, mask, s)?;
                    self.smooth(s, &passes, plan.replace, rms0)?;
                    self.sample_and_extremes(s, false, &mut ext)?;
                    self.mark("sample")?;
                }
                let rms = self.measure(ext)?;
                self.mark("noise")?;
                rms
            };
            self.carry_valid = false;
            for s in slabs {
                if !resident || ker.use_rms0 {
                    // W is still in `a` in the resident case
                    self.load(cube, mask, s)?;
                    self.smooth(s, &passes, plan.replace, rms0)?;
                }
                if resident {
                    // nothing reads the mask between the clip and the next kernel
                    self.clip_bits(s, plan.level(rms), MASKED | DETECTED)?;
                } else {
                    self.clip(s, plan.level(rms))?;
                    self.store_mask(mask, s, !BLANK)?;
                }
            }
            if !resident {
                mask.par_iter_mut().for_each(|m| {
                    if *m & NEW != 0 {
                        *m = (*m | MASKED) & !NEW;
                    }
                });
            }
            self.mark("clip")?;
            outcome.rms.push(rms);
            progress(k, rms);
        }
        Ok(outcome)
    }

    /// End the stage `name` of `last_profile()` here (a no-op for the Dask stages).
    fn mark(&mut self, name: &'static str) -> Result<()> {
        match self.tl.as_mut() {
            Some(tl) => tl.mark(self.gpu, name),
            None => Ok(()),
        }
    }

    /// Upload the cube and mask planes of `s` (halo planes through the boundary mode; zero
    /// planes outside a constant boundary) and mark blanks. Skipped if already there.
    fn load(&mut self, cube: &[T], mask: &[u8], s: &Slab) -> Result<()> {
        let key = (s.z0, s.z1, s.lo, s.hi);
        if self.loaded == Some(key) {
            return Ok(());
        }
        let [nz, _, _] = self.plan.shape;
        let plane = self.plane;
        // Runs of consecutive local planes with consecutive sources (None: zero planes).
        let src = |l: usize| -> Option<usize> {
            let p = s.z0 as isize - s.lo as isize + l as isize;
            extend_index(p, nz, self.plan.mode)
        };
        let mut l = 0;
        while l < s.planes() {
            let first = src(l);
            let mut e = l + 1;
            while e < s.planes() {
                let ok = match (first, src(e)) {
                    (Some(a), Some(b)) => b == a + (e - l),
                    (None, None) => true,
                    _ => false,
                };
                if !ok {
                    break;
                }
                e += 1;
            }
            let dst: Span<usize> = l * plane..e * plane;
            match first {
                Some(a) => {
                    let span = a * plane..(a + e - l) * plane;
                    if l == 0 {
                        // staged (pinned) copies into the start of the buffers
                        self.gpu.upload_into(&cube[span.clone()], &mut self.cube)?;
                    } else {
                        let mut v = self.cube.slice_mut(dst.clone());
                        self.gpu.stream.memcpy_htod(&cube[span.clone()], &mut v)?;
                    }
                    if self.mask_clear {
                        let mut v = self.mask.slice_mut(dst);
                        self.gpu.stream.memset_zeros(&mut v)?;
                    } else if l == 0 {
                        self.gpu.upload_into(&mask[span], &mut self.mask)?;
                    } else {
                        let mut v = self.mask.slice_mut(dst);
                        self.gpu.stream.memcpy_htod(&mask[span], &mut v)?;
                    }
                }
                None => {
                    let mut v = self.cube.slice_mut(dst.clone());
                    self.gpu.stream.memset_zeros(&mut v)?;
                    let mut v = self.mask.slice_mut(dst);
                    self.gpu.stream.memset_zeros(&mut v)?;
                }
            }
            l = e;
        }
        let n = (s.planes() * plane) as i64;
        let mut b = self.gpu.stream.launch_builder(&self.fns.init_blank);
        b.arg(&self.cube).arg(&mut self.mask).arg(&n);
        // SAFETY: arguments match init_blank_* in kernels/scfind.cu; n elements exist.
        unsafe { b.launch(cfg(n as usize)) }?;
        self.loaded = Some(key);
        Ok(())
    }

    /// Prepare (replacement, NaN → 0) and smooth the loaded slab; W ends in `a`.
    fn smooth(
        &mut self,
        s: &Slab,
        passes: &KernelPasses,
        replace: Replace,
        rms0: f64,
    ) -> Result<()> {
        let n = s.planes() * self.plane;
        let (kind, value): (i32, f64) = match replace {
            Replace::None => (0, 0.0),
            Replace::Sign(f) => (1, T::from_f64(f * rms0).to_f64()),
            Replace::CopySign(f) => (2, T::from_f64(f * rms0).to_f64()),
        };
        if passes
            .exact_xy
            .as_ref()
            .is_some_and(|(xr, _)| !xr.is_empty())
        {
            // the first launch of the x boxcars prepares the values on the way in
            return self.smooth_exact(s, passes, Some((kind, value)));
        }
        let nn = n as i64;
        let mut b = self.gpu.stream.launch_builder(&self.fns.prepare);
        b.arg(&self.cube)
            .arg(&self.mask)
            .arg(&mut self.a)
            .arg(&nn)
            .arg(&kind)
            .arg(&value);
        // SAFETY: arguments match prepare_* in kernels/scfind.cu.
        unsafe { b.launch(cfg(n)) }?;
        self.mark("prepare")?;
        self.smooth_prepared(s, passes)
    }

    /// The passes of `passes` over the prepared slab in `a`; W ends in `a`.
    fn smooth_prepared(&mut self, s: &Slab, passes: &KernelPasses) -> Result<()> {
        let [_, ny, nx] = self.plan.shape;
        let l = s.planes();
        if passes.exact_xy.is_some() || passes.exact_z.is_some() {
            return self.smooth_exact(s, passes, None);
        }
        let yv = AxisView {
            outer: l,
            n: ny,
            inner: nx,
        };
        let xv = AxisView {
            outer: l * ny,
            n: nx,
            inner: 1,
        };
        let zv = AxisView {
            outer: 1,
            n: l,
            inner: ny * nx,
        };
        for (p, view, stage) in (passes.y.iter().map(|p| (p, yv, "spatial y")))
            .chain(passes.x.iter().map(|p| (p, xv, "spatial x")))
            .chain(passes.z.iter().map(|p| (p, zv, "spectral")))
        {
            apply_device(self.gpu, &self.a, view, p, &mut self.b)?;
            std::mem::swap(&mut self.a, &mut self.b);
            self.mark(stage)?;
        }
        Ok(())
    }

    /// SoFiA-2 boxcars of radii `radii`, one after the other, over the lines of `a` given by
    /// (outer, n, inner), planes top..=bottom of each line; the result ends in `a`. Several
    /// boxcars go in one sweep (`boxcar_groups`) for whole lines (top = n−1, bottom = 0); a
    /// carried (spectral) pass runs alone.
    fn boxcars(
        &mut self,
        view: AxisView,
        radii: &[usize],
        top: usize,
        bottom: usize,
        carry_in: bool,
        carry_out: bool,
    ) -> Result<()> {
        let lines = view.outer * view.inner;
        let whole = !carry_in && top + 1 == view.n && bottom == 0 && view.n < 1 << 30;
        let fixed = match fixed_groups(radii, true)? {
            Some(g) if whole && (!carry_out || g.len() == 1) => g,
            _ => Vec::new(),
        };
        let launches: Vec<(CudaFunction, ScBoxcars)> = if !fixed.is_empty() {
            fixed
                .iter()
                .map(|&(r, passes)| {
                    let p = boxcar_args::<T>(view, &vec![r; passes], top, bottom);
                    Ok((self.fns.fixed.get(self.gpu, false, r, passes)?, p))
                })
                .collect::<Result<_>>()?
        } else {
            // whole lines without carries share launches; otherwise one pass a launch
            let groups = if !carry_in && !carry_out && top + 1 == view.n && bottom == 0 {
                boxcar_groups(radii, false, line_ring_slots::<T>())
            } else {
                radii.chunks(1).collect()
            };
            let generic = |g| {
                (
                    self.fns.boxcar.clone(),
                    boxcar_args::<T>(view, g, top, bottom),
                )
            };
            groups.into_iter().map(generic).collect()
        };
        for (f, mut p) in launches {
            p.has_carry_in = carry_in as i32;
            p.has_carry_out = carry_out as i32;
            let mut bld = self.gpu.stream.launch_builder(&f);
            bld.arg(&self.a)
                .arg(&mut self.b)
                .arg(&p)
                .arg(&self.carry)
                .arg(&mut self.carry_next);
            // SAFETY: arguments match sofia2_boxcars_* and sofia2_boxcar_lines_r<R>p<P>_* in
            // kernels/scfind.cu (the latter: P passes of one radius R, the instantiation's,
            // whole lines with n < 2^30 and no carry in: fixed_groups and
            // `whole`); a and b hold outer·n·inner elements, carry one plane (the z pass only:
            // outer = 1); the generic kernel's several passes only over whole lines without
            // carries, the rings of passes 2.. within line_ring_slots; blockDim is THREADS =
            // 256 (the generic kernel's ring, the fixed kernels' launch bound).
            unsafe { bld.launch(cfg(lines)) }?;
            std::mem::swap(&mut self.a, &mut self.b);
            if carry_out {
                std::mem::swap(&mut self.carry, &mut self.carry_next);
            }
        }
        Ok(())
    }

    /// The x boxcars of radii `radii` over whole rows of the `planes` planes: in tiles
    /// (`sofia2_boxcar_rows`, no transposes) when every radius fits a ring, else on the
    /// transposed planes. `prep`: the source is the loaded cube, prepared on the way. The
    /// result ends in `a`.
    fn x_boxcars(
        &mut self,
        planes: usize,
        radii: &[usize],
        prep: Option<(i32, f64)>,
    ) -> Result<()> {
        let [_, ny, nx] = self.plan.shape;
        if !x_in_rows::<T>(radii) {
            self.transpose_planes(planes, ny, nx, prep)?;
            let v = AxisView {
                outer: planes,
                n: nx,
                inner: ny,
            };
            self.boxcars(v, radii, nx - 1, 0, false, false)?;
            return self.transpose_planes(planes, nx, ny, None);
        }
        let v = AxisView {
            outer: planes * ny,
            n: nx,
            inner: 1,
        };
        let warps = row_warps::<T>();
        let blocks = (planes * ny)
            .div_ceil(32)
            .div_ceil(warps)
            .clamp(1, 8 * MAX_BLOCKS);
        let launch = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (32 * warps as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let fixed = match fixed_groups(radii, false)? {
            Some(g) if nx < 1 << 30 => g,
            _ => Vec::new(),
        };
        let launches: Vec<(CudaFunction, ScBoxcars)> = if fixed.is_empty() {
            boxcar_groups(radii, true, row_ring_slots::<T>())
                .into_iter()
                .map(|g| (self.fns.rows.clone(), boxcar_args::<T>(v, g, nx - 1, 0)))
                .collect()
        } else {
            fixed
                .iter()
                .map(|&(r, passes)| {
                    let p = boxcar_args::<T>(v, &vec![r; passes], nx - 1, 0);
                    Ok((self.fns.fixed.get(self.gpu, true, r, passes)?, p))
                })
                .collect::<Result<_>>()?
        };
        let mut prep = prep;
        for (f, mut p) in launches {
            if let Some((kind, value)) = prep.take() {
                (p.prep, p.kind, p.value) = (1, kind, value);
            }
            let src = if p.prep != 0 { &self.cube } else { &self.a };
            let mut bld = self.gpu.stream.launch_builder(&f);
            bld.arg(src).arg(&self.mask).arg(&mut self.b).arg(&p);
            // SAFETY: arguments match sofia2_boxcar_rows_* and sofia2_boxcar_rows_r<R>p<P>_* in
            // kernels/scfind.cu (the latter: P passes of one radius R, the instantiation's,
            // nx < 2^30: fixed_groups); the cube, the mask, a and b hold
            // planes·ny·nx elements of whole rows; every generic pass's ring fits (checked
            // above and by boxcar_groups); blockDim is 32·SC_ROW_WARPS(T).
            unsafe { bld.launch(launch) }?;
            std::mem::swap(&mut self.a, &mut self.b);
        }
        Ok(())
    }

    /// b = every plane of a ((planes, rows, cols) → (planes, cols, rows)), then swap a and b.
    /// With `prep` = Some((kind, value)) the source is the loaded cube, prepared on the way
    /// (replacement, NaN → 0: `prepare` folded into the transpose).
    fn transpose_planes(
        &mut self,
        planes: usize,
        rows: usize,
        cols: usize,
        prep: Option<(i32, f64)>,
    ) -> Result<()> {
        let tiles = planes * rows.div_ceil(32) * cols.div_ceil(32);
        let (p, r, c) = (planes as i64, rows as i64, cols as i64);
        let (on, (kind, value)) = (prep.is_some() as i32, prep.unwrap_or((0, 0.0)));
        let src = if prep.is_some() { &self.cube } else { &self.a };
        let mut bld = self.gpu.stream.launch_builder(&self.fns.transpose);
        bld.arg(src)
            .arg(&self.mask)
            .arg(&mut self.b)
            .arg(&p)
            .arg(&r)
            .arg(&c)
            .arg(&on)
            .arg(&kind)
            .arg(&value);
        // SAFETY: arguments match sc_transpose_* in kernels/scfind.cu; the cube, the mask, a
        // and b hold planes·rows·cols elements; blockDim is THREADS (a multiple of 32).
        unsafe { bld.launch(cfg(tiles * cuda::THREADS as usize)) }?;
        std::mem::swap(&mut self.a, &mut self.b);
        Ok(())
    }

    /// `smooth` with SoFiA-2's boxcar arithmetic: rows (x) first (`x_boxcars`), then columns
    /// (y), then the spectral running mean, top down, carried from the slab above. `prep`: the
    /// slab is not prepared yet (`a` unset): the first x launch prepares the loaded cube (x
    /// boxcars only).
    fn smooth_exact(
        &mut self,
        s: &Slab,
        passes: &KernelPasses,
        prep: Option<(i32, f64)>,
    ) -> Result<()> {
        let [_, ny, nx] = self.plan.shape;
        let l = s.planes();
        if let Some((xr, yr)) = &passes.exact_xy {
            if !xr.is_empty() {
                self.x_boxcars(l, xr, prep)?;
                self.mark("spatial x")?;
            }
            if !yr.is_empty() {
                let v = AxisView {
                    outer: l,
                    n: ny,
                    inner: nx,
                };
                self.boxcars(v, yr, ny - 1, 0, false, false)?;
            }
            self.mark("spatial y")?;
        } else {
            for (p, view) in passes
                .y
                .iter()
                .map(|p| {
                    (
                        p,
                        AxisView {
                            outer: l,
                            n: ny,
                            inner: nx,
                        },
                    )
                })
                .chain(passes.x.iter().map(|p| {
                    (
                        p,
                        AxisView {
                            outer: l * ny,
                            n: nx,
                            inner: 1,
                        },
                    )
                }))
            {
                apply_device(self.gpu, &self.a, view, p, &mut self.b)?;
                std::mem::swap(&mut self.a, &mut self.b);
            }
            self.mark("spatial")?;
        }
        if let Some(r) = passes.exact_z {
            let v = AxisView {
                outer: 1,
                n: l,
                inner: ny * nx,
            };
            let top = s.lo + (s.z1 - s.z0) - 1;
            let carry_in = self.carry_valid;
            self.boxcars(v, &[r], top, s.lo, carry_in, true)?;
            self.carry_valid = true;
        } else {
            for p in &passes.z {
                let view = AxisView {
                    outer: 1,
                    n: l,
                    inner: ny * nx,
                };
                apply_device(self.gpu, &self.a, view, p, &mut self.b)?;
                std::mem::swap(&mut self.a, &mut self.b);
            }
        }
        self.mark("spectral")?;
        Ok(())
    }

    /// Write the sample slots of the slab's interior planes and merge its extremes. `raw`:
    /// sample the loaded cube itself (noise of the original cube) instead of W.
    fn sample_and_extremes(
        &mut self,
        s: &Slab,
        raw: bool,
        ext: &mut Option<(f64, f64)>,
    ) -> Result<()> {
        let plan = self.plan;
        let [_, ny, nx] = plan.shape;
        let plane = self.plane;
        let (slot0, slot1) = slot_range(plan.sampling, plan.shape, s.z0, s.z1);
        let (kind, c): (i32, i64) = match plan.sampling {
            Sampling::Cadence(c) => (0, c.max(1) as i64),
            Sampling::Stride(st) => (1, st.max(1) as i64),
            Sampling::Backward(c) => (2, c.max(1) as i64),
        };
        let size = plan.len() as i64;
        let w = if raw { &self.cube } else { &self.a };
        if slot1 > slot0 {
            let (s0, cnt) = (slot0 as i64, (slot1 - slot0) as i64);
            let (nyl, nxl) = (ny as i64, nx as i64);
            let zbase = s.z0 as i64 - s.lo as i64;
            let mut b = self.gpu.stream.launch_builder(&self.fns.gather);
            b.arg(w)
                .arg(&self.mask)
                .arg(&mut self.samples)
                .arg(&s0)
                .arg(&cnt)
                .arg(&kind)
                .arg(&c)
                .arg(&nyl)
                .arg(&nxl)
                .arg(&zbase)
                .arg(&size);
            // SAFETY: arguments match gather_*; every slot maps into the slab's interior.
            unsafe { b.launch(cfg(cnt as usize)) }?;
        }
        if plan.noise.needs_extremes() {
            let start = s.lo * plane;
            let n = (s.z1 - s.z0) * plane;
            let c = cfg(n);
            let blocks = c.grid_dim.0 as usize;
            let wv = w.slice(start..start + n);
            let mv = self.mask.slice(start..start + n);
            let nn = n as i64;
            let mut b = self.gpu.stream.launch_builder(&self.fns.minmax);
            b.arg(&wv).arg(&mv).arg(&nn).arg(&mut self.partial);
            // SAFETY: arguments match minmax_*; `partial` holds 2·MAX_BLOCKS values and
            // blockDim is THREADS = 256 (the kernel's shared arrays).
            unsafe { b.launch(c) }?;
            let mut host = vec![0.0f64; 2 * blocks];
            self.gpu.download(&self.partial, &mut host)?;
            for p in host.chunks(2) {
                if p[0] <= p[1] {
                    *ext = merge_extremes(*ext, Some((p[0], p[1])));
                }
            }
        }
        Ok(())
    }

    /// The noise of the sample on the device.
    fn measure(&mut self, ext: Option<(f64, f64)>) -> Result<f64> {
        let plan = self.plan;
        let ns = plan.sampling.len(plan.shape);
        let ext = plan.noise.needs_extremes().then(|| extremes_or_nan(ext));
        if let Some((range, factor)) = plan.noise.plain_mad() {
            let vals = Values {
                center: 0.0,
                abs: true,
                range,
            };
            // No value counts: the host's rule words the error (SoFiA 1 names the flux range).
            let n = count_device(self.gpu, &self.samples, ns, vals)?;
            if n > 0 {
                // both middle ranks in one selection (the same rank twice for an odd count)
                let [below, mid] =
                    select_ranks_device(self.gpu, &self.samples, ns, [(n - 1) / 2, n / 2], vals)?
                        .ok_or_else(|| Error::Internal("rank beyond the sample".into()))?;
                let med = if n % 2 == 1 { mid } else { 0.5 * (below + mid) };
                return Ok(factor * med);
            }
        }
        if let NoiseRule::Sofia2Exact {
            stat: Statistic::Mad,
            range,
            walk,
            single,
        } = plan.noise
        {
            if let Some(rms) =
                super::cuda_mad::sofia2_mad(self.gpu, &self.samples, ns, range, walk, single)?
            {
                return Ok(rms);
            }
        }
        if let NoiseRule::Sofia1(p) = plan.noise {
            if p.needs_extremes() {
                let sample = DeviceSample {
                    gpu: self.gpu,
                    values: &self.samples,
                    n: ns,
                };
                return sofia1_fit(&sample, ext, &p, plan.fitter.as_ref());
            }
        }
        let mut host = vec![0.0f64; ns];
        self.gpu.download(&self.samples, &mut host)?;
        plan.noise
            .measure_in_place(&mut host, ext, plan.fitter.as_ref())
    }

    /// Mark the slab interior's voxels above `level` (W in `a`) as NEW | DETECTED.
    fn clip(&mut self, s: &Slab, level: f64) -> Result<()> {
        self.clip_bits(s, level, NEW | DETECTED)
    }

    /// Add `bits` to the mask of the slab interior's voxels above `level` (W in `a`): NEW |
    /// DETECTED while halo planes must still see the mask as it was before the kernel, MASKED
    /// | DETECTED when the cube is resident in one piece (no promotion pass afterwards).
    fn clip_bits(&mut self, s: &Slab, level: f64, bits: u8) -> Result<()> {
        let start = s.lo * self.plane;
        let n = (s.z1 - s.z0) * self.plane;
        let inclusive = self.plan.inclusive as i32;
        let bits = bits as i32;
        // four voxels a step where the mask word and the W vector are aligned (the buffers
        // are; the slab interior starts `start` elements in)
        let vec = (start.is_multiple_of(4) && (start * std::mem::size_of::<T>()).is_multiple_of(16))
            as i32;
        let wv = self.a.slice(start..start + n);
        let mut mv = self.mask.slice_mut(start..start + n);
        let nn = n as i64;
        let mut b = self.gpu.stream.launch_builder(&self.fns.clip);
        b.arg(&wv)
            .arg(&mut mv)
            .arg(&nn)
            .arg(&level)
            .arg(&inclusive)
            .arg(&bits)
            .arg(&vec);
        // SAFETY: arguments match clip_* in kernels/scfind.cu; with `vec` the views start at
        // 16-byte (W) and 4-byte (mask) aligned addresses (device allocations are 256-byte
        // aligned).
        unsafe { b.launch(cfg(n.div_ceil(4))) }?;
        Ok(())
    }

    /// Copy the slab interior's mask planes back to the host with only the bits `keep` (the
    /// blank bit always cleared).
    fn store_mask(&mut self, mask: &mut [u8], s: &Slab, keep: u8) -> Result<()> {
        let f = self.gpu.function("scfind", "keep_bits")?;
        let start = s.lo * self.plane;
        let n = (s.z1 - s.z0) * self.plane;
        {
            let mut mv = self.mask.slice_mut(start..start + n);
            let nn = n as i64;
            let keep = (keep & !BLANK) as i32;
            let mut b = self.gpu.stream.launch_builder(&f);
            b.arg(&mut mv).arg(&nn).arg(&keep);
            // SAFETY: arguments match keep_bits in kernels/scfind.cu.
            unsafe { b.launch(cfg(n)) }?;
        }
        let host = &mut mask[s.z0 * self.plane..s.z1 * self.plane];
        if start == 0 {
            self.gpu.download(&self.mask, host)?;
        } else {
            let v = self.mask.slice(start..start + n);
            self.gpu.stream.memcpy_dtoh(&v, host)?;
            self.gpu.sync()?;
        }
        // The device copy no longer has blank bits: force a reload next time (of the mask as
        // it is now on the host).
        self.loaded = None;
        self.mask_clear = false;
        Ok(())
    }
}

/// An engine for one slab of `plan.shape` (no noise sample): the Dask stages.
fn stage_engine<'a, T: Real>(gpu: &'a Gpu, plan: &'a Plan) -> Result<Engine<'a, T>> {
    let [_, ny, nx] = plan.shape;
    let (plane, n) = (ny * nx, plan.len());
    let need = n * (3 * std::mem::size_of::<T>() + 1) + 2 * plane * std::mem::size_of::<T>();
    let free = gpu.budget()?;
    if need > free {
        return Err(Error::GpuMemory(format!(
            "a Dask block of {n} voxels needs {need} bytes of GPU memory, {free} are free: \
             use smaller chunks (chunk_bytes)"
        )));
    }
    // SAFETY (allocs): every buffer is written before it is read (uploads, prepare, filters).
    Ok(Engine {
        gpu,
        plan,
        fns: Fns::new::<T>(gpu, plan)?,
        plane,
        cube: unsafe { gpu.alloc::<T>(n)? },
        mask: unsafe { gpu.alloc::<u8>(n)? },
        a: unsafe { gpu.alloc::<T>(n)? },
        b: unsafe { gpu.alloc::<T>(n)? },
        samples: unsafe { gpu.alloc::<f64>(1)? },
        partial: unsafe { gpu.alloc::<f64>(2)? },
        carry: unsafe { gpu.alloc::<T>(plane.max(1))? },
        carry_next: unsafe { gpu.alloc::<T>(plane.max(1))? },
        carry_valid: false,
        loaded: None,
        mask_clear: false,
        tl: None,
    })
}

/// The whole of `plan.shape` as one slab.
fn whole(plan: &Plan) -> Slab {
    Slab {
        z0: 0,
        z1: plan.shape[0],
        lo: 0,
        hi: 0,
    }
}

/// Dask stage 1 on the GPU: the prepared cube (NaN → 0, `MASKED` voxels replaced) smoothed by
/// the spatial passes of `ker`, the values `run` holds on the device before the spectral pass
/// (whole (y, x) planes).
pub fn spatial_stage<T: Real>(
    cube: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
) -> Result<Vec<T>> {
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let spatial = Kernel {
        z: None,
        ..ker.clone()
    };
    let mut eng = stage_engine::<T>(&gpu, plan)?;
    let passes = KernelPasses::new(&gpu, &spatial, plan)?;
    let s = whole(plan);
    eng.load(cube, mask, &s)?;
    eng.smooth(&s, &passes, plan.replace, rms0)?;
    let mut out = crate::backend::alloc::try_vec(cube.len(), T::default(), "the spatial stage")?;
    gpu.download(&eng.a, &mut out)?;
    Ok(out)
}

/// A Dask block pass's W on the device: the block goes up once (with its mask) and every step
/// of `run` for it runs there. `Raw`: W is the loaded cube (`eng.cube`); otherwise `eng.a`.
#[allow(clippy::too_many_arguments)]
fn block_w_on<T: Real>(
    gpu: &Gpu,
    eng: &mut Engine<'_, T>,
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
    input: BlockInput,
) -> Result<()> {
    let s = whole(plan);
    match input {
        BlockInput::Raw => eng.load(x, mask, &s),
        BlockInput::Cube => {
            eng.load(x, mask, &s)?;
            let passes = KernelPasses::new(gpu, ker, plan)?;
            eng.smooth(&s, &passes, plan.replace, rms0)
        }
        BlockInput::Smoothed => {
            gpu.upload_into(x, &mut eng.a)?;
            gpu.upload_into(mask, &mut eng.mask)?;
            match &ker.z {
                Some(z) => {
                    let spectral = Kernel {
                        y: Vec::new(),
                        x: Vec::new(),
                        z: Some(z.clone()),
                        use_rms0: ker.use_rms0,
                    };
                    let passes = KernelPasses::new(gpu, &spectral, plan)?;
                    eng.smooth_prepared(&s, &passes)
                }
                None => Ok(()),
            }
        }
    }
}

/// The one driver of the Dask block passes on the GPU (`block_w`, `block_sample`,
/// `block_clip`): the block's W made resident (`block_w_on`), then `f` on it — `eng.cube`
/// for `Raw` input, else `eng.a`.
#[allow(clippy::too_many_arguments)]
fn block_pass<T: Real, R>(
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
    input: BlockInput,
    f: impl FnOnce(&Gpu, &mut Engine<'_, T>, bool) -> Result<R>,
) -> Result<R> {
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let mut eng = stage_engine::<T>(&gpu, plan)?;
    block_w_on(&gpu, &mut eng, x, mask, plan, ker, rms0, input)?;
    f(&gpu, &mut eng, input == BlockInput::Raw)
}

/// W down from the device (`w` from element `at` on, as many as `mask` has), NaN where
/// `mask` has `BLANK`.
fn download_w<T: Real>(gpu: &Gpu, w: &CudaSlice<T>, at: usize, mask: &[u8]) -> Result<Vec<T>> {
    let mut out = crate::backend::alloc::try_vec(mask.len(), T::default(), "the block's W")?;
    gpu.download_at_on(&gpu.stream, w, at, &mut out)?;
    out.par_iter_mut().zip(mask.par_iter()).for_each(|(v, &m)| {
        if m & BLANK != 0 {
            *v = T::from_f64(f64::NAN);
        }
    });
    Ok(out)
}

/// W of a Dask block on the GPU (`super::spectral_stage`, `keep` of `block_sample`): as `run`
/// computes it on the device, NaN where `mask` has `BLANK`.
pub fn block_w<T: Real>(
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
    input: BlockInput,
) -> Result<Vec<T>> {
    block_pass(x, mask, plan, ker, rms0, input, |gpu, eng, raw| {
        download_w(gpu, if raw { &eng.cube } else { &eng.a }, 0, mask)
    })
}

/// Dask block pass on the GPU (`super::block_sample`): W on the device as `run` computes it,
/// the block's sample positions `pos` gathered there and its (min, max) reduced there; only
/// those come back, and W itself if `keep`.
#[allow(clippy::too_many_arguments)]
pub fn block_sample<T: Real>(
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
    input: BlockInput,
    pos: &[usize],
    want_ext: bool,
    keep: bool,
) -> Result<SampleParts<T>> {
    block_pass(x, mask, plan, ker, rms0, input, |gpu, eng, raw| {
        let w = if raw { &eng.cube } else { &eng.a };
        sample_parts(gpu, &eng.fns, w, &eng.mask, 0, mask, pos, want_ext, keep)
    })
}

/// A block's sample part from its W on the device: `w` and `dmask` (the block's mask there)
/// from element `at` on, as many as `mask` (the block's mask on the host) has; the block's
/// positions `pos` gathered there and its (min, max) reduced there; only those come back, and
/// W itself if `keep`.
#[allow(clippy::too_many_arguments)]
fn sample_parts<T: Real>(
    gpu: &Gpu,
    fns: &Fns,
    w: &CudaSlice<T>,
    dmask: &CudaSlice<u8>,
    at: usize,
    mask: &[u8],
    pos: &[usize],
    want_ext: bool,
    keep: bool,
) -> Result<SampleParts<T>> {
    let mut values = vec![0.0f64; pos.len()];
    if !pos.is_empty() {
        let idx: Vec<i64> = pos.iter().map(|&p| (p + at) as i64).collect();
        let didx = gpu.upload(&idx)?;
        // SAFETY: fully written by gather_at below.
        let mut dout = unsafe { gpu.alloc::<f64>(pos.len())? };
        let n = pos.len() as i64;
        let mut b = gpu.stream.launch_builder(&fns.gather_at);
        b.arg(w).arg(dmask).arg(&didx).arg(&mut dout).arg(&n);
        // SAFETY: arguments match gather_at_* in kernels/scfind.cu; every index < at + the
        // block's length <= the buffers' lengths.
        unsafe { b.launch(cfg(pos.len())) }?;
        gpu.download(&dout, &mut values)?;
    }
    let mut ext = None;
    if want_ext {
        let n = mask.len();
        let c = cfg(n);
        let blocks = c.grid_dim.0 as usize;
        // SAFETY: every entry of the first 2·blocks is written by minmax.
        let mut partial = unsafe { gpu.alloc::<f64>(2 * blocks)? };
        let nn = n as i64;
        let (wv, mv) = (w.slice(at..at + n), dmask.slice(at..at + n));
        let mut b = gpu.stream.launch_builder(&fns.minmax);
        b.arg(&wv).arg(&mv).arg(&nn).arg(&mut partial);
        // SAFETY: arguments match minmax_*; `partial` holds 2·blocks values and blockDim
        // is THREADS = 256 (the kernel's shared arrays).
        unsafe { b.launch(c) }?;
        let mut host = vec![0.0f64; 2 * blocks];
        gpu.download(&partial, &mut host)?;
        for p in host.chunks(2) {
            if p[0] <= p[1] {
                ext = merge_extremes(ext, Some((p[0], p[1])));
            }
        }
    }
    let kept = if keep {
        Some(download_w(gpu, w, at, mask)?)
    } else {
        None
    };
    Ok((values, ext, kept))
}

/// Dask z-slab pass on the GPU (`super::slab_sample`, checked there): `s` (the spatial
/// stage's planes of the slab and its halo, `below` of them under the slab) goes up once, the
/// slab's mask beside its own planes and `carry` (the running mean over the slab, if any) into
/// the engine's carry; the spectral running mean of radius `r` runs over the slab's planes
/// from the top down as `run` runs it slab by slab (`smooth_exact`'s carried pass, one launch
/// of `sofia2_boxcars`, planes outside `s` read as 0); then the block's sample part as
/// `block_sample` takes it, and the mean at the slab's lowest plane (the next carry) comes
/// down.
#[allow(clippy::too_many_arguments)]
pub fn slab_sample<T: Real>(
    s: &[T],
    mask: &[u8],
    plan: &Plan,
    r: usize,
    below: usize,
    carry: Option<&[T]>,
    pos: &[usize],
    want_ext: bool,
    keep: bool,
) -> Result<(SampleParts<T>, Vec<T>)> {
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let [nz, ny, nx] = plan.shape;
    let plane = ny * nx;
    let planes = s.len() / plane;
    // the engine's buffers hold the slab with its halo
    let halo = Plan {
        shape: [planes, ny, nx],
        ..plan.clone()
    };
    let mut eng = stage_engine::<T>(&gpu, &halo)?;
    let at = below * plane;
    gpu.upload_into(s, &mut eng.a)?;
    gpu.upload_at_on(&gpu.stream, mask, &mut eng.mask, at)?;
    if let Some(c) = carry {
        gpu.upload_into(c, &mut eng.carry)?;
    }
    let view = AxisView {
        outer: 1,
        n: planes,
        inner: plane,
    };
    eng.boxcars(view, &[r], below + nz - 1, below, carry.is_some(), true)?;
    let parts = sample_parts(
        &gpu, &eng.fns, &eng.a, &eng.mask, at, mask, pos, want_ext, keep,
    )?;
    let mut next = vec![T::default(); plane];
    gpu.download(&eng.carry, &mut next)?;
    Ok((parts, next))
}

/// Dask block pass on the GPU (`super::block_clip`): W and the clip on the device, the mask
/// down once; `MASKED` added where the device marked the voxel `NEW`. `Raw`: the block is W
/// (kept by `block_sample`), clipped as it is.
pub fn block_clip<T: Real>(
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
    input: BlockInput,
    level: f64,
) -> Result<Vec<u8>> {
    // a given W goes up as the spatial stage's output of a kernel with no spectral pass: into
    // `eng.a`, unprepared, where the clip reads it
    let bare = Kernel {
        y: Vec::new(),
        x: Vec::new(),
        z: None,
        use_rms0: ker.use_rms0,
    };
    let (ker, input) = match input {
        BlockInput::Raw => (&bare, BlockInput::Smoothed),
        other => (ker, other),
    };
    block_pass(x, mask, plan, ker, rms0, input, |gpu, eng, _| {
        eng.clip(&whole(plan), level)?;
        let mut out = crate::backend::alloc::try_vec(mask.len(), 0u8, "the clipped mask")?;
        gpu.download(&eng.mask, &mut out)?;
        out.par_iter_mut().zip(mask.par_iter()).for_each(|(d, &m)| {
            *d = m | if *d & NEW != 0 { MASKED } else { 0 };
        });
        Ok(out)
    })
}

/// Sample slots whose positions lie in planes [z0, z1) (a contiguous range for both rules).
fn slot_range(s: Sampling, shape: [usize; 3], z0: usize, z1: usize) -> (usize, usize) {
    let plane = shape[1] * shape[2];
    match s {
        Sampling::Cadence(c) => {
            let c = c.max(1);
            ((z0 * plane).div_ceil(c), (z1 * plane).div_ceil(c))
        }
        Sampling::Stride(st) => {
            let st = st.max(1);
            let per = shape[1].div_ceil(st) * shape[2].div_ceil(st);
            (z0.div_ceil(st) * per, z1.div_ceil(st) * per)
        }
        Sampling::Backward(c) => {
            // slot k is index size − (k+1)c: inside [z0·plane, z1·plane) for
            // (size − z1·plane)/c <= k < (size − z0·plane)/c
            let c = c.max(1);
            let size = shape[0] * plane;
            ((size - z1 * plane) / c, (size - z0 * plane) / c)
        }
    }
}

/// A kernel's passes with their weights on the device.
struct KernelPasses {
    y: Vec<DevicePass>,
    x: Vec<DevicePass>,
    z: Vec<DevicePass>,
    /// SoFiA-2 arithmetic: radii of the x and of the y boxcars.
    exact_xy: Option<(Vec<usize>, Vec<usize>)>,
    /// SoFiA-2 arithmetic: radius of the spectral boxcar.
    exact_z: Option<usize>,
}

impl KernelPasses {
    fn new(gpu: &Gpu, ker: &Kernel, plan: &Plan) -> Result<Self> {
        let dp = |f: &crate::cube::filters::Filter1d, axis: usize| {
            DevicePass::new(
                gpu,
                &Pass {
                    filter: f.clone(),
                    axis,
                    mode: plan.mode,
                    cval: 0.0,
                },
            )
        };
        let radii = |v: &[crate::cube::filters::Filter1d]| v.iter().map(|f| f.taps() / 2).collect();
        let exact_xy = super::exact_spatial(ker, plan).then(|| (radii(&ker.x), radii(&ker.y)));
        let exact_z = ker
            .z
            .as_ref()
            .filter(|f| super::exact_spectral(f, plan))
            .map(|f| f.taps() / 2);
        Ok(KernelPasses {
            exact_xy,
            exact_z,
            y: ker.y.iter().map(|f| dp(f, 1)).collect::<Result<_>>()?,
            x: ker.x.iter().map(|f| dp(f, 2)).collect::<Result<_>>()?,
            z: ker.z.iter().map(|f| dp(f, 0)).collect::<Result<_>>()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxcar_groups_fill_launches_and_rings() {
        let g = |r: &[usize], fed: bool, slots: usize| {
            boxcar_groups(r, fed, slots)
                .iter()
                .map(|g| g.len())
                .collect::<Vec<_>>()
        };
        assert_eq!(g(&[1, 1, 1], false, 16), [3]);
        assert_eq!(g(&[2; 6], false, 16), [4, 2]); // passes 2..4: 3 rings of 5 slots
        assert_eq!(g(&[3; 5], false, 16), [3, 2]); // 2 rings of 7
        assert_eq!(g(&[9, 1, 1], false, 16), [3]); // the first pass reads the array: no ring
        assert_eq!(g(&[1, 8, 2], false, 16), [1, 2]); // a ring of 17 does not fit
        assert_eq!(g(&[], false, 16), Vec::<usize>::new());
        // every pass ring-fed (sofia2_boxcar_rows)
        assert_eq!(g(&[2; 6], true, 32), [4, 2]); // 4 rings of 5
        assert_eq!(g(&[4; 6], true, 32), [3, 3]); // 3 rings of 9
        assert_eq!(g(&[4; 6], true, 16), [1; 6]);
        assert_eq!(g(&[1, 6, 1], true, 16), [2, 1]); // 3 + 13, then 16 + 3 > 16
    }

    #[test]
    fn slot_ranges_partition_the_sample() {
        let shape = [10, 7, 9];
        for s in [
            Sampling::Cadence(5),
            Sampling::Stride(3),
            Sampling::Cadence(1),
            Sampling::Backward(4),
            Sampling::Backward(1),
            Sampling::Backward(5),
        ] {
            // slabs bottom up; a backward sample's slots then run top down
            let mut ranges: Vec<(usize, usize)> = Vec::new();
            for (z0, z1) in [(0, 3), (3, 4), (4, 9), (9, 10)] {
                let (a, b) = slot_range(s, shape, z0, z1);
                for k in a..b {
                    let z = s.index(shape, k) / 63;
                    assert!(z0 <= z && z < z1, "{s:?}");
                }
                ranges.push((a, b));
            }
            ranges.sort();
            let mut next = 0;
            for (a, b) in ranges {
                assert_eq!(a, next, "{s:?}");
                next = b;
            }
            assert_eq!(next, s.len(shape), "{s:?}");
        }
    }
}
