//! The two halves of each SHT on the GPU (the building blocks of a distributed transform), with
//! the same API and conventions as the CPU halves (`crate::sht::halves`):
//!
//! - `alm2leg`: alm of a list of m (packed m by m, l = m..=lmax) -> Δ_m(θ_r) on a list of rings,
//! - `leg2map`: Δ (m = 0..=mmax) on a list of rings -> the pixels of those rings,
//! - `map2leg`: the pixels of a list of rings -> their ring Fourier coefficients (no weight),
//! - `leg2alm`: the adjoint of `alm2leg`, with the quadrature weight 4π/npix × ring weight.
//!
//! They queue the kernels of the full transform (`launch`): the Legendre kernels on an m list
//! (their `mlist`/`moff` tables) and on the ring pairs holding the requested rings, the ring
//! kernels in their per-row ("direct") mode. Inputs are host arrays; each call is cut into
//! blocks of m and of ring pairs (or rows) that fit the device budget (`Gpu::budget`, which
//! `SKYCONV_GPU_MEMORY_LIMIT` caps): a block that does not fit is split, never refused.
//! `SKYCONV_SHT_CHUNK_PAIRS` and `SKYCONV_SHT_CHUNK_MS` force small blocks (tests).

use realfft::num_complex::Complex64 as C64;

use super::launch::{self, LegTabs, RingTabs};
use super::setup::{group_list, note_used};
use super::stages::comps_mut;
use super::{as_f64, as_f64_mut, check_sizes};
use crate::backend::cuda::fft::{FftKey, FftKind};
use crate::backend::cuda::ring_fft::{RingFft, RingJob};
use crate::backend::cuda::{self, CudaSlice, Gpu};
use crate::error::{Error, Result};
use crate::sht::halves::{check_len, check_rings, m_offsets};
use crate::sht::Plan;

/// Most bytes of one block's phase (or ring) buffers: blocks come back to host buffers of the
/// same size, so they stay moderate whatever the device holds.
const BLOCK_BYTES: usize = 4 << 30;

/// The device budget of a halves call: `Gpu::budget`, at most BLOCK_BYTES.
fn block_budget(gpu: &Gpu) -> Result<usize> {
    Ok(gpu.budget()?.min(BLOCK_BYTES))
}

/// m per block forced by SKYCONV_SHT_CHUNK_MS (tests), else None.
fn forced_chunk_ms() -> Option<usize> {
    std::env::var("SKYCONV_SHT_CHUNK_MS")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
}

/// Checks shared by the Legendre halves; returns the packed offset of each m (and the total).
fn check_ms(
    plan: &Plan,
    spin2: bool,
    ms: &[usize],
    rings: &[usize],
    nc: usize,
) -> Result<Vec<usize>> {
    check_sizes(plan)?;
    if spin2 && nc != 2 {
        return Err(Error::shape(format!(
            "spin 2 needs 2 components (E, B), got {nc}"
        )));
    }
    let (mut off, total) = m_offsets(plan, ms)?;
    check_rings(plan, rings)?;
    off.push(total);
    Ok(off)
}

/// The ring pairs holding `rings` (sorted, unique) and, per ring, (its pair's position, south).
struct PairSet {
    pairs: Vec<usize>,
    at: Vec<(usize, bool)>,
}

fn pair_set(plan: &Plan, rings: &[usize]) -> PairSet {
    let nr = plan.rings.len();
    let pair_of = |r: usize| r.min(nr - 1 - r);
    let mut pairs: Vec<usize> = rings.iter().map(|&r| pair_of(r)).collect();
    pairs.sort_unstable();
    pairs.dedup();
    let at = rings
        .iter()
        .map(|&r| {
            let k = pairs.binary_search(&pair_of(r)).expect("listed pair");
            (k, r != pair_of(r))
        })
        .collect();
    PairSet { pairs, at }
}

