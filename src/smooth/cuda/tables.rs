//! The compact tables the CUDA ring engine uploads (`kernels/smooth.cu` documents the layouts),
//! built on the host from the shared [`RingPlan`]: per ring its first pixel, length and phase
//! shift; per output pair its rings, input range and L; per (pair, input ring) the support of
//! the kernel ring; the launch tiles of the products; the chunks of pairs whose kernel samples
//! fit one buffer. Pure host code, so the emulator test can drive the kernels with it.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::smooth::RingPlan;

/// i64 per pair in `pairs` (SM_PAIR in kernels/smooth.cu).
pub const PAIR: usize = 6;
/// Flags of a support entry (SM_HALF, SM_FULL).
pub const HALF: i32 = 1;
pub const FULL: i32 = 2;
/// Output bins per block of the products launch.
pub const TILE: usize = 128;

/// Output pairs first..end, their support entries and tiles, and the kernel samples they take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub entries: (usize, usize),
    pub tiles: (usize, usize),
    /// Sample offsets [tap0, tap1) of the chunk's entries.
    pub taps: (usize, usize),
}

pub struct Tables {
    pub first: Vec<i64>,
    pub nphi: Vec<i32>,
    pub shifted: Vec<i32>,
    /// Ring weight factor of each input ring (`RingPlan::ring_factor`).
    pub factor: Vec<f64>,
    /// PAIR i64 per output pair: ring, mirror, lo, hi, L, first support entry.
    pub pairs: Vec<i64>,
    /// (4π/npix)/L per pair.
    pub scale: Vec<f64>,
    /// Per support entry: sample offset, sample count, flags, L, (a, b).
    pub tap_off: Vec<i64>,
    pub tap_n: Vec<i32>,
    pub flags: Vec<i32>,
    pub len: Vec<i32>,
    pub ab: Vec<f64>,
    /// Per products block: its pair and first output bin.
    pub tile_pair: Vec<i32>,
    pub tile_k0: Vec<i32>,
    /// The kernel table's cubics, 4 per interval.
    pub coef: Vec<f64>,
    /// Kernel samples in all.
    pub total_taps: usize,
    /// First tile of each pair (and the end).
    pair_tiles: Vec<usize>,
}

fn to_i32(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::value(format!("{what} {v} is too large for the GPU")))
}

impl Tables {
    pub fn new(plan: &RingPlan) -> Result<Self> {
        let rings = &plan.rings;
        let sup: Vec<Vec<crate::smooth::PairSupport>> = plan
            .outputs
            .par_iter()
            .map(|o| {
                (o.lo..=o.hi)
                    .map(|j| plan.pair_support(o.ring, j, o.len))
                    .collect()
            })
            .collect();
        let nent: usize = sup.iter().map(|s| s.len()).sum();
        let mut t = Tables {
            first: rings.iter().map(|r| r.first as i64).collect(),
            nphi: rings
                .iter()
                .map(|r| to_i32(r.nphi, "ring length"))
                .collect::<Result<_>>()?,
            shifted: rings.iter().map(|r| (r.phi0 != 0.0) as i32).collect(),
            factor: plan.ring_factor.to_vec(),
            pairs: Vec::with_capacity(PAIR * plan.outputs.len()),
            scale: Vec::with_capacity(plan.outputs.len()),
            tap_off: Vec::with_capacity(nent),
            tap_n: Vec::with_capacity(nent),
            flags: Vec::with_capacity(nent),
            len: Vec::with_capacity(nent),
            ab: Vec::with_capacity(2 * nent),
            tile_pair: Vec::new(),
            tile_k0: Vec::new(),
            coef: plan.table.coef.iter().flatten().copied().collect(),
            total_taps: 0,
            pair_tiles: Vec::with_capacity(plan.outputs.len() + 1),
        };
        let unit = 4.0 * std::f64::consts::PI / plan.npix as f64;
        for (p, (o, s)) in plan.outputs.iter().zip(&sup).enumerate() {
            t.pairs
                .extend([o.ring, o.mirror, o.lo, o.hi, o.len, t.tap_n.len()].map(|v| v as i64));
            t.scale.push(unit / o.len as f64);
            let len = to_i32(o.len, "kernel ring length")?;
            for ps in s {
                t.tap_off.push(t.total_taps as i64);
                t.tap_n.push(to_i32(ps.taps, "kernel support")?);
                t.flags
                    .push(if ps.half { HALF } else { 0 } | if ps.full { FULL } else { 0 });
                t.len.push(len);
                t.ab.extend([ps.a, ps.b]);
                t.total_taps += ps.taps;
            }
            t.pair_tiles.push(t.tile_pair.len());
            let bins = rings[o.ring].nphi / 2 + 1;
            for k0 in (0..bins).step_by(TILE) {
                t.tile_pair.push(to_i32(p, "pair")?);
                t.tile_k0.push(k0 as i32);
            }
        }
        t.pair_tiles.push(t.tile_pair.len());
        Ok(t)
    }

