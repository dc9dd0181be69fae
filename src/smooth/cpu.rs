//! The rayon engine of the ring method (see the module docs of `smooth` for the maths).
//!
//! Output ring pairs go in chunks (north to south); per chunk, the spectra of the input rings
//! in reach are computed, pre-phased by e^{−imφ0_j} (parallel over rings). Then each task
//! takes one output ring pair (a northern ring and its mirror): for every input ring in reach
//! it evaluates the even kernel ring inside its φ-support only, turns it into the real
//! spectrum C_ij (direct cosine sum for narrow supports, else a half-length DCT), and
//! accumulates C_ij × R̃_j in float64 into both outputs at once; then phases, folds and
//! inverse-FFTs. Tasks own their output rings, so the result does not depend on the thread
//! count; buffers are per thread and only grow.

#![allow(clippy::needless_range_loop)] // block loops index several arrays in step

use std::collections::HashMap;
use std::f64::consts::PI;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use realfft::num_complex::Complex64 as C64;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use super::{OutRing, PairSupport, RingPlan};
use crate::backend::threads::Disjoint;

/// Direct cosine sums up to this many one-sided taps; wider supports go through the DCT.
const DIRECT_TAPS: usize = 24;

pub(super) struct Ffts {
    r2c: Arc<dyn RealToComplex<f64>>,
    c2r: Arc<dyn ComplexToReal<f64>>,
}

/// Plans per length, kept for the process (rebuilding them costs more than small transforms).
static FFTS: Mutex<Option<HashMap<usize, Arc<Ffts>>>> = Mutex::new(None);

fn ffts(n: usize) -> Arc<Ffts> {
    let mut g = FFTS.lock().unwrap_or_else(|e| e.into_inner());
    g.get_or_insert_with(HashMap::new)
        .entry(n)
        .or_insert_with(|| {
            let mut p = RealFftPlanner::<f64>::new();
            Arc::new(Ffts {
                r2c: p.plan_fft_forward(n),
                c2r: p.plan_fft_inverse(n),
            })
        })
        .clone()
}

/// Tables of one kernel-ring length L (N = L/2).
struct LenTab {
    n2: usize,
    /// sin(πj/(2L)), j = 0 ..= L: sin(y/2) at y = (k + o)·2π/L is s2[2k + 2o].
    s2: Vec<f64>,
    /// cos(πm/N) and cos(πm/2N), m = 0 ..= N (direct sums).
    cm: Vec<f64>,
    chm: Vec<f64>,
    /// sin(πk/N), k < N (DCT-I pre-processing).
    sk: Vec<f64>,
    /// e^{−iπm/2N}, m ≤ N/2 (DCT-II post-processing).
    tw2: Vec<C64>,
    /// Real FFT of N points.
    half: Arc<Ffts>,
    /// Real FFT of L points is not needed: kernels go through N.
    _l: usize,
}

fn len_tab(l: usize) -> LenTab {
    let n2 = l / 2;
    LenTab {
        n2,
        s2: (0..=l)
            .map(|j| (PI * j as f64 / (2 * l) as f64).sin())
            .collect(),
        cm: (0..=n2)
            .map(|m| (PI * m as f64 / n2 as f64).cos())
            .collect(),
        chm: (0..=n2)
            .map(|m| (PI * m as f64 / (2 * n2) as f64).cos())
            .collect(),
        sk: (0..n2).map(|k| (PI * k as f64 / n2 as f64).sin()).collect(),
        tw2: (0..=n2 / 2)
            .map(|m| {
                let (s, c) = (PI * m as f64 / (2 * n2) as f64).sin_cos();
                C64::new(c, -s)
            })
            .collect(),
        half: ffts(n2),
        _l: l,
    }
}

/// Per-thread buffers, grown to the largest length met and then reused.
#[derive(Default)]
struct Scratch {
    /// Kernel samples (N + 1) and the real spectrum C (N + 1).
    g: Vec<f64>,
    c: Vec<f64>,
    /// C duplicated per (re, im) (2N + 2).
    c2: Vec<f64>,
    runs: Vec<Run>,
    /// DCT work: real input (N) and its spectrum (N/2 + 1).
    z: Vec<f64>,
    zh: Vec<C64>,
    /// Accumulators T_i of the two outputs (N + 1).
    tn: Vec<C64>,
    ts: Vec<C64>,
    fold: Vec<C64>,
    fft: Vec<C64>,
    ring: Vec<f64>,
}

