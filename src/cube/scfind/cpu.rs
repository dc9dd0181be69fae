//! CPU engine of Smooth-and-Clip. One working cube `s` holds the spatially smoothed copy; the
//! spectral smoothing is never stored: the noise pass computes it on the fly from `s` and
//! keeps, per block of columns, the voxels that may clear the clip level (`Candidates`), from
//! which the clip is decided (a second pass only over a block whose list overflowed).
//! Consecutive kernels with the same spatial smoothing share `s`: after each kernel, the voxels
//! it added to the mask are re-replaced in `s` by adding their smoothed change (a small stamp
//! per voxel, or the whole plane recomputed where stamps would cost more; always the plane in
//! SoFiA-2's arithmetic). Spatial passes round to the data type after each pass, as
//! scipy.ndimage does; SoFiA-2's running means compute in the data type itself.

use rayon::prelude::*;

use super::running::{self, transpose, Chain};
use super::{
    exact_spatial, exact_spectral, extremes_or_nan, merge_extremes, prepared, BlockInput,
    ClipCandidates, Keep, Kernel, Outcome, Plan, Progress, BLANK, DETECTED, MASKED,
};
use crate::backend::threads::Disjoint;
use crate::cube::filters::{extend_index, Filter1d, Mode};
use crate::cube::stats::sample::gather_as;
use crate::error::{Error, Result};
use crate::real::Real;

/// A weight and the rows (or samples) on either side of the centre it multiplies.
type TapPair<'a> = (f64, Option<&'a [f64]>, Option<&'a [f64]>);

/// Outputs of a spatial pass accumulated together in registers.
const RB: usize = 16;

/// Rows of a plane smoothed along x together by the exact spatial pass (a strip and its
/// transposes stay in L1/L2).
const STRIP: usize = 64;

/// Columns of a plane handled together by the spectral pass.
const BLOCK: usize = 1024;

/// Whether the hot loops may use their AVX2 build (same arithmetic, no FMA contraction, so
/// results do not depend on the CPU).
fn has_avx2() -> bool {
    crate::backend::cpu_features::avx2()
}

#[inline(always)]
fn round<T: Real>(v: f64) -> f64 {
    T::from_f64(v).to_f64()
}

/// The identity filter (no spectral smoothing).
fn identity() -> Filter1d {
    Filter1d::correlate(&[1.0], 0).expect("valid filter")
}

pub fn run<T: Real>(
    cube: &[T],
    plan: &Plan,
    mask: &mut [u8],
    progress: Progress<'_>,
) -> Result<Outcome> {
    mask.par_iter_mut().zip(cube.par_iter()).for_each(|(m, x)| {
        *m &= MASKED | DETECTED;
        if x.to_f64().is_nan() {
            *m |= BLANK;
        }
    });
    let out = run_inner(cube, plan, mask, progress);
    let keep = plan.returned_bits();
    mask.par_iter_mut().for_each(|m| *m &= keep);
    out
}

fn run_inner<T: Real>(
    cube: &[T],
    plan: &Plan,
    mask: &mut [u8],
    progress: Progress<'_>,
) -> Result<Outcome> {
    // samples in T (an f32 cube's in f32: exact, half the bytes), measured in place
    let mut samples = gather_as::<T, T>(cube, plan.shape, plan.sampling);
    let ext = plan
        .noise
        .needs_extremes()
        .then(|| extremes_or_nan(extremes(cube)));
    let rms0 = plan
        .noise
        .measure_in_place(&mut samples, ext, plan.fitter.as_ref())?;
    drop(samples);
    let mut s: Vec<T> = vec![T::default(); cube.len()];
    let mut outcome = Outcome {
        rms0,
        rms: Vec::with_capacity(plan.kernels.len()),
    };
    let mut fresh: Vec<usize> = Vec::new();
    let mut trace = Trace::new();
    for (k, ker) in plan.kernels.iter().enumerate() {
        crate::backend::cancel::check()?;
        let spatial = Spatial::new(ker, plan);
        if k > 0 && ker.same_spatial(&plan.kernels[k - 1]) {
            if !fresh.is_empty() {
                spatial.update(cube, mask, plan, rms0, &mut fresh, &mut s);
                trace.mark("update");
            }
        } else {
            spatial.build(cube, mask, plan, rms0, &mut s);
            trace.mark("spatial");
        }
        let zf = ker.z.clone().unwrap_or_else(identity);
        let (rms, cands) = if ker.use_rms0 {
            (rms0, None)
        } else {
            let ((mut samples, ext), cands) = measure_smoothed(&s, mask, plan, &zf);
            trace.mark("sample");
            let r = plan
                .noise
                .measure_in_place(&mut samples, ext, plan.fitter.as_ref())?;
            drop(samples);
            trace.mark("statistic");
            (r, cands)
        };
        crate::backend::cancel::check()?;
        fresh = match cands {
            Some(c) => {
                let (level, whole) = (plan.level(rms), ZSpan::whole());
                let list = |b: usize| c[b].list();
                clip_candidates(&s, mask, plan, &zf, &whole, level, c.len(), list, FOUND)
            }
            None => clip(&s, mask, plan, &zf, plan.level(rms)),
        };
        trace.mark("clip");
        outcome.rms.push(rms);
        progress(k, rms);
    }
    trace.report();
    Ok(outcome)
}

/// Stage timings printed to stderr when SKYCONV_TRACE is set (a development aid).
struct Trace {
    on: bool,
    last: std::time::Instant,
    stages: Vec<(&'static str, f64)>,
}

impl Trace {
    fn new() -> Self {
        Trace {
            on: std::env::var_os("SKYCONV_TRACE").is_some(),
            last: std::time::Instant::now(),
            stages: Vec::new(),
        }
    }

    fn mark(&mut self, name: &'static str) {
        if !self.on {
            return;
        }
        let now = std::time::Instant::now();
        let dt = (now - self.last).as_secs_f64();
        self.last = now;
        match self.stages.iter_mut().find(|(n, _)| *n == name) {
            Some(s) => s.1 += dt,
            None => self.stages.push((name, dt)),
        }
    }

    fn report(&self) {
        if self.on {
            let parts: Vec<String> = self
                .stages
                .iter()
                .map(|(n, t)| format!("{n} {t:.3}s"))
                .collect();
            eprintln!("scfind cpu: {}", parts.join(", "));
        }
    }
}

/// (nanmin, nanmax) of the finite values of `data`.
pub(crate) fn extremes<T: Real>(data: &[T]) -> Option<(f64, f64)> {
    data.par_chunks(1 << 16)
        .map(|c| {
            c.iter().fold(None, |acc, x| {
                let v = x.to_f64();
                if v.is_finite() {
                    merge_extremes(acc, Some((v, v)))
                } else {
                    acc
                }
            })
        })
        .reduce(|| None, merge_extremes)
}

// ---------------------------------------------------------------- spatial smoothing

/// The spatial passes of one kernel and, for incremental updates, the response of a unit
/// change at each row/column position.
struct Spatial<'a> {
    y: &'a [Filter1d],
    x: &'a [Filter1d],
    mode: Mode,
    /// SoFiA-2's boxcar arithmetic (every spatial pass is a boxcar and the plan is exact).
    exact: bool,
}

impl<'a> Spatial<'a> {
    fn new(ker: &'a Kernel, plan: &Plan) -> Self {
        Spatial {
            y: &ker.y,
            x: &ker.x,
            mode: plan.mode,
            exact: exact_spatial(ker, plan),
        }
    }

