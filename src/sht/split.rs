//! One SHT split over several workers (S2HAT's scheme), the driver shared by the multi-GPU
//! transform (`cuda::multi`, one GPU per worker) and any other set of `Halves`: the alm are
//! split by m into contiguous blocks balanced by work (the cost of an m is about lmax + 1 − m),
//! the map by rings into contiguous blocks balanced by pixels. alm2map: each worker computes
//! Δ_m(θ) for its m on all rings (`alm2leg`), the all-to-all moves Δ from m-blocks to
//! ring-blocks, each worker finishes its ring block (`leg2map`); map2alm runs the steps
//! backwards, and its Jacobi iterations repeat both. One host thread per worker.
//!
//! The all-to-all is staged through host memory: the workers' Δ are host arrays, regrouped by
//! ring block (or by m block) on the host with rayon.

use std::time::Instant;

use rayon::prelude::*;
use realfft::num_complex::Complex64 as C64;

use crate::error::{Error, Result};
use crate::sht::Plan;

/// The four SHT halves on worker `i` of a split transform (one host thread per worker), with
/// the API of `crate::sht::halves` (the CPU) and `crate::sht::cuda::halves` (a GPU each).
pub trait Halves: Sync {
    /// Number of workers.
    fn workers(&self) -> usize;
    #[allow(clippy::too_many_arguments)]
    fn alm2leg(
        &self,
        i: usize,
        plan: &Plan,
        spin2: bool,
        ms: &[usize],
        rings: &[usize],
        alm: &[&[C64]],
        leg: &mut [&mut [C64]],
    ) -> Result<()>;
    fn leg2map(
        &self,
        i: usize,
        plan: &Plan,
        rings: &[usize],
        mmax: usize,
        leg: &[&[C64]],
        maps: &mut [&mut [f64]],
    ) -> Result<()>;
    fn map2leg(
        &self,
        i: usize,
        plan: &Plan,
        rings: &[usize],
        mmax: usize,
        maps: &[&[f64]],
        leg: &mut [&mut [C64]],
    ) -> Result<()>;
    #[allow(clippy::too_many_arguments)]
    fn leg2alm(
        &self,
        i: usize,
        plan: &Plan,
        spin2: bool,
        ms: &[usize],
        rings: &[usize],
        leg: &[&[C64]],
        alm: &mut [&mut [C64]],
    ) -> Result<()>;
}

/// What a multi-GPU transform did.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// How the all-to-all moved Δ (set by the caller; "host-staged" here).
    pub transport: &'static str,
    pub devices: Vec<u32>,
    /// [m0, m1) of each device.
    pub m_blocks: Vec<(usize, usize)>,
    /// [r0, r1) rings of each device.
    pub ring_blocks: Vec<(usize, usize)>,
    /// Seconds in the Legendre stage (all devices, wall), the all-to-all (host regrouping)
    /// and the ring stage (wall), summed over the passes of the call.
    pub legendre_s: f64,
    pub exchange_s: f64,
    pub ring_s: f64,
    /// Most device memory in use seen during the call on each device (bytes, whole device).
    pub peak_bytes: Vec<usize>,
    /// Device-resident path (`cuda::peer`): [p0, p1) ring pairs of each device, the rounds of
    /// the pipeline, and the planned bytes per device (its alm block + chunk buffers).
    pub pair_blocks: Vec<(usize, usize)>,
    pub rounds: usize,
    pub planned_bytes: Vec<usize>,
    /// Device-resident path: (Legendre, all-to-all copies, rings) device seconds per GPU.
    pub stage_s_per_gpu: Vec<[f64; 3]>,
    /// Device-resident path: (set-up, rounds, final synchronisation) host wall seconds of each
    /// GPU's thread (set-up: buffers, tables and its alm block upload; rounds: queueing the
    /// pipeline, which blocks on the pixel transfers, and map2alm's alm download).
    pub wall_s_per_gpu: Vec<[f64; 3]>,
}

/// Contiguous blocks [m0, m1) of 0..=mmax, one per device, with about equal Σ (lmax + 1 − m):
/// m joins block d while half its cost still fits the (d+1)/n share (`cut`). The one block
/// rule of every split SHT (also `skyconv.sht_halves.m_blocks` through the core).
pub fn m_blocks(lmax: usize, mmax: usize, n: usize) -> Vec<(usize, usize)> {
    let cost: Vec<f64> = (0..=mmax).map(|m| (lmax + 1 - m) as f64).collect();
    cut(&cost, n)
}

