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

use rayon::prelude::*;
use realfft::num_complex::Complex64 as C64;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use super::legendre::{
    self as leg, fmadd, log2_growth_bound, start_value, MTables, Visit, SQ1, SQ2, SU1, SU2,
};
use super::Plan;

/// Lanes (ring pairs run together) for spin 0 and spin 2.
const L0: usize = 8;
const L2: usize = 4;
/// Budget for the per-chunk ring coefficients.
const CHUNK_BYTES: usize = 64 << 20;

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
fn twiddles(phi: f64, n: usize, out: &mut Vec<C64>) {
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

#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

#[derive(Default)]
struct FftScratch {
    ring: Vec<f64>,
    spec: Vec<C64>,
    scratch: Vec<C64>,
    tw: Vec<C64>,
}

// ------------------------------------------------------------------------------------------
// Chunking

struct Chunk {
    /// First pair and number of pairs.
    p0: usize,
    np: usize,
}

impl Chunk {
    fn nrc(&self) -> usize {
        2 * self.np
    }
}

fn chunks(plan: &Plan, ncomp: usize) -> Vec<Chunk> {
    let per_pair = ncomp * (plan.lay.mmax + 1) * 2 * std::mem::size_of::<C64>();
    let mut ch = (CHUNK_BYTES / per_pair.max(1)).max(L0);
    ch = ch.div_ceil(L0) * L0;
    let np = plan.pairs.len();
    let mut out = Vec::new();
    let mut p = 0;
    while p < np {
        let n = ch.min(np - p);
        out.push(Chunk { p0: p, np: n });
        p += n;
    }
    out
}

/// Lane state for a block of pairs starting at `first` (pairs past the chunk are padding).
#[allow(clippy::type_complexity)]
fn lanes<const L: usize>(
    plan: &Plan,
    first: usize,
    end: usize,
    m: usize,
    lb: f64,
) -> Option<([f64; L], [f64; L], [f64; L], [i32; L])> {
    let mut x = [0.0; L];
    let mut s = [1.0; L];
    let mut v = [0.0; L];
    let mut k = [0i32; L];
    let mut any = false;
    for r in 0..L {
        let p = first + r;
        if p >= end {
            continue;
        }
        let pr = &plan.pairs[p];
        x[r] = pr.x;
        s[r] = pr.s;
        let (vv, kk) = start_value(pr.s, m, plan.norms[m], lb);
        v[r] = vv;
        k[r] = kk;
        any |= vv != 0.0;
    }
    any.then_some((x, s, v, k))
}

// ------------------------------------------------------------------------------------------
// Synthesis visitors

struct S0<'a, const L: usize, const F: bool> {
    a: &'a [C64],
    acc: [[[f64; L]; 2]; 2],
}

impl<const L: usize, const F: bool> Visit<L> for S0<'_, L, F> {
    #[inline(always)]
    fn visit<const ODD: bool>(&mut self, j: usize, _prev: &[f64; L], cur: &[f64; L]) {
        let c = self.a[j];
        let acc = &mut self.acc[ODD as usize];
        for r in 0..L {
            acc[0][r] = fmadd::<F>(c.re, cur[r], acc[0][r]);
            acc[1][r] = fmadd::<F>(c.im, cur[r], acc[1][r]);
        }
    }
}

struct S2<'a, const L: usize, const F: bool> {
    e: &'a [C64],
    b: &'a [C64],
    pol: &'a [[f64; 5]],
    x: [f64; L],
    is2: [f64; L],
    xis2: [f64; L],
    /// [parity][W re, W im, X re, X im, Y re, Y im, Z re, Z im]
    acc: [[[f64; L]; 8]; 2],
}

