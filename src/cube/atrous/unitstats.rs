//! Per-unit statistics on the CPU: exact k-th values (one unit: the parallel histogram
//! selection of `cube::stats`; many units: one gather-and-select per unit, in parallel) and
//! f64 sums in a fixed order, so results do not depend on the thread count.

use rayon::prelude::*;

use super::{median_of, middle_ranks, Layout, Stat};
use crate::cube::stats::{self, Values};
use crate::real::Real;

const GRAIN: usize = 1 << 16;

fn values(abs: bool, center: f64) -> Values {
    if abs {
        Values::abs_about(center)
    } else {
        Values::FINITE
    }
}

/// `stat` of every active unit of `data` (see `Engine::stat`).
pub fn unit_stat<T: Real>(
    data: &[T],
    lay: &Layout,
    stat: Stat,
    arg: &[f64],
    center: &[f64],
    active: &[bool],
) -> Vec<f64> {
    if lay.units == 1 {
        if !active[0] {
            return vec![f64::NAN];
        }
        let v = match stat {
            Stat::Count => stats::count(data, Values::FINITE) as f64,
            Stat::Median { abs } => median_one(data, arg[0] as usize, values(abs, center[0])),
            Stat::Sum { sq } => {
                let c = center[0];
                let parts: Vec<f64> = data
                    .par_chunks(GRAIN)
                    .map(|ch| sum_of(ch.iter().map(|x| x.to_f64()), sq, c))
                    .collect();
                parts.iter().sum()
            }
        };
        return vec![v];
    }
    (0..lay.units)
        .into_par_iter()
        .map_init(Vec::new, |buf: &mut Vec<f64>, u| {
            if !active[u] {
                return f64::NAN;
            }
            let unit = (0..lay.len).map(|k| data[lay.index(u, k)].to_f64());
            match stat {
                Stat::Count => unit.filter(|x| x.is_finite()).count() as f64,
                Stat::Sum { sq } => sum_of(unit, sq, center[u]),
                Stat::Median { abs } => {
                    let vals = values(abs, center[u]);
                    buf.clear();
                    buf.extend(unit.filter_map(|x| vals.map(x)));
                    let n = buf.len();
                    if n == 0 {
                        return f64::NAN;
                    }
                    let (k_lo, k_hi) = middle_ranks(n);
                    let (below, hi, _) = buf.select_nth_unstable_by(k_hi, |a, b| a.total_cmp(b));
                    let hi = *hi;
                    // The k_lo-th value is the largest of those left of rank k_hi.
                    let lo = if k_lo < k_hi {
                        below.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                    } else {
                        hi
                    };
                    median_of(n, lo, hi)
                }
            }
        })
        .collect()
}

/// Median of one large unit: one exact selection of the upper middle value; for an even
/// count the lower one is the largest value below it when exactly n/2 values are (else a tie).
fn median_one<T: Real>(data: &[T], n: usize, vals: Values) -> f64 {
    if n == 0 {
        return f64::NAN;
    }
    let (k_lo, k_hi) = middle_ranks(n);
    let Some(hi) = stats::select_kth(data, k_hi, vals) else {
        return f64::NAN;
    };
    if k_lo == k_hi {
        return hi;
    }
    let parts: Vec<(usize, f64)> = data
        .par_chunks(GRAIN)
        .map(|ch| {
            ch.iter()
                .filter_map(|x| vals.map(x.to_f64()))
                .filter(|&v| v < hi)
                .fold((0, f64::NEG_INFINITY), |(m, b), v| (m + 1, b.max(v)))
        })
        .collect();
    let below: usize = parts.iter().map(|p| p.0).sum();
    let max_below = parts.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let lo = if below == k_hi { max_below } else { hi };
    median_of(n, lo, hi)
}

fn sum_of(it: impl Iterator<Item = f64>, sq: bool, c: f64) -> f64 {
    let finite = it.filter(|x| x.is_finite());
    if sq {
        finite.map(|x| (x - c) * (x - c)).sum()
    } else {
        finite.sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted_median(v: &[f64]) -> f64 {
        let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        if n % 2 == 1 {
            s[n / 2]
        } else {
            0.5 * (s[n / 2 - 1] + s[n / 2])
        }
    }

    #[test]
    fn medians_even_odd_ties() {
        let cases: Vec<Vec<f64>> = vec![
            vec![3.0, 1.0, 2.0, 4.0],
            vec![1.0, 2.0, 2.0, 2.0, 5.0, 9.0],
            vec![2.0, 2.0, 2.0, 2.0],
            vec![5.0, f64::NAN, -1.0, 7.0, 7.0],
            (0..200_001).map(|i| ((i * 7919) % 1000) as f64).collect(),
            (0..200_000)
                .map(|i| ((i * 7919) % 1001) as f64 * 0.5)
                .collect(),
        ];
        for v in cases {
            let n = v.iter().filter(|x| x.is_finite()).count();
            let want = sorted_median(&v);
            assert_eq!(median_one(&v, n, Values::FINITE), want);
            let lay = Layout::new(&[v.len()], 1).unwrap();
            let got = unit_stat(
                &v,
                &lay,
                Stat::Median { abs: false },
                &[n as f64],
                &[f64::NAN],
                &[true],
            );
            assert_eq!(got[0], want);
            // Many units: spectra of a (len, 1) array go through the gather path.
            let lay2 = Layout::new(&[v.len(), 2], 1).unwrap();
            let twice: Vec<f64> = v.iter().flat_map(|&x| [x, x]).collect();
            let got = unit_stat(
                &twice,
                &lay2,
                Stat::Median { abs: false },
                &[n as f64; 2],
                &[f64::NAN; 2],
                &[true, true],
            );
            assert_eq!(got, vec![want, want]);
        }
    }
}