/// Blocks [j0, j1) of `ms` whose alm (nc components) take at most `bytes`, at most 65535 each.
fn m_blocks(off: &[usize], nc: usize, bytes: usize) -> Vec<(usize, usize)> {
    let n = off.len() - 1;
    let cap = forced_chunk_ms().unwrap_or(usize::MAX).min(65535);
    let mut out = Vec::new();
    let mut j0 = 0;
    while j0 < n {
        let mut j1 = j0 + 1;
        while j1 < n && j1 - j0 < cap && nc * 16 * (off[j1 + 1] - off[j0]) <= bytes {
            j1 += 1;
        }
        out.push((j0, j1));
        j0 = j1;
    }
    out
}

/// Tables of the Legendre kernels for the columns ms[j0..j1] and the pairs `ps`.
struct LegDev {
    norms: CudaSlice<f64>,
    lnfact: CudaSlice<f64>,
    pair_x: CudaSlice<f64>,
    pair_s: CudaSlice<f64>,
}

fn leg_dev(gpu: &Gpu, plan: &Plan, ps: &PairSet) -> Result<LegDev> {
    let px: Vec<f64> = ps.pairs.iter().map(|&p| plan.pairs[p].x).collect();
    let pss: Vec<f64> = ps.pairs.iter().map(|&p| plan.pairs[p].s).collect();
    Ok(LegDev {
        norms: gpu.upload_small(&plan.norms)?,
        lnfact: gpu.upload_small(&plan.ln_fact)?,
        pair_x: gpu.upload_small(&px)?,
        pair_s: gpu.upload_small(&pss)?,
    })
}

/// One m block ms[j0..j1] of a half on the device: its column tables and the pairs per launch
/// (alm2leg and leg2alm).
struct MBlock {
    ml: CudaSlice<i64>,
    mo: CudaSlice<i64>,
    ncol: usize,
    np_max: usize,
}

impl MBlock {
    /// The block's tables, and a phase buffer for one launch of as many of `npairs` pairs as
    /// fit `budget` beside the block's alm (`nc` components).
    fn new(
        gpu: &Gpu,
        ms: &[usize],
        off: &[usize],
        (j0, j1): (usize, usize),
        nc: usize,
        budget: usize,
        npairs: usize,
    ) -> Result<(Self, CudaSlice<f64>)> {
        let ncol = j1 - j0;
        let a0 = off[j0];
        let mlist: Vec<i64> = ms[j0..j1].iter().map(|&m| m as i64).collect();
        let moff: Vec<i64> = off[j0..j1].iter().map(|&o| (o - a0) as i64).collect();
        let per_pair = nc * 2 * ncol * 16;
        let np_max = pairs_per_block(
            budget.saturating_sub(nc * 16 * (off[j1] - a0)),
            per_pair,
            npairs,
        );
        // SAFETY: every launch's rows are written (leg_synth, or the upload before leg_anal)
        // before they are read.
        let phase = unsafe { gpu.alloc::<f64>(nc * 2 * np_max * ncol * 2) }?;
        let mb = MBlock {
            ml: gpu.upload_small(&mlist)?,
            mo: gpu.upload_small(&moff)?,
            ncol,
            np_max,
        };
        Ok((mb, phase))
    }

    fn tabs<'a>(&'a self, plan: &Plan, dev: &'a LegDev) -> LegTabs<'a> {
        LegTabs {
            lmax: plan.lay.lmax,
            norms: &dev.norms,
            lnfact: &dev.lnfact,
            mlist: &self.ml,
            moff: &self.mo,
            ncol: self.ncol,
            pair_x: &dev.pair_x,
            pair_s: &dev.pair_s,
        }
    }
}

/// Pairs per block: what fits `free` bytes at `per_pair` bytes each (SKYCONV_SHT_CHUNK_PAIRS
/// overrides), at least 1, at most `n`.
fn pairs_per_block(free: usize, per_pair: usize, n: usize) -> usize {
    crate::sht::forced_chunk_pairs()
        .unwrap_or(free / per_pair.max(1))
        .clamp(1, n.max(1))
}

