//! The two halves of each transform on the CPU, on blocks of m and blocks of rings: the building
//! blocks of distributed transforms (S2HAT's scheme: alm split by m, maps by rings, one
//! all-to-all of the ring coefficients Δ between the halves).
//!
//! - `alm2leg`: alm of the m in `ms` → Δ_m(θ_r) = Σ_l a_lm λ_lm(θ_r) on `rings` (the Legendre
//!   stage of alm2map; spin 2: the Q and U parts).
//! - `leg2map`: Δ_m, m = 0..=mmax, on `rings` → the pixels of those rings (the ring-FFT stage).
//! - `map2leg`: pixels of `rings` → their forward ring FFTs Σ_j p_j e^{−i m φ_j} (no weight).
//! - `leg2alm`: the adjoint of `alm2leg` including the quadrature weight (the plan's ring
//!   weights): Σ over ring blocks of leg2alm(map2leg(block)) is map2alm with iter = 0.
//!
//! Arrays: `alm[c]` holds the columns of the m in `ms`, m by m, l = m..=lmax each (healpy's
//! order restricted to `ms`); `leg[c]` is (rings.len(), number of m) row-major; `maps[c]` the
//! pixels of `rings` concatenated in the given order. Ring indices are RING-scheme ring numbers
//! 0..4·nside−1, north to south. The Legendre stage runs on ring pairs (a northern ring and its
//! southern mirror share the recurrence), so a block holding both rings of a pair costs the same
//! as one holding either.

use rayon::prelude::*;
use realfft::num_complex::Complex64 as C64;

use super::cpu::{self, Chunk, FftScratch, Job, LegScratch};
use super::Plan;
use crate::backend::threads::{install, Disjoint};
use crate::error::{Error, Result};

/// Checks `ms` (strictly increasing, ≤ the plan's mmax) and returns the offset of each m's
/// column in a packed alm block, plus the block's length (the CPU and CUDA halves).
pub(crate) fn m_offsets(plan: &Plan, ms: &[usize]) -> Result<(Vec<usize>, usize)> {
    if ms.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::value("ms must be strictly increasing"));
    }
    if let Some(&last) = ms.last() {
        if last > plan.lay.mmax {
            return Err(Error::value(format!(
                "ms must lie in 0..=mmax = {}, got m = {last}",
                plan.lay.mmax
            )));
        }
    }
    let mut offs = Vec::with_capacity(ms.len());
    let mut n = 0usize;
    for &m in ms {
        offs.push(n);
        n += plan.lay.mlen(m);
    }
    Ok((offs, n))
}

/// Checks `rings` (distinct, in range) and returns the chunk of ring pairs covering them
/// (ascending) and, per requested ring, its slot in the chunk's ring list (2q + south).
fn ring_chunk(plan: &Plan, rings: &[usize]) -> Result<(Chunk, Vec<usize>)> {
    let nr = plan.rings.len();
    let mut seen = vec![false; nr];
    for &r in rings {
        if r >= nr {
            return Err(Error::value(format!(
                "rings must lie in 0..4*nside-1 = {nr}, got {r}"
            )));
        }
        if std::mem::replace(&mut seen[r], true) {
            return Err(Error::value(format!(
                "rings must be distinct; ring {r} repeats"
            )));
        }
    }
    let pair_of = |r: usize| r.min(nr - 1 - r);
    let mut pairs: Vec<usize> = rings.iter().map(|&r| pair_of(r)).collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut pos = vec![usize::MAX; plan.pairs.len()];
    for (q, &p) in pairs.iter().enumerate() {
        pos[p] = q;
    }
    let slots = rings
        .iter()
        .map(|&r| 2 * pos[pair_of(r)] + usize::from(r > nr - 1 - r))
        .collect();
    Ok((Chunk { pairs }, slots))
}