/// Contiguous m blocks of `plan`, one per device, balanced by the Legendre work of each m on
/// this grid (`m_costs`).
pub fn m_blocks_for(plan: &Plan, n: usize, inactive: f64) -> Vec<(usize, usize)> {
    cut(&m_costs(plan, inactive), n)
}

/// Relative cost of a ring pair where λ_mm is negligible (its column is skipped, but the warp
/// it shares with active pairs is not), fitted to the per-GPU Legendre times of two H200s at
/// nside 8192/16384 (bench/NOTES.md, issue 20): synthesis and analysis kernels.
pub const INACTIVE_SYNTH: f64 = 0.8;
pub const INACTIVE_ANAL: f64 = 0.5;

/// The work of each m = 0..=mmax on the rings of `plan`: (lmax + 1 − m) times the ring pairs
/// where λ_mm is not negligible (log2 |λ_mm| + log2 growth ≥ −400, the test of
/// `legendre::start_value` that the kernels and the CPU engine use to skip a pair), the others
/// weighted by `inactive`, plus one per pair for the start. High m skip many polar pairs, so
/// they cost less than lmax + 1 − m alone suggests.
pub fn m_costs(plan: &Plan, inactive: f64) -> Vec<f64> {
    let (lmax, np) = (plan.lay.lmax, plan.pairs.len());
    // pairs run from the pole to the equator: log2 sin θ increases
    (0..=plan.lay.mmax)
        .map(|m| {
            let active = if m == 0 {
                np
            } else {
                let lb = crate::sht::legendre::log2_growth_bound(m, lmax, &plan.ln_fact);
                let t = (-400.0 - plan.log2_norms[m] - lb) / m as f64;
                np - plan.pairs.partition_point(|p| p.log2s < t)
            };
            let pairs = active as f64 + inactive * (np - active) as f64;
            (lmax + 1 - m) as f64 * pairs + np as f64
        })
        .collect()
}

/// Contiguous blocks of items 0..cost.len(), one per worker, of about equal cost: item i joins
/// block d while the running cost up to its middle stays within the (d+1)/n share; a block
/// takes at least one item while any are left, and more only while one is left for each later
/// block (so only the last blocks are empty, and only when there are fewer items than
/// workers).
pub fn cut(cost: &[f64], n: usize) -> Vec<(usize, usize)> {
    let total: f64 = cost.iter().sum();
    let len = cost.len();
    let mut out = Vec::with_capacity(n);
    let (mut i0, mut acc) = (0usize, 0.0f64);
    for d in 0..n {
        let target = total * (d + 1) as f64 / n as f64;
        let later = n - d - 1;
        let mut i1 = i0;
        while i1 < len
            && (d + 1 == n || i1 == i0 || (acc + cost[i1] / 2.0 <= target && len - i1 > later))
        {
            acc += cost[i1];
            i1 += 1;
        }
        out.push((i0, i1));
        i0 = i1;
    }
    out
}

/// Contiguous blocks [r0, r1) of the rings, one per device, with about equal pixel counts.
pub fn ring_blocks(plan: &Plan, n: usize) -> Vec<(usize, usize)> {
    ring_blocks_of(&plan.rings, n)
}

/// `ring_blocks` of the rings of a map of `npix` pixels: the rule of `cut` with a ring's cost
/// its pixel count (also `skyconv.sht_halves.ring_blocks` through the core).
pub fn ring_blocks_of(rings: &[crate::healpix::Ring], n: usize) -> Vec<(usize, usize)> {
    let cost: Vec<f64> = rings.iter().map(|r| r.nphi as f64).collect();
    cut(&cost, n)
}

/// Run `f(i)` for each worker i on its own thread.
fn per_worker<T: Send>(n: usize, f: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    let f = &f;
    // The call's GPU admission (`backend::cuda::admit`) is thread-local: each worker carries it.
    let ticket = crate::backend::cuda::admit::current();
    let outs: Vec<Result<T>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let t = ticket.clone();
                s.spawn(move || {
                    let _admitted = crate::backend::cuda::admit::enter(t);
                    f(i)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Internal("a worker thread panicked".into())))
            })
            .collect()
    });
    outs.into_iter().collect()
}

