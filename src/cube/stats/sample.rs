//! Which voxels a noise measurement looks at. Noise of a large cube is measured on a regular
//! sample: SoFiA 2 takes every `cadence`-th value in memory order, SoFiA 1 every `stride`-th
//! plane, row and column.

use rayon::prelude::*;

use crate::real::Real;

/// SoFiA 2's target sample size (a prime, so the cadence rarely divides the row length).
pub const SOFIA2_SAMPLE_SIZE: usize = 999_983;

/// A regular sample of a (z, y, x) array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// Flat indices 0, c, 2c, ... in memory order.
    Cadence(usize),
    /// Every `s`-th index along each of z, y and x, starting at 0.
    Stride(usize),
    /// SoFiA-2's walk backwards from the end: flat indices size − c, size − 2c, ... down to
    /// the last one >= 0 (sample slot k is index size − (k+1)·c).
    Backward(usize),
}

impl Sampling {
    /// SoFiA 2's cadence for an array of `shape` (z, y, x): size / 999983, 1 below 2, and one
    /// less when it is a multiple of the x size.
    pub fn sofia2(shape: [usize; 3]) -> Sampling {
        let size: usize = shape.iter().product();
        let mut c = size / SOFIA2_SAMPLE_SIZE;
        if c < 2 {
            c = 1;
        } else if shape[2] > 0 && c.is_multiple_of(shape[2]) {
            c -= 1;
        }
        Sampling::Cadence(c)
    }

    /// SoFiA 1's stride: max(1, int((size / 1e6)^(1 / min(3, ndim)))).
    pub fn sofia1(size: usize, ndim: usize) -> Sampling {
        let p = 1.0 / (ndim.clamp(1, 3) as f64);
        let s = ((size as f64 / 1.0e6).powf(p)) as usize;
        Sampling::Stride(s.max(1))
    }

    /// Number of sampled positions in an array of `shape`.
    pub fn len(&self, shape: [usize; 3]) -> usize {
        let size: usize = shape.iter().product();
        match *self {
            Sampling::Cadence(c) => size.div_ceil(c.max(1)),
            Sampling::Backward(c) => size / c.max(1),
            Sampling::Stride(s) => {
                let s = s.max(1);
                shape.iter().map(|&n| n.div_ceil(s)).product()
            }
        }
    }

    pub fn is_empty(&self, shape: [usize; 3]) -> bool {
        self.len(shape) == 0
    }

    /// Flat index of the `k`-th sampled position (`k < len`).
    #[inline]
    pub fn index(&self, shape: [usize; 3], k: usize) -> usize {
        match *self {
            Sampling::Cadence(c) => k * c.max(1),
            Sampling::Backward(c) => shape.iter().product::<usize>() - (k + 1) * c.max(1),
            Sampling::Stride(s) => {
                let s = s.max(1);
                let ny = shape[1].div_ceil(s);
                let nx = shape[2].div_ceil(s);
                let (z, r) = (k / (ny * nx), k % (ny * nx));
                let (y, x) = (r / nx, r % nx);
                ((z * s) * shape[1] + y * s) * shape[2] + x * s
            }
        }
    }
}