/// The jobs of a halves call: spin 2 is one (E, B) → (Q, U) job on components 0 and 1, spin 0
/// one independent job per component.
fn jobs_of(ncomp: usize, spin2: bool) -> Result<Vec<Job>> {
    if ncomp == 0 {
        return Err(Error::shape("need at least one component"));
    }
    if spin2 {
        if ncomp != 2 {
            return Err(Error::shape(format!(
                "spin 2 needs 2 components (E, B or Q, U), got {ncomp}"
            )));
        }
        return Ok(vec![Job::Spin2([0, 1], [0, 1])]);
    }
    Ok((0..ncomp).map(|i| Job::Spin0(i, i)).collect())
}

/// A ShapeError unless `got == want` (the CPU and CUDA halves).
pub(crate) fn check_len(what: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(Error::shape(format!(
            "{what} has {got} elements, expected {want}"
        )));
    }
    Ok(())
}

/// Checks that every ring of `rings` lies in 0..4·nside − 1 (the CPU and CUDA halves).
pub(crate) fn check_rings(plan: &Plan, rings: &[usize]) -> Result<()> {
    let nr = plan.rings.len();
    if let Some(&r) = rings.iter().find(|&&r| r >= nr) {
        return Err(Error::value(format!(
            "rings must lie in 0..4*nside-1 = {nr}, got {r}"
        )));
    }
    Ok(())
}

/// Pixels of each ring in `rings` and the offset of each in the concatenated block.
fn ring_offsets(plan: &Plan, rings: &[usize]) -> Result<(Vec<usize>, usize)> {
    check_rings(plan, rings)?;
    let mut offs = Vec::with_capacity(rings.len());
    let mut n = 0usize;
    for &r in rings {
        offs.push(n);
        n += plan.rings[r].nphi;
    }
    Ok((offs, n))
}

/// Where each index of an axis of Δ cut into consecutive pieces of `sizes` lies: (piece, index
/// in the piece). Δ held as pieces (one per block of the other half of a distributed transform)
/// is read and written in place, not joined into one copy first.
fn piece_index(sizes: &[usize]) -> Vec<(usize, usize)> {
    sizes
        .iter()
        .enumerate()
        .flat_map(|(k, &n)| (0..n).map(move |j| (k, j)))
        .collect()
}

/// Checks the pieces of Δ of every component: `sizes.len()` pieces each, piece k holding
/// `sizes[k] * other` elements (the cut axis's `sizes[k]` indices times the other axis's).
fn check_pieces<P: AsRef<[C64]>>(
    what: &str,
    pieces: &[Vec<P>],
    sizes: &[usize],
    other: usize,
) -> Result<()> {
    for p in pieces {
        check_len(&format!("{what} (pieces)"), p.len(), sizes.len())?;
        for (q, &n) in p.iter().zip(sizes) {
            check_len(what, q.as_ref().len(), n * other)?;
        }
    }
    Ok(())
}

