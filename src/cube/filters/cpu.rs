//! CPU engine for the 1-D filters. Lines along the last axis are copied once into an extended
//! f64 buffer and filtered tap by tap (vectorisable axpy); along other axes a block of
//! neighbouring columns is filtered together, reading input rows in place. Boxcars run as a
//! sliding sum. All accumulation is in f64, rounded once to the output type.

use rayon::prelude::*;

use super::{extend_index, AxisView, Filter1d, Pass};
use crate::backend::threads::Disjoint;
use crate::real::Real;

/// Columns filtered together along a non-last axis.
const BLOCK: usize = 256;

/// Apply one pass on the current rayon pool.
pub fn apply<T: Real>(input: &[T], view: AxisView, pass: &Pass, out: &mut [T]) {
    let stop = crate::backend::cancel::current();
    let stop = &stop;
    if view.inner == 1 {
        out.par_chunks_mut(view.n)
            .zip(input.par_chunks(view.n))
            .for_each_init(
                || (Vec::new(), Vec::new()),
                |(ext, acc), (o, x)| {
                    if !stop.is_set() {
                        line(x, pass, ext, acc, o)
                    }
                },
            );
    } else {
        let blocks = view.inner.div_ceil(BLOCK);
        let ptr = Disjoint(out.as_mut_ptr());
        (0..view.outer * blocks).into_par_iter().for_each_init(
            || vec![0f64; BLOCK],
            |acc, t| {
                if stop.is_set() {
                    return;
                }
                let (o, b) = (t / blocks, t % blocks);
                let k0 = b * BLOCK;
                let width = BLOCK.min(view.inner - k0);
                columns(input, view, pass, o, k0, &mut acc[..width], ptr, stop);
            },
        );
    }
}

/// Filter one contiguous line `x` into `o`.
fn line<T: Real>(x: &[T], pass: &Pass, ext: &mut Vec<f64>, acc: &mut Vec<f64>, o: &mut [T]) {
    let f = &pass.filter;
    let n = x.len() as isize;
    let (lo, hi) = f.span();
    // ext[p - lo] holds the extended input at position p, for p in lo .. n-1+hi.
    ext.clear();
    ext.extend(
        (lo..n + hi).map(|p| match extend_index(p, x.len(), pass.mode) {
            Some(i) => x[i].to_f64(),
            None => pass.cval,
        }),
    );
    if f.boxcar {
        let size = f.taps();
        let mut sum: f64 = ext[..size].iter().sum();
        o[0] = T::from_f64(sum * f.scale);
        for i in 1..o.len() {
            sum += ext[i + size - 1] - ext[i - 1];
            if !sum.is_finite() {
                // Keep NaN/inf local to the windows that hold them (scipy's running sum
                // would carry a NaN to the end of the line).
                sum = ext[i..i + size].iter().sum();
            }
            o[i] = T::from_f64(sum * f.scale);
        }
        return;
    }
    acc.clear();
    acc.resize(o.len(), 0.0);
    for (j, &w) in f.weights.iter().enumerate() {
        let src = &ext[j * f.step..j * f.step + o.len()];
        acc.iter_mut().zip(src).for_each(|(a, &v)| *a += w * v);
    }
    o.iter_mut()
        .zip(acc.iter())
        .for_each(|(o, &a)| *o = T::from_f64(a * f.scale));
}

/// Filter columns `k0 .. k0+acc.len()` of outer slab `o` along the middle axis.
#[allow(clippy::too_many_arguments)]
fn columns<T: Real>(
    input: &[T],
    view: AxisView,
    pass: &Pass,
    o: usize,
    k0: usize,
    acc: &mut [f64],
    out: Disjoint<T>,
    stop: &crate::backend::cancel::Token,
) {
    let f: &Filter1d = &pass.filter;
    let width = acc.len();
    let slab = o * view.n * view.inner;
    let row = |p: isize| -> Option<&[T]> {
        extend_index(p, view.n, pass.mode).map(|i| {
            let start = slab + i * view.inner + k0;
            &input[start..start + width]
        })
    };
    let store = |i: usize, acc: &[f64]| {
        let start = slab + i * view.inner + k0;
        for (c, &a) in acc.iter().enumerate() {
            // SAFETY: (o, i, k0 + c) belongs to this task only and is inside `out`.
            unsafe { *out.0.add(start + c) = T::from_f64(a * f.scale) };
        }
    };
    let add = |acc: &mut [f64], p: isize, w: f64| match row(p) {
        Some(r) => acc
            .iter_mut()
            .zip(r)
            .for_each(|(a, &v)| *a += w * v.to_f64()),
        None => acc.iter_mut().for_each(|a| *a += w * pass.cval),
    };
    if f.boxcar {
        let size = f.taps() as isize;
        acc.iter_mut().for_each(|a| *a = 0.0);
        for p in f.offset..f.offset + size {
            add(acc, p, 1.0);
        }
        store(0, acc);
        for i in 1..view.n as isize {
            add(acc, i + f.offset + size - 1, 1.0);
            add(acc, i + f.offset - 1, -1.0);
            for c in 0..width {
                if !acc[c].is_finite() {
                    // Recount this column's window so a NaN/inf stays local to it.
                    acc[c] = (i + f.offset..i + f.offset + size)
                        .map(|p| row(p).map_or(pass.cval, |r| r[c].to_f64()))
                        .sum();
                }
            }
            store(i as usize, acc);
        }
        return;
    }
    for i in 0..view.n {
        if stop.is_set() {
            return;
        }
        acc.iter_mut().for_each(|a| *a = 0.0);
        for (j, &w) in f.weights.iter().enumerate() {
            add(acc, i as isize + f.offset + (j * f.step) as isize, w);
        }
        store(i, acc);
    }
}
