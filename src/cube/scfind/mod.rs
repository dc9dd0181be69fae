//! Smooth-and-Clip source finding (SoFiA's S+C finder): for each smoothing kernel, copy the
//! cube, replace voxels already in the mask by ±replacement·rms, smooth it spatially and
//! spectrally, restore NaN, measure the noise of the smoothed cube and add every voxel above
//! threshold·noise to the mask. Two rule sets share one engine: SoFiA 2's (native API) and
//! SoFiA 1.3.2's (`compat.sofia`).
//!
//! The mask is one byte per voxel: bit 0 (`MASKED`) marks voxels already in the mask (they are
//! replaced before smoothing), bit 1 (`DETECTED`) marks voxels a kernel found; the engine uses
//! bit 7 internally for NaN voxels and clears it before returning.

mod cpu;
mod cuda;
mod cuda_fixed;
mod cuda_mad;
mod cuda_sofia1;
pub mod kernels;
pub mod running;

pub use cuda_fixed::{kernel_variants, warm_variants};

use crate::backend::Device;
use crate::cube::filters::{Filter1d, Mode};
use crate::cube::stats::noise::{
    gauss_about_zero, mad_about, std_about, Fitter, MAD_TO_STD, MAD_TO_STD_SOFIA1,
};
use crate::cube::stats::sample::Sampling;
use crate::cube::stats::sofia1::{sofia1_rms, Sofia1Mode, Sofia1Rms};
use crate::cube::stats::sofia2::{self, Walk};
use crate::cube::stats::Range;
use crate::error::{Error, Result};
use crate::real::Real;

/// Mask bit: the voxel is in the mask (replaced before smoothing).
pub const MASKED: u8 = 1;
/// Mask bit: a kernel of this run found the voxel.
pub const DETECTED: u8 = 2;
/// Mask bit used during a run: the input voxel is NaN.
pub(crate) const BLANK: u8 = 0x80;

/// Sigma of a Gaussian per unit FWHM: FWHM = 2·sqrt(2·ln 2)·σ.
pub fn fwhm_const() -> f64 {
    2.0 * (2.0 * std::f64::consts::LN_2).sqrt()
}

/// One smoothing kernel: passes along y, then x (the spatial smoothing), then z.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub y: Vec<Filter1d>,
    pub x: Vec<Filter1d>,
    pub z: Option<Filter1d>,
    /// Threshold this kernel with the original cube's noise (SoFiA 2's unsmoothed kernel).
    pub use_rms0: bool,
}

impl Kernel {
    /// Same spatial smoothing as `other` (the engines then share the spatially smoothed cube).
    pub fn same_spatial(&self, other: &Kernel) -> bool {
        self.y == other.y && self.x == other.x
    }

    /// Reach of the z filter in planes (below, above).
    pub fn z_reach(&self) -> (usize, usize) {
        match &self.z {
            None => (0, 0),
            Some(f) => {
                let (lo, hi) = f.span();
                ((-lo).max(0) as usize, hi.max(0) as usize)
            }
        }
    }
}

/// How voxels already in the mask are replaced before smoothing (value = factor · rms0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Replace {
    None,
    /// SoFiA 1: +value for x > 0, −value for x < 0, 0 stays 0.
    Sign(f64),
    /// SoFiA 2: copysign(value, x).
    CopySign(f64),
}

impl Replace {
    #[inline(always)]
    pub fn apply(self, x: f64, rms0: f64) -> f64 {
        match self {
            Replace::None => x,
            Replace::Sign(f) => {
                if x > 0.0 {
                    f * rms0
                } else if x < 0.0 {
                    -(f * rms0)
                } else {
                    x
                }
            }
            Replace::CopySign(f) => (f * rms0).copysign(x),
        }
    }
}

/// SoFiA 2's noise statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statistic {
    Std,
    Mad,
    Gauss,
}

/// How the noise of a (smoothed) cube is measured on its sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoiseRule {
    Sofia2 {
        stat: Statistic,
        range: Range,
    },
    /// SoFiA-2 2.5.1's own estimators (`stats::sofia2`) on its backward sample; `single`:
    /// the cube is f32 (SoFiA-2's single-precision steps).
    Sofia2Exact {
        stat: Statistic,
        range: Range,
        walk: Walk,
        single: bool,
    },
    Sofia1(Sofia1Rms),
}

