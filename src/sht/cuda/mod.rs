//! CUDA engine for the SHTs (`kernels/sht.cu`): the same scaled float64 recurrence as the CPU
//! engine, with the Legendre and ring-FFT stages back to back on the device.
//!
//! Per call: one upload of the inputs, one download of the outputs. Rings are processed in
//! chunks of pairs (so that nside 8192, lmax 16384 fits: only the per-chunk ring coefficients
//! scale with the chunk, the maps and alm stay resident). Per chunk, synthesis runs
//! `leg_synth_*` (alm -> F_m per ring), `fold` (F_m -> half spectrum with aliasing and the
//! phase shift), ring FFTs (one batched cuFFT Z2D for the equatorial rings, the shared
//! Bluestein transform `backend::cuda::ring_fft` for all polar rings), `scatter` (rows -> map);
//! analysis runs `gather`, the forward ring FFTs, `unfold`
//! (weights, phase shift) and `leg_anal_*` (adds into the alm). map2alm's Jacobi iterations
//! run entirely on the device.
//!
//! - `mod.rs` (this file): the chunked synthesis and analysis, the entry points.
//! - `io`: the host transfers of a chunk overlapped with its kernels (uses only this file's
//!   kernel module name; nothing here is used by it otherwise).

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use realfft::num_complex::Complex64 as C64;

mod io;

use crate::backend::cuda::fft::{FftKey, FftKind};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::ring_fft::{RingFft, RingJob};
use crate::backend::cuda::transfer::prefault;
use crate::backend::cuda::{self, CudaSlice, Gpu, LaunchConfig, PushKernelArg};
use crate::error::{Error, Result};
use crate::real::Real;
use crate::sht::{Job, Plan};
use io::{ChunkIo, MapDownload, MapUpload, Resident};

pub(super) const MODULE: &str = "sht";
const TPB_SYN: u32 = 128;
/// Must equal ANAL_TPB in kernels/sht.cu (its shared-memory columns are sized by it).
const TPB_ANA: u32 = 128;
const TPB_MISC: u32 = 256;
/// Most device memory the per-chunk work buffers may take.
const WORK_BUDGET: usize = 4 << 30;

/// Geometry and tables on the device.
struct Geo {
    pair_x: CudaSlice<f64>,
    pair_s: CudaSlice<f64>,
    nphi: CudaSlice<i32>,
    first: CudaSlice<i64>,
    shift: CudaSlice<i32>,
    w: CudaSlice<f64>,
    norms: CudaSlice<f64>,
    lnfact: CudaSlice<f64>,
}

fn geo(gpu: &Gpu, plan: &Plan) -> Result<Geo> {
    let px: Vec<f64> = plan.pairs.iter().map(|p| p.x).collect();
    let ps: Vec<f64> = plan.pairs.iter().map(|p| p.s).collect();
    let nphi: Vec<i32> = plan.rings.iter().map(|r| r.nphi as i32).collect();
    let first: Vec<i64> = plan.rings.iter().map(|r| r.first as i64).collect();
    let shift: Vec<i32> = plan.rings.iter().map(|r| (r.phi0 != 0.0) as i32).collect();
    Ok(Geo {
        pair_x: gpu.upload_small(&px)?,
        pair_s: gpu.upload_small(&ps)?,
        nphi: gpu.upload_small(&nphi)?,
        first: gpu.upload_small(&first)?,
        shift: gpu.upload_small(&shift)?,
        w: gpu.upload_small(&plan.weights)?,
        norms: gpu.upload_small(&plan.norms)?,
        lnfact: gpu.upload_small(&plan.ln_fact)?,
    })
}

/// What every stage of one call reads: the GPU, the plan and its tables on the device.
struct Ctx<'a> {
    gpu: &'a Gpu,
    plan: &'a Plan,
    g: Geo,
}

/// Up to three components handled by one launch: spin 0 only, or T + (E, B) with spin 2.
#[derive(Debug, Clone)]
struct Group {
    comps: Vec<usize>,
    pol: bool,
}

