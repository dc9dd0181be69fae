//! CPU engine: gather per target pixel. Target pixels are processed in blocks on skyconv's
//! rayon pool; each block owns its output pixels, so there are no atomics, and each pixel's sums
//! run over its candidates in plan order, so the result does not depend on the thread count.
//! The kernel weight of a (pixel, sample) pair is computed once and used for every channel.

use std::ops::Range;

use rayon::prelude::*;

use super::kernels::{asin_series, asin_small, exp_neg, Kernel, Kind};
use super::plan::{unit, Plan};
use super::{Samples, Setup, Weights};
use crate::backend::cancel::Token;
use crate::backend::threads::Disjoint;
use crate::error::Result;
use crate::real::Real;

/// Target pixels per task.
const BLOCK: usize = 16;

/// Sample values in plan order, in the form the inner loops want.
enum Values<T> {
    /// One channel: (w·v, w) per sample (samples with NaN were dropped by the plan).
    Scalar(Vec<[f64; 2]>),
    /// Several channels, weight shared by the channels: data rows and weights. `nan`: some
    /// value is NaN, so weight sums are per channel.
    Shared {
        data: Vec<T>,
        w: Vec<f64>,
        nan: bool,
    },
    /// Several channels with their own weights; NaN value or weight zeroed in both.
    Full { data: Vec<T>, w: Vec<T> },
}

fn gather_rows<T: Real>(src: &[T], nchan: usize, order: &[u32], stop: &Token) -> Vec<T> {
    let mut out = vec![T::default(); order.len() * nchan];
    out.par_chunks_mut(nchan)
        .zip(order.par_iter())
        .with_min_len(256)
        .for_each(|(row, &i)| {
            if stop.is_set() {
                return;
            }
            let i = i as usize;
            row.copy_from_slice(&src[i * nchan..(i + 1) * nchan]);
        });
    out
}

fn shared_weight<T: Real>(w: &Weights<'_, T>, i: usize) -> f64 {
    match w {
        Weights::PerSample(w) => w[i].to_f64(),
        Weights::Full(w) => w[i].to_f64(),
        Weights::Ones => 1.0,
    }
}

/// The samples' values in sorted order (partial when `stop` is set: the caller checks it).
fn values<T: Real>(plan: &Plan, s: &Samples<'_, T>, stop: &Token) -> Values<T> {
    let nchan = s.nchan;
    if nchan == 1 {
        let v = plan
            .order
            .par_iter()
            .with_min_len(4096)
            .map(|&i| {
                if stop.is_set() {
                    return [0.0; 2];
                }
                let i = i as usize;
                let w = shared_weight(&s.weights, i);
                [w * s.data[i].to_f64(), w]
            })
            .collect();
        return Values::Scalar(v);
    }
    let data = gather_rows(s.data, nchan, &plan.order, stop);
    match s.weights {
        Weights::Full(w) => {
            let mut w = gather_rows(w, nchan, &plan.order, stop);
            let mut data = data;
            data.par_iter_mut()
                .zip(w.par_iter_mut())
                .with_min_len(4096)
                .for_each(|(v, w)| {
                    if stop.is_set() {
                        return;
                    }
                    if v.to_f64().is_nan() || w.to_f64().is_nan() {
                        *v = T::default();
                        *w = T::default();
                    }
                });
            Values::Full { data, w }
        }
        _ => {
            let w = plan
                .order
                .par_iter()
                .with_min_len(4096)
                .map(|&i| {
                    if stop.is_set() {
                        return 0.0;
                    }
                    shared_weight(&s.weights, i as usize)
                })
                .collect();
            // A cancel ends the search too (its answer is not used then).
            let nan = data
                .par_iter()
                .with_min_len(4096)
                .any(|v| stop.is_set() || v.to_f64().is_nan());
            Values::Shared { data, w, nan }
        }
    }
}

/// One target pixel: where it is and what the kernel needs about it.
struct Target {
    lon: f64,
    lat: f64,
    t: [f64; 3],
    east: [f64; 3],
    north: [f64; 3],
}