/// Δ_m(θ_r) of the m in `ms` on `rings`: `leg[c]` is (len(rings), len(ms)) row-major.
pub fn alm2leg(
    plan: &Plan,
    spin2: bool,
    ms: &[usize],
    rings: &[usize],
    alm: &[&[C64]],
    leg: &mut [&mut [C64]],
) -> Result<()> {
    let nc_all = alm.len();
    let off = check_ms(plan, spin2, ms, rings, nc_all)?;
    check_len("leg (components)", leg.len(), nc_all)?;
    for a in alm {
        check_len("alm", a.len(), off[ms.len()])?;
    }
    let nm = ms.len();
    for l in leg.iter() {
        check_len("leg", l.len(), rings.len() * nm)?;
    }
    if nm == 0 || rings.is_empty() || nc_all == 0 {
        return Ok(());
    }
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let ps = pair_set(plan, rings);
    let dev = leg_dev(&gpu, plan, &ps)?;
    let budget = block_budget(gpu.as_ref())?;
    for grp in group_list(spin2, nc_all) {
        let nc = grp.comps.len();
        for (j0, j1) in m_blocks(&off, nc, budget / 2) {
            let (a0, a1) = (off[j0], off[j1]);
            let d_alm: Vec<CudaSlice<f64>> = grp
                .comps
                .iter()
                .map(|&c| gpu.upload(as_f64(&alm[c][a0..a1])))
                .collect::<Result<_>>()?;
            let (mb, mut d_phase) =
                MBlock::new(&gpu, ms, &off, (j0, j1), nc, budget, ps.pairs.len())?;
            note_used(&gpu);
            let (ncol, np_max) = (mb.ncol, mb.np_max);
            let t = mb.tabs(plan, &dev);
            let a = |i: usize| &d_alm[i.min(nc - 1)];
            let mut host = vec![C64::new(0.0, 0.0); nc * 2 * np_max * ncol];
            for k0 in (0..ps.pairs.len()).step_by(np_max) {
                let np = np_max.min(ps.pairs.len() - k0);
                launch::leg_synth(
                    &gpu,
                    &gpu.stream,
                    &grp,
                    [a(0), a(1), a(2)],
                    &t,
                    k0,
                    np,
                    &mut d_phase.slice_mut(..),
                )?;
                let plane = 2 * np * ncol;
                let h = &mut host[..nc * plane];
                gpu.download(&d_phase, as_f64_mut(h))?;
                for (ri, &(k, south)) in ps.at.iter().enumerate() {
                    if k < k0 || k >= k0 + np {
                        continue;
                    }
                    let row = 2 * (k - k0) + south as usize;
                    for (ci, &c) in grp.comps.iter().enumerate() {
                        let src = &h[ci * plane + row * ncol..ci * plane + (row + 1) * ncol];
                        leg[c][ri * nm + j0..ri * nm + j1].copy_from_slice(src);
                    }
                }
            }
        }
    }
    gpu.sync()
}

