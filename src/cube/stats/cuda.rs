//! GPU engine of the statistics: the refinement's data passes as kernels (`kernels/select.cu`)
//! over a device-resident array; only histograms (4096 counts) and the last few values come
//! back to the host.

use super::{refine, Level, Source, Values, BINS, MAX_LEVELS};
use crate::backend::cuda::{grid_stride, CudaSlice, DeviceRepr, Gpu, LaunchConfig, PushKernelArg};
use crate::error::{Error, Result};
use crate::real::Real;

/// Blocks per launch (grid-stride loops): enough to fill a large GPU several times over.
const MAX_BLOCKS: usize = 1024;

/// Mirrors `struct SelParams` in kernels/select.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct SelParams {
    center: f64,
    abs_dev: i32,
    range: i32,
    nlevels: i32,
    pad: i32,
    lo: [f64; MAX_LEVELS],
    hi: [f64; MAX_LEVELS],
    scale: [f64; MAX_LEVELS],
    bin: [i64; MAX_LEVELS],
}

// SAFETY: plain-old-data with the same C layout as the kernel's struct.
unsafe impl DeviceRepr for SelParams {}

impl SelParams {
    fn new(vals: Values, levels: &[Level]) -> Self {
        let mut p = SelParams {
            center: vals.center,
            abs_dev: vals.abs as i32,
            range: vals.range_code(),
            nlevels: levels.len() as i32,
            pad: 0,
            lo: [0.0; MAX_LEVELS],
            hi: [0.0; MAX_LEVELS],
            scale: [0.0; MAX_LEVELS],
            bin: [0; MAX_LEVELS],
        };
        for (i, l) in levels.iter().enumerate() {
            p.lo[i] = l.lo;
            p.hi[i] = l.hi;
            p.scale[i] = l.scale;
            p.bin[i] = l.bin as i64;
        }
        p
    }
}

fn decode_key(k: u64) -> f64 {
    let bits = if k >> 63 == 1 { k & !(1u64 << 63) } else { !k };
    f64::from_bits(bits)
}

struct Device<'a, T> {
    gpu: &'a Gpu,
    data: &'a CudaSlice<T>,
    n: usize,
    vals: Values,
}

impl<T: Real> Device<'_, T> {
    fn config(&self) -> LaunchConfig {
        grid_stride(self.n, MAX_BLOCKS)
    }
}

impl<T: Real> Source for Device<'_, T> {
    fn extent(&self, levels: &[Level]) -> Result<(usize, f64, f64)> {
        let f = self
            .gpu
            .function("select", &format!("sel_extent_{}", T::CUDA))?;
        let mut out = self.gpu.upload_small(&[0u64, u64::MAX, 0u64])?;
        let p = SelParams::new(self.vals, levels);
        let n = self.n as i64;
        let mut l = self.gpu.stream.launch_builder(&f);
        l.arg(self.data).arg(&n).arg(&p).arg(&mut out);
        // SAFETY: arguments match sel_extent_* in kernels/select.cu; data holds n elements.
        unsafe { l.launch(self.config()) }?;
        let mut host = [0u64; 3];
        self.gpu.download(&out, &mut host)?;
        if host[0] == 0 {
            return Ok((0, f64::INFINITY, f64::NEG_INFINITY));
        }
        Ok((host[0] as usize, decode_key(host[1]), decode_key(host[2])))
    }

    fn histogram(&self, levels: &[Level], level: &Level) -> Result<Vec<u64>> {
        let f = self
            .gpu
            .function("select", &format!("sel_histogram_{}", T::CUDA))?;
        let mut hist = self.gpu.alloc_zeros::<u64>(BINS)?;
        let p = SelParams::new(self.vals, levels);
        let n = self.n as i64;
        let mut l = self.gpu.stream.launch_builder(&f);
        l.arg(self.data)
            .arg(&n)
            .arg(&p)
            .arg(&level.lo)
            .arg(&level.hi)
            .arg(&level.scale)
            .arg(&mut hist);
        // SAFETY: arguments match sel_histogram_* in kernels/select.cu.
        unsafe { l.launch(self.config()) }?;
        let mut host = vec![0u64; BINS];
        self.gpu.download(&hist, &mut host)?;
        Ok(host)
    }

    fn gather(&self, levels: &[Level]) -> Result<Vec<f64>> {
        let f = self
            .gpu
            .function("select", &format!("sel_gather_{}", T::CUDA))?;
        let p = SelParams::new(self.vals, levels);
        let n = self.n as i64;
        let mut cap = 1usize << 16;
        loop {
            // SAFETY: only the first `count` slots are read back.
            let mut out = unsafe { self.gpu.alloc::<f64>(cap)? };
            let mut count = self.gpu.alloc_zeros::<u64>(1)?;
            let cap64 = cap as u64;
            let mut l = self.gpu.stream.launch_builder(&f);
            l.arg(self.data)
                .arg(&n)
                .arg(&p)
                .arg(&mut out)
                .arg(&mut count)
                .arg(&cap64);
            // SAFETY: arguments match sel_gather_* in kernels/select.cu.
            unsafe { l.launch(self.config()) }?;
            let mut got = [0u64];
            self.gpu.download(&count, &mut got)?;
            let got = got[0] as usize;
            if got <= cap {
                let mut host = vec![0f64; got];
                if got > 0 {
                    self.gpu.download(&out, &mut host)?;
                }
                return Ok(host);
            }
            cap = got;
        }
    }
}

fn check_len<T>(data: &CudaSlice<T>, n: usize) -> Result<()> {
    if data.len() < n {
        return Err(Error::Internal(format!(
            "statistics over {n} values of a device buffer of {}",
            data.len()
        )));
    }
    Ok(())
}

/// Number of the first `n` device values that `vals` keeps.
pub fn count_device<T: Real>(
    gpu: &Gpu,
    data: &CudaSlice<T>,
    n: usize,
    vals: Values,
) -> Result<usize> {
    check_len(data, n)?;
    let src = Device { gpu, data, n, vals };
    Ok(src.extent(&[])?.0)
}

/// The k-th smallest kept value among the first `n` device values.
pub fn select_kth_device<T: Real>(
    gpu: &Gpu,
    data: &CudaSlice<T>,
    n: usize,
    k: usize,
    vals: Values,
) -> Result<Option<f64>> {
    check_len(data, n)?;
    refine(&Device { gpu, data, n, vals }, k)
}
