//! Robust statistics of large arrays, exact and without sorting or copying the array: the k-th
//! smallest value is found by histogram refinement (count values per bin in parallel, keep the
//! bin holding rank k, repeat until few values remain, then select among those). Medians, MADs
//! and noise estimates of every family are built on `select_kth`.

mod cpu;
mod cuda;

pub use cpu::{count, select_kth};
pub use cuda::{count_device, select_kth_device};

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
