//! Noise estimators on a sample of values (see `sample`): standard deviation and MAD about a
//! centre, a Gaussian fitted to the histogram, each over all, negative or positive values.
//! Medians are exact (histogram selection, `select_kth`); sums run in f64 in a fixed order, so
//! results do not depend on the thread count.

use std::sync::Arc;

use rayon::prelude::*;

use super::{Range, Values};
use crate::error::{Error, Result};
use crate::real::Real;

/// MAD → standard deviation of a Gaussian, 1/Φ⁻¹(3/4) (SoFiA 2's constant).
pub const MAD_TO_STD: f64 = 1.482602218505602;
/// The rounded constant SoFiA 1 uses.
pub const MAD_TO_STD_SOFIA1: f64 = 1.4826;

pub(crate) const GRAIN: usize = 1 << 16;

/// The values of `samples` kept by `range` about `center`: x − center, non-finite skipped.
fn kept(center: f64, range: Range) -> Values {
    Values {
        center,
        abs: false,
        range,
    }
}

/// Number of values kept and Σ (x − center)², summed in fixed chunks (deterministic).
fn sum_squares<S: Real>(samples: &[S], vals: Values, clip: Option<f64>) -> (usize, f64) {
    let parts: Vec<(usize, f64)> = samples
        .par_chunks(GRAIN)
        .map(|c| {
            let mut n = 0usize;
            let mut s = 0.0f64;
            for &x in c {
                if let Some(d) = vals.map(x.to_f64()) {
                    if clip.is_none_or(|t| d.abs() < t) {
                        n += 1;
                        s += d * d;
                    }
                }
            }
            (n, s)
        })
        .collect();
    parts
        .iter()
        .fold((0, 0.0), |(n, s), &(m, t)| (n + m, s + t))
}

/// sqrt(Σ (x − center)² / n) over the finite values in `range` (about `center`); with `clip`,
/// only values with |x − center| < clip count. None if no value counts. (The sample may be
/// kept in the cube's element type: every estimator reads it through `to_f64`.)
pub fn std_about<S: Real>(
    samples: &[S],
    center: f64,
    range: Range,
    clip: Option<f64>,
) -> Option<f64> {
    let (n, s) = sum_squares(samples, kept(center, range), clip);
    (n > 0).then(|| (s / n as f64).sqrt())
}

/// Median of |x − center| over the finite values in `range` (unscaled); with `clip`, only
/// values with |x − center| < clip count. None if no value counts. The kept deviations are
/// copied (the sample is small) and the middle found by selection.
pub fn mad_about<S: Real>(
    samples: &[S],
    center: f64,
    range: Range,
    clip: Option<f64>,
) -> Option<f64> {
    let vals = Values {
        center,
        abs: true,
        range,
    };
    let parts: Vec<Vec<f64>> = samples
        .par_chunks(GRAIN)
        .map(|c| {
            c.iter()
                .filter_map(|&x| vals.map(x.to_f64()).filter(|d| clip.is_none_or(|t| *d < t)))
                .collect()
        })
        .collect();
    median_nonneg(parts.concat())
}

/// The k-th smallest of values >= 0 (sign bit clear: their bit patterns sort like the values,
/// as `f64::total_cmp` orders them, +inf and +NaN last): one histogram pass over the top 16
/// bits, then a selection among the values of that bin only. Values in f32 are taken as
/// their (exact) f64, so the answer does not depend on the element type.
pub(crate) fn kth_nonneg<S: Real>(v: &[S], k: usize) -> f64 {
    const SHIFT: u32 = 48;
    let hist = v
        .par_chunks(GRAIN)
        .fold(
            || vec![0u32; 1 << 16],
            |mut h, c| {
                for &x in c {
                    h[(x.to_f64().to_bits() >> SHIFT) as usize] += 1;
                }
                h
            },
        )
        .reduce(
            || vec![0u32; 1 << 16],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        );
    let mut below = 0usize;
    let mut bin = 0usize;
    for (b, &c) in hist.iter().enumerate() {
        if below + c as usize > k {
            bin = b;
            break;
        }
        below += c as usize;
    }
    let parts: Vec<Vec<u64>> = v
        .par_chunks(GRAIN)
        .map(|c| {
            c.iter()
                .map(|x| x.to_f64().to_bits())
                .filter(|b| (b >> SHIFT) as usize == bin)
                .collect()
        })
        .collect();
    let mut inside = parts.concat();
    let (_, kth, _) = inside.select_nth_unstable(k - below);
    f64::from_bits(*kth)
}