    /// Smooth every plane of the prepared cube into `s`.
    fn build<T: Real>(&self, cube: &[T], mask: &[u8], plan: &Plan, rms0: f64, s: &mut [T]) {
        let [_, ny, nx] = plan.shape;
        let plane = ny * nx;
        let stop = crate::backend::cancel::current();
        let stop = &stop;
        s.par_chunks_mut(plane).enumerate().for_each_init(
            || Planes::new(ny, nx),
            |bufs, (z, out)| {
                if stop.is_set() {
                    return;
                }
                let r = z * plane..(z + 1) * plane;
                self.plane_any(&cube[r.clone()], &mask[r], plan, rms0, bufs, out);
            },
        );
    }

    /// `plane`, through its AVX2 build where the CPU has AVX2.
    fn plane_any<T: Real>(
        &self,
        src: &[T],
        m: &[u8],
        plan: &Plan,
        rms0: f64,
        bufs: &mut Planes<T>,
        out: &mut [T],
    ) {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: the CPU has AVX2.
            unsafe { self.plane_avx2(src, m, plan, rms0, bufs, out) };
            return;
        }
        self.plane(src, m, plan, rms0, bufs, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn plane_avx2<T: Real>(
        &self,
        src: &[T],
        m: &[u8],
        plan: &Plan,
        rms0: f64,
        bufs: &mut Planes<T>,
        out: &mut [T],
    ) {
        self.plane(src, m, plan, rms0, bufs, out)
    }

    /// One plane: prepare (NaN → 0, replacement), y passes, x passes, store.
    #[inline(always)]
    fn plane<T: Real>(
        &self,
        src: &[T],
        m: &[u8],
        plan: &Plan,
        rms0: f64,
        bufs: &mut Planes<T>,
        out: &mut [T],
    ) {
        let (ny, nx) = (bufs.ny, bufs.nx);
        if self.exact {
            self.plane_exact(src, m, plan, rms0, bufs, out);
            return;
        }
        if self.y.is_empty() && self.x.is_empty() {
            // no passes: the prepared plane itself, rounded to T as below
            prepare_into(out, src, m, plan, rms0);
            return;
        }
        let Planes { a, b, acc, ext, .. } = bufs;
        a.resize(ny * nx, 0.0);
        b.resize(ny * nx, 0.0);
        for ((d, &x), &mb) in a.iter_mut().zip(src).zip(m) {
            *d = prepared(x, mb, plan.replace, rms0);
        }
        for f in self.y {
            rows_pass::<T>(a, b, ny, nx, f, self.mode, acc);
            std::mem::swap(a, b);
        }
        for f in self.x {
            for (src_row, dst_row) in a.chunks(nx).zip(b.chunks_mut(nx)) {
                line_pass::<T>(src_row, dst_row, f, self.mode, ext, acc);
            }
            std::mem::swap(a, b);
        }
        for (o, &v) in out.iter_mut().zip(a.iter()) {
            *o = T::from_f64(v);
        }
    }

    /// `plane` in SoFiA-2's arithmetic: every row (x) through all its boxcars, then every
    /// column (y), in T. One sweep from the last row up: strips of `STRIP` rows are prepared,
    /// transposed and run through the x chain, and their rows go on into the y chain, whose
    /// last pass writes `out`; only strips and rings are touched besides `src` and `out`.
    #[inline(always)]
    fn plane_exact<T: Real>(
        &self,
        src: &[T],
        m: &[u8],
        plan: &Plan,
        rms0: f64,
        bufs: &mut Planes<T>,
        out: &mut [T],
    ) {
        let (ny, nx) = (bufs.ny, bufs.nx);
        let radii = |fs: &[Filter1d]| fs.iter().map(|f| f.taps() / 2).collect::<Vec<_>>();
        let (rx, ry) = (radii(self.x), radii(self.y));
        if !bufs.xc.has_radii(&rx) {
            bufs.xc = Chain::new(&rx);
        }
        if !bufs.yc.has_radii(&ry) {
            bufs.yc = Chain::new(&ry);
        }
        let Planes {
            ta: strip,
            tb: t,
            tm: u,
            xc,
            yc,
            ..
        } = bufs;
        yc.reset(ny, nx);
        for y0 in (0..ny.div_ceil(STRIP)).rev().map(|k| k * STRIP) {
            let h = STRIP.min(ny - y0);
            let r = y0 * nx..(y0 + h) * nx;
            strip.resize(h * nx, T::default());
            t.resize(h * nx, T::default());
            prepare_into(strip, &src[r.clone()], &m[r], plan, rms0);
            if !self.x.is_empty() {
                // the x passes along axis 0 of the transposed strip (nx, h)
                transpose(strip, t, h, nx);
                xc.reset(nx, h);
                u.resize(h * nx, T::default());
                for x in (0..nx).rev() {
                    xc.push(x, &t[x * h..(x + 1) * h], u);
                }
                transpose(u, strip, nx, h);
            }
            for s in (0..h).rev() {
                yc.push(y0 + s, &strip[s * nx..(s + 1) * nx], out);
            }
        }
    }

    /// Re-replace the voxels `fresh` (newly masked) in `s`.
    fn update<T: Real>(
        &self,
        cube: &[T],
        mask: &[u8],
        plan: &Plan,
        rms0: f64,
        fresh: &mut [usize],
        s: &mut [T],
    ) {
        let [_, ny, nx] = plan.shape;
        let plane = ny * nx;
        fresh.par_sort_unstable();
        let (iy, ix) = if self.exact {
            // running means are not linear in their rounding: recompute the planes
            (Vec::new(), Vec::new())
        } else {
            (
                influence(self.y, self.mode, ny),
                influence(self.x, self.mode, nx),
            )
        };
        let avg = |t: &Vec<Vec<(u32, f64)>>| {
            t.iter().map(|v| v.len()).sum::<usize>() as f64 / t.len().max(1) as f64
        };
        let stamp_cost = avg(&iy) * avg(&ix);
        let taps: usize = self.y.iter().chain(self.x).map(|f| f.taps()).sum();
        let plane_cost = plane as f64 * (taps + 2) as f64;
        // Group the voxels by plane.
        let mut groups: Vec<(usize, &[usize])> = Vec::new();
        let mut rest: &[usize] = fresh;
        while let Some(&first) = rest.first() {
            let z = first / plane;
            let end = rest.partition_point(|&i| i / plane == z);
            groups.push((z, &rest[..end]));
            rest = &rest[end..];
        }
        let sp = Disjoint(s.as_mut_ptr());
        groups.par_iter().for_each_init(
            || Planes::new(ny, nx),
            |bufs, &(z, voxels)| {
                let base = z * plane;
                // SAFETY: each task owns plane z of s.
                let out = unsafe { std::slice::from_raw_parts_mut(sp.at(base), plane) };
                let r = base..base + plane;
                if self.exact || voxels.len() as f64 * stamp_cost > 0.5 * plane_cost {
                    self.plane_any(&cube[r.clone()], &mask[r], plan, rms0, bufs, out);
                    return;
                }
                let acc = &mut bufs.delta; // all zero between uses
                acc.resize(plane, 0.0);
                let (mut y0, mut y1, mut x0, mut x1) = (usize::MAX, 0, usize::MAX, 0);
                for &i in voxels {
                    let x = cube[i];
                    let old = prepared(x, mask[i] & !MASKED, plan.replace, rms0);
                    let new = prepared(x, mask[i], plan.replace, rms0);
                    let d = new - old;
                    if d == 0.0 {
                        continue;
                    }
                    let (y, xx) = ((i - base) / nx, (i - base) % nx);
                    for &(py, wy) in &iy[y] {
                        let row = py as usize * nx;
                        let f = wy * d;
                        for &(px, wx) in &ix[xx] {
                            acc[row + px as usize] += f * wx;
                        }
                    }
                    if let (Some(a), Some(b)) = (iy[y].first(), iy[y].last()) {
                        y0 = y0.min(a.0 as usize);
                        y1 = y1.max(b.0 as usize + 1);
                    }
                    if let (Some(a), Some(b)) = (ix[xx].first(), ix[xx].last()) {
                        x0 = x0.min(a.0 as usize);
                        x1 = x1.max(b.0 as usize + 1);
                    }
                }
                for y in y0..y1.max(y0) {
                    let row = y * nx;
                    for x in x0..x1.max(x0) {
                        let d = std::mem::take(&mut acc[row + x]);
                        if d != 0.0 {
                            out[row + x] = T::from_f64(out[row + x].to_f64() + d);
                        }
                    }
                }
            },
        );
    }
}

/// `dst` = the prepared values (`prepared`, in T) of `src` with mask bytes `m`. Runs of 32
/// voxels with no mask bit set (the bulk) only turn NaN into 0, in vector registers.
#[inline(always)]
fn prepare_into<T: Real>(dst: &mut [T], src: &[T], m: &[u8], plan: &Plan, rms0: f64) {
    const RUN: usize = 32;
    for ((d, s), m) in dst.chunks_mut(RUN).zip(src.chunks(RUN)).zip(m.chunks(RUN)) {
        if m.iter().fold(0u8, |a, &b| a | b) == 0 {
            // `prepared` of an unmasked voxel: NaN → +0, else the value itself
            for (d, &x) in d.iter_mut().zip(s) {
                *d = if x.is_nan() { T::default() } else { x };
            }
        } else {
            for ((d, &x), &mb) in d.iter_mut().zip(s).zip(m) {
                *d = T::from_f64(prepared(x, mb, plan.replace, rms0));
            }
        }
    }
}

/// Per-thread plane buffers, sized on first use (the exact path needs only the T ones).
struct Planes<T> {
    ny: usize,
    nx: usize,
    a: Vec<f64>,
    b: Vec<f64>,
    acc: Vec<f64>,
    ext: Vec<f64>,
    /// Stamp accumulator of `update`, kept all zero between uses.
    delta: Vec<f64>,
    /// The exact path's strips, in T, and its x and y chains of running means.
    ta: Vec<T>,
    tb: Vec<T>,
    tm: Vec<T>,
    xc: Chain<T>,
    yc: Chain<T>,
}

impl<T: Real> Planes<T> {
    fn new(ny: usize, nx: usize) -> Self {
        Planes {
            ny,
            nx,
            a: Vec::new(),
            b: Vec::new(),
            acc: Vec::new(),
            ext: Vec::new(),
            delta: Vec::new(),
            ta: Vec::new(),
            tb: Vec::new(),
            tm: Vec::new(),
            xc: Chain::new(&[]),
            yc: Chain::new(&[]),
        }
    }
}

#[inline(always)]
/// One pass along y of a (ny, nx) plane: dst row i = Σ_j w_j src row ext(i + offset + j·step).
fn rows_pass<T: Real>(
    src: &[f64],
    dst: &mut [f64],
    ny: usize,
    nx: usize,
    f: &Filter1d,
    mode: Mode,
    acc: &mut Vec<f64>,
) {
    acc.clear();
    acc.resize(nx, 0.0);
    let row = |p: isize| extend_index(p, ny, mode).map(|r| &src[r * nx..(r + 1) * nx]);
    let half = symmetric_half(f);
    let mut pairs: Vec<TapPair<'_>> = Vec::new();
    for (i, drow) in dst.chunks_mut(nx).enumerate() {
        let i = i as isize;
        if let Some(r) = half {
            // scipy's order for symmetric weights: w_c·x_i + Σ w_{c+j}·(x_{i−j} + x_{i+j}),
            // accumulated for RB columns at a time in registers.
            let centre = row(i);
            let wc = f.weights[r];
            pairs.clear();
            pairs.extend((1..=r).map(|j| {
                let j = j as isize;
                (f.weights[r + j as usize], row(i - j), row(i + j))
            }));
            let full = nx / RB * RB;
            let mut x0 = 0;
            while x0 < full {
                let mut a = [0.0f64; RB];
                if let Some(c) = centre {
                    let c = &c[x0..x0 + RB];
                    for t in 0..RB {
                        a[t] += wc * c[t];
                    }
                }
                for &(w, lo, hi) in &pairs {
                    match (lo, hi) {
                        (Some(u), Some(v)) => {
                            let (u, v) = (&u[x0..x0 + RB], &v[x0..x0 + RB]);
                            for t in 0..RB {
                                a[t] += w * (u[t] + v[t]);
                            }
                        }
                        (Some(u), None) | (None, Some(u)) => {
                            let u = &u[x0..x0 + RB];
                            for t in 0..RB {
                                a[t] += w * u[t];
                            }
                        }
                        (None, None) => {}
                    }
                }
                for t in 0..RB {
                    drow[x0 + t] = round::<T>(a[t] * f.scale);
                }
                x0 += RB;
            }
            for x in full..nx {
                let mut a = 0.0f64;
                if let Some(c) = centre {
                    a += wc * c[x];
                }
                for &(w, lo, hi) in &pairs {
                    match (lo, hi) {
                        (Some(u), Some(v)) => a += w * (u[x] + v[x]),
                        (Some(u), None) | (None, Some(u)) => a += w * u[x],
                        (None, None) => {}
                    }
                }
                drow[x] = round::<T>(a * f.scale);
            }
            continue;
        }
        acc.iter_mut().for_each(|a| *a = 0.0);
        for (j, &w) in f.weights.iter().enumerate() {
            // constant mode pads with 0: nothing to add
            if let Some(x) = row(i + f.offset + (j * f.step) as isize) {
                acc.iter_mut().zip(x).for_each(|(a, &v)| *a += w * v);
            }
        }
        for (d, &a) in drow.iter_mut().zip(acc.iter()) {
            *d = round::<T>(a * f.scale);
        }
    }
}

/// One pass along a contiguous line.
#[inline(always)]
fn line_pass<T: Real>(
    src: &[f64],
    dst: &mut [f64],
    f: &Filter1d,
    mode: Mode,
    ext: &mut Vec<f64>,
    acc: &mut Vec<f64>,
) {
    let n = src.len();
    let (lo, hi) = f.span();
    let at = |p: isize| extend_index(p, n, mode).map_or(0.0, |i| src[i]);
    ext.clear();
    if lo <= 0 && hi >= 0 {
        // the line itself, with boundary values on both sides
        ext.extend((lo..0).map(at));
        ext.extend_from_slice(src);
        ext.extend((n as isize..n as isize + hi).map(at));
    } else {
        ext.extend((lo..n as isize + hi).map(at));
    }
    acc.clear();
    acc.resize(n, 0.0);
    if let Some(r) = symmetric_half(f) {
        // RB outputs at a time in registers, scipy's order (centre, then pairs).
        let wc = f.weights[r];
        let full = n / RB * RB;
        let mut x0 = 0;
        while x0 < full {
            let mut a = [0.0f64; RB];
            let c = &ext[x0 + r..x0 + r + RB];
            for t in 0..RB {
                a[t] += wc * c[t];
            }
            for j in 1..=r {
                let w = f.weights[r + j];
                let (u, v) = (
                    &ext[x0 + r - j..x0 + r - j + RB],
                    &ext[x0 + r + j..x0 + r + j + RB],
                );
                for t in 0..RB {
                    a[t] += w * (u[t] + v[t]);
                }
            }
            for t in 0..RB {
                dst[x0 + t] = round::<T>(a[t] * f.scale);
            }
            x0 += RB;
        }
        for x in full..n {
            let mut a = 0.0f64;
            a += wc * ext[x + r];
            for j in 1..=r {
                a += f.weights[r + j] * (ext[x + r - j] + ext[x + r + j]);
            }
            dst[x] = round::<T>(a * f.scale);
        }
        return;
    } else {
        for (j, &w) in f.weights.iter().enumerate() {
            let e = &ext[j * f.step..j * f.step + n];
            acc.iter_mut().zip(e).for_each(|(a, &v)| *a += w * v);
        }
    }
    for (d, &a) in dst.iter_mut().zip(acc.iter()) {
        *d = round::<T>(a * f.scale);
    }
}

/// Half-width r of a centred, symmetric filter of 2r+1 contiguous taps (None otherwise).
#[inline(always)]
fn symmetric_half(f: &Filter1d) -> Option<usize> {
    let n = f.taps();
    let r = n / 2;
    let centred = n % 2 == 1 && f.step == 1 && f.offset == -(r as isize);
    (centred && (0..r).all(|j| f.weights[j] == f.weights[n - 1 - j])).then_some(r)
}

/// For each position i of a line of length n, the outputs (position, weight) a unit change
/// at i reaches through `passes` (exact arithmetic; boundary modes included).
fn influence(passes: &[Filter1d], mode: Mode, n: usize) -> Vec<Vec<(u32, f64)>> {
    if passes.is_empty() {
        return (0..n).map(|i| vec![(i as u32, 1.0)]).collect();
    }
    let reach: usize = passes
        .iter()
        .map(|f| {
            let (lo, hi) = f.span();
            lo.unsigned_abs().max(hi.unsigned_abs())
        })
        .sum();
    (0..n)
        .into_par_iter()
        .map_init(
            || (Vec::new(), Vec::new(), Vec::new(), Vec::new()),
            |(a, b, ext, acc), i| {
                let whole = mode == Mode::Wrap && (i < 2 * reach || i + 2 * reach >= n);
                let (lo, hi) = if whole {
                    (0, n)
                } else {
                    (i.saturating_sub(2 * reach), (i + 2 * reach + 1).min(n))
                };
                a.clear();
                a.resize(hi - lo, 0.0);
                a[i - lo] = 1.0;
                b.clear();
                b.resize(hi - lo, 0.0);
                for f in passes {
                    line_pass::<f64>(a, b, f, mode, ext, acc);
                    std::mem::swap(a, b);
                }
                a.iter()
                    .enumerate()
                    .filter(|(_, v)| **v != 0.0)
                    .map(|(p, &v)| ((lo + p) as u32, v))
                    .collect()
            },
        )
        .collect()
}

// ---------------------------------------------------------------- spectral pass

/// W at flat index `i`: the z filter applied to `s` along z, rounded to T; NaN for blanks.
#[inline]
fn smoothed_at<T: Real>(
    s: &[T],
    mask: &[u8],
    shape: [usize; 3],
    zf: &Filter1d,
    mode: Mode,
    i: usize,
) -> f64 {
    if mask[i] & BLANK != 0 {
        return f64::NAN;
    }
    let plane = shape[1] * shape[2];
    let (z, r) = (i / plane, i % plane);
    let mut acc = 0.0;
    for (j, &w) in zf.weights.iter().enumerate() {
        let p = z as isize + zf.offset + (j * zf.step) as isize;
        if let Some(q) = extend_index(p, shape[0], mode) {
            acc += w * s[q * plane + r].to_f64();
        }
    }
    round::<T>(acc * zf.scale)
}

/// Samples computed together by the sparse sampler.
const SAMPLE_CHUNK: usize = 4096;

/// W at sample slots k0.. (one chunk): taps outermost, so each pass over the chunk streams
/// through one plane offset with a fixed stride (prefetch-friendly); windows crossing the
/// z boundary are done point by point.
fn sparse_samples<T: Real>(
    s: &[T],
    mask: &[u8],
    plan: &Plan,
    zf: &Filter1d,
    k0: usize,
    out: &mut [f64],
) {
    let [nz, ny, nx] = plan.shape;
    let plane = ny * nx;
    let (lo, hi) = zf.span();
    let idx: Vec<usize> = (0..out.len())
        .map(|j| plan.sampling.index(plan.shape, k0 + j))
        .collect();
    out.iter_mut().for_each(|o| *o = 0.0);
    let inside = |i: usize| {
        let z = (i / plane) as isize;
        z + lo >= 0 && z + hi < nz as isize
    };
    for (j, &w) in zf.weights.iter().enumerate() {
        let d = zf.offset + (j * zf.step) as isize;
        for (o, &i) in out.iter_mut().zip(&idx) {
            if inside(i) {
                *o += w * s[(i as isize + d * plane as isize) as usize].to_f64();
            }
        }
    }
    for (o, &i) in out.iter_mut().zip(&idx) {
        *o = if mask[i] & BLANK != 0 {
            f64::NAN
        } else if inside(i) {
            round::<T>(*o * zf.scale)
        } else {
            smoothed_at(s, mask, plan.shape, zf, plan.mode, i)
        };
    }
}

/// The noise sample (W is rounded to T, so T holds it exactly) and, if the rule needs them,
/// its (nanmin, nanmax).
type NoiseSample<T> = (Vec<T>, Option<(f64, f64)>);

/// The noise sample of the smoothed cube, if the rule needs them its (nanmin, nanmax), and
/// (from a full pass) each column block's clip candidates. A sparse sample with a short
/// filter is computed point by point (no candidates), others (or with extremes) in one pass
/// over the cube.
fn measure_smoothed<T: Real>(
    s: &[T],
    mask: &[u8],
    plan: &Plan,
    zf: &Filter1d,
) -> (NoiseSample<T>, Option<Vec<Candidates<T>>>) {
    let n = plan.sampling.len(plan.shape);
    let want_ext = plan.noise.needs_extremes();
    // Point by point, each tap of each sample costs a cache line; the full pass streams the
    // cube once. Take whichever touches fewer lines.
    let per_line = (64 / std::mem::size_of::<T>()).max(1);
    if !want_ext
        && !exact_spectral(zf, plan)
        && n.saturating_mul(zf.taps()).saturating_mul(per_line) < s.len()
    {
        let mut samples = vec![T::default(); n];
        samples
            .par_chunks_mut(SAMPLE_CHUNK)
            .enumerate()
            .for_each_init(
                || vec![0.0f64; SAMPLE_CHUNK],
                |acc, (ci, out)| {
                    let acc = &mut acc[..out.len()];
                    sparse_samples(s, mask, plan, zf, ci * SAMPLE_CHUNK, acc);
                    out.iter_mut()
                        .zip(acc.iter())
                        .for_each(|(o, &v)| *o = T::from_f64(v));
                },
            );
        return ((samples, None), None);
    }
    let plane = plan.shape[1] * plan.shape[2];
    let mut samples = vec![T::from_f64(f64::NAN); n];
    let sp = Disjoint(samples.as_mut_ptr());
    let parts = spectral(
        s,
        plan,
        zf,
        &ZSpan::whole(),
        || (None, Candidates::for_planes(plan.shape[0], 256)),
        // inlined into the AVX2 spectral pass (called once per block row)
        #[inline(always)]
        |(st, cands): &mut (Option<(f64, f64)>, Candidates<T>), z, k0, w, scale| {
            let m = &mask[z * plane + k0..z * plane + k0 + w.len()];
            cands.visit(z * plane + k0, w, m, scale);
            plan.sampling
                .for_each_in_row(plan.shape, z, k0, w.len(), |off, slot| {
                    let v = T::from_f64(w_value::<T>(w[off], scale, m[off]));
                    // SAFETY: every slot belongs to exactly one position, visited once.
                    unsafe { *sp.at(slot) = v };
                });
            if want_ext {
                *st = merge_extremes(*st, row_extremes::<T>(w, m, scale));
            }
        },
    );
    let (parts, cands): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    let ext = want_ext.then(|| extremes_or_nan(parts.into_iter().fold(None, merge_extremes)));
    ((samples, ext), Some(cands))
}

/// A column block's voxels (flat index, W) with |W| above `floor`, not blank, at most `cap`
/// of them: when the list fills, `floor` rises and the values at or below it are dropped.
/// After the noise pass it holds every voxel of the block with |W| > floor, so a clip level
/// above `floor` is decided from the list without a second pass over the block. Any floor
/// keeps that true; the raise only sets how often the list refills (see `raise`).
/// W is kept in T (it is rounded to T: exact), in lists sized once (`cap`): every column
/// block's list lives until the clip, so their bytes add up to a few % of the cube.
struct Candidates<T> {
    floor: f64,
    cap: usize,
    /// planes of the block and voxels offered so far: the share of the block already seen
    rows: usize,
    seen: usize,
    idx: Vec<usize>,
    val: Vec<T>,
}

impl<T: Real> Candidates<T> {
    fn new(cap: usize, rows: usize) -> Self {
        Candidates {
            floor: 0.0,
            cap,
            rows,
            seen: 0,
            idx: Vec::new(),
            val: Vec::new(),
        }
    }

