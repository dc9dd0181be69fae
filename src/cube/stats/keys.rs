//! Counts of values by the bits of an order-preserving 64-bit key: the block passes of the
//! distributed exact selection (python/skyconv/_dask/select.py runs a radix selection over the
//! blocks of a dask array: one pass per 16 key bits, the block counts added by a tree).
//!
//! A value v (as `Values` maps it: finite values only, optionally |v − center|) has the key of
//! its float64 bits with the sign bit set for v ≥ +0 and all bits flipped for v < 0 (so keys
//! sort as the values do). A pass looks at the values whose key starts with `prefix` (its top
//! 64 − `shift` bits; every value when `shift` is 64) and counts them by the next `bits` bits.

use rayon::prelude::*;

use super::Values;
use crate::real::Real;

const GRAIN: usize = 1 << 16;
/// Largest `bits` a pass may count by (2^24 bins: 128 MiB of counts).
pub const MAX_BITS: u32 = 24;

/// The order-preserving key of `v`'s float64 bits.
#[inline(always)]
pub fn key(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// The value of a key (the inverse of [`key`]).
pub fn value(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k ^ (1 << 63) } else { !k })
}

#[inline(always)]
fn matches(k: u64, prefix: u64, shift: u32) -> bool {
    shift >= 64 || (k >> shift) == prefix
}

/// Counts of the kept values whose key starts with `prefix` by key bits
/// `[shift − bits, shift)`: `2^bits` counts. Needs `1 <= bits <= min(shift, MAX_BITS)`,
/// `shift <= 64`.
pub fn key_counts<T: Real>(
    data: &[T],
    vals: Values,
    prefix: u64,
    shift: u32,
    bits: u32,
) -> Vec<u64> {
    debug_assert!(bits >= 1 && bits <= shift.min(MAX_BITS) && shift <= 64);
    let bins = 1usize << bits;
    let low = shift - bits;
    let mask = (bins - 1) as u64;
    data.par_chunks(GRAIN)
        .fold(
            || vec![0u64; bins],
            |mut h, c| {
                for x in c {
                    if let Some(v) = vals.map(x.to_f64()) {
                        let k = key(v);
                        if matches(k, prefix, shift) {
                            h[((k >> low) & mask) as usize] += 1;
                        }
                    }
                }
                h
            },
        )
        .reduce(
            || vec![0u64; bins],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

/// The kept values (float64, as mapped) whose key starts with `prefix`, in data order.
pub fn key_values<T: Real>(data: &[T], vals: Values, prefix: u64, shift: u32) -> Vec<f64> {
    data.par_chunks(GRAIN)
        .flat_map_iter(|c| {
            c.iter()
                .filter_map(move |x| vals.map(x.to_f64()))
                .filter(move |&v| matches(key(v), prefix, shift))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_values() {
        let v = [
            -f64::INFINITY,
            -3.5,
            -1e-300,
            -0.0,
            0.0,
            1e-300,
            2.0,
            7.5e10,
        ];
        for w in v.windows(2) {
            assert!(key(w[0]) < key(w[1]), "{} {}", w[0], w[1]);
        }
        for &x in &v {
            assert_eq!(value(key(x)).to_bits(), x.to_bits());
        }
    }

    #[test]
    fn counts_and_values_follow_the_prefix() {
        let data: Vec<f32> = vec![1.0, -2.0, f32::NAN, 3.0, 1.0, f32::INFINITY, -0.5];
        let h = key_counts(&data, Values::FINITE, 0, 64, 16);
        assert_eq!(h.iter().sum::<u64>(), 5);
        let k1 = key(1.0);
        let top = k1 >> 48;
        assert_eq!(h[top as usize], 2); // 1.0 twice; 3.0 has another top
        let vals = key_values(&data, Values::FINITE, top, 48);
        assert_eq!(vals, vec![1.0, 1.0]);
        // |x - 1|: 0, 3, 2, 0, 1.5
        let abs = Values::abs_about(1.0);
        let h = key_counts(&data, abs, 0, 64, 8);
        assert_eq!(h.iter().sum::<u64>(), 5);
        assert_eq!(h[(key(0.0) >> 56) as usize], 2);
        let all = key_values(&data, abs, 0, 64);
        assert_eq!(all, vec![0.0, 3.0, 2.0, 0.0, 1.5]);
    }
}
