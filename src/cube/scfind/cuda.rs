//! CUDA engine of Smooth-and-Clip (placeholder until the kernels land).

use super::{Outcome, Plan, Progress};
use crate::error::{Error, Result};
use crate::real::Real;

pub fn run<T: Real>(
    _cube: &[T],
    _plan: &Plan,
    _mask: &mut [u8],
    _progress: Progress<'_>,
) -> Result<Outcome> {
    Err(Error::device("smooth_and_clip has no CUDA engine yet"))
}
