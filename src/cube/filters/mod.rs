//! Separable 1-D filters along one axis of an N-d array, with scipy.ndimage's exact semantics
//! (window placement, origin, boundary modes). The building blocks of Smooth+Clip and à trous.
//!
//! A filter is a set of taps at offsets: `out[i] = scale · Σ_j w[j] · x[i + offset + j·step]`,
//! where `x` outside `0..n` is given by the boundary mode. `step > 1` gives à trous ("with holes")
//! kernels. A boxcar has all weights 1 and runs as a sliding sum on the CPU.

mod cpu;
mod cuda;

pub use cuda::kernel_variants;

use crate::backend::Device;
use crate::error::{Error, Result};
use crate::real::Real;

/// Boundary handling, as scipy.ndimage names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `k k k | a b c d | k k k` with k = cval.
    Constant,
    /// `a a a | a b c d | d d d`.
    Nearest,
    /// `c b a | a b c d | d c b` (half-sample symmetric).
    Reflect,
    /// `d c b | a b c d | c b a` (whole-sample symmetric).
    Mirror,
    /// `b c d | a b c d | a b c`.
    Wrap,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        Ok(match s {
            "constant" | "grid-constant" => Mode::Constant,
            "nearest" => Mode::Nearest,
            "reflect" | "grid-mirror" => Mode::Reflect,
            "mirror" => Mode::Mirror,
            "wrap" | "grid-wrap" => Mode::Wrap,
            _ => {
                return Err(Error::value(format!(
                    "mode must be one of 'constant', 'nearest', 'reflect', 'mirror', 'wrap', \
                     got {s:?}"
                )))
            }
        })
    }

    /// Code shared with `kernels/filters.cu`.
    pub fn code(self) -> i32 {
        match self {
            Mode::Constant => 0,
            Mode::Nearest => 1,
            Mode::Reflect => 2,
            Mode::Mirror => 3,
            Mode::Wrap => 4,
        }
    }
}

/// Index read for position `p` of a line of length `n` (`n > 0`), or None for the constant.
/// Symmetric modes are periodic (period 2n, or 2n−2 for mirror), as scipy extends lines.
#[inline]
pub fn extend_index(p: isize, n: usize, mode: Mode) -> Option<usize> {
    let n = n as isize;
    if (0..n).contains(&p) {
        return Some(p as usize);
    }
    let i = match mode {
        Mode::Constant => return None,
        Mode::Nearest => p.clamp(0, n - 1),
        Mode::Wrap => p.rem_euclid(n),
        Mode::Reflect => {
            let q = p.rem_euclid(2 * n);
            if q < n {
                q
            } else {
                2 * n - 1 - q
            }
        }
        Mode::Mirror => {
            if n == 1 {
                0
            } else {
                let q = p.rem_euclid(2 * n - 2);
                if q < n {
                    q
                } else {
                    2 * n - 2 - q
                }
            }
        }
    };
    Some(i as usize)
}

/// The most taps a generated kernel (Gaussian, boxcar) may have: 2^24 (radius 8 388 607),
/// refused before any weight is computed. Longer kernels cannot matter for any array skyconv
/// can hold in memory (see [`check_fits`]) and would take gigabytes to build.
pub const MAX_TAPS: usize = 1 << 24;

/// Radius (samples) a filter along an axis of `n` samples may reach: the axis length, or
/// 32768 on shorter axes (so that scipy's results for kernels longer than a short axis are
/// reproduced exactly up to that size).
pub fn max_radius(n: usize) -> usize {
    n.max(32768)
}

/// Refuse a filter that reaches further than [`max_radius`] of the axis it runs along (its
/// far taps would only read the boundary extension, at a cost proportional to its length).
pub fn check_fits(f: &Filter1d, n: usize, axis: usize) -> Result<()> {
    let (lo, hi) = f.span();
    let reach = lo.unsigned_abs().max(hi.unsigned_abs());
    if reach > max_radius(n) {
        return Err(Error::value(format!(
            "the filter reaches {reach} samples from its centre, but axis {axis} has only {n} \
             samples: filters along an axis may reach at most max(axis length, 32768) samples \
             (use a smaller sigma, truncate, radius or size)"
        )));
    }
    Ok(())
}

