//! CUDA engine: the data and all working arrays stay on the device for every iteration; only
//! per-unit statistics (a few numbers per unit) and the result cross the bus.
//!
//! Memory: five arrays of the data's size (input, output, smooth c, two work arrays) plus a
//! few f64 per unit, and when the budget leaves room, up to one more per thresholded scale of
//! an iteration: each scale's wavelet plane is kept and its add deferred to the iteration's
//! finish, which adds them all in one pass (the output and each plane read once, not once a
//! scale; the same roundings in the same order, so the same bits). When that exceeds the backend's budget (`Gpu::budget`: 80 % of the free
//! memory, capped by `SKYCONV_GPU_MEMORY_LIMIT`), channel maps (dim 2) are processed in chunks of
//! whole maps, which are independent, so no halo is needed; for dim 1 and dim 3 the call fails
//! with a `GpuMemoryError` stating how much memory is needed (use `device="cpu"`).

use super::{drive, median_of, middle_ranks, Buf, Engine, Outcome, Plan, Progress, Stat};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::transfer::prefault_apart;
use crate::backend::cuda::{
    self, grid_stride, CudaSlice, Gpu, LaunchConfig, PushKernelArg, THREADS,
};
use crate::cube::filters::{apply_device, apply_device_split, can_split, DevicePass, Split};
use crate::cube::stats::{count_device, select_ranks_device, Values};
use crate::error::{Error, Result};
use crate::real::Real;

/// Element-wise launches: grid-stride loops over at most this many blocks (several elements a
/// thread), about eight waves of the largest GPUs, instead of one short-lived block per 256
/// elements.
const MAX_BLOCKS: usize = 8192;
/// Arrays of the data's size held on the device.
const ARRAYS: usize = 5;
/// Threads that fault the output's pages in while the device iterates: one took longer than
/// the GPU work of a 256×512² cube (268 MB at ~3.5 GB/s: 77 ms against ~40), and the call
/// waited for it before its download.
const PREFAULT_THREADS: usize = 4;

struct Dev<'a, T: Real> {
    gpu: &'a Gpu,
    plan: &'a Plan,
    n: usize,
    input: CudaSlice<T>,
    out: CudaSlice<T>,
    c: CudaSlice<T>,
    s: CudaSlice<T>,
    w: CudaSlice<T>,
    passes: Vec<Vec<DevicePass>>,
    /// The planes whose add waits for the iteration's finish, in scale order, each with its
    /// thresholds (per unit), for the units `deferred_active` (see `add`).
    deferred: Vec<(CudaSlice<T>, Vec<f64>)>,
    deferred_active: Vec<bool>,
    /// Whether `w` is the last deferred plane (it moves to `deferred` when the next scale
    /// needs `w`, taking a spare in its place).
    w_deferred: Option<Vec<f64>>,
    /// Arrays of the data's size for the deferred planes (empty: every add runs at once).
    spare: Vec<CudaSlice<T>>,
}

fn elementwise(n: usize) -> LaunchConfig {
    grid_stride(n, MAX_BLOCKS)
}

