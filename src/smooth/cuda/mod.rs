//! The CUDA engine of the ring method (`kernels/smooth.cu`), consuming the same [`RingPlan`] as
//! the CPU engine through the tables of `tables`.
//!
//! One call: the map goes up once; the forward ring FFTs write every ring's half spectrum at
//! its first pixel's complex offset (one batched cuFFT D2Z for the 2·nside+1 belt rings, the
//! shared Bluestein transform for the polar rings, north and south as one job) and
//! `smooth_phase` moves φ0 into them; per chunk of output pairs `smooth_kernel_eval` samples
//! the kernel rings and `smooth_products` sums C_ij·R̃_j straight into the folded, scaled output
//! spectra (no per-ring launches, no spectrum of length L stored); the inverse ring FFTs write
//! the result over the input map, which comes down once. Device memory: 40 bytes per pixel (the
//! map, two spectra of npix complex) plus the kernel samples and the FFT work: ~2 GB at nside
//! 2048, ~33 GB at nside 8192 (refused with a clear error where the budget is smaller).
//!
//! - `mod.rs` (this file): the launches of one call.
//! - `tables`: the host-built tables it uploads (a leaf: pure host code, also driven by the
//!   emulator test through `_core._ring_cuda_tables`).

pub mod blocked;
pub mod blocks;
pub mod masked;
mod outputs;
pub mod tables;

use crate::backend::cuda::fft::{FftKey, FftKind};
use crate::backend::cuda::pace::Pacer;
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::ring_fft::{RingFft, RingJob};
use crate::backend::cuda::{self, CudaSlice, Gpu, LaunchConfig, PushKernelArg};
use crate::error::Result;
use crate::smooth::RingPlan;
use tables::{Chunk, Tables, TILE};

const MODULE: &str = "smooth";
/// Support entries per block of smooth_kernel_eval (a warp each).
const EVAL_WARPS: usize = 4;
/// Most kernel samples one chunk keeps on the device (1 GB).
const CHUNK_TAPS: usize = 1 << 27;

/// The tables on the device.
struct Dev {
    first: CudaSlice<i64>,
    nphi: CudaSlice<i32>,
    shifted: CudaSlice<i32>,
    factor: CudaSlice<f64>,
    pairs: CudaSlice<i64>,
    scale: CudaSlice<f64>,
    tap_off: CudaSlice<i64>,
    tap_n: CudaSlice<i32>,
    flags: CudaSlice<i32>,
    len: CudaSlice<i32>,
    ab: CudaSlice<f64>,
    tile_pair: CudaSlice<i32>,
    tile_k0: CudaSlice<i32>,
    coef: CudaSlice<f64>,
}

fn upload(gpu: &Gpu, t: &Tables) -> Result<Dev> {
    Ok(Dev {
        first: gpu.upload_small(&t.first)?,
        nphi: gpu.upload_small(&t.nphi)?,
        shifted: gpu.upload_small(&t.shifted)?,
        factor: gpu.upload_small(&t.factor)?,
        pairs: gpu.upload_small(&t.pairs)?,
        scale: gpu.upload_small(&t.scale)?,
        tap_off: gpu.upload_small(&t.tap_off)?,
        tap_n: gpu.upload_small(&t.tap_n)?,
        flags: gpu.upload_small(&t.flags)?,
        len: gpu.upload_small(&t.len)?,
        ab: gpu.upload_small(&t.ab)?,
        tile_pair: gpu.upload_small(&t.tile_pair)?,
        tile_k0: gpu.upload_small(&t.tile_k0)?,
        coef: gpu.upload_small(&t.coef)?,
    })
}