    /// The list of a column block of `planes` planes (`BLOCK` columns): room for 1/128 of its
    /// voxels, so that a clip level above the bulk of the noise is decided from it, and for
    /// `least` at least (the single call: 256).
    fn for_planes(planes: usize, least: usize) -> Self {
        Candidates::new((planes * BLOCK / 128).max(least), planes)
    }

    fn list(&self) -> CandidateList<'_, T> {
        (self.floor, &self.idx, &self.val)
    }

    /// Take the voxels of one row of sums `w` (W = round_T(w · scale)) starting at `base`.
    #[inline(always)]
    fn visit(&mut self, base: usize, w: &[f64], m: &[u8], scale: f64) {
        self.seen += w.len();
        let total = self.rows * w.len();
        // sums at or below the bound cannot pass the floor once rounded (see `clip`)
        scan_above(w, quick_bound(self.floor, scale), |c, a| {
            let v = round::<T>(a * scale);
            if v.abs() > self.floor && m[c] & BLANK == 0 {
                if self.idx.capacity() == 0 {
                    // the list fills on its first rows (the floor starts at 0): room for
                    // `cap` once, not a doubling past it
                    self.idx.reserve_exact(self.cap);
                    self.val.reserve_exact(self.cap);
                }
                self.idx.push(base + c);
                self.val.push(T::from_f64(v));
                if self.idx.len() >= self.cap {
                    self.raise(total);
                }
            }
            quick_bound(self.floor, scale)
        });
    }