/// Legendre stage of the synthesis: `alm[c]` (the packed columns of the m in `ms`, lmax of the
/// plan) → `leg[c]` (rings.len() × ms.len(), row-major): Δ_m(θ_r) = Σ_l a_lm λ_lm(θ_r) (spin 2,
/// components (E, B) → the (Q, U) ring coefficients). Every element of `leg` is written.
pub fn alm2leg(
    plan: &Plan,
    spin2: bool,
    ms: &[usize],
    rings: &[usize],
    alm: &[&[C64]],
    leg: &mut [&mut [C64]],
) -> Result<()> {
    let ncomp = alm.len();
    let jobs = jobs_of(ncomp, spin2)?;
    check_len("leg (components)", leg.len(), ncomp)?;
    let (offs, nblk) = m_offsets(plan, ms)?;
    let (ch, slots) = ring_chunk(plan, rings)?;
    let (nm, nrg) = (ms.len(), rings.len());
    for c in 0..ncomp {
        check_len("alm", alm[c].len(), nblk)?;
        check_len("leg", leg[c].len(), nrg * nm)?;
    }
    if nm == 0 || nrg == 0 {
        return Ok(());
    }
    let level = cpu::simd_level();
    let nrc = ch.nrc();
    let ptrs: Vec<Disjoint<C64>> = leg.iter_mut().map(|l| Disjoint(l.as_mut_ptr())).collect();
    let (ptrs, slots, ch, jobs) = (&ptrs, &slots, &ch, &jobs);
    let tile = m_tile(nrc * ncomp);
    install(|| {
        (0..nm.div_ceil(tile)).into_par_iter().for_each_init(
            || (LegScratch::default(), Vec::new()),
            |(sc, ph), t| {
                let (j0, j1) = (t * tile, ((t + 1) * tile).min(nm));
                let per = ncomp * nrc;
                ph.clear();
                ph.resize((j1 - j0) * per, C64::new(0.0, 0.0));
                for j in j0..j1 {
                    let m = ms[j];
                    let cols: Vec<&[C64]> = alm
                        .iter()
                        .map(|a| &a[offs[j]..offs[j] + plan.lay.mlen(m)])
                        .collect();
                    let out = &mut ph[(j - j0) * per..(j - j0 + 1) * per];
                    cpu::synth_one(level, plan, ch, jobs, &cols, m, sc, out);
                }
                // row i of leg gets the tile's j1 - j0 adjacent elements in one go (one m at a
                // time would touch one cache line per element, nm·16 B apart)
                for (c, p) in ptrs.iter().enumerate() {
                    for (i, &s) in slots.iter().enumerate() {
                        for j in j0..j1 {
                            // SAFETY: elements (i, j0..j1) of leg c are written by the task of
                            // tile t only; i < nrg, j < nm.
                            unsafe { *p.get().add(i * nm + j) = ph[(j - j0) * per + c * nrc + s] };
                        }
                    }
                }
            },
        )
    })
}

/// m per task of the Legendre halves: adjacent m share each row of Δ's cache lines, so a task
/// takes a tile of them; its phase buffers (`per` complex values per m) stay within ~2 MiB.
fn m_tile(per: usize) -> usize {
    (((2 << 20) / 16) / per.max(1)).clamp(1, 8)
}

/// Ring-FFT stage of the synthesis: `leg[c]` (rings.len() × (mmax + 1): Δ_m for m = 0..=mmax)
/// → `maps[c]`, the pixels of `rings` concatenated in the given order:
/// p_j = Σ_m Δ_m e^{i m φ_j} + c.c. (m > 0). Every pixel is written.
pub fn leg2map(
    plan: &Plan,
    rings: &[usize],
    mmax: usize,
    leg: &[&[C64]],
    maps: &mut [&mut [f64]],
) -> Result<()> {
    let pieces: Vec<Vec<&[C64]>> = leg.iter().map(|l| vec![*l]).collect();
    leg2map_pieces(plan, rings, &[mmax + 1], &pieces, maps)
}

/// `leg2map` of Δ held as pieces along m: `leg[c][k]` holds the `widths[k]` consecutive m
/// after those of pieces 0..k on every ring (rings.len() × widths[k], row-major), m = 0..=mmax
/// in all (the m blocks' pieces of a distributed synthesis, read where they lie).
pub fn leg2map_pieces(
    plan: &Plan,
    rings: &[usize],
    widths: &[usize],
    leg: &[Vec<&[C64]>],
    maps: &mut [&mut [f64]],
) -> Result<()> {
    let ncomp = leg.len();
    check_len("maps (components)", maps.len(), ncomp)?;
    let (offs, npix) = ring_offsets(plan, rings)?;
    let nm: usize = widths.iter().sum();
    if nm == 0 {
        return Err(Error::shape("leg needs at least one m (m = 0)"));
    }
    let mmax = nm - 1;
    check_pieces("leg", leg, widths, rings.len())?;
    for m in maps.iter() {
        check_len("maps", m.len(), npix)?;
    }
    let at = piece_index(widths);
    let ptrs: Vec<Disjoint<f64>> = maps.iter_mut().map(|m| Disjoint(m.as_mut_ptr())).collect();
    let (ptrs, at) = (&ptrs, &at);
    install(|| {
        (0..rings.len())
            .into_par_iter()
            .for_each_init(FftScratch::default, |fs, i| {
                let ring = &plan.rings[rings[i]];
                let fft = cpu::fft_of(plan, rings[i]);
                cpu::twiddles(ring.phi0, nm, &mut fs.tw);
                let tw = std::mem::take(&mut fs.tw);
                for (c, p) in ptrs.iter().enumerate() {
                    let parts = &leg[c];
                    // SAFETY: ring i's pixels of map c are written by this task only.
                    let dst =
                        unsafe { std::slice::from_raw_parts_mut(p.get().add(offs[i]), ring.nphi) };
                    let coef = |m: usize| {
                        let (k, j) = at[m];
                        parts[k][i * widths[k] + j]
                    };
                    cpu::ring_synth(&fft, mmax, &tw, coef, fs, dst);
                }
                fs.tw = tw;
            })
    })
}

