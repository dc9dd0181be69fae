//! Validated, rayon-parallel slice versions of the pixel functions (what the bindings call).
//!
//! Each checks nside, lengths and every input first (errors name the argument and the first
//! bad element), then fills the output in parallel. Run them inside skyconv's pool
//! (`crate::py::errors::compute` does so for the bindings).

use rayon::prelude::*;

use super::nest::{nest2ring_in, ring2nest_in};
use super::pix::{
    ang2pix_nest_in, ang2pix_ring_in, pix2ang_nest_in, pix2ang_ring_in, vec2pix_nest_in,
    vec2pix_ring_in, THETA_SLACK,
};
use super::{check_nside, Geom};
use crate::error::{Error, Result};

/// Elements per rayon task: each element costs ~10–50 ns, so keep tasks around 100 µs.
const MIN_LEN: usize = 4096;

fn same_len(name: &str, got: usize, want: usize) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(Error::shape(format!(
            "{name} has {got} elements, expected {want}"
        )))
    }
}

/// Index of the first element failing `ok`. Scans chunks in parallel with a branch-free
/// fold per chunk (vectorises; rayon's per-element `position_first` costs more than the
/// conversions it guards), then pinpoints the element in the first bad chunk.
fn first_bad<T: Copy + Sync>(v: &[T], ok: impl Fn(T) -> bool + Sync) -> Option<usize> {
    let chunk = v
        .par_chunks(MIN_LEN)
        .position_first(|c| !c.iter().fold(true, |all, &x| all & ok(x)))?;
    let start = chunk * MIN_LEN;
    v[start..].iter().position(|&x| !ok(x)).map(|k| start + k)
}

/// Error if any pixel index is outside [0, npix).
fn check_pixels(name: &str, pix: &[i64], npix: u64) -> Result<()> {
    // Negative indices wrap to huge u64 values, so one comparison covers both ends.
    match first_bad(pix, |p| (p as u64) < npix) {
        None => Ok(()),
        Some(k) => Err(Error::value(format!(
            "{name}[{k}] = {} is out of range: pixel indices must be in [0, {npix})",
            pix[k]
        ))),
    }
}

/// Error unless every θ is in [0, π] (up to healpy's 1e-5 slack) and every φ finite.
fn check_angles(theta: &[f64], phi: &[f64]) -> Result<()> {
    let hi = std::f64::consts::PI + THETA_SLACK;
    // Written so that NaN fails: comparisons with NaN are false.
    if let Some(k) = first_bad(theta, |t| t >= 0.0 && t <= hi) {
        return Err(Error::value(format!(
            "theta[{k}] = {} is out of range: theta (colatitude, radians) must be in [0, pi]",
            theta[k]
        )));
    }
    if let Some(k) = first_bad(phi, |p: f64| p.is_finite()) {
        return Err(Error::value(format!(
            "phi[{k}] = {} is not finite: phi (longitude, radians) must be a finite number",
            phi[k]
        )));
    }
    Ok(())
}

/// Pixel centres (θ, φ) in radians of `pix` (RING or NEST) into `theta`, `phi`.
pub fn pix2ang_slice(
    nside: u64,
    nest: bool,
    pix: &[i64],
    theta: &mut [f64],
    phi: &mut [f64],
) -> Result<()> {
    check_nside(nside, nest)?;
    same_len("theta", theta.len(), pix.len())?;
    same_len("phi", phi.len(), pix.len())?;
    let g = Geom::new(nside);
    check_pixels("ipix", pix, g.npix)?;
    if nest {
        fill_angles(pix, theta, phi, |q| pix2ang_nest_in(&g, q));
    } else {
        fill_angles(pix, theta, phi, |q| pix2ang_ring_in(&g, q));
    }
    Ok(())
}

// Generic (not fn-pointer) loops: one copy per scheme, with the conversion inlined.
fn fill_angles(
    pix: &[i64],
    theta: &mut [f64],
    phi: &mut [f64],
    f: impl Fn(u64) -> (f64, f64) + Sync,
) {
    theta
        .par_iter_mut()
        .zip(phi.par_iter_mut())
        .zip(pix.par_iter())
        .with_min_len(MIN_LEN)
        .for_each(|((t, p), &q)| (*t, *p) = f(q as u64));
}

fn fill_pixels(theta: &[f64], phi: &[f64], out: &mut [i64], f: impl Fn(f64, f64) -> u64 + Sync) {
    out.par_iter_mut()
        .zip(theta.par_iter().zip(phi.par_iter()))
        .with_min_len(MIN_LEN)
        .for_each(|(o, (&t, &p))| *o = f(t, p) as i64);
}

/// Pixels (RING or NEST) containing the points (θ, φ) in radians, into `out`.
/// θ must be in [0, π] (healpy's slack of 1e-5 above π is folded back), φ finite.
pub fn ang2pix_slice(
    nside: u64,
    nest: bool,
    theta: &[f64],
    phi: &[f64],
    out: &mut [i64],
) -> Result<()> {
    check_nside(nside, nest)?;
    same_len("phi", phi.len(), theta.len())?;
    same_len("output", out.len(), theta.len())?;
    check_angles(theta, phi)?;
    let g = Geom::new(nside);
    if nest {
        fill_pixels(theta, phi, out, |t, p| ang2pix_nest_in(&g, t, p));
    } else {
        fill_pixels(theta, phi, out, |t, p| ang2pix_ring_in(&g, t, p));
    }
    Ok(())
}