    /// Raise the floor so that, if the rest of the block (`total` voxels in all) is like the
    /// part seen, about 2 `cap` values would pass it: the list refills once or twice more
    /// (each time to its median) instead of ~10 times from a floor of 0. Keeps at most half.
    fn raise(&mut self, total: usize) {
        let len = self.val.len();
        let want = (2 * self.cap * self.seen / total.max(1))
            .max(8)
            .min(len / 2);
        // scratch for the selection, freed at once (kept, it would double every list)
        let mut mag: Vec<f64> = self.val.iter().map(|v| v.to_f64().abs()).collect();
        let (_, &mut t, _) = mag.select_nth_unstable_by(len - 1 - want, f64::total_cmp);
        drop(mag);
        self.floor = self.floor.max(t);
        let mut keep = 0;
        for j in 0..len {
            if self.val[j].to_f64().abs() > self.floor {
                self.idx[keep] = self.idx[j];
                self.val[keep] = self.val[j];
                keep += 1;
            }
        }
        self.idx.truncate(keep);
        self.val.truncate(keep);
    }
}

/// The column blocks' candidates of a Dask block as one object (`super::ClipCandidates`).
fn pack<T: Real>(cands: Vec<Candidates<T>>) -> ClipCandidates {
    let n = cands.iter().map(|c| c.idx.len()).sum();
    let mut out = ClipCandidates {
        floor: Vec::with_capacity(cands.len()),
        ends: Vec::with_capacity(cands.len()),
        idx: Vec::with_capacity(n),
        val: Vec::with_capacity(n),
    };
    for c in cands {
        out.floor.push(c.floor);
        out.idx.extend_from_slice(&c.idx);
        out.val.extend(c.val.iter().map(|v| v.to_f64()));
        out.ends.push(out.idx.len());
    }
    out
}

