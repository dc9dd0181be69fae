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
//! - `launch`: one function per kernel, the launches the full transform and the halves share.
//! - `halves`: the SHT halves (alm2leg, leg2map, map2leg, leg2alm) on m and ring subsets.
//! - `multi`: one transform split over several GPUs (m blocks, all-to-all, ring blocks).
//! - `mod.rs` (this file): the entry points `alm2map` and `map2alm` (with the Jacobi
//!   iterations), the kernel module name and block sizes.
//! - `setup`: the device tables, component groups, per-chunk scratch and launch shapes.
//! - `stages`: the per-chunk ring FFTs, synthesis and analysis (uses `setup` and `io`).
//! - `io`: the host transfers of a chunk overlapped with its kernels (a leaf).

use realfft::num_complex::Complex64 as C64;

pub mod halves;
mod io;
mod launch;
pub mod multi;
pub mod peer;
mod setup;
mod stages;

use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::transfer::prefault;
use crate::backend::cuda::{self, CudaSlice, Gpu, PushKernelArg};
use crate::error::{Error, Result};
use crate::real::Real;
use crate::sht::{Job, Plan};
use io::{MapDownload, MapUpload, Resident};
use setup::{blocks, cfg, fence_copy_stream, geo, groups, work, Ctx};
use stages::{anal, synth};

pub(super) const MODULE: &str = "sht";
/// Largest nside of the CUDA SHT (see `check_sizes`).
pub const MAX_NSIDE: usize = 1 << 27;
/// Threads of a Legendre block, synthesis and analysis: must equal LEG_TPB in kernels/sht.cu
/// (its coefficient tiles and the analysis' shared-memory columns are sized by it).
const TPB_LEG: u32 = 128;
const TPB_MISC: u32 = 256;

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
    // Pixel and alm offsets are 64-bit everywhere; the limit is the ring FFTs: Bluestein's
    // chirp index t² (t < 4·nphi) in kernels/ringfft.cu must stay below 2^63, and ring lengths
    // are 32-bit there.
    if plan.nside > MAX_NSIDE {
        return Err(Error::value(format!(
            "the CUDA SHT supports nside <= 2**27 = {MAX_NSIDE}, got {}",
            plan.nside
        )));
    }
    Ok(())
}

/// The limits of the multi-GPU SHT (`peer`): those of `check_sizes` but the m count, which is
/// checked per GPU there.
fn check_sizes_multi(plan: &Plan) -> Result<()> {
    if plan.nside > MAX_NSIDE {
        return Err(Error::value(format!(
            "the CUDA SHT supports nside <= 2**27 = {MAX_NSIDE}, got {}",
            plan.nside
        )));
    }
    Ok(())
}

/// Synthesis on the GPU.
pub fn alm2map(plan: &Plan, jobs: &[Job], alms: &[&[C64]], maps: &mut [&mut [f64]]) -> Result<()> {
    check_sizes(plan)?;
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
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
        launch::clean_f64(gpu, &gpu.stream, &mut d.slice_mut(0..m.len()))?;
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
    let _only = gpu.exclusive()?;
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
            crate::backend::cancel::check()?;
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
