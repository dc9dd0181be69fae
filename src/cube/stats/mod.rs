//! Robust statistics of large arrays, exact and without sorting or copying the array. On the
//! CPU the k-th smallest value is found by histogram refinement (count values per bin in
//! parallel, keep the bin holding rank k, repeat until few values remain, then select among
//! those: `refine` over the data passes of a `Source`). On the GPU it is found by radix digits
//! of the values' order-preserving keys (`keys`), every step on the device (`cuda`): a host
//! step per level would cost a round trip each. Both are exact, so both give the same values.
//! Medians, MADs and noise estimates of every family are built on `select_kth`.

mod cpu;
mod cuda;
pub mod keys;

pub use cpu::{count, select_kth};
pub use cuda::{count_device, select_ranks_device};

use crate::error::Result;

/// Bins per refinement level.
pub const BINS: usize = 4096;
/// Most refinement levels; past that only (nearly) equal values are left.
pub const MAX_LEVELS: usize = 8;
/// Gather and select directly once this few values are left.
const GATHER: usize = 1 << 16;

/// Which part of the data a statistic is taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    All,
    /// Only values below the centre.
    Negative,
    /// Only values above the centre.
    Positive,
}

/// The values a statistic sees: non-finite values are always skipped; a value x is kept when
/// `range` allows x − center, and contributes (x − center), or |x − center| when `abs`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Values {
    pub center: f64,
    pub abs: bool,
    pub range: Range,
}

impl Values {
    /// Every finite value as it is.
    pub const FINITE: Values = Values {
        center: 0.0,
        abs: false,
        range: Range::All,
    };

    /// |x − center| for every finite x (for MADs).
    pub fn abs_about(center: f64) -> Values {
        Values {
            center,
            abs: true,
            range: Range::All,
        }
    }

    /// Mirrored in `kernels/select.cu` (`sel_map`): keep both in step.
    #[inline(always)]
    pub fn map(&self, x: f64) -> Option<f64> {
        if !x.is_finite() {
            return None;
        }
        let d = x - self.center;
        let keep = match self.range {
            Range::All => true,
            Range::Negative => d < 0.0,
            Range::Positive => d > 0.0,
        };
        keep.then_some(if self.abs { d.abs() } else { d })
    }

    /// Code shared with `kernels/select.cu`.
    pub fn range_code(&self) -> i32 {
        match self.range {
            Range::All => 0,
            Range::Negative => 1,
            Range::Positive => 2,
        }
    }
}

/// One refinement level: a kept value v with lo <= v <= hi falls in bin floor((v−lo)·scale),
/// clamped to the last bin; `bin` is the bin chosen at this level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    pub lo: f64,
    pub hi: f64,
    pub scale: f64,
    pub bin: usize,
}

impl Level {
    pub fn new(lo: f64, hi: f64) -> Level {
        let width = hi - lo;
        let scale = if width > 0.0 {
            BINS as f64 / width
        } else {
            0.0
        };
        Level {
            lo,
            hi,
            scale,
            bin: 0,
        }
    }

    /// Mirrored in `kernels/select.cu` (`sel_bin`).
    #[inline(always)]
    pub fn bin_of(&self, v: f64) -> Option<usize> {
        if v < self.lo || v > self.hi {
            return None;
        }
        Some((((v - self.lo) * self.scale) as usize).min(BINS - 1))
    }
}

/// Value inside every chosen level.
#[inline(always)]
pub fn inside(levels: &[Level], v: f64) -> bool {
    levels.iter().all(|l| l.bin_of(v) == Some(l.bin))
}

/// The three data passes of the refinement, on some engine.
pub trait Source {
    /// (number, smallest, largest) of the kept values inside `levels`.
    fn extent(&self, levels: &[Level]) -> Result<(usize, f64, f64)>;
    /// Counts per bin of `level` among kept values inside `levels`.
    fn histogram(&self, levels: &[Level], level: &Level) -> Result<Vec<u64>>;
    /// All kept values inside `levels` (any order).
    fn gather(&self, levels: &[Level]) -> Result<Vec<f64>>;
}

/// The k-th smallest (0-based) kept value of `src`, or None if fewer than k+1 are kept.
pub fn refine(src: &impl Source, k: usize) -> Result<Option<f64>> {
    let (n, mut lo, mut hi) = src.extent(&[])?;
    if k >= n {
        return Ok(None);
    }
    let (mut k, mut left) = (k, n);
    let mut levels: Vec<Level> = Vec::new();
    while left > GATHER && hi > lo && levels.len() < MAX_LEVELS {
        let mut level = Level::new(lo, hi);
        let hist = src.histogram(&levels, &level)?;
        let mut below = 0usize;
        let mut b = 0;
        while below + hist[b] as usize <= k {
            below += hist[b] as usize;
            b += 1;
        }
        level.bin = b;
        k -= below;
        left = hist[b] as usize;
        levels.push(level);
        // Next level spans the chosen bin, slightly widened: membership is decided by `inside`.
        let bin_lo = (level.lo + b as f64 / level.scale).max(level.lo);
        let bin_hi = (level.lo + (b + 1) as f64 / level.scale).min(level.hi);
        let pad = (bin_hi - bin_lo).abs() * 1e-9 + f64::MIN_POSITIVE;
        lo = bin_lo - pad;
        hi = bin_hi + pad;
    }
    if left > GATHER {
        // Bins narrower than the spacing of doubles: what is left is one repeated value.
        let (_, mn, mx) = src.extent(&levels)?;
        if mn == mx {
            return Ok(Some(mn));
        }
    }
    let mut rest = src.gather(&levels)?;
    if k >= rest.len() {
        return Err(crate::Error::Internal(format!(
            "selection lost values: rank {k} of {} gathered",
            rest.len()
        )));
    }
    let (_, v, _) = rest.select_nth_unstable_by(k, |a, b| a.total_cmp(b));
    Ok(Some(*v))
}

/// The median (mean of the two middle values for an even count), or None if nothing is kept.
pub fn median_from(n: usize, kth: impl Fn(usize) -> Option<f64>) -> Option<f64> {
    match n {
        0 => None,
        n if n % 2 == 1 => kth(n / 2),
        n => Some(0.5 * (kth(n / 2 - 1)? + kth(n / 2)?)),
    }
}

/// Median of the values `vals` selects from `data` (CPU).
pub fn median<T: crate::real::Real>(data: &[T], vals: Values) -> Option<f64> {
    let n = count(data, vals);
    median_from(n, |k| select_kth(data, k, vals))
}

/// Median absolute deviation from `center` of the finite values (CPU), not scaled.
pub fn madfm<T: crate::real::Real>(data: &[T], center: f64) -> Option<f64> {
    median(data, Values::abs_about(center))
}

pub mod noise;
pub mod sample;
pub mod sofia1;
pub mod sofia2;
