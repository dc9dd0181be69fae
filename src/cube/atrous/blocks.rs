//! One à trous scale of one block of a one-unit reconstruction, as one binding call: the
//! distributed loop (python/skyconv/_dask/atrous.py) makes one such call per block and scale,
//! and one [`finish`] per block and iteration.
//!
//! A scale is two steps: [`smooth`] takes the block's smooth array `c` with a halo (`c_ext`,
//! the block at `lo` inside it) and smooths it with the scale's passes on the chosen engine
//! ([`apply_chain`]: the CPU's passes, or on the GPU one upload, the passes back to back on
//! the device, one download); [`split`] then makes, in one parallel host pass over the block,
//! the coefficients `w = c − smooth` and the next smooth array `c − w` (NaN and `c` at the
//! blanks of `x`), the previous scale's thresholded add `out + w_prev where |w_prev| > thr`
//! and the first selection pass over the new `w` (counts of its order-preserving keys by their
//! top 16 bits, `stats::keys`) with Σw. [`finish`] adds the last kept scale and the smooth
//! array into the output and makes the residual's first pass.
//!
//! The arithmetic is the engines' (`cpu.rs`): a sum or difference in f64 rounded to the data
//! type, the threshold compared in f64; blank voxels are the non-finite ones of `x`.

use rayon::prelude::*;

use crate::backend::alloc;
use crate::backend::Device;
use crate::cube::filters::{apply_chain, Pass};
use crate::cube::stats::keys::key;
use crate::error::{Error, Result};
use crate::real::Real;

/// Key bits counted by the first selection pass (python/skyconv/_dask/select.py's `_BITS`).
pub const KEY_BITS: u32 = 16;
const BINS: usize = 1 << KEY_BITS;
const GRAIN: usize = 1 << 15;

#[inline(always)]
fn sub<T: Real>(a: T, b: T) -> T {
    T::from_f64(a.to_f64() - b.to_f64())
}

#[inline(always)]
fn plus<T: Real>(a: T, b: T) -> T {
    T::from_f64(a.to_f64() + b.to_f64())
}

/// Shapes padded to three axes (leading 1s).
fn pad3(v: &[usize], fill: usize) -> Result<[usize; 3]> {
    if v.is_empty() || v.len() > 3 {
        return Err(Error::shape(format!(
            "a block must have 1 to 3 axes, got {}",
            v.len()
        )));
    }
    let mut o = [fill; 3];
    o[3 - v.len()..].copy_from_slice(v);
    Ok(o)
}

/// The first selection pass over some values and their sum: counts of the finite values by
/// their keys' top [`KEY_BITS`] bits (empty when not asked for) and Σ of the finite values
/// (f64).
#[derive(Debug, Clone, Default)]
pub struct First {
    pub counts: Vec<u64>,
    pub sum: f64,
}

impl First {
    fn new(counts: bool) -> Self {
        First {
            counts: if counts { vec![0; BINS] } else { Vec::new() },
            sum: 0.0,
        }
    }

    #[inline(always)]
    fn take(&mut self, v: f64) {
        if v.is_finite() {
            self.sum += v;
            if !self.counts.is_empty() {
                self.counts[(key(v) >> (64 - KEY_BITS)) as usize] += 1;
            }
        }
    }

    fn merge(mut self, o: First) -> First {
        self.sum += o.sum;
        self.counts
            .iter_mut()
            .zip(&o.counts)
            .for_each(|(a, b)| *a += b);
        self
    }
}

/// The inputs of one scale of one block.
pub struct ScaleIn<'a, T> {
    /// The smooth array over the block and its halo, C order, of shape `ext`.
    pub c_ext: &'a [T],
    pub ext: &'a [usize],
    /// The block's first index inside `c_ext` along each axis.
    pub lo: &'a [usize],
    /// The block's shape (same number of axes as `ext`).
    pub shape: &'a [usize],
    /// The input over the block (its non-finite voxels are the blanks).
    pub x: &'a [T],
    /// The output over the block (None: zeros, the first iteration).
    pub out: Option<&'a [T]>,
    /// The previous kept scale's coefficients over the block and its threshold, to add.
    pub add: Option<(&'a [T], f64)>,
    /// Count the new coefficients' keys (the robust statistics' first pass).
    pub counts: bool,
}