/// A 1-D filter: weights at offsets `offset + j·step`, result multiplied by `scale`.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter1d {
    pub weights: Vec<f64>,
    pub offset: isize,
    pub step: usize,
    pub scale: f64,
    /// All weights are 1: the CPU engine uses a sliding sum (O(1) per output).
    pub boxcar: bool,
}

impl Filter1d {
    /// scipy's `correlate1d(weights, origin)`.
    pub fn correlate(weights: &[f64], origin: isize) -> Result<Self> {
        let n = weights.len();
        if n == 0 {
            return Err(Error::value("weights: no filter weights given"));
        }
        if weights.iter().any(|w| !w.is_finite()) {
            return Err(Error::value("weights: filter weights must be finite"));
        }
        check_origin(n, origin)?;
        Ok(Filter1d {
            weights: weights.to_vec(),
            offset: -((n / 2) as isize) - origin,
            step: 1,
            scale: 1.0,
            boxcar: false,
        })
    }

    /// scipy's `convolve1d(weights, origin)`: correlation with the reversed weights.
    pub fn convolve(weights: &[f64], origin: isize) -> Result<Self> {
        let reversed: Vec<f64> = weights.iter().rev().copied().collect();
        let mut origin = -origin;
        if weights.len().is_multiple_of(2) {
            origin -= 1;
        }
        Self::correlate(&reversed, origin)
    }

    /// scipy's `gaussian_filter1d(sigma, truncate, radius)` (order 0). `sigma == 0` is the
    /// identity.
    pub fn gaussian(sigma: f64, truncate: f64, radius: Option<usize>) -> Result<Self> {
        if !sigma.is_finite() || sigma < 0.0 {
            return Err(Error::value(format!(
                "sigma must be finite and >= 0, got {sigma}"
            )));
        }
        if sigma == 0.0 {
            return Self::correlate(&[1.0], 0);
        }
        if !truncate.is_finite() || truncate <= 0.0 {
            return Err(Error::value(format!(
                "truncate must be > 0, got {truncate}"
            )));
        }
        let r = match radius {
            Some(r) => r,
            None => {
                let r = truncate * sigma + 0.5;
                if r >= (MAX_TAPS / 2) as f64 {
                    return Err(Error::value(format!(
                        "sigma={sigma} with truncate={truncate} gives a Gaussian kernel of \
                         radius {:.0} samples; at most {} samples are supported",
                        r.floor(),
                        MAX_TAPS / 2 - 1
                    )));
                }
                r as usize
            }
        };
        if r >= MAX_TAPS / 2 {
            return Err(Error::value(format!(
                "radius={r}: a Gaussian kernel may have a radius of at most {} samples",
                MAX_TAPS / 2 - 1
            )));
        }
        let x: Vec<f64> = (-(r as isize)..=r as isize).map(|x| x as f64).collect();
        let mut w: Vec<f64> = x
            .iter()
            .map(|x| (-0.5 / (sigma * sigma) * x * x).exp())
            .collect();
        let sum: f64 = w.iter().sum();
        w.iter_mut().for_each(|v| *v /= sum);
        Self::correlate(&w, 0)
    }

    /// scipy's `uniform_filter1d(size, origin)`.
    pub fn uniform(size: usize, origin: isize) -> Result<Self> {
        if size < 1 {
            return Err(Error::value("size must be >= 1"));
        }
        if size > MAX_TAPS {
            return Err(Error::value(format!(
                "size={size}: a uniform (boxcar) filter may have at most {MAX_TAPS} samples"
            )));
        }
        check_origin(size, origin)?;
        Ok(Filter1d {
            weights: vec![1.0; size],
            offset: -((size / 2) as isize) - origin,
            step: 1,
            scale: 1.0 / size as f64,
            boxcar: true,
        })
    }

    /// The same weights spread out with `step − 1` holes between taps (à trous), centred.
    pub fn dilated(weights: &[f64], step: usize) -> Result<Self> {
        if step == 0 {
            return Err(Error::value("step must be >= 1"));
        }
        let mut f = Self::correlate(weights, 0)?;
        f.offset = -((weights.len() / 2 * step) as isize);
        f.step = step;
        Ok(f)
    }

    pub fn taps(&self) -> usize {
        self.weights.len()
    }

    /// Offsets of the first and last tap.
    pub fn span(&self) -> (isize, isize) {
        let last = self.offset + ((self.taps() - 1) * self.step) as isize;
        (self.offset, last)
    }
}

