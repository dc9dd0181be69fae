//! HEALPix geometry (RING and NEST), bit-for-bit identical to healpy (HEALPix C++).
//!
//! Pixel centres and pixel lookup reproduce HEALPix C++'s arithmetic operation by operation
//! (same constants, same evaluation order, same `cos θ` / separate `sin θ` switch near the
//! poles), so that `ang2pix` returns the same pixel and `pix2ang` the same bits as healpy.
//!
//! - [`ring`]: per-ring geometry (θ, cos θ, sin θ, pixels per ring, φ of the first pixel).
//! - [`pix`]: `pix2ang` / `ang2pix` for one pixel or point.
//! - [`nest`]: NEST bit interleaving and RING <-> NEST conversion.
//! - [`par`]: validated, rayon-parallel slice versions used by the Python bindings.
//!
//! Angles are radians: θ is the colatitude in [0, π] (0 = north pole), φ the longitude.
//! Pixel indices are `u64` in the scalar API and `i64` (NumPy's int64) in the slice API.

pub mod nest;
pub mod par;
pub mod pix;
pub mod ring;

pub use nest::{nest2ring, ring2nest};
pub use par::{ang2pix_slice, nest2ring_slice, pix2ang_slice, ring2nest_slice, vec2pix_slice};
pub use pix::{ang2pix_nest, ang2pix_ring, pix2ang_nest, pix2ang_ring};
pub use ring::{ring, ring_of_pixel, rings, Ring};

use crate::error::{Error, Result};

/// Largest nside HEALPix supports (pixel indices then still fit in 64 bits).
pub const MAX_NSIDE: u64 = 1 << 29;

/// Check an nside: 1 ..= 2^29, and a power of two for NEST (RING accepts any, as healpy's
/// C++ core does). The error names `nside`.
pub fn check_nside(nside: u64, nest: bool) -> Result<()> {
    if nside == 0 || nside > MAX_NSIDE {
        return Err(Error::value(format!(
            "nside must be between 1 and 2**29, got {nside}"
        )));
    }
    if nest && !nside.is_power_of_two() {
        return Err(Error::value(format!(
            "nside must be a power of 2 for the NEST scheme, got {nside}"
        )));
    }
    Ok(())
}

/// Number of pixels, 12·nside².
pub fn nside2npix(nside: u64) -> u64 {
    12 * nside * nside
}

/// Per-nside constants, named and computed as HEALPix C++ does (`fact1`, `fact2` enter the
/// pixel-centre formulas, so they must be the same doubles).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geom {
    pub nside: u64,
    /// log2(nside) when nside is a power of two.
    pub order: Option<u32>,
    pub npix: u64,
    /// Pixels in the north polar cap (rings 1 .. nside-1).
    pub ncap: u64,
    /// 2·nside·fact2 = 2/(3·nside).
    pub fact1: f64,
    /// 4/npix.
    pub fact2: f64,
}

impl Geom {
    pub fn new(nside: u64) -> Self {
        let npix = nside2npix(nside);
        let fact2 = 4.0 / npix as f64;
        Geom {
            nside,
            order: nside.is_power_of_two().then(|| nside.trailing_zeros()),
            npix,
            ncap: 2 * (nside * nside - nside),
            fact1: (2 * nside) as f64 * fact2,
            fact2,
        }
    }

    /// v / nside for v >= 0: a shift when nside is a power of two (64-bit division costs
    /// more than the rest of a pixel conversion).
    #[inline]
    pub fn div_nside(&self, v: u64) -> u64 {
        match self.order {
            Some(o) => v >> o,
            None => v / self.nside,
        }
    }

    /// v mod 4·nside for v >= 0, a mask when nside is a power of two.
    #[inline]
    pub fn mod_4nside(&self, v: u64) -> u64 {
        match self.order {
            Some(_) => v & (4 * self.nside - 1),
            None => v % (4 * self.nside),
        }
    }
}

/// HEALPix's `fmodulo`: v1 mod v2 in [0, v2), with the same rounding as the C++ code.
#[inline]
pub(crate) fn fmodulo(v1: f64, v2: f64) -> f64 {
    if v1 >= 0.0 {
        if v1 < v2 {
            v1
        } else {
            v1 % v2
        }
    } else {
        let t = v1 % v2 + v2;
        if t == v2 {
            0.0
        } else {
            t
        }
    }
}

/// Exact floor(sqrt(v)) for v < 2^62 (the f64 estimate can be one off for large v).
#[inline]
pub(crate) fn isqrt(v: u64) -> u64 {
    let mut r = (v as f64).sqrt() as u64;
    while r * r > v {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= v {
        r += 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nside_checks() {
        assert!(check_nside(1, true).is_ok());
        assert!(check_nside(MAX_NSIDE, true).is_ok());
        assert!(check_nside(3, false).is_ok());
        assert!(check_nside(3, true).is_err());
        assert!(check_nside(0, false).is_err());
        assert!(check_nside(MAX_NSIDE + 1, false).is_err());
        let msg = check_nside(6, true).unwrap_err().to_string();
        assert!(msg.contains("nside"), "{msg}");
    }

    #[test]
    fn isqrt_exact() {
        for v in (0..10_000u64).chain([(1 << 60) - 1, 1 << 60, (1 << 62) - 1]) {
            let r = isqrt(v);
            assert!(r * r <= v && (r + 1) * (r + 1) > v, "{v}");
        }
        for r in [(1u64 << 30) - 1, 1 << 30, 3_037_000_000] {
            assert_eq!(isqrt(r * r), r);
            assert_eq!(isqrt(r * r - 1), r - 1);
        }
    }

    #[test]
    fn fmodulo_range() {
        let tau = std::f64::consts::TAU;
        for v in [-1e300, -7.0, -tau, -1e-300, -0.0, 0.0, 1.0, tau, 7.0, 1e300] {
            let m = fmodulo(v, tau);
            assert!((0.0..tau).contains(&m), "{v} -> {m}");
        }
    }
}
