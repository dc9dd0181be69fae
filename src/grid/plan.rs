//! The lookup structure both engines share: samples bucketed by HEALPix ring (the
//! iso-latitude ring of `nside_for(radius)` whose centre is nearest, so each ring owns a band of
//! latitude), sorted by longitude inside the ring, with per-ring start tables and the z =
//! sin(lat) span each ring's samples really cover. For a target pixel the candidates are, per
//! ring whose span meets the kernel disc, one or two contiguous runs of sorted samples found by
//! binary search on the sort keys; the exact distance test is left to the engine.
//!
//! Bounds come from the data, so the search is exact whatever the bucketing; the sort is a
//! stable counting sort by ring followed by a sort of each ring by (key, index), so the order
//! (and so every sum) does not depend on the thread count.

use std::f64::consts::{FRAC_PI_2, PI, TAU};
use std::ops::Range;

use rayon::prelude::*;

use crate::backend::threads::Disjoint;
use crate::error::{Error, Result};

/// Bits of the quantised longitude in a sort key; the ring index sits above them.
pub const PHI_BITS: u32 = 44;
const PHI_SCALE: f64 = (1u64 << PHI_BITS) as f64 / TAU;
const PHI_MAX: u64 = (1u64 << PHI_BITS) - 1;
/// The finest bucketing (4·nside − 1 rings).
const MAX_NSIDE: u64 = 1 << 16;

/// Quantised longitude (radians in [0, 2π)) used in sort keys; monotone in `phi`.
#[inline]
pub fn phi_key(phi: f64) -> u64 {
    ((phi * PHI_SCALE) as u64).min(PHI_MAX)
}

/// Unit vector of (lon, lat) in radians.
#[inline]
pub fn unit(lon: f64, lat: f64) -> [f64; 3] {
    let (sl, cl) = lon.sin_cos();
    let (sb, cb) = lat.sin_cos();
    [cb * cl, cb * sl, sb]
}

/// Bucketing resolution for a kernel sphere of `radius` radians: the smallest power of two
/// with rings (0.67/nside to 0.82/nside apart) at most about half the radius apart, i.e. two
/// to four rings across the disc (measured fastest for 1e6 and 1e7 samples).
pub fn nside_for(radius: f64) -> u64 {
    let want = (1.5 / radius).clamp(1.0, MAX_NSIDE as f64);
    (want as u64).next_power_of_two().min(MAX_NSIDE)
}

/// The iso-latitude HEALPix ring (1..=4 nside − 1) whose centre is nearest to z = sin(lat)
/// (monotone in z: rings run north to south). Used for bucketing only.
#[inline]
pub fn ring_of_z(nside: u64, z: f64) -> u64 {
    let ns = nside as f64;
    let r = if z > 2.0 / 3.0 {
        (ns * (3.0 * (1.0 - z)).sqrt()).round()
    } else if z < -2.0 / 3.0 {
        4.0 * ns - (ns * (3.0 * (1.0 + z)).sqrt()).round()
    } else {
        (ns * (2.0 - 1.5 * z)).round()
    };
    (r.max(1.0) as u64).min(4 * nside - 1)
}

/// Samples sorted for lookup. Sorted position `i` holds original sample `order[i]`.
pub struct Plan {
    pub nside: u64,
    /// Sort keys: ring << PHI_BITS | phi_key(lon), ascending (ties in original order).
    pub keys: Vec<u64>,
    pub order: Vec<u32>,
    /// Unit vectors of the sorted samples.
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub z: Vec<f64>,
    /// Samples of ring r are `ring_start[r]..ring_start[r + 1]` (r = 0..=4 nside; ring 0 and
    /// ring 4 nside are always empty).
    pub ring_start: Vec<usize>,
    /// Smallest and largest z of each ring's samples (+inf / −inf when empty).
    pub zmin: Vec<f64>,
    pub zmax: Vec<f64>,
    /// Monotone envelopes for finding the candidate rings: `lo_env[r] = min zmin[..=r]`,
    /// `hi_env[r] = max zmax[r..]` (both non-increasing in r).
    pub lo_env: Vec<f64>,
    pub hi_env: Vec<f64>,
}

