//! À trous wavelet reconstruction (DUCHAMP 1.6.1's algorithm), separable, on the CPU and GPU.
//!
//! The data are reconstructed in independent *units*: each spectrum (dim 1, along axis 0),
//! each channel map (dim 2, the last two axes) or the whole cube (dim 3). For each unit:
//!
//! ```text
//! σ0 = MADFM(input)/0.6744888 (or the standard deviation when not robust); output = 0
//! repeat:
//!     c = input − output                       (blank voxels: b, see below)
//!     for s = 1..=L, hole spacing 2^(s−1):      (L: N, or N − 1 for DUCHAMP's 2-D)
//!         w = c − h_s ∗ c;  c = c − w           (h_s: separable filter, mirror edges; c keeps
//!                                                its value b at blank voxels)
//!         if s is kept:
//!             output += w where |w| > median(w) + snr·σ0·f[dim][s]   (mean(w) if not robust)
//!     output += c
//!     σ = MADFM(input − output)/0.6744888
//! until iteration ≥ 2 and |σ_prev − σ|/σ ≤ convergence   (or MAX_ITERATIONS)
//! blank voxels: output = input
//! ```
//! The filter ∗ runs as one 1-D pass per filtered axis (O(taps) per voxel per scale) on the
//! foundation's `filters`. Both engines implement [`Engine`]; [`State`] drives them with the same
//! control flow, so they differ only by floating-point rounding of the filter sums.
//!
//! # The two variants
//! [`Variant::Duchamp`] (the default) follows DUCHAMP 1.6.1 exactly. The facts it follows, from
//! DUCHAMP's documented behaviour (its CHANGES file for 1.2: "the full image dimensions are
//! always used to calculate the number of scales, and reflections will occur at the actual
//! image edges") and from the behaviour of its 1-, 2- and 3-D reconstructions:
//! - 1-D and 3-D: scales 1..=N, N from the full (untrimmed) dimensions; reflection at the array
//!   edges (x < 0 → −x, x ≥ n → 2(n−1) − x, repeated); blank voxels are left out of the filter
//!   sums (b = 0); scales scale_min..=scale_max are thresholded (scale_max 0 or > N: all);
//!   the loop stops on `convergence`.
//! - 2-D: the scale loop runs `scale < N`, so scales 1..=N−1 are computed and thresholded and
//!   the smooth array left after N−1 scales is added; scale_max is not applied (every scale ≥
//!   scale_min is thresholded); the loop stops on DUCHAMP's fixed tolerance 0.005
//!   (`DUCHAMP_2D_TOLERANCE`), not on reconConvergence; blank pixels are not left out of the
//!   filter sums: their coefficient is input − output, which is DUCHAMP's BLANK value
//!   (`Params::blank_value`; NaNs read from FITS hold it) in the first iteration and 0 in the
//!   later ones (DUCHAMP sets the output of blank pixels to the input as soon as it thresholds
//!   a scale), or the BLANK value again in every iteration when no scale is thresholded.
//! - Noise factors: DUCHAMP's tables with their two quirks (see `factors`).
//!
//! [`Variant::Corrected`] is skyconv's corrected reconstruction: scales 1..=N for every dim,
//! scale_max and `convergence` honoured in 2-D, blank voxels left out of every sum (b = 0), and
//! the mended noise factors. 1-D and 3-D results equal DUCHAMP's in both variants wherever the
//! table quirks (triangle 1-D scale 18) are not reached.
//!
//! Not reproduced: DUCHAMP's single-precision arithmetic (skyconv sums in double, so results
//! differ by float32 rounding), and its flagTrim (removing blank borders before the
//! reconstruction, which moves the reflection edges and can lower N): skyconv reconstructs the
//! array it is given.

pub mod blocks;
mod cpu;
mod cuda;
mod factors;
mod unitstats;

pub use factors::WaveletFilter;

use crate::backend::Device;
use crate::cube::filters::{AxisView, Filter1d, Mode, Pass};
use crate::error::{Error, Result};
use crate::real::Real;

/// DUCHAMP's MADFM → σ conversion for Gaussian noise.
pub const MADFM_TO_SIGMA: f64 = 0.6744888;
/// DUCHAMP's 2-D reconstruction stops on this fixed relative change (its `reconTolerance`),
/// whatever reconConvergence says.
pub const DUCHAMP_2D_TOLERANCE: f64 = 0.005;
/// DUCHAMP's BLANK value for NaN pixels of a FITS file without a BLANK keyword.
pub const DUCHAMP_BLANK: f64 = -8.00061;
/// Cap on the convergence loop (DUCHAMP has none). Cubes and maps converge in 2-4 iterations;
/// only units of very few voxels (spectra of ~20 channels) can creep on for longer.
pub const MAX_ITERATIONS: usize = 100;