impl NoiseRule {
    pub fn needs_extremes(&self) -> bool {
        match self {
            NoiseRule::Sofia1(p) => p.needs_extremes(),
            NoiseRule::Sofia2Exact { stat, .. } => *stat == Statistic::Gauss,
            NoiseRule::Sofia2 { .. } => false,
        }
    }

    /// `Some((range, factor))` when the rule is `factor · median |x|` of the sample's values in
    /// `range` (no clip, no fit): SoFiA 2's `mad` and SoFiA 1's `mad` without `twoPass`. Such
    /// a rule can be taken where the sample lies (the GPU engine selects on the device).
    pub fn plain_mad(&self) -> Option<(Range, f64)> {
        match *self {
            NoiseRule::Sofia2 {
                stat: Statistic::Mad,
                range,
            } => Some((range, MAD_TO_STD)),
            NoiseRule::Sofia1(p) if p.mode == Sofia1Mode::Mad && !p.two_pass => {
                Some((p.range, MAD_TO_STD_SOFIA1))
            }
            _ => None,
        }
    }

    /// `measure` with the sample as the estimator's scratch (its values are overwritten):
    /// SoFiA-2's MAD selects among the sample's own slots instead of a copy of the kept |x|.
    pub fn measure_in_place<S: Real>(
        &self,
        samples: &mut [S],
        extremes: Option<(f64, f64)>,
        fitter: Option<&Fitter>,
    ) -> Result<f64> {
        if let NoiseRule::Sofia2Exact {
            stat: Statistic::Mad,
            range,
            walk,
            single,
        } = *self
        {
            return sofia2::mad_in_place(samples, range, walk, single).ok_or_else(|| {
                Error::value("cannot measure the noise: no finite values in the sample")
            });
        }
        self.measure(samples, extremes, fitter)
    }

    /// The noise from the sampled values (NaN allowed; f64, or the cube's f32 when that is
    /// what was sampled: every value is read as its exact f64) and the cube's (nanmin, nanmax).
    pub fn measure<S: Real>(
        &self,
        samples: &[S],
        extremes: Option<(f64, f64)>,
        fitter: Option<&Fitter>,
    ) -> Result<f64> {
        let none = || Error::value("cannot measure the noise: no finite values in the sample");
        match *self {
            NoiseRule::Sofia1(p) => sofia1_rms(samples, extremes, &p, fitter),
            NoiseRule::Sofia2 { stat, range } => match stat {
                Statistic::Std => std_about(samples, 0.0, range, None).ok_or_else(none),
                Statistic::Mad => {
                    Ok(MAD_TO_STD * mad_about(samples, 0.0, range, None).ok_or_else(none)?)
                }
                Statistic::Gauss => gauss_about_zero(samples, range)?.ok_or_else(none),
            },
            NoiseRule::Sofia2Exact {
                stat,
                range,
                walk,
                single,
            } => match stat {
                Statistic::Std => sofia2::std(samples, range).ok_or_else(none),
                Statistic::Mad => sofia2::mad(samples, range, walk, single).ok_or_else(none),
                Statistic::Gauss => {
                    let ext = extremes_or_nan(extremes.and_then(|e| (e.0 <= e.1).then_some(e)));
                    sofia2::gauss(samples, range, ext, single).ok_or_else(|| {
                        Error::value(
                            "cannot measure the noise: the histogram of the sample has too \
                             few filled bins for the Gaussian fit",
                        )
                    })
                }
            },
        }
    }
}

