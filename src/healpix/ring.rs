//! Ring geometry: latitude and pixel layout of each iso-latitude ring (RING scheme).

use std::f64::consts::{FRAC_PI_2, PI};

use super::{isqrt, Geom};

/// One iso-latitude ring. Rings are numbered 1 ..= 4·nside−1 from north to south.
#[derive(Clone, Copy, Debug)]
pub struct Ring {
    /// Colatitude of the pixel centres (radians), bit-identical to healpy's `pix2ang`.
    pub theta: f64,
    /// cos θ, as HEALPix computes it (exact rational formula, not `cos(theta)`).
    pub z: f64,
    /// sin θ from the polar formula sqrt(t(2−t)), t = 1−|z|, in the caps (accurate near the
    /// poles, where sqrt(1−z²) would lose digits), sqrt((1+z)(1−z)) elsewhere.
    pub sin_theta: f64,
    /// Number of pixels in the ring.
    pub nphi: usize,
    /// Longitude of the first pixel's centre (radians): 0 or π/nphi.
    pub phi0: f64,
    /// Index of the first pixel of the ring (RING scheme).
    pub first: u64,
}

/// cos θ, sin θ and θ of the pixel centres of ring `i`. θ uses atan2(sin, cos) where
/// |cos θ| > 0.99 and acos elsewhere, exactly as HEALPix's pixel-centre code.
#[inline]
pub(crate) fn ring_latitude(g: &Geom, i: u64) -> (f64, f64, f64) {
    let n = g.nside;
    let south = i > 2 * n;
    let north = if south { 4 * n - i } else { i };
    if north < n {
        // Polar cap: 1 − cos θ = north²·fact2 exactly, so keep it as `t`.
        let t = (north * north) as f64 * g.fact2;
        let zn = 1.0 - t;
        let sth = (t * (2.0 - t)).sqrt();
        // t − 1 is exactly −(1 − t): both hemispheres round alike.
        let z = if south { t - 1.0 } else { zn };
        let theta = if zn > 0.99 { sth.atan2(z) } else { z.acos() };
        (theta, z, sth)
    } else {
        let z = (2 * n as i64 - i as i64) as f64 * g.fact1;
        let sth = ((1.0 + z) * (1.0 - z)).sqrt();
        (z.acos(), z, sth)
    }
}

/// First pixel, pixel count and shift (first centre at φ ≠ 0) of ring `i`; integers only.
#[inline]
pub(crate) fn ring_layout(g: &Geom, i: u64) -> (u64, u64, bool) {
    let n = g.nside;
    if i < n {
        (2 * i * (i - 1), 4 * i, true)
    } else if i <= 3 * n {
        (g.ncap + (i - n) * 4 * n, 4 * n, (i - n).is_multiple_of(2))
    } else {
        let s = 4 * n - i;
        (g.npix - 2 * s * (s + 1), 4 * s, true)
    }
}

/// φ of the centre of the `iphi`-th pixel (1-based) of ring `i`, with HEALPix's RING-scheme
/// operation order.
#[inline]
pub(crate) fn ring_phi(g: &Geom, i: u64, iphi: u64) -> f64 {
    let n = g.nside;
    let north = if i > 2 * n { 4 * n - i } else { i };
    if north < n {
        (iphi as f64 - 0.5) * FRAC_PI_2 / north as f64
    } else {
        // Unshifted rings (i + nside odd) start at φ = 0, the others half a pixel later.
        let fodd = if (i + n) & 1 == 1 { 1.0 } else { 0.5 };
        (iphi as f64 - fodd) * PI * 0.75 * g.fact1
    }
}