impl Group {
    fn synth_kernel(&self) -> &'static str {
        match (self.pol, self.comps.len()) {
            (true, _) => "leg_synth_pol",
            (false, 1) => "leg_synth_s1",
            (false, 2) => "leg_synth_s2",
            _ => "leg_synth_s3",
        }
    }
    /// Ring pairs per thread of the synthesis kernel (R in kernels/sht.cu's SYNTH_ENTRY).
    fn synth_rings(&self) -> u32 {
        if !self.pol && self.comps.len() == 1 {
            4
        } else {
            2
        }
    }
    fn anal_kernel(&self) -> &'static str {
        match (self.pol, self.comps.len()) {
            (true, _) => "leg_anal_pol",
            (false, 1) => "leg_anal_s1",
            (false, 2) => "leg_anal_s2",
            _ => "leg_anal_s3",
        }
    }
}

fn groups(jobs: &[Job], ncomp: usize) -> Vec<Group> {
    if jobs.iter().any(|j| matches!(j, Job::Spin2(..))) {
        return vec![Group {
            comps: vec![0, 1, 2],
            pol: true,
        }];
    }
    (0..ncomp)
        .collect::<Vec<_>>()
        .chunks(3)
        .map(|c| Group {
            comps: c.to_vec(),
            pol: false,
        })
        .collect()
}

/// Per-chunk scratch on the device.
struct Work {
    np_max: usize,
    phase: CudaSlice<f64>,
    spec: CudaSlice<f64>,
    rows: CudaSlice<f64>,
    /// Stand-ins for unused component pointers (never accessed by the kernels).
    dummy1: CudaSlice<f64>,
    dummy2: CudaSlice<f64>,
    /// Polar ring transforms per (first pair, pairs, components) of a chunk.
    polar: HashMap<(usize, usize, usize), RingFft>,
}

/// Work buffers for groups of up to `planes` components.
/// Chunks a call is cut into at least when its transfers overlap the kernels (more chunks hide
/// more of the PCIe time; fewer keep the Legendre launches wide).
const OVERLAP_CHUNKS: usize = 4;
/// Below this many pixels per map a call is not worth cutting for overlap.
const OVERLAP_MIN_NPIX: usize = 1 << 22;

/// Order the copy stream after the allocations just made on the compute stream (stream-ordered
/// memory may be reused from work still queued there).
fn fence_copy_stream(gpu: &Gpu) -> Result<()> {
    let ev = gpu.event()?;
    ev.record(&gpu.stream)?;
    gpu.copy.wait(&ev)?;
    Ok(())
}

/// Work buffers for groups of up to `planes` components; `overlap`: cut the call into at
/// least OVERLAP_CHUNKS chunks so that transfers can overlap the kernels.
fn work(gpu: &Gpu, plan: &Plan, planes: usize, overlap: bool) -> Result<Work> {
    let ns = plan.nside;
    let h = 2 * ns + 1;
    let per_pair = planes * 2 * 8 * (2 * (plan.lay.mmax + 1) + 2 * h + 4 * ns);
    let (free, _) = gpu.mem_info()?;
    let budget = WORK_BUDGET.min(free / 3).max(per_pair);
    let mut np_max = budget / per_pair;
    if overlap && plan.npix >= OVERLAP_MIN_NPIX {
        np_max = np_max.min(plan.pairs.len().div_ceil(OVERLAP_CHUNKS));
    }
    let np_max = super::forced_chunk_pairs()
        .unwrap_or(np_max)
        .clamp(1, 16384)
        .min(plan.pairs.len());
    let nrow = 2 * np_max;
    Ok(Work {
        np_max,
        phase: gpu.alloc_zeros::<f64>(planes * nrow * (plan.lay.mmax + 1) * 2)?,
        spec: gpu.alloc_zeros::<f64>(planes * nrow * h * 2)?,
        rows: gpu.alloc_zeros::<f64>(planes * nrow * 4 * ns)?,
        dummy1: gpu.alloc_zeros::<f64>(1)?,
        dummy2: gpu.alloc_zeros::<f64>(1)?,
        polar: HashMap::new(),
    })
}

