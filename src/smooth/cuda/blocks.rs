//! Ring blocks of the GPU ring method where the whole map does not fit the device (nside 16384
//! on one GPU): the output pairs (a northern ring and its southern mirror) are cut into runs;
//! a run's block holds the input rings its pairs read (their `lo..=hi` and the mirrors) packed
//! one after the other, so the device keeps a map buffer and two spectra of the block only
//! (40 bytes per block pixel) instead of the whole map's. Pure host code (unit-tested here).
//!
//! The kernels address every ring through `first` (its first pixel = its spectrum's complex
//! offset): a block uploads its own `first` table, the packed offsets of its rings, so the
//! same launches run on the packed buffers.

use crate::smooth::RingPlan;

/// Inclusive ring ranges (a, b), sorted, not touching.
pub type Ranges = Vec<(usize, usize)>;

/// One block: pairs `pairs.0 .. pairs.1`, the input rings `ins` (every ring a pair reads, with
/// its mirror) and the output rings `outs` (the pairs' rings and mirrors), packed at `first`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub pairs: (usize, usize),
    pub ins: Ranges,
    pub outs: Ranges,
    /// Per ring of the map: its packed offset in the block (rings outside `ins`: 0, never read).
    pub first: Vec<i64>,
    /// Pixels of the block (the packed length of `ins`).
    pub pixels: usize,
}

/// The ring range [a, b] with its mirror, merged where they meet.
fn with_mirror(nr: usize, a: usize, b: usize) -> Ranges {
    let (ma, mb) = (nr - 1 - b, nr - 1 - a);
    let (x, y) = if a <= ma {
        ((a, b), (ma, mb))
    } else {
        ((ma, mb), (a, b))
    };
    if y.0 <= x.1 + 1 {
        vec![(x.0, x.1.max(y.1))]
    } else {
        vec![x, y]
    }
}

/// Pixels of ring range [a, b].
fn range_pixels(plan: &RingPlan, a: usize, b: usize) -> usize {
    plan.rings[b].first as usize + plan.rings[b].nphi - plan.rings[a].first as usize
}

/// The input rings of pairs p0 .. p1 (p1 > p0).
fn inputs(plan: &RingPlan, p0: usize, p1: usize) -> Ranges {
    let nr = plan.rings.len();
    let lo = plan.outputs[p0].lo;
    let hi = plan.outputs[p0..p1]
        .iter()
        .map(|o| o.hi)
        .max()
        .unwrap_or(lo);
    with_mirror(nr, lo, hi)
}

fn pixels_of(plan: &RingPlan, r: &Ranges) -> usize {
    r.iter().map(|&(a, b)| range_pixels(plan, a, b)).sum()
}

/// Pixels of the block of pairs p0 .. p1.
pub fn block_pixels(plan: &RingPlan, p0: usize, p1: usize) -> usize {
    pixels_of(plan, &inputs(plan, p0, p1))
}

/// The pairs cut into blocks of at most `cap` pixels each (a pair whose own block is larger
/// gets a block of its own: the caller checks the largest against its memory).
pub fn blocks(plan: &RingPlan, cap: usize) -> Vec<Block> {
    let np = plan.outputs.len();
    let nr = plan.rings.len();
    let mut out = Vec::new();
    let mut p0 = 0;
    while p0 < np {
        let mut p1 = p0 + 1;
        // grow by doubling, then bisect: O(log) size evaluations per block
        let mut step = 1;
        while p1 < np && block_pixels(plan, p0, (p1 + step).min(np)) <= cap {
            p1 = (p1 + step).min(np);
            step *= 2;
        }
        while step > 1 {
            step /= 2;
            if p1 + step <= np && block_pixels(plan, p0, p1 + step) <= cap {
                p1 += step;
            }
        }
        let ins = inputs(plan, p0, p1);
        let outs = with_mirror(nr, plan.outputs[p0].ring, plan.outputs[p1 - 1].ring);
        let mut first = vec![0i64; nr];
        let mut at = 0usize;
        for &(a, b) in &ins {
            let base = plan.rings[a].first as usize;
            for (r, f) in first.iter_mut().enumerate().take(b + 1).skip(a) {
                *f = (at + plan.rings[r].first as usize - base) as i64;
            }
            at += range_pixels(plan, a, b);
        }
        out.push(Block {
            pairs: (p0, p1),
            ins,
            outs,
            first,
            pixels: at,
        });
        p0 = p1;
    }
    out
}