impl ClipCandidates {
    /// Column block b's list.
    fn list(&self, b: usize) -> CandidateList<'_, f64> {
        let start = if b == 0 { 0 } else { self.ends[b - 1] };
        let r = start..self.ends[b];
        (self.floor[b], &self.idx[r.clone()], &self.val[r])
    }

    /// Refuse lists that are not a block of `plan.shape`'s: each column block's list within
    /// its own columns (the clip marks the blocks in parallel).
    fn check(&self, plan: &Plan) -> Result<()> {
        let plane = plan.shape[1] * plan.shape[2];
        let blocks = plane.div_ceil(BLOCK);
        let bad = |what: &str| Err(Error::shape(format!("clip candidates: {what}")));
        if self.floor.len() != blocks || self.ends.len() != blocks {
            return bad(&format!(
                "{blocks} column blocks expected, got {}",
                self.floor.len()
            ));
        }
        if self.idx.len() != self.val.len() || self.ends.last() != Some(&self.idx.len()) {
            return bad("the lists' lengths differ");
        }
        if self.ends.windows(2).any(|e| e[0] > e[1]) {
            return bad("the block ends are not in order");
        }
        let n = plan.len();
        let outside = (0..blocks).into_par_iter().any(|b| {
            let (_, idx, _) = self.list(b);
            idx.iter().any(|&i| i >= n || (i % plane) / BLOCK != b)
        });
        if outside {
            return bad("a voxel outside its column block");
        }
        Ok(())
    }
}

/// `f(c, w[c])` for each c with |w[c]| > q, in order; `f` returns the bound for the rest
/// (the candidates' floor rises). Chunks of 8 with none above are skipped by one vector test:
/// above the noise's bulk, most are.
#[inline(always)]
fn scan_above(w: &[f64], mut q: f64, mut f: impl FnMut(usize, f64) -> f64) {
    let mut chunks = w.chunks_exact(8);
    let mut c0 = 0;
    for c in &mut chunks {
        let c: &[f64; 8] = c.try_into().expect("chunks of 8");
        if c.iter().fold(false, |any, a| any | (a.abs() > q)) {
            for (j, &a) in c.iter().enumerate() {
                if a.abs() > q {
                    q = f(c0 + j, a);
                }
            }
        }
        c0 += 8;
    }
    for (j, &a) in chunks.remainder().iter().enumerate() {
        if a.abs() > q {
            q = f(c0 + j, a);
        }
    }
}