fn per_unit(units: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (units as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn flags(active: &[bool]) -> Vec<i32> {
    active.iter().map(|&a| a as i32).collect()
}

impl<T: Real> Dev<'_, T> {
    fn kernel(&self, name: &str) -> Result<cuda::CudaFunction> {
        self.gpu
            .function("atrous", &format!("atrous_{name}_{}", T::CUDA))
    }

    /// Σx or Σ(x − center)² over the finite values of the whole of `data`: per-block partial
    /// sums on the device, added in block order here (deterministic).
    fn sum_all(&self, data: &CudaSlice<T>, sq: bool, center: f64) -> Result<f64> {
        let gpu = self.gpu;
        let f = self.kernel("partial")?;
        let blocks = self.n.div_ceil(THREADS as usize).clamp(1, 2048);
        let mut d_part = gpu.alloc_zeros::<f64>(blocks)?;
        let (n, mode) = (self.n as i64, if sq { 2i32 } else { 1 });
        let cfg = grid_stride(self.n, blocks);
        let mut l = gpu.stream.launch_builder(&f);
        l.arg(data).arg(&n).arg(&center).arg(&mode).arg(&mut d_part);
        // SAFETY: matches atrous_partial_* (256 threads); `partial` holds one entry per block.
        unsafe { l.launch(cfg) }?;
        let mut part = vec![0f64; blocks];
        gpu.download(&d_part, &mut part)?;
        Ok(part.iter().sum())
    }
}

impl<T: Real> Engine for Dev<'_, T> {
    fn stat(
        &mut self,
        buf: Buf,
        stat: Stat,
        arg: &[f64],
        center: &[f64],
        active: &[bool],
    ) -> Result<Vec<f64>> {
        let lay = &self.plan.layout;
        let data = match buf {
            Buf::Input => &self.input,
            Buf::Work => &self.w,
        };
        let gpu = self.gpu;
        if lay.units == 1 && matches!(stat, Stat::Count | Stat::Median { .. }) {
            // One big unit: the statistics module's selection over the whole array.
            if !active[0] {
                return Ok(vec![f64::NAN]);
            }
            let v = match stat {
                Stat::Count => count_device(gpu, data, self.n, Values::FINITE)? as f64,
                Stat::Median { abs } => {
                    let vals = if abs {
                        Values::abs_about(center[0])
                    } else {
                        Values::FINITE
                    };
                    let n = arg[0] as usize;
                    let (k_lo, k_hi) = middle_ranks(n);
                    match select_ranks_device(gpu, data, self.n, [k_lo, k_hi], vals)? {
                        None => f64::NAN,
                        Some([lo, hi]) => median_of(n, lo, hi),
                    }
                }
                Stat::Sum { .. } => unreachable!(),
            };
            return Ok(vec![v]);
        }
        if lay.units == 1 {
            if let Stat::Sum { sq } = stat {
                if !active[0] {
                    return Ok(vec![f64::NAN]);
                }
                return Ok(vec![self.sum_all(data, sq, center[0])?]);
            }
        }
        let units = lay.units;
        let d_active = gpu.upload_small(&flags(active))?;
        let d_center = gpu.upload_small(center)?;
        let mut d_result = gpu.alloc_zeros::<f64>(units)?;
        let (len, us, es) = (
            lay.len as i64,
            lay.unit_stride as i64,
            lay.elem_stride as i64,
        );
        match stat {
            Stat::Median { abs } => {
                // The two middle values of every unit by exact radix selection, one launch each.
                let f = self.kernel("select")?;
                let abs = abs as i32;
                let ranks: Vec<(usize, usize)> =
                    arg.iter().map(|&n| middle_ranks(n as usize)).collect();
                let mut mid = [vec![0f64; units], vec![0f64; units]];
                for (which, host) in mid.iter_mut().enumerate() {
                    let k: Vec<f64> = ranks
                        .iter()
                        .map(|r| if which == 0 { r.0 } else { r.1 } as f64)
                        .collect();
                    let d_k = gpu.upload_small(&k)?;
                    let mut l = gpu.stream.launch_builder(&f);
                    l.arg(data)
                        .arg(&len)
                        .arg(&us)
                        .arg(&es)
                        .arg(&d_k)
                        .arg(&d_center)
                        .arg(&abs)
                        .arg(&d_active)
                        .arg(&mut d_result);
                    // SAFETY: matches atrous_select_* in kernels/atrous.cu; per-unit arrays
                    // hold `units` entries and every unit's elements lie inside `data`.
                    unsafe { l.launch(per_unit(units)) }?;
                    gpu.download(&d_result, host)?;
                }
                return Ok((0..units)
                    .map(|u| median_of(arg[u] as usize, mid[0][u], mid[1][u]))
                    .collect());
            }
            Stat::Count | Stat::Sum { .. } => {
                let f = self.kernel("sum")?;
                let mode: i32 = match stat {
                    Stat::Count => 0,
                    Stat::Sum { sq: false } => 1,
                    _ => 2,
                };
                let mut l = gpu.stream.launch_builder(&f);
                l.arg(data)
                    .arg(&len)
                    .arg(&us)
                    .arg(&es)
                    .arg(&d_center)
                    .arg(&mode)
                    .arg(&d_active)
                    .arg(&mut d_result);
                // SAFETY: as above, for atrous_sum_*.
                unsafe { l.launch(per_unit(units)) }?;
            }
        }
        let mut host = vec![0f64; units];
        gpu.download(&d_result, &mut host)?;
        Ok(host)
    }

    fn start(&mut self, blank: f64) -> Result<()> {
        let f = self.kernel("start")?;
        let n = self.n as i64;
        let mut l = self.gpu.stream.launch_builder(&f);
        l.arg(&self.input)
            .arg(&self.out)
            .arg(&mut self.c)
            .arg(&blank)
            .arg(&n);
        // SAFETY: matches atrous_start_*; all buffers hold n elements.
        unsafe { l.launch(elementwise(self.n)) }?;
        Ok(())
    }

    fn scale(&mut self, s: usize) -> Result<()> {
        self.free_w()?;
        let gpu = self.gpu;
        let views: Vec<_> = self.plan.passes[s - 1].iter().map(|(_, v)| *v).collect();
        let p = &self.passes[s - 1];
        let last = p.len() - 1;
        if last > 0 && can_split::<T>(views[last], &p[last]) {
            // The split fused into the last pass (c → s (→ w) → the wavelet plane, c updated in
            // place): the smoothed plane is never written nor read back. The last pass's input
            // is not c, which it updates.
            apply_device(gpu, &self.c, views[0], &p[0], &mut self.s)?;
            let mut split = Split {
                c: &mut self.c,
                data: &self.input,
            };
            if last == 1 {
                apply_device_split(gpu, &self.s, views[1], &p[1], &mut self.w, &mut split)?;
            } else {
                apply_device(gpu, &self.s, views[1], &p[1], &mut self.w)?;
                apply_device_split(gpu, &self.w, views[2], &p[2], &mut self.s, &mut split)?;
                std::mem::swap(&mut self.s, &mut self.w);
            }
            return Ok(());
        }
        match p.len() {
            1 => apply_device(gpu, &self.c, views[0], &p[0], &mut self.s)?,
            2 => {
                apply_device(gpu, &self.c, views[0], &p[0], &mut self.w)?;
                apply_device(gpu, &self.w, views[1], &p[1], &mut self.s)?;
            }
            _ => {
                apply_device(gpu, &self.c, views[0], &p[0], &mut self.s)?;
                apply_device(gpu, &self.s, views[1], &p[1], &mut self.w)?;
                apply_device(gpu, &self.w, views[2], &p[2], &mut self.s)?;
            }
        }
        let f = self.kernel("split")?;
        let n = self.n as i64;
        let mut l = gpu.stream.launch_builder(&f);
        l.arg(&self.input)
            .arg(&mut self.c)
            .arg(&self.s)
            .arg(&mut self.w)
            .arg(&n);
        // SAFETY: matches atrous_split_*; all buffers hold n elements.
        unsafe { l.launch(elementwise(self.n)) }?;
        Ok(())
    }

    fn add(&mut self, thr: &[f64], active: &[bool]) -> Result<()> {
        if self.w_deferred.is_some()
            || (!self.deferred.is_empty() && self.deferred_active != active)
        {
            self.flush()?; // not expected (one add a scale, one set of units an iteration)
        }
        // Deferred even with no spare: the next scale then adds it before writing w, and the
        // iteration's last plane is added by the finish.
        self.deferred_active = active.to_vec();
        self.w_deferred = Some(thr.to_vec());
        Ok(())
    }

    fn finish(&mut self, active: &[bool]) -> Result<()> {
        if (self.w_deferred.is_some() || !self.deferred.is_empty())
            && self.deferred_active != active
        {
            self.flush()?;
        }
        // The deferred planes, in scale order: the moved ones, then w.
        let mut ptrs: Vec<u64> = self
            .deferred
            .iter()
            .map(|(p, _)| self.gpu.dptr(p))
            .collect();
        let mut thr: Vec<f64> = self.deferred.iter().flat_map(|(_, t)| t.clone()).collect();
        if let Some(t) = self.w_deferred.take() {
            ptrs.push(self.gpu.dptr(&self.w));
            thr.extend(t);
        }
        let k = ptrs.len() as i32;
        ptrs.push(0); // never empty on the device
        thr.push(0.0);
        let lay = &self.plan.layout;
        let d_ptrs = self.gpu.upload_small(&ptrs)?;
        let d_thr = self.gpu.upload_small(&thr)?;
        let d_active = self.gpu.upload_small(&flags(active))?;
        let f = self.kernel("finish")?;
        let (n, div, units) = (self.n as i64, lay.unit_div as i64, lay.units as i64);
        let mut l = self.gpu.stream.launch_builder(&f);
        l.arg(&self.input)
            .arg(&self.c)
            .arg(&mut self.out)
            .arg(&mut self.w)
            .arg(&d_ptrs)
            .arg(&k)
            .arg(&d_thr)
            .arg(&d_active)
            .arg(&n)
            .arg(&div)
            .arg(&units);
        // SAFETY: matches atrous_finish_*; active holds `units` entries, thr k·units (+1), and
        // each of the k pointers is a live array of n elements (the deferred planes, or w,
        // which the kernel writes only after reading it).
        unsafe { l.launch(elementwise(self.n)) }?;
        let moved: Vec<_> = self.deferred.drain(..).map(|(p, _)| p).collect();
        self.spare.extend(moved);
        Ok(())
    }
}