fn grow<T: Clone + Default>(v: &mut Vec<T>, n: usize) {
    if v.len() < n {
        v.resize(n, T::default());
    }
}

/// e^{iφm} for m = 0 … out.len()−1 by rotation, re-anchored every 64 steps (error ≲ 1e-14).
fn phases(phi: f64, out: &mut [C64]) {
    let (s, c) = phi.sin_cos();
    let step = C64::new(c, s);
    let mut w = C64::new(1.0, 0.0);
    for (m, o) in out.iter_mut().enumerate() {
        if m % 64 == 0 {
            let (s, c) = (m as f64 * phi).sin_cos();
            w = C64::new(c, s);
        }
        *o = w;
        w *= step;
    }
}

/// Ring-method convolution of a float64 RING map into `out` (both npix long).
pub fn convolve(plan: &RingPlan, map: &[f64], out: &mut [f64]) {
    convolve_many(plan, &[map], &mut [out]);
}

/// Ring-method convolution of several float64 RING maps with the same kernel (each map and
/// output npix long): the geometry, the FFT plans and every kernel spectrum C_ij are computed
/// once and applied to all maps. Each output equals [`convolve`] of its map bit for bit (the
/// per-map arithmetic is the same sequence).
pub fn convolve_many(plan: &RingPlan, maps: &[&[f64]], outs: &mut [&mut [f64]]) {
    assert_eq!(maps.len(), outs.len(), "one output per map");
    let nmaps = maps.len();
    if nmaps == 0 {
        return;
    }
    let rings = &plan.rings;
    let nr = rings.len();
    let mut lens: Vec<usize> = rings
        .iter()
        .map(|r| r.nphi)
        .chain(plan.outputs.iter().map(|o| o.len))
        .collect();
    lens.sort_unstable();
    lens.dedup();
    let plans: HashMap<usize, Arc<Ffts>> = lens.iter().map(|&n| (n, ffts(n))).collect();
    let mut klens: Vec<usize> = plan.outputs.iter().map(|o| o.len).collect();
    klens.sort_unstable();
    klens.dedup();
    let tabs: HashMap<usize, LenTab> = klens
        .par_iter()
        .map(|&l| (l, len_tab(l)))
        .collect::<Vec<_>>()
        .into_iter()
        .collect();

    // Output pairs go in chunks, north to south; each chunk first computes the spectra of the
    // input rings it reaches (those in reach of two chunks are computed twice, a few percent
    // of the FFTs). The working set stays a few MB per map, reused, instead of a map-sized
    // buffer. Map k's spectra sit at k·total.
    let chunk = (8 * rayon::current_num_threads()).max(32);
    let mut offs = vec![0usize; nr];
    let mut spec: Vec<C64> = Vec::new();
    let ops: Vec<Disjoint<f64>> = outs.iter_mut().map(|o| Disjoint(o.as_mut_ptr())).collect();
    let ops = &ops[..];
    let stop = crate::backend::cancel::current();
    for block in plan.outputs.chunks(chunk) {
        if stop.is_set() {
            return;
        }
        let lo = block.iter().map(|o| o.lo).min().unwrap_or(0);
        let hi = block.iter().map(|o| o.hi).max().unwrap_or(0);
        let mut need: Vec<usize> = (lo..=hi).chain(nr - 1 - hi..=nr - 1 - lo).collect();
        need.sort_unstable();
        need.dedup();
        let mut total = 0usize;
        for &j in &need {
            offs[j] = total;
            total += rings[j].nphi / 2 + 1;
        }
        if spec.len() < nmaps * total {
            spec.resize(nmaps * total, C64::new(0.0, 0.0));
        }
        let sp = Disjoint(spec.as_mut_ptr());
        let offs_r = &offs;
        let jobs: Vec<(usize, usize)> = (0..nmaps)
            .flat_map(|k| need.iter().map(move |&j| (k, j)))
            .collect();
        jobs.par_iter()
            .for_each_init(Scratch::default, |sc, &(k, j)| {
                let r = &rings[j];
                let n = r.nphi;
                let f = &plans[&n];
                grow(&mut sc.ring, n);
                grow(&mut sc.fft, f.r2c.get_scratch_len());
                grow(&mut sc.fold, n / 2 + 1);
                let first = r.first as usize;
                let w = plan.ring_factor[j];
                sc.ring[..n]
                    .iter_mut()
                    .zip(&maps[k][first..first + n])
                    .for_each(|(d, s)| *d = s * w);
                // SAFETY: map k's ring j spectrum slice is written by this task only.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(sp.at(k * total + offs_r[j]), n / 2 + 1)
                };
                f.r2c
                    .process_with_scratch(&mut sc.ring[..n], dst, &mut sc.fft)
                    .expect("FFT sizes are consistent");
                if r.phi0 != 0.0 {
                    let ph = &mut sc.fold[..=n / 2];
                    phases(-r.phi0, ph);
                    dst.iter_mut().zip(ph.iter()).for_each(|(d, p)| *d *= p);
                }
            });
        let spec = &spec[..];
        block
            .par_iter()
            .with_max_len(1)
            .for_each_init(Scratch::default, |sc, o| {
                let r_of = |k: usize, j: usize| {
                    let a = k * total + offs_r[j];
                    &spec[a..a + rings[j].nphi / 2 + 1]
                };
                let tab = &tabs[&o.len];
                #[cfg(target_arch = "x86_64")]
                if has_avx2() {
                    // SAFETY: the CPU has AVX2 (checked).
                    unsafe { output_pair_avx2(plan, &plans, tab, o, &r_of, sc, ops) };
                    return;
                }
                output_pair(plan, &plans, tab, o, &r_of, sc, ops);
            });
    }
}