/// Which reconstruction: DUCHAMP 1.6.1's, quirks included, or skyconv's corrected one (see the
/// module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Duchamp,
    Corrected,
}

impl Variant {
    pub fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "duchamp" => Ok(Variant::Duchamp),
            "corrected" => Ok(Variant::Corrected),
            _ => Err(Error::value(format!(
                "variant must be 'duchamp' or 'corrected', got {name:?}"
            ))),
        }
    }
}

/// Reconstruction parameters.
#[derive(Debug, Clone)]
pub struct Params {
    /// 1, 2 or 3 (DUCHAMP `reconDim`).
    pub dim: usize,
    /// Threshold in units of the scale's noise (DUCHAMP `snrRecon`).
    pub snr: f64,
    /// First scale added to the output, ≥ 1 (DUCHAMP `scaleMin`).
    pub scale_min: usize,
    /// Last scale added to the output; 0 = all (DUCHAMP `scaleMax`).
    pub scale_max: usize,
    pub filter: WaveletFilter,
    /// Relative change of the residual noise that ends the loop (DUCHAMP `reconConvergence`).
    pub convergence: f64,
    /// Median/MADFM statistics (true) or mean/standard deviation (DUCHAMP `flagRobustStats`).
    pub robust: bool,
    pub variant: Variant,
    /// The value DUCHAMP holds in blank pixels (its BLANK×BSCALE+BZERO); read only by the
    /// DUCHAMP variant's 2-D reconstruction.
    pub blank_value: f64,
}

impl Params {
    fn validate(&self) -> Result<()> {
        if !(1..=3).contains(&self.dim) {
            return Err(Error::value(format!(
                "dim must be 1, 2 or 3, got {}",
                self.dim
            )));
        }
        if !self.snr.is_finite() || self.snr < 0.0 {
            return Err(Error::value(format!(
                "snr_recon must be finite and >= 0, got {}",
                self.snr
            )));
        }
        if self.scale_min < 1 {
            return Err(Error::value("scale_min must be >= 1"));
        }
        if self.scale_max != 0 && self.scale_max < self.scale_min {
            return Err(Error::value(format!(
                "scale_max ({}) must be 0 (all scales) or >= scale_min ({})",
                self.scale_max, self.scale_min
            )));
        }
        if !self.convergence.is_finite() || self.convergence <= 0.0 {
            return Err(Error::value(format!(
                "convergence must be finite and > 0, got {}",
                self.convergence
            )));
        }
        if !self.blank_value.is_finite() {
            return Err(Error::value(format!(
                "blank_value must be finite, got {}",
                self.blank_value
            )));
        }
        Ok(())
    }
}

/// How the array splits into independent units. Element k of unit u sits at
/// `u·unit_stride + k·elem_stride`; voxel i belongs to unit `(i / unit_div) % units`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub shape: Vec<usize>,
    pub dim: usize,
    pub units: usize,
    /// Voxels per unit.
    pub len: usize,
    pub unit_stride: usize,
    pub elem_stride: usize,
    pub unit_div: usize,
    /// The filtered axes, last first (the order of the passes).
    pub axes: Vec<usize>,
    /// The smallest filtered dimension (sets the number of scales).
    pub min_length: usize,
}

impl Layout {
    pub fn new(shape: &[usize], dim: usize) -> Result<Self> {
        let ndim = shape.len();
        if !(1..=3).contains(&ndim) {
            return Err(Error::shape(format!(
                "data must have 1, 2 or 3 dimensions (z, y, x), got {ndim}"
            )));
        }
        if dim > ndim {
            return Err(Error::shape(format!(
                "dim={dim} needs data with at least {dim} dimensions, got {ndim}"
            )));
        }
        let total: usize = shape.iter().product();
        let axes: Vec<usize> = match dim {
            1 => vec![0],
            2 => vec![ndim - 1, ndim - 2],
            _ => vec![2, 1, 0],
        };
        let min_length = axes.iter().map(|&a| shape[a]).min().unwrap_or(0);
        let (units, len, unit_stride, elem_stride, unit_div) = if dim == 1 {
            let units: usize = shape[1..].iter().product();
            (units, shape[0], 1, units, 1)
        } else {
            let len: usize = shape[ndim - dim..].iter().product();
            let units = shape[..ndim - dim].iter().product();
            (units, len, len, 1, len.max(1))
        };
        debug_assert_eq!(units * len, total);
        Ok(Layout {
            shape: shape.to_vec(),
            dim,
            units,
            len,
            unit_stride,
            elem_stride,
            unit_div,
            axes,
            min_length,
        })
    }