fn cfg(blocks: usize, threads: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks.max(1) as u32, 1, 1),
        block_dim: (threads as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Polar rings (north and south mirror as one job), addressed by their first pixel: rows and
/// spectra both at stride 1.
fn polar_jobs(plan: &RingPlan) -> Vec<RingJob> {
    let nr = plan.rings.len();
    (0..plan.nside - 1)
        .map(|i| RingJob {
            n: plan.rings[i].nphi,
            a: plan.rings[i].first as usize,
            b: Some(plan.rings[nr - 1 - i].first as usize),
        })
        .collect()
}

/// The belt rings nside−1 ..= 3·nside−1: (first pixel of the first, count).
fn belt(plan: &RingPlan) -> (usize, usize) {
    (
        plan.rings[plan.nside - 1].first as usize,
        2 * plan.nside + 1,
    )
}

/// Map rows -> half spectra, or back when `!forward` (`spec` -> `map`).
fn ring_ffts(
    gpu: &Gpu,
    plan: &RingPlan,
    polar: &mut Option<RingFft>,
    map: &mut CudaSlice<f64>,
    spec: &mut CudaSlice<f64>,
    forward: bool,
) -> Result<()> {
    let n = 4 * plan.nside;
    let (b0, batch) = belt(plan);
    let kind = if forward { FftKind::D2Z } else { FftKind::Z2D };
    let key = FftKey {
        n,
        batch,
        idist: n,
        odist: n,
        kind,
    };
    let fp = gpu.fft_plan(key)?;
    if forward {
        gpu.fft_d2z(&fp, map, b0, spec, b0)?;
    } else {
        gpu.fft_z2d(&fp, spec, b0, map, b0)?;
    }
    if let Some(rf) = polar.as_mut() {
        if forward {
            rf.forward(gpu, map, 1, spec, 1)?;
        } else {
            rf.inverse(gpu, spec, 1, map, 1)?;
        }
    }
    Ok(())
}

/// Device bytes besides the kernel samples for `nmaps` maps at once: one map buffer, two
/// spectra per map, the FFT work.
fn fixed_bytes(plan: &RingPlan, jobs: &[RingJob], nmaps: usize) -> usize {
    let (_, batch) = belt(plan);
    (8 + 32 * nmaps) * plan.npix + RingFft::bytes_for(jobs) + 16 * batch * (2 * plan.nside + 1)
}

/// Device bytes the ring method needs at `nside` for `nmaps` maps smoothed together with one
/// kernel (one map buffer, two spectra per map, the FFT work: about (8 + 32·nmaps) bytes per
/// pixel); the kernel samples come on top, chunked into what is left. Needs no plan (the polar
/// rings have 4, 8, … 4·(nside − 1) pixels), so it is cheap at any nside.
pub fn device_bytes(nside: usize, nmaps: usize) -> usize {
    let npix = 12 * nside * nside;
    let batch = 2 * nside + 1;
    (8 + 32 * nmaps) * npix + RingFft::bytes_for(&polar_sizes(nside)) + 16 * batch * (2 * nside + 1)
}

/// The polar rings' transforms at `nside` by their lengths alone (4, 8, … 4·(nside − 1)
/// pixels), for sizing their work without a plan.
fn polar_sizes(nside: usize) -> Vec<RingJob> {
    (1..nside)
        .map(|i| RingJob {
            n: 4 * i,
            a: 0,
            b: None,
        })
        .collect()
}

/// A device buffer for the kernel samples of the largest of `chunks` (reused by each chunk).
fn taps_buffer(gpu: &Gpu, chunks: &[Chunk]) -> Result<CudaSlice<f64>> {
    let most = chunks
        .iter()
        .map(|c| c.taps.1 - c.taps.0)
        .max()
        .unwrap_or(0);
    // SAFETY: each chunk's samples are written by smooth_kernel_eval before they are read.
    unsafe { gpu.alloc::<f64>(most) }
}

/// Ring-method convolution of a float64 RING map on the GPU (both npix long).
pub fn convolve(plan: &RingPlan, map: &[f64], out: &mut [f64]) -> Result<()> {
    convolve_many(plan, &[map], &mut [out])
}

/// Ring-method convolution of several float64 RING maps with the same kernel on the GPU: the
/// tables go up once and each chunk's kernel samples are evaluated once for all the maps that
/// fit the device together (their spectra stay on the device; one map buffer is reused). Each
/// output equals [`convolve`] of its map (the same launches per map).
pub fn convolve_many(plan: &RingPlan, maps: &[&[f64]], outs: &mut [&mut [f64]]) -> Result<()> {
    convolve_beams(&[plan], maps, outs)
}

/// Ring-method convolution of several maps with several kernels (plans of one nside) on the
/// GPU; `outs[b·maps.len() + k]` is map k smoothed with plan b. The maps go up and through
/// the forward ring FFTs once (their phased spectra do not depend on the kernel) and stay on
/// the device while each plan's tables, samples, products and inverse FFTs run; each output
/// equals [`convolve`] of its map and plan (the same launches).
pub fn convolve_beams(plans: &[&RingPlan], maps: &[&[f64]], outs: &mut [&mut [f64]]) -> Result<()> {
    assert_eq!(
        outs.len(),
        plans.len() * maps.len(),
        "one output per plan and map"
    );
    if maps.is_empty() || plans.is_empty() {
        return Ok(());
    }
    let plan0 = plans[0];
    assert!(
        plans.iter().all(|p| p.nside == plan0.nside),
        "plans of one nside"
    );
    let jobs = polar_jobs(plan0);
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let budget = gpu.budget()?;
    let fixed1 = fixed_bytes(plan0, &jobs, 1);
    let forced = crate::backend::env::ring_block_pixels()?;
    if budget <= fixed1 || forced.is_some() {
        // the whole map does not fit (nside 16384 on one GPU): ring blocks
        let cap = blocked::block_cap(plan0, budget, forced)?;
        let tables = tables_of(plans)?;
        return blocked::convolve_blocked(&gpu, plans, &tables, maps, outs, cap, budget);
    }
    // Maps per group: as many as fit with at least a quarter of the rest left for samples.
    let per_map = 32 * plan0.npix;
    let spare = (budget - fixed1) * 3 / 4;
    let group = (1 + spare / per_map.max(1)).min(maps.len());
    let tables = tables_of(plans)?;
    let mut done = 0;
    while done < maps.len() {
        let end = (done + group).min(maps.len());
        let fixed = fixed_bytes(plan0, &jobs, end - done);
        let room = (budget.saturating_sub(fixed) / 8).max(1);
        let g = Group {
            jobs: &jobs,
            room,
            maps: &maps[done..end],
            first: done,
            nmaps: maps.len(),
        };
        run_group(&gpu, plans, &tables, &g, outs)?;
        done = end;
    }
    Ok(())
}

/// The maps first .. first + maps.len() of `nmaps`, run together with `room` samples' bytes / 8
/// left for the kernel samples.
struct Group<'a> {
    jobs: &'a [RingJob],
    room: usize,
    maps: &'a [&'a [f64]],
    first: usize,
    nmaps: usize,
}