impl<T: Real> Dev<'_, T> {
    /// out += plane (w when None) where the unit is active and |plane| > thr[unit], now.
    fn add_now(
        &mut self,
        plane: Option<&CudaSlice<T>>,
        thr: &[f64],
        active: &[bool],
    ) -> Result<()> {
        let lay = &self.plan.layout;
        let d_thr = self.gpu.upload_small(thr)?;
        let d_active = self.gpu.upload_small(&flags(active))?;
        let f = self.kernel("add")?;
        let (n, div, units) = (self.n as i64, lay.unit_div as i64, lay.units as i64);
        let mut l = self.gpu.stream.launch_builder(&f);
        l.arg(plane.unwrap_or(&self.w))
            .arg(&mut self.out)
            .arg(&d_thr)
            .arg(&d_active)
            .arg(&n)
            .arg(&div)
            .arg(&units);
        // SAFETY: matches atrous_add_*; thr and active hold `units` entries.
        unsafe { l.launch(elementwise(self.n)) }?;
        Ok(())
    }

    /// Every deferred add now, in scale order (the planes back to the spares).
    fn flush(&mut self) -> Result<()> {
        let active = std::mem::take(&mut self.deferred_active);
        for (plane, thr) in std::mem::take(&mut self.deferred) {
            self.add_now(Some(&plane), &thr, &active)?;
            self.spare.push(plane);
        }
        if let Some(thr) = self.w_deferred.take() {
            self.add_now(None, &thr, &active)?;
        }
        Ok(())
    }

    /// Before a scale writes w: a deferred w moves to `deferred`, a spare taking its place (or,
    /// with none left, every deferred add runs now).
    fn free_w(&mut self) -> Result<()> {
        let Some(thr) = self.w_deferred.take() else {
            return Ok(());
        };
        match self.spare.pop() {
            Some(buf) => {
                let plane = std::mem::replace(&mut self.w, buf);
                self.deferred.push((plane, thr));
                Ok(())
            }
            None => {
                self.w_deferred = Some(thr);
                self.flush()
            }
        }
    }
}