/// The whole task compiled for AVX2 (the block loops then vectorise 4 wide; no FMA
/// contraction, so the results equal the plain build's).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn output_pair_avx2<'a>(
    plan: &RingPlan,
    plans: &HashMap<usize, Arc<Ffts>>,
    tab: &LenTab,
    o: &OutRing,
    r_of: &dyn Fn(usize, usize) -> &'a [C64],
    sc: &mut Scratch,
    outs: &[Disjoint<f64>],
) {
    output_pair(plan, plans, tab, o, r_of, sc, outs)
}

/// One output ring pair for every map: each kernel spectrum C_ij once, accumulated into the
/// maps' accumulators (map k's T at k·(N + 1)), then finished per map.
#[inline(always)]
fn output_pair<'a>(
    plan: &RingPlan,
    plans: &HashMap<usize, Arc<Ffts>>,
    tab: &LenTab,
    o: &OutRing,
    r_of: &dyn Fn(usize, usize) -> &'a [C64],
    sc: &mut Scratch,
    outs: &[Disjoint<f64>],
) {
    let nr = plan.rings.len();
    let nmaps = outs.len();
    let l = o.len;
    let n2 = l / 2;
    let w = n2 + 1;
    let eq = o.ring == o.mirror;
    grow(&mut sc.g, n2 + 1);
    grow(&mut sc.c, n2 + 1);
    grow(&mut sc.c2, 2 * n2 + 2);
    grow(&mut sc.z, n2);
    grow(&mut sc.zh, n2 / 2 + 1);
    grow(&mut sc.tn, nmaps * w);
    grow(&mut sc.ts, nmaps * w);
    grow(&mut sc.fft, tab.half.r2c.get_scratch_len());
    sc.tn[..nmaps * w].fill(C64::new(0.0, 0.0));
    sc.ts[..nmaps * w].fill(C64::new(0.0, 0.0));
    for j in o.lo..=o.hi {
        let sup = plan.pair_support(o.ring, j, l);
        if sup.taps == 0 {
            continue;
        }
        kernel_spectrum(plan, tab, &sup, sc);
        for (d, c) in sc.c2[..2 * n2 + 2].chunks_exact_mut(2).zip(&sc.c[..=n2]) {
            d[0] = *c;
            d[1] = *c;
        }
        let jm = nr - 1 - j;
        let rj = &plan.rings[j];
        let shift = if rj.phi0 != 0.0 { -1.0 } else { 1.0 };
        runs(n2, rj.nphi, shift, &mut sc.runs);
        let c2 = &sc.c2[..2 * n2 + 2];
        for k in 0..nmaps {
            let tn = &mut sc.tn[k * w..(k + 1) * w];
            if eq {
                accumulate(tn, None, c2, r_of(k, j), None, &sc.runs);
                if jm != j {
                    accumulate(tn, None, c2, r_of(k, jm), None, &sc.runs);
                }
            } else {
                let ts = &mut sc.ts[k * w..(k + 1) * w];
                accumulate(tn, Some(ts), c2, r_of(k, j), Some(r_of(k, jm)), &sc.runs);
            }
        }
    }
    let scale = 4.0 * PI / plan.npix as f64 / l as f64;
    let Scratch {
        tn, ts, fold, fft, ..
    } = sc;
    for (k, &out) in outs.iter().enumerate() {
        finish(
            plan,
            plans,
            o.ring,
            l,
            scale,
            &mut tn[k * w..(k + 1) * w],
            fold,
            fft,
            out,
        );
        if !eq {
            finish(
                plan,
                plans,
                o.mirror,
                l,
                scale,
                &mut ts[k * w..(k + 1) * w],
                fold,
                fft,
                out,
            );
        }
    }
}

