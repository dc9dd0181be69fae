//! Masked (normalised) ring smoothing in one core call: s = smooth(m·w) / smooth(w) where
//! smooth(w) ≥ thr (and > 0), else UNSEEN, for one RING map and one or several kernels.
//!
//! w is the mask (1 without one) and 0 at the map's missing pixels (healpy's UNSEEN test or
//! not finite); m·w is 0·w where w is not > 0. The two maps share one ring plan per beam and
//! every kernel spectrum (`cpu::convolve_many`); on the GPU ([`cuda::masked`]) the map and
//! the mask go up once, w and m·w are formed there, and only the normalised result comes
//! down. Both give the bits of the Python reference (`skyconv.smooth.masked`): the same
//! single IEEE operations per pixel.

use rayon::prelude::*;

use super::{cpu, cuda, plans_of, RingPlan};
use crate::backend::{alloc, Device};
use crate::error::{Error, Result};
use crate::healpix as hp;

/// UNSEEN as written into the output where smooth(w) < thr.
const UNSEEN: f64 = crate::sht::UNSEEN;
/// Pixels per rayon task of the per-pixel passes.
const MIN_LEN: usize = 1 << 14;

/// w (mask or 1, 0 at missing pixels of `map`) into `w`, m·w into `mw`; false when a mask value
/// is not in [0, 1] (NaN included): the argument check rides on this pass (every output is
/// written all the same).
pub fn prep(map: &[f64], mask: Option<&[f64]>, mw: &mut [f64], w: &mut [f64]) -> bool {
    let one = |(x, (o, wo)): (&f64, (&mut f64, &mut f64)), mk: f64| {
        let wi = if !x.is_finite() || crate::sht::is_unseen(*x) {
            0.0
        } else {
            mk
        };
        *wo = wi;
        *o = if wi > 0.0 { x * wi } else { 0.0 * wi };
        (0.0..=1.0).contains(&mk)
    };
    let it = map
        .par_iter()
        .zip(mw.par_iter_mut().zip(w.par_iter_mut()))
        .with_min_len(MIN_LEN);
    match mask {
        Some(mk) => it
            .zip(mk.par_iter())
            .map(|(a, mk)| one(a, *mk))
            .reduce(|| true, |a, b| a && b),
        None => {
            it.for_each(|a| {
                one(a, 1.0);
            });
            true
        }
    }
}

/// out = num / den where den > 0 and den ≥ thr, else UNSEEN.
pub fn divide(num: &[f64], den: &[f64], thr: f64, out: &mut [f64]) {
    out.par_iter_mut()
        .zip(num.par_iter().zip(den.par_iter()))
        .with_min_len(MIN_LEN)
        .for_each(|(o, (n, d))| {
            *o = if *d > 0.0 && *d >= thr { n / d } else { UNSEEN };
        });
}

/// Masked ring smoothing of one float64 RING map (`map`, 12·nside² pixels) with `mask`
/// (weights in [0, 1], same length; None: 1) and one kernel per entry of `profiles`; `thr[b]`
/// is beam b's threshold on smooth(w) (min_weight·b_0). `out` holds the n_beams results one
/// after the other.
pub fn ring_smooth_masked(
    device: Device,
    nside: usize,
    profiles: &[(&[f64], &[f64])],
    map: &[f64],
    mask: Option<&[f64]>,
    thr: &[f64],
    out: &mut [f64],
) -> Result<()> {
    hp::check_nside(nside as u64, false)?;
    let npix = hp::nside2npix(nside as u64) as usize;
    if map.len() != npix
        || mask.is_some_and(|m| m.len() != npix)
        || thr.len() != profiles.len()
        || out.len() != npix * profiles.len()
    {
        return Err(Error::shape(format!(
            "masked smoothing at nside={nside} needs a map and mask of {npix} pixels, one \
             threshold per beam and {} beams times {npix} outputs; got {}, {}, {} and {}",
            profiles.len(),
            map.len(),
            mask.map_or(npix, |m| m.len()),
            thr.len(),
            out.len()
        )));
    }
    let plans = plans_of(nside, profiles)?;
    let mut outs: Vec<&mut [f64]> = out.chunks_mut(npix).collect();
    match device {
        Device::Cpu => crate::backend::threads::install(|| {
            let mut stack = alloc::try_vec(2 * npix, 0.0, "the masked maps (m·w, w)")?;
            let mut smooth = alloc::try_vec(2 * npix, 0.0, "their smoothed maps")?;
            {
                let (mw, w) = stack.split_at_mut(npix);
                if !prep(map, mask, mw, w) {
                    return Err(cuda::masked::bad_mask());
                }
            }
            let (mw, w) = stack.split_at(npix);
            for ((plan, o), t) in plans.iter().zip(outs.iter_mut()).zip(thr) {
                crate::backend::cancel::check()?;
                let (num, den) = smooth.split_at_mut(npix);
                cpu::convolve_many(plan, &[mw, w], &mut [num, den]);
                let (num, den) = smooth.split_at(npix);
                divide(num, den, *t, o);
            }
            Ok(())
        })?,
        Device::Cuda(o) => {
            let refs: Vec<&RingPlan> = plans.iter().collect();
            crate::backend::cuda::on(o, || {
                cuda::masked::convolve_masked(&refs, map, mask, thr, &mut outs)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prep_and_divide_follow_the_rules() {
        let map = [1.0, f64::NAN, UNSEEN, 2.0, f64::INFINITY, -3.0];
        let mask = [0.5, 1.0, 1.0, 0.0, 1.0, 1.0];
        let (mut mw, mut w) = ([9.0; 6], [9.0; 6]);
        assert!(prep(&map, Some(&mask), &mut mw, &mut w));
        assert_eq!(w, [0.5, 0.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(mw, [0.5, 0.0, 0.0, 0.0, 0.0, -3.0]);
        for bad in [-0.5, 1.5, f64::NAN] {
            let mut m2 = mask;
            m2[2] = bad; // also where the map is missing
            assert!(!prep(&map, Some(&m2), &mut mw, &mut w));
        }
        assert!(prep(&map, None, &mut mw, &mut w));
        assert_eq!(w, [1.0, 0.0, 0.0, 1.0, 0.0, 1.0]);
        let mut out = [0.0; 3];
        divide(&[1.0, 2.0, 3.0], &[0.5, 0.2, 0.0], 0.25, &mut out);
        assert_eq!(out, [2.0, UNSEEN, UNSEEN]);
    }
}