/// Everything that defines a run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// (z, y, x).
    pub shape: [usize; 3],
    pub kernels: Vec<Kernel>,
    /// Boundary mode of every smoothing pass (constant mode pads with 0).
    pub mode: Mode,
    pub threshold: f64,
    /// |x| >= threshold·rms (SoFiA 1) rather than |x| > threshold·rms (SoFiA 2).
    pub inclusive: bool,
    pub replace: Replace,
    pub noise: NoiseRule,
    pub sampling: Sampling,
    /// Fits the histogram Gaussians of SoFiA 1's noise (None: built-in).
    pub fitter: Option<Fitter>,
    /// SoFiA-2's arithmetic for boxcars (`boxcar` filters): in the element type, as a running
    /// mean updated backwards from the end of each line (m[n−1] = (Σ of the window, summed
    /// from its far end) · (1/w), m[i] = m[i+1] + (x[i−r] − x[i+r+1]) · (1/w)), zero padding,
    /// spatial passes along x before y. Needs `mode` constant.
    pub exact: bool,
    /// GPU only: z-planes per slab, halo not counted (None: one piece if it fits in GPU
    /// memory, else as many as fit).
    pub slab_planes: Option<usize>,
    /// The returned mask keeps `DETECTED` beside `MASKED` (false: `MASKED` alone, the final
    /// mask, so the caller needs no pass of its own to drop the other bit).
    pub detected: bool,
}

impl Plan {
    /// The mask bits `run` leaves in the mask it returns.
    pub fn returned_bits(&self) -> u8 {
        if self.detected {
            MASKED | DETECTED
        } else {
            MASKED
        }
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The clip level for noise `rms`.
    pub fn level(&self, rms: f64) -> f64 {
        self.threshold * rms
    }

    #[inline(always)]
    pub fn above(&self, w: f64, level: f64) -> bool {
        let a = w.abs();
        if self.inclusive {
            a >= level
        } else {
            a > level
        }
    }
}

/// The noise of the original cube and of each smoothed cube, in kernel order.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub rms0: f64,
    pub rms: Vec<f64>,
}

/// Called after each kernel with (kernel index, its noise).
pub type Progress<'a> = &'a (dyn Fn(usize, f64) + Sync);

/// Run the finder on `cube` (C order, `plan.shape`). `mask` holds `MASKED` for voxels already
/// in the mask on entry; on return `MASKED | DETECTED` for every voxel a kernel found (`MASKED`
/// alone without `plan.detected`), and no other bit.
pub fn run<T: Real>(
    device: Device,
    cube: &[T],
    plan: &Plan,
    mask: &mut [u8],
    progress: Progress<'_>,
) -> Result<Outcome> {
    let n = plan.len();
    if cube.len() != n || mask.len() != n {
        return Err(Error::shape("cube and mask sizes do not match the shape"));
    }
    if plan.threshold.is_nan() || plan.threshold < 0.0 || plan.threshold.is_infinite() {
        return Err(Error::value(format!(
            "threshold must be finite and >= 0, got {}",
            plan.threshold
        )));
    }
    if plan.exact && plan.mode != Mode::Constant {
        return Err(Error::value(
            "SoFiA-2's boxcar arithmetic pads with zeros: edge mode must be 'constant'",
        ));
    }
    if n == 0 {
        return Ok(Outcome {
            rms0: f64::NAN,
            rms: vec![f64::NAN; plan.kernels.len()],
        });
    }
    match device {
        Device::Cpu => crate::backend::threads::install(|| cpu::run(cube, plan, mask, progress))?,
        Device::Cuda(o) => crate::backend::cuda::on(o, || cuda::run(cube, plan, mask, progress)),
    }
}

/// The kernel's spatial passes run with SoFiA-2's boxcar arithmetic (`Plan::exact`).
pub(crate) fn exact_spatial(ker: &Kernel, plan: &Plan) -> bool {
    plan.exact
        && (!ker.x.is_empty() || !ker.y.is_empty())
        && ker.x.iter().chain(&ker.y).all(|f| f.boxcar)
}

/// The kernel's spectral pass runs with SoFiA-2's boxcar arithmetic (`Plan::exact`).
pub(crate) fn exact_spectral(zf: &Filter1d, plan: &Plan) -> bool {
    plan.exact && zf.boxcar
}

