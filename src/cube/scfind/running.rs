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

/// The running mean's step for one element, in T: m + (lo − hi) · (1/w) (absent rows as 0).
#[inline(always)]
fn next_mean<T: Real>(m: T, lo: T, hi: T, inv: T) -> T {
    m + (lo - hi) * inv
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
    let pairs = m.iter_mut().map(|a| {
        let p = *a;
        (a, p)
    });
    advance::<T, ZERO_NAN>(pairs, lo, hi, inv);
}

/// `step` from the previous mean `prev` into `m` (a chain keeps each row of means where the
/// next pass reads it, so the step writes there instead of copying).
#[inline(always)]
fn step_from<T: Real, const ZERO_NAN: bool>(
    m: &mut [T],
    prev: &[T],
    lo: Option<&[T]>,
    hi: Option<&[T]>,
    inv: T,
) {
    advance::<T, ZERO_NAN>(m.iter_mut().zip(prev.iter().copied()), lo, hi, inv);
}

/// The step itself, written once for `step` and `step_from`: each (output, previous mean)
/// pair gets `next_mean` of its column's `lo` and `hi` (an absent row as 0).
#[inline(always)]
fn advance<'a, T: Real + 'a, const ZERO_NAN: bool>(
    pairs: impl Iterator<Item = (&'a mut T, T)>,
    lo: Option<&[T]>,
    hi: Option<&[T]>,
    inv: T,
) {
    let zero = T::default();
    let r = read::<T, ZERO_NAN>;
    match (lo, hi) {
        (Some(lo), Some(hi)) => pairs
            .zip(lo.iter().zip(hi))
            .for_each(|((a, p), (&l, &h))| *a = next_mean(p, r(l), r(h), inv)),
        (Some(lo), None) => pairs
            .zip(lo)
            .for_each(|((a, p), &l)| *a = next_mean(p, r(l), zero, inv)),
        (None, Some(hi)) => pairs
            .zip(hi)
            .for_each(|((a, p), &h)| *a = next_mean(p, zero, r(h), inv)),
        (None, None) => pairs.for_each(|(a, p)| *a = next_mean(p, zero, zero, inv)),
    }
}

/// `boxcar_line` along axis 0 of a (rows, cols) array, all columns at once, in T (the same
/// operations per element: f32 operations equal the f64 ones rounded to f32): `src` → `dst`.
pub fn boxcar_axis0<T: Real>(src: &[T], dst: &mut [T], rows: usize, cols: usize, r: usize) {
    let mut chain = Chain::new(&[r]);
    chain.reset(rows, cols);
    for i in (0..rows).rev() {
        chain.push(i, &src[i * cols..(i + 1) * cols], dst);
    }
}

/// One running mean of a `Chain`: its input's last 2r+2 rows in a ring (of a power of two
/// rows, so a row's slot is a mask away). Its means are written where they are read next:
/// into the next pass's ring, or the chain's output.
struct Pass<T> {
    r: usize,
    inv: T,
    ring: Vec<T>,
    /// Slots in the ring − 1.
    wrap: usize,
    /// Lowest input row held (`rows` when none yet).
    low: isize,
    /// Next output row (−1 when done).
    next: isize,
}

impl<T: Real> Pass<T> {
    /// Whether row `next` can be made: its lowest input row max(next − r, 0) has arrived.
    #[inline(always)]
    fn ready(&self) -> bool {
        self.next >= 0 && self.low <= (self.next - self.r as isize).max(0)
    }

    /// Make output row `next` as `boxcar_axis0` makes it, into `out`, whose row j is at
    /// `slot(j)` (row next + 1, the previous mean, is read there); returns its index.
    #[inline(always)]
    fn make(
        &mut self,
        rows: usize,
        cols: usize,
        out: &mut [T],
        slot: impl Fn(usize) -> usize,
    ) -> usize {
        let (r, wrap) = (self.r, self.wrap);
        let ring = &self.ring;
        let row = |p: isize| -> Option<&[T]> {
            (p >= 0 && (p as usize) < rows).then(|| {
                let slot = p as usize & wrap;
                &ring[slot * cols..(slot + 1) * cols]
            })
        };
        let j = self.next;
        let at = slot(j as usize) * cols;
        if j == rows as isize - 1 {
            start::<T, true>(&mut out[at..at + cols], row, j, r, self.inv);
        } else {
            let was = slot(j as usize + 1) * cols;
            // the two rows are distinct slots: split around the later one
            let (m, prev) = if at < was {
                let (a, b) = out.split_at_mut(was);
                (&mut a[at..at + cols], &b[..cols])
            } else {
                let (a, b) = out.split_at_mut(at);
                (&mut b[..cols], &a[was..was + cols])
            };
            let (lo, hi) = (row(j - r as isize), row(j + r as isize + 1));
            step_from::<T, true>(m, prev, lo, hi, self.inv);
        }
        self.next -= 1;
        j as usize
    }
}

/// Several boxcars along axis 0 of a (rows, cols) array in one sweep from the last row up:
/// rows are pushed in descending order, and pass k + 1 makes each row as soon as pass k has
/// made the rows it needs, so only 2r + 2 rows of each pass's input are held (in a ring, in
/// cache) instead of whole intermediate arrays. Each pass writes its means straight into the
/// next pass's ring (the last into the output), no row copied. Every element goes through
/// `boxcar_axis0`'s operations in the same order, so the output is the same bit for bit.
pub struct Chain<T> {
    rows: usize,
    cols: usize,
    passes: Vec<Pass<T>>,
}

impl<T: Real> Chain<T> {
    /// A chain of boxcars of radii `radii`, applied in that order.
    pub fn new(radii: &[usize]) -> Self {
        let passes = radii
            .iter()
            .map(|&r| Pass {
                r,
                inv: T::from_f64(inverse_width::<T>(r)),
                ring: Vec::new(),
                wrap: (2 * r + 2).next_power_of_two() - 1,
                low: 0,
                next: -1,
            })
            .collect();
        Chain {
            rows: 0,
            cols: 0,
            passes,
        }
    }

    /// Whether the chain's passes have these radii.
    pub fn has_radii(&self, radii: &[usize]) -> bool {
        self.passes.len() == radii.len() && self.passes.iter().zip(radii).all(|(p, &r)| p.r == r)
    }

    /// Start a new (rows, cols) array.
    pub fn reset(&mut self, rows: usize, cols: usize) {
        (self.rows, self.cols) = (rows, cols);
        for p in &mut self.passes {
            p.ring.resize((p.wrap + 1) * cols, T::default());
            p.low = rows as isize;
            p.next = rows as isize - 1;
        }
    }

    /// Input row `i` (rows come in descending order); each output row made is written to its
    /// row of `out` (rows, cols), in descending order (the last pass reads its previous row
    /// there, so `out` is written only by the chain during a sweep).
    #[inline(always)]
    pub fn push(&mut self, i: usize, row: &[T], out: &mut [T]) {
        let (rows, cols, n) = (self.rows, self.cols, self.passes.len());
        if n == 0 {
            out[i * cols..(i + 1) * cols].copy_from_slice(row);
            return;
        }
        let first = &mut self.passes[0];
        let slot = i & first.wrap;
        first.ring[slot * cols..(slot + 1) * cols].copy_from_slice(row);
        first.low = i as isize;
        // depth first: each row made goes down the chain before its pass makes the next, so
        // no ring is overwritten while a later pass still needs the row
        let mut k = 0;
        loop {
            if self.passes[k].ready() {
                if k + 1 == n {
                    self.passes[k].make(rows, cols, out, |j| j);
                } else {
                    let (done, later) = self.passes.split_at_mut(k + 1);
                    let next = &mut later[0];
                    let wrap = next.wrap;
                    let j = done[k].make(rows, cols, &mut next.ring, |j| j & wrap);
                    next.low = j as isize;
                    k += 1;
                }
            } else if k == 0 {
                return;
            } else {
                k -= 1;
            }
        }
    }
}

/// `dst` (cols, rows) = transpose of `src` (rows, cols). Elements of 4 bytes go 8 × 8 at a
/// time through AVX registers where the CPU has AVX2 (bits moved, not computed).
pub fn transpose<T: Copy>(src: &[T], dst: &mut [T], rows: usize, cols: usize) {
    assert!(src.len() >= rows * cols && dst.len() >= rows * cols);
    #[cfg(target_arch = "x86_64")]
    if std::mem::size_of::<T>() == 4 && crate::backend::cpu_features::avx2() {
        // SAFETY: the CPU has AVX2; T is 4 bytes, copied bit for bit as f32 lanes (no
        // arithmetic); both slices hold rows × cols elements (asserted above).
        unsafe {
            transpose_avx2_32(
                src.as_ptr() as *const f32,
                dst.as_mut_ptr() as *mut f32,
                rows,
                cols,
            )
        };
        return;
    }
    transpose_blocks(src, dst, rows, cols, 0, 0);
}

/// `transpose` of the elements at row ≥ `r0` or column ≥ `c0` (the rest is done).
fn transpose_blocks<T: Copy>(
    src: &[T],
    dst: &mut [T],
    rows: usize,
    cols: usize,
    r0: usize,
    c0: usize,
) {
    const B: usize = 32;
    for rb in (0..rows).step_by(B) {
        for cb in (0..cols).step_by(B) {
            for r in rb..(rb + B).min(rows) {
                for c in cb..(cb + B).min(cols) {
                    if r >= r0 || c >= c0 {
                        dst[c * rows + r] = src[r * cols + c];
                    }
                }
            }
        }
    }
}

/// `transpose` of 4-byte elements: 8 × 8 tiles through registers, the edges by
/// `transpose_blocks`.
///
/// # Safety
/// The CPU has AVX2; `src` and `dst` hold rows × cols elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_avx2_32(src: *const f32, dst: *mut f32, rows: usize, cols: usize) {
    use std::arch::x86_64::*;
    let (r8, c8) = (rows / 8 * 8, cols / 8 * 8);
    for i in (0..r8).step_by(8) {
        for j in (0..c8).step_by(8) {
            macro_rules! ld {
                ($k:expr) => {
                    _mm256_loadu_ps(src.add((i + $k) * cols + j))
                };
            }
            macro_rules! st {
                ($k:expr, $v:expr) => {
                    _mm256_storeu_ps(dst.add((j + $k) * rows + i), $v)
                };
            }
            let (a0, a1, a2, a3) = (ld!(0), ld!(1), ld!(2), ld!(3));
            let (a4, a5, a6, a7) = (ld!(4), ld!(5), ld!(6), ld!(7));
            let (t0, t1) = (_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
            let (t2, t3) = (_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
            let (t4, t5) = (_mm256_unpacklo_ps(a4, a5), _mm256_unpackhi_ps(a4, a5));
            let (t6, t7) = (_mm256_unpacklo_ps(a6, a7), _mm256_unpackhi_ps(a6, a7));
            let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            st!(0, _mm256_permute2f128_ps::<0x20>(u0, u4));
            st!(1, _mm256_permute2f128_ps::<0x20>(u1, u5));
            st!(2, _mm256_permute2f128_ps::<0x20>(u2, u6));
            st!(3, _mm256_permute2f128_ps::<0x20>(u3, u7));
            st!(4, _mm256_permute2f128_ps::<0x31>(u0, u4));
            st!(5, _mm256_permute2f128_ps::<0x31>(u1, u5));
            st!(6, _mm256_permute2f128_ps::<0x31>(u2, u6));
            st!(7, _mm256_permute2f128_ps::<0x31>(u3, u7));
        }
    }
    if r8 < rows || c8 < cols {
        let n = rows * cols;
        transpose_blocks(
            std::slice::from_raw_parts(src, n),
            std::slice::from_raw_parts_mut(dst, n),
            rows,
            cols,
            r8,
            c8,
        );
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
            for (i, g) in got.iter().enumerate() {
                let lo = i.saturating_sub(r);
                let hi = (i + r + 1).min(x.len());
                let want: f64 = x[lo..hi].iter().sum::<f64>() / (2 * r + 1) as f64;
                assert!((g - want).abs() < 1e-12, "r={r} i={i}");
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
            boxcar_axis0::<f32>(&x, &mut got, rows, cols, r);
            for c in 0..cols {
                let mut line: Vec<f64> = (0..rows).map(|i| x[i * cols + c] as f64).collect();
                boxcar_line::<f32>(&mut line, r, &mut Vec::new());
                for i in 0..rows {
                    assert_eq!(got[i * cols + c] as f64, line[i], "r={r}");
                }
            }
        }
        // a chain of passes equals the passes one after the other
        let radii = [2usize, 0, 5, 1, 13];
        let mut chain = Chain::<f32>::new(&radii);
        chain.reset(rows, cols);
        let mut got = vec![0.0f32; rows * cols];
        for i in (0..rows).rev() {
            chain.push(i, &x[i * cols..(i + 1) * cols], &mut got);
        }
        let mut want = x.clone();
        for &r in &radii {
            let mut next = vec![0.0f32; rows * cols];
            boxcar_axis0::<f32>(&want, &mut next, rows, cols, r);
            want = next;
        }
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn transpose_moves_every_element() {
        for (rows, cols) in [(13, 9), (16, 24), (64, 512), (19, 37), (8, 3)] {
            let x: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            let mut t = vec![-1.0f32; rows * cols];
            transpose(&x, &mut t, rows, cols);
            let y: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let mut u = vec![-1.0f64; rows * cols];
            transpose(&y, &mut u, rows, cols);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(t[c * rows + r], x[r * cols + c], "{rows}x{cols}");
                    assert_eq!(u[c * rows + r], y[r * cols + c], "{rows}x{cols}");
                }
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