impl Target {
    fn new(lon_deg: f64, lat_deg: f64) -> Target {
        let (lon, lat) = (lon_deg.to_radians(), lat_deg.to_radians());
        let (sl, cl) = lon.sin_cos();
        let (sb, cb) = lat.sin_cos();
        Target {
            lon,
            lat,
            t: unit(lon, lat),
            east: [-sl, cl, 0.0],
            north: [-sb * cl, -sb * sl, cb],
        }
    }
}

/// Gauss1d weights (0 outside the sphere) of one block of candidates, branch-free.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gauss_block(
    xs: &[f64],
    ys: &[f64],
    zs: &[f64],
    t: &[f64; 3],
    c0: f64,
    c2_cut: f64,
    radius: f64,
    kbuf: &mut [f64],
) {
    for j in 0..kbuf.len() {
        let dx = xs[j] - t[0];
        let dy = ys[j] - t[1];
        let dz = zs[j] - t[2];
        let c2 = dx * dx + dy * dy + dz * dz;
        // Clamped below the series' range; such candidates are cut below anyway.
        let d = 2.0 * asin_series(0.5 * c2.min(0.04).sqrt());
        let w = exp_neg(-d * d * c0);
        kbuf[j] = if c2 < c2_cut && d < radius { w } else { 0.0 };
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn gauss_block_avx2(
    xs: &[f64],
    ys: &[f64],
    zs: &[f64],
    t: &[f64; 3],
    c0: f64,
    c2_cut: f64,
    radius: f64,
    kbuf: &mut [f64],
) {
    gauss_block(xs, ys, zs, t, c0, c2_cut, radius, kbuf)
}

/// `gauss_block`, with AVX2 vectors where the CPU has them (same operations, same results).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fill_gauss(
    xs: &[f64],
    ys: &[f64],
    zs: &[f64],
    t: &[f64; 3],
    c0: f64,
    c2_cut: f64,
    radius: f64,
    kbuf: &mut [f64],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::backend::cpu_features::avx2() {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { gauss_block_avx2(xs, ys, zs, t, c0, c2_cut, radius, kbuf) };
        }
    }
    gauss_block(xs, ys, zs, t, c0, c2_cut, radius, kbuf)
}

/// Candidates evaluated together on the fast path.
const LANE_BLOCK: usize = 64;

/// Visit the candidates of `t` as (sorted index, kernel weight). With `dense`, every
/// candidate is visited (weight 0 outside the sphere), else only those inside.
#[inline(always)]
fn for_each_pair(
    plan: &Plan,
    runs: &[Range<usize>],
    t: &Target,
    kernel: &Kernel,
    radius: f64,
    dense: bool,
    mut f: impl FnMut(usize, f64),
) {
    // chord = 2 sin(d/2); pre-filter on chord² with a margin, decide on d itself.
    let c2_cut = {
        let c = 2.0 * (0.5 * radius).min(std::f64::consts::FRAC_PI_2).sin();
        c * c * (1.0 + 1e-9)
    };
    // Fast path: gauss1d with half-chords below 0.1 (asin by its series), branch-free.
    if kernel.kind == Kind::Gauss1d && c2_cut < 0.04 {
        let c0 = kernel.c[0];
        let mut kbuf = [0.0f64; LANE_BLOCK];
        for run in runs {
            for b0 in (run.start..run.end).step_by(LANE_BLOCK) {
                let len = LANE_BLOCK.min(run.end - b0);
                let xs = &plan.x[b0..b0 + len];
                let ys = &plan.y[b0..b0 + len];
                let zs = &plan.z[b0..b0 + len];
                fill_gauss(xs, ys, zs, &t.t, c0, c2_cut, radius, &mut kbuf[..len]);
                for (j, &k) in kbuf[..len].iter().enumerate() {
                    if dense || k != 0.0 {
                        f(b0 + j, k);
                    }
                }
            }
        }
        return;
    }
    let bearing = kernel.needs_bearing();
    for run in runs {
        let xs = &plan.x[run.clone()];
        let ys = &plan.y[run.clone()];
        let zs = &plan.z[run.clone()];
        for k in 0..xs.len() {
            let dx = xs[k] - t.t[0];
            let dy = ys[k] - t.t[1];
            let dz = zs[k] - t.t[2];
            let c2 = dx * dx + dy * dy + dz * dz;
            if c2 >= c2_cut {
                continue;
            }
            let d = 2.0 * asin_small(0.5 * c2.sqrt());
            if d >= radius {
                continue;
            }
            let (cb, sb) = if bearing {
                let u = dx * t.east[0] + dy * t.east[1];
                let w = dx * t.north[0] + dy * t.north[1] + dz * t.north[2];
                let h = (u * u + w * w).sqrt();
                if h > 0.0 {
                    (w / h, u / h)
                } else {
                    (1.0, 0.0)
                }
            } else {
                (1.0, 0.0)
            };
            f(run.start + k, kernel.weight(d, cb, sb));
        }
    }
}