/// Which components are spin 0 and which pair (if any) is spin 2.
fn comp_sets(ncomp: usize, pol: bool) -> (Vec<usize>, Option<[usize; 2]>) {
    if pol && ncomp == 3 {
        (vec![0], Some([1, 2]))
    } else {
        ((0..ncomp).collect(), None)
    }
}

/// Split each of `bufs` at the given boundaries into disjoint pieces, per piece the list over
/// buffers.
fn split_all<'a, T>(bufs: &'a mut [&mut [T]], bounds: &[(usize, usize)]) -> Vec<Vec<&'a mut [T]>> {
    let mut out: Vec<Vec<&'a mut [T]>> = bounds.iter().map(|_| Vec::new()).collect();
    for b in bufs.iter_mut() {
        let mut rest: &'a mut [T] = unsafe {
            // SAFETY: each buffer is borrowed once, for 'a, and split into disjoint pieces.
            std::slice::from_raw_parts_mut(b.as_mut_ptr(), b.len())
        };
        let mut at = 0;
        for (k, &(lo, hi)) in bounds.iter().enumerate() {
            let (_, r) = rest.split_at_mut(lo - at);
            let (piece, r) = r.split_at_mut(hi - lo);
            out[k].push(piece);
            rest = r;
            at = hi;
        }
    }
    out
}

/// Synthesis split over the workers of `h`: `alms` (healpy layout of plan.lay) -> RING maps.
pub fn alm2map<H: Halves>(
    h: &H,
    plan: &Plan,
    pol: bool,
    alms: &[&[C64]],
    maps: &mut [&mut [f64]],
    st: &mut Stats,
) -> Result<()> {
    let (lay, nr) = (plan.lay, plan.rings.len());
    let ncomp = alms.len();
    let (s0, s2) = comp_sets(ncomp, pol);
    let mb = m_blocks(lay.lmax, lay.mmax, h.workers());
    let rb = ring_blocks(plan, h.workers());
    let all_rings: Vec<usize> = (0..nr).collect();
    let w = lay.mmax + 1;
    // 1. Legendre: Δ of each device's m on all rings, per component (nr, nm) row-major.
    let t = Instant::now();
    let legs: Vec<Vec<Vec<C64>>> = per_worker(h.workers(), |i| {
        let (m0, m1) = mb[i];
        let nm = m1 - m0;
        let mut out: Vec<Vec<C64>> = (0..ncomp)
            .map(|_| vec![C64::new(0.0, 0.0); nr * nm])
            .collect();
        if nm == 0 {
            return Ok(out);
        }
        let ms: Vec<usize> = (m0..m1).collect();
        let (a0, a1) = (lay.mstart(m0), lay.mstart(m1));
        {
            let a: Vec<&[C64]> = s0.iter().map(|&c| &alms[c][a0..a1]).collect();
            let mut l: Vec<&mut [C64]> = Vec::new();
            let mut taken: Vec<Option<&mut Vec<C64>>> = out.iter_mut().map(Some).collect();
            for &c in &s0 {
                l.push(taken[c].take().expect("distinct"));
            }
            h.alm2leg(i, plan, false, &ms, &all_rings, &a, &mut l)?;
            if let Some([e, b]) = s2 {
                let a: Vec<&[C64]> = vec![&alms[e][a0..a1], &alms[b][a0..a1]];
                let mut l: Vec<&mut [C64]> = vec![
                    taken[e].take().expect("distinct"),
                    taken[b].take().expect("distinct"),
                ];
                h.alm2leg(i, plan, true, &ms, &all_rings, &a, &mut l)?;
            }
        }
        Ok(out)
    })?;
    st.legendre_s += t.elapsed().as_secs_f64();
    // 2. All-to-all through host memory: each ring block gets all m of its rings.
    let t = Instant::now();
    let blocks: Vec<Vec<Vec<C64>>> = rb
        .iter()
        .map(|&(r0, r1)| {
            (0..ncomp)
                .map(|c| {
                    let mut dst = vec![C64::new(0.0, 0.0); (r1 - r0) * w];
                    dst.par_chunks_mut(w).enumerate().for_each(|(i, row)| {
                        let r = r0 + i;
                        for (d, &(m0, m1)) in mb.iter().enumerate() {
                            let nm = m1 - m0;
                            row[m0..m1].copy_from_slice(&legs[d][c][r * nm..(r + 1) * nm]);
                        }
                    });
                    dst
                })
                .collect()
        })
        .collect();
    drop(legs);
    st.exchange_s += t.elapsed().as_secs_f64();
    // 3. Ring stage: each device's rings -> its pixels.
    let t = Instant::now();
    let bounds: Vec<(usize, usize)> = rb.iter().map(|&(r0, r1)| pix_range(plan, r0, r1)).collect();
    let pieces = split_all(maps, &bounds);
    let pieces: Vec<std::sync::Mutex<Vec<&mut [f64]>>> =
        pieces.into_iter().map(std::sync::Mutex::new).collect();
    per_worker(h.workers(), |i| {
        let (r0, r1) = rb[i];
        if r0 == r1 {
            return Ok(());
        }
        let rings: Vec<usize> = (r0..r1).collect();
        let leg: Vec<&[C64]> = blocks[i].iter().map(|v| &v[..]).collect();
        let mut p = pieces[i].lock().unwrap_or_else(|e| e.into_inner());
        h.leg2map(i, plan, &rings, lay.mmax, &leg, &mut p)
    })?;
    st.ring_s += t.elapsed().as_secs_f64();
    Ok(())
}