fn cfg(grid: (u32, u32, u32), block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: grid,
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn blocks(n: usize, per: u32) -> u32 {
    n.div_ceil(per as usize).max(1) as u32
}

/// (first, count) of the chunks of ring pairs.
fn chunk_list(plan: &Plan, np_max: usize) -> Vec<(usize, usize)> {
    let n = plan.pairs.len();
    (0..n)
        .step_by(np_max)
        .map(|p0| (p0, np_max.min(n - p0)))
        .collect()
}

/// Ring FFTs of one chunk for all `nc` components of a group: spectra -> rows (inverse) or
/// rows -> spectra (forward). Rows are laid out [row][component]: all equatorial rings of the
/// chunk are one batched real cuFFT call; the polar rings (a different length per pair) go
/// through the shared Bluestein ring transform, north and south rows of a pair as one job.
fn ring_ffts(
    gpu: &Gpu,
    plan: &Plan,
    w: &mut Work,
    p0: usize,
    np: usize,
    nc: usize,
    forward: bool,
) -> Result<()> {
    let ns = plan.nside;
    let h = 2 * ns + 1;
    let wlen = 4 * ns;
    let polar_end = (p0 + np).min(ns - 1);
    if p0 < polar_end {
        let key = (p0, np, nc);
        let rf = match w.polar.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let jobs: Vec<RingJob> = (p0..polar_end)
                    .flat_map(|p| {
                        let r = 2 * (p - p0) * nc;
                        (0..nc).map(move |c| RingJob {
                            n: 4 * (p + 1),
                            a: r + c,
                            b: Some(r + nc + c),
                        })
                    })
                    .collect();
                e.insert(RingFft::new(gpu, &jobs)?)
            }
        };
        if forward {
            rf.forward(gpu, &w.rows, wlen, &mut w.spec, h)?;
        } else {
            rf.inverse(gpu, &w.spec, h, &mut w.rows, wlen)?;
        }
    }
    let eq_first = (ns - 1).max(p0);
    if eq_first < p0 + np {
        let rows = 2 * (p0 + np - eq_first);
        let r = 2 * (eq_first - p0) * nc;
        let batch = rows * nc;
        if forward {
            let key = FftKey {
                n: wlen,
                batch,
                idist: wlen,
                odist: h,
                kind: FftKind::D2Z,
            };
            let pl = gpu.fft_plan(key)?;
            gpu.fft_d2z(&pl, &w.rows, r * wlen, &mut w.spec, r * h)?;
        } else {
            let key = FftKey {
                n: wlen,
                batch,
                idist: h,
                odist: wlen,
                kind: FftKind::Z2D,
            };
            let pl = gpu.fft_plan(key)?;
            gpu.fft_z2d(&pl, &mut w.spec, r * h, &mut w.rows, r * wlen)?;
        }
    }
    Ok(())
}