fn check_origin(size: usize, origin: isize) -> Result<()> {
    let lo = -((size / 2) as isize);
    let hi = ((size as isize) - 1) / 2;
    if origin < lo || origin > hi {
        return Err(Error::value(format!(
            "origin {origin} is out of range for a filter of size {size} ({lo} <= origin <= {hi})"
        )));
    }
    Ok(())
}

/// The array as (outer, n, inner) around `axis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AxisView {
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
}

impl AxisView {
    pub fn new(shape: &[usize], axis: usize) -> Result<Self> {
        if axis >= shape.len() {
            return Err(Error::value(format!(
                "axis {axis} is out of range for an array of {} dimensions",
                shape.len()
            )));
        }
        Ok(AxisView {
            outer: shape[..axis].iter().product(),
            n: shape[axis],
            inner: shape[axis + 1..].iter().product(),
        })
    }

    pub fn len(&self) -> usize {
        self.outer * self.n * self.inner
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Everything that defines one filtering pass.
#[derive(Debug, Clone)]
pub struct Pass {
    pub filter: Filter1d,
    pub axis: usize,
    pub mode: Mode,
    pub cval: f64,
}

/// Apply one pass to `input` (C-contiguous, `shape`) into `out` on `device`.
pub fn apply<T: Real>(
    device: Device,
    input: &[T],
    shape: &[usize],
    pass: &Pass,
    out: &mut [T],
) -> Result<()> {
    let view = AxisView::new(shape, pass.axis)?;
    check_fits(&pass.filter, view.n, pass.axis)?;
    if input.len() != view.len() || out.len() != view.len() {
        return Err(Error::shape(
            "input and output sizes do not match the shape",
        ));
    }
    if view.is_empty() {
        return Ok(());
    }
    match device {
        Device::Cpu => {
            crate::backend::threads::install(|| cpu::apply(input, view, pass, out))?;
            Ok(())
        }
        Device::Cuda(o) => crate::backend::cuda::on(o, || cuda::apply(input, view, pass, out)),
    }
}

/// Run `n` passes starting from `input`, alternating between `out` and one scratch array so
/// that the last pass writes `out`; `step(k, src, dst)` runs pass k.
fn ping_pong<T: Real>(
    input: &[T],
    out: &mut [T],
    n: usize,
    mut step: impl FnMut(usize, &[T], &mut [T]) -> Result<()>,
) -> Result<()> {
    let mut tmp =
        crate::backend::alloc::try_vec(out.len(), T::default(), "a filter chain's scratch array")?;
    for k in 0..n {
        match (k, (n - 1 - k).is_multiple_of(2)) {
            (0, true) => step(0, input, out)?,
            (0, false) => step(0, input, &mut tmp)?,
            (_, true) => step(k, &tmp, out)?,
            (_, false) => step(k, out, &mut tmp)?,
        }
    }
    Ok(())
}

/// Apply `passes` one after the other (input -> out). On the GPU the array crosses the bus once
/// each way and the passes run back to back on the device.
pub fn apply_chain<T: Real>(
    device: Device,
    input: &[T],
    shape: &[usize],
    passes: &[Pass],
    out: &mut [T],
) -> Result<()> {
    let len: usize = shape.iter().product();
    if input.len() != len || out.len() != len {
        return Err(Error::shape(
            "input and output sizes do not match the shape",
        ));
    }
    for p in passes {
        check_fits(&p.filter, AxisView::new(shape, p.axis)?.n, p.axis)?;
    }
    match passes {
        [] => {
            out.copy_from_slice(input);
            Ok(())
        }
        [one] => apply(device, input, shape, one, out),
        _ if len == 0 => Ok(()),
        _ => match device {
            Device::Cpu => crate::backend::threads::install(|| {
                ping_pong(input, out, passes.len(), |k, src, dst| {
                    let p = &passes[k];
                    cpu::apply(src, AxisView::new(shape, p.axis)?, p, dst);
                    Ok(())
                })
            })?,
            Device::Cuda(o) => {
                crate::backend::cuda::on(o, || cuda::apply_chain(input, shape, passes, out))
            }
        },
    }
}

pub use cpu::apply as apply_cpu;
pub use cuda::{
    apply_device, apply_device_split, can_split, tile_plan, DevicePass, KernelTile, Split,
};