/// The adjoint of `alm2leg` with the quadrature weights: alm (packed for `ms`) of Δ on `rings`.
pub fn leg2alm(
    plan: &Plan,
    spin2: bool,
    ms: &[usize],
    rings: &[usize],
    leg: &[&[C64]],
    alm: &mut [&mut [C64]],
) -> Result<()> {
    let nc_all = leg.len();
    let off = check_ms(plan, spin2, ms, rings, nc_all)?;
    check_len("alm (components)", alm.len(), nc_all)?;
    let nm = ms.len();
    for l in leg {
        check_len("leg", l.len(), rings.len() * nm)?;
    }
    for a in alm.iter() {
        check_len("alm", a.len(), off[nm])?;
    }
    for a in alm.iter_mut() {
        a.fill(C64::new(0.0, 0.0));
    }
    if nm == 0 || rings.is_empty() || nc_all == 0 {
        return Ok(());
    }
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let ps = pair_set(plan, rings);
    let dev = leg_dev(&gpu, plan, &ps)?;
    let budget = block_budget(gpu.as_ref())?;
    let mut spare = (gpu.alloc_zeros::<f64>(1)?, gpu.alloc_zeros::<f64>(1)?);
    for grp in group_list(spin2, nc_all) {
        let nc = grp.comps.len();
        for (j0, j1) in m_blocks(&off, nc, budget / 2) {
            let (a0, a1) = (off[j0], off[j1]);
            let mut d_alm: Vec<CudaSlice<f64>> = grp
                .comps
                .iter()
                .map(|_| gpu.alloc_zeros::<f64>(2 * (a1 - a0)))
                .collect::<Result<_>>()?;
            let (mb, mut d_phase) =
                MBlock::new(&gpu, ms, &off, (j0, j1), nc, budget, ps.pairs.len())?;
            note_used(&gpu);
            let (ncol, np_max) = (mb.ncol, mb.np_max);
            let t = mb.tabs(plan, &dev);
            for k0 in (0..ps.pairs.len()).step_by(np_max) {
                let np = np_max.min(ps.pairs.len() - k0);
                let plane = 2 * np * ncol;
                let mut h = vec![C64::new(0.0, 0.0); nc * plane];
                for (ri, &(k, south)) in ps.at.iter().enumerate() {
                    if k < k0 || k >= k0 + np {
                        continue;
                    }
                    let row = 2 * (k - k0) + south as usize;
                    let wgt = plan.weights[rings[ri]];
                    for (ci, &c) in grp.comps.iter().enumerate() {
                        let src = &leg[c][ri * nm + j0..ri * nm + j1];
                        let dst = &mut h[ci * plane + row * ncol..ci * plane + (row + 1) * ncol];
                        for (d, s) in dst.iter_mut().zip(src) {
                            *d += s * wgt;
                        }
                    }
                }
                gpu.upload_into(as_f64(&h), &mut d_phase)?;
                let outs = comps_mut(&mut d_alm, &(0..nc).collect::<Vec<_>>());
                launch::leg_anal(
                    &gpu,
                    &gpu.stream,
                    &grp,
                    &d_phase.slice(..),
                    outs,
                    (&mut spare.0, &mut spare.1),
                    &t,
                    k0,
                    np,
                )?;
                // the host block may be freed only once its upload is done
                gpu.sync()?;
            }
            for (ci, &c) in grp.comps.iter().enumerate() {
                gpu.download(&d_alm[ci], as_f64_mut(&mut alm[c][a0..a1]))?;
            }
        }
    }
    gpu.sync()
}

/// Per-row tables of a list of rings in processing order (polar rings first, then the
/// equatorial ones, so that each block's equatorial rows are one batched real FFT), cut into
/// blocks of at most `n_max` rows.
struct Rows {
    /// Position in the caller's ring list of each processed row.
    order: Vec<usize>,
    /// The caller's pixel offset of each ring of its list.
    uoff: Vec<usize>,
    /// (first row, rows, pixels) of each block.
    blocks: Vec<(usize, usize, usize)>,
    nphi: CudaSlice<i64>,
    shift: CudaSlice<i32>,
    first: CudaSlice<i64>,
    w: CudaSlice<f64>,
}

