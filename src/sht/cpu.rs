//! The rayon engine. Rings are taken in chunks of north/south pairs (nearby colatitudes, so the
//! polar m that are negligible are skipped together). Per chunk:
//! - synthesis: Legendre stage parallel over m (each m task runs the recurrence for lanes of
//!   ring pairs and writes the ring's Fourier coefficient for that m), then the ring-FFT stage
//!   parallel over rings (fold m into the ring's nphi bins, inverse real FFT);
//! - analysis: the ring-FFT stage first, then the Legendre stage parallel over m, each m task
//!   owning its column of alm.

#![allow(clippy::needless_range_loop)] // lane loops index several arrays in step

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::backend::threads::Disjoint;
use rayon::prelude::*;
use realfft::num_complex::Complex64 as C64;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use super::legendre::{
    self as leg, log2_growth_bound, start_value, MTables, Visit, VisitZ, MAX_LANES, SQ1, SQ2, SU1,
    SU2,
};
use super::simd::{Simd, S1};
#[cfg(target_arch = "x86_64")]
use super::simd::{F4, F8};
use super::Plan;

/// Lanes (ring pairs run together) for spin 0 and spin 2.
const L0: usize = 8;
const L2: usize = 4;
/// Bytes of spin-0 analysis partial sums (`tmp`, 256 B per even degree with AVX-512) one window
/// of degrees covers: every lane block of a chunk runs over the window before the next, so the
/// sums stay in L1 (48 KB here) beside the blocks' state; a whole pass per block streamed them
/// from L2 from lmax ~400 on. Kernel alone 3-8% faster at lmax 1024-4096 (16 and 32 KB alike,
/// 8 KB slower: bench/NOTES.md, session 16 cpusht7).
const TILE_BYTES: usize = 16 << 10;
/// Budget for the per-chunk ring coefficients (each chunk recomputes the per-m tables, so
/// fewer, larger chunks are cheaper).
const CHUNK_BYTES: usize = 256 << 20;
/// Largest coefficient buffer kept between calls: every chunk's (a fresh one costs the kernel's
/// zeroing of its pages on every call, and its unmap is a serial stretch with all threads
/// waiting; bench/NOTES.md, session 10). At most this much stays allocated after a call.
/// `chunks` rounds a chunk up to whole lane blocks (up to L0 − 1 pairs past `CHUNK_BYTES`):
/// the slack keeps those buffers too (without it every call at nside ≥ 2048, and T,E,B at
/// 1024, allocated and faulted in a fresh one per chunk; bench/NOTES.md, session 15 cpusht6).
const KEEP_BYTES: usize = CHUNK_BYTES + CHUNK_BYTES / 8;

/// One transform inside a call: a spin-0 (T) or spin-2 (E, B -> Q, U) pair of components.
#[derive(Debug, Clone, Copy)]
pub enum Job {
    /// alm index, map index.
    Spin0(usize, usize),
    /// (E, B) alm indices, (Q, U) map indices.
    Spin2([usize; 2], [usize; 2]),
}

/// Jobs for `ncomp` components: T,E,B as spin 0 + spin 2 when `pol`, else all spin 0.
pub fn jobs(ncomp: usize, pol: bool) -> Vec<Job> {
    if pol && ncomp == 3 {
        vec![Job::Spin0(0, 0), Job::Spin2([1, 2], [1, 2])]
    } else {
        (0..ncomp).map(|i| Job::Spin0(i, i)).collect()
    }
}

// ------------------------------------------------------------------------------------------
// Ring FFTs

pub(super) struct RingFft {
    r2c: Arc<dyn RealToComplex<f64>>,
    c2r: Arc<dyn ComplexToReal<f64>>,
}

static FFTS: Mutex<Option<HashMap<usize, Arc<RingFft>>>> = Mutex::new(None);

pub(super) fn ring_fft(n: usize) -> Arc<RingFft> {
    let mut g = FFTS.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    map.entry(n)
        .or_insert_with(|| {
            let mut p = RealFftPlanner::<f64>::new();
            Arc::new(RingFft {
                r2c: p.plan_fft_forward(n),
                c2r: p.plan_fft_inverse(n),
            })
        })
        .clone()
}

/// e^{i k φ} for k = 0..n, by rotation re-anchored every 32 steps (error ≲ 1e-14).
pub(super) fn twiddles(phi: f64, n: usize, out: &mut Vec<C64>) {
    out.clear();
    let (s, c) = phi.sin_cos();
    let step = C64::new(c, s);
    let mut w = C64::new(1.0, 0.0);
    for k in 0..n {
        if k % 32 == 0 {
            let (s, c) = (k as f64 * phi).sin_cos();
            w = C64::new(c, s);
        }
        out.push(w);
        w *= step;
    }
}

/// The ring-coefficient buffer, kept between calls up to `KEEP_BYTES` (first-touch page faults
/// of a fresh allocation cost more than the FFT stage of a small transform).
static BUFFER: Mutex<Vec<C64>> = Mutex::new(Vec::new());

fn take_buffer(len: usize) -> Vec<C64> {
    let mut b = std::mem::take(&mut *BUFFER.lock().unwrap_or_else(|e| e.into_inner()));
    if b.capacity() >= len {
        // Every entry a stage reads is written by the stage before it: no need to clear. By
        // capacity, not length: a call's last chunk is mostly smaller and leaves the buffer
        // truncated, and testing the length made the next call's first chunk allocate and fault
        // in a fresh one (T,E,B at nside 1024-2048, bench/NOTES.md, session 18 cpusht9); the
        // zeros past the length are written to pages already mapped.
        b.resize(len, C64::new(0.0, 0.0));
        return b;
    }
    zeroed(len)
}

/// `len` zeros from the allocator's zeroed memory (fresh pages, not cleared a second time),
/// huge pages asked for.
fn zeroed(len: usize) -> Vec<C64> {
    if len == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<C64>(len).expect("buffer size fits in memory");
    // SAFETY: the layout is non-empty; all-zero bits are a valid Complex<f64> (two f64 zeros),
    // and the vector takes ownership of the allocation made with this layout.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut C64;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // The Legendre tasks write it page by page all over (one m per task): huge pages save
        // the faults, the TLB misses and most of the unmap.
        crate::backend::alloc::advise_huge_pages(p as *mut u8, layout.size());
        Vec::from_raw_parts(p, len, len)
    }
}

fn give_buffer(b: Vec<C64>) {
    let mut slot = BUFFER.lock().unwrap_or_else(|e| e.into_inner());
    if b.capacity() >= slot.capacity() && b.capacity() * 16 <= KEEP_BYTES {
        *slot = b;
    }
}