/// The outputs of one scale of one block (each the block's size).
pub struct ScaleOut<'a, T> {
    /// The coefficients (None: not kept by the caller).
    pub w: Option<&'a mut [T]>,
    /// The next smooth array.
    pub c: &'a mut [T],
    /// The output with the previous scale added (written only when `ScaleIn::add` is given).
    pub out: &'a mut [T],
}

/// The block's and its halo's shapes padded to three axes, and the block's offset in the
/// halo: `(ext, shape, lo)`, checked against each other and against the arrays' sizes.
fn geometry<T>(inp: &ScaleIn<'_, T>) -> Result<([usize; 3], [usize; 3], [usize; 3])> {
    let ext = pad3(inp.ext, 1)?;
    let shape = pad3(inp.shape, 1)?;
    let lo = pad3(inp.lo, 0)?;
    if inp.ext.len() != inp.shape.len() || inp.lo.len() != inp.shape.len() {
        return Err(Error::shape(
            "ext, lo and the block's shape must have one length",
        ));
    }
    if (0..3).any(|a| lo[a] + shape[a] > ext[a]) {
        return Err(Error::shape(format!(
            "a block of shape {:?} at {:?} does not fit inside its halo's shape {:?}",
            inp.shape, inp.lo, inp.ext
        )));
    }
    if inp.c_ext.len() != ext.iter().product::<usize>() {
        return Err(Error::shape(
            "the smooth array's size does not match its halo's shape",
        ));
    }
    Ok((ext, shape, lo))
}

/// The first half of one scale of one block: the smooth array with its halo smoothed by the
/// scale's passes on `device` (the only part that uses a GPU: the binding admits the call to
/// its GPU for this half alone, so the host pass of [`split`] does not hold the GPU while
/// the worker's other tasks wait for it).
///
/// # Errors
/// `Error::Shape` when the block does not lie inside `ext`; the filter's errors;
/// `HostMemoryError` when the smooth array cannot be had.
pub fn smooth<T: Real>(device: Device, passes: &[Pass], inp: &ScaleIn<'_, T>) -> Result<Vec<T>> {
    geometry(inp)?;
    let mut smooth = alloc::try_vec(inp.c_ext.len(), T::default(), "a block's smooth array")?;
    apply_chain(device, inp.c_ext, inp.ext, passes, &mut smooth)?;
    Ok(smooth)
}