impl Plan {
    /// Sort the samples with `keep[i]` true. `lon`, `lat` in degrees (finite where kept).
    pub fn new(lon: &[f64], lat: &[f64], keep: &[bool], radius: f64) -> Result<Plan> {
        if lon.len() > u32::MAX as usize {
            return Err(Error::value(
                "more than 2^32 - 1 samples in one call: grid them in chunks (Gridder)",
            ));
        }
        // Polled per sample (a relaxed load) so that Ctrl-C stops the preparation of millions
        // of samples within milliseconds (issue 17); each stage ends with a check.
        let stop = crate::backend::cancel::current();
        let nside = nside_for(radius);
        let nrings = 4 * nside as usize;
        // Pass 1, in input order: ring (nrings for dropped samples), key and unit vector.
        let mut ring = vec![0u32; lon.len()];
        let mut key = vec![0u64; lon.len()];
        let mut xyz = vec![[0.0f64; 3]; lon.len()];
        ring.par_iter_mut()
            .zip(key.par_iter_mut())
            .zip(xyz.par_iter_mut())
            .enumerate()
            .with_min_len(4096)
            .for_each(|(i, ((r, k), v))| {
                if stop.is_set() {
                    return;
                }
                if !keep[i] {
                    *r = nrings as u32;
                    return;
                }
                let phi = lon[i].to_radians().rem_euclid(TAU);
                let phi = if phi >= TAU { 0.0 } else { phi };
                *v = unit(phi, lat[i].to_radians());
                let ri = ring_of_z(nside, v[2]);
                *r = ri as u32;
                *k = (ri << PHI_BITS) | phi_key(phi);
            });
        stop.check()?;
        // Counting sort by ring over fixed chunks (stable, so independent of the thread
        // count), then each ring's run sorted by (key, index), which are unique.
        let chunk = lon.len().div_ceil(64).max(1 << 15);
        let nchunks = lon.len().div_ceil(chunk);
        let hist: Vec<Vec<u32>> = ring
            .par_chunks(chunk)
            .map(|rs| {
                let mut h = vec![0u32; nrings + 1];
                rs.iter().for_each(|&r| h[r as usize] += 1);
                h
            })
            .collect();
        let mut ring_start = vec![0usize; nrings + 1];
        let mut offsets = vec![vec![0usize; nrings]; nchunks];
        let mut pos = 0usize;
        for r in 0..nrings {
            ring_start[r] = pos;
            for c in 0..nchunks {
                offsets[c][r] = pos;
                pos += hist[c][r] as usize;
            }
        }
        ring_start[nrings] = pos;
        let n = pos;
        drop(hist);
        let mut pairs = vec![(0u64, 0u32); n];
        {
            let out = Disjoint(pairs.as_mut_ptr());
            ring.par_chunks(chunk)
                .zip(offsets.par_iter_mut())
                .enumerate()
                .for_each(|(c, (rs, off))| {
                    if stop.is_set() {
                        return;
                    }
                    for (j, &r) in rs.iter().enumerate() {
                        let r = r as usize;
                        if r < nrings {
                            let i = c * chunk + j;
                            // SAFETY: the offsets of different (chunk, ring) pairs are disjoint
                            // ranges of `pairs`, each of the size counted in pass 1.
                            unsafe { *out.at(off[r]) = (key[i], i as u32) };
                            off[r] += 1;
                        }
                    }
                });
        }
        drop((ring, offsets, key));
        stop.check()?;
        let mut runs: Vec<&mut [(u64, u32)]> = Vec::new();
        let mut rest = pairs.as_mut_slice();
        for r in 0..nrings {
            let (run, tail) = rest.split_at_mut(ring_start[r + 1] - ring_start[r]);
            if run.len() > 1 {
                runs.push(run);
            }
            rest = tail;
        }
        runs.into_par_iter().for_each(|run| {
            if stop.is_set() {
                return;
            }
            if run.len() > 1 << 20 {
                run.par_sort_unstable();
            } else {
                run.sort_unstable();
            }
        });
        stop.check()?;
        let mut keys = vec![0u64; n];
        let mut order = vec![0u32; n];
        let mut x = vec![0.0; n];
        let mut y = vec![0.0; n];
        let mut z = vec![0.0; n];
        keys.par_iter_mut()
            .zip(order.par_iter_mut())
            .zip(x.par_iter_mut().zip(y.par_iter_mut().zip(z.par_iter_mut())))
            .zip(pairs.par_iter())
            .with_min_len(4096)
            .for_each(|(((k, o), (x, (y, z))), &(key, i))| {
                if stop.is_set() {
                    return;
                }
                *k = key;
                *o = i;
                [*x, *y, *z] = xyz[i as usize];
            });
        drop((pairs, xyz));
        stop.check()?;
        let (zmin, zmax): (Vec<f64>, Vec<f64>) = (0..nrings)
            .into_par_iter()
            .map(|r| {
                z[ring_start[r]..ring_start[r + 1]]
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                        (lo.min(v), hi.max(v))
                    })
            })
            .unzip();
        let mut lo_env = zmin.clone();
        for r in 1..nrings {
            lo_env[r] = lo_env[r].min(lo_env[r - 1]);
        }
        let mut hi_env = zmax.clone();
        for r in (0..nrings - 1).rev() {
            hi_env[r] = hi_env[r].max(hi_env[r + 1]);
        }
        Ok(Plan {
            nside,
            keys,
            order,
            x,
            y,
            z,
            ring_start,
            zmin,
            zmax,
            lo_env,
            hi_env,
        })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Push onto `out` the runs of sorted samples that may lie within `radius` (radians) of the
    /// target at (`lon`, `lat`) radians. Every sample closer than `radius` is in a run.
    pub fn candidates(&self, lon: f64, lat: f64, radius: f64, out: &mut Vec<Range<usize>>) {
        out.clear();
        if self.is_empty() || !lon.is_finite() || !lat.is_finite() {
            return;
        }
        let lat_lo = lat - radius;
        let lat_hi = lat + radius;
        let pole = lat_lo <= -FRAC_PI_2 || lat_hi >= FRAC_PI_2;
        let z_lo = lat_lo.max(-FRAC_PI_2).sin() - 1e-12;
        let z_hi = lat_hi.min(FRAC_PI_2).sin() + 1e-12;
        // Rings r0..r1 may hold samples with z in [z_lo, z_hi].
        let r0 = self.lo_env.partition_point(|&v| v > z_hi);
        let r1 = self.hi_env.partition_point(|&v| v >= z_lo);
        if r0 >= r1 {
            return;
        }
        let phi = lon.rem_euclid(TAU);
        let hav_r = hav(radius);
        let cos_lat = lat.cos();
        // Latitude where the disc is widest in longitude (only used when no pole is inside).
        let lat_w = if pole {
            0.0
        } else {
            (lat.sin() / radius.cos()).clamp(-1.0, 1.0).asin()
        };
        for r in r0..r1 {
            let (a, b) = (self.ring_start[r], self.ring_start[r + 1]);
            if a == b || self.zmax[r] < z_lo || self.zmin[r] > z_hi {
                continue;
            }
            let half = if pole {
                PI
            } else {
                let ba = self.zmin[r].max(z_lo).clamp(-1.0, 1.0).asin();
                let bb = self.zmax[r].min(z_hi).clamp(-1.0, 1.0).asin();
                let bw = lat_w.clamp(ba, bb.max(ba));
                let den = bw.cos() * cos_lat;
                let h = (hav_r - hav(bw - lat)) / den;
                if h.is_nan() || h >= 1.0 || den <= 0.0 {
                    PI
                } else {
                    2.0 * h.max(0.0).sqrt().asin() * (1.0 + 1e-9) + 1e-12
                }
            };
            let ring_key = (r as u64) << PHI_BITS;
            let keys = &self.keys[a..b];
            let mut run = |lo: f64, hi: f64| {
                let klo = ring_key | phi_key(lo.max(0.0));
                let khi = ring_key | phi_key(hi.min(TAU));
                let s = a + keys.partition_point(|&k| k < klo);
                let e = a + keys.partition_point(|&k| k <= khi);
                if s < e {
                    out.push(s..e);
                }
            };
            if half >= PI {
                out.push(a..b);
            } else if phi - half < 0.0 {
                run(0.0, phi + half);
                run(phi - half + TAU, TAU);
            } else if phi + half >= TAU {
                run(0.0, phi + half - TAU);
                run(phi - half, TAU);
            } else {
                run(phi - half, phi + half);
            }
        }
    }
}

/// Haversine: sin²(x/2).
#[inline]
pub fn hav(x: f64) -> f64 {
    let s = (0.5 * x).sin();
    s * s
}
