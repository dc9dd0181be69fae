//! SoFiA 1.3.2's noise measurement (`sofia.functions.GetRMS`) reproduced on a sample: the same
//! estimators, the same histogram bins (NumPy's `arange` arithmetic in the data's precision)
//! and the same least-squares Gaussian fits, so compat results agree to rounding.

use super::noise::{centres, histogram, mad_about, std_about, Fitter, MAD_TO_STD_SOFIA1};
use super::Range;
use crate::error::{Error, Result};
use crate::real::Real;

/// SoFiA 1's `rmsMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sofia1Mode {
    /// Gaussian fitted to the histogram of negative values (bins from the minimum to 0).
    Negative,
    /// Gaussian fitted to a 100-bin histogram between the data limits.
    Gauss,
    /// 1.4826 · median |x| (about 0).
    Mad,
    /// sqrt(Σ x² / n) (about 0).
    Std,
}

/// One GetRMS configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sofia1Rms {
    pub mode: Sofia1Mode,
    pub range: Range,
    /// Repeat MAD/std with a 5·rms clip (SoFiA's `twoPass`; off in SCfinder_mem).
    pub two_pass: bool,
    /// The cube is float32 (NumPy then does some bin arithmetic in float32).
    pub single: bool,
    /// Number of elements of the whole cube (sets the bin count of `Negative`).
    pub size: usize,
}

impl Sofia1Rms {
    /// Whether the estimator needs the min and max of the whole cube.
    pub fn needs_extremes(&self) -> bool {
        matches!(self.mode, Sofia1Mode::Negative | Sofia1Mode::Gauss)
    }
}

fn fail(msg: &str) -> Error {
    Error::value(format!("SoFiA noise measurement: {msg}"))
}

/// Round to the data precision.
fn t(v: f64, single: bool) -> f64 {
    if single {
        v as f32 as f64
    } else {
        v
    }
}

/// `np.arange(start, stop, step)` for start/stop/step that are NumPy scalars of the data's
/// precision (the result is float64 either way): length ceil((stop − start)/step) in that
/// precision, then start + i·((start + step) − start).
pub fn numpy_arange(start: f64, stop: f64, step: f64, single: bool) -> Vec<f64> {
    let (len, second) = if single {
        let (a, b, s) = (start as f32, stop as f32, step as f32);
        (((b - a) / s) as f64, (a + s) as f64)
    } else {
        ((stop - start) / step, start + step)
    };
    let len = len.ceil();
    if len.is_nan() || len <= 0.0 || len.is_infinite() {
        return Vec::new();
    }
    let len = len as usize;
    let delta = second - start;
    (0..len)
        .map(|i| match i {
            0 => start,
            1 => second,
            _ => start + i as f64 * delta,
        })
        .collect()
}

/// Counts of a sample by bin edges, as [`histogram`] counts them: the sample may lie on the
/// host or on the device (the GPU engine counts its sample there and moves the counts alone).
pub trait Binned {
    fn histogram(&self, edges: &[f64]) -> Result<Vec<u64>>;
}

impl<S: Real> Binned for [S] {
    fn histogram(&self, edges: &[f64]) -> Result<Vec<u64>> {
        Ok(histogram(self, edges))
    }
}

/// SoFiA's refusal of a one-sided flux range with no value in it (infinities count, NaN does
/// not): the values below 0 are those in [−inf, −min subnormal], above 0 in [min subnormal, inf].
fn check_range<S: Binned + ?Sized>(s: &S, range: Range) -> Result<()> {
    let tiny = f64::from_bits(1);
    let (edges, side) = match range {
        Range::Negative => ([f64::NEG_INFINITY, -tiny], "negative"),
        Range::Positive => ([tiny, f64::INFINITY], "positive"),
        Range::All => return Ok(()),
    };
    if s.histogram(&edges)?[0] == 0 {
        return Err(fail(&format!(
            "cannot measure noise from {side} flux values; no {side} fluxes found in data cube"
        )));
    }
    Ok(())
}

/// GetRMS on `samples` (the sampled sub-cube, NaN allowed). `extremes` = (nanmin, nanmax) of
/// the whole cube, needed by `Negative` and `Gauss`; `fitter` fits their Gaussians (None:
/// the built-in one).
pub fn sofia1_rms<S: Real>(
    samples: &[S],
    extremes: Option<(f64, f64)>,
    p: &Sofia1Rms,
    fitter: Option<&Fitter>,
) -> Result<f64> {
    let none = || fail("no finite values to measure the noise on");
    match p.mode {
        Sofia1Mode::Negative | Sofia1Mode::Gauss => sofia1_fit(samples, extremes, p, fitter),
        Sofia1Mode::Mad => {
            check_range(samples, p.range)?;
            let rms =
                MAD_TO_STD_SOFIA1 * mad_about(samples, 0.0, p.range, None).ok_or_else(none)?;
            if p.two_pass {
                let m = mad_about(samples, 0.0, p.range, Some(5.0 * rms)).ok_or_else(none)?;
                return Ok(MAD_TO_STD_SOFIA1 * m);
            }
            Ok(rms)
        }
        Sofia1Mode::Std => {
            check_range(samples, p.range)?;
            let rms = std_about(samples, 0.0, p.range, None).ok_or_else(none)?;
            if p.two_pass {
                return std_about(samples, 0.0, p.range, Some(5.0 * rms)).ok_or_else(none);
            }
            Ok(rms)
        }
    }
}