#[derive(Default)]
pub(super) struct FftScratch {
    pub(super) ring: Vec<f64>,
    pub(super) spec: Vec<C64>,
    pub(super) scratch: Vec<C64>,
    pub(super) tw: Vec<C64>,
    /// `fold_block`'s twiddles per pair and half spectra per ring of a block.
    tws: Vec<Vec<C64>>,
    specs: Vec<Vec<C64>>,
}

// ------------------------------------------------------------------------------------------
// Chunking

pub(super) struct Chunk {
    /// The ring pairs of the chunk, ascending (so sin θ grows along it); ring 2q (2q+1) of the
    /// chunk is the north (south) ring of pair `pairs[q]`.
    pub(super) pairs: Vec<usize>,
}

impl Chunk {
    pub(super) fn np(&self) -> usize {
        self.pairs.len()
    }

    pub(super) fn nrc(&self) -> usize {
        2 * self.np()
    }
}

fn chunks(plan: &Plan, ncomp: usize) -> Vec<Chunk> {
    let per_pair = ncomp * (plan.lay.mmax + 1) * 2 * std::mem::size_of::<C64>();
    let mut ch = (CHUNK_BYTES / per_pair.max(1)).max(L0);
    ch = ch.div_ceil(L0) * L0;
    if let Some(n) = super::forced_chunk_pairs() {
        ch = n;
    }
    let np = plan.pairs.len();
    let mut out = Vec::new();
    let mut p = 0;
    while p < np {
        let n = ch.min(np - p);
        out.push(Chunk {
            pairs: (p..p + n).collect(),
        });
        p += n;
    }
    out
}

/// Start value (v, k) of λ_mm on each pair of `pairs` for this m, (0, 0) where negligible:
/// computed once per m and shared by the spin-0 and spin-2 blocks (each computed its own).
fn starts(plan: &Plan, pairs: &[usize], m: usize, lb: f64, out: &mut Vec<(f64, i32)>) {
    // Quick test with log2 |λ_mm| ≈ log2|norm| + m log2 sin θ: pairs far below the threshold
    // are negligible for sure (the exact test in start_value agrees with it).
    let cut = leg::NEGLIGIBLE_LOG2 as f64 - 64.0 - lb - plan.log2_norms[m];
    out.clear();
    out.extend(pairs.iter().map(|&p| {
        let pr = &plan.pairs[p];
        let e = (m as f64) * pr.log2s;
        if e < cut {
            (0.0, 0)
        } else if e > -380.0 {
            // Far from underflow (most pairs) the plain power is the same number, without the
            // checks of the scaled one.
            leg::scaled_if_negligible(leg::pow_plain(pr.s, m) * plan.norms[m], 0)
        } else {
            start_value(pr.s, m, plan.norms[m], lb)
        }
    }));
}

/// Lane state for a block `blk` of at most `nl` pairs (missing lanes are padding) with their
/// start values `st` (from `starts`, aligned with `blk`): x, sin θ and (v, k) per lane; None if
/// every lane is negligible.
#[allow(clippy::type_complexity)]
fn lanes(
    plan: &Plan,
    blk: &[usize],
    nl: usize,
    st: &[(f64, i32)],
) -> Option<(
    [f64; MAX_LANES],
    [f64; MAX_LANES],
    [f64; MAX_LANES],
    [i32; MAX_LANES],
)> {
    let n = blk.len().min(nl);
    if st[..n].iter().all(|&(v, _)| v == 0.0) {
        return None;
    }
    let mut x = [0.0; MAX_LANES];
    let mut s = [1.0; MAX_LANES];
    let mut v = [0.0; MAX_LANES];
    let mut k = [0i32; MAX_LANES];
    for r in 0..n {
        let pr = &plan.pairs[blk[r]];
        x[r] = pr.x;
        s[r] = pr.s;
        (v[r], k[r]) = st[r];
    }
    Some((x, s, v, k))
}

#[inline(always)]
fn vecs<V: Simd, const N: usize>(a: &[f64]) -> [V; N] {
    let mut o = [V::splat(0.0); N];
    for i in 0..N {
        o[i] = V::load(&a[i * V::W..]);
    }
    o
}

#[inline(always)]
fn unvec<V: Simd, const N: usize>(a: &[V; N]) -> [f64; MAX_LANES] {
    let mut o = [0.0; MAX_LANES];
    for i in 0..N {
        a[i].store(&mut o[i * V::W..]);
    }
    o
}

/// `vecs` of eight lane arrays of a spin-2 block: its pairs fill the first N/2 vectors (N: the
/// recurrence's, Z+ and Z−), the rest stay zero. A plain function, not a closure: closures do
/// not inherit the caller's target features, so their SIMD loads were calls.
#[inline(always)]
fn vecs8<V: Simd, const N: usize>(a: &[[f64; MAX_LANES]; 8]) -> [[V; N]; 8] {
    let mut o = [[V::splat(0.0); N]; 8];
    for i in 0..8 {
        for q in 0..N / 2 {
            o[i][q] = V::load(&a[i][q * V::W..]);
        }
    }
    o
}

// ------------------------------------------------------------------------------------------
// Synthesis visitors

struct S0<'a, V: Simd, const N: usize> {
    /// Per even j = 2i: [E_i, O_i], the alm's weights of ν_{2i} for the even and (before the
    /// factor x) the odd degrees (see `even_odd`).
    eo: &'a [[C64; 2]],
    /// [even re, even im, odd re, odd im] (odd still to be multiplied by x)
    acc: [[V; N]; 4],
}

impl<V: Simd, const N: usize> Visit<V, N> for S0<'_, V, N> {
    #[inline(always)]
    fn visit<const ODD: bool>(&mut self, i: usize, _prev: &[V; N], cur: &[V; N]) {
        let [e, o] = self.eo[i];
        let (er, ei, or, oi) = (
            V::splat(e.re),
            V::splat(e.im),
            V::splat(o.re),
            V::splat(o.im),
        );
        for q in 0..N {
            self.acc[0][q] = er.mul_add(cur[q], self.acc[0][q]);
            self.acc[1][q] = ei.mul_add(cur[q], self.acc[1][q]);
            self.acc[2][q] = or.mul_add(cur[q], self.acc[2][q]);
            self.acc[3][q] = oi.mul_add(cur[q], self.acc[3][q]);
        }
    }
}

