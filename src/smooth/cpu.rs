//! The rayon engine of the ring method. Input ring spectra are computed once (parallel over
//! rings); then each task takes one output ring pair (north ring and its mirror), samples the
//! kernel ring of every input ring in reach (inside the φ-support only), FFTs it once for both
//! outputs, accumulates kernel × input spectrum in float64, folds and inverse-FFTs. Tasks own
//! their output rings, so the result does not depend on the thread count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use realfft::num_complex::Complex64 as C64;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use super::{OutRing, RingPlan};
use crate::backend::threads::Disjoint;

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

/// Per-thread buffers, grown to the largest length met and then reused.
#[derive(Default)]
struct Scratch {
    g: Vec<f64>,
    gh: Vec<C64>,
    sn: Vec<C64>,
    ss: Vec<C64>,
    fold: Vec<C64>,
    fft: Vec<C64>,
}

fn grow<T: Clone + Default>(v: &mut Vec<T>, n: usize) {
    if v.len() < n {
        v.resize(n, T::default());
    }
}

/// Ring-method convolution of a float64 RING map into `out` (both npix long).
pub fn convolve(plan: &RingPlan, map: &[f64], out: &mut [f64]) {
    let rings = &plan.rings;
    // Input ring spectra, n_j/2 + 1 each, back to back.
    let mut offs = Vec::with_capacity(rings.len() + 1);
    let mut total = 0usize;
    for r in rings {
        offs.push(total);
        total += r.nphi / 2 + 1;
    }
    offs.push(total);
    let mut spec = vec![C64::new(0.0, 0.0); total];
    let lens: Vec<usize> = {
        let mut v: Vec<usize> = rings
            .iter()
            .map(|r| r.nphi)
            .chain(plan.outputs.iter().map(|o| o.len))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let plans: HashMap<usize, Arc<Ffts>> = lens.iter().map(|&n| (n, ffts(n))).collect();
    let sp = Disjoint(spec.as_mut_ptr());
    (0..rings.len())
        .into_par_iter()
        .for_each_init(Scratch::default, |sc, j| {
            let r = &rings[j];
            let n = r.nphi;
            let f = &plans[&n];
            grow(&mut sc.g, n);
            grow(&mut sc.fft, f.r2c.get_scratch_len());
            let first = r.first as usize;
            sc.g[..n].copy_from_slice(&map[first..first + n]);
            // SAFETY: ring j's spectrum slice is written by this task only.
            let dst = unsafe { std::slice::from_raw_parts_mut(sp.at(offs[j]), n / 2 + 1) };
            f.r2c
                .process_with_scratch(&mut sc.g[..n], dst, &mut sc.fft)
                .expect("FFT sizes are consistent");
        });
    let spec = &spec[..];
    let op = Disjoint(out.as_mut_ptr());
    plan.outputs
        .par_iter()
        .with_max_len(1)
        .for_each_init(Scratch::default, |sc, o| {
            let r_of = |j: usize| &spec[offs[j]..offs[j + 1]];
            output_pair(plan, &plans, o, &r_of, sc, op);
        });
}

fn output_pair<'a>(
    plan: &RingPlan,
    plans: &HashMap<usize, Arc<Ffts>>,
    o: &OutRing,
    r_of: &dyn Fn(usize) -> &'a [C64],
    sc: &mut Scratch,
    out: Disjoint<f64>,
) {
    let nr = plan.rings.len();
    let l = o.len;
    let half = l / 2;
    let f = &plans[&l];
    let eq = o.ring == o.mirror;
    grow(&mut sc.g, l);
    grow(&mut sc.gh, half + 1);
    grow(&mut sc.sn, half + 1);
    grow(&mut sc.ss, half + 1);
    grow(&mut sc.fft, f.r2c.get_scratch_len());
    sc.sn[..=half].fill(C64::new(0.0, 0.0));
    sc.ss[..=half].fill(C64::new(0.0, 0.0));
    let dx = 2.0 * std::f64::consts::PI / l as f64;
    let table = &plan.table;
    for j in o.lo..=o.hi {
        let sup = plan.pair_support(o.ring, j, l);
        if sup.count == 0 {
            continue;
        }
        let g = &mut sc.g[..l];
        g.fill(0.0);
        for q in 0..sup.count as i64 {
            let k = sup.k0 + q;
            let y = k as f64 * dx + sup.delta;
            let s = (0.5 * y).sin();
            g[k.rem_euclid(l as i64) as usize] = table.eval_u2(sup.a + sup.b * s * s);
        }
        f.r2c
            .process_with_scratch(g, &mut sc.gh[..=half], &mut sc.fft)
            .expect("FFT sizes are consistent");
        let jm = nr - 1 - j;
        let nj = plan.rings[j].nphi;
        let gh = &sc.gh[..=half];
        if eq {
            accumulate(&mut sc.sn[..=half], gh, r_of(j), nj);
            if jm != j {
                accumulate(&mut sc.sn[..=half], gh, r_of(jm), nj);
            }
        } else {
            accumulate2(
                &mut sc.sn[..=half],
                &mut sc.ss[..=half],
                gh,
                r_of(j),
                r_of(jm),
                nj,
            );
        }
    }
    let scale = 4.0 * std::f64::consts::PI / plan.npix as f64 / l as f64;
    finish(plan, plans, o.ring, l, scale, &mut sc.sn, &mut sc.fold, &mut sc.fft, out);
    if !eq {
        finish(plan, plans, o.mirror, l, scale, &mut sc.ss, &mut sc.fold, &mut sc.fft, out);
    }
}