impl Sampling {
    /// Call `f(offset, slot)` for every sampled position among columns k0..k0+len of plane z
    /// (offset from k0; slot = the position's rank in the sample), in increasing order.
    pub fn for_each_in_row(
        &self,
        shape: [usize; 3],
        z: usize,
        k0: usize,
        len: usize,
        mut f: impl FnMut(usize, usize),
    ) {
        let (ny, nx) = (shape[1], shape[2]);
        let plane = ny * nx;
        if len == 0 {
            return;
        }
        match *self {
            Sampling::Cadence(c) => {
                let c = c.max(1);
                let start = z * plane + k0;
                let mut i = start.div_ceil(c) * c;
                let mut slot = i / c;
                while i < start + len {
                    f(i - start, slot);
                    i += c;
                    slot += 1;
                }
            }
            Sampling::Backward(c) => {
                let c = c.max(1);
                let size = shape[0] * plane;
                let start = z * plane + k0;
                // smallest i >= start with size − i a multiple of c
                let mut i = size - (size - start) / c * c;
                // slots count down from (size − i) / c − 1 as i steps up by c
                let mut slot = (size - i) / c;
                while i < start + len && i + c <= size {
                    slot -= 1;
                    f(i - start, slot);
                    i += c;
                }
            }
            Sampling::Stride(s) => {
                let s = s.max(1);
                if !z.is_multiple_of(s) {
                    return;
                }
                let (ny_s, nx_s) = (ny.div_ceil(s), nx.div_ceil(s));
                let (y0, y1) = (k0 / nx, (k0 + len - 1) / nx);
                for y in (y0.div_ceil(s) * s..=y1).step_by(s) {
                    let row = y * nx;
                    let xa = k0.max(row) - row;
                    let xb = (k0 + len).min(row + nx) - row;
                    let base = ((z / s) * ny_s + y / s) * nx_s;
                    for x in (xa.div_ceil(s) * s..xb).step_by(s) {
                        f(row + x - k0, base + x / s);
                    }
                }
            }
        }
    }
}

/// The sampled values of `data` (shape (z, y, x)) as f64, in sample order.
pub fn gather<T: Real>(data: &[T], shape: [usize; 3], sampling: Sampling) -> Vec<f64> {
    gather_as(data, shape, sampling)
}

/// `gather` into element type `S` (exact for S = T or f64: the CPU S+C keeps an f32 cube's
/// sample in f32, half the bytes).
pub fn gather_as<T: Real, S: Real>(data: &[T], shape: [usize; 3], sampling: Sampling) -> Vec<S> {
    let n = sampling.len(shape);
    (0..n)
        .into_par_iter()
        .with_min_len(1 << 14)
        .map(|k| S::from_f64(data[sampling.index(shape, k)].to_f64()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stride_indices() {
        let shape = [3, 4, 5];
        let s = Sampling::Stride(2);
        let want: Vec<usize> = (0..3)
            .step_by(2)
            .flat_map(|z| {
                (0..4)
                    .step_by(2)
                    .flat_map(move |y| (0..5).step_by(2).map(move |x| (z * 4 + y) * 5 + x))
            })
            .collect();
        let got: Vec<usize> = (0..s.len(shape)).map(|k| s.index(shape, k)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn rows_cover_the_sample() {
        let shape = [5, 7, 9];
        for smp in [
            Sampling::Stride(2),
            Sampling::Stride(3),
            Sampling::Cadence(4),
            Sampling::Backward(4),
            Sampling::Backward(1),
            Sampling::Backward(5),
        ] {
            let mut got = vec![usize::MAX; smp.len(shape)];
            for z in 0..5 {
                for (k0, len) in [(0, 10), (10, 30), (40, 23)] {
                    smp.for_each_in_row(shape, z, k0, len, |off, slot| {
                        got[slot] = z * 63 + k0 + off;
                    });
                }
            }
            let want: Vec<usize> = (0..smp.len(shape)).map(|k| smp.index(shape, k)).collect();
            assert_eq!(got, want, "{smp:?}");
        }
    }

    #[test]
    fn backward_indices() {
        let shape = [1, 2, 5];
        let got = |c| {
            let s = Sampling::Backward(c);
            (0..s.len(shape))
                .map(|k| s.index(shape, k))
                .collect::<Vec<_>>()
        };
        assert_eq!(got(3), vec![7, 4, 1]);
        assert_eq!(got(5), vec![5, 0]);
        assert_eq!(got(1), (0..10).rev().collect::<Vec<_>>());
    }

    #[test]
    fn sofia2_cadence() {
        assert_eq!(Sampling::sofia2([10, 10, 10]), Sampling::Cadence(1));
        // 4 * 999983 values with x size 2: cadence 4 is a multiple of 2 -> 3.
        assert_eq!(Sampling::sofia2([1, 999_983 * 2, 2]), Sampling::Cadence(3));
    }
}