/// C_ij(m), m = 0 ..= N, into sc.c (the kernel samples go through sc.g).
#[inline(always)]
fn kernel_spectrum(plan: &RingPlan, tab: &LenTab, sup: &PairSupport, sc: &mut Scratch) {
    let n2 = tab.n2;
    let table = &plan.table;
    let o = sup.half as usize;
    let taps = sup.taps;
    let g = &mut sc.g[..=n2];
    for k in 0..taps {
        let s = tab.s2[2 * k + o];
        g[k] = table.eval_u2(sup.a + sup.b * s * s);
    }
    let c = &mut sc.c[..=n2];
    if taps <= DIRECT_TAPS && !sup.full {
        direct(tab, &g[..taps], sup.half, c);
        return;
    }
    g[taps..].fill(0.0);
    if sup.half {
        dct2(tab, &g[..n2], c, &mut sc.z, &mut sc.zh, &mut sc.fft);
    } else {
        dct1(tab, g, c, &mut sc.z, &mut sc.zh, &mut sc.fft);
    }
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    crate::backend::cpu_features::avx2()
}

/// Integer grid: C(m) = g_0 + 2Σ_{k≥1} g_k cos(kθ_m); half grid: C(m) = 2Σ_k g_k cos((k+½)θ_m),
/// θ_m = πm/N, by the Chebyshev recurrence over k, in blocks of m (the block vectorises).
#[inline(always)]
fn direct(tab: &LenTab, g: &[f64], half: bool, c: &mut [f64]) {
    // 32 lanes: 8 independent AVX2 chains hide the recurrence latency.
    const B: usize = 32;
    let n = c.len();
    let mut m0 = 0;
    while m0 < n {
        let w = B.min(n - m0);
        let mut x2 = [0.0; B];
        let mut cur = [0.0; B];
        let mut prev = [0.0; B];
        let mut acc = [0.0; B];
        for q in 0..w {
            x2[q] = 2.0 * tab.cm[m0 + q];
        }
        // Start of the recurrence: cos(½θ), cos(−½θ) on the half grid; cos θ, 1 (and the ½g_0
        // term) on the integer grid.
        let coeffs = if half {
            cur[..w].copy_from_slice(&tab.chm[m0..m0 + w]);
            prev[..w].copy_from_slice(&tab.chm[m0..m0 + w]);
            g
        } else {
            for q in 0..B {
                cur[q] = 0.5 * x2[q];
                prev[q] = 1.0;
                acc[q] = 0.5 * g[0];
            }
            &g[1..]
        };
        for &gk in coeffs {
            for q in 0..B {
                acc[q] += gk * cur[q];
                let nx = x2[q] * cur[q] - prev[q];
                prev[q] = cur[q];
                cur[q] = nx;
            }
        }
        for q in 0..w {
            c[m0 + q] = 2.0 * acc[q];
        }
        m0 += B;
    }
}