/// The second half of one scale of one block (see the module documentation), on the host,
/// from [`smooth`]'s result: returns the first pass over the new coefficients (their counts
/// when `inp.counts`, and their sum).
///
/// # Errors
/// `Error::Shape` when the sizes do not match the shapes or the block does not lie inside
/// `ext`; `HostMemoryError` when the coefficients cannot be had.
pub fn split<T: Real>(inp: &ScaleIn<'_, T>, smooth: &[T], outp: ScaleOut<'_, T>) -> Result<First> {
    let (ext, shape, lo) = geometry(inp)?;
    let n: usize = shape.iter().product();
    let mut sizes = vec![inp.x.len(), outp.c.len()];
    sizes.extend(inp.out.map(|o| o.len()));
    sizes.extend(inp.add.map(|(w, _)| w.len()));
    if inp.add.is_some() {
        sizes.push(outp.out.len());
    }
    sizes.extend(outp.w.as_ref().map(|w| w.len()));
    if smooth.len() != inp.c_ext.len() || sizes.iter().any(|&s| s != n) {
        return Err(Error::shape(
            "the arrays' sizes do not match the block's and its halo's shapes",
        ));
    }
    let row = shape[2];
    if n == 0 {
        return Ok(First::new(inp.counts));
    }
    let rows_per = (GRAIN / row).max(1);
    let span = rows_per * row;
    let at = |r: usize| ((r / shape[1] + lo[0]) * ext[1] + r % shape[1] + lo[1]) * ext[2] + lo[2];
    let mut w_store;
    let w: &mut [T] = match outp.w {
        Some(w) => w,
        None => {
            w_store = alloc::try_vec(n, T::default(), "a block's coefficients")?;
            &mut w_store
        }
    };
    let first = w
        .par_chunks_mut(span)
        .zip(outp.c.par_chunks_mut(span))
        .enumerate()
        .fold(
            || First::new(inp.counts),
            |mut f, (k, (w, cn))| {
                let r0 = k * rows_per;
                for (j, (w, cn)) in w.chunks_mut(row).zip(cn.chunks_mut(row)).enumerate() {
                    let e = at(r0 + j);
                    let b = (r0 + j) * row;
                    let (c, s) = (&inp.c_ext[e..e + row], &smooth[e..e + row]);
                    for i in 0..row {
                        if inp.x[b + i].to_f64().is_finite() {
                            w[i] = sub(c[i], s[i]);
                            cn[i] = sub(c[i], w[i]);
                            f.take(w[i].to_f64());
                        } else {
                            w[i] = T::from_f64(f64::NAN);
                            cn[i] = c[i];
                        }
                    }
                }
                f
            },
        )
        .reduce(|| First::new(inp.counts), First::merge);
    if let Some((wp, thr)) = inp.add {
        // The previous scale's thresholded add: its own arrays, so its own parallel loop.
        outp.out
            .par_chunks_mut(GRAIN)
            .enumerate()
            .for_each(|(k, d)| {
                let b = k * GRAIN;
                for (i, d) in d.iter_mut().enumerate() {
                    let o = inp.out.map_or(T::default(), |o| o[b + i]);
                    *d = above(o, wp[b + i], thr);
                }
            });
    }
    Ok(first)
}

/// `o + w` when |w| > thr (in f64; NaN never is), else `o`.
#[inline(always)]
fn above<T: Real>(o: T, w: T, thr: f64) -> T {
    if w.to_f64().abs() > thr {
        plus(o, w)
    } else {
        o
    }
}