/// Device bytes one call needs for `n` elements of `T` in `units` units.
pub fn bytes_needed<T: Real>(n: usize, units: usize) -> usize {
    ARRAYS * n * std::mem::size_of::<T>() + 64 * units + (16 << 20)
}

fn gib(b: usize) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// Reconstruct with all arrays on the device (one chunk).
fn run_resident<T: Real>(
    gpu: &Gpu,
    input: &[T],
    plan: &Plan,
    spares: usize,
    out: &mut [T],
    progress: &mut dyn FnMut(Progress) -> Result<()>,
) -> Result<Outcome> {
    let n = input.len();
    let mut timeline = Timeline::start(gpu)?;
    let d_in = gpu.upload(input)?;
    timeline.mark(gpu, "h2d")?;
    let passes = plan
        .passes
        .iter()
        .map(|list| list.iter().map(|(p, _)| DevicePass::new(gpu, p)).collect())
        .collect::<Result<Vec<Vec<DevicePass>>>>()?;
    let mut e = Dev {
        gpu,
        plan,
        n,
        out: gpu.alloc_zeros::<T>(n)?,
        // SAFETY (c, s, w): `start` writes c, the passes write s and w, before any read.
        c: unsafe { gpu.alloc::<T>(n)? },
        s: unsafe { gpu.alloc::<T>(n)? },
        w: unsafe { gpu.alloc::<T>(n)? },
        input: d_in,
        passes,
        deferred: Vec::new(),
        deferred_active: Vec::new(),
        w_deferred: None,
        spare: (0..spares)
            // SAFETY: a spare is written by a scale's passes before any read.
            .map(|_| unsafe { gpu.alloc::<T>(n) })
            .collect::<Result<_>>()?,
    };
    // While the device iterates (the host mostly waits on it), a helper thread maps the
    // output's pages: the download then copies into resident pages instead of faulting them
    // in. The helper runs alone, not on the pool: this thread is one of the pool's workers and
    // blocks in `join`, so a job queued on a one-thread pool would never run.
    let (outcome, faulted) = std::thread::scope(|sc| {
        let pages = sc.spawn(|| prefault_apart(&mut *out, PREFAULT_THREADS));
        let outcome = drive(&mut e, plan, progress);
        (outcome, pages.join())
    });
    if let Err(panic) = faulted {
        std::panic::resume_unwind(panic);
    }
    let outcome = outcome?;
    let f = e.kernel("blank")?;
    let nn = n as i64;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&e.input).arg(&mut e.out).arg(&nn);
    // SAFETY: matches atrous_blank_*; both buffers hold n elements.
    unsafe { l.launch(elementwise(n)) }?;
    timeline.mark(gpu, "atrous")?;
    gpu.download(&e.out, out)?;
    timeline.mark(gpu, "d2h")?;
    timeline.finish()?;
    gpu.sync()?;
    Ok(outcome)
}