/// (min, max) of the finite values, or None if there is none.
pub(crate) fn merge_extremes(a: Option<(f64, f64)>, b: Option<(f64, f64)>) -> Option<(f64, f64)> {
    match (a, b) {
        (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
        (a, None) => a,
        (None, b) => b,
    }
}

/// The extremes for the noise rule: NaN pair when the cube has no finite value (the rule then
/// reports its own error).
pub(crate) fn extremes_or_nan(e: Option<(f64, f64)>) -> (f64, f64) {
    e.unwrap_or((f64::NAN, f64::NAN))
}

/// The value the smoothing sees for input `x` with mask byte `m`.
#[inline(always)]
pub(crate) fn prepared<T: Real>(x: T, m: u8, replace: Replace, rms0: f64) -> f64 {
    let v = x.to_f64();
    if m & BLANK != 0 || v.is_nan() {
        0.0
    } else if m & MASKED != 0 {
        T::from_f64(replace.apply(v, rms0)).to_f64()
    } else {
        v
    }
}

/// (nanmin, nanmax) of the finite values of `data` (CPU).
pub fn extremes_of<T: Real>(data: &[T]) -> Option<(f64, f64)> {
    cpu::extremes(data)
}

/// One stage of a run split across processes (skyconv's Dask path) on `device`: the prepared cube
/// (NaN → 0, `MASKED` voxels replaced by `plan.replace` of `rms0`) smoothed by the spatial
/// passes of `plan.kernels[0]`, exactly as `run` builds it. `cube` holds whole (y, x) planes
/// (`plan.shape`), any number of them. On a GPU the values are those of `run` on that GPU.
pub fn spatial_stage<T: Real>(
    device: Device,
    cube: &[T],
    mask: &[u8],
    plan: &Plan,
    rms0: f64,
) -> Result<Vec<T>> {
    let ker = plan
        .kernels
        .first()
        .ok_or_else(|| Error::value("spatial_stage needs one kernel"))?;
    if cube.len() != plan.len() || mask.len() != plan.len() {
        return Err(Error::shape("cube and mask sizes do not match the shape"));
    }
    if plan.is_empty() {
        return Ok(Vec::new());
    }
    match device {
        Device::Cpu => {
            crate::backend::threads::install(|| cpu::spatial_stage(cube, mask, plan, ker, rms0))
        }
        Device::Cuda(o) => {
            crate::backend::cuda::on(o, || cuda::spatial_stage(cube, mask, plan, ker, rms0))
        }
    }
}

/// The next stage: W, the spectral pass of `plan.kernels[0]` over `s` (whole z lines of
/// `plan.shape`) rounded to the element type, NaN where `mask` has `BLANK` — the values `run`
/// samples for the noise and compares with the clip level (on a GPU: `run`'s values there).
/// The block passes' own W (`block_w` with `BlockInput::Smoothed`).
pub fn spectral_stage<T: Real>(
    device: Device,
    s: &[T],
    mask: &[u8],
    plan: &Plan,
) -> Result<Vec<T>> {
    let ker = plan
        .kernels
        .first()
        .ok_or_else(|| Error::value("spectral_stage needs one kernel"))?;
    if s.len() != plan.len() || mask.len() != plan.len() {
        return Err(Error::shape("s and mask sizes do not match the shape"));
    }
    if plan.is_empty() {
        return Ok(Vec::new());
    }
    let input = BlockInput::Smoothed;
    match device {
        Device::Cpu => {
            crate::backend::threads::install(|| cpu::block_w(s, mask, plan, ker, 0.0, input))?
        }
        Device::Cuda(o) => {
            crate::backend::cuda::on(o, || cuda::block_w(s, mask, plan, ker, 0.0, input))
        }
    }
}

/// What a Dask block pass (`block_sample`, `block_clip`) reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockInput {
    /// W itself, taken as it is: the original cube for the noise of the original cube, or a
    /// block's W kept by `block_sample` (`keep`) for its clip. No kernel runs.
    Raw,
    /// The original cube: prepared (NaN → 0, `MASKED` voxels replaced) and smoothed by both
    /// stages of the kernel. The block holds whole (y, x) planes if the kernel smooths
    /// spatially and whole z lines if it smooths spectrally.
    Cube,
    /// The spatially smoothed cube (`spatial_stage`'s values, whole z lines): the spectral
    /// stage only.
    Smoothed,
}

/// W at a block's sample positions, the block's (min, max) of W and W itself, if asked for.
pub(crate) type SampleParts<T> = (Vec<f64>, Option<(f64, f64)>, Option<Vec<T>>);