/// Sums at or below this cannot give |round_T(sum · scale)| > `level` (the rounding's relative
/// error is < 1e-7); −1 for level 0, where every sum must be rounded and tested.
#[inline(always)]
fn quick_bound(level: f64, scale: f64) -> f64 {
    if level > 0.0 {
        level / scale * (1.0 - 1e-6)
    } else {
        -1.0
    }
}

/// Where the planes of `s` sit along z for the spectral pass. Whole: `s` is the block's own
/// planes. A z-slab of a split run (SoFiA-2's running mean only; `block_sample` through
/// `super::slab_sample`): `s` holds `below` halo planes under the block's own planes and the
/// halo over them, the running mean enters at the top from `carry` (its value at the first
/// plane over the block, from the slab above; None: the block's top is the cube's) and its
/// value at the block's first plane is written to `out` (the carry for the slab below).
pub(crate) struct ZSpan<'a, T> {
    pub below: usize,
    pub carry: Option<&'a [T]>,
    pub out: Option<Disjoint<T>>,
}

impl<T> ZSpan<'_, T> {
    pub fn whole() -> Self {
        ZSpan {
            below: 0,
            carry: None,
            out: None,
        }
    }
}

/// Run `visit(z, first column, sums, scale)` over every plane z of every block of columns: W =
/// round_T(sums · scale) is the z filter applied to `s`, one block row at a time (the visitor
/// rounds only what it needs). Returns the per-block results of `visit`'s state.
fn spectral<T: Real, S: Send>(
    s: &[T],
    plan: &Plan,
    zf: &Filter1d,
    span: &ZSpan<'_, T>,
    init: impl Fn() -> S + Sync,
    visit: impl Fn(&mut S, usize, usize, &[f64], f64) + Sync,
) -> Vec<S> {
    let plane = plan.shape[1] * plan.shape[2];
    (0..plane.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            let mut st = init();
            spectral_one(s, plan, zf, span, b, &mut st, &visit);
            st
        })
        .collect()
}

/// `spectral` over column block `b` only.
fn spectral_one<T: Real, S>(
    s: &[T],
    plan: &Plan,
    zf: &Filter1d,
    span: &ZSpan<'_, T>,
    b: usize,
    st: &mut S,
    visit: &impl Fn(&mut S, usize, usize, &[f64], f64),
) {
    let k0 = b * BLOCK;
    let mut bufs = (vec![0.0f64; BLOCK], Vec::new());
    if has_avx2() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2.
        unsafe {
            spectral_block_avx2(s, plan, zf, span, k0, &mut bufs, st, visit)
        }
    } else {
        spectral_block(s, plan, zf, span, k0, &mut bufs, st, visit)
    }
}

#[allow(clippy::too_many_arguments)]
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn spectral_block_avx2<T: Real, S>(
    s: &[T],
    plan: &Plan,
    zf: &Filter1d,
    span: &ZSpan<'_, T>,
    k0: usize,
    bufs: &mut (Vec<f64>, Vec<T>),
    st: &mut S,
    visit: &impl Fn(&mut S, usize, usize, &[f64], f64),
) {
    spectral_block(s, plan, zf, span, k0, bufs, st, visit)
}

/// The spectral pass over columns k0.. of every plane (see `spectral`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn spectral_block<T: Real, S>(
    s: &[T],
    plan: &Plan,
    zf: &Filter1d,
    span: &ZSpan<'_, T>,
    k0: usize,
    bufs: &mut (Vec<f64>, Vec<T>),
    st: &mut S,
    visit: &impl Fn(&mut S, usize, usize, &[f64], f64),
) {
    let [nz, ny, nx] = plan.shape;
    let plane = ny * nx;
    let width = BLOCK.min(plane - k0);
    let mode = plan.mode;
    let acc = &mut bufs.0[..width];
    let row = |p: isize| -> Option<&[T]> {
        extend_index(p, nz, mode).map(|q| &s[q * plane + k0..q * plane + k0 + width])
    };
    let scale = zf.scale;
    if exact_spectral(zf, plan) {
        // SoFiA-2: running mean from the last plane down (zero padding), in the element type.
        // A z-slab (`ZSpan`): s's rows are its own planes shifted by `below`, halo planes
        // around them; the mean enters from the carry, and leaves its value at plane 0.
        let r = zf.taps() / 2;
        let inv = T::from_f64(running::inverse_width::<T>(r));
        let rows = (s.len() / plane) as isize;
        let below = span.below as isize;
        let zrow = |p: isize| -> Option<&[T]> {
            (p >= 0 && p < rows)
                .then(|| &s[p as usize * plane + k0..p as usize * plane + k0 + width])
        };
        let m = &mut bufs.1;
        m.resize(width, T::default());
        let top = match span.carry {
            Some(c) => {
                m.copy_from_slice(&c[k0..k0 + width]);
                nz
            }
            None => {
                running::start::<T, false>(m, zrow, below + nz as isize - 1, r, inv);
                acc.iter_mut()
                    .zip(m.iter())
                    .for_each(|(a, v)| *a = v.to_f64());
                visit(st, nz - 1, k0, acc, 1.0);
                nz - 1
            }
        };
        for z in (0..top).rev() {
            let zi = below + z as isize;
            // the next row to enter is a page or more away: fetch it while this one is used
            if let Some(next) = zrow(zi - r as isize - 1) {
                prefetch(next);
            }
            running::step::<T, false>(m, zrow(zi - r as isize), zrow(zi + r as isize + 1), inv);
            acc.iter_mut()
                .zip(m.iter())
                .for_each(|(a, v)| *a = v.to_f64());
            visit(st, z, k0, acc, 1.0);
        }
        if let Some(out) = &span.out {
            for (c, &v) in m.iter().enumerate() {
                // SAFETY: each column block writes its own columns of the carry plane.
                unsafe { *out.at(k0 + c) = v };
            }
        }
    } else if zf.boxcar {
        let size = zf.taps() as isize;
        acc.iter_mut().for_each(|a| *a = 0.0);
        for p in zf.offset..zf.offset + size {
            if let Some(r) = row(p) {
                acc.iter_mut().zip(r).for_each(|(a, &v)| *a += v.to_f64());
            }
        }
        for z in 0..nz {
            let zi = z as isize;
            if z > 0 {
                match (row(zi + zf.offset + size - 1), row(zi + zf.offset - 1)) {
                    (Some(new), Some(old)) => acc
                        .iter_mut()
                        .zip(new.iter().zip(old))
                        .for_each(|(a, (&n, &o))| *a += n.to_f64() - o.to_f64()),
                    (Some(new), None) => {
                        acc.iter_mut().zip(new).for_each(|(a, &n)| *a += n.to_f64())
                    }
                    (None, Some(old)) => {
                        acc.iter_mut().zip(old).for_each(|(a, &o)| *a -= o.to_f64())
                    }
                    (None, None) => {}
                }
            }
            if !acc.iter().all(|a| a.is_finite()) {
                // Recount windows holding inf/NaN so they stay local to those windows.
                for c in 0..width {
                    if !acc[c].is_finite() {
                        acc[c] = (zi + zf.offset..zi + zf.offset + size)
                            .map(|p| row(p).map_or(0.0, |r| r[c].to_f64()))
                            .sum();
                    }
                }
            }
            visit(st, z, k0, acc, scale);
        }
    } else {
        for z in 0..nz {
            acc.iter_mut().for_each(|a| *a = 0.0);
            for (j, &wt) in zf.weights.iter().enumerate() {
                if let Some(r) = row(z as isize + zf.offset + (j * zf.step) as isize) {
                    acc.iter_mut()
                        .zip(r)
                        .for_each(|(a, &v)| *a += wt * v.to_f64());
                }
            }
            visit(st, z, k0, acc, scale);
        }
    }
}

