//! SoFiA-2's boxcar arithmetic (`Plan::exact`): a running mean in the element type, updated
//! backwards from the end of the line, with zero padding. Values are carried as f64 holding
//! element-type values; every operation is rounded to the element type (for f32 this equals
//! the f32 operation exactly).

use crate::real::Real;

#[inline(always)]
fn rnd<T: Real>(v: f64) -> f64 {
    T::from_f64(v).to_f64()
}

/// 1/w rounded to the element type.
#[inline]
pub fn inverse_width<T: Real>(r: usize) -> f64 {
    rnd::<T>(1.0 / (2 * r + 1) as f64)
}

/// One boxcar of radius `r` over `line` in place: with x padded by r zeros on both sides
/// (NaN read as 0), m[n−1] = (x[n−1+r] + x[n−2+r] + … + x[n−1−r]) · (1/w), summed in that
/// order starting from 0, then m[i] = m[i+1] + (x[i−r] − x[i+r+1]) · (1/w) for i = n−2 … 0.
pub fn boxcar_line<T: Real>(line: &mut [f64], r: usize, pad: &mut Vec<f64>) {
    let n = line.len();
    if n == 0 {
        return;
    }
    let w = 2 * r + 1;
    let inv = inverse_width::<T>(r);
    pad.clear();
    pad.resize(n + 2 * r, 0.0);
    for (p, &v) in pad[r..r + n].iter_mut().zip(line.iter()) {
        *p = if v.is_nan() { 0.0 } else { v };
    }
    let mut acc = 0.0;
    for j in (0..w).rev() {
        acc = rnd::<T>(acc + pad[n - 1 + j]);
    }
    line[n - 1] = rnd::<T>(acc * inv);
    for i in (0..n - 1).rev() {
        line[i] = rnd::<T>(line[i + 1] + rnd::<T>(rnd::<T>(pad[i] - pad[i + w]) * inv));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_mean_in_f64() {
        let x: Vec<f64> = (0..23).map(|i| ((i * 37 % 11) as f64) - 4.0).collect();
        for r in [0usize, 1, 3, 12, 30] {
            let mut got = x.clone();
            boxcar_line::<f64>(&mut got, r, &mut Vec::new());
            for i in 0..x.len() {
                let lo = i.saturating_sub(r);
                let hi = (i + r + 1).min(x.len());
                let want: f64 = x[lo..hi].iter().sum::<f64>() / (2 * r + 1) as f64;
                assert!((got[i] - want).abs() < 1e-12, "r={r} i={i}");
            }
        }
    }

    #[test]
    fn single_rounds_each_step() {
        // a running mean in f32 differs from the f64 mean rounded once somewhere
        let x: Vec<f64> = (0..200)
            .map(|i| (((i * 7919) % 1000) as f32 / 37.0) as f64)
            .collect();
        let mut a = x.clone();
        boxcar_line::<f32>(&mut a, 2, &mut Vec::new());
        assert!(a.iter().all(|v| *v == (*v as f32) as f64));
        let mut b = x.clone();
        boxcar_line::<f64>(&mut b, 2, &mut Vec::new());
        assert!(a.iter().zip(&b).any(|(p, q)| (*q as f32) as f64 != *p));
        assert!(a.iter().zip(&b).all(|(p, q)| (p - q).abs() < 1e-4));
    }
}
