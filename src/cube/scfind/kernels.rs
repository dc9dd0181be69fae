//! Building the filters of a kernel from user units: Gaussians by FWHM, SoFiA 2's spectral
//! boxcars and its repeated-boxcar approximation of a spatial Gaussian.

use crate::cube::filters::Filter1d;
use crate::error::{Error, Result};

/// Gaussians are truncated at 4σ, as scipy's `gaussian_filter`.
pub const TRUNCATE: f64 = 4.0;

/// SoFiA 2's approximation of a Gaussian of width `sigma` (pixels) by `n` (3..=6) repeated
/// boxcars of radius `r` (width 2r+1): the n whose rounded radius gives the variance
/// n·((2r+1)² − 1)/12 closest to σ². Returns (r, n); (0, 0) for σ = 0.
pub fn boxcar_approx(sigma: f64) -> (usize, usize) {
    if sigma <= 0.0 {
        return (0, 0);
    }
    let mut best = (0usize, 3usize, f64::INFINITY);
    for n in 3..=6usize {
        let w = (12.0 * sigma * sigma / n as f64 + 1.0).sqrt();
        let r = ((w - 1.0) / 2.0).round().max(0.0) as usize;
        let var = n as f64 * (((2 * r + 1) * (2 * r + 1)) as f64 - 1.0) / 12.0;
        let err = (var.sqrt() - sigma).abs();
        if err < best.2 {
            best = (r, n, err);
        }
    }
    (best.0, best.1)
}

/// SoFiA-2's choice of repeated boxcars for a Gaussian of width `sigma` (pixels): n boxcars of
/// width 2r+1 have variance n·((2r+1)² − 1)/12, so the exact radius for n passes is
/// r(n) = sqrt(3σ²/n + 1/4) − 1/2; over n = 3..=6 the n whose r(n) is closest to a whole
/// number wins (the smaller n on a tie), and r is r(n) rounded. Returns (r, n); (0, 0) for σ = 0.
pub fn sofia2_boxcar(sigma: f64) -> (usize, usize) {
    if sigma <= 0.0 || !sigma.is_finite() {
        return (0, 0);
    }
    let mut best = (0usize, 0usize, f64::INFINITY);
    for n in 3..=6usize {
        let r = (3.0 * sigma * sigma / n as f64 + 0.25).sqrt() - 0.5;
        let off = (r - (r + 0.5).floor()).abs();
        if off < best.2 {
            best = ((r + 0.5).floor() as usize, n, off);
        }
    }
    (best.0, best.1)
}

/// How a spatial Gaussian is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpatialRule {
    /// One scipy Gaussian truncated at 4σ.
    Gaussian,
    /// skyconv's former approximation (`boxcar_approx`): the (r, n) whose σ is closest.
    BoxcarClosestSigma,
    /// SoFiA-2's repeated boxcars (`sofia2_boxcar`).
    BoxcarSofia2,
}

/// The passes of a spatial Gaussian of standard deviation `sigma` (pixels) along one axis by
/// `rule`.
pub fn spatial_by(sigma: f64, rule: SpatialRule) -> Result<Vec<Filter1d>> {
    if rule != SpatialRule::BoxcarSofia2 {
        return spatial(sigma, rule == SpatialRule::BoxcarClosestSigma);
    }
    if sigma.is_nan() || sigma < 0.0 || sigma.is_infinite() {
        return Err(Error::value(format!(
            "spatial kernel width must be finite and >= 0, got sigma = {sigma}"
        )));
    }
    let (r, n) = sofia2_boxcar(sigma);
    if r == 0 {
        return Ok(Vec::new());
    }
    Ok(vec![Filter1d::uniform(2 * r + 1, 0)?; n])
}

/// The passes of a spatial Gaussian of standard deviation `sigma` (pixels) along one axis:
/// none for σ = 0, one scipy Gaussian, or SoFiA 2's repeated boxcars.
pub fn spatial(sigma: f64, approx: bool) -> Result<Vec<Filter1d>> {
    if sigma.is_nan() || sigma < 0.0 || sigma.is_infinite() {
        return Err(Error::value(format!(
            "spatial kernel width must be finite and >= 0, got sigma = {sigma}"
        )));
    }
    if sigma == 0.0 {
        return Ok(Vec::new());
    }
    if approx {
        let (r, n) = boxcar_approx(sigma);
        if r == 0 {
            return Ok(Vec::new());
        }
        let f = Filter1d::uniform(2 * r + 1, 0)?;
        return Ok(vec![f; n]);
    }
    Ok(vec![Filter1d::gaussian(sigma, TRUNCATE, None)?])
}

/// A spectral boxcar of `width` channels (scipy's `uniform_filter1d` placement).
pub fn spectral_boxcar(width: usize) -> Result<Option<Filter1d>> {
    Ok(match width {
        0 => None,
        w => Some(Filter1d::uniform(w, 0)?),
    })
}

/// A spectral Gaussian of standard deviation `sigma` channels.
pub fn spectral_gauss(sigma: f64) -> Result<Option<Filter1d>> {
    if sigma.is_nan() || sigma < 0.0 || sigma.is_infinite() {
        return Err(Error::value(format!(
            "spectral kernel width must be finite and >= 0, got sigma = {sigma}"
        )));
    }
    Ok(if sigma == 0.0 {
        None
    } else {
        Some(Filter1d::gaussian(sigma, TRUNCATE, None)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sofia2_rule_examples() {
        let f = super::super::fwhm_const();
        // The FWHMs (pixels) and their (radius, passes).
        assert_eq!(sofia2_boxcar(8.0 / f), (2, 6));
        assert_eq!(sofia2_boxcar(10.0 / f), (3, 5));
        assert_eq!(sofia2_boxcar(15.0 / f), (4, 6));
        // Where both rules agree.
        for fwhm in [3.0, 6.0] {
            assert_eq!(sofia2_boxcar(fwhm / f), boxcar_approx(fwhm / f), "{fwhm}");
        }
        assert_eq!(sofia2_boxcar(0.0), (0, 0));
    }

    #[test]
    fn approx_variance_close() {
        for s in [1.0, 1.3, 2.55, 5.0, 10.0] {
            let (r, n) = boxcar_approx(s);
            let var = n as f64 * (((2 * r + 1) * (2 * r + 1)) as f64 - 1.0) / 12.0;
            assert!((var.sqrt() - s).abs() < 0.5, "{s}: {r} {n}");
        }
    }
}