/// Visit R_j(m mod n_j) for m = 0 ..= half as runs (m0, slice, reversed-and-conjugated):
/// forward runs p = 0 ..= n_j/2 and backward runs p = n_j/2+1 .. n_j−1 (= conj R_j(n_j − p)).
#[inline(always)]
fn runs(half: usize, nj: usize, mut visit: impl FnMut(usize, usize, usize, bool)) {
    let hj = nj / 2;
    if hj >= half {
        visit(0, 0, half + 1, false);
        return;
    }
    let mut m = 0;
    while m <= half {
        let n = (hj + 1).min(half + 1 - m);
        visit(m, 0, n, false);
        m += hj + 1;
        if m > half {
            break;
        }
        // p = hj+1+q ↦ conj R(nj − p) = conj R(hj − 1 − q)
        let n = (nj - hj - 1).min(half + 1 - m);
        visit(m, hj - 1, n, true);
        m += nj - hj - 1;
    }
}

#[inline(always)]
fn mac(s: &mut C64, g: C64, r: C64) {
    s.re += g.re * r.re - g.im * r.im;
    s.im += g.re * r.im + g.im * r.re;
}

/// s[m] += ĝ[m]·R_j(m mod n_j), m = 0 ..= half.
fn accumulate(s: &mut [C64], g: &[C64], r: &[C64], nj: usize) {
    let half = g.len() - 1;
    runs(half, nj, |m0, p0, n, back| {
        let (s, g) = (&mut s[m0..m0 + n], &g[m0..m0 + n]);
        if !back {
            for ((s, g), r) in s.iter_mut().zip(g).zip(&r[p0..p0 + n]) {
                mac(s, *g, *r);
            }
        } else {
            for (q, (s, g)) in s.iter_mut().zip(g).enumerate() {
                mac(s, *g, r[p0 - q].conj());
            }
        }
    });
}

/// The north and south outputs of one kernel ring at once (ĝ read once).
fn accumulate2(sn: &mut [C64], ss: &mut [C64], g: &[C64], rn: &[C64], rs: &[C64], nj: usize) {
    let half = g.len() - 1;
    runs(half, nj, |m0, p0, n, back| {
        let (sn, ss, g) = (
            &mut sn[m0..m0 + n],
            &mut ss[m0..m0 + n],
            &g[m0..m0 + n],
        );
        if !back {
            let (rn, rs) = (&rn[p0..p0 + n], &rs[p0..p0 + n]);
            for k in 0..n {
                mac(&mut sn[k], g[k], rn[k]);
                mac(&mut ss[k], g[k], rs[k]);
            }
        } else {
            for k in 0..n {
                mac(&mut sn[k], g[k], rn[p0 - k].conj());
                mac(&mut ss[k], g[k], rs[p0 - k].conj());
            }
        }
    });
}

/// Fold the accumulated spectrum s (L/2 + 1 bins) modulo n_i, inverse FFT, scale, write ring.
#[allow(clippy::too_many_arguments)]
fn finish(
    plan: &RingPlan,
    plans: &HashMap<usize, Arc<Ffts>>,
    ring: usize,
    l: usize,
    scale: f64,
    s: &mut [C64],
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
    // SAFETY: each ring of the output is written by exactly one task.
    let dst = unsafe { std::slice::from_raw_parts_mut(out.at(r.first as usize), n) };
    let spec: &mut [C64] = if l == n {
        &mut s[..=half]
    } else {
        grow(fold, hn + 1);
        let fo = &mut fold[..=hn];
        fo.fill(C64::new(0.0, 0.0));
        fo[0] += s[0];
        let mut add = |m: usize, v: C64| {
            let k = m % n;
            if k <= hn {
                fo[k] += v;
            }
            let k2 = (n - k) % n;
            if k2 <= hn {
                fo[k2] += v.conj();
            }
        };
        for (m, v) in s.iter().enumerate().take(half).skip(1) {
            add(m, *v);
        }
        // The Nyquist bin stands for +L/2 and −L/2: half to each.
        add(half, s[half] * 0.5);
        fo
    };
    spec[0].im = 0.0;
    spec[spec.len() - 1].im = 0.0;
    f.c2r
        .process_with_scratch(spec, dst, fft)
        .expect("FFT sizes are consistent");
    dst.iter_mut().for_each(|v| *v *= scale);
}
