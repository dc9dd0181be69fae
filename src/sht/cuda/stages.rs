//! The per-chunk stages of the CUDA SHT, queued on the device: the ring FFTs of a chunk
//! (`ring_ffts`), synthesis (`synth`: Legendre, fold, inverse FFTs, scatter) and analysis
//! (`anal`: gather, forward FFTs, unfold, Legendre), each with the chunk's host transfers
//! (`io::ChunkIo`) around its kernels.

use std::collections::hash_map::Entry;

use super::io::ChunkIo;
use super::launch::{self, LegTabs, RingTabs};
use super::setup::{chunk_list, Ctx, Group, Work};
use crate::backend::cuda::pace::Pacer;
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::ring_fft::{RingFft, RingJob};
use crate::backend::cuda::{CudaSlice, Gpu};
use crate::error::Result;
use crate::sht::Plan;

/// Ring FFTs of one chunk for all `nc` components of a group: spectra -> rows (inverse) or
/// rows -> spectra (forward). Rows are laid out [row][component]: all equatorial rings of the
/// chunk are one batched real cuFFT call; the polar rings (a different length per pair) go
/// through the shared Bluestein ring transform, north and south rows of a pair as one job.
pub(super) fn ring_ffts(
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
        // the length's shared plans: no plan per chunk's row count
        if forward {
            gpu.fft_d2z_rows(wlen, batch, &w.rows, r * wlen, wlen, &mut w.spec, r * h, h)?;
        } else {
            gpu.fft_z2d_rows(
                wlen,
                batch,
                &mut w.spec,
                r * h,
                h,
                &mut w.rows,
                r * wlen,
                wlen,
            )?;
        }
    }
    Ok(())
}

/// The group's components of `bufs`, in the group's order (distinct by construction).
pub(super) fn comps_mut<'a>(
    bufs: &'a mut [CudaSlice<f64>],
    comps: &[usize],
) -> Vec<&'a mut CudaSlice<f64>> {
    let mut taken: Vec<Option<&'a mut CudaSlice<f64>>> = bufs.iter_mut().map(Some).collect();
    comps
        .iter()
        .map(|&ci| taken[ci].take().expect("distinct components"))
        .collect()
}

fn tabs<'a>(cx: &'a Ctx) -> (LegTabs<'a>, RingTabs<'a>) {
    let (plan, g) = (cx.plan, &cx.g);
    (
        LegTabs {
            lmax: plan.lay.lmax,
            norms: &g.norms,
            lnfact: &g.lnfact,
            mlist: &g.mlist,
            moff: &g.moff,
            ncol: plan.lay.mmax + 1,
            pair_x: &g.pair_x,
            pair_s: &g.pair_s,
        },
        RingTabs {
            nside: plan.nside,
            nphi: &g.nphi,
            shift: &g.shift,
            first: &g.first,
            w: &g.w,
            direct: false,
        },
    )
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
    let (gpu, plan) = (cx.gpu, cx.plan);
    let (lt, rt) = tabs(cx);
    // Ctrl-C: a poll before each chunk and at most pace::DEPTH chunks queued (issue 17).
    let mut pace = Pacer::new(gpu);
    for grp in groups {
        let nc = grp.comps.len();
        let a = |i: usize| &alms[grp.comps[i.min(nc - 1)]];
        for (p0, np) in chunk_list(plan, w.np_max) {
            pace.before()?;
            launch::leg_synth(
                gpu,
                &gpu.stream,
                grp,
                [a(0), a(1), a(2)],
                &lt,
                p0,
                np,
                &mut w.phase.slice_mut(..),
            )?;
            tl.mark(gpu, "legendre")?;
            launch::fold(gpu, &w.phase, &mut w.spec, plan.lay.mmax, &rt, p0, np, nc)?;
            tl.mark(gpu, "fold")?;
            ring_ffts(gpu, plan, w, p0, np, nc, false)?;
            tl.mark(gpu, "ring fft")?;
            let outs = comps_mut(maps, &grp.comps);
            launch::scatter(
                gpu,
                &mut w.rows,
                outs,
                (&mut w.dummy1, &mut w.dummy2),
                &rt,
                p0,
                np,
            )?;
            tl.mark(gpu, "scatter")?;
            io.after(gpu, plan, p0, np, maps)?;
            pace.after()?;
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
    let (gpu, plan) = (cx.gpu, cx.plan);
    let (lt, rt) = tabs(cx);
    for a in alms.iter_mut() {
        gpu.stream.memset_zeros(a)?;
    }
    let mut pace = Pacer::new(gpu);
    for grp in groups {
        let nc = grp.comps.len();
        for (p0, np) in chunk_list(plan, w.np_max) {
            pace.before()?;
            io.before(gpu, plan, p0, np, maps)?;
            tl.mark(gpu, "h2d")?;
            let ins = comps_mut(maps, &grp.comps);
            launch::gather(
                gpu,
                ins,
                (&mut w.dummy1, &mut w.dummy2),
                &mut w.rows,
                &rt,
                p0,
                np,
            )?;
            tl.mark(gpu, "gather")?;
            ring_ffts(gpu, plan, w, p0, np, nc, true)?;
            tl.mark(gpu, "ring fft")?;
            launch::unfold(gpu, &w.spec, &mut w.phase, plan.lay.mmax, &rt, p0, np, nc)?;
            tl.mark(gpu, "unfold")?;
            let outs = comps_mut(alms, &grp.comps);
            launch::leg_anal(
                gpu,
                &gpu.stream,
                grp,
                &w.phase.slice(..),
                outs,
                (&mut w.dummy1, &mut w.dummy2),
                &lt,
                p0,
                np,
            )?;
            tl.mark(gpu, "legendre")?;
            pace.after()?;
        }
    }
    Ok(())
}
