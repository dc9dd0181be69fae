//! cuFFT plans for batched 1-D double-precision transforms (real D2Z / Z2D and complex Z2Z),
//! created once per process and shape and cached, plus execution on sub-ranges of device
//! buffers. Families ask for a plan with an `FftKey` and never name cuFFT themselves.
//!
//! Row sets whose count changes from call to call (the chunks of a transform) go through
//! `fft_*_rows`: their plans depend on the length only. Each length has a full batch
//! (`full_batch`: about `ROWS_BYTES` of complex rows, a power of two) and rows run as full
//! batches plus the binary digits of the remainder (e.g. 37 rows at a full batch of 16: 16,
//! 16, 4, 1), so a length needs at most log2(full batch) + 1 plans, shared by every chunk,
//! size and call, and no buffer is padded. The cache is bounded per GPU (`CACHE_BYTES` of
//! estimated plan work areas; least recently used plans not in use are destroyed beyond it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{DevicePtr, DevicePtrMut};

use super::fft_api::{self, Handle, CUFFT_D2Z, CUFFT_Z2D, CUFFT_Z2Z};
use super::toolkit;
use super::{CudaSlice, Gpu};
use crate::error::{Error, Result};

/// Which transform a plan computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FftKind {
    /// Real rows -> half spectra.
    D2Z,
    /// Half spectra -> real rows.
    Z2D,
    /// Complex -> complex (the direction is chosen at execution).
    Z2Z,
}

/// Shape of a batched transform. Distances are in elements of each side's type
/// (f64 for real data, complex double for spectra); elements are contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FftKey {
    /// Transform length (points).
    pub n: usize,
    pub batch: usize,
    /// Distance between consecutive inputs.
    pub idist: usize,
    /// Distance between consecutive outputs.
    pub odist: usize,
    pub kind: FftKind,
}

/// A cached plan (on the stream of the GPU it was made for).
pub struct FftPlan {
    pub key: FftKey,
    handle: Handle,
    api: &'static fft_api::Api,
}

impl Drop for FftPlan {
    fn drop(&mut self) {
        // SAFETY: the plan was created by cufftPlanMany and is not used afterwards.
        unsafe { (self.api.destroy)(self.handle) };
    }
}

/// Complex bytes one execution of a shared plan transforms at most (`full_batch`).
const ROWS_BYTES: usize = 32 << 20;
/// Largest full batch (a power of two).
const MAX_BATCH: usize = 1024;
/// Estimated work areas (16 B per complex point of a plan) of the cached plans of one GPU at
/// most; beyond it the least recently used plans not in use are destroyed.
const CACHE_BYTES: usize = 1 << 30;

/// A cached plan with its last use (a process-wide counter) and estimated bytes.
struct Cached {
    plan: Arc<FftPlan>,
    used: u64,
    bytes: usize,
}

/// (pid, use counter, plans by GPU ordinal and shape) of this process.
type PlanCache = (u32, u64, HashMap<(u32, FftKey), Cached>);

static PLANS: Mutex<Option<PlanCache>> = Mutex::new(None);

fn check(what: &str, r: i32) -> Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(Error::Cuda(format!("cuFFT {what} failed: cufftResult {r}")))
    }
}

/// Whether a cuFFT was found.
pub fn present() -> bool {
    toolkit::cufft().is_ok()
}

/// Rows of length `n` per execution of the shared plan (a power of two, 1..=MAX_BATCH).
pub fn full_batch(n: usize) -> usize {
    let b = (ROWS_BYTES / (16 * n.max(1))).clamp(1, MAX_BATCH);
    1 << b.ilog2()
}

/// (first row, rows) of the executions covering `rows` rows of length `n`: full batches, then
/// the remainder's binary digits, largest first. Every count is a power of two ≤ full_batch(n).
pub fn row_batches(n: usize, rows: usize) -> Vec<(usize, usize)> {
    let full = full_batch(n);
    let mut out: Vec<(usize, usize)> = (0..rows / full).map(|k| (k * full, full)).collect();
    let mut r0 = rows / full * full;
    let rem = rows - r0;
    for bit in (0..usize::BITS).rev() {
        let b = 1usize << bit;
        if rem & b != 0 {
            out.push((r0, b));
            r0 += b;
        }
    }
    out
}