/// DCT-I through a real FFT of N points: C(m) = g_0 + (−1)^m g_N + 2Σ_{k=1}^{N−1} g_k cos(πmk/N)
/// for m = 0 ..= N. With z_k = ½(g_k + g_{N−k}) − sin(πk/N)(g_k − g_{N−k}) and Z its DFT:
/// C(2m) = 2 Re Z(m); the odd outputs D(m') = Σ_k (g_k − g_{N−k}) cos(πm'k/N) satisfy
/// D(2m+1) = D(2m−1) − 2 Im Z(m), from D(1).
#[inline(always)]
fn dct1(tab: &LenTab, g: &[f64], c: &mut [f64], z: &mut [f64], zh: &mut [C64], fft: &mut [C64]) {
    let n = tab.n2;
    let mut d1 = 0.0;
    for k in 0..n {
        let (a, b) = (g[k], g[n - k]);
        let dk = a - b;
        z[k] = 0.5 * (a + b) - tab.sk[k] * dk;
        d1 += dk * tab.cm[k];
    }
    tab.half
        .r2c
        .process_with_scratch(&mut z[..n], &mut zh[..=n / 2], fft)
        .expect("FFT sizes are consistent");
    for m in 0..=n / 2 {
        c[2 * m] = 2.0 * zh[m].re;
    }
    let mut d = d1;
    c[1] = d;
    for m in 1..n / 2 {
        d -= 2.0 * zh[m].im;
        c[2 * m + 1] = d;
    }
}

/// DCT-II through a real FFT of N points (Makhoul): C(m) = 2Σ_{k<N} h_k cos(πm(2k+1)/2N),
/// m = 0 ..= N (C(N) = 0). v = (h_0, h_2, …, h_3, h_1), V its DFT: C(m) = 2 Re(e^{−iπm/2N}V(m))
/// and C(N−m) = 2 Re(−i e^{iπm/2N} conj V(m)).
#[inline(always)]
fn dct2(tab: &LenTab, h: &[f64], c: &mut [f64], z: &mut [f64], zh: &mut [C64], fft: &mut [C64]) {
    let n = tab.n2;
    for k in 0..n / 2 {
        z[k] = h[2 * k];
        z[n - 1 - k] = h[2 * k + 1];
    }
    tab.half
        .r2c
        .process_with_scratch(&mut z[..n], &mut zh[..=n / 2], fft)
        .expect("FFT sizes are consistent");
    for m in 0..=n / 2 {
        let t = tab.tw2[m];
        let v = zh[m];
        c[m] = 2.0 * (t.re * v.re - t.im * v.im);
        if m >= 1 {
            // −i·conj(t)·conj(v) = −i·conj(t v): real part −Im(t v).
            c[n - m] = -2.0 * (t.re * v.im + t.im * v.re);
        }
    }
    c[n] = 0.0;
}

/// A stretch of m = m0 .. m0+n over which R̃_j(m) is sign·R̃_j(p0 + q) (forward) or
/// sign·conj R̃_j(p0 − q) (backward).
#[derive(Clone, Copy)]
struct Run {
    m0: usize,
    p0: usize,
    n: usize,
    back: bool,
    sign: f64,
}

/// The runs covering m = 0 ..= N for an input ring of n_j pixels: R̃ is periodic (shift = 1)
/// or anti-periodic (shift = −1, rings with φ0 ≠ 0) with period n_j, and
/// R̃(p) = shift·conj R̃(n_j − p) above n_j/2.
fn runs(n2: usize, nj: usize, shift: f64, out: &mut Vec<Run>) {
    out.clear();
    let hj = nj / 2;
    if hj >= n2 {
        out.push(Run {
            m0: 0,
            p0: 0,
            n: n2 + 1,
            back: false,
            sign: 1.0,
        });
        return;
    }
    let mut m = 0;
    let mut sign = 1.0;
    while m <= n2 {
        let n = (hj + 1).min(n2 + 1 - m);
        out.push(Run {
            m0: m,
            p0: 0,
            n,
            back: false,
            sign,
        });
        m += hj + 1;
        if m > n2 {
            break;
        }
        // p = hj+1+q ↦ shift·conj R̃(nj − p) = shift·conj R̃(hj − 1 − q)
        let n = (nj - hj - 1).min(n2 + 1 - m);
        out.push(Run {
            m0: m,
            p0: hj - 1,
            n,
            back: true,
            sign: sign * shift,
        });
        m += nj - hj - 1;
        sign *= shift;
    }
}

/// View complex values as interleaved (re, im) f64.
#[inline(always)]
fn flat(c: &[C64]) -> &[f64] {
    // SAFETY: Complex<f64> is #[repr(C)] { re, im }.
    unsafe { std::slice::from_raw_parts(c.as_ptr() as *const f64, 2 * c.len()) }
}

#[inline(always)]
fn flat_mut(c: &mut [C64]) -> &mut [f64] {
    // SAFETY: as `flat`.
    unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr() as *mut f64, 2 * c.len()) }
}