    /// Consecutive pairs grouped so that each group's kernel samples number at most
    /// `max_taps` (a pair needing more gets a chunk of its own, refused if over `hard_taps`).
    pub fn chunks(&self, max_taps: usize, hard_taps: usize) -> Result<Vec<Chunk>> {
        self.chunks_between(0, self.scale.len(), max_taps, hard_taps)
    }

    /// The tiles [t0, t1) of pairs p0 .. p1.
    pub fn tiles_of(&self, p0: usize, p1: usize) -> (usize, usize) {
        (self.pair_tiles[p0], self.pair_tiles[p1])
    }

    /// [`Tables::chunks`] of the pairs p0 .. p1 only (a ring block's).
    pub fn chunks_between(
        &self,
        p0: usize,
        p1: usize,
        max_taps: usize,
        hard_taps: usize,
    ) -> Result<Vec<Chunk>> {
        let np = self.scale.len();
        let entry0 = |p: usize| {
            if p == np {
                self.tap_n.len()
            } else {
                self.pairs[PAIR * p + 5] as usize
            }
        };
        let tap_at = |e: usize| {
            if e == self.tap_n.len() {
                self.total_taps
            } else {
                self.tap_off[e] as usize
            }
        };
        let mut out = Vec::new();
        let mut p = p0;
        while p < p1 {
            let start = tap_at(entry0(p));
            let mut q = p + 1;
            while q < p1 && tap_at(entry0(q + 1)) - start <= max_taps {
                q += 1;
            }
            let taps = (start, tap_at(entry0(q)));
            if taps.1 - taps.0 > hard_taps {
                return Err(Error::value(format!(
                    "the ring method's kernel is too wide for the GPU: one output ring needs \
                     {} kernel samples ({} MB), more than the device memory allows; use \
                     method='harmonic' or a narrower beam",
                    taps.1 - taps.0,
                    (8 * (taps.1 - taps.0)) >> 20
                )));
            }
            out.push(Chunk {
                entries: (entry0(p), entry0(q)),
                tiles: (self.pair_tiles[p], self.pair_tiles[q]),
                taps,
            });
            p = q;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smooth::{profile, Table};

    #[test]
    fn chunks_cover_every_pair_once() {
        let p = profile::gaussian(0.2, 1e-5).unwrap();
        let plan = RingPlan::new(16, Table::new(&p.theta, &p.values, 0).unwrap()).unwrap();
        let t = Tables::new(&plan).unwrap();
        assert_eq!(
            t.tap_n.iter().map(|&n| n as usize).sum::<usize>(),
            t.total_taps
        );
        for cap in [1, 50, 1000, usize::MAX] {
            let ch = t.chunks(cap, usize::MAX).unwrap();
            assert_eq!(ch[0].entries.0, 0);
            assert_eq!(ch.last().unwrap().entries.1, t.tap_n.len());
            assert_eq!(ch.last().unwrap().tiles.1, t.tile_pair.len());
            for w in ch.windows(2) {
                assert_eq!(w[0].entries.1, w[1].entries.0);
                assert_eq!(w[0].tiles.1, w[1].tiles.0);
                assert_eq!(w[0].taps.1, w[1].taps.0);
            }
        }
        assert_eq!(t.chunks(usize::MAX, usize::MAX).unwrap().len(), 1);
        // a block's chunks: the same chunks' pairs, cut at the block's ends
        let np = t.scale.len();
        for (p0, p1) in [(0, 1), (1, np), (np / 3, 2 * np / 3 + 1)] {
            let ch = t.chunks_between(p0, p1, 50, usize::MAX).unwrap();
            assert_eq!(ch[0].tiles.0, t.tiles_of(p0, p1).0);
            assert_eq!(ch.last().unwrap().tiles.1, t.tiles_of(p0, p1).1);
            for w in ch.windows(2) {
                assert_eq!(w[0].entries.1, w[1].entries.0);
            }
        }
        assert_eq!(t.chunks(1, usize::MAX).unwrap().len(), t.scale.len());
        assert!(t.chunks(1, 1).is_err());
    }
}