/// Synthesis of all components from device alm into device maps.
fn synth(
    cx: &Ctx,
    w: &mut Work,
    groups: &[Group],
    alms: &[CudaSlice<f64>],
    maps: &mut [CudaSlice<f64>],
    tl: &mut Timeline,
    io: &mut dyn ChunkIo,
) -> Result<()> {
    let (gpu, plan, g) = (cx.gpu, cx.plan, &cx.g);
    let ns = plan.nside as i64;
    let (lmax, mmax) = (plan.lay.lmax as i64, plan.lay.mmax as i64);
    let h = 2 * plan.nside + 1;
    for grp in groups {
        let nc = grp.comps.len();
        let a = |i: usize| &alms[grp.comps[i.min(nc - 1)]];
        for (p0, np) in chunk_list(plan, w.np_max) {
            let (p0i, npi) = (p0 as i64, np as i64);
            let nrow = 2 * np;
            let f = gpu.function(MODULE, grp.synth_kernel())?;
            let mut b = gpu.stream.launch_builder(&f);
            b.arg(a(0))
                .arg(a(1))
                .arg(a(2))
                .arg(&lmax)
                .arg(&mmax)
                .arg(&g.norms)
                .arg(&g.lnfact)
                .arg(&g.pair_x)
                .arg(&g.pair_s)
                .arg(&p0i)
                .arg(&npi)
                .arg(&mut w.phase);
            // SAFETY: argument list matches SYNTH_ENTRY in kernels/sht.cu; phase holds one plane per component
            // of 2·np_max rows × (mmax+1) complex.
            unsafe {
                b.launch(cfg(
                    (
                        blocks(np, TPB_SYN * grp.synth_rings()),
                        plan.lay.mmax as u32 + 1,
                        1,
                    ),
                    TPB_SYN,
                ))
            }?;
            tl.mark(gpu, "legendre")?;
            let f = gpu.function(MODULE, "fold")?;
            let mut b = gpu.stream.launch_builder(&f);
            b.arg(&w.phase)
                .arg(&mut w.spec)
                .arg(&mmax)
                .arg(&ns)
                .arg(&p0i)
                .arg(&npi)
                .arg(&g.nphi)
                .arg(&g.shift);
            // SAFETY: matches `fold`; spec holds a plane of 2·np_max rows × H complex per component.
            unsafe { b.launch(cfg((blocks(h, TPB_MISC), nrow as u32, nc as u32), TPB_MISC)) }?;
            tl.mark(gpu, "fold")?;
            ring_ffts(gpu, plan, w, p0, np, nc, false)?;
            tl.mark(gpu, "ring fft")?;
            let mut outs: Vec<&mut CudaSlice<f64>> = Vec::new();
            {
                let mut taken: Vec<Option<&mut CudaSlice<f64>>> =
                    maps.iter_mut().map(Some).collect();
                for &ci in &grp.comps {
                    outs.push(taken[ci].take().expect("distinct components"));
                }
            }
            let (m0, m1, m2) = match outs.len() {
                1 => (outs.pop().unwrap(), None, None),
                2 => {
                    let m1 = outs.pop().unwrap();
                    (outs.pop().unwrap(), Some(m1), None)
                }
                _ => {
                    let m2 = outs.pop().unwrap();
                    let m1 = outs.pop().unwrap();
                    (outs.pop().unwrap(), Some(m1), Some(m2))
                }
            };
            let f = gpu.function(MODULE, "scatter")?;
            let mut b = gpu.stream.launch_builder(&f);
            b.arg(&w.rows).arg(m0);
            match m1 {
                Some(m) => b.arg(m),
                None => b.arg(&mut w.dummy1),
            };
            match m2 {
                Some(m) => b.arg(m),
                None => b.arg(&mut w.dummy2),
            };
            b.arg(&ns).arg(&p0i).arg(&npi).arg(&g.nphi).arg(&g.first);
            // SAFETY: matches `scatter`; each ring's pixels lie inside its map.
            unsafe {
                b.launch(cfg(
                    (blocks(4 * plan.nside, TPB_MISC), nrow as u32, nc as u32),
                    TPB_MISC,
                ))
            }?;
            tl.mark(gpu, "scatter")?;
            io.after(gpu, plan, p0, np, maps)?;
        }
    }
    io.finish(gpu, plan, maps)
}