impl<const L: usize, const F: bool> Visit<L> for S2<'_, L, F> {
    #[inline(always)]
    fn visit<const ODD: bool>(&mut self, j: usize, prev: &[f64; L], cur: &[f64; L]) {
        let c = self.pol[j];
        let (e, b) = (self.e[j], self.b[j]);
        let acc = &mut self.acc[ODD as usize];
        for r in 0..L {
            let f1 = fmadd::<F>(
                c[2] * self.xis2[r],
                prev[r],
                -(fmadd::<F>(c[0], self.is2[r], c[1]) * cur[r]),
            );
            let f2 = self.is2[r] * fmadd::<F>(c[4], prev[r], -(c[3] * self.x[r] * cur[r]));
            acc[0][r] = fmadd::<F>(e.re, f1, acc[0][r]);
            acc[1][r] = fmadd::<F>(e.im, f1, acc[1][r]);
            acc[2][r] = fmadd::<F>(b.re, f2, acc[2][r]);
            acc[3][r] = fmadd::<F>(b.im, f2, acc[3][r]);
            acc[4][r] = fmadd::<F>(b.re, f1, acc[4][r]);
            acc[5][r] = fmadd::<F>(b.im, f1, acc[5][r]);
            acc[6][r] = fmadd::<F>(e.re, f2, acc[6][r]);
            acc[7][r] = fmadd::<F>(e.im, f2, acc[7][r]);
        }
    }
}

/// Per-thread scratch of the Legendre stage.
#[derive(Default)]
struct LegScratch {
    t: MTables,
    a: Vec<Vec<C64>>,
    tmp: Vec<f64>,
}

fn scaled_column(src: &[C64], g: &[f64], n: usize, out: &mut Vec<C64>) {
    out.clear();
    out.extend(src[..n].iter().zip(g).map(|(a, &g)| a * g));
    out.resize(n + 2, C64::new(0.0, 0.0));
}

