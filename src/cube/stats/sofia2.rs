//! SoFiA-2 2.5.1's noise estimators, rule for rule, on its backward sample
//! (`Sampling::Backward`: slot k is flat index size − (k+1)·c). The values are those of the
//! cube's element type (f32 or f64), carried as f64; where SoFiA-2 computes in single
//! precision, `single` rounds every operation to f32 (exact: an f32 operation equals the f64
//! operation rounded to f32).
//!
//! - std: sqrt(Σx²/n) over the finite sampled values in the flux range (f64 sum).
//! - mad: the walk stops before element 0 (a last slot at index 0 is left out); with a
//!   one-sided flux range at most size/(2c) values are kept, the first ones of the walk (the
//!   ones nearest the start of the array are dropped); the median of an even count is the
//!   mean of the two middle values in the element type.
//! - gauss: see `gauss`.

use rayon::prelude::*;

use super::noise::{kth_nonneg, std_about, GRAIN, MAD_TO_STD};
use super::Range;
use crate::real::Real;

/// Round to f32 when `single`.
#[inline(always)]
fn rnd(v: f64, single: bool) -> f64 {
    if single {
        v as f32 as f64
    } else {
        v
    }
}

#[inline(always)]
fn in_range(x: f64, range: Range) -> bool {
    match range {
        Range::All => !x.is_nan(),
        Range::Negative => x < 0.0,
        Range::Positive => x > 0.0,
    }
}

/// Where a sample came from: its length, and whether its last slot is element 0 of the cube.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// size / (2c): the most values a one-sided MAD keeps.
    pub cap: usize,
    /// The last sample slot is flat index 0 (size is a multiple of c).
    pub ends_at_zero: bool,
}

impl Walk {
    pub fn new(size: usize, cadence: usize) -> Walk {
        let c = cadence.max(1);
        Walk {
            cap: size / (2 * c),
            ends_at_zero: size > 0 && size.is_multiple_of(c),
        }
    }
}

/// SoFiA-2's standard deviation about 0.
pub fn std<S: Real>(samples: &[S], range: Range) -> Option<f64> {
    std_about(samples, 0.0, range, None)
}

/// The part of the sample SoFiA-2's MAD walks: all but a last slot at element 0.
fn walked<S>(samples: &mut [S], walk: Walk) -> &mut [S] {
    let n = samples.len();
    if walk.ends_at_zero && n > 0 {
        &mut samples[..n - 1]
    } else {
        samples
    }
}

/// The most values the MAD keeps for `range`.
fn mad_cap(range: Range, walk: Walk) -> usize {
    match range {
        Range::All => usize::MAX,
        _ => walk.cap,
    }
}

/// SoFiA-2's MAD about 0, scaled by 1.482602218505602 (the sample left as it is: a copy of
/// the kept |x| is made; `mad_in_place` reuses the sample instead).
pub fn mad<S: Real>(samples: &[S], range: Range, walk: Walk, single: bool) -> Option<f64> {
    let mut v = samples.to_vec();
    mad_in_place(&mut v, range, walk, single)
}

/// `mad` with the sample as its own scratch (its values are overwritten): each chunk moves its
/// in-range |x| to its front in walk order (in parallel), the chunks' runs then slide down
/// into one run, cut at the first `cap` of the walk, and the median is selected there. The
/// kept set is `mad`'s, so is the median; no second array of the sample's size is made.
pub fn mad_in_place<S: Real>(
    samples: &mut [S],
    range: Range,
    walk: Walk,
    single: bool,
) -> Option<f64> {
    let used = walked(samples, walk);
    let cap = mad_cap(range, walk);
    let counts: Vec<usize> = used
        .par_chunks_mut(GRAIN)
        .map(|c| {
            let mut k = 0;
            for j in 0..c.len() {
                let x = c[j].to_f64();
                if in_range(x, range) {
                    c[k] = S::from_f64(x.abs()); // exact: |x| of an S is an S
                    k += 1;
                }
            }
            k
        })
        .collect();
    let mut n = 0usize;
    for (i, &k) in counts.iter().enumerate() {
        let take = k.min(cap - n);
        used.copy_within(i * GRAIN..i * GRAIN + take, n);
        n += take;
    }
    let v = &used[..n];
    if n == 0 {
        return None;
    }
    // |x| has its sign bit clear, so `kth_nonneg` gives the `total_cmp` order statistics
    let mid = kth_nonneg(v, n / 2);
    let med = if n % 2 == 1 {
        mid
    } else {
        rnd(rnd(kth_nonneg(v, n / 2 - 1) + mid, single) * 0.5, single)
    };
    Some(MAD_TO_STD * med)
}

/// Histogram bins of the gauss statistic.
pub const GAUSS_BINS: usize = 101;