/// t[m] += C(m)·R̃_j(m), m = 0 ..= N, for one or two outputs (north, and south when `ts` and
/// `rs` are given). `c2` holds C duplicated, (C(0), C(0), C(1), C(1), …), so the forward runs
/// are plain element-wise products over interleaved complex data.
#[inline(always)]
fn accumulate(
    tn: &mut [C64],
    mut ts: Option<&mut [C64]>,
    c2: &[f64],
    rn: &[C64],
    rs: Option<&[C64]>,
    runs: &[Run],
) {
    let tn = flat_mut(tn);
    let rn = flat(rn);
    let rs = rs.map(flat);
    for r in runs {
        let (a, b) = (2 * r.m0, 2 * (r.m0 + r.n));
        let c = &c2[a..b];
        let w = r.sign;
        if !r.back {
            let p = 2 * r.p0;
            mac(&mut tn[a..b], c, &rn[p..p + b - a], w);
            if let (Some(ts), Some(rs)) = (ts.as_deref_mut(), rs) {
                mac(&mut flat_mut(ts)[a..b], c, &rs[p..p + b - a], w);
            }
        } else {
            let p = 2 * (r.p0 + 1 - r.n);
            mac_back(&mut tn[a..b], c, &rn[p..p + b - a], w);
            if let (Some(ts), Some(rs)) = (ts.as_deref_mut(), rs) {
                mac_back(&mut flat_mut(ts)[a..b], c, &rs[p..p + b - a], w);
            }
        }
    }
}

/// t += w·c·r element-wise (w = ±1, so the product is exact either way round).
#[inline(always)]
fn mac(t: &mut [f64], c: &[f64], r: &[f64], w: f64) {
    for ((t, c), r) in t.iter_mut().zip(c).zip(r) {
        *t += w * c * r;
    }
}

/// t[k] += w·c[k]·conj(r)[n−1−k] over complex k (r read backwards, conjugated).
#[inline(always)]
fn mac_back(t: &mut [f64], c: &[f64], r: &[f64], w: f64) {
    let n = t.len() / 2;
    for k in 0..n {
        let q = n - 1 - k;
        t[2 * k] += w * c[2 * k] * r[2 * q];
        t[2 * k + 1] -= w * c[2 * k + 1] * r[2 * q + 1];
    }
}

