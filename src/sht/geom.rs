//! Stand-in for `crate::healpix` ring geometry with exactly its API, used until the healpix
//! branch lands (then this file goes and `mod.rs` imports `crate::healpix`).

use crate::error::{Error, Result};
use std::f64::consts::PI;

/// Check that `nside` is a valid HEALPix resolution (a power of two for NEST).
pub fn check_nside(nside: u64, nest: bool) -> Result<()> {
    if nside == 0 || nside > (1 << 29) {
        return Err(Error::value(format!(
            "nside must be in 1..=2^29, got {nside}"
        )));
    }
    if nest && !nside.is_power_of_two() {
        return Err(Error::value(format!(
            "nside must be a power of two for NEST, got {nside}"
        )));
    }
    Ok(())
}

/// Number of pixels, 12·nside².
pub fn nside2npix(nside: u64) -> u64 {
    12 * nside * nside
}

/// One iso-latitude ring of the RING scheme.
#[derive(Clone, Copy, Debug)]
pub struct Ring {
    /// Colatitude (rad).
    pub theta: f64,
    /// cos(theta).
    pub z: f64,
    /// sin(theta), computed without cancellation near the poles.
    pub sin_theta: f64,
    /// Pixels in the ring.
    pub nphi: usize,
    /// Longitude of the first pixel centre (rad).
    pub phi0: f64,
    /// RING index of the first pixel.
    pub first: u64,
}

/// Ring `i` (1..=4·nside−1, north to south).
pub fn ring(nside: u64, i: usize) -> Ring {
    let n = nside as f64;
    let nr = 4 * nside as usize;
    let npix = nside2npix(nside);
    let north = i.min(nr - i);
    let (z, sin_theta, nphi, phi0, first_north);
    if north < nside as usize {
        let q = north as f64;
        let one_minus = q * q / (3.0 * n * n);
        z = 1.0 - one_minus;
        sin_theta = (one_minus * (2.0 - one_minus)).sqrt();
        nphi = 4 * north;
        phi0 = PI / (4.0 * q);
        first_north = 2 * (north as u64) * (north as u64 - 1);
    } else {
        z = (2.0 * (2 * nside) as f64 - 2.0 * north as f64) / (3.0 * n);
        sin_theta = ((1.0 - z) * (1.0 + z)).sqrt();
        nphi = 4 * nside as usize;
        phi0 = if (north - nside as usize) % 2 == 1 {
            0.0
        } else {
            PI / (4.0 * n)
        };
        first_north = 2 * nside * (nside - 1) + (north as u64 - nside) * 4 * nside;
    }
    if i <= 2 * nside as usize {
        Ring {
            theta: z.acos(),
            z,
            sin_theta,
            nphi,
            phi0,
            first: first_north,
        }
    } else {
        // Mirror image of ring `north`: its pixels end where the northern ring's begin counted
        // from the end of the map.
        Ring {
            theta: PI - z.acos(),
            z: -z,
            sin_theta,
            nphi,
            phi0,
            first: npix - first_north - nphi as u64,
        }
    }
}

/// All 4·nside−1 rings, north to south.
pub fn rings(nside: u64) -> Vec<Ring> {
    (1..4 * nside as usize).map(|i| ring(nside, i)).collect()
}