/// Counts of the finite in-range samples in `GAUSS_BINS` bins over [−limit, limit] (bin
/// floor((x + limit)/width), values outside left out, x = limit in the last bin).
fn gauss_histogram<S: Real>(samples: &[S], range: Range, limit: f64) -> Vec<u64> {
    let width = 2.0 * limit / GAUSS_BINS as f64;
    let mut h = vec![0u64; GAUSS_BINS];
    for x in samples {
        let x = x.to_f64();
        if !in_range(x, range) || !x.is_finite() || x < -limit || x > limit {
            continue;
        }
        let b = (((x + limit) / width).floor() as usize).min(GAUSS_BINS - 1);
        h[b] += 1;
    }
    h
}

/// Centre of bin i of the histogram over [−limit, limit].
fn centre(i: usize, limit: f64) -> f64 {
    -limit + (i as f64 + 0.5) * 2.0 * limit / GAUSS_BINS as f64
}

/// SoFiA-2's `gauss` statistic as skyconv implements REFERENCE.md's description of it:
/// 1. limit = max(|min|, |max|) of the finite values of the whole cube (`extremes`); a
///    histogram of the in-range samples in 101 bins over [−limit, limit] (bin 50 centred on 0);
/// 2. its second moment m = sqrt(Σ nᵢxᵢ² / Σ nᵢ) (xᵢ bin centres, f64), and the histogram is
///    taken again over [−2.5m, 2.5m], so that m covers a fifth of the histogram's width;
/// 3. a straight line ln(nᵢ) = a + b·xᵢ² fitted by least squares over bins 1..=99 with nᵢ > 0
///    (the two end bins left out), in the element type: xᵢ and ln(nᵢ) rounded, then every
///    sum and the slope b = (NΣXY − ΣXΣY)/(NΣX² − (ΣX)²) computed with rounding after each
///    operation, sums in increasing bin order;
/// 4. σ = sqrt(−1/(2b)) (f64).
///
/// None when fewer than two bins can be fitted or the slope is not negative.
pub fn gauss<S: Real>(
    samples: &[S],
    range: Range,
    extremes: (f64, f64),
    single: bool,
) -> Option<f64> {
    let limit = extremes.0.abs().max(extremes.1.abs());
    if !(limit.is_finite() && limit > 0.0) {
        return None;
    }
    let h = gauss_histogram(samples, range, limit);
    let (mut n, mut s2) = (0u64, 0.0f64);
    for (i, &c) in h.iter().enumerate() {
        let x = centre(i, limit);
        n += c;
        s2 += c as f64 * x * x;
    }
    if n == 0 {
        return None;
    }
    let m = (s2 / n as f64).sqrt();
    if !(m.is_finite() && m > 0.0) {
        return None;
    }
    let limit = 2.5 * m;
    let h = gauss_histogram(samples, range, limit);
    let r = |v: f64| rnd(v, single);
    let (mut cnt, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (i, &c) in h.iter().enumerate().take(GAUSS_BINS - 1).skip(1) {
        if c == 0 {
            continue;
        }
        let xc = r(centre(i, limit));
        let x = r(xc * xc);
        let y = r((c as f64).ln());
        cnt = r(cnt + 1.0);
        sx = r(sx + x);
        sy = r(sy + y);
        sxx = r(sxx + r(x * x));
        sxy = r(sxy + r(x * y));
    }
    if cnt < 2.0 {
        return None;
    }
    let num = r(r(cnt * sxy) - r(sx * sy));
    let den = r(r(cnt * sxx) - r(sx * sx));
    let b = r(num / den);
    (b < 0.0 && b.is_finite()).then(|| (-1.0 / (2.0 * b)).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk() {
        assert_eq!(
            Walk::new(10, 5),
            Walk {
                cap: 1,
                ends_at_zero: true
            }
        );
        assert_eq!(
            Walk::new(11, 1),
            Walk {
                cap: 5,
                ends_at_zero: true
            }
        );
        assert!(!Walk::new(11, 2).ends_at_zero);
    }

    #[test]
    fn mad_rules() {
        // slots in walk order; the last one is element 0 and is left out.
        let s = [-1.0, 4.0, -3.0, 2.0, -100.0];
        let w = Walk {
            cap: 100,
            ends_at_zero: true,
        };
        // |.| of the first four: 1 4 3 2 -> (2 + 3) / 2
        assert_eq!(mad(&s, Range::All, w, true), Some(MAD_TO_STD * 2.5));
        // negative: 1, 3 -> 2; with cap 1 only the first: 1
        assert_eq!(mad(&s, Range::Negative, w, true), Some(MAD_TO_STD * 2.0));
        let w1 = Walk { cap: 1, ..w };
        assert_eq!(mad(&s, Range::Negative, w1, true), Some(MAD_TO_STD * 1.0));
        // full range is not capped
        assert_eq!(mad(&s, Range::All, w1, true), Some(MAD_TO_STD * 2.5));
    }

    #[test]
    fn mad_is_the_sorted_middle() {
        // pseudo-random values with repeats, an infinity and NaNs (left out): the middle of the
        // sorted |x|, the two middle ones averaged (rounded as SoFiA-2) for an even count
        let mut s = 11u64;
        let mut v: Vec<f64> = (0..5001)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) % 20011) as f64 / 97.0 - 103.0
            })
            .collect();
        v[7] = f64::INFINITY;
        v[9] = f64::NAN;
        v[10] = -f64::NAN;
        let w = Walk {
            cap: usize::MAX,
            ends_at_zero: false,
        };
        for (n, single) in [(5001, true), (5000, true), (5000, false), (2, false)] {
            let mut a: Vec<f64> = v[..n]
                .iter()
                .filter(|x| !x.is_nan())
                .map(|x| x.abs())
                .collect();
            a.sort_by(f64::total_cmp);
            let m = a.len();
            let want = if m % 2 == 1 {
                a[m / 2]
            } else {
                rnd(rnd(a[m / 2 - 1] + a[m / 2], single) * 0.5, single)
            };
            let got = mad(&v[..n], Range::All, w, single).unwrap();
            assert_eq!(got.to_bits(), (MAD_TO_STD * want).to_bits(), "n={n}");
        }
    }

    #[test]
    fn mad_keeps_the_first_cap_values_of_the_walk() {
        // several parallel chunks: the kept values are the walk's first `cap` in range, in
        // order, whatever the chunking (against the sequential filter and a full sort)
        let mut s = 5u64;
        let v: Vec<f64> = (0..3 * GRAIN + 12345)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // the tail of the walk is much wider: taking it would move the median
                let wide = if i > GRAIN { 10.0 } else { 1.0 };
                (((s >> 40) % 20011) as f64 / 10005.0 - 1.0) * wide
            })
            .collect();
        for cap in [1000, GRAIN + 17, usize::MAX] {
            let w = Walk {
                cap,
                ends_at_zero: false,
            };
            let mut a: Vec<f64> = v
                .iter()
                .filter(|&&x| x < 0.0)
                .map(|x| x.abs())
                .take(cap)
                .collect();
            a.sort_by(f64::total_cmp);
            let m = a.len();
            let want = rnd(rnd(a[m / 2 - 1] + a[m / 2], true) * 0.5, true);
            let want = if m % 2 == 1 { a[m / 2] } else { want };
            let got = mad(&v, Range::Negative, w, true).unwrap();
            assert_eq!(got.to_bits(), (MAD_TO_STD * want).to_bits(), "cap={cap}");
        }
    }

    #[test]
    fn mad_in_place_on_f32_equals_f64() {
        // an f32 sample (as the CPU S+C keeps an f32 cube's) with a whole chunk of no
        // negative value between others and a last slot at element 0: the same MAD as the
        // f64 copy of the sample, for every cap
        let mut s = 3u64;
        let v: Vec<f32> = (0..4 * GRAIN + 999)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let x = ((s >> 40) % 20011) as f32 / 10005.0 - 1.0;
                if (GRAIN..2 * GRAIN).contains(&i) {
                    x.abs() + 0.5 // chunk 1 keeps nothing
                } else {
                    x * (1 + i / GRAIN) as f32
                }
            })
            .collect();
        let v64: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        for cap in [10, GRAIN + 3, 2 * GRAIN + 5, usize::MAX] {
            for range in [Range::Negative, Range::All] {
                let w = Walk {
                    cap,
                    ends_at_zero: true,
                };
                let want = mad(&v64, range, w, true).unwrap();
                let mut scratch = v.clone();
                let got = mad_in_place(&mut scratch, range, w, true).unwrap();
                assert_eq!(got.to_bits(), want.to_bits(), "cap={cap} {range:?}");
                // and against the sequential rule: the walk's first `cap` in range
                let mut a: Vec<f64> = v64[..v64.len() - 1]
                    .iter()
                    .filter(|&&x| in_range(x, range))
                    .map(|x| x.abs())
                    .take(if range == Range::All { usize::MAX } else { cap })
                    .collect();
                a.sort_by(f64::total_cmp);
                let m = a.len();
                let med = if m % 2 == 1 {
                    a[m / 2]
                } else {
                    rnd(rnd(a[m / 2 - 1] + a[m / 2], true) * 0.5, true)
                };
                assert_eq!(got.to_bits(), (MAD_TO_STD * med).to_bits(), "cap={cap}");
            }
        }
    }

    #[test]
    fn gauss_recovers_width() {
        // deterministic normal-ish values by inverse CDF of a regular grid (Box–Muller free)
        let n = 200_000;
        let mut s = 7u64;
        let v: Vec<f64> = (0..n)
            .map(|_| {
                let mut u = [0.0; 2];
                for x in &mut u {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    *x = ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                }
                1.7 * (-2.0 * u[0].ln()).sqrt() * (2.0 * std::f64::consts::PI * u[1]).cos()
            })
            .collect();
        let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        for range in [Range::All, Range::Negative, Range::Positive] {
            let g = gauss(&v, range, (lo, hi), true).unwrap();
            assert!((g - 1.7).abs() < 0.05, "{range:?}: {g}");
        }
    }
}