/// Analysis of all components from device maps into device alm (overwritten).
fn anal(
    cx: &Ctx,
    w: &mut Work,
    groups: &[Group],
    maps: &mut [CudaSlice<f64>],
    alms: &mut [CudaSlice<f64>],
    tl: &mut Timeline,
    io: &mut dyn ChunkIo,
) -> Result<()> {
    let (gpu, plan, g) = (cx.gpu, cx.plan, &cx.g);
    let ns = plan.nside as i64;
    let (lmax, mmax) = (plan.lay.lmax as i64, plan.lay.mmax as i64);
    for a in alms.iter_mut() {
        gpu.stream.memset_zeros(a)?;
    }
    for grp in groups {
        let nc = grp.comps.len();
        for (p0, np) in chunk_list(plan, w.np_max) {
            io.before(gpu, plan, p0, np, maps)?;
            tl.mark(gpu, "h2d")?;
            let m = |i: usize| &maps[grp.comps[i.min(nc - 1)]];
            let (p0i, npi) = (p0 as i64, np as i64);
            let nrow = 2 * np;
            let f = gpu.function(MODULE, "gather")?;
            let mut b = gpu.stream.launch_builder(&f);
            b.arg(m(0))
                .arg(m(1))
                .arg(m(2))
                .arg(&mut w.rows)
                .arg(&ns)
                .arg(&p0i)
                .arg(&npi)
                .arg(&g.nphi)
                .arg(&g.first);
            // SAFETY: matches `gather`; rows holds a plane of 2·np_max × 4·nside values per component.
            unsafe {
                b.launch(cfg(
                    (blocks(4 * plan.nside, TPB_MISC), nrow as u32, nc as u32),
                    TPB_MISC,
                ))
            }?;
            tl.mark(gpu, "gather")?;
            ring_ffts(gpu, plan, w, p0, np, nc, true)?;
            tl.mark(gpu, "ring fft")?;
            let f = gpu.function(MODULE, "unfold")?;
            let mut b = gpu.stream.launch_builder(&f);
            b.arg(&w.spec)
                .arg(&mut w.phase)
                .arg(&mmax)
                .arg(&ns)
                .arg(&p0i)
                .arg(&npi)
                .arg(&g.nphi)
                .arg(&g.shift)
                .arg(&g.w);
            // SAFETY: matches `unfold`.
            unsafe {
                b.launch(cfg(
                    (blocks(plan.lay.mmax + 1, TPB_MISC), nrow as u32, nc as u32),
                    TPB_MISC,
                ))
            }?;
            tl.mark(gpu, "unfold")?;
            let mut outs: Vec<&mut CudaSlice<f64>> = Vec::new();
            {
                let mut taken: Vec<Option<&mut CudaSlice<f64>>> =
                    alms.iter_mut().map(Some).collect();
                for &ci in &grp.comps {
                    outs.push(taken[ci].take().expect("distinct components"));
                }
            }
            let mut it = outs.into_iter();
            let a0 = it.next().expect("one component");
            let a1 = it.next();
            let a2 = it.next();
            let f = gpu.function(MODULE, grp.anal_kernel())?;
            let mut b = gpu.stream.launch_builder(&f);
            b.arg(&w.phase).arg(a0);
            match a1 {
                Some(a) => b.arg(a),
                None => b.arg(&mut w.dummy1),
            };
            match a2 {
                Some(a) => b.arg(a),
                None => b.arg(&mut w.dummy2),
            };
            b.arg(&lmax)
                .arg(&mmax)
                .arg(&g.norms)
                .arg(&g.lnfact)
                .arg(&g.pair_x)
                .arg(&g.pair_s)
                .arg(&p0i)
                .arg(&npi);
            // SAFETY: matches ANAL_ENTRY; one block per m adds into its own alm column.
            unsafe { b.launch(cfg((plan.lay.mmax as u32 + 1, 1, 1), TPB_ANA)) }?;
            tl.mark(gpu, "legendre")?;
        }
    }
    Ok(())
}

fn as_f64(a: &[C64]) -> &[f64] {
    // SAFETY: Complex<f64> is repr(C) { re, im }.
    unsafe { std::slice::from_raw_parts(a.as_ptr() as *const f64, 2 * a.len()) }
}

fn as_f64_mut(a: &mut [C64]) -> &mut [f64] {
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts_mut(a.as_mut_ptr() as *mut f64, 2 * a.len()) }
}

fn check_sizes(plan: &Plan) -> Result<()> {
    if plan.lay.mmax + 1 > 65535 {
        return Err(Error::value("the CUDA SHT supports mmax < 65535"));
    }
    Ok(())
}