/// Channels per pass over a block's (pixel, sample) pairs.
const CHAN_CHUNK: usize = 256;

/// Per-block scratch: candidate runs, the block's (sample, weight) pairs with per-pixel
/// offsets, and f64 sums for BLOCK pixels × nchan.
struct Scratch {
    runs: Vec<Range<usize>>,
    pairs: Vec<(u32, f64)>,
    offs: Vec<usize>,
    su: Vec<f64>,
    sw: Vec<f64>,
}

pub fn accumulate<T: Real, O: Real>(
    plan: &Plan,
    samples: &Samples<'_, T>,
    target_lon: &[f64],
    target_lat: &[f64],
    setup: &Setup,
    unweighted: &mut [O],
    weights: &mut [O],
) -> Result<()> {
    if plan.is_empty() {
        return Ok(());
    }
    let nchan = samples.nchan;
    let nt = target_lon.len();
    let stop = crate::backend::cancel::current();
    let vals = values(plan, samples, &stop);
    stop.check()?;
    // Weight sums per channel unless every channel shares them.
    let per_chan = matches!(vals, Values::Full { .. } | Values::Shared { nan: true, .. });
    let (pu, pw) = (
        Disjoint(unweighted.as_mut_ptr()),
        Disjoint(weights.as_mut_ptr()),
    );
    let (kernel, radius) = (&setup.kernel, setup.radius);
    let stop = &stop;
    (0..nt.div_ceil(BLOCK)).into_par_iter().for_each_init(
        || Scratch {
            runs: Vec::new(),
            pairs: Vec::new(),
            offs: Vec::new(),
            su: vec![0.0; BLOCK * nchan],
            sw: vec![0.0; BLOCK * nchan],
        },
        |sc, blk| {
            if stop.is_set() {
                return;
            }
            let t0 = blk * BLOCK;
            let t1 = (t0 + BLOCK).min(nt);
            sc.su.fill(0.0);
            sc.sw.fill(0.0);
            sc.offs.clear();
            sc.pairs.clear();
            for ti in t0..t1 {
                // Polled per target too: a block's 16 targets may each have 10^5 candidates.
                if stop.is_set() {
                    return;
                }
                let j = ti - t0;
                let t = Target::new(target_lon[ti], target_lat[ti]);
                plan.candidates(t.lon, t.lat, radius, &mut sc.runs);
                sc.offs.push(sc.pairs.len());
                if sc.runs.is_empty() {
                    continue;
                }
                if let Values::Scalar(v) = &vals {
                    let (su, sw) = pixel(plan, &sc.runs, &t, kernel, radius, v);
                    sc.su[j] += su;
                    sc.sw[j] += sw;
                } else {
                    let pairs = &mut sc.pairs;
                    for_each_pair(plan, &sc.runs, &t, kernel, radius, false, |s, k| {
                        pairs.push((s as u32, k))
                    });
                }
            }
            sc.offs.push(sc.pairs.len());
            if nchan > 1 {
                // Channel chunks: the rows of a block's samples stay in cache across targets.
                for c0 in (0..nchan).step_by(CHAN_CHUNK) {
                    let c1 = (c0 + CHAN_CHUNK).min(nchan);
                    for j in 0..t1 - t0 {
                        if stop.is_set() {
                            return;
                        }
                        let pairs = &sc.pairs[sc.offs[j]..sc.offs[j + 1]];
                        let su = &mut sc.su[j * nchan + c0..j * nchan + c1];
                        let sw = if per_chan {
                            &mut sc.sw[j * nchan + c0..j * nchan + c1]
                        } else {
                            &mut sc.sw[j..j + 1]
                        };
                        spectral(&vals, pairs, nchan, c0, su, sw, c0 == 0);
                    }
                }
            }
            // Write this block's pixels, channel by channel.
            for c in 0..nchan {
                for ti in t0..t1 {
                    let j = ti - t0;
                    let wsum = if per_chan {
                        sc.sw[j * nchan + c]
                    } else {
                        sc.sw[j]
                    };
                    let idx = c * nt + ti;
                    // SAFETY: idx < nchan·nt and this block alone owns targets t0..t1.
                    unsafe {
                        let u = pu.at(idx);
                        *u = O::from_f64((*u).to_f64() + sc.su[j * nchan + c]);
                        let w = pw.at(idx);
                        *w = O::from_f64((*w).to_f64() + wsum);
                    }
                }
            }
        },
    );
    stop.check()
}