/// Exact median of finite values >= 0 (mean of the two middle values for an even count).
fn median_nonneg(v: Vec<f64>) -> Option<f64> {
    let n = v.len();
    match n {
        0 => None,
        n if n % 2 == 1 => Some(kth_nonneg(&v, n / 2)),
        n => Some(0.5 * (kth_nonneg(&v, n / 2 - 1) + kth_nonneg(&v, n / 2))),
    }
}

/// Exact median of `v` (mean of the two middle values for an even count) by selection.
pub fn median_owned(mut v: Vec<f64>) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (lower, mid, _) = v.select_nth_unstable_by(n / 2, |a, b| a.total_cmp(b));
    let mid = *mid;
    if n % 2 == 1 {
        return Some(mid);
    }
    let below = lower.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    Some(0.5 * (below + mid))
}

/// Counts of the finite samples in the bins given by increasing `edges`, with NumPy's rule:
/// bin i holds edges[i] <= x < edges[i+1], the last bin also x == edges[last].
pub fn histogram<S: Real>(samples: &[S], edges: &[f64]) -> Vec<u64> {
    let nb = edges.len().saturating_sub(1);
    if nb == 0 {
        return Vec::new();
    }
    let (lo, hi) = (edges[0], edges[nb]);
    samples
        .par_chunks(GRAIN)
        .map(|c| {
            let mut h = vec![0u64; nb];
            for x in c {
                let x = x.to_f64();
                if !(x >= lo && x <= hi) {
                    continue;
                }
                let i = edges.partition_point(|&e| e <= x) - 1;
                h[i.min(nb - 1)] += 1;
            }
            h
        })
        .reduce(
            || vec![0u64; nb],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

/// Least-squares fit of A·exp(−x²/(2σ²)) to (x, y) from the start (a0, s0), by
/// Levenberg–Marquardt iterated to convergence. Returns (A, σ); σ may come out negative
/// (only σ² enters the model), as with scipy's `curve_fit`.
pub fn fit_gaussian(x: &[f64], y: &[f64], a0: f64, s0: f64) -> Result<(f64, f64)> {
    if x.len() != y.len() || x.len() < 2 {
        return Err(Error::value(
            "Gaussian fit: need at least two histogram bins",
        ));
    }
    if !(a0.is_finite() && s0.is_finite()) || s0 == 0.0 {
        return Err(Error::value(format!(
            "Gaussian fit: invalid starting values (amplitude {a0}, width {s0})"
        )));
    }
    let cost = |a: f64, s: f64| -> f64 {
        let k = -0.5 / (s * s);
        x.iter()
            .zip(y)
            .map(|(&xi, &yi)| {
                let r = yi - a * (k * xi * xi).exp();
                r * r
            })
            .sum()
    };
    let (mut a, mut s) = (a0, s0);
    let mut c = cost(a, s);
    let mut lambda = 1e-3;
    for _ in 0..500 {
        // Normal equations J^T J δ = J^T r for the residual r = y − model.
        let k = -0.5 / (s * s);
        let (mut jaa, mut jas, mut jss, mut ga, mut gs) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (&xi, &yi) in x.iter().zip(y) {
            let e = (k * xi * xi).exp();
            let r = yi - a * e;
            let da = e;
            let ds = a * e * xi * xi / (s * s * s);
            jaa += da * da;
            jas += da * ds;
            jss += ds * ds;
            ga += da * r;
            gs += ds * r;
        }
        let mut improved = false;
        for _ in 0..60 {
            let (m11, m22) = (jaa * (1.0 + lambda), jss * (1.0 + lambda));
            let det = m11 * m22 - jas * jas;
            if det == 0.0 || !det.is_finite() {
                lambda *= 10.0;
                continue;
            }
            let da = (ga * m22 - gs * jas) / det;
            let ds = (gs * m11 - ga * jas) / det;
            let (na, ns) = (a + da, s + ds);
            let nc = if ns != 0.0 {
                cost(na, ns)
            } else {
                f64::INFINITY
            };
            if nc.is_finite() && nc <= c {
                let small = da.abs() <= 1e-15 * a.abs().max(1e-300)
                    && ds.abs() <= 1e-15 * s.abs().max(1e-300);
                let flat = c - nc <= 1e-16 * c;
                a = na;
                s = ns;
                c = nc;
                lambda = (lambda * 0.3).max(1e-12);
                improved = true;
                if small || (flat && da.abs() <= 1e-12 * a.abs() && ds.abs() <= 1e-12 * s.abs()) {
                    return Ok((a, s));
                }
                break;
            }
            lambda *= 10.0;
        }
        if !improved {
            break; // no step lowers the cost: converged to rounding
        }
    }
    if a.is_finite() && s.is_finite() && s != 0.0 {
        Ok((a, s))
    } else {
        Err(Error::value("Gaussian fit to the flux histogram failed"))
    }
}

/// A least-squares fitter of A·exp(−x²/(2σ²)): (x, y, A₀, σ₀) → (A, σ). The compat layer
/// plugs in scipy's `curve_fit` (what SoFiA 1 calls, whose stopping rule decides the last
/// digits); `builtin` is Levenberg–Marquardt to convergence.
#[derive(Clone)]
pub struct Fitter(pub Arc<FitFn>);

/// The function a `Fitter` wraps.
pub type FitFn = dyn Fn(&[f64], &[f64], f64, f64) -> Result<(f64, f64)> + Send + Sync;

impl std::fmt::Debug for Fitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fitter")
    }
}

