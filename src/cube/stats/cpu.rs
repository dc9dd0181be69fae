//! CPU engine of the statistics: the three data passes of the refinement as parallel scans.

use rayon::prelude::*;

use super::{inside, refine, Level, Source, Values, BINS};
use crate::error::Result;
use crate::real::Real;

const GRAIN: usize = 1 << 16;

/// Number of values `vals` keeps.
pub fn count<T: Real>(data: &[T], vals: Values) -> usize {
    data.par_chunks(GRAIN)
        .map(|c| c.iter().filter(|x| vals.map(x.to_f64()).is_some()).count())
        .sum()
}

/// The k-th smallest (0-based) value that `vals` keeps, or None if fewer than k+1 are kept.
pub fn select_kth<T: Real>(data: &[T], k: usize, vals: Values) -> Option<f64> {
    refine(&Host { data, vals }, k).expect("host passes cannot fail")
}

struct Host<'a, T> {
    data: &'a [T],
    vals: Values,
}

impl<T: Real> Source for Host<'_, T> {
    fn extent(&self, levels: &[Level]) -> Result<(usize, f64, f64)> {
        let vals = self.vals;
        Ok(self
            .data
            .par_chunks(GRAIN)
            .map(|c| {
                c.iter()
                    .filter_map(|x| vals.map(x.to_f64()).filter(|&v| inside(levels, v)))
                    .fold(
                        (0usize, f64::INFINITY, f64::NEG_INFINITY),
                        |(n, lo, hi), v| (n + 1, lo.min(v), hi.max(v)),
                    )
            })
            .reduce(
                || (0, f64::INFINITY, f64::NEG_INFINITY),
                |a, b| (a.0 + b.0, a.1.min(b.1), a.2.max(b.2)),
            ))
    }

    fn histogram(&self, levels: &[Level], level: &Level) -> Result<Vec<u64>> {
        let vals = self.vals;
        Ok(self
            .data
            .par_chunks(GRAIN)
            .map(|c| {
                let mut h = vec![0u64; BINS];
                for x in c {
                    if let Some(v) = vals.map(x.to_f64()) {
                        if inside(levels, v) {
                            if let Some(b) = level.bin_of(v) {
                                h[b] += 1;
                            }
                        }
                    }
                }
                h
            })
            .reduce(
                || vec![0u64; BINS],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                    a
                },
            ))
    }

    fn gather(&self, levels: &[Level]) -> Result<Vec<f64>> {
        let vals = self.vals;
        Ok(self
            .data
            .par_chunks(GRAIN)
            .flat_map_iter(|c| {
                c.iter()
                    .filter_map(move |x| vals.map(x.to_f64()).filter(|&v| inside(levels, v)))
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 10.0
            })
            .collect()
    }

    #[test]
    fn kth_matches_sort() {
        for (n, seed) in [(1usize, 1u64), (7, 2), (1000, 3), (300_000, 4)] {
            let mut data = lcg(n, seed);
            if n > 10 {
                data[3] = f32::NAN;
                data[5] = 2.0;
                data[6] = 2.0;
            }
            let vals = Values::FINITE;
            let mut sorted: Vec<f64> = data.iter().filter_map(|x| vals.map(*x as f64)).collect();
            sorted.sort_by(|a, b| a.total_cmp(b));
            assert_eq!(count(&data, vals), sorted.len());
            for k in [0, sorted.len() / 3, sorted.len() / 2, sorted.len() - 1] {
                assert_eq!(select_kth(&data, k, vals), Some(sorted[k]), "n={n} k={k}");
            }
            assert_eq!(select_kth(&data, sorted.len(), vals), None);
        }
    }

    #[test]
    fn many_equal_values() {
        let mut data = vec![1.5f64; 200_000];
        data[10] = -3.0;
        data[20] = 9.0;
        assert_eq!(select_kth(&data, 1, Values::FINITE), Some(1.5));
        assert_eq!(select_kth(&data, 0, Values::FINITE), Some(-3.0));
        assert_eq!(select_kth(&data, 199_999, Values::FINITE), Some(9.0));
    }
}