/// The weights of the x² recurrence's ν_{2i} for one alm column `c` (μ form, c_j = a_j g_j,
/// padded): E_i = c_{2i} h_{2i}, O_i = B_{2i+1} h_{2i} S_{2i}, S_j = c_{j+1} − S_{j+2}, so that
/// Σ_j c_j μ_j = Σ_i E_i ν_{2i} + x Σ_i O_i ν_{2i} (see legendre.rs).
fn even_odd(c: &[C64], t: &MTables, out: &mut Vec<[C64; 2]>) {
    let zero = C64::new(0.0, 0.0);
    let (n, ne) = (t.n(), t.ne());
    out.clear();
    out.resize(ne + 2, [zero; 2]);
    let mut s = zero;
    for i in (0..ne).rev() {
        let j = 2 * i;
        s = if j + 1 < n { c[j + 1] - s } else { zero };
        out[i] = [c[j] * t.h[i], s * (t.b[j + 1] * t.h[i])];
    }
}

/// The folded sums below give healpy's spin-2 signs only where SQ2 = SQ1 and SU2 = −SU1.
const _: () = assert!(SQ2 == SQ1 && SU2 == -SU1);

/// Spin-2 synthesis sums of a block. With P_j = e_j + i b_j and M_j = e_j − i b_j (e, b: the E
/// and B columns times g_l H_l / 2, so that Σ_l a_l F_l = Σ_l a_l (Z+ ± Z−) / sin²θ), healpy's
/// signs (Q_m = SQ1 ΣE F1 + SQ2 i ΣB F2, U_m = SU1 ΣB F1 + SU2 i ΣE F2, legendre.rs) and the
/// parity Z±(−x) = (−1)^j Z∓(x) give, per pair and times 1/sin²θ:
/// north Q = SQ1 (A + B), U = SU1 i (B − A); south Q = SQ1 (C + D), U = SU1 i (C − D), with
/// A = Σ P Z+, B = Σ M Z−, C = Σ (−1)^j M Z+, D = Σ (−1)^j P Z−. The parity goes into the sign
/// of the FMA, so a vector of pairs needs 8 sums (sums per parity needed 16), which leaves the
/// registers for two vectors of pairs per block: four recurrences in flight (bench/NOTES.md,
/// session 18 cpusht9).
struct S2<'a, V: Simd, const N: usize> {
    /// [P_j, M_j] per j.
    pm: &'a [[C64; 2]],
    /// [A re, A im, B re, B im, C re, C im, D re, D im], per vector of pairs (the first N/2).
    acc: [[V; N]; 8],
}

impl<V: Simd, const N: usize> VisitZ<V, N> for S2<'_, V, N> {
    #[inline(always)]
    fn visit<const ODD: bool>(&mut self, j: usize, z: &[V; N]) {
        let [p, m] = self.pm[j];
        let (pr, pi, mr, mi) = (
            V::splat(p.re),
            V::splat(p.im),
            V::splat(m.re),
            V::splat(m.im),
        );
        let a = &mut self.acc;
        let h = N / 2;
        for i in 0..h {
            let (zp, zm) = (z[i], z[i + h]);
            a[0][i] = pr.mul_add(zp, a[0][i]);
            a[1][i] = pi.mul_add(zp, a[1][i]);
            a[2][i] = mr.mul_add(zm, a[2][i]);
            a[3][i] = mi.mul_add(zm, a[3][i]);
            if ODD {
                a[4][i] = mr.neg_mul_add(zp, a[4][i]);
                a[5][i] = mi.neg_mul_add(zp, a[5][i]);
                a[6][i] = pr.neg_mul_add(zm, a[6][i]);
                a[7][i] = pi.neg_mul_add(zm, a[7][i]);
            } else {
                a[4][i] = mr.mul_add(zp, a[4][i]);
                a[5][i] = mi.mul_add(zp, a[5][i]);
                a[6][i] = pr.mul_add(zm, a[6][i]);
                a[7][i] = pi.mul_add(zm, a[7][i]);
            }
        }
    }
}

/// [P_j, M_j] = [e_j + i b_j, e_j − i b_j] of the E and B columns `e`, `b` (μ form) times
/// H_j / 2 (`hh`), for `S2`.
fn plus_minus(e: &[C64], b: &[C64], hh: &[f64], out: &mut Vec<[C64; 2]>) {
    out.clear();
    out.extend(e.iter().zip(b).zip(hh).map(|((e, b), &h)| {
        let (e, b) = (e * h, b * h);
        [
            C64::new(e.re - b.im, e.im + b.re),
            C64::new(e.re + b.im, e.im - b.re),
        ]
    }));
}

/// Per-thread scratch of the Legendre stage.
#[derive(Default)]
pub(super) struct LegScratch {
    t: MTables,
    a: Vec<Vec<C64>>,
    /// Spin 2: the E and B columns times H/2, as [P, M] (see `S2`).
    pm: Vec<[C64; 2]>,
    eo: Vec<[C64; 2]>,
    tmp: Vec<f64>,
    /// This m's start values per pair of the chunk (`starts`).
    st: Vec<(f64, i32)>,
}

fn scaled_column(src: &[C64], g: &[f64], n: usize, out: &mut Vec<C64>) {
    out.clear();
    out.extend(src[..n].iter().zip(g).map(|(a, &g)| a * g));
    out.resize(n + 2, C64::new(0.0, 0.0));
}

/// 1/sin²θ and sin²θ for the first `n` lanes (the block's, padding included; 1 beyond).
#[inline(always)]
fn inv_s2(s: &[f64; MAX_LANES], n: usize) -> ([f64; MAX_LANES], [f64; MAX_LANES]) {
    let mut is2 = [1.0; MAX_LANES];
    let mut s2 = [1.0; MAX_LANES];
    for r in 0..n {
        s2[r] = s[r] * s[r];
        is2[r] = 1.0 / s2[r];
    }
    (is2, s2)
}

/// `MTables::fill` compiled for the SIMD level of the kernel that calls it, so that its square
/// roots and divisions vectorise (the same numbers); a function of its own, not inlined: inlined
/// into the kernel it cost the kernel's loops more than it saved (bench/NOTES.md, session 17
/// cpusht8).
#[inline(always)]
fn fill_tables<V: Simd>(t: &mut MTables, m: usize, lmax: usize, pol: bool) {
    // SAFETY: V is F8 (W = 8) only in the AVX-512 kernels and F4 (W = 4) only in the AVX2
    // ones (their own operations need those features), run after simd_level checked the CPU.
    #[cfg(target_arch = "x86_64")]
    match V::W {
        8 => return unsafe { fill_avx512(t, m, lmax, pol) },
        4 => return unsafe { fill_avx2(t, m, lmax, pol) },
        _ => {}
    }
    t.fill(m, lmax, pol);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline(never)]
