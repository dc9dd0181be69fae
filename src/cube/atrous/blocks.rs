//! The element-wise steps of one à trous scale on a block, for the distributed loop
//! (python/skyconv/_dask/atrous.py): one parallel pass each instead of a chain of NumPy
//! operations. The arithmetic is the engines' (`cpu.rs`): a sum or difference in f64 rounded to
//! the data type, the threshold compared in f64; blank voxels are the non-finite ones of the
//! input `x`.

use rayon::prelude::*;

use crate::real::Real;

const GRAIN: usize = 1 << 14;

#[inline(always)]
fn sub<T: Real>(a: T, b: T) -> T {
    T::from_f64(a.to_f64() - b.to_f64())
}

/// `w = c − smooth` and the next smooth array `c − w` where `x` is finite; at blanks w is NaN
/// and the smooth array keeps `c`.
pub fn split<T: Real>(c: &[T], smooth: &[T], x: &[T], w: &mut [T], next: &mut [T]) {
    w.par_chunks_mut(GRAIN)
        .zip(next.par_chunks_mut(GRAIN))
        .zip(c.par_chunks(GRAIN).zip(smooth.par_chunks(GRAIN)))
        .zip(x.par_chunks(GRAIN))
        .for_each(|(((w, n), (c, s)), x)| {
            for ((((w, n), &c), &s), &x) in w.iter_mut().zip(n).zip(c).zip(s).zip(x) {
                if x.to_f64().is_finite() {
                    *w = sub(c, s);
                    *n = sub(c, *w);
                } else {
                    *w = T::from_f64(f64::NAN);
                    *n = c;
                }
            }
        });
}

/// `out + w` where |w| > `thr` (in f64; NaN never is), else `out`, into `dst`.
pub fn add_above<T: Real>(out: &[T], w: &[T], thr: f64, dst: &mut [T]) {
    dst.par_chunks_mut(GRAIN)
        .zip(out.par_chunks(GRAIN).zip(w.par_chunks(GRAIN)))
        .for_each(|(d, (o, w))| {
            for ((d, &o), &w) in d.iter_mut().zip(o).zip(w) {
                *d = if w.to_f64().abs() > thr {
                    T::from_f64(o.to_f64() + w.to_f64())
                } else {
                    o
                };
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_add_follow_the_blanks() {
        let c = [1.5f32, 2.0, 3.0];
        let s = [0.5f32, 1.0, 9.0];
        let x = [0.0f32, f32::NAN, 1.0];
        let (mut w, mut n) = ([0f32; 3], [0f32; 3]);
        split(&c, &s, &x, &mut w, &mut n);
        assert_eq!((w[0], n[0]), (1.0, 0.5));
        assert!(w[1].is_nan() && n[1] == 2.0);
        assert_eq!((w[2], n[2]), (-6.0, 9.0));
        let mut d = [0f32; 3];
        add_above(&[1.0, 1.0, 1.0], &w, 0.75, &mut d);
        assert_eq!(d, [2.0, 1.0, -5.0]);
    }
}