    #[inline(always)]
    pub fn unit_of(&self, i: usize) -> usize {
        (i / self.unit_div) % self.units
    }

    #[inline(always)]
    pub fn index(&self, u: usize, k: usize) -> usize {
        u * self.unit_stride + k * self.elem_stride
    }

    pub fn total(&self) -> usize {
        self.units * self.len
    }
}

/// The unit index of consecutive voxels, without a division per voxel.
pub struct UnitCursor {
    q: usize,
    r: usize,
    div: usize,
    units: usize,
}

impl UnitCursor {
    /// Positioned at voxel `i`.
    pub fn at(lay: &Layout, i: usize) -> Self {
        UnitCursor {
            q: (i / lay.unit_div) % lay.units,
            r: i % lay.unit_div,
            div: lay.unit_div,
            units: lay.units,
        }
    }

    /// The unit of the current voxel; moves to the next one.
    #[inline(always)]
    pub fn next_unit(&mut self) -> usize {
        let u = self.q;
        self.r += 1;
        if self.r == self.div {
            self.r = 0;
            self.q += 1;
            if self.q == self.units {
                self.q = 0;
            }
        }
        u
    }
}

/// Everything fixed for one call: scales, noise factors and the filter passes of each scale.
#[derive(Debug, Clone)]
pub struct Plan {
    pub layout: Layout,
    pub params: Params,
    /// Number of scales N.
    pub scales: usize,
    /// Scales the loop computes: N, or N − 1 for DUCHAMP's 2-D reconstruction.
    pub loop_scales: usize,
    /// f[0..=N].
    pub factors: Vec<f64>,
    /// passes[s−1]: the 1-D passes of scale s, in `layout.axes` order.
    pub passes: Vec<Vec<(Pass, AxisView)>>,
}

impl Plan {
    pub fn new(shape: &[usize], params: &Params) -> Result<Self> {
        params.validate()?;
        let layout = Layout::new(shape, params.dim)?;
        let f = params.filter;
        let n = f.num_scales(layout.min_length);
        if n < 1 {
            return Err(Error::shape(format!(
                "the data are too small for the {} filter: the reconstructed axes need at least \
                 {} pixels, the smallest has {}",
                f.name(),
                f.min_length(),
                layout.min_length
            )));
        }
        let scales = n as usize;
        let mut passes = Vec::with_capacity(scales);
        for s in 1..=scales {
            let step = 1usize << (s - 1);
            let filter = Filter1d::dilated(f.weights(), step)?;
            let mut list = Vec::new();
            for &axis in &layout.axes {
                let pass = Pass {
                    filter: filter.clone(),
                    axis,
                    mode: Mode::Mirror,
                    cval: 0.0,
                };
                list.push((pass, AxisView::new(shape, axis)?));
            }
            passes.push(list);
        }
        let loop_scales = if Self::duchamp_2d(params) {
            scales - 1
        } else {
            scales
        };
        Ok(Plan {
            factors: f.noise_factors(params.dim, scales, params.variant),
            layout,
            params: params.clone(),
            scales,
            loop_scales,
            passes,
        })
    }

    fn duchamp_2d(params: &Params) -> bool {
        params.variant == Variant::Duchamp && params.dim == 2
    }

    /// Whether scale s (1-based) is added to the output (DUCHAMP's 2-D: every s ≥ scale_min).
    pub fn kept(&self, s: usize) -> bool {
        let p = &self.params;
        s >= p.scale_min && (Self::duchamp_2d(p) || p.scale_max == 0 || s <= p.scale_max)
    }

    /// The relative change of σ that ends the loop.
    pub fn convergence(&self) -> f64 {
        if Self::duchamp_2d(&self.params) {
            DUCHAMP_2D_TOLERANCE
        } else {
            self.params.convergence
        }
    }