unsafe fn fill_avx512(t: &mut MTables, m: usize, lmax: usize, pol: bool) {
    t.fill(m, lmax, pol);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline(never)]
unsafe fn fill_avx2(t: &mut MTables, m: usize, lmax: usize, pol: bool) {
    t.fill(m, lmax, pol);
}

/// Synthesis Legendre stage for one m over the pairs of a chunk; `cols[i]`: column m of alm
/// component i (l = m..=lmax); sets every entry of `ph`, laid out as [comp][ring-in-chunk]
/// (ring 2q = north, 2q+1 = south of the chunk's pair q; zero where all lanes of a block are
/// negligible), so callers need not clear it. N0 vectors of V per block of spin-0 lanes; N2
/// vectors in the spin-2 recurrence (Z+ and Z−, N2/2 vectors of lanes each).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn synth_m<V: Simd, const N0: usize, const N2: usize>(
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    cols: &[&[C64]],
    m: usize,
    sc: &mut LegScratch,
    ph: &mut [C64],
) {
    let (l0, l2) = (N0 * V::W, N2 / 2 * V::W);
    let lay = plan.lay;
    let pol = jobs.iter().any(|j| matches!(j, Job::Spin2(..)));
    fill_tables::<V>(&mut sc.t, m, lay.lmax, pol);
    let n = sc.t.n();
    let lb = log2_growth_bound(m, lay.lmax, &plan.ln_fact);
    starts(plan, &ch.pairs, m, lb, &mut sc.st);
    let np = ch.np();
    sc.a.resize_with(cols.len(), Vec::new);
    for (i, a) in cols.iter().enumerate() {
        scaled_column(&a[..n], &sc.t.g, n, &mut sc.a[i]);
    }
    let zero = C64::new(0.0, 0.0);
    let nrc = ch.nrc();
    for job in jobs {
        match *job {
            Job::Spin0(ai, mi) => {
                even_odd(&sc.a[ai], &sc.t, &mut sc.eo);
                let mut p = 0;
                while p < np {
                    let blk = &ch.pairs[p..(p + l0).min(np)];
                    if let Some((x, _s, v, k)) = lanes(plan, blk, l0, &sc.st[p..]) {
                        let mut vis = S0::<V, N0> {
                            eo: &sc.eo,
                            acc: [[V::splat(0.0); N0]; 4],
                        };
                        leg::run_x2::<V, N0, _>(&sc.t, &vecs(&x.map(|x| x * x)), &v, &k, &mut vis);
                        let acc = vis.acc.map(|a| unvec(&a));
                        for r in 0..blk.len() {
                            let pl = p + r;
                            let e = C64::new(acc[0][r], acc[1][r]);
                            let o = C64::new(acc[2][r], acc[3][r]) * x[r];
                            ph[mi * nrc + 2 * pl] = e + o;
                            ph[mi * nrc + 2 * pl + 1] = e - o;
                        }
                    } else {
                        for r in 2 * p..2 * (p + blk.len()) {
                            ph[mi * nrc + r] = zero;
                        }
                    }
                    p += l0;
                }
            }
            Job::Spin2([ei, bi], [qi, ui]) => {
                plus_minus(&sc.a[ei], &sc.a[bi], &sc.t.hh, &mut sc.pm);
                let su = C64::new(0.0, SU1);
                let mut p = 0;
                while p < np {
                    let blk = &ch.pairs[p..(p + l2).min(np)];
                    if let Some((x, s, v, k)) = lanes(plan, blk, l2, &sc.st[p..]) {
                        let (is2, s2) = inv_s2(&s, l2);
                        let mut vis = S2::<V, N2> {
                            pm: &sc.pm,
                            acc: [[V::splat(0.0); N2]; 8],
                        };
                        leg::run_spin2::<V, N2, _>(&sc.t, &x, &s2, &v, &k, &mut vis);
                        let acc = vis.acc.map(|a| unvec(&a));
                        let c = |i: usize, r: usize| C64::new(acc[i][r], acc[i + 1][r]) * is2[r];
                        for r in 0..blk.len() {
                            let pl = p + r;
                            let (a, b, cc, d) = (c(0, r), c(2, r), c(4, r), c(6, r));
                            ph[qi * nrc + 2 * pl] = SQ1 * (a + b);
                            ph[qi * nrc + 2 * pl + 1] = SQ1 * (cc + d);
                            ph[ui * nrc + 2 * pl] = su * (b - a);
                            ph[ui * nrc + 2 * pl + 1] = su * (cc - d);
                        }
                    } else {
                        for r in 2 * p..2 * (p + blk.len()) {
                            ph[qi * nrc + r] = zero;
                            ph[ui * nrc + r] = zero;
                        }
                    }
                    p += l2;
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn synth_m_avx2(
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    cols: &[&[C64]],
    m: usize,
    sc: &mut LegScratch,
    ph: &mut [C64],
) {
    synth_m::<F4, { L0 / 4 }, { 2 * L2 / 4 }>(plan, ch, jobs, cols, m, sc, ph)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn synth_m_avx512(
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    cols: &[&[C64]],
    m: usize,
    sc: &mut LegScratch,
    ph: &mut [C64],
) {
    // 8-wide vectors. Spin 0: 24 lanes per block (three vectors: 32 lanes spilled five of the
    // loop's zmm registers; a lane's result does not depend on its block, so the same
    // numbers). Spin 2: 16 pairs per block, two vectors each of Z+ and Z− (8 pairs: 15 % slower
    // per degree in a loop microbenchmark). bench/NOTES.md, session 18 cpusht9.
    synth_m::<F8, { 3 * L0 / 8 }, { 8 * L2 / 8 }>(plan, ch, jobs, cols, m, sc, ph)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn anal_m_avx512(
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    ph: &[C64],
    m: usize,
    sc: &mut LegScratch,
    cols: &mut [&mut [C64]],
) {
    // 32 spin-2 pairs (MAX_LANES) per block: the partial sums in `tmp` are loaded and stored
    // once per degree and block, so more pairs per block means less of that traffic per FMA
    // (16 pairs: 6-9% slower at nside 1024; 8 pairs, or 16 spin-0 lanes, 12-26% slower; 64
    // spin-0 lanes no faster: bench/NOTES.md, sessions 12 and 14).
    anal_m::<F8, { 4 * L0 / 8 }, { 16 * L2 / 8 }>(plan, ch, jobs, ph, m, sc, cols)
}

/// SIMD level: 0 none, 1 AVX2+FMA (4 lanes), 2 AVX-512F (8 lanes): the best the CPU has,
/// capped by SKYCONV_CPU_SIMD ("scalar", "avx2"; for testing the other code paths).
pub(super) fn simd_level() -> u8 {
    let cap = match std::env::var("SKYCONV_CPU_SIMD").as_deref() {
        Ok("scalar") => 0,
        Ok("avx2") => 1,
        _ => 2,
    };
    #[cfg(target_arch = "x86_64")]
    {
        let have = if !has_avx2() {
            0
        } else if crate::backend::cpu_features::avx512f() {
            2
        } else {
            1
        };
        have.min(cap)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = cap;
        0
    }
}

fn has_avx2() -> bool {
    crate::backend::cpu_features::avx2_fma()
}

/// The synthesis Legendre stage for one m at the best SIMD `level` (see `synth_m`).
#[allow(clippy::too_many_arguments)]
pub(super) fn synth_one(
    level: u8,
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    cols: &[&[C64]],
    m: usize,
    sc: &mut LegScratch,
    ph: &mut [C64],
) {
    // SAFETY: the CPU has the features of the level (simd_level checks them).
    #[cfg(target_arch = "x86_64")]
    match level {
        2 => return unsafe { synth_m_avx512(plan, ch, jobs, cols, m, sc, ph) },
        1 => return unsafe { synth_m_avx2(plan, ch, jobs, cols, m, sc, ph) },
        _ => {}
    }
    let _ = level;
    synth_m::<S1, L0, { 2 * L2 }>(plan, ch, jobs, cols, m, sc, ph);
}

/// The analysis Legendre stage for one m at the best SIMD `level` (see `anal_m`).
#[allow(clippy::too_many_arguments)]
pub(super) fn anal_one(
    level: u8,
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    ph: &[C64],
    m: usize,
    sc: &mut LegScratch,
    cols: &mut [&mut [C64]],
) {
    // SAFETY: the CPU has the features of the level (simd_level checks them).
    #[cfg(target_arch = "x86_64")]
    match level {
        2 => return unsafe { anal_m_avx512(plan, ch, jobs, ph, m, sc, cols) },
        1 => return unsafe { anal_m_avx2(plan, ch, jobs, ph, m, sc, cols) },
        _ => {}
    }
    let _ = level;
    anal_m::<S1, L0, { 2 * L2 }>(plan, ch, jobs, ph, m, sc, cols);
}

/// One ring of a synthesis: folds the ring's coefficients Δ_m (`coef(m)`, m = 0..=mmax, times
/// e^{i m φ0} from `tw`) into its nphi Fourier bins and inverse-FFTs them into `out` (nphi
/// pixels): out_j = Σ_m Δ_m e^{i m φ_j} + c.c. for m > 0.
pub(super) fn ring_synth(
    fft: &RingFft,
    mmax: usize,
    tw: &[C64],
    coef: impl Fn(usize) -> C64,
    fs: &mut FftScratch,
    out: &mut [f64],
) {
    let nphi = out.len();
    let half = nphi / 2;
    fs.spec.clear();
    fs.spec.resize(half + 1, C64::new(0.0, 0.0));
    let sp = &mut fs.spec;
    sp[0] += coef(0).re;
    // k = m mod nphi, kept incrementally
    let mut k = 0usize;
    for m in 1..=mmax {
        k += 1;
        if k == nphi {
            k = 0;
        }
        let g = coef(m) * tw[m];
        if k <= half {
            sp[k] += g;
        }
        let k2 = if k == 0 { 0 } else { nphi - k };
        if k2 <= half {
            sp[k2] += g.conj();
        }
    }
    spectrum_to_ring(fft, sp, &mut fs.scratch, out);
}

/// The inverse real FFT of a folded half spectrum `sp` (nphi/2 + 1 bins) into the ring `out`.
fn spectrum_to_ring(fft: &RingFft, sp: &mut [C64], scratch: &mut Vec<C64>, out: &mut [f64]) {
    let half = out.len() / 2;
    sp[0].im = 0.0;
    sp[half].im = 0.0;
    scratch.resize(fft.c2r.get_scratch_len(), C64::new(0.0, 0.0));
    fft.c2r
        .process_with_scratch(sp, out, scratch)
        .expect("ring FFT sizes are consistent");
}

/// `ring_synth`'s fold for the rings of one block of the phase buffer at once (`blk`: the
/// block's (mmax + 1)·RB coefficients of one component, `bidx` order): one pass over m reads
/// each m's RB coefficients together, where a ring at a time read one of them per 128 B and
/// stalled on it (bench/NOTES.md, session 11). Pair q of the block (rings 2q, 2q + 1) has
/// `nphi[q]` pixels and twiddles `tw[q]`; `spec[r]` gets ring r's half spectrum, each bin's
/// terms added in the same order as `ring_synth` (the same numbers).
fn fold_block(blk: &[C64], mmax: usize, nphi: &[usize], tw: &[Vec<C64>], spec: &mut [Vec<C64>]) {
    let nq = nphi.len();
    let mut k = [0usize; RB / 2];
    for q in 0..nq {
        for h in 0..2 {
            let sp = &mut spec[2 * q + h];
            sp.clear();
            sp.resize(nphi[q] / 2 + 1, C64::new(0.0, 0.0));
            sp[0] += blk[2 * q + h].re;
        }
    }
    for m in 1..=mmax {
        let row = &blk[m * RB..(m + 1) * RB];
        for q in 0..nq {
            let (n, half) = (nphi[q], nphi[q] / 2);
            k[q] += 1;
            if k[q] == n {
                k[q] = 0;
            }
            let kq = k[q];
            let k2 = if kq == 0 { 0 } else { n - kq };
            let t = tw[q][m];
            for h in 0..2 {
                let g = row[2 * q + h] * t;
                let sp = &mut spec[2 * q + h];
                if kq <= half {
                    sp[kq] += g;
                }
                if k2 <= half {
                    sp[k2] += g.conj();
                }
            }
        }
    }
}

/// One ring of an analysis: the forward FFT of the ring's pixels `pix`, giving for each
/// m = 0..=mmax the coefficient Σ_j pix_j e^{−i m φ_j} (aliased to m mod nphi, times
/// e^{−i m φ0} from `tw`), passed to `put(m, value)`.
pub(super) fn ring_anal(
    fft: &RingFft,
    mmax: usize,
    tw: &[C64],
    pix: &[f64],
    fs: &mut FftScratch,
    mut put: impl FnMut(usize, C64),
) {
    let nphi = pix.len();
    let half = nphi / 2;
    fs.spec.clear();
    fs.spec.resize(half + 1, C64::new(0.0, 0.0));
    fs.scratch
        .resize(fft.r2c.get_scratch_len(), C64::new(0.0, 0.0));
    fs.ring.clear();
    fs.ring.extend_from_slice(pix);
    fft.r2c
        .process_with_scratch(&mut fs.ring, &mut fs.spec, &mut fs.scratch)
        .expect("ring FFT sizes are consistent");
    let mut k = 0usize;
    for m in 0..=mmax {
        let r = if k <= half {
            fs.spec[k]
        } else {
            fs.spec[nphi - k].conj()
        };
        put(m, r * tw[m]);
        k += 1;
        if k == nphi {
            k = 0;
        }
    }
}

/// The plan's FFT of ring `r` (built on demand when the plan has none).
pub(super) fn fft_of(plan: &Plan, r: usize) -> Arc<RingFft> {
    match plan.ffts.get(r) {
        Some(f) => f.clone(),
        None => ring_fft(plan.rings[r].nphi),
    }
}

/// The m columns of `alm` arrays in the layout `lay`: result[m][component].
fn columns_ref<'a>(lay: super::AlmLayout, alms: &[&'a [C64]]) -> Vec<Vec<&'a [C64]>> {
    (0..=lay.mmax)
        .map(|m| {
            let off = lay.mstart(m);
            alms.iter().map(|a| &a[off..off + lay.mlen(m)]).collect()
        })
        .collect()
}

/// Rings per block of the phase buffer. The buffer is laid out [block][comp][m][ring in
/// block]: a Legendre task (one m) writes RB consecutive coefficients per block, a ring-FFT
/// task (one block) reads one contiguous (mmax+1)·RB region per component. With the plain
/// [m][comp][ring] layout the FFT stage read one coefficient per cache line (and per page at
/// nside ≥ 512), which cost as much as the recurrence.
const RB: usize = 8;

/// Position of (m, comp c, ring-in-chunk r) in the blocked phase buffer (see `RB`).
#[inline(always)]
fn bidx(m: usize, c: usize, r: usize, ncomp: usize, nm: usize) -> usize {
    (((r / RB) * ncomp + c) * nm + m) * RB + r % RB
}

/// Synthesis on the CPU: `alms` (layout `plan.lay`) to `maps` (RING, npix each).
pub fn alm2map(plan: &Plan, jobs: &[Job], alms: &[&[C64]], maps: &mut [&mut [f64]]) {
    let ncomp = maps.len();
    let mmax = plan.lay.mmax;
    let nm = mmax + 1;
    let level = simd_level();
    let acols = columns_ref(plan.lay, alms);
    let ptrs: Vec<Disjoint<f64>> = maps.iter_mut().map(|m| Disjoint(m.as_mut_ptr())).collect();
    let stop = crate::backend::cancel::current();
    let stop = &stop;
    for ch in chunks(plan, ncomp) {
        if stop.is_set() {
            return;
        }
        let nrc = ch.nrc();
        let nrb = nrc.div_ceil(RB);
        let mut phase_buf = take_buffer(nrb * ncomp * nm * RB);
        let pp = Disjoint(phase_buf.as_mut_ptr());
        let (pp, ch) = (&pp, &ch);
        (0..nm).into_par_iter().for_each_init(
            || (LegScratch::default(), Vec::new()),
            |(sc, ph), m| {
                if stop.is_set() {
                    return;
                }
                // Not cleared: synth_one sets every entry. Written in place into the blocked
                // buffer instead, the kernel's scattered stores cost more than this copy.
                ph.resize(ncomp * nrc, C64::new(0.0, 0.0));
                synth_one(level, plan, ch, jobs, &acols[m], m, sc, ph);
                for c in 0..ncomp {
                    for (b, seg) in ph[c * nrc..(c + 1) * nrc].chunks(RB).enumerate() {
                        let at = bidx(m, c, b * RB, ncomp, nm);
                        // SAFETY: the RB entries of (block b, comp c, m) are written by the
                        // task of this m only, and lie inside the buffer.
                        unsafe {
                            std::ptr::copy_nonoverlapping(seg.as_ptr(), pp.at(at), seg.len())
                        };
                    }
                }
            },
        );
        let phase = &phase_buf[..];
        let ptrs = &ptrs;
        (0..nrb)
            .into_par_iter()
            .for_each_init(FftScratch::default, |fs, b| {
                if stop.is_set() {
                    return;
                }
                let pls = b * RB / 2..((b + 1) * RB / 2).min(ch.np());
                let prs: Vec<_> = pls.map(|pl| &plan.pairs[ch.pairs[pl]]).collect();
                let nphi: Vec<usize> = prs.iter().map(|pr| plan.rings[pr.north].nphi).collect();
                fs.tws.resize_with(prs.len(), Vec::new);
                fs.specs.resize_with(RB, Vec::new);
                for (pr, tw) in prs.iter().zip(&mut fs.tws) {
                    twiddles(plan.rings[pr.north].phi0, nm, tw);
                }
                for c in 0..ncomp {
                    let at = bidx(0, c, b * RB, ncomp, nm);
                    let blk = &phase[at..at + nm * RB];
                    fold_block(blk, mmax, &nphi, &fs.tws, &mut fs.specs);
                    for (q, pr) in prs.iter().enumerate() {
                        for (h, ri) in [Some(pr.north), pr.south].into_iter().enumerate() {
                            let Some(ri) = ri else { continue };
                            let first = plan.rings[ri].first as usize;
                            // SAFETY: rings are disjoint pixel ranges of map c; each is written
                            // by one task only.
                            let dst = unsafe {
                                std::slice::from_raw_parts_mut(ptrs[c].get().add(first), nphi[q])
                            };
                            let sp = &mut fs.specs[2 * q + h];
                            spectrum_to_ring(&plan.ffts[pr.north], sp, &mut fs.scratch, dst);
                        }
                    }
                }
            });
        give_buffer(phase_buf);
    }
}

// ------------------------------------------------------------------------------------------
// Analysis visitors

struct A0<'a, V: Simd, const N: usize> {
    /// Partial sums per even j = 2i, one vector per part: [i][U re, U im, V re, V im] with
    /// U = Σ ν_{2i} (north + south), V = Σ ν_{2i} x (north − south) (reduced over the lanes
    /// once per m, not once per degree and block).
    tmp: &'a mut [f64],
    /// [U re, U im, V re, V im] inputs per lane.
    inp: [[V; N]; 4],
}

impl<V: Simd, const N: usize> Visit<V, N> for A0<'_, V, N> {
    #[inline(always)]
    fn visit<const ODD: bool>(&mut self, i: usize, _prev: &[V; N], cur: &[V; N]) {
        let w = V::W;
        let t = &mut self.tmp[4 * w * i..4 * w * (i + 1)];
        let mut acc = [
            V::load(&t[..]),
            V::load(&t[w..]),
            V::load(&t[2 * w..]),
            V::load(&t[3 * w..]),
        ];
        for q in 0..N {
            for c in 0..4 {
                acc[c] = cur[q].mul_add(self.inp[c][q], acc[c]);
            }
        }
        for c in 0..4 {
            acc[c].store(&mut t[c * w..]);
        }
    }
}

struct A2<'a, V: Simd, const N: usize> {
    /// Partial sums per l, one vector per part: [j][E re, E im, B re, B im] (still to be
    /// multiplied by g_l H_l / 2).
    tmp: &'a mut [f64],
    /// [parity][8] (the ring sums already divided by sin²θ): with the F1 weights s1_q and the
    /// F2 weights s2_q of part q (E re = Σ F1 s1_0 + F2 s2_0, ...), in[2q] = s1_q + s2_q
    /// (the weight of Z+) and in[2q+1] = s1_q − s2_q (of Z−).
    inp: [[[V; N]; 8]; 2],
}

impl<V: Simd, const N: usize> VisitZ<V, N> for A2<'_, V, N> {
    #[inline(always)]
    fn visit<const ODD: bool>(&mut self, j: usize, z: &[V; N]) {
        let w = V::W;
        let s = &self.inp[ODD as usize];
        let t = &mut self.tmp[4 * w * j..4 * w * (j + 1)];
        let mut acc = [
            V::load(&t[..]),
            V::load(&t[w..]),
            V::load(&t[2 * w..]),
            V::load(&t[3 * w..]),
        ];
        let h = N / 2;
        for i in 0..h {
            for q in 0..4 {
                acc[q] = z[i].mul_add(s[2 * q][i], z[i + h].mul_add(s[2 * q + 1][i], acc[q]));
            }
        }
        for q in 0..4 {
            acc[q].store(&mut t[q * w..]);
        }
    }
}