/// Reconstruct on the GPU within the backend's memory budget (80 % of the free memory, capped
/// by `SKYCONV_GPU_MEMORY_LIMIT`).
pub fn run<T: Real>(
    input: &[T],
    plan: &Plan,
    out: &mut [T],
    progress: &mut dyn FnMut(Progress) -> Result<()>,
) -> Result<Outcome> {
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let lay = &plan.layout;
    let free = gpu.budget()?;
    let need = bytes_needed::<T>(input.len(), lay.units);
    if need <= free {
        // Spares for the deferred adds: one fewer than the thresholded scales of an iteration
        // (the last plane stays in w), as many as the budget holds.
        let kept = (1..=plan.loop_scales).filter(|&s| plan.kept(s)).count();
        let plane = std::mem::size_of_val(input);
        let spares = kept.saturating_sub(1).min((free - need) / plane.max(1));
        return run_resident(&gpu, input, plan, spares, out, progress);
    }
    let per_map = bytes_needed::<T>(lay.len, 1);
    if lay.dim != 2 || lay.units < 2 || per_map > free {
        return Err(Error::GpuMemory(format!(
            "the à trous reconstruction of this {:?} {} array (dim={}) needs {:.2} GiB of GPU \
             memory ({} arrays of its size), but {:.2} GiB are available; use device=\"cpu\"{}",
            lay.shape,
            std::any::type_name::<T>(),
            lay.dim,
            gib(need),
            ARRAYS,
            gib(free),
            if lay.dim == 2 {
                ""
            } else {
                " (only dim=2 reconstructions are split into chunks of whole channel maps)"
            }
        )));
    }
    // dim 2: chunks of whole channel maps, each reconstructed independently.
    let map_bytes = bytes_needed::<T>(lay.len, 1) - bytes_needed::<T>(0, 0);
    let maps = (free.saturating_sub(bytes_needed::<T>(0, 0)) / map_bytes).max(1);
    let mut outcome = Outcome {
        scales: plan.scales,
        ..Outcome::default()
    };
    let mut first = 0;
    while first < lay.units {
        let count = maps.min(lay.units - first);
        let mut shape = lay.shape.clone();
        shape[0] = count;
        let sub = super::Plan::new(&shape, &plan.params)?;
        let (a, b) = (first * lay.len, (first + count) * lay.len);
        let part = run_resident(&gpu, &input[a..b], &sub, 0, &mut out[a..b], progress)?;
        outcome.iterations.extend(part.iterations);
        outcome.noise.extend(part.noise);
        outcome.input_noise.extend(part.input_noise);
        first += count;
    }
    Ok(outcome)
}
