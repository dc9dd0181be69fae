//! Real DFTs of rows of many different lengths (HEALPix's polar rings: 4, 8, 12, … points) in a
//! few batched launches, by Bluestein's chirp z-transform (`kernels/ringfft.cu`). A length-n
//! DFT becomes a circular convolution of length M ≥ 2n − 1; jobs with the same M share one
//! batched launch and M's shared cuFFT plans (`Gpu::fft_z2z_rows`: the plans depend on M
//! only, so every chunk and call reuses them), so a transform of all polar rings costs a few dozen launches instead of
//! one cuFFT call per ring length. Two real rows of the same length ride as one complex
//! sequence. Families describe their rows with `RingJob`s; rows of 4·nside points (the
//! equatorial belt) are better served by a plain batched real FFT.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::Gpu;
use crate::error::Result;

const MODULE: &str = "ringfft";
const TPB: u32 = 256;
/// Most device memory one batch's work and chirp rows may take.
const BATCH_BYTES: usize = 512 << 20;
/// Jobs per batch are a grid dimension (gridDim.y ≤ 65535).
const MAX_JOBS: usize = 65535;

/// One transform: row `a` (and row `b`, if any) of length `n`.
#[derive(Debug, Clone, Copy)]
pub struct RingJob {
    pub n: usize,
    pub a: usize,
    pub b: Option<usize>,
}

/// Smallest M = 2^k or 3·2^k with M ≥ 2n − 1 (cuFFT's fastest sizes; at most 4/3 waste).
fn padded(n: usize) -> usize {
    let need = (2 * n).saturating_sub(1).max(2);
    let p = need.next_power_of_two();
    if p / 4 * 3 >= need {
        p / 4 * 3
    } else {
        p
    }
}

/// Jobs sharing one padded length and one launch, with their tables on the device.
struct Batch {
    m: usize,
    jobs: usize,
    chirps: usize,
    n_max: usize,
    /// per job: n (i32); per chirp: n
    jn: CudaSlice<i32>,
    jc: CudaSlice<i32>,
    cn: CudaSlice<i32>,
    ra: CudaSlice<i64>,
    rb: CudaSlice<i64>,
}

/// A prepared set of ring transforms (build once per layout, run many times).
pub struct RingFft {
    batches: Vec<Batch>,
    work: CudaSlice<f64>,
    chirp: CudaSlice<f64>,
}

