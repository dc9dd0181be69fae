//! Pixel centre <-> pixel lookup for one pixel or point, as HEALPix C++ computes them.
//!
//! Bit-for-bit agreement with healpy needs the same operations in the same order: a
//! different but mathematically equal formula (φ = π/(4·nside)·k instead of
//! (k·π)·0.75·fact1, say) moves results by an ulp and points on pixel edges to the
//! neighbour. Hence the odd-looking expressions below; do not "simplify" them.

use std::f64::consts::{FRAC_2_PI, FRAC_PI_2, PI, TAU};

use super::nest::{nest2xyf, xyf2nest, FACE_PHI, FACE_RING};
use super::ring::{ring_latitude, ring_phi, ring_position};
use super::{fmodulo, Geom};

const TWOTHIRD: f64 = 2.0 / 3.0;
/// HEALPix switches to a separately computed sin θ for θ outside [0.01, this]. The literal
/// 3.14159 (not π) is HEALPix's; points between the two bounds would otherwise differ.
#[allow(clippy::approx_constant)]
const POLE_ZONE_SOUTH: f64 = 3.14159 - 0.01;

/// Slack above π that healpy accepts for θ (rounding of π/2 − lat and the like).
pub const THETA_SLACK: f64 = 1e-5;

/// (θ, φ) in radians of the centre of RING pixel `pix` (< 12·nside², not checked).
pub fn pix2ang_ring(nside: u64, pix: u64) -> (f64, f64) {
    pix2ang_ring_in(&Geom::new(nside), pix)
}

#[inline]
pub(crate) fn pix2ang_ring_in(g: &Geom, pix: u64) -> (f64, f64) {
    let (i, iphi) = ring_position(g, pix);
    // Ring latitudes are shared with `ring()`; NEST gets the same θ below.
    let (theta, _, _) = ring_latitude(g, i);
    (theta, ring_phi(g, i, iphi))
}

/// (θ, φ) in radians of the centre of NEST pixel `pix` (nside a power of two and
/// pix < 12·nside², not checked).
pub fn pix2ang_nest(nside: u64, pix: u64) -> (f64, f64) {
    pix2ang_nest_in(&Geom::new(nside), pix)
}

#[inline]
pub(crate) fn pix2ang_nest_in(g: &Geom, pix: u64) -> (f64, f64) {
    let order = g.order.expect("NEST needs a power-of-two nside");
    let n = g.nside as i64;
    let (x, y, face) = nest2xyf(order, pix);
    let (x, y, f) = (x as i64, y as i64, face as usize);
    let i = (FACE_RING[f] << order) - x - y - 1;
    let (theta, _, _) = ring_latitude(g, i as u64);
    // Pixels per quadrant in this ring.
    let nr = if i < n {
        i
    } else if i > 3 * n {
        4 * n - i
    } else {
        n
    };
    let mut k = FACE_PHI[f] * nr + x - y;
    if k < 0 {
        k += 8 * nr;
    }
    // NEST's φ formula differs from RING's in operation order (and so in the last bit).
    let phi = if nr == n {
        0.75 * FRAC_PI_2 * k as f64 * g.fact1
    } else {
        (0.5 * FRAC_PI_2 * k as f64) / nr as f64
    };
    (theta, phi)
}

/// Fold (θ, φ) as healpy does before the lookup: θ in (π, 2π) is reflected (φ += π), then
/// φ is reduced to [0, 2π).
#[inline]
fn normalize(theta: f64, phi: f64) -> (f64, f64) {
    let mut t = fmodulo(theta, TAU);
    let mut p = phi;
    if t > PI {
        p += PI;
        t = TAU - t;
    }
    (t, fmodulo(p, TAU))
}

/// z = cos θ, φ, and sin θ where the point is within 0.01 rad of a pole (where 1 − |z|
/// has lost too many digits).
#[inline]
fn location(theta: f64, phi: f64) -> (f64, f64, Option<f64>) {
    let (t, p) = normalize(theta, phi);
    let sth = (!(0.01..=POLE_ZONE_SOUTH).contains(&t)).then(|| t.sin());
    (t.cos(), p, sth)
}

/// Distance from the nearer pole in units where the polar rings are at 1, 2, 3, ...
#[inline]
fn polar_scale(n: f64, za: f64, sth: Option<f64>) -> f64 {
    match sth {
        Some(s) if za >= 0.99 => n * s / ((1.0 + za) / 3.0).sqrt(),
        _ => n * (3.0 * (1.0 - za)).sqrt(),
    }
}

/// RING pixel containing the point (θ, φ) in radians. θ in [0, π + 1e-5] (values above π
/// are reflected as in healpy), φ any finite value (taken modulo 2π). Not checked here.
pub fn ang2pix_ring(nside: u64, theta: f64, phi: f64) -> u64 {
    ang2pix_ring_in(&Geom::new(nside), theta, phi)
}