/// Ring (1-based from the north) and position in the ring (1-based) of a RING pixel.
#[inline]
pub(crate) fn ring_position(g: &Geom, pix: u64) -> (u64, u64) {
    debug_assert!(
        pix < g.npix,
        "pixel {pix} out of range for nside {}",
        g.nside
    );
    let n = g.nside;
    if pix < g.ncap {
        // Ring i of the north cap starts at 2i(i−1).
        let i = (1 + isqrt(1 + 2 * pix)) >> 1;
        (i, pix + 1 - 2 * i * (i - 1))
    } else if pix < g.npix - g.ncap {
        let k = g.div_nside(pix - g.ncap) >> 2;
        (k + n, pix - g.ncap - 4 * n * k + 1)
    } else {
        // Mirror of the north cap, counted from the last pixel.
        let back = g.npix - pix;
        let s = (1 + isqrt(2 * back - 1)) >> 1;
        (4 * n - s, 4 * s + 1 - (back - 2 * s * (s - 1)))
    }
}

/// Geometry of ring `i` (1 ..= 4·nside−1). Panics if `i` is out of range.
pub fn ring(nside: u64, i: usize) -> Ring {
    let g = Geom::new(nside);
    ring_from(&g, i as u64)
}

pub(crate) fn ring_from(g: &Geom, i: u64) -> Ring {
    assert!(
        (1..4 * g.nside).contains(&i),
        "ring index {i} outside 1..={} for nside {}",
        4 * g.nside - 1,
        g.nside
    );
    let (theta, z, sin_theta) = ring_latitude(g, i);
    let (first, nphi, _) = ring_layout(g, i);
    Ring {
        theta,
        z,
        sin_theta,
        nphi: nphi as usize,
        phi0: ring_phi(g, i, 1),
        first,
    }
}

/// All 4·nside−1 rings, north to south.
pub fn rings(nside: u64) -> Vec<Ring> {
    let g = Geom::new(nside);
    (1..4 * nside).map(|i| ring_from(&g, i)).collect()
}

/// 1-based ring index of a RING pixel.
pub fn ring_of_pixel(nside: u64, pix: u64) -> usize {
    ring_position(&Geom::new(nside), pix).0 as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::healpix::nside2npix;

    #[test]
    fn rings_tile_the_pixels() {
        for nside in [1u64, 2, 3, 4, 5, 8, 13, 64] {
            let rs = rings(nside);
            assert_eq!(rs.len() as u64, 4 * nside - 1);
            let mut next = 0;
            for (k, r) in rs.iter().enumerate() {
                assert_eq!(r.first, next, "nside {nside} ring {}", k + 1);
                next += r.nphi as u64;
                assert_eq!(ring_of_pixel(nside, r.first), k + 1);
                assert_eq!(ring_of_pixel(nside, r.first + r.nphi as u64 - 1), k + 1);
            }
            assert_eq!(next, nside2npix(nside));
        }
    }

    #[test]
    fn rings_are_symmetric() {
        for nside in [1u64, 2, 7, 16] {
            let rs = rings(nside);
            let m = rs.len();
            for k in 0..m {
                let (a, b) = (rs[k], rs[m - 1 - k]);
                assert_eq!(a.z, -b.z);
                assert_eq!(a.sin_theta, b.sin_theta);
                assert_eq!(a.nphi, b.nphi);
                assert_eq!(a.phi0, b.phi0);
                assert!((a.theta + b.theta - PI).abs() < 1e-15);
            }
        }
    }

    #[test]
    fn ring_latitudes_match_closed_forms() {
        let nside = 32u64;
        for r in rings(nside).iter().zip(1u64..) {
            let (r, i) = r;
            let n = nside as f64;
            let expect = if i < nside {
                2.0 * (i as f64 / (6f64.sqrt() * n)).asin()
            } else if i <= 3 * nside {
                (2.0 * (2.0 * n - i as f64) / (3.0 * n)).acos()
            } else {
                PI - 2.0 * ((4 * nside - i) as f64 / (6f64.sqrt() * n)).asin()
            };
            assert!((r.theta - expect).abs() < 4e-16 * PI, "ring {i}");
            assert!((r.z - r.theta.cos()).abs() < 1e-15);
            assert!((r.sin_theta - r.theta.sin()).abs() < 1e-15);
            assert!((r.sin_theta.hypot(r.z) - 1.0).abs() < 1e-15);
            let shifted = r.phi0 != 0.0;
            if shifted {
                assert!((r.phi0 - PI / r.nphi as f64).abs() < 1e-16);
            }
        }
    }
}