fn rows_of(gpu: &Gpu, plan: &Plan, rings: &[usize], n_max: usize) -> Result<Rows> {
    let ns = plan.nside;
    let eq = |r: usize| plan.rings[r].nphi == 4 * ns;
    let mut order: Vec<usize> = (0..rings.len()).collect();
    order.sort_by_key(|&i| (eq(rings[i]), i));
    let mut uoff = Vec::with_capacity(rings.len());
    let mut acc = 0usize;
    for &r in rings {
        uoff.push(acc);
        acc += plan.rings[r].nphi;
    }
    let mut blocks = Vec::new();
    let mut first = vec![0i64; rings.len()];
    let mut q0 = 0;
    while q0 < order.len() {
        let n = n_max.min(order.len() - q0);
        let mut px = 0usize;
        for (q, f) in first.iter_mut().enumerate().skip(q0).take(n) {
            *f = px as i64;
            px += plan.rings[rings[order[q]]].nphi;
        }
        blocks.push((q0, n, px));
        q0 += n;
    }
    let nphi: Vec<i64> = order
        .iter()
        .map(|&i| plan.rings[rings[i]].nphi as i64)
        .collect();
    let shift: Vec<i32> = order
        .iter()
        .map(|&i| (plan.rings[rings[i]].phi0 != 0.0) as i32)
        .collect();
    Ok(Rows {
        order,
        uoff,
        blocks,
        nphi: gpu.upload_small(&nphi)?,
        shift: gpu.upload_small(&shift)?,
        first: gpu.upload_small(&first)?,
        w: gpu.upload_small(&vec![1.0f64; rings.len().max(1)])?,
    })
}

/// Ring FFTs of a block of `n` rows starting at processed row q0 (polar rows first).
#[allow(clippy::too_many_arguments)]
fn block_ffts(
    gpu: &Gpu,
    plan: &Plan,
    rings: &[usize],
    rows: &Rows,
    (q0, n): (usize, usize),
    nc: usize,
    spec: &mut CudaSlice<f64>,
    real: &mut CudaSlice<f64>,
    forward: bool,
) -> Result<()> {
    let ns = plan.nside;
    let (h, wlen) = (2 * ns + 1, 4 * ns);
    let nphi = |q: usize| plan.rings[rings[rows.order[q]]].nphi;
    let npolar = (q0..q0 + n).take_while(|&q| nphi(q) != wlen).count();
    if npolar > 0 {
        let jobs: Vec<RingJob> = (0..npolar)
            .flat_map(|i| {
                let len = nphi(q0 + i);
                (0..nc).map(move |c| RingJob {
                    n: len,
                    a: i * nc + c,
                    b: None,
                })
            })
            .collect();
        let mut rf = RingFft::new(gpu, &jobs)?;
        if forward {
            rf.forward(gpu, real, wlen, spec, h)?;
        } else {
            rf.inverse(gpu, spec, h, real, wlen)?;
        }
    }
    let neq = n - npolar;
    if neq > 0 {
        let r = npolar * nc;
        let batch = neq * nc;
        if forward {
            let pl = gpu.fft_plan(FftKey {
                n: wlen,
                batch,
                idist: wlen,
                odist: h,
                kind: FftKind::D2Z,
            })?;
            gpu.fft_d2z(&pl, real, r * wlen, spec, r * h)?;
        } else {
            let pl = gpu.fft_plan(FftKey {
                n: wlen,
                batch,
                idist: h,
                odist: wlen,
                kind: FftKind::Z2D,
            })?;
            gpu.fft_z2d(&pl, spec, r * h, real, r * wlen)?;
        }
    }
    Ok(())
}

/// Device buffers of the ring halves for blocks of up to `n_max` rows and `px_max` pixels.
struct RingBufs {
    phase: CudaSlice<f64>,
    spec: CudaSlice<f64>,
    real: CudaSlice<f64>,
    pix: Vec<CudaSlice<f64>>,
    spare: (CudaSlice<f64>, CudaSlice<f64>),
}