/// Synthesis Legendre stage for one m over the pairs of a chunk; writes `ph` laid out as
/// [comp][ring-in-chunk], ring 2p = north, 2p+1 = south of pair p.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn synth_m<const F: bool>(
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    alms: &[&[C64]],
    m: usize,
    sc: &mut LegScratch,
    ph: &mut [C64],
) {
    let lay = plan.lay;
    let pol = jobs.iter().any(|j| matches!(j, Job::Spin2(..)));
    sc.t.fill(m, lay.lmax, pol);
    let n = sc.t.n();
    let lb = log2_growth_bound(m, lay.lmax, &plan.ln_fact);
    let nrc = ch.nrc();
    let off = lay.mstart(m);
    let end = ch.p0 + ch.np;
    let na = alms.len();
    sc.a.resize_with(na, Vec::new);
    for (i, a) in alms.iter().enumerate() {
        scaled_column(&a[off..off + n], &sc.t.g, n, &mut sc.a[i]);
    }
    ph.fill(C64::new(0.0, 0.0));
    for job in jobs {
        match *job {
            Job::Spin0(ai, mi) => {
                let mut p = ch.p0;
                while p < end {
                    if let Some((x, _s, v, k)) = lanes::<L0>(plan, p, end, m, lb) {
                        let mut vis = S0::<L0, F> {
                            a: &sc.a[ai],
                            acc: [[[0.0; L0]; 2]; 2],
                        };
                        leg::run::<L0, F, _>(&sc.t, &x, v, k, &mut vis);
                        let [ev, od] = vis.acc;
                        for r in 0..L0.min(end - p) {
                            let pl = p - ch.p0 + r;
                            let (e, o) =
                                (C64::new(ev[0][r], ev[1][r]), C64::new(od[0][r], od[1][r]));
                            ph[mi * nrc + 2 * pl] = e + o;
                            ph[mi * nrc + 2 * pl + 1] = e - o;
                        }
                    }
                    p += L0;
                }
            }
            Job::Spin2([ei, bi], [qi, ui]) => {
                let mut p = ch.p0;
                while p < end {
                    if let Some((x, s, v, k)) = lanes::<L2>(plan, p, end, m, lb) {
                        let mut is2 = [0.0; L2];
                        let mut xis2 = [0.0; L2];
                        for r in 0..L2 {
                            is2[r] = 1.0 / (s[r] * s[r]);
                            xis2[r] = x[r] * is2[r];
                        }
                        let mut vis = S2::<L2, F> {
                            e: &sc.a[ei],
                            b: &sc.a[bi],
                            pol: &sc.t.pol,
                            x,
                            is2,
                            xis2,
                            acc: [[[0.0; L2]; 8]; 2],
                        };
                        leg::run::<L2, F, _>(&sc.t, &x, v, k, &mut vis);
                        let [ev, od] = vis.acc;
                        let c =
                            |a: &[[f64; L2]; 8], i: usize, r: usize| C64::new(a[i][r], a[i + 1][r]);
                        let iu = C64::new(0.0, 1.0);
                        for r in 0..L2.min(end - p) {
                            let pl = p - ch.p0 + r;
                            let (we, wo) = (c(&ev, 0, r), c(&od, 0, r));
                            let (xe, xo) = (c(&ev, 2, r), c(&od, 2, r));
                            let (ye, yo) = (c(&ev, 4, r), c(&od, 4, r));
                            let (ze, zo) = (c(&ev, 6, r), c(&od, 6, r));
                            ph[qi * nrc + 2 * pl] = SQ1 * (we + wo) + SQ2 * iu * (xe + xo);
                            ph[qi * nrc + 2 * pl + 1] = SQ1 * (we - wo) + SQ2 * iu * (xo - xe);
                            ph[ui * nrc + 2 * pl] = SU1 * (ye + yo) + SU2 * iu * (ze + zo);
                            ph[ui * nrc + 2 * pl + 1] = SU1 * (ye - yo) + SU2 * iu * (zo - ze);
                        }
                    }
                    p += L2;
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn synth_m_fma(
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    alms: &[&[C64]],
    m: usize,
    sc: &mut LegScratch,
    ph: &mut [C64],
) {
    synth_m::<true>(plan, ch, jobs, alms, m, sc, ph)
}

fn has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Synthesis on the CPU: `alms` (layout `plan.lay`) to `maps` (RING, npix each).
pub fn alm2map(plan: &Plan, jobs: &[Job], alms: &[&[C64]], maps: &mut [&mut [f64]]) {
    let ncomp = maps.len();
    let mmax = plan.lay.mmax;
    let fma = has_fma();
    let ptrs: Vec<SendPtr<f64>> = maps.iter_mut().map(|m| SendPtr(m.as_mut_ptr())).collect();
    for ch in chunks(plan, ncomp) {
        let nrc = ch.nrc();
        let mut phase = vec![C64::new(0.0, 0.0); (mmax + 1) * ncomp * nrc];
        phase.par_chunks_mut(ncomp * nrc).enumerate().for_each_init(
            LegScratch::default,
            |sc, (m, ph)| {
                #[cfg(target_arch = "x86_64")]
                if fma {
                    // SAFETY: the CPU has AVX2 and FMA (checked above).
                    unsafe { synth_m_fma(plan, &ch, jobs, alms, m, sc, ph) };
                    return;
                }
                let _ = fma;
                synth_m::<false>(plan, &ch, jobs, alms, m, sc, ph);
            },
        );
        let phase = &phase;
        let ptrs = &ptrs;
        (0..nrc)
            .into_par_iter()
            .for_each_init(FftScratch::default, |fs, rr| {
                let pr = &plan.pairs[ch.p0 + rr / 2];
                let ring = if rr % 2 == 0 {
                    Some(pr.north)
                } else {
                    pr.south
                };
                let Some(ri) = ring else { return };
                let ring = &plan.rings[ri];
                let nphi = ring.nphi;
                let fft = &plan.ffts[ri];
                twiddles(ring.phi0, mmax + 1, &mut fs.tw);
                for c in 0..ncomp {
                    fs.spec.clear();
                    fs.spec.resize(nphi / 2 + 1, C64::new(0.0, 0.0));
                    for m in 0..=mmax {
                        let f = phase[(m * ncomp + c) * nrc + rr];
                        if m == 0 {
                            fs.spec[0] += f.re;
                            continue;
                        }
                        let gm = f * fs.tw[m];
                        let k = m % nphi;
                        if k <= nphi / 2 {
                            fs.spec[k] += gm;
                        }
                        let k2 = (nphi - k) % nphi;
                        if k2 <= nphi / 2 {
                            fs.spec[k2] += gm.conj();
                        }
                    }
                    fs.spec[0].im = 0.0;
                    fs.spec[nphi / 2].im = 0.0;
                    fs.ring.resize(nphi, 0.0);
                    fs.scratch
                        .resize(fft.c2r.get_scratch_len(), C64::new(0.0, 0.0));
                    fft.c2r
                        .process_with_scratch(&mut fs.spec, &mut fs.ring, &mut fs.scratch)
                        .expect("ring FFT sizes are consistent");
                    // SAFETY: rings are disjoint pixel ranges of map c; each is written by one
                    // task only.
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(ptrs[c].get().add(ring.first as usize), nphi)
                    };
                    dst.copy_from_slice(&fs.ring);
                }
            });
    }
}

// ------------------------------------------------------------------------------------------
// Analysis visitors

struct A0<'a, const L: usize, const F: bool> {
    tmp: &'a mut [[f64; L]],
    /// [parity][re, im] of north ± south.
    inp: [[[f64; L]; 2]; 2],
}

impl<const L: usize, const F: bool> Visit<L> for A0<'_, L, F> {
    #[inline(always)]
    fn visit<const ODD: bool>(&mut self, j: usize, _prev: &[f64; L], cur: &[f64; L]) {
        let src = &self.inp[ODD as usize];
        let (lo, hi) = self.tmp[2 * j..2 * j + 2].split_at_mut(1);
        for r in 0..L {
            lo[0][r] = fmadd::<F>(cur[r], src[0][r], lo[0][r]);
            hi[0][r] = fmadd::<F>(cur[r], src[1][r], hi[0][r]);
        }
    }
}

struct A2<'a, const L: usize, const F: bool> {
    tmp: &'a mut [[f64; L]],
    pol: &'a [[f64; 5]],
    x: [f64; L],
    is2: [f64; L],
    xis2: [f64; L],
    /// [parity][8]: E_re += F1·in0 + F2·in1, E_im += F1·in2 + F2·in3, B_re += F1·in4 + F2·in5,
    /// B_im += F1·in6 + F2·in7.
    inp: [[[f64; L]; 8]; 2],
}

impl<const L: usize, const F: bool> Visit<L> for A2<'_, L, F> {
    #[inline(always)]
    fn visit<const ODD: bool>(&mut self, j: usize, prev: &[f64; L], cur: &[f64; L]) {
        let c = self.pol[j];
        let s = &self.inp[ODD as usize];
        let t = &mut self.tmp[4 * j..4 * j + 4];
        for r in 0..L {
            let f1 = fmadd::<F>(
                c[2] * self.xis2[r],
                prev[r],
                -(fmadd::<F>(c[0], self.is2[r], c[1]) * cur[r]),
            );
            let f2 = self.is2[r] * fmadd::<F>(c[4], prev[r], -(c[3] * self.x[r] * cur[r]));
            t[0][r] = fmadd::<F>(f1, s[0][r], fmadd::<F>(f2, s[1][r], t[0][r]));
            t[1][r] = fmadd::<F>(f1, s[2][r], fmadd::<F>(f2, s[3][r], t[1][r]));
            t[2][r] = fmadd::<F>(f1, s[4][r], fmadd::<F>(f2, s[5][r], t[2][r]));
            t[3][r] = fmadd::<F>(f1, s[6][r], fmadd::<F>(f2, s[7][r], t[3][r]));
        }
    }
}