fn cfg(grid: (u32, u32), block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid.0, grid.1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn blocks(n: usize) -> u32 {
    n.div_ceil(TPB as usize).max(1) as u32
}

impl RingFft {
    /// Group `jobs` by padded length (keeping their order within a group) and upload tables.
    pub fn new(gpu: &Gpu, jobs: &[RingJob]) -> Result<Self> {
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&i| (padded(jobs[i].n), i));
        let mut batches = Vec::new();
        let (mut work_len, mut chirp_len) = (1usize, 1usize);
        let mut s = 0;
        while s < order.len() {
            let m = padded(jobs[order[s]].n);
            // rows of M complex per job, plus at most one chirp row per job
            let cap = (BATCH_BYTES / (2 * 16 * m)).clamp(1, MAX_JOBS);
            let mut e = s;
            while e < order.len() && e - s < cap && padded(jobs[order[e]].n) == m {
                e += 1;
            }
            let sel = &order[s..e];
            let mut cn: Vec<i32> = Vec::new();
            let mut jc: Vec<i32> = Vec::with_capacity(sel.len());
            for &i in sel {
                let n = jobs[i].n as i32;
                let c = match cn.iter().position(|&x| x == n) {
                    Some(c) => c,
                    None => {
                        cn.push(n);
                        cn.len() - 1
                    }
                };
                jc.push(c as i32);
            }
            let jn: Vec<i32> = sel.iter().map(|&i| jobs[i].n as i32).collect();
            let ra: Vec<i64> = sel.iter().map(|&i| jobs[i].a as i64).collect();
            let rb: Vec<i64> = sel
                .iter()
                .map(|&i| jobs[i].b.map_or(-1, |b| b as i64))
                .collect();
            work_len = work_len.max(2 * sel.len() * m);
            chirp_len = chirp_len.max(2 * cn.len() * m);
            batches.push(Batch {
                m,
                jobs: sel.len(),
                chirps: cn.len(),
                n_max: sel.iter().map(|&i| jobs[i].n).max().unwrap_or(1),
                jn: gpu.upload_small(&jn)?,
                jc: gpu.upload_small(&jc)?,
                cn: gpu.upload_small(&cn)?,
                ra: gpu.upload_small(&ra)?,
                rb: gpu.upload_small(&rb)?,
            });
            s = e;
        }
        // SAFETY: every element is written by the pre and chirp kernels before it is read.
        let work = unsafe { gpu.alloc::<f64>(work_len) }?;
        let chirp = unsafe { gpu.alloc::<f64>(chirp_len) }?;
        Ok(RingFft {
            batches,
            work,
            chirp,
        })
    }

    /// Bytes of device memory `new` would take for `jobs` (for budgets).
    pub fn bytes_for(jobs: &[RingJob]) -> usize {
        let m = jobs.iter().map(|j| padded(j.n)).max().unwrap_or(1);
        let cap = (BATCH_BYTES / (2 * 16 * m)).clamp(1, MAX_JOBS);
        2 * 16 * m * cap.min(jobs.len().max(1))
    }

    /// The chirp spectra of batch `b` (conjugate chirp for the inverse, chirp for forward).
    fn chirp_spectra(&mut self, gpu: &Gpu, bi: usize, sign: f64) -> Result<()> {
        let b = &self.batches[bi];
        let m = b.m as i64;
        let f = gpu.function(MODULE, "blue_chirp")?;
        let mut l = gpu.stream.launch_builder(&f);
        l.arg(&b.cn).arg(&mut self.chirp).arg(&m).arg(&sign);
        // SAFETY: matches blue_chirp; chirp holds `chirps` rows of M complex.
        unsafe { l.launch(cfg((blocks(b.m), b.chirps as u32), TPB)) }?;
        gpu.fft_z2z_rows(b.m, b.chirps, &mut self.chirp, 0, true)
    }

    /// Convolve the work rows of batch `bi` with its chirps: FFT, multiply, inverse FFT.
    fn convolve(&mut self, gpu: &Gpu, bi: usize) -> Result<()> {
        let b = &self.batches[bi];
        gpu.fft_z2z_rows(b.m, b.jobs, &mut self.work, 0, true)?;
        let f = gpu.function(MODULE, "blue_mul")?;
        let (m, scale) = (b.m as i64, 1.0 / b.m as f64);
        let mut l = gpu.stream.launch_builder(&f);
        l.arg(&mut self.work)
            .arg(&self.chirp)
            .arg(&b.jc)
            .arg(&m)
            .arg(&scale);
        // SAFETY: matches blue_mul; work holds `jobs` rows and chirp `chirps` rows of M.
        unsafe { l.launch(cfg((blocks(b.m), b.jobs as u32), TPB)) }?;
        gpu.fft_z2z_rows(b.m, b.jobs, &mut self.work, 0, false)
    }

    /// Half spectra (row r at complex offset r·h of `spec`) -> real rows (row r at r·w).
    pub fn inverse(
        &mut self,
        gpu: &Gpu,
        spec: &CudaSlice<f64>,
        h: usize,
        rows: &mut CudaSlice<f64>,
        w: usize,
    ) -> Result<()> {
        self.transform(gpu, spec, h, rows, w, false)
    }

    /// Real rows (row r at r·w of `rows`) -> half spectra (row r at complex offset r·h).
    pub fn forward(
        &mut self,
        gpu: &Gpu,
        rows: &CudaSlice<f64>,
        w: usize,
        spec: &mut CudaSlice<f64>,
        h: usize,
    ) -> Result<()> {
        self.transform(gpu, rows, w, spec, h, true)
    }

    /// `src` rows (stride `si`) -> `dst` rows (stride `so`): spectra -> real rows, or the
    /// reverse when `forward`. Every batch: chirp spectra, pre-chirp, convolution, post-chirp.
    fn transform(
        &mut self,
        gpu: &Gpu,
        src: &CudaSlice<f64>,
        si: usize,
        dst: &mut CudaSlice<f64>,
        so: usize,
        forward: bool,
    ) -> Result<()> {
        let (si, so) = (si as i64, so as i64);
        let (sign, pre, post) = if forward {
            (1.0, "blue_pre_fwd", "blue_post_fwd")
        } else {
            (-1.0, "blue_pre_inv", "blue_post_inv")
        };
        for bi in 0..self.batches.len() {
            self.chirp_spectra(gpu, bi, sign)?;
            let b = &self.batches[bi];
            let m = b.m as i64;
            let f = gpu.function(MODULE, pre)?;
            let mut l = gpu.stream.launch_builder(&f);
            l.arg(src)
                .arg(&si)
                .arg(&b.jn)
                .arg(&b.ra)
                .arg(&b.rb)
                .arg(&mut self.work)
                .arg(&m);
            // SAFETY: matches blue_pre_*; the caller's rows lie inside `src`.
            unsafe { l.launch(cfg((blocks(b.m), b.jobs as u32), TPB)) }?;
            self.convolve(gpu, bi)?;
            let b = &self.batches[bi];
            // the forward post writes half spectra (n/2 + 1 bins), the inverse n points
            let width = if forward { b.n_max / 2 + 1 } else { b.n_max };
            let f = gpu.function(MODULE, post)?;
            let mut l = gpu.stream.launch_builder(&f);
            l.arg(&self.work)
                .arg(&mut *dst)
                .arg(&so)
                .arg(&b.jn)
                .arg(&b.ra)
                .arg(&b.rb)
                .arg(&m);
            // SAFETY: matches blue_post_*; the caller's rows lie inside `dst`.
            unsafe { l.launch(cfg((blocks(width), b.jobs as u32), TPB)) }?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::padded;

    #[test]
    fn padded_lengths_hold_the_linear_convolution() {
        for n in 1..5000 {
            let m = padded(n);
            assert!(m + 1 >= 2 * n, "n {n} m {m}");
            assert!(m < 3 * n + 4, "n {n} m {m}");
            let odd = m >> m.trailing_zeros();
            assert!(odd == 1 || odd == 3, "m {m}");
        }
    }
}
