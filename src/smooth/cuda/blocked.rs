//! The GPU ring method block by block (`blocks`): for maps that do not fit the device whole
//! (nside 16384: 147 GB for the whole-map engine). Per plan, map and block: the block's input
//! rings go up, through the forward ring FFTs and the phase, each chunk's kernel samples and
//! products fill the block's output spectra, the inverse FFTs write the output rings and they
//! come down into their place in the output. The same kernels and the same per-ring arithmetic
//! as the whole-map engine (the results are equal); the halo rings (inputs of a block that are
//! another block's outputs) are transformed once per block they feed.
//!
//! Device memory: 40 bytes per block pixel (the block's map buffer and two spectra) plus
//! [`reserve`] (the kernel samples' buffer, the polar rings' transform work, the belt's cuFFT
//! plans); blocks are sized to the budget. [`min_bytes`] is what the engine asks for at least.

use super::blocks::{self, Block, Ranges};
use super::tables::{Tables, TILE};
use super::{cfg, upload, CHUNK_TAPS, MODULE};
use crate::backend::cuda::fft::{FftKey, FftKind};
use crate::backend::cuda::pace::Pacer;
use crate::backend::cuda::ring_fft::{RingFft, RingJob};
use crate::backend::cuda::{CudaSlice, Gpu, PushKernelArg};
use crate::error::{Error, Result};
use crate::smooth::RingPlan;

/// Belt rings per cuFFT call (calls of 2^k ≤ this many rings: a bounded set of cached plans).
const BELT_BATCH: usize = 256;
/// Bytes per block pixel: the map buffer and the input and output spectra.
pub const BLOCK_BYTES_PER_PIXEL: usize = 40;
/// The smallest block the engine accepts from the budget, as a fraction of the map (below it
/// the halo and the launches per block would dominate): npix / MIN_BLOCK_DIVISOR pixels.
pub const MIN_BLOCK_DIVISOR: usize = 16;

/// Device bytes besides the blocks: the kernel samples (≤ 1 GB), the polar rings' Bluestein
/// work (≤ 2 × 512 MB: forward and inverse sets), the belt's cuFFT plans (both directions,
/// calls of up to BELT_BATCH rings).
pub fn reserve(nside: usize) -> usize {
    let belt = BELT_BATCH.min(2 * nside + 1);
    8 * CHUNK_TAPS
        + 2 * RingFft::bytes_for(&super::polar_sizes(nside))
        + 2 * 2 * 16 * belt * (2 * nside + 1)
}

/// The least device memory the blocked engine runs in at `nside`: [`reserve`] plus blocks of
/// npix / MIN_BLOCK_DIVISOR pixels.
pub fn min_bytes(nside: usize) -> usize {
    reserve(nside) + BLOCK_BYTES_PER_PIXEL * 12 * nside * nside / MIN_BLOCK_DIVISOR
}

/// Pixels per block for `budget` bytes, or a GpuMemoryError naming the bytes. `forced`: the
/// block size the caller asked for (`SKYCONV_RING_BLOCK_PIXELS`; tests).
pub fn block_cap(plan: &RingPlan, budget: usize, forced: Option<usize>) -> Result<usize> {
    if let Some(c) = forced {
        return Ok(c.max(1));
    }
    let need = min_bytes(plan.nside);
    if budget < need {
        return Err(Error::GpuMemory(format!(
            "the ring method at nside {} needs at least {} bytes ({:.1} GB) of GPU memory in \
             blocks ({} bytes for the whole map at once), {} bytes are available; use \
             device='cpu'",
            plan.nside,
            need,
            need as f64 / 1e9,
            super::device_bytes(plan.nside, 1),
            budget
        )));
    }
    Ok((budget - reserve(plan.nside)) / BLOCK_BYTES_PER_PIXEL)
}