#[inline]
pub(crate) fn ang2pix_ring_in(g: &Geom, theta: f64, phi: f64) -> u64 {
    let (z, phi, sth) = location(theta, phi);
    loc2pix_ring_in(g, z, phi, sth)
}

/// z = v_z/|v|, φ = atan2(v_y, v_x) (0 on the z axis) and, where |z| > 0.99, sin θ =
/// √(v_x² + v_y²)/|v|: the location of a direction as HEALPix's vec2pix takes it (z straight
/// from the vector, not through θ, so a vector in the equatorial plane has z = 0 exactly).
#[inline]
fn vec_location(x: f64, y: f64, z: f64) -> (f64, f64, Option<f64>) {
    let xl = 1.0 / (x * x + y * y + z * z).sqrt();
    let phi = if x == 0.0 && y == 0.0 {
        0.0
    } else {
        y.atan2(x)
    };
    let nz = z * xl;
    let sth = (nz.abs() > 0.99).then(|| (x * x + y * y).sqrt() * xl);
    (nz, phi, sth)
}

/// RING pixel containing the direction of the vector (x, y, z) (finite, not zero; not
/// checked here).
#[inline]
pub(crate) fn vec2pix_ring_in(g: &Geom, x: f64, y: f64, z: f64) -> u64 {
    let (z, phi, sth) = vec_location(x, y, z);
    loc2pix_ring_in(g, z, phi, sth)
}

/// NEST pixel containing the direction of the vector (x, y, z); nside a power of two.
#[inline]
pub(crate) fn vec2pix_nest_in(g: &Geom, x: f64, y: f64, z: f64) -> u64 {
    let (z, phi, sth) = vec_location(x, y, z);
    loc2pix_nest_in(g, z, phi, sth)
}

#[inline]
fn loc2pix_ring_in(g: &Geom, z: f64, phi: f64, sth: Option<f64>) -> u64 {
    let n = g.nside as i64;
    let nf = g.nside as f64;
    let za = z.abs();
    let tt = fmodulo(phi * FRAC_2_PI, 4.0); // φ in units of π/2, in [0, 4)
    if za <= TWOTHIRD {
        // Equatorial belt: indices of the ascending and descending edge lines.
        let nl4 = 4 * n;
        let t1 = nf * (0.5 + tt);
        let t2 = nf * z * 0.75;
        let asc = (t1 - t2) as i64;
        let desc = (t1 + t2) as i64;
        let ir = n + 1 + asc - desc; // ring counted from z = 2/3, 1 ..= 2n+1
        let kshift = 1 - (ir & 1);
        let ip = g.mod_4nside(((asc + desc - n + kshift + 1 + 2 * nl4) >> 1) as u64) as i64;
        (g.ncap as i64 + (ir - 1) * nl4 + ip) as u64
    } else {
        let tp = tt - (tt as i64) as f64;
        let scale = polar_scale(nf, za, sth);
        let asc = (tp * scale) as i64;
        let desc = ((1.0 - tp) * scale) as i64;
        let ir = asc + desc + 1; // ring counted from the nearer pole
        let ip = (tt * ir as f64) as i64;
        debug_assert!((0..4 * ir).contains(&ip));
        if z > 0.0 {
            (2 * ir * (ir - 1) + ip) as u64
        } else {
            (g.npix as i64 - 2 * ir * (ir + 1) + ip) as u64
        }
    }
}

/// NEST pixel containing the point (θ, φ) in radians; nside a power of two. Same angle
/// conventions as [`ang2pix_ring`].
pub fn ang2pix_nest(nside: u64, theta: f64, phi: f64) -> u64 {
    ang2pix_nest_in(&Geom::new(nside), theta, phi)
}

#[inline]
pub(crate) fn ang2pix_nest_in(g: &Geom, theta: f64, phi: f64) -> u64 {
    let (z, phi, sth) = location(theta, phi);
    loc2pix_nest_in(g, z, phi, sth)
}

