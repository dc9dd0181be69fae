//! cuFFT plans for batched 1-D double-precision transforms (real D2Z / Z2D and complex Z2Z),
//! created once per process and shape and cached, plus execution on sub-ranges of device
//! buffers. Families ask for a plan with an `FftKey` and never name cuFFT themselves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::cufft::{result as fr, sys as fs, CudaFft};
use cudarc::driver::{DevicePtr, DevicePtrMut};

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

/// A cached plan.
pub struct FftPlan {
    pub key: FftKey,
    plan: CudaFft,
}

/// (pid, plans) of this process.
type PlanCache = (u32, HashMap<FftKey, Arc<FftPlan>>);

static PLANS: Mutex<Option<PlanCache>> = Mutex::new(None);

fn fft_err(what: &str, e: fr::CufftError) -> Error {
    Error::Cuda(format!("cuFFT {what} failed: {e:?}"))
}

/// Whether libcufft can be opened.
pub fn present() -> bool {
    for name in ["libcufft.so.12", "libcufft.so.13", "libcufft.so.11"] {
        if super::libs::preload(name).is_some() {
            break;
        }
    }
    // SAFETY: only probes with dlopen.
    unsafe { fs::is_culib_present() }
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
        if let Some(p) = map.get(&key) {
            return Ok(p.clone());
        }
        if !present() {
            return Err(Error::device(
                "cuFFT (libcufft.so.12) was not found: install CUDA 13's cuFFT (pip install \
                 nvidia-cufft) or put its lib folder on LD_LIBRARY_PATH",
            ));
        }
        self.ctx.bind_to_thread()?;
        let n = [to_i32(key.n, "length")?];
        let half = key.n / 2 + 1;
        let (ty, ilen, olen) = match key.kind {
            FftKind::D2Z => (fs::cufftType::CUFFT_D2Z, key.n, half),
            FftKind::Z2D => (fs::cufftType::CUFFT_Z2D, half, key.n),
            FftKind::Z2Z => (fs::cufftType::CUFFT_Z2Z, key.n, key.n),
        };
        let inembed = [to_i32(ilen, "embed")?];
        let onembed = [to_i32(olen, "embed")?];
        let plan = CudaFft::plan_many(
            &n,
            Some(&inembed),
            1,
            to_i32(key.idist, "idist")?,
            Some(&onembed),
            1,
            to_i32(key.odist, "odist")?,
            ty,
            to_i32(key.batch, "batch")?,
            self.stream.clone(),
        )
        .map_err(|e| fft_err("plan creation", e))?;
        let p = Arc::new(FftPlan { key, plan });
        map.insert(key, p.clone());
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
        unsafe {
            fr::exec_z2d(
                plan.plan.handle(),
                ip as *mut fs::cufftDoubleComplex,
                op as *mut fs::cufftDoubleReal,
            )
        }
        .map_err(|e| fft_err("Z2D", e))
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
        unsafe {
            fr::exec_d2z(
                plan.plan.handle(),
                ip as *mut fs::cufftDoubleReal,
                op as *mut fs::cufftDoubleComplex,
            )
        }
        .map_err(|e| fft_err("D2Z", e))
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
        let p = (p + (16 * off) as u64) as *mut fs::cufftDoubleComplex;
        // cufft.h: CUFFT_FORWARD = -1, CUFFT_INVERSE = 1 (the exponent's sign).
        let dir = if forward { -1 } else { 1 };
        // SAFETY: as fft_z2d; in place with idist == odist.
        unsafe { fr::exec_z2z(plan.plan.handle(), p, p, dir) }.map_err(|e| fft_err("Z2Z", e))
    }
}
