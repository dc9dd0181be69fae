//! cuFFT plans for batched 1-D double-precision transforms (real D2Z / Z2D and complex Z2Z),
//! created once per process and shape and cached, plus execution on sub-ranges of device
//! buffers. Families ask for a plan with an `FftKey` and never name cuFFT themselves.

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

/// (pid, plans by GPU ordinal and shape) of this process.
type PlanCache = (u32, HashMap<(u32, FftKey), Arc<FftPlan>>);

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

fn to_i32(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::Internal(format!("cuFFT {what} {v} exceeds i32")))
}

impl Gpu {
    /// The plan for `key`, created on first use (plans are bound to this GPU's stream).
    pub fn fft_plan(&self, key: FftKey) -> Result<Arc<FftPlan>> {
        let pid = std::process::id();
        let mut guard = PLANS.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().is_none_or(|(p, _)| *p != pid) {
            if let Some((p, old)) = guard.take() {
                if p != pid {
                    // Plans of a parent process: never destroy them here.
                    std::mem::forget(old);
                }
            }
            *guard = Some((pid, HashMap::new()));
        }
        let map = &mut guard.as_mut().expect("just set").1;
        if let Some(p) = map.get(&(self.ordinal, key)) {
            return Ok(p.clone());
        }
        let t0 = std::time::Instant::now();
        let api = toolkit::cufft()?;
        self.ctx.bind_to_thread()?;
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
        map.insert((self.ordinal, key), p.clone());
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
}