fn ring_bufs(gpu: &Gpu, plan: &Plan, nc: usize, mmax: usize, rows: &Rows) -> Result<RingBufs> {
    let ns = plan.nside;
    let n_max = rows.blocks.iter().map(|b| b.1).max().unwrap_or(1);
    let px_max = rows.blocks.iter().map(|b| b.2).max().unwrap_or(1);
    Ok(RingBufs {
        phase: gpu.alloc_zeros::<f64>(nc * n_max * (mmax + 1) * 2)?,
        spec: gpu.alloc_zeros::<f64>(nc * n_max * (2 * ns + 1) * 2)?,
        real: gpu.alloc_zeros::<f64>(nc * n_max * 4 * ns)?,
        pix: (0..nc)
            .map(|_| gpu.alloc_zeros::<f64>(px_max))
            .collect::<Result<_>>()?,
        spare: (gpu.alloc_zeros::<f64>(1)?, gpu.alloc_zeros::<f64>(1)?),
    })
}

/// Rows per block of the ring halves for `nc` components up to `mmax` (what half the budget
/// holds; SKYCONV_SHT_CHUNK_PAIRS forces twice its value), 1..=65535.
fn rows_per_block(gpu: &Gpu, plan: &Plan, nc: usize, mmax: usize) -> Result<usize> {
    let ns = plan.nside;
    // phase, spectrum, real rows and pixels of one row, all components
    let per_row = nc * (16 * (mmax + 1) + 16 * (2 * ns + 1) + 8 * 4 * ns + 8 * 4 * ns);
    let n = match crate::sht::forced_chunk_pairs() {
        Some(p) => 2 * p,
        None => block_budget(gpu)? / per_row.max(1),
    };
    Ok(n.clamp(1, 65535))
}

/// The pixels of `rings` (concatenated in the given order) from Δ on them: `leg[c]` is
/// (len(rings), mmax+1) row-major, `maps[c]` holds Σ nphi(ring) values.
pub fn leg2map(
    plan: &Plan,
    rings: &[usize],
    mmax: usize,
    leg: &[&[C64]],
    maps: &mut [&mut [f64]],
) -> Result<()> {
    check_rings(plan, rings)?;
    let nc_all = leg.len();
    check_len("maps (components)", maps.len(), nc_all)?;
    let npx: usize = rings.iter().map(|&r| plan.rings[r].nphi).sum();
    for l in leg {
        check_len("leg", l.len(), rings.len() * (mmax + 1))?;
    }
    for m in maps.iter() {
        check_len("map", m.len(), npx)?;
    }
    if rings.is_empty() || nc_all == 0 {
        return Ok(());
    }
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let w = mmax + 1;
    for grp in group_list(false, nc_all) {
        let nc = grp.comps.len();
        let rows = rows_of(&gpu, plan, rings, rows_per_block(&gpu, plan, nc, mmax)?)?;
        let mut b = ring_bufs(&gpu, plan, nc, mmax, &rows)?;
        note_used(&gpu);
        let rt = RingTabs {
            nside: plan.nside,
            nphi: &rows.nphi,
            shift: &rows.shift,
            first: &rows.first,
            w: &rows.w,
            direct: true,
        };
        for &(q0, n, px) in &rows.blocks {
            let mut h = vec![C64::new(0.0, 0.0); nc * n * w];
            for (ci, &c) in grp.comps.iter().enumerate() {
                for i in 0..n {
                    let ri = rows.order[q0 + i];
                    h[(ci * n + i) * w..(ci * n + i + 1) * w]
                        .copy_from_slice(&leg[c][ri * w..(ri + 1) * w]);
                }
            }
            gpu.upload_into(as_f64(&h), &mut b.phase)?;
            launch::fold(&gpu, &b.phase, &mut b.spec, mmax, &rt, q0, n, nc)?;
            block_ffts(
                &gpu,
                plan,
                rings,
                &rows,
                (q0, n),
                nc,
                &mut b.spec,
                &mut b.real,
                false,
            )?;
            let outs: Vec<&mut CudaSlice<f64>> = b.pix.iter_mut().collect();
            launch::scatter(
                &gpu,
                &mut b.real,
                outs,
                (&mut b.spare.0, &mut b.spare.1),
                &rt,
                q0,
                n,
            )?;
            let mut tmp = vec![0.0f64; px];
            for (ci, &c) in grp.comps.iter().enumerate() {
                gpu.download(&b.pix[ci], &mut tmp)?;
                let mut at = 0;
                for i in 0..n {
                    let ri = rows.order[q0 + i];
                    let len = plan.rings[rings[ri]].nphi;
                    maps[c][rows.uoff[ri]..rows.uoff[ri] + len].copy_from_slice(&tmp[at..at + len]);
                    at += len;
                }
            }
        }
    }
    gpu.sync()
}