fn pix_range(plan: &Plan, r0: usize, r1: usize) -> (usize, usize) {
    let first = |r: usize| {
        if r < plan.rings.len() {
            plan.rings[r].first as usize
        } else {
            plan.npix
        }
    };
    (first(r0), first(r1))
}

/// One analysis pass (no iterations) split over `devices` of cleaned float64 maps.
fn analysis<H: Halves>(
    h: &H,
    plan: &Plan,
    pol: bool,
    maps: &[&[f64]],
    alms: &mut [&mut [C64]],
    st: &mut Stats,
) -> Result<()> {
    let (lay, nr) = (plan.lay, plan.rings.len());
    let ncomp = maps.len();
    let (s0, s2) = comp_sets(ncomp, pol);
    let mb = m_blocks(lay.lmax, lay.mmax, h.workers());
    let rb = ring_blocks(plan, h.workers());
    let all_rings: Vec<usize> = (0..nr).collect();
    let w = lay.mmax + 1;
    // 1. Ring stage: each device's rings -> their Fourier coefficients (nr_d, mmax+1).
    let t = Instant::now();
    let legs: Vec<Vec<Vec<C64>>> = per_worker(h.workers(), |i| {
        let (r0, r1) = rb[i];
        let mut out: Vec<Vec<C64>> = (0..ncomp)
            .map(|_| vec![C64::new(0.0, 0.0); (r1 - r0) * w])
            .collect();
        if r0 == r1 {
            return Ok(out);
        }
        let (p0, p1) = pix_range(plan, r0, r1);
        let rings: Vec<usize> = (r0..r1).collect();
        let m: Vec<&[f64]> = maps.iter().map(|m| &m[p0..p1]).collect();
        let mut l: Vec<&mut [C64]> = out.iter_mut().map(|v| &mut v[..]).collect();
        h.map2leg(i, plan, &rings, lay.mmax, &m, &mut l)?;
        Ok(out)
    })?;
    st.ring_s += t.elapsed().as_secs_f64();
    // 2. All-to-all: each m block gets its columns on all rings (nr, nm).
    let t = Instant::now();
    let blocks: Vec<Vec<Vec<C64>>> = mb
        .iter()
        .map(|&(m0, m1)| {
            let nm = m1 - m0;
            (0..ncomp)
                .map(|c| {
                    let mut dst = vec![C64::new(0.0, 0.0); nr * nm];
                    if nm > 0 {
                        dst.par_chunks_mut(nm).enumerate().for_each(|(r, row)| {
                            let d = rb.iter().position(|&(a, b)| a <= r && r < b).expect("ring");
                            let i = r - rb[d].0;
                            row.copy_from_slice(&legs[d][c][i * w + m0..i * w + m1]);
                        });
                    }
                    dst
                })
                .collect()
        })
        .collect();
    drop(legs);
    st.exchange_s += t.elapsed().as_secs_f64();
    // 3. Legendre: each device's m from all rings, straight into its slice of the alm.
    let t = Instant::now();
    let bounds: Vec<(usize, usize)> = mb
        .iter()
        .map(|&(m0, m1)| (lay.mstart(m0), lay.mstart(m1)))
        .collect();
    let pieces = split_all(alms, &bounds);
    let pieces: Vec<std::sync::Mutex<Vec<&mut [C64]>>> =
        pieces.into_iter().map(std::sync::Mutex::new).collect();
    per_worker(h.workers(), |i| {
        let (m0, m1) = mb[i];
        if m0 == m1 {
            return Ok(());
        }
        let ms: Vec<usize> = (m0..m1).collect();
        let mut p = pieces[i].lock().unwrap_or_else(|e| e.into_inner());
        let mut taken: Vec<Option<&mut [C64]>> = p.iter_mut().map(|s| Some(&mut **s)).collect();
        let leg: Vec<&[C64]> = s0.iter().map(|&c| &blocks[i][c][..]).collect();
        let mut a: Vec<&mut [C64]> = s0
            .iter()
            .map(|&c| taken[c].take().expect("distinct"))
            .collect();
        h.leg2alm(i, plan, false, &ms, &all_rings, &leg, &mut a)?;
        if let Some([e, b]) = s2 {
            let leg: Vec<&[C64]> = vec![&blocks[i][e][..], &blocks[i][b][..]];
            let mut a: Vec<&mut [C64]> = vec![
                taken[e].take().expect("distinct"),
                taken[b].take().expect("distinct"),
            ];
            h.leg2alm(i, plan, true, &ms, &all_rings, &leg, &mut a)?;
        }
        Ok(())
    })?;
    st.legendre_s += t.elapsed().as_secs_f64();
    Ok(())
}