/// Estimated bytes of a plan's work area (16 B per complex point).
fn plan_bytes(key: &FftKey) -> usize {
    16 * key.n * key.batch
}

/// Destroy the least recently used plans of GPU `ordinal` not in use until its estimated bytes
/// are at most `limit`; `drain` runs once before the first one goes (plans queued on the
/// stream may still be executing: a destroyed plan's work area must not be).
fn evict(
    map: &mut HashMap<(u32, FftKey), Cached>,
    ordinal: u32,
    limit: usize,
    drain: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let mut total: usize = map
        .iter()
        .filter(|(k, _)| k.0 == ordinal)
        .map(|(_, c)| c.bytes)
        .sum();
    if total <= limit {
        return Ok(());
    }
    let mut idle: Vec<((u32, FftKey), u64, usize)> = map
        .iter()
        .filter(|(k, c)| k.0 == ordinal && Arc::strong_count(&c.plan) == 1)
        .map(|(k, c)| (*k, c.used, c.bytes))
        .collect();
    if idle.is_empty() {
        return Ok(());
    }
    drain()?;
    idle.sort_by_key(|e| e.1);
    for (k, _, b) in idle {
        if total <= limit {
            break;
        }
        map.remove(&k);
        total -= b;
    }
    Ok(())
}

fn to_i32(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::Internal(format!("cuFFT {what} {v} exceeds i32")))
}

impl Gpu {
    /// The plan for `key`, created on first use (plans are bound to this GPU's stream).
    pub fn fft_plan(&self, key: FftKey) -> Result<Arc<FftPlan>> {
        let pid = std::process::id();
        let mut guard = PLANS.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().is_none_or(|(p, _, _)| *p != pid) {
            if let Some((p, _, old)) = guard.take() {
                if p != pid {
                    // Plans of a parent process: never destroy them here.
                    std::mem::forget(old);
                }
            }
            *guard = Some((pid, 0, HashMap::new()));
        }
        let (_, clock, map) = guard.as_mut().expect("just set");
        *clock += 1;
        if let Some(c) = map.get_mut(&(self.ordinal, key)) {
            c.used = *clock;
            return Ok(c.plan.clone());
        }
        let t0 = std::time::Instant::now();
        let api = toolkit::cufft()?;
        self.ctx.bind_to_thread()?;
        // Every plan of this GPU runs on its stream: drained before any plan is destroyed.
        let limit = CACHE_BYTES.saturating_sub(plan_bytes(&key));
        evict(map, self.ordinal, limit, || {
            Ok(self.stream.synchronize()?)
        })?;
        let n = [to_i32(key.n, "length")?];
        let half = key.n / 2 + 1;
        let (ty, ilen, olen) = match key.kind {
            FftKind::D2Z => (CUFFT_D2Z, key.n, half),
            FftKind::Z2D => (CUFFT_Z2D, half, key.n),
            FftKind::Z2Z => (CUFFT_Z2Z, key.n, key.n),
        };
        let mut n = n;
        let mut inembed = [to_i32(ilen, "embed")?];
        let mut onembed = [to_i32(olen, "embed")?];
        let (idist, odist) = (to_i32(key.idist, "idist")?, to_i32(key.odist, "odist")?);
        let batch = to_i32(key.batch, "batch")?;
        let mut handle: Handle = 0;
        // SAFETY: the arrays outlive the call; the context is current.
        let r = unsafe {
            (api.plan_many)(
                &mut handle,
                1,
                n.as_mut_ptr(),
                inembed.as_mut_ptr(),
                1,
                idist,
                onembed.as_mut_ptr(),
                1,
                odist,
                ty,
                batch,
            )
        };
        check("plan creation", r)?;
        let p = Arc::new(FftPlan { key, handle, api });
        // SAFETY: a live plan and this GPU's stream.
        check("cufftSetStream", unsafe {
            (api.set_stream)(handle, self.stream.cu_stream() as *mut _)
        })?;
        let bytes = plan_bytes(&key);
        let used = *clock;
        map.insert(
            (self.ordinal, key),
            Cached {
                plan: p.clone(),
                used,
                bytes,
            },
        );
        crate::backend::trace::record(
            "cufft plan",
            &format!("{:?} n={} batch={}", key.kind, key.n, key.batch),
            t0.elapsed().as_secs_f64(),
        );
        Ok(p)
    }

