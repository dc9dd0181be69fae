//! The per-chunk stages of the CUDA SHT, queued on the device: the ring FFTs of a chunk
//! (`ring_ffts`), synthesis (`synth`: Legendre, fold, inverse FFTs, scatter) and analysis
//! (`anal`: gather, forward FFTs, unfold, Legendre), each with the chunk's host transfers
//! (`io::ChunkIo`) around its kernels.

use std::collections::hash_map::Entry;

use super::io::ChunkIo;
use super::setup::{blocks, cfg, chunk_list, Ctx, Group, Work};
use super::{MODULE, TPB_ANA, TPB_MISC, TPB_SYN};
use crate::backend::cuda::fft::{FftKey, FftKind};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::ring_fft::{RingFft, RingJob};
use crate::backend::cuda::{CudaSlice, Gpu, PushKernelArg};
use crate::error::Result;
use crate::sht::Plan;

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
pub(super) fn synth(
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
            crate::backend::cancel::check()?;
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
pub(super) fn anal(
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
            crate::backend::cancel::check()?;
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
