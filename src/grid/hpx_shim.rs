//! TEMPORARY stand-in for the parts of `crate::healpix` that gridding uses, with exactly that
//! module's signatures, until the healpix branch lands. Delete this file and point `hpx` in
//! `grid/mod.rs` at `crate::healpix` after `git merge healpix`.

use std::f64::consts::PI;

use crate::error::{Error, Result};

pub fn check_nside(nside: u64, nest: bool) -> Result<()> {
    if nside == 0 || nside > (1 << 29) || (nest && !nside.is_power_of_two()) {
        return Err(Error::value(format!(
            "nside must be in 1..=2^29{}, got {nside}",
            if nest {
                " and a power of 2 for NEST"
            } else {
                ""
            }
        )));
    }
    Ok(())
}

pub fn nside2npix(nside: u64) -> u64 {
    12 * nside * nside
}

fn isqrt(v: u64) -> u64 {
    let mut r = (v as f64).sqrt() as u64;
    while r * r > v {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= v {
        r += 1;
    }
    r
}

/// Ring index (1..=4 nside − 1) of a RING pixel.
pub fn ring_of_pixel(nside: u64, pix: u64) -> usize {
    let ncap = 2 * nside * (nside - 1);
    let npix = nside2npix(nside);
    if pix < ncap {
        isqrt(1 + 2 * pix).div_ceil(2) as usize
    } else if pix < npix - ncap {
        ((pix - ncap) / (4 * nside) + nside) as usize
    } else {
        let ip = npix - pix;
        (4 * nside - isqrt(2 * ip - 1).div_ceil(2)) as usize
    }
}

/// (theta, phi) in radians of the centre of RING pixel `pix`.
pub fn pix2ang_ring(nside: u64, pix: u64) -> (f64, f64) {
    let ncap = 2 * nside * (nside - 1);
    let npix = nside2npix(nside);
    let nsf = nside as f64;
    if pix < ncap {
        let iring = isqrt(1 + 2 * pix).div_ceil(2);
        let iphi = pix + 1 - 2 * iring * (iring - 1);
        let theta = 2.0 * (iring as f64 / (6f64.sqrt() * nsf)).asin();
        (theta, (iphi as f64 - 0.5) * PI / (2.0 * iring as f64))
    } else if pix < npix - ncap {
        let ip = pix - ncap;
        let iring = ip / (4 * nside) + nside;
        let iphi = ip % (4 * nside) + 1;
        let fodd = if (iring + nside) & 1 == 1 { 1.0 } else { 0.5 };
        let z = (2.0 * nsf - iring as f64) * 2.0 / (3.0 * nsf);
        (z.acos(), (iphi as f64 - fodd) * PI / (2.0 * nsf))
    } else {
        let ip = npix - pix;
        let iring = isqrt(2 * ip - 1).div_ceil(2);
        let iphi = 4 * iring + 1 - (ip - 2 * iring * (iring - 1));
        let theta = PI - 2.0 * (iring as f64 / (6f64.sqrt() * nsf)).asin();
        (theta, (iphi as f64 - 0.5) * PI / (2.0 * iring as f64))
    }
}

/// RING pixel containing (theta, phi) (radians).
pub fn ang2pix_ring(nside: u64, theta: f64, phi: f64) -> u64 {
    let z = theta.cos();
    let za = z.abs();
    let tt = (phi * (2.0 / PI)).rem_euclid(4.0);
    let ns = nside as i64;
    if za <= 2.0 / 3.0 {
        let t1 = nside as f64 * (0.5 + tt);
        let t2 = nside as f64 * z * 0.75;
        let jp = (t1 - t2) as i64;
        let jm = (t1 + t2) as i64;
        let ir = ns + 1 + jp - jm;
        let kshift = 1 - (ir & 1);
        let ip = ((jp + jm - ns + kshift + 1) / 2).rem_euclid(4 * ns);
        (2 * ns * (ns - 1) + (ir - 1) * 4 * ns + ip) as u64
    } else {
        let tp = tt - tt.floor();
        let tmp = nside as f64 * (3.0 * (1.0 - za)).sqrt();
        let jp = (tp * tmp) as i64;
        let jm = ((1.0 - tp) * tmp) as i64;
        let ir = (jp + jm + 1).min(ns);
        let ip = ((tt * ir as f64) as i64).rem_euclid(4 * ir);
        if z > 0.0 {
            (2 * ir * (ir - 1) + ip) as u64
        } else {
            (12 * ns * ns - 2 * ir * (ir + 1) + ip) as u64
        }
    }
}

/// NEST pixel index -> RING pixel index.
pub fn nest2ring(nside: u64, pix: u64) -> u64 {
    const JRLL: [u64; 12] = [2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4];
    const JPLL: [u64; 12] = [1, 3, 5, 7, 0, 2, 4, 6, 1, 3, 5, 7];
    let npface = nside * nside;
    let face = (pix / npface) as usize;
    let ipf = pix % npface;
    let (mut ix, mut iy) = (0u64, 0u64);
    for b in 0..32 {
        ix |= ((ipf >> (2 * b)) & 1) << b;
        iy |= ((ipf >> (2 * b + 1)) & 1) << b;
    }
    let nl4 = 4 * nside;
    let npix = nside2npix(nside);
    let ncap = 2 * nside * (nside - 1);
    let jr = JRLL[face] * nside - ix - iy - 1;
    let (nr, n_before, kshift) = if jr < nside {
        (jr, 2 * jr * (jr - 1), 0)
    } else if jr > 3 * nside {
        let nr = nl4 - jr;
        (nr, npix - 2 * (nr + 1) * nr, 0)
    } else {
        (nside, ncap + (jr - nside) * nl4, (jr - nside) & 1)
    };
    let mut jp = (JPLL[face] * nr + ix + 1 + kshift) as i64 - iy as i64;
    jp /= 2;
    if jp > nl4 as i64 {
        jp -= nl4 as i64;
    }
    if jp < 1 {
        jp += nl4 as i64;
    }
    n_before + jp as u64 - 1
}