/// Ring-FFT stage of the analysis: `maps[c]` (the pixels of `rings`, concatenated) →
/// `leg[c]` (rings.len() × (mmax + 1)): Σ_j p_j e^{−i m φ_j} for m = 0..=mmax (no quadrature
/// weight; `leg2alm` applies it). Every element of `leg` is written.
pub fn map2leg(
    plan: &Plan,
    rings: &[usize],
    mmax: usize,
    maps: &[&[f64]],
    leg: &mut [&mut [C64]],
) -> Result<()> {
    let mut pieces: Vec<Vec<&mut [C64]>> = leg.iter_mut().map(|l| vec![&mut **l]).collect();
    map2leg_pieces(plan, rings, &[mmax + 1], maps, &mut pieces)
}

/// `map2leg` writing Δ as pieces along m (the layout of `leg2map_pieces`): piece k of each
/// component gets the `widths[k]` consecutive m after those of pieces 0..k, m = 0..=mmax in
/// all (one piece per m block of a distributed analysis, with no cut afterwards).
pub fn map2leg_pieces(
    plan: &Plan,
    rings: &[usize],
    widths: &[usize],
    maps: &[&[f64]],
    leg: &mut [Vec<&mut [C64]>],
) -> Result<()> {
    let ncomp = maps.len();
    check_len("leg (components)", leg.len(), ncomp)?;
    let (offs, npix) = ring_offsets(plan, rings)?;
    let nm: usize = widths.iter().sum();
    if nm == 0 {
        return Err(Error::value("leg needs at least one m (m = 0)"));
    }
    let mmax = nm - 1;
    check_pieces("leg", leg, widths, rings.len())?;
    for m in maps {
        check_len("maps", m.len(), npix)?;
    }
    let at = piece_index(widths);
    let ptrs: Vec<Vec<Disjoint<C64>>> = leg
        .iter_mut()
        .map(|p| p.iter_mut().map(|l| Disjoint(l.as_mut_ptr())).collect())
        .collect();
    let (ptrs, at) = (&ptrs, &at);
    install(|| {
        (0..rings.len())
            .into_par_iter()
            .for_each_init(FftScratch::default, |fs, i| {
                let ring = &plan.rings[rings[i]];
                let fft = cpu::fft_of(plan, rings[i]);
                cpu::twiddles(-ring.phi0, nm, &mut fs.tw);
                let tw = std::mem::take(&mut fs.tw);
                for (c, p) in ptrs.iter().enumerate() {
                    let pix = &maps[c][offs[i]..offs[i] + ring.nphi];
                    cpu::ring_anal(&fft, mmax, &tw, pix, fs, |m, v| {
                        let (k, j) = at[m];
                        // SAFETY: row i of each piece of leg c is written by this task only.
                        unsafe { *p[k].get().add(i * widths[k] + j) = v }
                    });
                }
                fs.tw = tw;
            })
    })
}