/// Pixels (RING or NEST) containing the directions of the vectors (x, y, z), into `out`,
/// as HEALPix's vec2pix (z taken from the vector). Vectors must be finite and not zero.
pub fn vec2pix_slice(
    nside: u64,
    nest: bool,
    x: &[f64],
    y: &[f64],
    z: &[f64],
    out: &mut [i64],
) -> Result<()> {
    check_nside(nside, nest)?;
    same_len("y", y.len(), x.len())?;
    same_len("z", z.len(), x.len())?;
    same_len("output", out.len(), x.len())?;
    let bad = (0..x.len()).find(|&k| {
        let n2 = x[k] * x[k] + y[k] * y[k] + z[k] * z[k];
        !(n2.is_finite() && n2 > 0.0)
    });
    if let Some(k) = bad {
        return Err(Error::value(format!(
            "vector {k} = ({}, {}, {}) has no direction: it must be finite and not zero",
            x[k], y[k], z[k]
        )));
    }
    let g = Geom::new(nside);
    let f = |(o, ((&a, &b), &c)): (&mut i64, ((&f64, &f64), &f64))| {
        *o = if nest {
            vec2pix_nest_in(&g, a, b, c)
        } else {
            vec2pix_ring_in(&g, a, b, c)
        } as i64
    };
    out.par_iter_mut()
        .zip(x.par_iter().zip(y.par_iter()).zip(z.par_iter()))
        .with_min_len(MIN_LEN)
        .for_each(f);
    Ok(())
}

fn convert(
    nside: u64,
    pix: &[i64],
    out: &mut [i64],
    f: impl Fn(&Geom, u64) -> u64 + Sync,
) -> Result<()> {
    check_nside(nside, true)?;
    same_len("output", out.len(), pix.len())?;
    let g = Geom::new(nside);
    check_pixels("ipix", pix, g.npix)?;
    out.par_iter_mut()
        .zip(pix.par_iter())
        .with_min_len(MIN_LEN)
        .for_each(|(o, &p)| *o = f(&g, p as u64) as i64);
    Ok(())
}

/// RING -> NEST for every element of `pix` (nside a power of two).
pub fn ring2nest_slice(nside: u64, pix: &[i64], out: &mut [i64]) -> Result<()> {
    convert(nside, pix, out, ring2nest_in)
}

/// NEST -> RING for every element of `pix` (nside a power of two).
pub fn nest2ring_slice(nside: u64, pix: &[i64], out: &mut [i64]) -> Result<()> {
    convert(nside, pix, out, nest2ring_in)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_argument() {
        let mut t = [0.0; 2];
        let mut p = [0.0; 2];
        let e = pix2ang_slice(4, false, &[0, 192], &mut t, &mut p).unwrap_err();
        assert!(matches!(e, Error::Value(_)) && e.to_string().contains("ipix[1] = 192"));
        let e = pix2ang_slice(3, true, &[0, 1], &mut t, &mut p).unwrap_err();
        assert!(e.to_string().contains("nside"));
        let mut o = [0i64; 2];
        let e = ang2pix_slice(4, false, &[0.0, f64::NAN], &[0.0, 0.0], &mut o).unwrap_err();
        assert!(e.to_string().contains("theta[1]"));
        let e = ang2pix_slice(4, false, &[0.0, 1.0], &[0.0, f64::INFINITY], &mut o).unwrap_err();
        assert!(e.to_string().contains("phi[1]"));
        let e = ring2nest_slice(4, &[-1, 0], &mut o).unwrap_err();
        assert!(e.to_string().contains("ipix[0]"));
        let e = ang2pix_slice(4, false, &[0.0], &[0.0, 1.0], &mut o[..1]).unwrap_err();
        assert!(matches!(e, Error::Shape(_)));
    }

    #[test]
    fn slices_match_scalars() {
        let nside = 64u64;
        let pix: Vec<i64> = (0..crate::healpix::nside2npix(nside) as i64).collect();
        let (mut t, mut p) = (vec![0.0; pix.len()], vec![0.0; pix.len()]);
        pix2ang_slice(nside, true, &pix, &mut t, &mut p).unwrap();
        let mut back = vec![0i64; pix.len()];
        ang2pix_slice(nside, true, &t, &p, &mut back).unwrap();
        assert_eq!(back, pix);
        let mut r = vec![0i64; pix.len()];
        nest2ring_slice(nside, &pix, &mut r).unwrap();
        for (k, &q) in r.iter().enumerate().step_by(97) {
            assert_eq!(q as u64, crate::healpix::nest2ring(nside, k as u64));
        }
        ring2nest_slice(nside, &r, &mut back).unwrap();
        assert_eq!(back, pix);
    }
}
