//! Masked (normalised) smoothing on the GPU (`crate::smooth::masked`): the map and the mask go
//! up once, `smooth_mask_prep` forms m·w and w in place, both go through the forward ring FFTs
//! once for every beam; per beam the kernel samples are evaluated once per chunk and the
//! products run for both spectra, the inverse FFTs write smooth(m·w) and smooth(w) into the two
//! map buffers and `smooth_mask_divide` leaves the normalised map in the first (one beam) or in
//! one of two output buffers taking turns (several beams: its download overlaps the next beam),
//! which is the only thing that comes down (8 bytes per pixel per beam; 16 go up with a mask, 8
//! without). The prep kernel also checks the mask's values (no host pass over the mask).
//! Device memory: [`device_bytes`] (two map buffers, two spectra per map, the FFT work) plus
//! the kernel samples, chunked into what is left.

use super::outputs::Downloads;
use super::{
    cfg, eval, fixed_bytes, phase, polar_jobs, products, ring_ffts, tables_of, taps_buffer, upload,
    CHUNK_TAPS, MODULE,
};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::ring_fft::RingFft;
use crate::backend::cuda::{self, CudaSlice, Gpu, PushKernelArg};
use crate::error::{Error, Result};
use crate::smooth::RingPlan;

/// Threads per block and most blocks of the per-pixel kernels (grid-stride loops).
const THREADS: usize = 256;
const MAX_BLOCKS: usize = 4096;

/// Device bytes of masked smoothing at `nside` besides the kernel samples: the unmasked
/// engine's for two maps plus a second map buffer (8 bytes per pixel).
pub fn device_bytes(nside: usize) -> usize {
    super::device_bytes(nside, 2) + 8 * 12 * nside * nside
}

fn per_pixel(n: usize) -> crate::backend::cuda::LaunchConfig {
    cfg(n.div_ceil(THREADS).min(MAX_BLOCKS), THREADS)
}

/// The prep kernel; `bad` (one int, zero) is set to 1 when a mask value is not in [0, 1].
fn prep(
    gpu: &Gpu,
    m: &mut CudaSlice<f64>,
    w: &mut CudaSlice<f64>,
    has_mask: bool,
    n: usize,
    bad: &mut CudaSlice<i32>,
) -> Result<()> {
    let f = gpu.function(MODULE, "smooth_mask_prep")?;
    let (hm, n64) = (has_mask as i32, n as i64);
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(m).arg(w).arg(&hm).arg(&n64).arg(bad);
    // SAFETY: matches smooth_mask_prep; both buffers hold n doubles, `bad` one int.
    unsafe { l.launch(per_pixel(n)) }?;
    Ok(())
}

/// num / den (UNSEEN below `thr`) into `out`, or into `num` itself when `out` is None.
fn divide(
    gpu: &Gpu,
    num: &CudaSlice<f64>,
    den: &CudaSlice<f64>,
    thr: f64,
    n: usize,
    out: Option<&mut CudaSlice<f64>>,
) -> Result<()> {
    let f = gpu.function(MODULE, "smooth_mask_divide")?;
    let n64 = n as i64;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(num).arg(den).arg(&thr).arg(&n64);
    match out {
        Some(o) => l.arg(o),
        None => l.arg(num),
    };
    // SAFETY: matches smooth_mask_divide; all buffers hold n doubles (each thread reads num[i]
    // and den[i] before it writes out[i], so out may be num).
    unsafe { l.launch(per_pixel(n)) }?;
    Ok(())
}

/// The error for a mask value outside [0, 1] (as the Python check words it).
pub fn bad_mask() -> Error {
    Error::Value("mask must hold weights in [0, 1] (1 observed, 0 masked)".into())
}