    /// Half spectra -> real rows (Z2D). `input` holds interleaved complex numbers; offsets are
    /// in complex elements for `input` and f64 elements for `output`. cuFFT may overwrite the
    /// input.
    pub fn fft_z2d(
        &self,
        plan: &FftPlan,
        input: &mut CudaSlice<f64>,
        in_off: usize,
        output: &mut CudaSlice<f64>,
        out_off: usize,
    ) -> Result<()> {
        let k = plan.key;
        assert_eq!(k.kind, FftKind::Z2D, "fft_z2d with another plan");
        // cuFFT uses the calling thread's current context.
        self.ctx.bind_to_thread()?;
        let half = k.n / 2 + 1;
        assert!(2 * (in_off + (k.batch - 1) * k.idist + half) <= input.len());
        assert!(out_off + (k.batch - 1) * k.odist + k.n <= output.len());
        let (ip, _g1) = input.device_ptr_mut(&self.stream);
        let (op, _g2) = output.device_ptr_mut(&self.stream);
        let ip = ip + (16 * in_off) as u64;
        let op = op + (8 * out_off) as u64;
        // SAFETY: the plan runs on this stream; the ranges were checked above.
        check("Z2D", unsafe {
            (plan.api.exec_z2d)(plan.handle, ip as *mut _, op as *mut _)
        })
    }

    /// Real rows -> half spectra (D2Z). Offsets in f64 elements for `input` and complex
    /// elements for `output`.
    pub fn fft_d2z(
        &self,
        plan: &FftPlan,
        input: &CudaSlice<f64>,
        in_off: usize,
        output: &mut CudaSlice<f64>,
        out_off: usize,
    ) -> Result<()> {
        let k = plan.key;
        assert_eq!(k.kind, FftKind::D2Z, "fft_d2z with another plan");
        self.ctx.bind_to_thread()?;
        let half = k.n / 2 + 1;
        assert!(in_off + (k.batch - 1) * k.idist + k.n <= input.len());
        assert!(2 * (out_off + (k.batch - 1) * k.odist + half) <= output.len());
        let (ip, _g1) = input.device_ptr(&self.stream);
        let (op, _g2) = output.device_ptr_mut(&self.stream);
        let ip = ip + (8 * in_off) as u64;
        let op = op + (16 * out_off) as u64;
        // SAFETY: as fft_z2d.
        check("D2Z", unsafe {
            (plan.api.exec_d2z)(plan.handle, ip as *mut _, op as *mut _)
        })
    }

    /// In-place complex transforms (Z2Z) of `buf` from complex element `off`: forward
    /// (e^{-2πi jk/n}) or inverse (e^{+2πi jk/n}), unnormalised.
    pub fn fft_z2z(
        &self,
        plan: &FftPlan,
        buf: &mut CudaSlice<f64>,
        off: usize,
        forward: bool,
    ) -> Result<()> {
        let k = plan.key;
        assert_eq!(k.kind, FftKind::Z2Z, "fft_z2z with another plan");
        self.ctx.bind_to_thread()?;
        assert!(2 * (off + (k.batch - 1) * k.idist.max(k.odist) + k.n) <= buf.len());
        let (p, _g) = buf.device_ptr_mut(&self.stream);
        let p = (p + (16 * off) as u64) as *mut std::ffi::c_void;
        // cufft.h: CUFFT_FORWARD = -1, CUFFT_INVERSE = 1 (the exponent's sign).
        let dir = if forward { -1 } else { 1 };
        // SAFETY: as fft_z2d; in place with idist == odist.
        check("Z2Z", unsafe {
            (plan.api.exec_z2z)(plan.handle, p, p, dir)
        })
    }