/// Synthesis on the GPU.
pub fn alm2map(plan: &Plan, jobs: &[Job], alms: &[&[C64]], maps: &mut [&mut [f64]]) -> Result<()> {
    check_sizes(plan)?;
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive();
    let mut tl = Timeline::start(&gpu)?;
    // SAFETY: filled by upload_into below.
    let mut d_alm: Vec<CudaSlice<f64>> = alms
        .iter()
        .map(|a| unsafe { gpu.alloc::<f64>(2 * a.len()) })
        .collect::<Result<_>>()?;
    tl.mark(&gpu, "alloc")?;
    for (a, d) in alms.iter().zip(d_alm.iter_mut()) {
        gpu.upload_into(as_f64(a), d)?;
    }
    tl.mark(&gpu, "h2d")?;
    let g = geo(&gpu, plan)?;
    let grps = groups(jobs, maps.len());
    let mut w = work(
        &gpu,
        plan,
        grps.iter().map(|g| g.comps.len()).max().unwrap_or(1),
        grps.len() == 1,
    )?;
    tl.mark(&gpu, "setup")?;
    // SAFETY: scatter writes every pixel of every ring.
    let mut d_map: Vec<CudaSlice<f64>> = maps
        .iter()
        .map(|_| unsafe { gpu.alloc::<f64>(plan.npix) })
        .collect::<Result<_>>()?;
    let cx = Ctx { gpu: &gpu, plan, g };
    if grps.len() == 1 {
        // each chunk's rings come down while the next chunk computes
        fence_copy_stream(&gpu)?;
        let mut io = MapDownload::new(maps);
        synth(&cx, &mut w, &grps, &d_alm, &mut d_map, &mut tl, &mut io)?;
    } else {
        synth(
            &cx,
            &mut w,
            &grps,
            &d_alm,
            &mut d_map,
            &mut tl,
            &mut Resident,
        )?;
        // the kernels are queued: map the output pages meanwhile
        crate::backend::threads::install(|| maps.iter_mut().for_each(|m| prefault(m)))?;
        for (d, h) in d_map.iter().zip(maps.iter_mut()) {
            gpu.download(d, h)?;
        }
    }
    tl.mark(&gpu, "d2h")?;
    tl.finish()?;
    gpu.sync()
}

/// Maps uploaded as they are (float32 or float64), converted to float64 with UNSEEN pixels
/// zeroed on the device.
fn upload_clean<T: Real>(gpu: &Gpu, m: &[T]) -> Result<CudaSlice<f64>> {
    let n = m.len() as i64;
    let grid = (blocks(m.len(), TPB_MISC).min(65535 * 16), 1, 1);
    if T::CUDA == "f64" {
        let mut d: CudaSlice<f64> = gpu.upload(as_f64_real(m))?;
        let f = gpu.function(MODULE, "clean_inplace_f64")?;
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&mut d).arg(&n);
        // SAFETY: matches `clean_inplace_f64`; d holds n values.
        unsafe { b.launch(cfg(grid, TPB_MISC)) }?;
        Ok(d)
    } else {
        let raw: CudaSlice<T> = gpu.upload(m)?;
        // SAFETY: the kernel writes all n values.
        let mut d = unsafe { gpu.alloc::<f64>(m.len()) }?;
        let f = gpu.function(MODULE, "clean_f32")?;
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&raw).arg(&mut d).arg(&n);
        // SAFETY: matches `clean_f32`; raw and d hold n values.
        unsafe { b.launch(cfg(grid, TPB_MISC)) }?;
        Ok(d)
    }
}

fn as_f64_real<T: Real>(m: &[T]) -> &[f64] {
    assert_eq!(T::CUDA, "f64");
    // SAFETY: T is f64 (checked above).
    unsafe { std::slice::from_raw_parts(m.as_ptr() as *const f64, m.len()) }
}

