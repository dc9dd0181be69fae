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

/// The value a spatial pass reads: NaN as 0 where `ZERO_NAN` (SoFiA-2 blanks NaN on input).
#[inline(always)]
fn read<T: Real, const ZERO_NAN: bool>(v: T) -> T {
    if ZERO_NAN && v.is_nan() {
        T::default()
    } else {
        v
    }
}

/// The first output of a running mean that starts at row `top` (the line's end), for every
/// column at once, in T: m = (row top+r + row top+r−1 + … + row top−r) · (1/w), summed in that
/// order from 0, rows outside the line read as 0. `boxcar_line`'s first step, vectorised.
#[inline(always)]
pub fn start<'a, T: Real, const ZERO_NAN: bool>(
    m: &mut [T],
    row: impl Fn(isize) -> Option<&'a [T]>,
    top: isize,
    r: usize,
    inv: T,
) {
    m.fill(T::default());
    for p in (top - r as isize..=top + r as isize).rev() {
        match row(p) {
            Some(v) => m
                .iter_mut()
                .zip(v)
                .for_each(|(a, &x)| *a = *a + read::<T, ZERO_NAN>(x)),
            None => m.iter_mut().for_each(|a| *a = *a + T::default()),
        }
    }
    m.iter_mut().for_each(|a| *a = *a * inv);
}

/// One step of the running mean down a line, every column at once, in T:
/// m = m + (lo − hi) · (1/w), an absent row read as 0. `boxcar_line`'s loop body, vectorised.
#[inline(always)]
pub fn step<T: Real, const ZERO_NAN: bool>(
    m: &mut [T],
    lo: Option<&[T]>,
    hi: Option<&[T]>,
    inv: T,
) {
    let zero = T::default();
    let r = read::<T, ZERO_NAN>;
    match (lo, hi) {
        (Some(lo), Some(hi)) => m
            .iter_mut()
            .zip(lo.iter().zip(hi))
            .for_each(|(a, (&l, &h))| *a = *a + (r(l) - r(h)) * inv),
        (Some(lo), None) => m
            .iter_mut()
            .zip(lo)
            .for_each(|(a, &l)| *a = *a + (r(l) - zero) * inv),
        (None, Some(hi)) => m
            .iter_mut()
            .zip(hi)
            .for_each(|(a, &h)| *a = *a + (zero - r(h)) * inv),
        (None, None) => m.iter_mut().for_each(|a| *a = *a + zero * inv),
    }
}

/// `boxcar_line` along axis 0 of a (rows, cols) array, all columns at once, in T (the same
/// operations per element: f32 operations equal the f64 ones rounded to f32): `src` → `dst`;
/// `m` is scratch.
pub fn boxcar_axis0<T: Real>(
    src: &[T],
    dst: &mut [T],
    rows: usize,
    cols: usize,
    r: usize,
    m: &mut Vec<T>,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    let inv = T::from_f64(inverse_width::<T>(r));
    let row = |p: isize| -> Option<&[T]> {
        (p >= 0 && (p as usize) < rows).then(|| &src[p as usize * cols..(p as usize + 1) * cols])
    };
    m.clear();
    m.resize(cols, T::default());
    start::<T, true>(m, row, rows as isize - 1, r, inv);
    dst[(rows - 1) * cols..].copy_from_slice(m);
    for i in (0..rows - 1).rev() {
        let ii = i as isize;
        step::<T, true>(m, row(ii - r as isize), row(ii + r as isize + 1), inv);
        dst[i * cols..(i + 1) * cols].copy_from_slice(m);
    }
}

/// `dst` (cols, rows) = transpose of `src` (rows, cols).
pub fn transpose<T: Copy>(src: &[T], dst: &mut [T], rows: usize, cols: usize) {
    const B: usize = 32;
    for r0 in (0..rows).step_by(B) {
        for c0 in (0..cols).step_by(B) {
            for r in r0..(r0 + B).min(rows) {
                for c in c0..(c0 + B).min(cols) {
                    dst[c * rows + r] = src[r * cols + c];
                }
            }
        }
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
    fn axis0_equals_lines() {
        let (rows, cols) = (13, 9);
        // f32 arithmetic (with NaN read as 0) against the f64 reference rounded at each step
        let mut x: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919) % 1000) as f32 / 37.0 - 13.0)
            .collect();
        x[4 * cols + 3] = f32::NAN;
        for r in [0usize, 1, 4, 20] {
            let mut got = vec![0.0f32; rows * cols];
            boxcar_axis0::<f32>(&x, &mut got, rows, cols, r, &mut Vec::new());
            for c in 0..cols {
                let mut line: Vec<f64> = (0..rows).map(|i| x[i * cols + c] as f64).collect();
                boxcar_line::<f32>(&mut line, r, &mut Vec::new());
                for i in 0..rows {
                    assert_eq!(got[i * cols + c] as f64, line[i], "r={r}");
                }
            }
        }
        let mut t = vec![0.0; rows * cols];
        transpose(&x, &mut t, rows, cols);
        assert_eq!(t[2 * rows + 5], x[5 * cols + 2]);
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