/// GetRMS's histogram fits (`Negative`, `Gauss`), which see the sample through its
/// histograms alone (`s` on the host or the device).
pub fn sofia1_fit<S: Binned + ?Sized>(
    s: &S,
    extremes: Option<(f64, f64)>,
    p: &Sofia1Rms,
    fitter: Option<&Fitter>,
) -> Result<f64> {
    let builtin;
    let fitter = match fitter {
        Some(f) => f,
        None => {
            builtin = Fitter::builtin();
            &builtin
        }
    };
    check_range(s, p.range)?;
    let (min, max) = extremes.ok_or_else(|| Error::Internal("extremes missing".into()))?;
    match p.mode {
        Sofia1Mode::Negative => negative_fit(s, min, p, fitter),
        Sofia1Mode::Gauss => gauss_fit(s, min, max, p, fitter),
        m => Err(Error::Internal(format!("{m:?} is not a histogram fit"))),
    }
}

/// The bins of the negative-flux histogram for `nrbins` bins between `min` and 0.
fn negative_bins(min: f64, nrbins: f64, single: bool) -> Vec<f64> {
    let step = t(t(min.abs(), single) / t(nrbins, single), single);
    let stop = t(step - t(1e-12, single), single);
    numpy_arange(min, stop, step, single)
}

fn negative_fit<S: Binned + ?Sized>(
    s: &S,
    min: f64,
    p: &Sofia1Rms,
    fitter: &Fitter,
) -> Result<f64> {
    if min.is_nan() || min >= 0.0 {
        return Err(fail("cannot estimate noise from Gaussian fit to negative flux histogram; no negative fluxes found in data cube"));
    }
    let nrbins = ((p.size as f64 / 1e5).ceil() as usize).max(100);
    let mut edges = negative_bins(min, nrbins as f64, p.single);
    let mut hist = s.histogram(&edges)?;
    let total: u64 = hist.iter().sum();
    let mut summed = 0usize;
    while summed < hist.len()
        && (hist[hist.len() - summed - 1..].iter().sum::<u64>() as f64) < 0.05 * total as f64
    {
        summed += 1;
    }
    if summed > 0 {
        let nr = nrbins as f64 / (summed + 1) as f64;
        edges = negative_bins(min, nr, p.single);
        hist = s.histogram(&edges)?;
    }
    let x = centres(&edges);
    let y: Vec<f64> = hist.iter().map(|&c| c as f64).collect();
    let amp = y.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let half_max = x
        .iter()
        .zip(&y)
        .filter(|(_, &c)| c < amp / 2.0)
        .map(|(&v, _)| v)
        .fold(f64::NEG_INFINITY, f64::max);
    if !half_max.is_finite() || !amp.is_finite() {
        return Err(fail(
            "the negative flux histogram has no bins below half its peak",
        ));
    }
    let s0 = -half_max * 2.0 / 2.355;
    Ok(fitter.fit(&x, &y, amp, s0)?.1.abs())
}

fn gauss_fit<S: Binned + ?Sized>(
    s: &S,
    min: f64,
    max: f64,
    p: &Sofia1Rms,
    fitter: &Fitter,
) -> Result<f64> {
    if min.is_nan() || max.is_nan() || min >= max {
        return Err(fail(
            "maximum not greater than minimum; cannot determine noise level",
        ));
    }
    let (lo, hi) = match p.range {
        Range::Negative => {
            if min.is_nan() || min >= 0.0 {
                return Err(fail(
                    "minimum > 0; cannot determine noise level for negative pixels",
                ));
            }
            (min, 0.0)
        }
        Range::Positive => {
            if max.is_nan() || max <= 0.0 {
                return Err(fail(
                    "maximum < 0; cannot determine noise level for positive pixels",
                ));
            }
            (0.0, max)
        }
        Range::All => {
            if min.is_nan() || max.is_nan() || min >= 0.0 || max <= 0.0 {
                return Err(fail(
                    "noise values not scattered around 0; cannot measure noise level",
                ));
            }
            let m = min.abs().min(max.abs());
            (-m, m)
        }
    };
    let width = (hi - lo) / 100.0;
    let edges = numpy_arange(lo, hi, width, false);
    let x = centres(&edges);
    let y: Vec<f64> = s.histogram(&edges)?.iter().map(|&c| c as f64).collect();
    let total: f64 = y.iter().sum();
    let mom2 = (x.iter().zip(&y).map(|(a, b)| a * a * b).sum::<f64>() / total).sqrt();
    let amp = y.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if total <= 0.0 || !mom2.is_finite() || mom2 == 0.0 {
        return Err(fail(
            "empty or degenerate flux histogram; cannot measure noise level",
        ));
    }
    Ok(fitter.fit(&x, &y, amp, mom2)?.1.abs())
}