/// What a Dask block's sample pass keeps for the block's clip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Nothing: the clip smooths the block again.
    Nothing,
    /// W itself: the clip reads it (`BlockInput::Raw`).
    W,
    /// The single call's clip candidates (CPU engine, `ClipCandidates`): the clip decides
    /// from them once the noise is known, smoothing again only the column blocks they do not
    /// decide (`slab_clip`).
    Candidates,
}

/// The clip candidates of a Dask block's sample pass, those the single call keeps (CPU
/// engine): one list a column block of the spectral pass (the block's (y, x) plane, flat,
/// in runs of the engine's block width), block b's voxels `idx[ends[b − 1]..ends[b]]` (flat
/// indices in the block) with W there (`val`, rounded to the element type): every voxel of
/// those columns, not blank, with |W| above `floor[b]`. A clip level above `floor[b]` is
/// decided from the list; any other needs the block's spectral pass again.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClipCandidates {
    pub floor: Vec<f64>,
    pub ends: Vec<usize>,
    pub idx: Vec<usize>,
    pub val: Vec<f64>,
}

/// A block's part of the noise sample: the slots (ranks in the whole cube's sample) of the
/// sampled positions inside the block, their values, the block's (min, max) of W, and the
/// block's W (NaN where blank) or its clip candidates when kept for its clip.
#[derive(Debug, Clone)]
pub struct BlockSample<T> {
    pub slots: Vec<usize>,
    pub values: Vec<f64>,
    pub extremes: Option<(f64, f64)>,
    pub w: Option<Vec<T>>,
    pub candidates: Option<ClipCandidates>,
}

/// The positions of `sampling` over the whole cube (`global`, (z, y, x)) that lie in the block
/// of shape `block` starting at `start`: (flat indices in the block, slots), in increasing
/// order of both.
pub fn block_positions(
    global: [usize; 3],
    start: [usize; 3],
    block: [usize; 3],
    sampling: Sampling,
) -> Result<(Vec<usize>, Vec<usize>)> {
    if (0..3).any(|a| start[a] + block[a] > global[a]) {
        return Err(Error::shape(format!(
            "a block of shape {block:?} at {start:?} does not fit in the cube's shape {global:?}"
        )));
    }
    let (mut pos, mut slots) = (Vec::new(), Vec::new());
    let [bz, by, bx] = block;
    if bx == 0 {
        return Ok((pos, slots));
    }
    for z in 0..bz {
        for y in 0..by {
            let local = (z * by + y) * bx;
            let k0 = (start[1] + y) * global[2] + start[2];
            sampling.for_each_in_row(global, start[0] + z, k0, bx, |off, slot| {
                pos.push(local + off);
                slots.push(slot);
            });
        }
    }
    Ok((pos, slots))
}

fn block_checks(x_len: usize, mask_len: usize, plan: &Plan) -> Result<&Kernel> {
    let ker = plan
        .kernels
        .first()
        .ok_or_else(|| Error::value("a block pass needs one kernel"))?;
    if x_len != plan.len() || mask_len != plan.len() {
        return Err(Error::shape("block and mask sizes do not match the shape"));
    }
    Ok(ker)
}

/// One Dask task of a kernel's noise measurement on `device`: W of the block (`input` says
/// which stages run; `plan.shape` is the block's, `plan.kernels[0]` the kernel) at the
/// block's positions of `plan.sampling` over the whole cube `global` (block at `start`), NaN
/// for blank voxels, the block's (min, max) of W when `extremes` is set, and W itself when
/// `keep` is set (so the clip reads it, `BlockInput::Raw`, instead of smoothing again) — the
/// values the single call gathers there, through its own code on that engine. `mask` has
/// `BLANK` for the block's NaN voxels and `MASKED` for voxels to replace.
#[allow(clippy::too_many_arguments)]
pub fn block_sample<T: Real>(
    device: Device,
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    rms0: f64,
    input: BlockInput,
    global: [usize; 3],
    start: [usize; 3],
    extremes: bool,
    keep: bool,
) -> Result<BlockSample<T>> {
    let ker = block_checks(x.len(), mask.len(), plan)?;
    let (pos, slots) = block_positions(global, start, plan.shape, plan.sampling)?;
    let (values, extremes, w) = if plan.is_empty() {
        (Vec::new(), None, keep.then(Vec::new))
    } else {
        match device {
            Device::Cpu => crate::backend::threads::install(|| {
                let whole = cpu::ZSpan::whole();
                let keep = if keep { Keep::W } else { Keep::Nothing };
                let (v, e, w, _) = cpu::block_sample(
                    x, mask, plan, ker, rms0, input, &pos, extremes, keep, &whole,
                )?;
                Ok::<_, Error>((v, e, w))
            })??,
            Device::Cuda(o) => crate::backend::cuda::on(o, || {
                cuda::block_sample(x, mask, plan, ker, rms0, input, &pos, extremes, keep)
            })?,
        }
    };
    Ok(BlockSample {
        slots,
        values,
        extremes,
        w,
        candidates: None,
    })
}