    /// The coefficient blank voxels hold during `iteration` (1-based): 0 (left out of the
    /// sums) except in DUCHAMP's 2-D reconstruction, where it is the BLANK value in the first
    /// iteration, and in every one when no scale is thresholded.
    pub fn blank_coefficient(&self, iteration: usize) -> f64 {
        let thresholds = (1..=self.loop_scales).any(|s| self.kept(s));
        if Self::duchamp_2d(&self.params) && (iteration == 1 || !thresholds) {
            self.params.blank_value
        } else {
            0.0
        }
    }
}

/// What a call returns besides the reconstruction, one entry per unit.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Iterations run (0 for a unit with no finite voxel).
    pub iterations: Vec<u32>,
    /// Final residual noise σ of input − output (NaN for an all-blank unit).
    pub noise: Vec<f64>,
    /// Noise σ0 of the input, which set the thresholds.
    pub input_noise: Vec<f64>,
    /// Number of scales N.
    pub scales: usize,
}

/// Reported after every iteration.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub iteration: usize,
    /// Units still iterating after this one.
    pub active: usize,
    pub units: usize,
    /// Mean residual noise of the units that ran this iteration.
    pub noise: f64,
    /// Largest |Δσ|/σ among them (inf on the first iteration).
    pub change: f64,
}

/// The buffers a statistic can be taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buf {
    Input,
    /// The work buffer: wavelet coefficients after `scale`, the residual after `finish`.
    Work,
}

/// A per-unit statistic over the finite values of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    /// Number of finite values.
    Count,
    /// Median of x (or of `|x − center[u]|` when `abs`); `arg[u]` is the unit's finite count.
    /// The mean of the two middle values for an even count; NaN for none.
    Median { abs: bool },
    /// Σx (or `Σ(x − center[u])²` when `sq`).
    Sum { sq: bool },
}

/// The steps an engine provides; [`State`] sequences them.
pub trait Engine {
    /// Per-unit statistic of `buf` for the active units (others: NaN); see [`Stat`] for
    /// `arg` and `center`.
    fn stat(
        &mut self,
        buf: Buf,
        stat: Stat,
        arg: &[f64],
        center: &[f64],
        active: &[bool],
    ) -> Result<Vec<f64>>;
    /// c = input − output (`blank` at blanks).
    fn start(&mut self, blank: f64) -> Result<()>;
    /// Filter c with scale s's passes; work = c − smooth, c = c − work (at blanks: work NaN,
    /// c unchanged).
    fn scale(&mut self, s: usize) -> Result<()>;
    /// output += work where the unit is active and |work| > thr[unit].
    fn add(&mut self, thr: &[f64], active: &[bool]) -> Result<()>;
    /// output += c in active units; work = input − output (NaN at blanks).
    fn finish(&mut self, active: &[bool]) -> Result<()>;
}

/// Median of each active unit of `buf` (units with no finite value: NaN).
fn medians(
    e: &mut dyn Engine,
    buf: Buf,
    abs_center: Option<&[f64]>,
    count: &[f64],
    active: &[bool],
) -> Result<Vec<f64>> {
    let nan = vec![f64::NAN; count.len()];
    let center = abs_center.unwrap_or(&nan);
    let abs = abs_center.is_some();
    e.stat(buf, Stat::Median { abs }, count, center, active)
}

/// The two middle ranks (k_lo, k_hi) of n values (equal for odd n).
pub fn middle_ranks(n: usize) -> (usize, usize) {
    (n.saturating_sub(1) / 2, n / 2)
}

/// The median from the two middle values.
pub fn median_of(n: usize, lo: f64, hi: f64) -> f64 {
    match n {
        0 => f64::NAN,
        n if n % 2 == 1 => hi,
        _ => 0.5 * (lo + hi),
    }
}

/// The centre (median or mean) of each active unit of `buf`.
fn centers(
    e: &mut dyn Engine,
    buf: Buf,
    robust: bool,
    count: &[f64],
    active: &[bool],
) -> Result<Vec<f64>> {
    if robust {
        medians(e, buf, None, count, active)
    } else {
        let nan = vec![f64::NAN; count.len()];
        let sum = e.stat(buf, Stat::Sum { sq: false }, &nan, &nan, active)?;
        Ok(sum.iter().zip(count).map(|(s, &n)| s / n).collect())
    }
}