/// Ask for `v`'s cache lines ahead of use (a hint: no effect on results).
#[inline(always)]
fn prefetch<T>(v: &[T]) {
    #[cfg(target_arch = "x86_64")]
    for line in v.chunks(64 / std::mem::size_of::<T>().max(1)) {
        // SAFETY: a prefetch of a valid address; it reads nothing.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr() as *const i8
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

/// The bits the single call's clip sets (a Dask clip sets `MASKED` alone).
const FOUND: u8 = MASKED | DETECTED;

/// Add every voxel with |W| above `level` to the mask; returns the voxels newly `MASKED`.
fn clip<T: Real>(s: &[T], mask: &mut [u8], plan: &Plan, zf: &Filter1d, level: f64) -> Vec<usize> {
    let mp = Disjoint(mask.as_mut_ptr());
    let visit = clip_visitor::<T>(plan, level, &mp, FOUND);
    spectral(s, plan, zf, &ZSpan::whole(), Vec::new, visit).concat()
}

/// Whether a column block's candidates (`Candidates`, floor `floor`) decide the clip at
/// `level`: they hold every voxel with |W| above the floor, so a level above it.
#[inline(always)]
fn decided(level: f64, floor: f64) -> bool {
    level > floor
}

/// One column block's candidates as the clip reads them: (floor, flat indices, W).
type CandidateList<'a, V> = (f64, &'a [usize], &'a [V]);

/// `clip` from the noise pass's candidates (`list(b)`: column block b's, of `blocks`): a
/// block whose list decides `level` (`decided`) is clipped from the list, the others by
/// `clip`'s pass over that block of `s` (`span`: its place along z). Sets `mark`; returns the
/// voxels newly `MASKED`.
#[allow(clippy::too_many_arguments)]
fn clip_candidates<'c, T: Real, V: Real>(
    s: &[T],
    mask: &mut [u8],
    plan: &Plan,
    zf: &Filter1d,
    span: &ZSpan<'_, T>,
    level: f64,
    blocks: usize,
    list: impl Fn(usize) -> CandidateList<'c, V> + Sync,
    mark: u8,
) -> Vec<usize> {
    let mp = Disjoint(mask.as_mut_ptr());
    let visit = clip_visitor::<T>(plan, level, &mp, mark);
    let parts: Vec<Vec<usize>> = (0..blocks)
        .into_par_iter()
        .map(|b| {
            let mut fresh = Vec::new();
            let (floor, idx, val) = list(b);
            if decided(level, floor) {
                for (&i, &w) in idx.iter().zip(val) {
                    if plan.above(w.to_f64(), level) {
                        // SAFETY: block b's candidates lie in its own columns.
                        let mb = unsafe { &mut *mp.at(i) };
                        if *mb & MASKED == 0 {
                            fresh.push(i);
                        }
                        *mb |= mark;
                    }
                }
            } else {
                spectral_one(s, plan, zf, span, b, &mut fresh, &visit);
            }
            fresh
        })
        .collect();
    parts.concat()
}

/// The clip's visitor for `spectral`: marks the non-blank voxels above `level` with `mark`
/// and lists those that were not `MASKED`.
fn clip_visitor<'a, T: Real>(
    plan: &'a Plan,
    level: f64,
    mp: &'a Disjoint<u8>,
    mark: u8,
) -> impl Fn(&mut Vec<usize>, usize, usize, &[f64], f64) + Sync + 'a {
    let plane = plan.shape[1] * plan.shape[2];
    #[inline(always)]
    move |fresh: &mut Vec<usize>, z, k0, sums, scale| {
        let base = z * plane + k0;
        let q = quick_bound(level, scale);
        scan_above(sums, q, |c, a| {
            // SAFETY: each task owns columns k0..k0+len of every plane.
            let mb = unsafe { &mut *mp.at(base + c) };
            if *mb & BLANK == 0 && plan.above(round::<T>(a * scale), level) {
                if *mb & MASKED == 0 {
                    fresh.push(base + c);
                }
                *mb |= mark;
            }
            q
        });
    }
}

// ---------------------------------------------------------------- stages (Dask)

/// The prepared cube (NaN → 0, `MASKED` voxels replaced) smoothed spatially with `ker`, as
/// `run` builds it: whole (y, x) planes, so a stack of planes gives the whole cube's values.
pub fn spatial_stage<T: Real>(
    cube: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
) -> Vec<T> {
    let mut s = vec![T::default(); cube.len()];
    Spatial::new(ker, plan).build(cube, mask, plan, rms0, &mut s);
    s
}

/// The values a block pass smooths from: the block itself (`Smoothed`) or its spatial stage
/// (`Cube`: prepared and smoothed by `ker`'s spatial passes, if any).
fn block_source<'a, T: Real>(
    x: &'a [T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
    input: BlockInput,
    owned: &'a mut Vec<T>,
) -> &'a [T] {
    if input == BlockInput::Cube {
        *owned = spatial_stage(x, mask, plan, ker, rms0);
        owned
    } else {
        x
    }
}

/// W of one voxel from the spectral pass's sum `a` (`scale`: its filter's), as `run`
/// samples and clips it: rounded to T, NaN where blank.
#[inline(always)]
fn w_value<T: Real>(a: f64, scale: f64, m: u8) -> f64 {
    if m & BLANK != 0 {
        f64::NAN
    } else {
        round::<T>(a * scale)
    }
}