    /// Runs `run(plan, r0)` for each batch of `row_batches(n, rows)` (first row r0) with the
    /// length's shared plan of that batch size: the one row loop of the `*_rows` transforms.
    fn each_row_batch(
        &self,
        n: usize,
        rows: usize,
        (idist, odist): (usize, usize),
        kind: FftKind,
        mut run: impl FnMut(&FftPlan, usize) -> Result<()>,
    ) -> Result<()> {
        for (r0, batch) in row_batches(n, rows) {
            let plan = self.fft_plan(FftKey {
                n,
                batch,
                idist,
                odist,
                kind,
            })?;
            run(plan.as_ref(), r0)?;
        }
        Ok(())
    }

    /// `rows` real rows of length `n` (row r at `in_off + r·idist` f64 of `input`) -> half
    /// spectra (row r at complex `out_off + r·odist` of `output`), through the length's shared
    /// plans (`row_batches`).
    #[allow(clippy::too_many_arguments)]
    pub fn fft_d2z_rows(
        &self,
        n: usize,
        rows: usize,
        input: &CudaSlice<f64>,
        in_off: usize,
        idist: usize,
        output: &mut CudaSlice<f64>,
        out_off: usize,
        odist: usize,
    ) -> Result<()> {
        self.each_row_batch(n, rows, (idist, odist), FftKind::D2Z, |pl, r0| {
            self.fft_d2z(pl, input, in_off + r0 * idist, output, out_off + r0 * odist)
        })
    }

    /// `rows` half spectra (row r at complex `in_off + r·idist` of `input`) -> real rows of
    /// length `n` (row r at `out_off + r·odist` f64 of `output`), through the length's shared
    /// plans. cuFFT may overwrite the input rows.
    #[allow(clippy::too_many_arguments)]
    pub fn fft_z2d_rows(
        &self,
        n: usize,
        rows: usize,
        input: &mut CudaSlice<f64>,
        in_off: usize,
        idist: usize,
        output: &mut CudaSlice<f64>,
        out_off: usize,
        odist: usize,
    ) -> Result<()> {
        self.each_row_batch(n, rows, (idist, odist), FftKind::Z2D, |pl, r0| {
            self.fft_z2d(pl, input, in_off + r0 * idist, output, out_off + r0 * odist)
        })
    }

    /// In-place complex transforms of `rows` contiguous rows of length `n` of `buf` from
    /// complex element `off`, through the length's shared plans (as `fft_z2z`).
    pub fn fft_z2z_rows(
        &self,
        n: usize,
        rows: usize,
        buf: &mut CudaSlice<f64>,
        off: usize,
        forward: bool,
    ) -> Result<()> {
        self.each_row_batch(n, rows, (n, n), FftKind::Z2Z, |pl, r0| {
            self.fft_z2z(pl, buf, off + r0 * n, forward)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{full_batch, row_batches, MAX_BATCH, ROWS_BYTES};

    #[test]
    fn row_batches_cover_the_rows_once_with_few_plans() {
        for n in [4usize, 8, 96, 4096, 65536, 131072, 1 << 22] {
            let full = full_batch(n);
            assert!(full.is_power_of_two() && full <= MAX_BATCH);
            assert!(full == 1 || 16 * n * full <= ROWS_BYTES, "n {n}");
            let mut sizes = std::collections::HashSet::new();
            for rows in 0..3 * full + 5 {
                let mut next = 0;
                for (r0, b) in row_batches(n, rows) {
                    assert_eq!(r0, next, "n {n} rows {rows}");
                    assert!(b.is_power_of_two() && b <= full);
                    sizes.insert(b);
                    next += b;
                }
                assert_eq!(next, rows, "n {n} rows {rows}");
            }
            // one plan per power of two up to the full batch, whatever the row counts
            assert!(sizes.len() <= full.ilog2() as usize + 1, "n {n}");
        }
    }
}