/// The pairs p0 .. p1 whose rings and mirrors are exactly the block's input rings (the phase
/// launch's tiles): the inputs are mirror-symmetric, two ranges (a northern one and its
/// mirror) or one about the equator.
pub fn phase_pairs(plan: &RingPlan, block: &Block) -> (usize, usize) {
    let eq = plan.outputs.len() - 1;
    let lo = block.ins[0].0;
    let hi = if block.ins.len() == 1 {
        eq
    } else {
        block.ins[0].1
    };
    (lo, hi + 1)
}

/// Pixel range [start, end) of ring range [a, b] in the whole map.
pub fn map_range(plan: &RingPlan, a: usize, b: usize) -> (usize, usize) {
    let s = plan.rings[a].first as usize;
    (s, s + range_pixels(plan, a, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smooth::{profile, Table};

    fn plan(nside: usize, sigma: f64) -> RingPlan {
        let p = profile::gaussian(sigma, 1e-5).unwrap();
        RingPlan::new(nside, Table::new(&p.theta, &p.values, 0).unwrap()).unwrap()
    }

    fn in_ranges(r: &Ranges, x: usize) -> bool {
        r.iter().any(|&(a, b)| a <= x && x <= b)
    }

    #[test]
    fn blocks_cover_every_output_once_and_hold_their_inputs() {
        for (nside, sigma) in [
            (1, 0.5),
            (2, 0.3),
            (8, 0.05),
            (8, 0.6),
            (16, 0.02),
            (32, 0.01),
        ] {
            let pl = plan(nside, sigma);
            let nr = pl.rings.len();
            for cap in [1, 50, 300, 5000, usize::MAX] {
                let bl = blocks(&pl, cap);
                assert_eq!(bl[0].pairs.0, 0);
                assert_eq!(bl.last().unwrap().pairs.1, pl.outputs.len());
                for w in bl.windows(2) {
                    assert_eq!(w[0].pairs.1, w[1].pairs.0);
                }
                let mut seen = vec![0; nr];
                for b in &bl {
                    assert!(b.pairs.1 - b.pairs.0 == 1 || b.pixels <= cap);
                    for w in b.ins.windows(2) {
                        assert!(w[0].1 + 1 < w[1].0, "ranges sorted and apart");
                    }
                    for &(a, z) in &b.outs {
                        for (r, n) in seen.iter_mut().enumerate().take(z + 1).skip(a) {
                            *n += 1;
                            assert!(in_ranges(&b.ins, r));
                        }
                    }
                    // every ring a pair reads (and its mirror) is in the block, packed
                    // contiguously and without overlap
                    for o in &pl.outputs[b.pairs.0..b.pairs.1] {
                        for j in o.lo..=o.hi {
                            assert!(in_ranges(&b.ins, j) && in_ranges(&b.ins, nr - 1 - j));
                        }
                    }
                    let mut spans: Vec<(i64, i64)> = (0..nr)
                        .filter(|&r| in_ranges(&b.ins, r))
                        .map(|r| (b.first[r], b.first[r] + pl.rings[r].nphi as i64))
                        .collect();
                    spans.sort();
                    assert_eq!(spans[0].0, 0);
                    for w in spans.windows(2) {
                        assert_eq!(w[0].1, w[1].0);
                    }
                    assert_eq!(spans.last().unwrap().1 as usize, b.pixels);
                }
                assert!(seen.iter().all(|&s| s == 1), "each ring output once");
                // the phase pairs' rings and mirrors are the inputs, each once
                for b in &bl {
                    let (q0, q1) = phase_pairs(&pl, b);
                    let mut phased = vec![0; nr];
                    for q in q0..q1 {
                        let o = &pl.outputs[q];
                        phased[o.ring] += 1;
                        if o.mirror != o.ring {
                            phased[o.mirror] += 1;
                        }
                    }
                    for (r, &n) in phased.iter().enumerate() {
                        assert_eq!(n, in_ranges(&b.ins, r) as i32, "ring {r}");
                    }
                }
                if cap == usize::MAX {
                    assert_eq!(bl.len(), 1);
                    assert_eq!(bl[0].pixels, pl.npix);
                }
            }
        }
    }
}