/// S(m) = e^{imφ0}T(m); fold modulo n_i, inverse FFT, scale, write the ring.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn finish(
    plan: &RingPlan,
    plans: &HashMap<usize, Arc<Ffts>>,
    ring: usize,
    l: usize,
    scale: f64,
    t: &mut [C64],
    fold: &mut Vec<C64>,
    fft: &mut Vec<C64>,
    out: Disjoint<f64>,
) {
    let r = &plan.rings[ring];
    let n = r.nphi;
    let hn = n / 2;
    let half = l / 2;
    let f = &plans[&n];
    grow(fft, f.c2r.get_scratch_len());
    if r.phi0 != 0.0 {
        // e^{imφ0} by rotation, re-anchored every 64 steps.
        let (s, c) = r.phi0.sin_cos();
        let step = C64::new(c, s);
        let mut w = C64::new(1.0, 0.0);
        for (m, v) in t[..=half].iter_mut().enumerate() {
            if m % 64 == 0 {
                let (s, c) = (m as f64 * r.phi0).sin_cos();
                w = C64::new(c, s);
            }
            *v *= w;
            w *= step;
        }
    }
    // SAFETY: each ring of the output is written by exactly one task.
    let dst = unsafe { std::slice::from_raw_parts_mut(out.at(r.first as usize), n) };
    let spec: &mut [C64] = if l == n {
        &mut t[..=half]
    } else {
        grow(fold, hn + 1);
        let fo = &mut fold[..=hn];
        fo.fill(C64::new(0.0, 0.0));
        // m ↦ bin k = m mod n (if k ≤ n/2) and its conjugate to n − k (if that is ≤ n/2),
        // with k kept incrementally; the Nyquist bin stands for ±L/2: half to each.
        fo[0] += t[0];
        let mut k = 0usize;
        for m in 1..=half {
            k += 1;
            if k == n {
                k = 0;
            }
            let v = if m == half { t[m] * 0.5 } else { t[m] };
            if k <= hn {
                fo[k] += v;
            }
            let k2 = if k == 0 { 0 } else { n - k };
            if k2 <= hn {
                fo[k2] += v.conj();
            }
        }
        fo
    };
    spec[0].im = 0.0;
    spec[spec.len() - 1].im = 0.0;
    f.c2r
        .process_with_scratch(spec, dst, fft)
        .expect("FFT sizes are consistent");
    dst.iter_mut().for_each(|v| *v *= scale);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smooth::{profile, Table};

    fn cos_sum(g: &[f64], half: bool, l: usize, m: usize) -> f64 {
        // The even sequence over the whole L-grid: y = (k + o)·2π/L, k ∈ Z_L.
        let o = if half { 0.5 } else { 0.0 };
        (0..l)
            .map(|k| {
                let kk = if (k as f64 + o) <= l as f64 / 2.0 {
                    k
                } else {
                    l - k - half as usize
                };
                let v = g.get(kk).copied().unwrap_or(0.0);
                v * (2.0 * PI * m as f64 * (k as f64 + o) / l as f64).cos()
            })
            .sum()
    }

    #[test]
    fn cosine_spectra_match_direct_sums() {
        let l = 48;
        let tab = len_tab(l);
        let n2 = l / 2;
        let mut sc = Scratch::default();
        grow(&mut sc.z, n2);
        grow(&mut sc.zh, n2 / 2 + 1);
        grow(&mut sc.fft, tab.half.r2c.get_scratch_len());
        for half in [false, true] {
            let len = if half { n2 } else { n2 + 1 };
            let g: Vec<f64> = (0..len).map(|k| 1.0 / (1.0 + k as f64).powi(2)).collect();
            let want: Vec<f64> = (0..=n2).map(|m| cos_sum(&g, half, l, m)).collect();
            let mut c = vec![0.0; n2 + 1];
            if half {
                dct2(&tab, &g, &mut c, &mut sc.z, &mut sc.zh, &mut sc.fft);
            } else {
                dct1(&tab, &g, &mut c, &mut sc.z, &mut sc.zh, &mut sc.fft);
            }
            let mut d = vec![0.0; n2 + 1];
            direct(&tab, &g[..5], half, &mut d);
            let want5: Vec<f64> = (0..=n2).map(|m| cos_sum(&g[..5], half, l, m)).collect();
            for m in 0..=n2 {
                assert!(
                    (c[m] - want[m]).abs() < 1e-13,
                    "half {half} m {m}: {} vs {}",
                    c[m],
                    want[m]
                );
                assert!((d[m] - want5[m]).abs() < 1e-13, "direct half {half} m {m}");
            }
        }
    }

    #[test]
    fn engine_matches_direct_sum_and_belt_is_exact() {
        use crate::healpix as hp;
        let nside = 8usize;
        let p = profile::gaussian(0.3, 1e-6).unwrap();
        let table = Table::new(&p.theta, &p.values, 0).unwrap();
        let plan = RingPlan::new(nside, table).unwrap();
        let npix = 12 * nside * nside;
        let map: Vec<f64> = (0..npix)
            .map(|i| ((i * 7919) % 97) as f64 / 97.0 - 0.5)
            .collect();
        let mut out = vec![0.0; npix];
        convolve(&plan, &map, &mut out);
        let vec_of = |i: usize| {
            let (t, f) = hp::pix2ang_ring(nside as u64, i as u64);
            [t.sin() * f.cos(), t.sin() * f.sin(), t.cos()]
        };
        let v: Vec<[f64; 3]> = (0..npix).map(vec_of).collect();
        let w = 4.0 * PI / npix as f64;
        // The quadrature factor of each pixel's ring.
        let mut fac = vec![0.0; npix];
        for (j, r) in plan.rings.iter().enumerate() {
            let first = r.first as usize;
            fac[first..first + r.nphi].fill(plan.ring_factor[j]);
        }
        let mut worst: f64 = 0.0;
        for q in 0..npix {
            let s: f64 = (0..npix)
                .map(|p| {
                    let d2: f64 = (0..3).map(|k| (v[p][k] - v[q][k]).powi(2)).sum();
                    plan.table.eval_u2(d2 / 4.0) * map[p] * fac[p] * w
                })
                .sum();
            worst = worst.max((s - out[q]).abs());
        }
        let scale = out.iter().map(|x| x.abs()).fold(0.0, f64::max);
        assert!(worst < 1e-5 * scale, "{worst} vs {scale}");
    }
}