/// Ring-method convolution, block by block, of every map with every plan (`outs[b·maps.len()
/// + k]`: map k with plan b), blocks of at most `cap` pixels.
pub fn convolve_blocked(
    gpu: &Gpu,
    plans: &[&RingPlan],
    tables: &[Tables],
    maps: &[&[f64]],
    outs: &mut [&mut [f64]],
    cap: usize,
    budget: usize,
) -> Result<()> {
    let nmaps = maps.len();
    for (b, (plan, tabs)) in plans.iter().zip(tables).enumerate() {
        let bl = blocks::blocks(plan, cap);
        let most = bl.iter().map(|x| x.pixels).max().unwrap_or(1);
        let need = BLOCK_BYTES_PER_PIXEL * most + reserve(plan.nside);
        if need > budget {
            return Err(Error::GpuMemory(format!(
                "the ring method at nside {} needs {} bytes ({:.1} GB) of GPU memory for its \
                 largest ring block ({} pixels: the kernel reaches over many rings), {} bytes \
                 are available; use device='cpu' or method='harmonic'",
                plan.nside,
                need,
                need as f64 / 1e9,
                most,
                budget
            )));
        }
        // says so (SKYCONV_TRACE=1): the blocks and the memory they take
        crate::backend::trace::record(
            "smooth ring blocks",
            &format!(
                "nside {}: {} blocks of at most {} pixels, {} bytes of GPU memory ({} bytes \
                 for the whole map, {} available)",
                plan.nside,
                bl.len(),
                most,
                need,
                super::device_bytes(plan.nside, 1),
                budget
            ),
            0.0,
        );
        let dev = upload(gpu, tabs)?;
        // SAFETY: each block's uploads write every input ring's pixels and the forward FFTs
        // every input ring's bins; the products write every output bin before the inverse
        // FFTs read it; only output rings come down.
        let mut buf = unsafe { gpu.alloc::<f64>(most) }?;
        let mut spec_in = unsafe { gpu.alloc::<f64>(2 * most) }?;
        let mut spec_out = unsafe { gpu.alloc::<f64>(2 * most) }?;
        let room = CHUNK_TAPS; // counted in reserve()
        for (k, map) in maps.iter().enumerate() {
            let out = &mut *outs[b * nmaps + k];
            for block in &bl {
                crate::backend::cancel::check()?;
                let first = gpu.upload_small(&block.first)?;
                for &(a, z) in &block.ins {
                    let (s, e) = blocks::map_range(plan, a, z);
                    let at = block.first[a] as usize;
                    gpu.upload_at_on(&gpu.stream, &map[s..e], &mut buf, at)?;
                }
                ffts(gpu, plan, block, &block.ins, &mut buf, &mut spec_in, true)?;
                phase(gpu, plan, tabs, &dev, block, &first, &mut spec_in)?;
                let chunks = tabs.chunks_between(block.pairs.0, block.pairs.1, room, room)?;
                let mut taps = super::taps_buffer(gpu, &chunks)?;
                let mut pace = Pacer::new(gpu);
                for c in &chunks {
                    pace.before()?;
                    super::eval(gpu, &dev, c, &plan.table, &mut taps)?;
                    super::products(
                        gpu,
                        &dev,
                        c,
                        plan.rings.len(),
                        &first,
                        &taps,
                        &spec_in,
                        &mut spec_out,
                    )?;
                    pace.after()?;
                }
                drop(pace);
                drop(taps);
                ffts(
                    gpu,
                    plan,
                    block,
                    &block.outs,
                    &mut buf,
                    &mut spec_out,
                    false,
                )?;
                for &(a, z) in &block.outs {
                    let (s, e) = blocks::map_range(plan, a, z);
                    let at = block.first[a] as usize;
                    gpu.download_at_on(&gpu.stream, &buf, at, &mut out[s..e])?;
                }
            }
        }
    }
    gpu.sync()
}

/// The ring FFTs of the rings `which` of a block (packed at `block.first`): map rows -> half
/// spectra, or back when `!forward` (`spec` -> `map`).
fn ffts(
    gpu: &Gpu,
    plan: &RingPlan,
    block: &Block,
    which: &Ranges,
    map: &mut CudaSlice<f64>,
    spec: &mut CudaSlice<f64>,
    forward: bool,
) -> Result<()> {
    let nside = plan.nside;
    let nr = plan.rings.len();
    let n = 4 * nside;
    let (b0, b1) = (nside - 1, 3 * nside - 1);
    let in_which = |r: usize| which.iter().any(|&(a, z)| a <= r && r <= z);
    let mut jobs = Vec::new();
    for &(a, z) in which {
        // the belt: calls of 2^k rings, at most BELT_BATCH (a few cached plans)
        let (c, d) = (a.max(b0), z.min(b1));
        let mut r = c;
        while c <= d && r <= d {
            let left = d + 1 - r;
            let batch = 1usize << (usize::BITS - 1 - left.min(BELT_BATCH).leading_zeros());
            let kind = if forward { FftKind::D2Z } else { FftKind::Z2D };
            let fp = gpu.fft_plan(FftKey {
                n,
                batch,
                idist: n,
                odist: n,
                kind,
            })?;
            let at = block.first[r] as usize;
            if forward {
                gpu.fft_d2z(&fp, map, at, spec, at)?;
            } else {
                gpu.fft_z2d(&fp, spec, at, map, at)?;
            }
            r += batch;
        }
        // polar rings: north with its south mirror as one job where both are here
        for r in a..=z {
            if r >= b0 && r <= b1 {
                continue;
            }
            let m = nr - 1 - r;
            let job = if r < b0 {
                RingJob {
                    n: plan.rings[r].nphi,
                    a: block.first[r] as usize,
                    b: in_which(m).then_some(block.first[m] as usize),
                }
            } else if !in_which(m) {
                RingJob {
                    n: plan.rings[r].nphi,
                    a: block.first[r] as usize,
                    b: None,
                }
            } else {
                continue; // rides with its northern mirror
            };
            jobs.push(job);
        }
    }
    if !jobs.is_empty() {
        let mut rf = RingFft::new(gpu, &jobs)?;
        if forward {
            rf.forward(gpu, map, 1, spec, 1)?;
        } else {
            rf.inverse(gpu, spec, 1, map, 1)?;
        }
    }
    Ok(())
}

/// `smooth_phase` over the rings of the block's inputs: the tiles of the pairs whose ring or
/// mirror is an input ring (`blocks::phase_pairs`).
fn phase(
    gpu: &Gpu,
    plan: &RingPlan,
    tabs: &Tables,
    d: &super::Dev,
    block: &Block,
    first: &CudaSlice<i64>,
    spec: &mut CudaSlice<f64>,
) -> Result<()> {
    let (q0, q1) = blocks::phase_pairs(plan, block);
    let (t0, t1) = tabs.tiles_of(q0, q1);
    if t1 == t0 {
        return Ok(());
    }
    let tp = d.tile_pair.slice(t0..t1);
    let tk = d.tile_k0.slice(t0..t1);
    let f = gpu.function(MODULE, "smooth_phase")?;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&tp)
        .arg(&tk)
        .arg(&d.pairs)
        .arg(first)
        .arg(&d.nphi)
        .arg(&d.shifted)
        .arg(&d.factor)
        .arg(spec);
    // SAFETY: matches smooth_phase; the tiles' rings are the block's inputs, inside `spec`.
    unsafe { l.launch(cfg(t1 - t0, TILE)) }?;
    Ok(())
}