/// The smallest and largest W of a row of sums `w` (scaled by `scale`, rounded to T) over its
/// finite, non-blank voxels; None when there is none. Rounding is monotonic, so only the
/// extreme sums are rounded.
#[inline(always)]
fn row_extremes<T: Real>(w: &[f64], m: &[u8], scale: f64) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (&v, &mb) in w.iter().zip(m) {
        if mb & BLANK == 0 && v.is_finite() {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    (lo <= hi).then(|| (round::<T>(lo * scale), round::<T>(hi * scale)))
}

/// The one driver of the Dask block passes (`block_w`, `block_sample`, `block_clip`): the
/// block's source (`block_source`) through `ker`'s spectral pass, every (plane, column block)
/// of sums handed to `visit` as `spectral` hands them. Not for `BlockInput::Raw`.
#[allow(clippy::too_many_arguments)]
fn block_pass<T: Real, S: Send>(
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
    input: BlockInput,
    span: &ZSpan<'_, T>,
    init: impl Fn() -> S + Sync,
    visit: impl Fn(&mut S, usize, usize, &[f64], f64) + Sync,
) -> Result<Vec<S>> {
    let mut owned = Vec::new();
    let s = block_source(x, mask, plan, ker, rms0, input, &mut owned);
    crate::backend::cancel::check()?;
    let zf = ker.z.clone().unwrap_or_else(identity);
    Ok(spectral(s, plan, &zf, span, init, visit))
}

/// W of a Dask block (see `super::block_sample`; `Raw`: the block itself): the values `run`
/// samples and clips, rounded to T, NaN where `mask` has `BLANK` — `block_sample`'s kept W,
/// with no sample positions and no extremes.
pub fn block_w<T: Real>(
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
    input: BlockInput,
) -> Result<Vec<T>> {
    let whole = ZSpan::whole();
    let (_, _, w, _) = block_sample(x, mask, plan, ker, rms0, input, &[], false, Keep::W, &whole)?;
    Ok(w.unwrap_or_default())
}

/// Fewest candidates a column block of a Dask block pass keeps. Not the single call's 256: the
/// share of the block the list may hold sets how low its floor stays and so how many voxels
/// its visit takes, and a slab of 4 planes (the 8 GB graph's shape, bench/NOTES.md session 18)
/// would keep 1/16 of its voxels (its slab call took 2× the CPU of one keeping W).
const SLAB_LEAST: usize = 32;

/// A block's sample part on the CPU engine: `super::SampleParts` and the clip candidates.
pub(crate) type CpuSampleParts<T> = (
    Vec<f64>,
    Option<(f64, f64)>,
    Option<Vec<T>>,
    Option<ClipCandidates>,
);

/// A Dask task's part of the noise sample (see `super::block_sample`): W at the block's
/// sample positions `pos` (sorted) and the block's (min, max) of W, from the spectral pass's
/// sums as `measure_smoothed` takes them, and what `keep` asks for the block's clip: W itself
/// (else no W array is written) or the single call's clip candidates (`Candidates`, one list
/// a column block, gathered as `measure_smoothed` gathers them). `span`: the block's place
/// along z (a z-slab with halo and carry: `Smoothed` only).
#[allow(clippy::too_many_arguments)]
pub fn block_sample<T: Real>(
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
    input: BlockInput,
    pos: &[usize],
    want_ext: bool,
    keep: Keep,
    span: &ZSpan<'_, T>,
) -> Result<CpuSampleParts<T>> {
    let (keep_w, keep_c) = (keep == Keep::W, keep == Keep::Candidates);
    if input == BlockInput::Raw {
        if keep_c {
            return Err(Error::value("a raw block keeps no clip candidates"));
        }
        // the single call's first sample: the cube's own values (NaN stays NaN)
        let values = pos.par_iter().map(|&i| x[i].to_f64()).collect();
        let ext = if want_ext { extremes(x) } else { None };
        return Ok((values, ext, keep_w.then(|| x.to_vec()), None));
    }
    let plane = plan.shape[1] * plan.shape[2];
    let mut values = vec![f64::NAN; pos.len()];
    let vp = Disjoint(values.as_mut_ptr());
    let mut kept = if keep_w {
        crate::backend::alloc::try_vec(plan.len(), T::default(), "the block's W")?
    } else {
        Vec::new()
    };
    let kp = Disjoint(kept.as_mut_ptr());
    let parts = block_pass(
        x,
        mask,
        plan,
        ker,
        rms0,
        input,
        span,
        || (None, Candidates::for_planes(plan.shape[0], SLAB_LEAST)),
        // inlined into the AVX2 spectral pass (called once per block row), as the single call's
        #[inline(always)]
        |(st, cands): &mut (Option<(f64, f64)>, Candidates<T>), z, k0, w, scale| {
            let base = z * plane + k0;
            let m = &mask[base..base + w.len()];
            let a = pos.partition_point(|&p| p < base);
            let b = pos.partition_point(|&p| p < base + w.len());
            for (j, &p) in pos.iter().enumerate().take(b).skip(a) {
                let off = p - base;
                // SAFETY: each position lies in exactly one (plane, column block) visit.
                unsafe { *vp.at(j) = w_value::<T>(w[off], scale, m[off]) };
            }
            if keep_w {
                for (c, (&a, &mb)) in w.iter().zip(m).enumerate() {
                    // SAFETY: each task owns columns k0..k0+len of every plane.
                    unsafe { *kp.at(base + c) = T::from_f64(w_value::<T>(a, scale, mb)) };
                }
            }
            if keep_c {
                cands.visit(base, w, m, scale);
            }
            if want_ext {
                *st = merge_extremes(*st, row_extremes::<T>(w, m, scale));
            }
        },
    )?;
    let (parts, cands): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    let ext = if want_ext {
        parts.into_iter().fold(None, merge_extremes)
    } else {
        None
    };
    Ok((
        values,
        ext,
        keep_w.then_some(kept),
        keep_c.then(|| pack(cands)),
    ))
}

/// A z-slab's clip from the candidates its sample pass kept (see `super::slab_clip`): a copy
/// of `mask` with `MASKED` added where W is above `level`, decided from each column block's
/// list as the single call's clip decides it (`clip_candidates`), the other blocks by the
/// spectral pass over them again, from `s` with `span` (the slab's halo and carry, as its
/// sample pass had them). None when a block needs that pass and `s` is None.
pub fn slab_clip<T: Real>(
    s: Option<&[T]>,
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    span: &ZSpan<'_, T>,
    level: f64,
    cands: &ClipCandidates,
) -> Result<Option<Vec<u8>>> {
    cands.check(plan)?;
    let again = cands.floor.iter().any(|&f| !decided(level, f));
    let s = match s {
        Some(s) => s,
        None if again => return Ok(None),
        None => &[],
    };
    let mut out = mask.to_vec();
    let zf = ker.z.clone().unwrap_or_else(identity);
    let (blocks, list) = (cands.floor.len(), |b: usize| cands.list(b));
    clip_candidates(s, &mut out, plan, &zf, span, level, blocks, list, MASKED);
    Ok(Some(out))
}

/// A Dask task's clip (see `super::block_clip`): a copy of `mask` with `MASKED` added where
/// the block's W is above `level`, tested as `clip` tests it (no W array is written; `Raw`:
/// the block is W, as `block_sample` kept it).
pub fn block_clip<T: Real>(
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    ker: &Kernel,
    rms0: f64,
    input: BlockInput,
    level: f64,
) -> Result<Vec<u8>> {
    let mut out = mask.to_vec();
    if input == BlockInput::Raw {
        out.par_iter_mut().zip(x.par_iter()).for_each(|(mb, &w)| {
            if *mb & BLANK == 0 && plan.above(w.to_f64(), level) {
                *mb |= MASKED;
            }
        });
        return Ok(out);
    }
    let mp = Disjoint(out.as_mut_ptr());
    let visit = clip_visitor::<T>(plan, level, &mp, MASKED);
    let whole = ZSpan::whole();
    block_pass(x, mask, plan, ker, rms0, input, &whole, Vec::new, visit)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_hold_every_value_above_their_floor() {
        // rows of pseudo-random sums, a few blank voxels, a list far smaller than the block
        let (rows, width) = (200, 64);
        let val = |i: usize| ((i * 7919 % 10007) as f64 / 10007.0 - 0.5) * (1.0 + (i % 13) as f64);
        let mask: Vec<u8> = (0..rows * width)
            .map(|i| if i % 97 == 0 { BLANK } else { 0 })
            .collect();
        let mut c = Candidates::<f32>::new(300, rows);
        for z in 0..rows {
            let w: Vec<f64> = (0..width).map(|x| val(z * width + x)).collect();
            c.visit(z * width, &w, &mask[z * width..(z + 1) * width], 1.0);
        }
        assert!(c.floor > 0.0 && c.idx.len() < 300);
        let want: Vec<usize> = (0..rows * width)
            .filter(|&i| mask[i] & BLANK == 0 && (val(i) as f32 as f64).abs() > c.floor)
            .collect();
        let mut got = c.idx.clone();
        got.sort_unstable();
        assert_eq!(got, want);
        for (&i, &v) in c.idx.iter().zip(&c.val) {
            assert_eq!(v, val(i) as f32);
        }
    }
}