/// The noise σ of each active unit of `buf`: MADFM/0.6744888, or the standard deviation.
fn sigmas(
    e: &mut dyn Engine,
    buf: Buf,
    robust: bool,
    count: &[f64],
    active: &[bool],
) -> Result<Vec<f64>> {
    let center = centers(e, buf, robust, count, active)?;
    if robust {
        let mad = medians(e, buf, Some(&center), count, active)?;
        Ok(mad.iter().map(|m| m / MADFM_TO_SIGMA).collect())
    } else {
        let nan = vec![f64::NAN; count.len()];
        let ss = e.stat(buf, Stat::Sum { sq: true }, &nan, &center, active)?;
        Ok(ss.iter().zip(count).map(|(s, &n)| (s / n).sqrt()).collect())
    }
}

/// The convergence loop's state, resumable so that an engine can continue on fewer units
/// (see `State::restrict`). Per-unit vectors are indexed by the engine's current units;
/// `global` maps those to the call's units, which index `outcome`.
pub struct State {
    pub iteration: usize,
    count: Vec<f64>,
    sigma0: Vec<f64>,
    old: Vec<f64>,
    active: Vec<bool>,
    global: Vec<usize>,
    pub outcome: Outcome,
}

impl State {
    /// Count the finite voxels and measure σ0 of every unit (engine output at 0).
    pub fn start(e: &mut dyn Engine, plan: &Plan) -> Result<State> {
        let units = plan.layout.units;
        let nan = vec![f64::NAN; units];
        let all = vec![true; units];
        let count = e.stat(Buf::Input, Stat::Count, &nan, &nan, &all)?;
        let active: Vec<bool> = count.iter().map(|&n| n >= 1.0).collect();
        let sigma0 = sigmas(e, Buf::Input, plan.params.robust, &count, &active)?;
        Ok(State {
            iteration: 0,
            outcome: Outcome {
                iterations: vec![0; units],
                noise: vec![f64::NAN; units],
                input_noise: sigma0.clone(),
                scales: plan.scales,
            },
            count,
            sigma0,
            old: vec![f64::INFINITY; units],
            active,
            global: (0..units).collect(),
        })
    }

    /// Whether any unit still iterates.
    pub fn any_active(&self) -> bool {
        self.active.iter().any(|&a| a)
    }

    /// The engine's current units that still iterate.
    pub fn active_units(&self) -> Vec<usize> {
        (0..self.active.len()).filter(|&u| self.active[u]).collect()
    }

    /// Units the engine currently holds.
    pub fn current_units(&self) -> usize {
        self.active.len()
    }

    /// The call's unit index of each of the engine's current units.
    pub fn global(&self) -> &[usize] {
        &self.global
    }

    /// Continue with only the engine's current units `keep` (in this order).
    pub fn restrict(&mut self, keep: &[usize]) {
        let pick = |v: &[f64]| keep.iter().map(|&u| v[u]).collect::<Vec<f64>>();
        self.count = pick(&self.count);
        self.sigma0 = pick(&self.sigma0);
        self.old = pick(&self.old);
        self.active = keep.iter().map(|&u| self.active[u]).collect();
        self.global = keep.iter().map(|&u| self.global[u]).collect();
    }

    /// One iteration of the reconstruction on every active unit.
    pub fn iterate(
        &mut self,
        e: &mut dyn Engine,
        plan: &Plan,
        progress: &mut dyn FnMut(Progress) -> Result<()>,
    ) -> Result<()> {
        let p = &plan.params;
        self.iteration += 1;
        let iteration = self.iteration;
        e.start(plan.blank_coefficient(iteration))?;
        for s in 1..=plan.loop_scales {
            crate::backend::cancel::check()?;
            e.scale(s)?;
            if plan.kept(s) {
                let center = centers(e, Buf::Work, p.robust, &self.count, &self.active)?;
                let thr: Vec<f64> = center
                    .iter()
                    .zip(&self.sigma0)
                    .map(|(m, s0)| m + p.snr * s0 * plan.factors[s])
                    .collect();
                e.add(&thr, &self.active)?;
            }
        }
        e.finish(&self.active)?;
        let sigma = sigmas(e, Buf::Work, p.robust, &self.count, &self.active)?;
        let (mut ran, mut sum, mut change) = (0usize, 0.0, 0f64);
        for (u, &sig) in sigma.iter().enumerate() {
            if !self.active[u] {
                continue;
            }
            let g = self.global[u];
            let rel = (self.old[u] - sig).abs() / sig;
            self.outcome.iterations[g] = iteration as u32;
            self.outcome.noise[g] = sig;
            self.old[u] = sig;
            ran += 1;
            sum += sig;
            change = change.max(if rel.is_nan() { 0.0 } else { rel });
            // DUCHAMP: `while (iteration == 1 || |Δσ|/σ > tolerance)`; NaN (0/0) stops.
            let more = iteration == 1 || rel > plan.convergence();
            if !more || iteration >= MAX_ITERATIONS {
                self.active[u] = false;
            }
        }
        progress(Progress {
            iteration,
            active: self.active.iter().filter(|&&a| a).count(),
            units: self.outcome.iterations.len(),
            noise: sum / ran.max(1) as f64,
            change,
        })
    }
}