/// The end of an iteration on one block, into `dst`: `out (+ w where |w| > thr) + c` where `x`
/// is finite, `out (+ w where |w| > thr)` at its blanks (the caller writes the input there at
/// the very end); returns the first pass over the residual `x − dst` at the finite voxels of
/// `x` (counts when `counts`, and Σ).
///
/// # Errors
/// `Error::Shape` when the sizes differ.
pub fn finish<T: Real>(
    x: &[T],
    out: Option<&[T]>,
    add: Option<(&[T], f64)>,
    c: &[T],
    counts: bool,
    dst: &mut [T],
) -> Result<First> {
    let n = x.len();
    let bad = out.is_some_and(|o| o.len() != n)
        || add.is_some_and(|(w, _)| w.len() != n)
        || c.len() != n
        || dst.len() != n;
    if bad {
        return Err(Error::shape(
            "x, out, w, c and the output must have one size",
        ));
    }
    Ok(dst
        .par_chunks_mut(GRAIN)
        .enumerate()
        .fold(
            || First::new(counts),
            |mut f, (k, d)| {
                let b = k * GRAIN;
                for (i, d) in d.iter_mut().enumerate() {
                    let j = b + i;
                    let mut o = out.map_or(T::default(), |o| o[j]);
                    if let Some((w, thr)) = add {
                        o = above(o, w[j], thr);
                    }
                    if x[j].to_f64().is_finite() {
                        o = plus(o, c[j]);
                        f.take(sub(x[j], o).to_f64());
                    }
                    *d = o;
                }
                f
            },
        )
        .reduce(|| First::new(counts), First::merge))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cube::filters::{Filter1d, Mode};
    use crate::cube::stats::keys::key_counts;
    use crate::cube::stats::Values;

    fn passes(step: usize, axes: &[usize]) -> Vec<Pass> {
        axes.iter()
            .map(|&axis| Pass {
                filter: Filter1d::dilated(&[0.25, 0.5, 0.25], step).unwrap(),
                axis,
                mode: Mode::Mirror,
                cval: 0.0,
            })
            .collect()
    }

    /// The block call on a slab with its halo equals the whole array's smoothing, split, add
    /// and key counts restricted to the slab.
    #[test]
    fn a_slab_with_its_halo_equals_the_whole() {
        let shape = [9usize, 5, 4];
        let n: usize = shape.iter().product();
        let c: Vec<f64> = (0..n).map(|i| ((i * 37) % 23) as f64 - 11.0).collect();
        let mut x = c.clone();
        x[47] = f64::NAN;
        let out: Vec<f64> = (0..n).map(|i| (i % 3) as f64).collect();
        let wp: Vec<f64> = (0..n).map(|i| ((i * 7) % 5) as f64 - 2.0).collect();
        let p = passes(2, &[2, 1, 0]);
        let mut sm = vec![0.0; n];
        apply_chain(Device::Cpu, &c, &shape, &p, &mut sm).unwrap();
        // The block: planes 3..5, halo 2 (reach 1 × step 2) each side → planes 1..7.
        let plane = 20;
        let (b0, b1, h0, h1) = (3, 5, 1, 7);
        let blk = b0 * plane..b1 * plane;
        let (mut w, mut cn, mut od) = (vec![0.0; 40], vec![0.0; 40], vec![0.0; 40]);
        let inp = ScaleIn {
            c_ext: &c[h0 * plane..h1 * plane],
            ext: &[h1 - h0, 5, 4],
            lo: &[b0 - h0, 0, 0],
            shape: &[b1 - b0, 5, 4],
            x: &x[blk.clone()],
            out: Some(&out[blk.clone()]),
            add: Some((&wp[blk.clone()], 1.5)),
            counts: true,
        };
        let smoothed = smooth(Device::Cpu, &p, &inp).unwrap();
        let outp = ScaleOut {
            w: Some(&mut w),
            c: &mut cn,
            out: &mut od,
        };
        let f = split(&inp, &smoothed, outp).unwrap();
        for (k, i) in blk.clone().enumerate() {
            if x[i].is_finite() {
                assert_eq!(w[k], c[i] - sm[i], "voxel {i}");
                assert_eq!(cn[k], c[i] - w[k]);
            } else {
                assert!(w[k].is_nan() && cn[k] == c[i]);
            }
            let want = if wp[i].abs() > 1.5 {
                out[i] + wp[i]
            } else {
                out[i]
            };
            assert_eq!(od[k], want);
        }
        assert_eq!(f.counts, key_counts(&w, Values::FINITE, 0, 64, 16));
        let s: f64 = w.iter().filter(|v| v.is_finite()).sum();
        assert!((f.sum - s).abs() <= 1e-12 * s.abs().max(1.0));
    }

    #[test]
    fn finish_adds_above_and_the_smooth_array() {
        let x = [1.0f32, f32::NAN, 3.0];
        let out = [0.5f32, 2.0, 1.0];
        let w = [2.0f32, 5.0, 0.1];
        let c = [0.25f32, 9.0, 1.0];
        let mut d = [0f32; 3];
        let f = finish(&x, Some(&out), Some((&w, 1.0)), &c, true, &mut d).unwrap();
        assert_eq!(d, [2.75, 7.0, 2.0]);
        assert_eq!(f.counts.iter().sum::<u64>(), 2);
        assert_eq!(f.sum, (1.0 - 2.75) + (3.0 - 2.0));
        let f = finish(&x, None, None, &c, false, &mut d).unwrap();
        assert_eq!(d, [0.25, 0.0, 1.0]);
        assert!(f.counts.is_empty());
    }
}