/// Analysis with `iter` Jacobi iterations on the GPU.
pub fn map2alm<T: Real>(
    plan: &Plan,
    jobs: &[Job],
    maps: &[&[T]],
    iter: usize,
    alms: &mut [&mut [C64]],
) -> Result<()> {
    check_sizes(plan)?;
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive();
    let mut tl = Timeline::start(&gpu)?;
    let grps = groups(jobs, maps.len());
    // one group: each chunk's rings go up just before its kernels, overlapping the previous
    // chunk's; otherwise the maps go up first
    let overlap = grps.len() == 1;
    let mut d_map: Vec<CudaSlice<f64>> = if overlap {
        // SAFETY: every chunk's pixels are uploaded before its kernels read them.
        maps.iter()
            .map(|_| unsafe { gpu.alloc::<f64>(plan.npix) })
            .collect::<Result<_>>()?
    } else {
        maps.iter()
            .map(|m| upload_clean(&gpu, m))
            .collect::<Result<_>>()?
    };
    tl.mark(&gpu, "h2d")?;
    let g = geo(&gpu, plan)?;
    let mut w = work(
        &gpu,
        plan,
        grps.iter().map(|g| g.comps.len()).max().unwrap_or(1),
        grps.len() == 1,
    )?;
    let nalm2 = 2 * plan.lay.size();
    let mut d_alm: Vec<CudaSlice<f64>> = maps
        .iter()
        .map(|_| gpu.alloc_zeros::<f64>(nalm2))
        .collect::<Result<_>>()?;
    tl.mark(&gpu, "setup")?;
    let cx = Ctx { gpu: &gpu, plan, g };
    if overlap {
        let mut io = MapUpload::new(&gpu, plan, maps)?;
        fence_copy_stream(&gpu)?;
        anal(&cx, &mut w, &grps, &mut d_map, &mut d_alm, &mut tl, &mut io)?;
    } else {
        anal(
            &cx,
            &mut w,
            &grps,
            &mut d_map,
            &mut d_alm,
            &mut tl,
            &mut Resident,
        )?;
    }
    if iter > 0 {
        let mut resid: Vec<CudaSlice<f64>> = maps
            .iter()
            .map(|_| gpu.alloc_zeros::<f64>(plan.npix))
            .collect::<Result<_>>()?;
        let mut delta: Vec<CudaSlice<f64>> = maps
            .iter()
            .map(|_| gpu.alloc_zeros::<f64>(nalm2))
            .collect::<Result<_>>()?;
        let sub = gpu.function(MODULE, "sub_f64")?;
        let add = gpu.function(MODULE, "add_f64")?;
        for _ in 0..iter {
            synth(
                &cx,
                &mut w,
                &grps,
                &d_alm,
                &mut resid,
                &mut tl,
                &mut Resident,
            )?;
            let n = plan.npix as i64;
            for (m, r) in d_map.iter().zip(resid.iter_mut()) {
                let mut b = gpu.stream.launch_builder(&sub);
                b.arg(m).arg(r).arg(&n);
                // SAFETY: both hold npix values.
                unsafe {
                    b.launch(cfg(
                        (blocks(plan.npix, TPB_MISC).min(65535 * 16), 1, 1),
                        TPB_MISC,
                    ))
                }?;
            }
            anal(
                &cx,
                &mut w,
                &grps,
                &mut resid,
                &mut delta,
                &mut tl,
                &mut Resident,
            )?;
            let n = nalm2 as i64;
            for (d, a) in delta.iter().zip(d_alm.iter_mut()) {
                let mut b = gpu.stream.launch_builder(&add);
                b.arg(d).arg(a).arg(&n);
                // SAFETY: both hold 2·nalm values.
                unsafe {
                    b.launch(cfg(
                        (blocks(nalm2, TPB_MISC).min(65535 * 16), 1, 1),
                        TPB_MISC,
                    ))
                }?;
            }
        }
    }
    tl.mark(&gpu, "jacobi")?;
    crate::backend::threads::install(|| alms.iter_mut().for_each(|a| prefault(as_f64_mut(a))))?;
    for (d, h) in d_alm.iter().zip(alms.iter_mut()) {
        gpu.download(d, as_f64_mut(h))?;
    }
    tl.mark(&gpu, "d2h")?;
    tl.finish()?;
    gpu.sync()
}