/// One group of maps: up and forward FFTs once; per plan its tables, the chunks (samples once,
/// products per map), the inverse FFTs and the downloads. With a second map buffer (budget
/// permitting, more than one output) each output's download overlaps the next one's work
/// ([`outputs::Downloads`]).
fn run_group(
    gpu: &Gpu,
    plans: &[&RingPlan],
    tables: &[Tables],
    g: &Group,
    outs: &mut [&mut [f64]],
) -> Result<()> {
    let plan0 = plans[0];
    let npix = plan0.npix;
    let mut tl = Timeline::start(gpu)?;
    let mut bufs = vec![gpu.upload(g.maps[0])?];
    tl.mark(gpu, "h2d")?;
    let n_out = plans.len() * g.maps.len();
    let mut room = g.room;
    if n_out > 1 && room >= 2 * npix {
        // SAFETY: every output's inverse FFTs write all of the buffer before it is read.
        bufs.push(unsafe { gpu.alloc::<f64>(npix) }?);
        room -= npix;
    }
    let mut polar = if g.jobs.is_empty() {
        None
    } else {
        Some(RingFft::new(gpu, g.jobs)?)
    };
    let mut spec_in = Vec::with_capacity(g.maps.len());
    let mut spec_out = Vec::with_capacity(g.maps.len());
    for _ in g.maps {
        // SAFETY: the forward FFTs write every ring's bins; the products every output bin;
        // nothing else of the spectra is read.
        spec_in.push(unsafe { gpu.alloc::<f64>(2 * npix) }?);
        spec_out.push(unsafe { gpu.alloc::<f64>(2 * npix) }?);
    }
    let mine: Vec<usize> = (0..plans.len())
        .flat_map(|b| (0..g.maps.len()).map(move |k| b * g.nmaps + g.first + k))
        .collect();
    let direct = {
        let mut all = true;
        for &i in &mine {
            all &= outputs::Downloads::page_locked(gpu, std::slice::from_ref(&outs[i]))?;
        }
        all
    };
    // declared after the buffers: dropped (the copy stream synchronised) before them
    let mut down = outputs::Downloads::new(gpu, bufs.len(), direct);
    let mut j = 0;
    for (b, (plan, tabs)) in plans.iter().zip(tables).enumerate() {
        let chunks = tabs.chunks(CHUNK_TAPS.min(room), room)?;
        let dev = upload(gpu, tabs)?;
        let mut taps = taps_buffer(gpu, &chunks)?;
        tl.mark(gpu, "setup")?;
        if b == 0 {
            // the phased input spectra do not depend on the kernel: once for every plan
            for (k, spec) in spec_in.iter_mut().enumerate() {
                if k > 0 {
                    gpu.upload_into(g.maps[k], &mut bufs[0])?;
                    tl.mark(gpu, "h2d")?;
                }
                ring_ffts(gpu, plan, &mut polar, &mut bufs[0], spec, true)?;
                tl.mark(gpu, "fft")?;
                phase(gpu, &dev, tabs.tile_pair.len(), spec)?;
                tl.mark(gpu, "fft")?;
            }
        }
        let tab = &plan.table;
        // Ctrl-C: a poll before each chunk, at most pace::DEPTH chunks queued (issue 17).
        let mut pace = Pacer::new(gpu);
        for c in &chunks {
            pace.before()?;
            eval(gpu, &dev, c, tab, &mut taps)?;
            tl.mark(gpu, "kernel")?;
            for (si, so) in spec_in.iter().zip(spec_out.iter_mut()) {
                products(gpu, &dev, c, plan.rings.len(), &dev.first, &taps, si, so)?;
            }
            tl.mark(gpu, "products")?;
            pace.after()?;
        }
        drop(pace);
        drop(taps);
        // the previous beam's outputs come down while this beam's products run (staged mode)
        down.flush(gpu, &bufs.iter().collect::<Vec<_>>(), outs)?;
        for so in spec_out.iter_mut() {
            let bi = down.buffer(gpu, j, &bufs.iter().collect::<Vec<_>>(), outs)?;
            ring_ffts(gpu, plan, &mut polar, &mut bufs[bi], so, false)?;
            tl.mark(gpu, "fft")?;
            down.queued(gpu, bi, mine[j], &bufs.iter().collect::<Vec<_>>(), outs)?;
            tl.mark(gpu, "d2h")?;
            j += 1;
        }
    }
    down.finish(gpu, &bufs.iter().collect::<Vec<_>>(), outs)?;
    tl.mark(gpu, "d2h")?;
    tl.finish()?;
    gpu.sync()
}