#[inline]
fn loc2pix_nest_in(g: &Geom, z: f64, phi: f64, sth: Option<f64>) -> u64 {
    let order = g.order.expect("NEST needs a power-of-two nside");
    let n = g.nside as i64;
    let nf = g.nside as f64;
    let za = z.abs();
    let tt = fmodulo(phi * FRAC_2_PI, 4.0);
    if za <= TWOTHIRD {
        let t1 = nf * (0.5 + tt);
        let t2 = nf * (z * 0.75); // not (nf·z)·0.75 as in RING: HEALPix differs here too
        let asc = (t1 - t2) as i64;
        let desc = (t1 + t2) as i64;
        let (fa, fd) = (asc >> order, desc >> order);
        let face = match fa.cmp(&fd) {
            std::cmp::Ordering::Equal => fa | 4,
            std::cmp::Ordering::Less => fa,
            std::cmp::Ordering::Greater => fd + 8,
        };
        let x = desc & (n - 1);
        let y = n - (asc & (n - 1)) - 1;
        xyf2nest(order, x as u64, y as u64, face as u64)
    } else {
        let quadrant = (tt as i64).min(3);
        let tp = tt - quadrant as f64;
        let scale = polar_scale(nf, za, sth);
        // Clamp points that round onto the face's outer edge.
        let asc = ((tp * scale) as i64).min(n - 1);
        let desc = (((1.0 - tp) * scale) as i64).min(n - 1);
        if z >= 0.0 {
            xyf2nest(
                order,
                (n - desc - 1) as u64,
                (n - asc - 1) as u64,
                quadrant as u64,
            )
        } else {
            xyf2nest(order, asc as u64, desc as u64, quadrant as u64 + 8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::healpix::{nest2ring, nside2npix, ring2nest};

    #[test]
    fn vec2pix_takes_z_from_the_vector() {
        let g = Geom::new(16);
        // healpy.vec2pix(16, 1, 0, 0): z = 0 exactly, unlike cos(π/2) = 6e-17 via θ.
        assert_eq!(vec2pix_ring_in(&g, 1.0, 0.0, 0.0), 1504);
        assert_eq!(ang2pix_ring(16, FRAC_PI_2, 0.0), 1440);
        assert_eq!(vec2pix_ring_in(&g, 0.0, 0.0, 2.0), 0);
        assert_eq!(vec2pix_ring_in(&g, 0.0, 0.0, -1.0), nside2npix(16) - 4);
        // Away from edges the vector and the angle give the same pixel.
        for &(t, p) in &[(0.3f64, 1.1f64), (1.9, 4.0), (0.001, 2.0), (3.1, 0.5)] {
            let (x, y, z) = (t.sin() * p.cos(), t.sin() * p.sin(), t.cos());
            assert_eq!(vec2pix_ring_in(&g, x, y, z), ang2pix_ring(16, t, p));
            assert_eq!(vec2pix_nest_in(&g, x, y, z), ang2pix_nest(16, t, p));
        }
    }

    #[test]
    fn healpy_doc_values() {
        // From healpy's docstrings.
        assert_eq!(ang2pix_ring(16, FRAC_PI_2, 0.0), 1440);
        assert_eq!(ang2pix_ring(16, PI / 4.0, PI / 4.0), 427);
        assert_eq!(ang2pix_ring(16, 0.0, 0.0), 0);
        assert_eq!(ang2pix_ring(16, PI, 0.0), 3068);
        let (t, p) = pix2ang_ring(16, 1440);
        assert_eq!((t, p), (1.5291175943723188, 0.0));
    }

    #[test]
    fn centres_map_back_to_their_pixel() {
        for nside in [1u64, 2, 3, 4, 7, 16, 32] {
            for p in 0..nside2npix(nside) {
                let (t, f) = pix2ang_ring(nside, p);
                assert_eq!(ang2pix_ring(nside, t, f), p, "ring nside {nside} pix {p}");
                if nside.is_power_of_two() {
                    let (t, f) = pix2ang_nest(nside, p);
                    assert_eq!(ang2pix_nest(nside, t, f), p, "nest nside {nside} pix {p}");
                    // Both schemes place the same pixel at (nearly) the same spot.
                    let (tr, fr) = pix2ang_ring(nside, nest2ring(nside, p));
                    assert_eq!(t, tr);
                    assert!((f - fr).abs() <= 4.0 * f64::EPSILON * TAU);
                }
            }
        }
    }

    #[test]
    fn poles_and_seam() {
        let nside = 8;
        let npix = nside2npix(nside);
        assert_eq!(ang2pix_ring(nside, 0.0, 0.0), 0);
        assert_eq!(ang2pix_ring(nside, PI, 0.0), npix - 4);
        assert_eq!(ang2pix_ring(nside, 1.0, TAU), ang2pix_ring(nside, 1.0, 0.0));
        assert_eq!(
            ang2pix_ring(nside, 1.0, -TAU),
            ang2pix_ring(nside, 1.0, 0.0)
        );
        assert_eq!(ang2pix_nest(nside, 0.0, 0.0), ring2nest(nside, 0));
        // Slightly past the south pole reflects to the other side, as in healpy.
        assert_eq!(ang2pix_ring(4, PI + 1e-6, 0.0), 190);
        assert_eq!(ang2pix_nest(4, PI + 1e-6, 0.0), 160);
    }
}