/// Run the whole reconstruction loop on an engine whose output starts at 0.
pub fn drive(
    e: &mut dyn Engine,
    plan: &Plan,
    progress: &mut dyn FnMut(Progress) -> Result<()>,
) -> Result<Outcome> {
    let mut st = State::start(e, plan)?;
    while st.any_active() {
        st.iterate(e, plan, progress)?;
    }
    Ok(st.outcome)
}

/// Reconstruct `input` (C-contiguous, `shape`) into `out` on `device`, calling `progress`
/// after every iteration.
pub fn atrous_denoise<T: Real>(
    device: Device,
    input: &[T],
    shape: &[usize],
    params: &Params,
    out: &mut [T],
    progress: &mut dyn FnMut(Progress) -> Result<()>,
) -> Result<Outcome> {
    let total: usize = shape.iter().product();
    if input.len() != total || out.len() != total {
        return Err(Error::shape(
            "input and output sizes do not match the shape",
        ));
    }
    let plan = Plan::new(shape, params)?;
    match device {
        Device::Cpu => cpu::run(input, &plan, out, progress),
        Device::Cuda(o) => crate::backend::cuda::on(o, || cuda::run(input, &plan, out, progress)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        let l = Layout::new(&[4, 3, 5], 1).unwrap();
        assert_eq!(
            (l.units, l.len, l.elem_stride, l.unit_stride),
            (15, 4, 15, 1)
        );
        assert_eq!(l.unit_of(l.index(7, 2)), 7);
        let l = Layout::new(&[4, 3, 5], 2).unwrap();
        assert_eq!((l.units, l.len, l.min_length), (4, 15, 3));
        assert_eq!(l.unit_of(l.index(3, 14)), 3);
        let l = Layout::new(&[4, 3, 5], 3).unwrap();
        assert_eq!((l.units, l.len, l.unit_of(59)), (1, 60, 0));
        let l = Layout::new(&[6, 7], 1).unwrap();
        assert_eq!((l.units, l.len), (7, 6));
        assert!(Layout::new(&[6, 7], 3).is_err());
    }

    #[test]
    fn variants_plan_the_loop() {
        let mut p = Params {
            dim: 2,
            snr: 4.0,
            scale_min: 2,
            scale_max: 3,
            filter: WaveletFilter::B3Spline,
            convergence: 0.05,
            robust: true,
            variant: Variant::Duchamp,
            blank_value: -8.0,
        };
        // N = floor(log2(36)) - 1 = 4; DUCHAMP's 2-D loop runs 1..=3 and ignores scale_max.
        let plan = Plan::new(&[3, 40, 37], &p).unwrap();
        assert_eq!((plan.scales, plan.loop_scales), (4, 3));
        assert!(!plan.kept(1) && plan.kept(2) && plan.kept(3) && plan.kept(4));
        assert_eq!(plan.convergence(), DUCHAMP_2D_TOLERANCE);
        assert_eq!(
            (plan.blank_coefficient(1), plan.blank_coefficient(2)),
            (-8.0, 0.0)
        );
        p.scale_min = 4; // nothing thresholded in 1..=3: the BLANK value every iteration
        p.scale_max = 0;
        let plan = Plan::new(&[3, 40, 37], &p).unwrap();
        assert_eq!(plan.blank_coefficient(5), -8.0);
        p.scale_min = 2;
        p.scale_max = 3;
        p.variant = Variant::Corrected;
        let plan = Plan::new(&[3, 40, 37], &p).unwrap();
        assert_eq!((plan.loop_scales, plan.convergence()), (4, 0.05));
        assert!(plan.kept(3) && !plan.kept(4));
        assert_eq!(plan.blank_coefficient(1), 0.0);
        p.variant = Variant::Duchamp;
        p.dim = 3;
        let plan = Plan::new(&[40, 40, 37], &p).unwrap();
        assert_eq!((plan.loop_scales, plan.convergence()), (4, 0.05));
        assert_eq!(plan.blank_coefficient(1), 0.0);
        assert!(Variant::parse("exact").is_err());
    }
}