impl Fitter {
    pub fn builtin() -> Self {
        Fitter(Arc::new(fit_gaussian))
    }

    pub fn fit(&self, x: &[f64], y: &[f64], a0: f64, s0: f64) -> Result<(f64, f64)> {
        (self.0)(x, y, a0, s0)
    }
}

/// Bin centres (e[i] + e[i+1]) / 2.
pub fn centres(edges: &[f64]) -> Vec<f64> {
    edges.windows(2).map(|w| (w[0] + w[1]) / 2.0).collect()
}

/// skyconv's Gaussian-fit estimator: σ₀ = 1.4826·MAD about 0, a histogram of bin width σ₀/10
/// over ±5σ₀ (one side only for a negative or positive range), and the width of the
/// zero-centred Gaussian fitted to it. None if no value counts; σ₀ if all are equal.
pub fn gauss_about_zero<S: Real>(samples: &[S], range: Range) -> Result<Option<f64>> {
    let Some(mad) = mad_about(samples, 0.0, range, None) else {
        return Ok(None);
    };
    let s0 = MAD_TO_STD * mad;
    if s0 == 0.0 || !s0.is_finite() {
        return Ok(Some(s0));
    }
    let (lo, nb) = match range {
        Range::All => (-5.0 * s0, 100),
        Range::Negative => (-5.0 * s0, 50),
        Range::Positive => (0.0, 50),
    };
    let edges: Vec<f64> = (0..=nb).map(|i| lo + i as f64 * 0.1 * s0).collect();
    let hist: Vec<f64> = histogram(samples, &edges)
        .into_iter()
        .map(|c| c as f64)
        .collect();
    let amp = hist.iter().cloned().fold(0.0, f64::max);
    let (_, s) = fit_gaussian(&centres(&edges), &hist, amp, s0)?;
    Ok(Some(s.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_numpy_rule() {
        let e = [0.0, 1.0, 2.0];
        let s = [0.0, 0.5, 1.0, 2.0, 2.5, -1.0, f64::NAN];
        assert_eq!(histogram(&s, &e), vec![2, 2]);
    }

    #[test]
    fn fit_recovers_gaussian() {
        let x: Vec<f64> = (0..60).map(|i| -3.0 + i as f64 * 0.1).collect();
        let y: Vec<f64> = x
            .iter()
            .map(|v| 7.0 * (-v * v / (2.0 * 0.8 * 0.8)).exp())
            .collect();
        let (a, s) = fit_gaussian(&x, &y, 5.0, 1.3).unwrap();
        assert!(
            (a - 7.0).abs() < 1e-9 && (s.abs() - 0.8).abs() < 1e-9,
            "{a} {s}"
        );
    }

    #[test]
    fn median_nonneg_matches_sort() {
        let mut s = 12345u64;
        for n in [1usize, 2, 3, 10, 1001, 200_000] {
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((s >> 11) as f64 / (1u64 << 53) as f64).powi(3) * 7.0
                })
                .collect();
            let mut w = v.clone();
            w.sort_by(|a, b| a.total_cmp(b));
            let want = if n % 2 == 1 {
                w[n / 2]
            } else {
                0.5 * (w[n / 2 - 1] + w[n / 2])
            };
            assert_eq!(median_nonneg(v.clone()), Some(want), "n={n}");
            assert_eq!(median_owned(v), Some(want), "n={n}");
        }
        assert_eq!(median_nonneg(vec![0.0, 0.0, 3.0]), Some(0.0));
    }

    #[test]
    fn std_and_mad() {
        let s = [-2.0, 1.0, 3.0, f64::NAN];
        assert_eq!(
            std_about(&s, 0.0, Range::All, None),
            Some((14.0f64 / 3.0).sqrt())
        );
        assert_eq!(mad_about(&s, 0.0, Range::All, None), Some(2.0));
        assert_eq!(mad_about(&s, 0.0, Range::Negative, None), Some(2.0));
        assert_eq!(std_about(&s, 0.0, Range::Positive, Some(2.0)), Some(1.0));
    }
}
