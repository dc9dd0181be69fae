//! Per-unit statistics on the CPU: exact medians and f64 sums in a fixed order, so results do
//! not depend on the thread count.
//!
//! Medians of one large unit: one parallel pass histograms the top 16 bits of an
//! order-preserving u64 key of each value (f64 of the mapped value, as the GPU kernel does),
//! a second pass gathers the values of the bin that holds the upper middle rank (and the
//! largest value below that bin), and the middle values are selected among those. When that bin
//! is very full (many equal values) the statistics module's multi-level selection takes over.
//! Medians of many small units: each unit is gathered and selected on its own, in parallel.

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
            Stat::Median { abs } => median_big(data, arg[0] as usize, values(abs, center[0])),
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
    if lay.elem_stride == 1 {
        // Maps: each unit is a contiguous block.
        return (0..lay.units)
            .into_par_iter()
            .map_init(Vec::new, |buf: &mut Vec<f64>, u| {
                if !active[u] {
                    return f64::NAN;
                }
                let unit = &data[u * lay.len..(u + 1) * lay.len];
                one_unit(unit.iter().map(|x| x.to_f64()), stat, center[u], buf)
            })
            .collect();
    }
    // Spectra: element k of unit u sits at k·units + u. Tiles of neighbouring spectra are
    // transposed into a buffer first, so that memory is read in contiguous runs.
    let tiles = lay.units.div_ceil(TILE);
    let parts: Vec<Vec<f64>> = (0..tiles)
        .into_par_iter()
        .map_init(
            || (Vec::new(), Vec::new()),
            |(tile, buf): &mut (Vec<f64>, Vec<f64>), t| {
                let u0 = t * TILE;
                let w = TILE.min(lay.units - u0);
                if !active[u0..u0 + w].iter().any(|&a| a) {
                    return vec![f64::NAN; w];
                }
                tile.clear();
                tile.resize(w * lay.len, 0.0);
                for k in 0..lay.len {
                    let row = &data[k * lay.units + u0..k * lay.units + u0 + w];
                    for (j, x) in row.iter().enumerate() {
                        tile[j * lay.len + k] = x.to_f64();
                    }
                }
                (0..w)
                    .map(|j| {
                        let u = u0 + j;
                        if !active[u] {
                            return f64::NAN;
                        }
                        let unit = &tile[j * lay.len..(j + 1) * lay.len];
                        one_unit(unit.iter().copied(), stat, center[u], buf)
                    })
                    .collect()
            },
        )
        .collect();
    parts.concat()
}

/// Spectra transposed together by `unit_stat`.
const TILE: usize = 64;

/// `stat` of one small unit given as its values in order (`buf`: scratch; the median counts
/// the finite values itself).
fn one_unit(unit: impl Iterator<Item = f64>, stat: Stat, center: f64, buf: &mut Vec<f64>) -> f64 {
    match stat {
        Stat::Count => unit.filter(|x| x.is_finite()).count() as f64,
        Stat::Sum { sq } => sum_of(unit, sq, center),
        Stat::Median { abs } => {
            let vals = values(abs, center);
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

/// Order-preserving map of a f64 to u64 (the same as `at_key` in kernels/atrous.cu).
#[inline(always)]
fn key(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// Inverse of `key` (also of `at_key` in kernels/atrous.cu).
#[inline(always)]
pub fn unkey(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

const BIN_BITS: u32 = 16;
/// Above this many values in the median's bin, fall back to `median_one`.
const MAX_GATHER: usize = 1 << 22;

/// Median of one large unit by a 16-bit radix histogram and a gather (see the module docs).
fn median_big<T: Real>(data: &[T], n: usize, vals: Values) -> f64 {
    if n == 0 {
        return f64::NAN;
    }
    let (k_lo, k_hi) = middle_ranks(n);
    let nbins = 1usize << BIN_BITS;
    // One histogram per thread (not per chunk): merging 64 Ki bins is not free.
    let part = data.len().div_ceil(rayon::current_num_threads()).max(GRAIN);
    let hist = data
        .par_chunks(part)
        .fold(
            || vec![0u64; nbins],
            |mut h, ch| {
                for x in ch {
                    if let Some(v) = vals.map(x.to_f64()) {
                        h[(key(v) >> (64 - BIN_BITS)) as usize] += 1;
                    }
                }
                h
            },
        )
        .reduce(
            || vec![0u64; nbins],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                a
            },
        );
    let mut below = 0usize;
    let mut bin = nbins;
    for (b, &c) in hist.iter().enumerate() {
        if below + c as usize > k_hi {
            bin = b;
            break;
        }
        below += c as usize;
    }
    if bin == nbins || hist[bin] as usize > MAX_GATHER {
        return median_one(data, n, vals);
    }
    let bin = bin as u64;
    let (mut rest, max_below) = data
        .par_chunks(GRAIN)
        .fold(
            || (Vec::new(), 0u64),
            |(mut r, mut m), ch| {
                for x in ch {
                    if let Some(v) = vals.map(x.to_f64()) {
                        let k = key(v);
                        let b = k >> (64 - BIN_BITS);
                        // Branch-free running maximum of the keys below the median's bin (values
                        // below and above it come in random order: a branch would mispredict
                        // half the time, and an f64 max chain is slow).
                        m = m.max(if b < bin { k } else { 0 });
                        if b == bin {
                            r.push(v);
                        }
                    }
                }
                (r, m)
            },
        )
        .reduce(
            || (Vec::new(), 0u64),
            |(mut a, ma), (b, mb)| {
                a.extend(b);
                (a, ma.max(mb))
            },
        );
    let (left, hi, _) = rest.select_nth_unstable_by(k_hi - below, |a, b| a.total_cmp(b));
    let hi = *hi;
    let lo = if k_lo == k_hi {
        hi
    } else if k_lo >= below {
        left.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    } else {
        unkey(max_below)
    };
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
            vec![-3.0, 1.0],
            vec![-0.0, 0.0, -1e-300, 1e-300, -2.5, 7.0],
            (0..100_000)
                .map(|i| if i % 3 == 0 { 1.0 } else { -(i as f64) })
                .collect(),
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
            assert_eq!(median_big(&v, n, Values::FINITE), want);
            assert_eq!(median_big(&v, n, Values::abs_about(1.5)), {
                let a: Vec<f64> = v.iter().map(|x| (x - 1.5).abs()).collect();
                sorted_median(&a)
            });
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

#[cfg(test)]
mod timing {
    use super::*;

    #[test]
    #[ignore]
    fn time_medians() {
        let n = 1 << 20;
        let mut s = 12345u64;
        let data: Vec<f32> = (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.0
            })
            .collect();
        for round in 0..3 {
            let t = std::time::Instant::now();
            let a = median_one(&data, n, Values::FINITE);
            let t1 = t.elapsed();
            let t = std::time::Instant::now();
            let b = median_big(&data, n, Values::FINITE);
            let t2 = t.elapsed();
            let t = std::time::Instant::now();
            let _c = median_big(&data, n, Values::abs_about(0.1));
            let t3 = t.elapsed();
            assert_eq!(a, b);
            eprintln!("round {round}: median_one {t1:?} median_big {t2:?} (abs {t3:?})");
        }
    }
}