/// The tables of every plan, built on the host's cores at once (a batch of beams: the GPU
/// then runs the beams back to back instead of waiting for each beam's tables).
fn tables_of(plans: &[&RingPlan]) -> Result<Vec<Tables>> {
    use rayon::prelude::*;
    crate::backend::threads::install(|| {
        plans
            .par_iter()
            .map(|p| Tables::new(p))
            .collect::<Result<Vec<_>>>()
    })?
}

fn phase(gpu: &Gpu, d: &Dev, tiles: usize, spec: &mut CudaSlice<f64>) -> Result<()> {
    let f = gpu.function(MODULE, "smooth_phase")?;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&d.tile_pair)
        .arg(&d.tile_k0)
        .arg(&d.pairs)
        .arg(&d.first)
        .arg(&d.nphi)
        .arg(&d.shifted)
        .arg(&d.factor)
        .arg(spec);
    // SAFETY: matches smooth_phase; the tiles cover each ring's bins inside `spec`.
    unsafe { l.launch(cfg(tiles, TILE)) }?;
    Ok(())
}

fn eval(
    gpu: &Gpu,
    d: &Dev,
    c: &Chunk,
    tab: &crate::smooth::Table,
    taps: &mut CudaSlice<f64>,
) -> Result<()> {
    let n = c.entries.1 - c.entries.0;
    if n == 0 {
        return Ok(());
    }
    let (e0, e1, tap0) = (c.entries.0 as i64, c.entries.1 as i64, c.taps.0 as i64);
    let ncoef = tab.coef.len() as i64;
    let f = gpu.function(MODULE, "smooth_kernel_eval")?;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&d.tap_off)
        .arg(&d.tap_n)
        .arg(&d.flags)
        .arg(&d.len)
        .arg(&d.ab)
        .arg(&e0)
        .arg(&e1)
        .arg(&tap0)
        .arg(&d.coef)
        .arg(&ncoef)
        .arg(&tab.inv_h)
        .arg(&tab.u2_cut)
        .arg(taps);
    // SAFETY: matches smooth_kernel_eval; the chunk's samples fit `taps`.
    unsafe { l.launch(cfg(n.div_ceil(EVAL_WARPS), 32 * EVAL_WARPS)) }?;
    Ok(())
}

/// `smooth_products` with the rings' spectra at `first` (the whole map's, or a block's).
#[allow(clippy::too_many_arguments)]
fn products(
    gpu: &Gpu,
    d: &Dev,
    c: &Chunk,
    nrings: usize,
    first: &CudaSlice<i64>,
    taps: &CudaSlice<f64>,
    spec_in: &CudaSlice<f64>,
    spec_out: &mut CudaSlice<f64>,
) -> Result<()> {
    let nt = c.tiles.1 - c.tiles.0;
    if nt == 0 {
        return Ok(());
    }
    let (tap0, nr) = (c.taps.0 as i64, nrings as i64);
    let tp = d.tile_pair.slice(c.tiles.0..c.tiles.1);
    let tk = d.tile_k0.slice(c.tiles.0..c.tiles.1);
    let f = gpu.function(MODULE, "smooth_products")?;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&tp)
        .arg(&tk)
        .arg(&d.pairs)
        .arg(&d.scale)
        .arg(&d.tap_n)
        .arg(&d.flags)
        .arg(&d.tap_off)
        .arg(&tap0)
        .arg(taps)
        .arg(first)
        .arg(&d.nphi)
        .arg(&d.shifted)
        .arg(&nr)
        .arg(spec_in)
        .arg(spec_out);
    // SAFETY: matches smooth_products; every pair's rings and entries lie in the tables.
    unsafe { l.launch(cfg(nt, TILE)) }?;
    Ok(())
}