/// One Dask task of a kernel's noise on a z-slab (planes `z0..z0 + plan.shape[0]` of the
/// whole cube `global`), as `block_sample` with `BlockInput::Smoothed`, for SoFiA-2's spectral
/// running mean (`Plan::exact`, a boxcar along z of radius r), on `device`. The mean
/// runs from the cube's last plane down, so a slab cannot start it from a halo: `s` holds the
/// spatial stage's planes `z0 − below .. z0 + nz + above` with `below` = min(r, z0) and
/// `above` = min(r + 1, planes over the slab), and `carry` is the mean at the first plane over
/// the slab (the `carry` this function returned for the slab above; None for the top slab).
/// The slab may be a group of rows `y0..y0 + plan.shape[1]` (whole rows of x) of the cube's
/// planes: each column's mean is its own, so a group needs only the carry of the same group
/// of the slab above, and its sample slots are those of the whole cube's pass there.
/// Returns the block's sample part (with `keep`: W, or on the CPU engine the clip candidates
/// for `slab_clip`; `mask` is the slab's own planes) and the carry for the slab below (the
/// mean at plane z0): the single call's values bit for bit (on a GPU: the GPU engine's,
/// which are the CPU's for this pass).
#[allow(clippy::too_many_arguments)]
pub fn slab_sample<T: Real>(
    device: Device,
    s: &[T],
    mask: &[u8],
    plan: &Plan,
    global: [usize; 3],
    z0: usize,
    y0: usize,
    below: usize,
    carry: Option<&[T]>,
    extremes: bool,
    keep: Keep,
) -> Result<(BlockSample<T>, Vec<T>)> {
    let r = slab_checks(
        plan,
        mask.len(),
        Some(s.len()),
        global,
        z0,
        y0,
        below,
        carry,
    )?;
    let plane = plan.shape[1] * plan.shape[2];
    let (pos, slots) = block_positions(global, [z0, y0, 0], plan.shape, plan.sampling)?;
    let ker = &plan.kernels[0];
    let ((values, extremes, w, candidates), out) = match device {
        Device::Cpu => {
            let mut out = vec![T::default(); plane];
            let span = cpu::ZSpan {
                below,
                carry,
                out: Some(crate::backend::threads::Disjoint(out.as_mut_ptr())),
            };
            let input = BlockInput::Smoothed;
            let parts = crate::backend::threads::install(|| {
                cpu::block_sample(s, mask, plan, ker, 0.0, input, &pos, extremes, keep, &span)
            })??;
            (parts, out)
        }
        Device::Cuda(o) => {
            if keep == Keep::Candidates {
                return Err(Error::value(
                    "the clip candidates of a z-slab pass are the CPU engine's: a GPU keeps W",
                ));
            }
            let keep = keep == Keep::W;
            let ((v, e, w), out) = crate::backend::cuda::on(o, || {
                cuda::slab_sample(s, mask, plan, r, below, carry, &pos, extremes, keep)
            })?;
            ((v, e, w, None), out)
        }
    };
    let sample = BlockSample {
        slots,
        values,
        extremes,
        w,
        candidates,
    };
    Ok((sample, out))
}