/// Analysis with `iter` Jacobi iterations split over the workers of `h` (maps: float64, UNSEEN
/// already zeroed).
pub fn map2alm<H: Halves>(
    h: &H,
    plan: &Plan,
    pol: bool,
    maps: &[&[f64]],
    iter: usize,
    alms: &mut [&mut [C64]],
    st: &mut Stats,
) -> Result<()> {
    jacobi(
        plan,
        maps,
        iter,
        alms,
        st,
        &|a, m, st| alm2map(h, plan, pol, a, m, st),
        &|m, a, st| analysis(h, plan, pol, m, a, st),
    )
}

/// A synthesis or one analysis pass of a split transform (inputs, outputs, stats).
pub type SynthPass<'a> = dyn Fn(&[&[C64]], &mut [&mut [f64]], &mut Stats) -> Result<()> + 'a;
pub type AnalPass<'a> = dyn Fn(&[&[f64]], &mut [&mut [C64]], &mut Stats) -> Result<()> + 'a;

/// map2alm with `iter` Jacobi iterations from one analysis pass `anal` and a synthesis `synth`
/// (any split of them): alm = A(map), then `iter` times alm += A(map − S(alm)); the residual
/// maps live in host memory. Cancel is checked between iterations.
pub fn jacobi(
    plan: &Plan,
    maps: &[&[f64]],
    iter: usize,
    alms: &mut [&mut [C64]],
    st: &mut Stats,
    synth: &SynthPass,
    anal: &AnalPass,
) -> Result<()> {
    anal(maps, alms, st)?;
    if iter == 0 {
        return Ok(());
    }
    let stop = crate::backend::cancel::current();
    let nc = maps.len();
    let mut resid: Vec<Vec<f64>> = (0..nc).map(|_| vec![0.0; plan.npix]).collect();
    let mut delta: Vec<Vec<C64>> = (0..nc)
        .map(|_| vec![C64::new(0.0, 0.0); plan.lay.size()])
        .collect();
    for _ in 0..iter {
        stop.check()?;
        {
            let a: Vec<&[C64]> = alms.iter().map(|a| &a[..]).collect();
            let mut r: Vec<&mut [f64]> = resid.iter_mut().map(|r| &mut r[..]).collect();
            synth(&a, &mut r, st)?;
        }
        for (r, m) in resid.iter_mut().zip(maps) {
            r.par_iter_mut()
                .zip(m.par_iter())
                .for_each(|(r, m)| *r = m - *r);
        }
        {
            let r: Vec<&[f64]> = resid.iter().map(|r| &r[..]).collect();
            let mut d: Vec<&mut [C64]> = delta.iter_mut().map(|d| &mut d[..]).collect();
            anal(&r, &mut d, st)?;
        }
        for (a, d) in alms.iter_mut().zip(&delta) {
            a.par_iter_mut()
                .zip(d.par_iter())
                .for_each(|(a, d)| *a += d);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sht::AlmLayout;

    #[test]
    fn m_blocks_cover_and_balance() {
        for &(lmax, mmax, n) in &[
            (100, 100, 2),
            (4096, 4000, 3),
            (10, 1, 3),
            (32768, 32768, 2),
        ] {
            let b = m_blocks(lmax, mmax, n);
            assert_eq!(b.len(), n);
            assert_eq!(b[0].0, 0);
            assert_eq!(b[n - 1].1, mmax + 1);
            assert!(b.windows(2).all(|w| w[0].1 == w[1].0));
            if mmax + 1 >= 10 * n {
                let cost = |(a, z): (usize, usize)| (a..z).map(|m| lmax + 1 - m).sum::<usize>();
                let total: usize = b.iter().map(|&x| cost(x)).sum();
                for &x in &b {
                    let share = cost(x) as f64 / total as f64;
                    assert!((share - 1.0 / n as f64).abs() < 0.02, "{b:?}");
                }
            }
        }
    }

    /// The CPU halves on `n` workers.
    struct Cpu(usize);
    impl Halves for Cpu {
        fn workers(&self) -> usize {
            self.0
        }
        fn alm2leg(
            &self,
            _: usize,
            p: &Plan,
            s2: bool,
            ms: &[usize],
            r: &[usize],
            a: &[&[C64]],
            l: &mut [&mut [C64]],
        ) -> Result<()> {
            crate::sht::halves::alm2leg(p, s2, ms, r, a, l)
        }
        fn leg2map(
            &self,
            _: usize,
            p: &Plan,
            r: &[usize],
            mmax: usize,
            l: &[&[C64]],
            m: &mut [&mut [f64]],
        ) -> Result<()> {
            crate::sht::halves::leg2map(p, r, mmax, l, m)
        }
        fn map2leg(
            &self,
            _: usize,
            p: &Plan,
            r: &[usize],
            mmax: usize,
            m: &[&[f64]],
            l: &mut [&mut [C64]],
        ) -> Result<()> {
            crate::sht::halves::map2leg(p, r, mmax, m, l)
        }
        fn leg2alm(
            &self,
            _: usize,
            p: &Plan,
            s2: bool,
            ms: &[usize],
            r: &[usize],
            l: &[&[C64]],
            a: &mut [&mut [C64]],
        ) -> Result<()> {
            crate::sht::halves::leg2alm(p, s2, ms, r, l, a)
        }
    }

    fn rel(a: &[f64], b: &[f64]) -> f64 {
        let d = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        d / b.iter().map(|x| x.abs()).fold(0.0, f64::max)
    }

    /// The split over 1..3 workers equals the single-process CPU transforms (spin 0 and pol,
    /// iter 0 and 2, lmax != 2 nside, mmax < lmax).
    #[test]
    fn split_equals_cpu_transforms() {
        use crate::backend::Device;
        let (nside, lmax, mmax) = (8usize, 19usize, 13usize);
        let lay = AlmLayout::new(lmax, mmax).unwrap();
        let mut seed = 7u64;
        let mut rnd = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for (ncomp, pol) in [(1usize, false), (3, true), (2, false)] {
            let alms: Vec<Vec<C64>> = (0..ncomp)
                .map(|_| {
                    (0..lay.size())
                        .map(|k| C64::new(rnd(), if k <= lmax { 0.0 } else { rnd() }))
                        .collect()
                })
                .collect();
            let a: Vec<&[C64]> = alms.iter().map(|v| &v[..]).collect();
            let npix = 12 * nside * nside;
            let mut want = vec![vec![0.0; npix]; ncomp];
            {
                let mut w: Vec<&mut [f64]> = want.iter_mut().map(|v| &mut v[..]).collect();
                crate::sht::alm2map(Device::Cpu, nside, lay, &a, pol, &mut w).unwrap();
            }
            let plan = Plan::new(nside, lay, None).unwrap().with_ffts();
            for n in 1..4 {
                let mut got = vec![vec![0.0; npix]; ncomp];
                let mut g: Vec<&mut [f64]> = got.iter_mut().map(|v| &mut v[..]).collect();
                let mut st = Stats::default();
                alm2map(&Cpu(n), &plan, pol, &a, &mut g, &mut st).unwrap();
                for c in 0..ncomp {
                    assert!(rel(&got[c], &want[c]) < 1e-12, "alm2map n={n} c={c}");
                }
            }
            let maps: Vec<&[f64]> = want.iter().map(|v| &v[..]).collect();
            for iter in [0usize, 2] {
                let mut ref_alm = vec![vec![C64::new(0.0, 0.0); lay.size()]; ncomp];
                {
                    let mut r: Vec<&mut [C64]> = ref_alm.iter_mut().map(|v| &mut v[..]).collect();
                    crate::sht::map2alm(Device::Cpu, nside, lay, &maps, pol, iter, None, &mut r)
                        .unwrap();
                }
                for n in [1usize, 3] {
                    let mut got = vec![vec![C64::new(0.0, 0.0); lay.size()]; ncomp];
                    let mut g: Vec<&mut [C64]> = got.iter_mut().map(|v| &mut v[..]).collect();
                    let mut st = Stats::default();
                    map2alm(&Cpu(n), &plan, pol, &maps, iter, &mut g, &mut st).unwrap();
                    for c in 0..ncomp {
                        let f = |v: &[C64]| v.iter().flat_map(|z| [z.re, z.im]).collect::<Vec<_>>();
                        let r = rel(&f(&got[c]), &f(&ref_alm[c]));
                        assert!(r < 1e-12, "map2alm n={n} iter={iter} c={c}: {r}");
                    }
                }
            }
        }
    }

    /// The cost model: every pair counts for m = 0; high m skip polar pairs (cheaper than
    /// lmax + 1 − m alone), more so with a smaller weight of the skipped pairs; the blocks
    /// cover 0..=mmax.
    #[test]
    fn m_costs_skip_polar_pairs_of_high_m() {
        let plan = Plan::new(256, AlmLayout::new(512, 512).unwrap(), None).unwrap();
        let np = plan.pairs.len() as f64;
        let full = m_costs(&plan, 1.0);
        let half = m_costs(&plan, 0.5);
        assert_eq!(full[0], 513.0 * np + np);
        for m in 0..=512 {
            assert_eq!(
                full[m],
                (513 - m) as f64 * np + np,
                "inactive weight 1 = no skipping"
            );
            assert!(half[m] <= full[m]);
        }
        assert!(half[500] < 0.9 * full[500], "m = 500 skips polar pairs");
        assert_eq!(half[0], full[0]);
        for w in [0.0, 0.5, 0.8] {
            let b = m_blocks_for(&plan, 3, w);
            assert_eq!((b[0].0, b[2].1), (0, 513));
            // fewer skipped pairs counted -> the first (low m) block gets fewer m
            assert!(b[0].1 <= m_blocks_for(&plan, 3, 1.0)[0].1);
        }
    }

    #[test]
    fn ring_blocks_cover_and_balance() {
        let plan = Plan::new(64, AlmLayout::new(10, 10).unwrap(), None).unwrap();
        for n in 1..5 {
            let b = ring_blocks(&plan, n);
            assert_eq!(b[0].0, 0);
            assert_eq!(b[n - 1].1, plan.rings.len());
            assert!(b.windows(2).all(|w| w[0].1 == w[1].0));
            for &(r0, r1) in &b {
                let (p0, p1) = pix_range(&plan, r0, r1);
                let share = (p1 - p0) as f64 / plan.npix as f64;
                assert!((share - 1.0 / n as f64).abs() < 0.01, "{b:?}");
            }
        }
    }
}