/// One channel: (Σ k·w·v, Σ k·w) for one target pixel.
#[inline(always)]
fn pixel(
    plan: &Plan,
    runs: &[Range<usize>],
    t: &Target,
    kernel: &Kernel,
    radius: f64,
    v: &[[f64; 2]],
) -> (f64, f64) {
    let (mut a, mut b) = (0.0, 0.0);
    for_each_pair(plan, runs, t, kernel, radius, true, |s, k| {
        a += k * v[s][0];
        b += k * v[s][1];
    });
    (a, b)
}

/// Channels `c0..c0 + su.len()` of one pixel's sums over its (sample, kernel weight) pairs,
/// in pair order. `sw` is per channel (same length as `su`) or one shared sum, added only when
/// `first` (the first chunk).
fn spectral<T: Real>(
    vals: &Values<T>,
    pairs: &[(u32, f64)],
    nchan: usize,
    c0: usize,
    su: &mut [f64],
    sw: &mut [f64],
    first: bool,
) {
    let cw = su.len();
    match vals {
        Values::Scalar(_) => unreachable!("one channel goes through `pixel`"),
        Values::Shared {
            data,
            w,
            nan: false,
        } => {
            for &(s, k) in pairs {
                let s = s as usize;
                let kw = k * w[s];
                let row = &data[s * nchan + c0..s * nchan + c0 + cw];
                for (acc, &v) in su.iter_mut().zip(row) {
                    *acc += kw * v.to_f64();
                }
                if first {
                    sw[0] += kw;
                }
            }
        }
        Values::Shared { data, w, nan: true } => {
            for &(s, k) in pairs {
                let s = s as usize;
                let kw = k * w[s];
                let row = &data[s * nchan + c0..s * nchan + c0 + cw];
                for ((au, aw), &v) in su.iter_mut().zip(sw.iter_mut()).zip(row) {
                    let v = v.to_f64();
                    let ok = !v.is_nan();
                    *au += if ok { kw * v } else { 0.0 };
                    *aw += if ok { kw } else { 0.0 };
                }
            }
        }
        Values::Full { data, w } => {
            for &(s, k) in pairs {
                let s = s as usize;
                let rv = &data[s * nchan + c0..s * nchan + c0 + cw];
                let rw = &w[s * nchan + c0..s * nchan + c0 + cw];
                for (((au, aw), &v), &wt) in su.iter_mut().zip(sw.iter_mut()).zip(rv).zip(rw) {
                    let kw = k * wt.to_f64();
                    *au += kw * v.to_f64();
                    *aw += kw;
                }
            }
        }
    }
}