fn as_lanes<const L: usize>(v: &mut [f64]) -> &mut [[f64; L]] {
    let n = v.len() / L;
    // SAFETY: [f64; L] has the layout of L consecutive f64.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut [f64; L], n) }
}

/// Analysis Legendre stage for one m over the pairs of a chunk: adds into `cols` (one alm
/// column per output component) from `phase` laid out [m][comp][ring-in-chunk].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn anal_m<const F: bool>(
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    phase: &[C64],
    ncomp: usize,
    m: usize,
    sc: &mut LegScratch,
    cols: &mut [&mut [C64]],
) {
    let lay = plan.lay;
    let pol = jobs.iter().any(|j| matches!(j, Job::Spin2(..)));
    sc.t.fill(m, lay.lmax, pol);
    let n = sc.t.n();
    let lb = log2_growth_bound(m, lay.lmax, &plan.ln_fact);
    let nrc = ch.nrc();
    let end = ch.p0 + ch.np;
    let ph = &phase[m * ncomp * nrc..(m + 1) * ncomp * nrc];
    let at = |c: usize, p: usize, south: bool| ph[c * nrc + 2 * (p - ch.p0) + south as usize];
    for job in jobs {
        match *job {
            Job::Spin0(ai, mi) => {
                sc.tmp.clear();
                sc.tmp.resize(2 * n * L0, 0.0);
                let mut any = false;
                let mut p = ch.p0;
                while p < end {
                    if let Some((x, _s, v, k)) = lanes::<L0>(plan, p, end, m, lb) {
                        any = true;
                        let mut inp = [[[0.0; L0]; 2]; 2];
                        for r in 0..L0.min(end - p) {
                            let (nn, ss) = (at(mi, p + r, false), at(mi, p + r, true));
                            let (e, o) = (nn + ss, nn - ss);
                            inp[0][0][r] = e.re;
                            inp[0][1][r] = e.im;
                            inp[1][0][r] = o.re;
                            inp[1][1][r] = o.im;
                        }
                        let mut vis = A0::<L0, F> {
                            tmp: as_lanes::<L0>(&mut sc.tmp),
                            inp,
                        };
                        leg::run::<L0, F, _>(&sc.t, &x, v, k, &mut vis);
                    }
                    p += L0;
                }
                if any {
                    let tl = as_lanes::<L0>(&mut sc.tmp);
                    let col = &mut cols[ai];
                    for j in 0..n {
                        let re: f64 = tl[2 * j].iter().sum();
                        let im: f64 = tl[2 * j + 1].iter().sum();
                        col[j] += C64::new(re, im) * sc.t.g[j];
                    }
                }
            }
            Job::Spin2([ei, bi], [qi, ui]) => {
                sc.tmp.clear();
                sc.tmp.resize(4 * n * L2, 0.0);
                let mut any = false;
                let mut p = ch.p0;
                while p < end {
                    if let Some((x, s, v, k)) = lanes::<L2>(plan, p, end, m, lb) {
                        any = true;
                        let mut is2 = [0.0; L2];
                        let mut xis2 = [0.0; L2];
                        for r in 0..L2 {
                            is2[r] = 1.0 / (s[r] * s[r]);
                            xis2[r] = x[r] * is2[r];
                        }
                        let mut inp = [[[0.0; L2]; 8]; 2];
                        for r in 0..L2.min(end - p) {
                            let (qn, qs) = (at(qi, p + r, false), at(qi, p + r, true));
                            let (un, us) = (at(ui, p + r, false), at(ui, p + r, true));
                            let (qp, qm, up, um) = (qn + qs, qn - qs, un + us, un - us);
                            // even l−m: F1 pairs with (q+, u+), F2 with (q−, u−); odd: swapped.
                            for (par, (q1, u1, q2, u2)) in
                                [(qp, up, qm, um), (qm, um, qp, up)].into_iter().enumerate()
                            {
                                let a = q1 * SQ1;
                                let bv = u2 * SU2;
                                let cc = u1 * SU1;
                                let d = q2 * SQ2;
                                let row = &mut inp[par];
                                row[0][r] = a.re;
                                row[1][r] = bv.im;
                                row[2][r] = a.im;
                                row[3][r] = -bv.re;
                                row[4][r] = cc.re;
                                row[5][r] = d.im;
                                row[6][r] = cc.im;
                                row[7][r] = -d.re;
                            }
                        }
                        let mut vis = A2::<L2, F> {
                            tmp: as_lanes::<L2>(&mut sc.tmp),
                            pol: &sc.t.pol,
                            x,
                            is2,
                            xis2,
                            inp,
                        };
                        leg::run::<L2, F, _>(&sc.t, &x, v, k, &mut vis);
                    }
                    p += L2;
                }
                if any {
                    let tl = as_lanes::<L2>(&mut sc.tmp);
                    for j in 0..n {
                        let s = |i: usize| -> f64 { tl[4 * j + i].iter().sum() };
                        let g = sc.t.g[j];
                        cols[ei][j] += C64::new(s(0), s(1)) * g;
                        cols[bi][j] += C64::new(s(2), s(3)) * g;
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn anal_m_fma(
    plan: &Plan,
    ch: &Chunk,
    jobs: &[Job],
    phase: &[C64],
    ncomp: usize,
    m: usize,
    sc: &mut LegScratch,
    cols: &mut [&mut [C64]],
) {
    anal_m::<true>(plan, ch, jobs, phase, ncomp, m, sc, cols)
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
    for a in alms.iter_mut() {
        a.fill(C64::new(0.0, 0.0));
    }
    let ncomp = maps.len();
    let mmax = plan.lay.mmax;
    let fma = has_fma();
    let mut cols = columns(plan, alms);
    for ch in chunks(plan, ncomp) {
        let nrc = ch.nrc();
        let mut phase = vec![C64::new(0.0, 0.0); (mmax + 1) * ncomp * nrc];
        let pp = SendPtr(phase.as_mut_ptr());
        (0..nrc)
            .into_par_iter()
            .for_each_init(FftScratch::default, |fs, rr| {
                let pr = &plan.pairs[ch.p0 + rr / 2];
                let ring = if rr % 2 == 0 {
                    Some(pr.north)
                } else {
                    pr.south
                };
                let Some(ri) = ring else { return };
                let ring = &plan.rings[ri];
                let w = plan.weights[ri];
                let nphi = ring.nphi;
                let fft = &plan.ffts[ri];
                twiddles(-ring.phi0, mmax + 1, &mut fs.tw);
                for c in 0..ncomp {
                    let first = ring.first as usize;
                    fs.ring.clear();
                    fs.ring.extend_from_slice(&maps[c][first..first + nphi]);
                    fs.spec.resize(nphi / 2 + 1, C64::new(0.0, 0.0));
                    fs.scratch
                        .resize(fft.r2c.get_scratch_len(), C64::new(0.0, 0.0));
                    fft.r2c
                        .process_with_scratch(&mut fs.ring, &mut fs.spec, &mut fs.scratch)
                        .expect("ring FFT sizes are consistent");
                    for m in 0..=mmax {
                        let k = m % nphi;
                        let r = if k <= nphi / 2 {
                            fs.spec[k]
                        } else {
                            fs.spec[nphi - k].conj()
                        };
                        // SAFETY: element (m, c, rr) is written by this task only.
                        unsafe { *pp.get().add((m * ncomp + c) * nrc + rr) = r * fs.tw[m] * w };
                    }
                }
            });
        let phase = &phase;
        cols.par_iter_mut()
            .enumerate()
            .for_each_init(LegScratch::default, |sc, (m, col)| {
                #[cfg(target_arch = "x86_64")]
                if fma {
                    // SAFETY: the CPU has AVX2 and FMA (checked above).
                    unsafe { anal_m_fma(plan, &ch, jobs, phase, ncomp, m, sc, col) };
                    return;
                }
                let _ = fma;
                anal_m::<false>(plan, &ch, jobs, phase, ncomp, m, sc, col);
            });
    }
}
