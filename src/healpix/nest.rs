//! NEST scheme: (x, y, face) <-> pixel by bit interleaving, and RING <-> NEST.
//!
//! The 12 base faces: 0–3 around the north pole, 4–7 on the equator, 8–11 around the south
//! pole. Within a face, x grows towards the south-east and y towards the south-west, so the
//! ring of face pixel (x, y) is `FACE_RING[f]·nside − x − y − 1`.

use super::ring::{ring_layout, ring_position};
use super::Geom;

/// Ring index (in units of nside) of each face's southernmost corner.
pub(crate) const FACE_RING: [i64; 12] = [2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4];
/// Longitude of each face's centre in units of π/4.
pub(crate) const FACE_PHI: [i64; 12] = [1, 3, 5, 7, 0, 2, 4, 6, 1, 3, 5, 7];

/// Spread the low 32 bits of `v` to the even bit positions.
#[inline]
fn spread(v: u64) -> u64 {
    let mut x = v & 0xFFFF_FFFF;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Inverse of `spread`: gather the even bits of `v`.
#[inline]
fn compact(v: u64) -> u64 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    (x | (x >> 16)) & 0xFFFF_FFFF
}

/// NEST pixel of face pixel (x, y) on `face` (nside = 2^order).
#[inline]
pub(crate) fn xyf2nest(order: u32, x: u64, y: u64, face: u64) -> u64 {
    (face << (2 * order)) + spread(x) + (spread(y) << 1)
}

/// (x, y, face) of a NEST pixel (nside = 2^order).
#[inline]
pub(crate) fn nest2xyf(order: u32, pix: u64) -> (u64, u64, u64) {
    let face = pix >> (2 * order);
    debug_assert!(
        face < 12,
        "NEST pixel {pix} out of range for nside 2^{order}"
    );
    let within = pix & ((1u64 << (2 * order)) - 1);
    (compact(within), compact(within >> 1), face)
}

/// (x, y, face) of a RING pixel.
pub(crate) fn ring2xyf(g: &Geom, pix: u64) -> (u64, u64, u64) {
    let n = g.nside as i64;
    let (i, j) = ring_position(g, pix);
    let (i, j) = (i as i64, j as i64);
    // nr: pixels per ring per quadrant; shift: 1 for rings whose first centre is at φ = 0.
    let (face, nr, shift) = if i < n {
        ((j - 1) / i, i, 0)
    } else if i > 3 * n {
        let s = 4 * n - i;
        (8 + (j - 1) / s, s, 0)
    } else {
        // Equatorial: the face follows from which of the nside-spaced ascending and
        // descending edge lines the pixel centre lies between.
        let ire = i - n + 1;
        let irm = 2 * n + 2 - ire;
        let desc = g.div_nside((j - ire / 2 + n - 1) as u64) as i64;
        let asc = g.div_nside((j - irm / 2 + n - 1) as u64) as i64;
        let face = match asc.cmp(&desc) {
            std::cmp::Ordering::Equal => asc | 4,
            std::cmp::Ordering::Less => asc,
            std::cmp::Ordering::Greater => desc + 8,
        };
        (face, n, (i + n) & 1)
    };
    let f = face as usize;
    // Ring and longitude relative to the face's corner give x − y and x + y.
    let dr = i - FACE_RING[f] * n + 1;
    let mut dp = 2 * j - FACE_PHI[f] * nr - shift - 1;
    if dp >= 2 * n {
        dp -= 8 * n;
    }
    (
        ((dp - dr) >> 1) as u64,
        ((-dp - dr) >> 1) as u64,
        face as u64,
    )
}

/// RING pixel of face pixel (x, y) on `face`.
pub(crate) fn xyf2ring(g: &Geom, x: u64, y: u64, face: u64) -> u64 {
    let n = g.nside as i64;
    let (x, y, f) = (x as i64, y as i64, face as usize);
    let i = FACE_RING[f] * n - x - y - 1;
    let (first, nphi, shifted) = ring_layout(g, i as u64);
    let nr = nphi as i64 / 4;
    let num = FACE_PHI[f] * nr + x - y + 1 + i64::from(!shifted);
    debug_assert!(num % 2 == 0);
    let mut j = num / 2;
    if j < 1 {
        // Only face 4 reaches back across φ = 0.
        j += 4 * n;
    }
    debug_assert!(j <= 4 * nr);
    first + j as u64 - 1
}

/// RING -> NEST. nside must be a power of two and `pix` < 12·nside² (not checked here).
pub fn ring2nest(nside: u64, pix: u64) -> u64 {
    let g = Geom::new(nside);
    ring2nest_in(&g, pix)
}

/// NEST -> RING. nside must be a power of two and `pix` < 12·nside² (not checked here).
pub fn nest2ring(nside: u64, pix: u64) -> u64 {
    let g = Geom::new(nside);
    nest2ring_in(&g, pix)
}

#[inline]
pub(crate) fn ring2nest_in(g: &Geom, pix: u64) -> u64 {
    let order = g.order.expect("NEST needs a power-of-two nside");
    let (x, y, f) = ring2xyf(g, pix);
    xyf2nest(order, x, y, f)
}

#[inline]
pub(crate) fn nest2ring_in(g: &Geom, pix: u64) -> u64 {
    let order = g.order.expect("NEST needs a power-of-two nside");
    let (x, y, f) = nest2xyf(order, pix);
    xyf2ring(g, x, y, f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::healpix::nside2npix;

    #[test]
    fn bits_round_trip() {
        for v in [0u64, 1, 2, 3, 0x1234_5678, (1 << 29) - 1, 0xFFFF_FFFF] {
            assert_eq!(compact(spread(v)), v);
            assert_eq!(compact(spread(v) >> 1), 0);
        }
        assert_eq!(xyf2nest(2, 1, 0, 0), 1);
        assert_eq!(xyf2nest(2, 0, 1, 0), 2);
        assert_eq!(xyf2nest(2, 3, 3, 11), 11 * 16 + 15);
    }

    #[test]
    fn ring_nest_are_inverse_permutations() {
        for order in 0..6 {
            let nside = 1u64 << order;
            let npix = nside2npix(nside);
            let mut seen = vec![false; npix as usize];
            for p in 0..npix {
                let q = ring2nest(nside, p);
                assert!(q < npix);
                assert!(!seen[q as usize], "nside {nside}: {q} hit twice");
                seen[q as usize] = true;
                assert_eq!(nest2ring(nside, q), p);
            }
        }
    }

    #[test]
    fn xyf_round_trip_any_nside() {
        // RING <-> (x, y, face) also works where nside is not a power of two.
        for nside in [1u64, 3, 5, 6, 12] {
            let g = Geom::new(nside);
            for p in 0..nside2npix(nside) {
                let (x, y, f) = ring2xyf(&g, p);
                assert!(x < nside && y < nside && f < 12, "nside {nside} pix {p}");
                assert_eq!(xyf2ring(&g, x, y, f), p, "nside {nside} pix {p}");
            }
        }
    }

    #[test]
    fn known_values() {
        // Values from the HEALPix documentation (healpy doctests).
        assert_eq!(nest2ring(16, 1130), 1504);
        let n2r: Vec<u64> = (0..10).map(|p| nest2ring(2, p)).collect();
        assert_eq!(n2r, [13, 5, 4, 0, 15, 7, 6, 1, 17, 9]);
    }
}