/// Masked ring smoothing of one float64 RING map with `mask` (None: 1) and one plan per beam
/// (one nside); `outs[b]` gets beam b's normalised map (UNSEEN where smooth(w) < thr[b]).
/// Equal, bit for bit, to the CPU engine's prep, convolution and division. The mask's values
/// are checked on the device (a ValueError when one is not in [0, 1]). With several beams and
/// room for two more map buffers, beam b's result comes down while beam b + 1 computes.
pub fn convolve_masked(
    plans: &[&RingPlan],
    map: &[f64],
    mask: Option<&[f64]>,
    thr: &[f64],
    outs: &mut [&mut [f64]],
) -> Result<()> {
    assert_eq!(outs.len(), plans.len(), "one output per plan");
    assert_eq!(thr.len(), plans.len(), "one threshold per plan");
    if plans.is_empty() {
        return Ok(());
    }
    let plan0 = plans[0];
    assert!(
        plans.iter().all(|p| p.nside == plan0.nside),
        "plans of one nside"
    );
    let npix = plan0.npix;
    let jobs = polar_jobs(plan0);
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let budget = gpu.budget()?;
    let fixed = fixed_bytes(plan0, &jobs, 2) + 8 * npix;
    if budget <= fixed {
        return Err(Error::GpuMemory(format!(
            "masked ring smoothing at nside {} needs {} bytes ({:.1} GB) of GPU memory, {} bytes \
             are available; use device='cpu' or the harmonic method",
            plan0.nside,
            fixed,
            fixed as f64 / 1e9,
            budget
        )));
    }
    let mut room = ((budget - fixed) / 8).max(1);
    let tables = tables_of(plans)?;
    let mut tl = Timeline::start(&gpu)?;
    let mut d_map = gpu.upload(map)?;
    let mut d_w = match mask {
        Some(mk) => gpu.upload(mk)?,
        // SAFETY: smooth_mask_prep writes every pixel of w without reading it (has_mask = 0).
        None => unsafe { gpu.alloc::<f64>(npix) }?,
    };
    tl.mark(&gpu, "h2d")?;
    let mut bad = gpu.upload_small(&[0i32])?;
    prep(&gpu, &mut d_map, &mut d_w, mask.is_some(), npix, &mut bad)?;
    if gpu.stream.clone_dtoh(&bad)?[0] != 0 {
        return Err(bad_mask());
    }
    // two output buffers taking turns (several beams, budget permitting): the downloads
    // overlap the next beam; else the result is divided into the first map buffer
    let mut obufs = Vec::new();
    if plans.len() > 1 && room >= 3 * npix {
        for _ in 0..2 {
            // SAFETY: smooth_mask_divide writes every pixel before the download reads it.
            obufs.push(unsafe { gpu.alloc::<f64>(npix) }?);
        }
        room -= 2 * npix;
    }
    let mut polar = if jobs.is_empty() {
        None
    } else {
        Some(RingFft::new(&gpu, &jobs)?)
    };
    // SAFETY: the forward FFTs write every ring's bins; the products every output bin;
    // nothing else of the spectra is read.
    let mut spec_in = [unsafe { gpu.alloc::<f64>(2 * npix) }?, unsafe {
        gpu.alloc::<f64>(2 * npix)
    }?];
    let mut spec_out = [unsafe { gpu.alloc::<f64>(2 * npix) }?, unsafe {
        gpu.alloc::<f64>(2 * npix)
    }?];
    let direct = Downloads::page_locked(&gpu, outs)?;
    // declared after every buffer: dropped (the copy stream synchronised) before them
    let mut down = Downloads::new(&gpu, obufs.len().max(1), direct);
    tl.mark(&gpu, "setup")?;
    for (b, (plan, tabs)) in plans.iter().zip(&tables).enumerate() {
        let chunks = tabs.chunks(CHUNK_TAPS.min(room), room)?;
        let dev = upload(&gpu, tabs)?;
        let mut taps = taps_buffer(&gpu, &chunks)?;
        tl.mark(&gpu, "setup")?;
        if b == 0 {
            // the phased input spectra do not depend on the kernel: once for every plan
            let [s0, s1] = &mut spec_in;
            for (src, spec) in [(&mut d_map, s0), (&mut d_w, s1)] {
                ring_ffts(&gpu, plan, &mut polar, src, spec, true)?;
                phase(&gpu, &dev, tabs.tile_pair.len(), spec)?;
            }
            tl.mark(&gpu, "fft")?;
        }
        for c in &chunks {
            crate::backend::cancel::check()?;
            eval(&gpu, &dev, c, &plan.table, &mut taps)?;
            tl.mark(&gpu, "kernel")?;
            for (si, so) in spec_in.iter().zip(spec_out.iter_mut()) {
                products(&gpu, &dev, c, plan.rings.len(), &dev.first, &taps, si, so)?;
            }
            tl.mark(&gpu, "products")?;
        }
        drop(taps);
        // the previous beam's result comes down while these products run (staged mode)
        down.flush(&gpu, &out_refs(&obufs, &d_map), outs)?;
        let bi = down.buffer(&gpu, b, &out_refs(&obufs, &d_map), outs)?;
        let [o0, o1] = &mut spec_out;
        ring_ffts(&gpu, plan, &mut polar, &mut d_map, o0, false)?;
        ring_ffts(&gpu, plan, &mut polar, &mut d_w, o1, false)?;
        tl.mark(&gpu, "fft")?;
        divide(&gpu, &d_map, &d_w, thr[b], npix, obufs.get_mut(bi))?;
        tl.mark(&gpu, "normalise")?;
        down.queued(&gpu, bi, b, &out_refs(&obufs, &d_map), outs)?;
        tl.mark(&gpu, "d2h")?;
    }
    down.finish(&gpu, &out_refs(&obufs, &d_map), outs)?;
    tl.mark(&gpu, "d2h")?;
    tl.finish()?;
    gpu.sync()
}

/// The buffers outputs come down from: the two output buffers, or the first map buffer.
fn out_refs<'a>(obufs: &'a [CudaSlice<f64>], d_map: &'a CudaSlice<f64>) -> Vec<&'a CudaSlice<f64>> {
    if obufs.is_empty() {
        vec![d_map]
    } else {
        obufs.iter().collect()
    }
}