/// Legendre stage of the analysis, the adjoint of `alm2leg` with the quadrature weights:
/// `leg[c]` (rings.len() × ms.len(): ring coefficients of the m in `ms`, unweighted, as
/// `map2leg` gives them) → `alm[c]` (packed columns of `ms`, overwritten):
/// a_lm = Σ_r w_r Δ_m(θ_r) λ_lm(θ_r) (spin 2: (Q, U) → (E, B)), w_r the plan's weight of ring r.
pub fn leg2alm(
    plan: &Plan,
    spin2: bool,
    ms: &[usize],
    rings: &[usize],
    leg: &[&[C64]],
    alm: &mut [&mut [C64]],
) -> Result<()> {
    let pieces: Vec<Vec<&[C64]>> = leg.iter().map(|l| vec![*l]).collect();
    leg2alm_pieces(plan, spin2, ms, rings, &[rings.len()], &pieces, alm)
}

/// `leg2alm` of Δ held as pieces along the rings: `leg[c][k]` holds the `sizes[k]` rings of
/// `rings` after those of pieces 0..k (sizes[k] × ms.len(), row-major) (the ring blocks'
/// pieces of a distributed analysis, read where they lie).
pub fn leg2alm_pieces(
    plan: &Plan,
    spin2: bool,
    ms: &[usize],
    rings: &[usize],
    sizes: &[usize],
    leg: &[Vec<&[C64]>],
    alm: &mut [&mut [C64]],
) -> Result<()> {
    let ncomp = leg.len();
    let jobs = jobs_of(ncomp, spin2)?;
    check_len("alm (components)", alm.len(), ncomp)?;
    let (offs, nblk) = m_offsets(plan, ms)?;
    let (ch, slots) = ring_chunk(plan, rings)?;
    let (nm, nrg) = (ms.len(), rings.len());
    check_len("leg (rings)", sizes.iter().sum(), nrg)?;
    check_pieces("leg", leg, sizes, nm)?;
    for a in alm.iter() {
        check_len("alm", a.len(), nblk)?;
    }
    for a in alm.iter_mut() {
        a.fill(C64::new(0.0, 0.0));
    }
    if nm == 0 || nrg == 0 {
        return Ok(());
    }
    let level = cpu::simd_level();
    let nrc = ch.nrc();
    let w: Vec<f64> = rings.iter().map(|&r| plan.weights[r]).collect();
    let at = piece_index(sizes);
    let ptrs: Vec<Disjoint<C64>> = alm.iter_mut().map(|a| Disjoint(a.as_mut_ptr())).collect();
    let (ptrs, slots, ch, jobs, w, at) = (&ptrs, &slots, &ch, &jobs, &w, &at);
    let tile = m_tile(nrc * ncomp);
    install(|| {
        (0..nm.div_ceil(tile)).into_par_iter().for_each_init(
            || (LegScratch::default(), Vec::new()),
            |(sc, ph), t| {
                let (j0, j1) = (t * tile, ((t + 1) * tile).min(nm));
                let per = ncomp * nrc;
                ph.clear();
                ph.resize((j1 - j0) * per, C64::new(0.0, 0.0));
                // the tile's m read together from each row of leg (see alm2leg)
                for c in 0..ncomp {
                    for (i, &s) in slots.iter().enumerate() {
                        let (k, r) = at[i];
                        let row = &leg[c][k][r * nm..(r + 1) * nm];
                        for j in j0..j1 {
                            ph[(j - j0) * per + c * nrc + s] = row[j] * w[i];
                        }
                    }
                }
                for j in j0..j1 {
                    let m = ms[j];
                    // SAFETY: column j of each alm component is written by this task only.
                    let mut cols: Vec<&mut [C64]> = ptrs
                        .iter()
                        .map(|p| unsafe {
                            std::slice::from_raw_parts_mut(p.get().add(offs[j]), plan.lay.mlen(m))
                        })
                        .collect();
                    let inp = &ph[(j - j0) * per..(j - j0 + 1) * per];
                    cpu::anal_one(level, plan, ch, jobs, inp, m, sc, &mut cols);
                }
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sht::{cpu, AlmLayout};

    fn alm(lay: AlmLayout, seed: u64) -> Vec<C64> {
        // a small LCG: deterministic values in (-1, 1), m = 0 real
        let mut s = seed;
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        (0..lay.size())
            .map(|i| C64::new(next(), if i <= lay.lmax { 0.0 } else { next() }))
            .collect()
    }

    /// Two m blocks and two ring blocks (one of them the southern rings in reverse order) give
    /// the full CPU synthesis, and the analysis summed over the ring blocks the full analysis.
    #[test]
    fn blocks_compose_to_the_full_transforms() {
        let (nside, lay) = (8, AlmLayout::new(21, 13).unwrap());
        let plan = Plan::new(nside, lay, None).unwrap().with_ffts();
        let a = alm(lay, 7);
        let mut full = vec![0.0; plan.npix];
        cpu::alm2map(&plan, &[Job::Spin0(0, 0)], &[&a], &mut [&mut full]);
        let nr = plan.rings.len();
        let mblocks: [Vec<usize>; 2] =
            [(0..=13).step_by(2).collect(), (1..=13).step_by(2).collect()];
        let rblocks: [Vec<usize>; 2] = [(0..nr / 2).collect(), (nr / 2..nr).rev().collect()];
        let mut leg_all = vec![C64::new(0.0, 0.0); nr * 14];
        for ms in &mblocks {
            let blk: Vec<C64> = ms
                .iter()
                .flat_map(|&m| a[lay.mstart(m)..lay.mstart(m) + lay.mlen(m)].to_vec())
                .collect();
            let mut leg = vec![C64::new(0.0, 0.0); nr * ms.len()];
            let rings: Vec<usize> = (0..nr).collect();
            alm2leg(&plan, false, ms, &rings, &[&blk], &mut [&mut leg]).unwrap();
            for r in 0..nr {
                for (j, &m) in ms.iter().enumerate() {
                    leg_all[r * 14 + m] = leg[r * ms.len() + j];
                }
            }
        }
        let mut alm_sum = vec![C64::new(0.0, 0.0); lay.size()];
        for rings in &rblocks {
            let leg: Vec<C64> = rings
                .iter()
                .flat_map(|&r| leg_all[r * 14..(r + 1) * 14].to_vec())
                .collect();
            let npix: usize = rings.iter().map(|&r| plan.rings[r].nphi).sum();
            let mut pix = vec![0.0; npix];
            leg2map(&plan, rings, 13, &[&leg], &mut [&mut pix]).unwrap();
            let mut at = 0;
            let mut back = vec![C64::new(0.0, 0.0); rings.len() * 14];
            for &r in rings {
                let (f, n) = (plan.rings[r].first as usize, plan.rings[r].nphi);
                for k in 0..n {
                    assert!((pix[at + k] - full[f + k]).abs() <= 1e-13, "ring {r}");
                }
                at += n;
            }
            map2leg(&plan, rings, 13, &[&pix], &mut [&mut back]).unwrap();
            let ms: Vec<usize> = (0..=13).collect();
            let mut part = vec![C64::new(0.0, 0.0); lay.size()];
            leg2alm(&plan, false, &ms, rings, &[&back], &mut [&mut part]).unwrap();
            for (s, p) in alm_sum.iter_mut().zip(&part) {
                *s += p;
            }
        }
        let mut want = vec![C64::new(0.0, 0.0); lay.size()];
        cpu::map2alm(&plan, &[Job::Spin0(0, 0)], &[&full], &mut [&mut want]);
        for (g, w) in alm_sum.iter().zip(&want) {
            assert!((g - w).norm() <= 1e-13, "{g} vs {w}");
        }
    }

    /// Δ in pieces (widths 5, 0, 9 along m; 7 and the rest of the rings) gives the whole-array
    /// results bit for bit: map2leg writes the pieces, leg2map and leg2alm read them.
    #[test]
    fn pieces_equal_whole_arrays() {
        let (nside, lay) = (8, AlmLayout::new(21, 13).unwrap());
        let plan = Plan::new(nside, lay, None).unwrap();
        let nr = plan.rings.len();
        let rings: Vec<usize> = (0..nr).rev().collect();
        let pix: Vec<f64> = (0..plan.npix)
            .map(|i| ((i * 37) % 101) as f64 - 50.0)
            .collect();
        let mut whole = vec![C64::new(0.0, 0.0); nr * 14];
        map2leg(&plan, &rings, 13, &[&pix], &mut [&mut whole]).unwrap();
        let widths = [5, 0, 9];
        let mut bufs: Vec<Vec<C64>> = widths
            .iter()
            .map(|w| vec![C64::default(); nr * w])
            .collect();
        let mut parts: Vec<Vec<&mut [C64]>> = vec![bufs.iter_mut().map(|b| &mut b[..]).collect()];
        map2leg_pieces(&plan, &rings, &widths, &[&pix], &mut parts).unwrap();
        for i in 0..nr {
            let joined: Vec<C64> = (0..3)
                .flat_map(|k| bufs[k][i * widths[k]..][..widths[k]].to_vec())
                .collect();
            assert_eq!(joined, whole[i * 14..(i + 1) * 14], "ring slot {i}");
        }
        let (mut a, mut b) = (vec![0.0; plan.npix], vec![0.0; plan.npix]);
        leg2map(&plan, &rings, 13, &[&whole], &mut [&mut a]).unwrap();
        let read: Vec<Vec<&[C64]>> = vec![bufs.iter().map(|v| &v[..]).collect()];
        leg2map_pieces(&plan, &rings, &widths, &read, &mut [&mut b]).unwrap();
        assert_eq!(a, b);
        let ms: Vec<usize> = (0..=13).collect();
        let (mut x, mut y) = (
            vec![C64::default(); lay.size()],
            vec![C64::default(); lay.size()],
        );
        leg2alm(&plan, false, &ms, &rings, &[&whole], &mut [&mut x]).unwrap();
        let by_rings: Vec<Vec<&[C64]>> = vec![vec![&whole[..7 * 14], &whole[7 * 14..]]];
        leg2alm_pieces(
            &plan,
            false,
            &ms,
            &rings,
            &[7, nr - 7],
            &by_rings,
            &mut [&mut y],
        )
        .unwrap();
        assert_eq!(x, y);
        let short: Vec<Vec<&[C64]>> = vec![vec![&whole[..7 * 14]]];
        let e = leg2alm_pieces(&plan, false, &ms, &rings, &[7], &short, &mut [&mut y]);
        assert!(matches!(e.unwrap_err(), Error::Shape(_)));
    }

    #[test]
    fn bad_blocks_are_refused() {
        let plan = Plan::new(4, AlmLayout::new(6, 6).unwrap(), None).unwrap();
        let mut leg = vec![C64::new(0.0, 0.0); 2];
        let a = vec![C64::new(0.0, 0.0); 13];
        let e = |ms: &[usize], rings: &[usize], leg: &mut [C64]| {
            alm2leg(&plan, false, ms, rings, &[&a], &mut [leg]).unwrap_err()
        };
        assert!(matches!(e(&[1, 0], &[0], &mut leg), Error::Value(_)));
        assert!(matches!(e(&[0, 1], &[15], &mut leg), Error::Value(_)));
        assert!(matches!(
            e(&[0, 1], &[3, 3], &mut leg[..1]),
            Error::Value(_)
        ));
        assert!(matches!(e(&[0], &[0], &mut leg), Error::Shape(_)));
        let two = [&a[..], &a[..]];
        let mut l2 = [C64::new(0.0, 0.0); 1];
        // spin 2 needs (E, B): one component is refused
        let r = alm2leg(&plan, true, &[0], &[0], &two[..1], &mut [&mut l2]);
        assert!(matches!(r, Err(Error::Shape(_))));
    }
}