/// One Dask task's clip of a z-slab from the candidates its `slab_sample` kept (CPU engine;
/// the arguments as there): a copy of `mask` with `MASKED` added where W is above `level`
/// (`plan.above`), decided as the single call decides it: a column block whose list holds
/// every voxel above the level (the level above the list's floor) from the list, any other
/// by its spectral pass again over `s` with `below` and `carry` — the sample pass's inputs,
/// so the same W bit for bit. `s` may be None: then the result is None when a block needs
/// that pass (the caller assembles `s` and calls again).
#[allow(clippy::too_many_arguments)]
pub fn slab_clip<T: Real>(
    device: Device,
    s: Option<&[T]>,
    mask: &[u8],
    plan: &Plan,
    global: [usize; 3],
    z0: usize,
    y0: usize,
    below: usize,
    carry: Option<&[T]>,
    cands: &ClipCandidates,
    level: f64,
) -> Result<Option<Vec<u8>>> {
    slab_checks(
        plan,
        mask.len(),
        s.map(|s| s.len()),
        global,
        z0,
        y0,
        below,
        carry,
    )?;
    if level.is_nan() {
        return Err(Error::value("the clip level is NaN"));
    }
    if device != Device::Cpu {
        return Err(Error::value(
            "the clip from candidates runs on the CPU engine (GPU workers keep W)",
        ));
    }
    let span = cpu::ZSpan {
        below,
        carry,
        out: None,
    };
    let ker = &plan.kernels[0];
    crate::backend::threads::install(|| cpu::slab_clip(s, mask, plan, ker, &span, level, cands))?
}

/// The checks of a z-slab call (`slab_sample`, `slab_clip`; `s_len`: the spatial stage's
/// length, None for a clip from candidates alone: then `below` and `carry` are not read) →
/// the z filter's radius r.
#[allow(clippy::too_many_arguments)]
fn slab_checks<T>(
    plan: &Plan,
    mask_len: usize,
    s_len: Option<usize>,
    global: [usize; 3],
    z0: usize,
    y0: usize,
    below: usize,
    carry: Option<&[T]>,
) -> Result<usize> {
    let ker = block_checks(mask_len, mask_len, plan)?;
    let r = match &ker.z {
        Some(zf) if exact_spectral(zf, plan) => zf.taps() / 2,
        _ => {
            return Err(Error::value(
                "a z-slab pass needs SoFiA-2's spectral running mean (precision 'sofia2', a \
                 boxcar along z)",
            ))
        }
    };
    let [nz, ny, nx] = plan.shape;
    let plane = ny * nx;
    if nz == 0 || plane == 0 || y0 + ny > global[1] || global[2] != nx || z0 + nz > global[0] {
        return Err(Error::shape(format!(
            "a z-slab of shape {:?} at plane {z0}, row {y0} does not fit the cube's shape \
             {global:?}",
            plan.shape
        )));
    }
    let Some(s_len) = s_len else {
        return Ok(r); // no spectral pass: no halo, no carry
    };
    let top = z0 + nz;
    let want = (r.min(z0), (r + 1).min(global[0] - top));
    let planes = want.0 + nz + want.1;
    if s_len != planes * plane || below != want.0 {
        return Err(Error::shape(format!(
            "the slab at planes {z0}..{top} needs the spatial stage with {} planes below and \
             {} above ({planes} planes), got {} planes with {below} below",
            want.0,
            want.1,
            s_len / plane,
        )));
    }
    if carry.is_some() != (top < global[0]) || carry.is_some_and(|c| c.len() != plane) {
        return Err(Error::shape(
            "carry must be one (y, x) plane, given for every slab but the top one",
        ));
    }
    Ok(r)
}

/// One Dask task of a kernel's clip on `device`: `mask` with `MASKED` added where the
/// block's W (as for `block_sample`; `BlockInput::Raw`: the block is W, as `block_sample`
/// kept it) is above `level` (`plan.above`); blank voxels never.
pub fn block_clip<T: Real>(
    device: Device,
    x: &[T],
    mask: &[u8],
    plan: &Plan,
    rms0: f64,
    input: BlockInput,
    level: f64,
) -> Result<Vec<u8>> {
    let ker = block_checks(x.len(), mask.len(), plan)?;
    if plan.is_empty() {
        return Ok(Vec::new());
    }
    match device {
        Device::Cpu => crate::backend::threads::install(|| {
            cpu::block_clip(x, mask, plan, ker, rms0, input, level)
        })?,
        Device::Cuda(o) => crate::backend::cuda::on(o, || {
            cuda::block_clip(x, mask, plan, ker, rms0, input, level)
        }),
    }
}