/// Analysis Legendre stage for one m over the pairs of a chunk: adds into `cols` (one alm
/// column per output component) from `ph`, this m's weighted ring coefficients laid out
/// [comp][ring-in-chunk].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn anal_m<V: Simd, const N0: usize, const N2: usize>(
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    ph: &[C64],
    m: usize,
    sc: &mut LegScratch,
    cols: &mut [&mut [C64]],
) {
    let (l0, l2) = (N0 * V::W, N2 / 2 * V::W);
    let lay = plan.lay;
    let pol = jobs.iter().any(|j| matches!(j, Job::Spin2(..)));
    fill_tables::<V>(&mut sc.t, m, lay.lmax, pol);
    let n = sc.t.n();
    let lb = log2_growth_bound(m, lay.lmax, &plan.ln_fact);
    starts(plan, &ch.pairs, m, lb, &mut sc.st);
    let nrc = ch.nrc();
    let np = ch.np();
    let at = |c: usize, q: usize, south: bool| ph[c * nrc + 2 * q + south as usize];
    for job in jobs {
        match *job {
            Job::Spin0(ai, mi) => {
                let ne = sc.t.ne();
                sc.tmp.clear();
                sc.tmp.resize(4 * V::W * ne, 0.0);
                // The chunk's lane blocks: x², inputs, where the recurrence stands.
                let mut blocks = Vec::new();
                let mut p = 0;
                while p < np {
                    let blk = &ch.pairs[p..(p + l0).min(np)];
                    if let Some((x, _s, v, k)) = lanes(plan, blk, l0, &sc.st[p..]) {
                        let mut inp = [[0.0; MAX_LANES]; 4];
                        for r in 0..blk.len() {
                            let (nn, ss) = (at(mi, p + r, false), at(mi, p + r, true));
                            let (e, o) = (nn + ss, (nn - ss) * x[r]);
                            inp[0][r] = e.re;
                            inp[1][r] = e.im;
                            inp[2][r] = o.re;
                            inp[3][r] = o.im;
                        }
                        blocks.push((
                            vecs::<V, N0>(&x.map(|x| x * x)),
                            [vecs(&inp[0]), vecs(&inp[1]), vecs(&inp[2]), vecs(&inp[3])],
                            leg::Pos::<V, N0>::new(&v, &k),
                        ));
                    }
                    p += l0;
                }
                // Every block over one window of degrees, then the next (`TILE_BYTES`): each
                // `tmp` entry still gets the blocks' terms in block order.
                let any = !blocks.is_empty();
                let win = (TILE_BYTES / (4 * V::W * 8)).max(2) & !1;
                let mut w0 = 0;
                while !blocks.is_empty() {
                    for (x2, inp, pos) in blocks.iter_mut() {
                        let mut vis = A0::<V, N0> {
                            tmp: &mut sc.tmp,
                            inp: *inp,
                        };
                        leg::run_x2_to::<V, N0, _>(&sc.t, x2, pos, w0 + win, &mut vis);
                    }
                    blocks.retain(|b| !b.2.done());
                    w0 += win;
                }
                if any {
                    // Adjoint of `even_odd`: a_{2i} ← h_{2i} U_i, a_{2i+1} ← T_{2i} with
                    // T_j = B_{j+1} h_j V_j − T_{j−2}; then the factor g_j of the μ form.
                    let col = &mut cols[ai];
                    let w = V::W;
                    let (t, n) = (&sc.t, sc.t.n());
                    let mut tt = C64::new(0.0, 0.0);
                    for (i, a) in sc.tmp.chunks_exact(4 * w).enumerate() {
                        let j = 2 * i;
                        let (ur, ui) = V::hsum2(V::load(a), V::load(&a[w..]));
                        let (vr, vi) = V::hsum2(V::load(&a[2 * w..]), V::load(&a[3 * w..]));
                        col[j] += C64::new(ur, ui) * (t.h[i] * t.g[j]);
                        if j + 1 < n {
                            tt = C64::new(vr, vi) * (t.b[j + 1] * t.h[i]) - tt;
                            col[j + 1] += tt * t.g[j + 1];
                        }
                    }
                }
            }
            Job::Spin2([ei, bi], [qi, ui]) => {
                sc.tmp.clear();
                sc.tmp.resize(4 * V::W * n, 0.0);
                let mut any = false;
                let mut p = 0;
                while p < np {
                    let blk = &ch.pairs[p..(p + l2).min(np)];
                    if let Some((x, s, v, k)) = lanes(plan, blk, l2, &sc.st[p..]) {
                        any = true;
                        let (is2, s2) = inv_s2(&s, l2);
                        let mut inp = [[[0.0; MAX_LANES]; 8]; 2];
                        for r in 0..blk.len() {
                            let (qn, qs) = (at(qi, p + r, false), at(qi, p + r, true));
                            let (un, us) = (at(ui, p + r, false), at(ui, p + r, true));
                            let (qn, qs, un, us) =
                                (qn * is2[r], qs * is2[r], un * is2[r], us * is2[r]);
                            let (qp, qm, up, um) = (qn + qs, qn - qs, un + us, un - us);
                            // even l−m: F1 pairs with (q+, u+), F2 with (q−, u−); odd: swapped.
                            for (par, (q1, u1, q2, u2)) in
                                [(qp, up, qm, um), (qm, um, qp, up)].into_iter().enumerate()
                            {
                                let a = q1 * SQ1;
                                let bv = u2 * SU2;
                                let cc = u1 * SU1;
                                let d = q2 * SQ2;
                                // (F1 weight, F2 weight) per part, then (Z+, Z−) weights.
                                let wts =
                                    [(a.re, bv.im), (a.im, -bv.re), (cc.re, d.im), (cc.im, -d.re)];
                                let row = &mut inp[par];
                                for (q, (w1, w2)) in wts.into_iter().enumerate() {
                                    row[2 * q][r] = w1 + w2;
                                    row[2 * q + 1][r] = w1 - w2;
                                }
                            }
                        }
                        let mut vis = A2::<V, N2> {
                            tmp: &mut sc.tmp,
                            inp: [vecs8(&inp[0]), vecs8(&inp[1])],
                        };
                        leg::run_spin2::<V, N2, _>(&sc.t, &x, &s2, &v, &k, &mut vis);
                    }
                    p += l2;
                }
                if any {
                    let w = V::W;
                    for (j, t) in sc.tmp.chunks_exact(4 * w).enumerate() {
                        let (a, b) = V::hsum2(V::load(t), V::load(&t[w..]));
                        let (c, d) = V::hsum2(V::load(&t[2 * w..]), V::load(&t[3 * w..]));
                        let g = sc.t.g[j] * sc.t.hh[j];
                        cols[ei][j] += C64::new(a, b) * g;
                        cols[bi][j] += C64::new(c, d) * g;
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn anal_m_avx2(
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    ph: &[C64],
    m: usize,
    sc: &mut LegScratch,
    cols: &mut [&mut [C64]],
) {
    // 8 spin-2 pairs per block (4 before: 15% slower at nside 512 on this path; 16 pairs 7%
    // slower than 8: bench/NOTES.md, session 14).
    anal_m::<F4, { L0 / 4 }, { 4 * L2 / 4 }>(plan, ch, jobs, ph, m, sc, cols)
}

/// Split each alm array into its m columns: result[m][component].
fn columns<'a>(plan: &Plan, alms: &'a mut [&mut [C64]]) -> Vec<Vec<&'a mut [C64]>> {
    let lay = plan.lay;
    let mut out: Vec<Vec<&'a mut [C64]>> = (0..=lay.mmax).map(|_| Vec::new()).collect();
    for a in alms.iter_mut() {
        let mut rest: &'a mut [C64] = unsafe {
            // SAFETY: reborrow for 'a; `alms` is borrowed mutably for 'a.
            std::slice::from_raw_parts_mut(a.as_mut_ptr(), a.len())
        };
        for (m, col) in out.iter_mut().enumerate() {
            let (head, tail) = rest.split_at_mut(lay.mlen(m));
            col.push(head);
            rest = tail;
        }
    }
    out
}

/// Analysis (adjoint synthesis with the plan's ring weights) on the CPU: `maps` to `alms`
/// (overwritten).
pub fn map2alm(plan: &Plan, jobs: &[Job], maps: &[&[f64]], alms: &mut [&mut [C64]]) {
    // in parallel: one thread clearing (and first touching) the output was a serial stretch
    // of the call
    for a in alms.iter_mut() {
        a.par_chunks_mut(1 << 14)
            .for_each(|c| c.fill(C64::new(0.0, 0.0)));
    }
    let ncomp = maps.len();
    let mmax = plan.lay.mmax;
    let nm = mmax + 1;
    let level = simd_level();
    let mut cols = columns(plan, alms);
    let stop = crate::backend::cancel::current();
    let stop = &stop;
    for ch in chunks(plan, ncomp) {
        if stop.is_set() {
            return;
        }
        let nrc = ch.nrc();
        let nrb = nrc.div_ceil(RB);
        let mut phase_buf = take_buffer(nrb * ncomp * nm * RB);
        let pp = Disjoint(phase_buf.as_mut_ptr());
        let (pp, ch) = (&pp, &ch);
        (0..nrb)
            .into_par_iter()
            .for_each_init(FftScratch::default, |fs, b| {
                if stop.is_set() {
                    return;
                }
                for pl in b * RB / 2..((b + 1) * RB / 2).min(ch.np()) {
                    let pr = &plan.pairs[ch.pairs[pl]];
                    let ring = &plan.rings[pr.north];
                    let nphi = ring.nphi;
                    let fft = &plan.ffts[pr.north];
                    twiddles(-ring.phi0, nm, &mut fs.tw);
                    let tw = std::mem::take(&mut fs.tw);
                    for c in 0..ncomp {
                        for (h, ri) in [Some(pr.north), pr.south].into_iter().enumerate() {
                            let base = bidx(0, c, 2 * pl + h, ncomp, nm);
                            let Some(ri) = ri else {
                                for m in 0..nm {
                                    // SAFETY: entry (m, c, 2pl+h) is written by this task only.
                                    unsafe { *pp.at(base + m * RB) = C64::new(0.0, 0.0) }
                                }
                                continue;
                            };
                            let first = plan.rings[ri].first as usize;
                            let w = plan.weights[ri];
                            let pix = &maps[c][first..first + nphi];
                            ring_anal(fft, mmax, &tw, pix, fs, |m, v| {
                                // SAFETY: entry (m, c, 2pl+h) is written by this task only.
                                unsafe { *pp.at(base + m * RB) = v * w }
                            });
                        }
                    }
                    fs.tw = tw;
                }
            });
        let phase = &phase_buf[..];
        cols.par_iter_mut().enumerate().for_each_init(
            || (LegScratch::default(), Vec::new()),
            |(sc, ph), (m, col)| {
                if stop.is_set() {
                    return;
                }
                ph.clear();
                for c in 0..ncomp {
                    for b in 0..nrb {
                        let at = bidx(m, c, b * RB, ncomp, nm);
                        ph.extend_from_slice(&phase[at..at + RB.min(nrc - b * RB)]);
                    }
                }
                anal_one(level, plan, ch, jobs, ph, m, sc, col)
            },
        );
        give_buffer(phase_buf);
    }
}