/// The ring Fourier coefficients m = 0..=mmax of the pixels of `rings` (no quadrature weight;
/// pixels taken as they are, as the CPU half): `maps[c]` holds Σ nphi(ring) values, `leg[c]` is
/// (len(rings), mmax+1) row-major.
pub fn map2leg(
    plan: &Plan,
    rings: &[usize],
    mmax: usize,
    maps: &[&[f64]],
    leg: &mut [&mut [C64]],
) -> Result<()> {
    check_rings(plan, rings)?;
    let nc_all = maps.len();
    check_len("leg (components)", leg.len(), nc_all)?;
    let npx: usize = rings.iter().map(|&r| plan.rings[r].nphi).sum();
    for m in maps {
        check_len("map", m.len(), npx)?;
    }
    for l in leg.iter() {
        check_len("leg", l.len(), rings.len() * (mmax + 1))?;
    }
    if rings.is_empty() || nc_all == 0 {
        return Ok(());
    }
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let w = mmax + 1;
    for grp in group_list(false, nc_all) {
        let nc = grp.comps.len();
        let rows = rows_of(&gpu, plan, rings, rows_per_block(&gpu, plan, nc, mmax)?)?;
        let mut b = ring_bufs(&gpu, plan, nc, mmax, &rows)?;
        note_used(&gpu);
        let rt = RingTabs {
            nside: plan.nside,
            nphi: &rows.nphi,
            shift: &rows.shift,
            first: &rows.first,
            w: &rows.w,
            direct: true,
        };
        for &(q0, n, px) in &rows.blocks {
            let mut tmp = vec![0.0f64; px];
            for (ci, &c) in grp.comps.iter().enumerate() {
                let mut at = 0;
                for i in 0..n {
                    let ri = rows.order[q0 + i];
                    let len = plan.rings[rings[ri]].nphi;
                    tmp[at..at + len].copy_from_slice(&maps[c][rows.uoff[ri]..rows.uoff[ri] + len]);
                    at += len;
                }
                gpu.upload_into(&tmp, &mut b.pix[ci])?;
                // tmp is refilled for the next component only after this upload is done
                gpu.sync()?;
            }
            let ins: Vec<&mut CudaSlice<f64>> = b.pix.iter_mut().collect();
            launch::gather(
                &gpu,
                ins,
                (&mut b.spare.0, &mut b.spare.1),
                &mut b.real,
                &rt,
                q0,
                n,
            )?;
            block_ffts(
                &gpu,
                plan,
                rings,
                &rows,
                (q0, n),
                nc,
                &mut b.spec,
                &mut b.real,
                true,
            )?;
            launch::unfold(&gpu, &b.spec, &mut b.phase, mmax, &rt, q0, n, nc)?;
            let mut h = vec![C64::new(0.0, 0.0); nc * n * w];
            gpu.download(&b.phase, as_f64_mut(&mut h))?;
            for (ci, &c) in grp.comps.iter().enumerate() {
                for i in 0..n {
                    let ri = rows.order[q0 + i];
                    leg[c][ri * w..(ri + 1) * w]
                        .copy_from_slice(&h[(ci * n + i) * w..(ci * n + i + 1) * w]);
                }
            }
        }
    }
    gpu.sync()
}
