//! CPU engine of `select_kth`: parallel histograms, refined until at most `GATHER` values are
//! left in the bin that holds rank k, which are then gathered and selected exactly.

use rayon::prelude::*;

use super::Values;
use crate::real::Real;

const BINS: usize = 4096;
const GATHER: usize = 1 << 16;
const GRAIN: usize = 1 << 16;

/// Number of values `vals` keeps.
pub fn count<T: Real>(data: &[T], vals: Values) -> usize {
    data.par_chunks(GRAIN)
        .map(|c| c.iter().filter(|x| vals.map(x.to_f64()).is_some()).count())
        .sum()
}

/// One refinement level: values v with lo <= v <= hi fall in bin floor((v-lo)*scale), clamped.
#[derive(Clone, Copy)]
struct Level {
    lo: f64,
    hi: f64,
    scale: f64,
    bin: usize,
}

impl Level {
    fn new(lo: f64, hi: f64) -> Level {
        let width = hi - lo;
        let scale = if width > 0.0 {
            BINS as f64 / width
        } else {
            0.0
        };
        Level {
            lo,
            hi,
            scale,
            bin: 0,
        }
    }
    #[inline(always)]
    fn bin_of(&self, v: f64) -> Option<usize> {
        if v < self.lo || v > self.hi {
            return None;
        }
        Some((((v - self.lo) * self.scale) as usize).min(BINS - 1))
    }
}

/// Value kept by all chosen levels.
#[inline(always)]
fn inside(levels: &[Level], v: f64) -> bool {
    levels.iter().all(|l| l.bin_of(v) == Some(l.bin))
}

/// The k-th smallest (0-based) value that `vals` keeps, or None if fewer than k+1 are kept.
pub fn select_kth<T: Real>(data: &[T], k: usize, vals: Values) -> Option<f64> {
    let (n, lo, hi) = data
        .par_chunks(GRAIN)
        .map(|c| {
            c.iter().filter_map(|x| vals.map(x.to_f64())).fold(
                (0usize, f64::INFINITY, f64::NEG_INFINITY),
                |(n, lo, hi), v| (n + 1, lo.min(v), hi.max(v)),
            )
        })
        .reduce(
            || (0, f64::INFINITY, f64::NEG_INFINITY),
            |a, b| (a.0 + b.0, a.1.min(b.1), a.2.max(b.2)),
        );
    if k >= n {
        return None;
    }
    let mut levels: Vec<Level> = Vec::new();
    let (mut lo, mut hi, mut k, mut left) = (lo, hi, k, n);
    while left > GATHER && hi > lo {
        let mut level = Level::new(lo, hi);
        let hist = data
            .par_chunks(GRAIN)
            .map(|c| {
                let mut h = vec![0usize; BINS];
                for x in c {
                    if let Some(v) = vals.map(x.to_f64()) {
                        if inside(&levels, v) {
                            if let Some(b) = level.bin_of(v) {
                                h[b] += 1;
                            }
                        }
                    }
                }
                h
            })
            .reduce(
                || vec![0usize; BINS],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                    a
                },
            );
        let mut below = 0;
        let b = (0..BINS)
            .find(|&b| {
                if below + hist[b] > k {
                    true
                } else {
                    below += hist[b];
                    false
                }
            })
            .expect("rank k lies in some bin");
        level.bin = b;
        k -= below;
        left = hist[b];
        let bin_lo = level.lo + b as f64 / level.scale;
        let bin_hi = level.lo + (b + 1) as f64 / level.scale;
        levels.push(level);
        // Bounds of the kept bin, slightly widened: membership is decided by `inside`.
        lo = bin_lo.max(level.lo);
        hi = bin_hi.min(level.hi);
        let pad = (hi - lo).abs() * 1e-9 + f64::MIN_POSITIVE;
        lo -= pad;
        hi += pad;
        if levels.len() >= 8 {
            break; // only (nearly) equal values are left: gather them
        }
    }
    let mut rest: Vec<f64> = data
        .par_chunks(GRAIN)
        .flat_map_iter(|c| {
            let levels = &levels;
            c.iter()
                .filter_map(move |x| vals.map(x.to_f64()).filter(|&v| inside(levels, v)))
        })
        .collect();
    let (_, v, _) = rest.select_nth_unstable_by(k, |a, b| a.total_cmp(b));
    Some(*v)
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
