//! CUDA engine (kernels/grid.cu).

use super::{Plan, Samples, Setup};
use crate::error::{Error, Result};
use crate::real::Real;

pub fn accumulate<T: Real, O: Real>(
    _plan: &Plan,
    _samples: &Samples<'_, T>,
    _target_lon: &[f64],
    _target_lat: &[f64],
    _setup: &Setup,
    _unweighted: &mut [O],
    _weights: &mut [O],
) -> Result<()> {
    Err(Error::device("the CUDA gridding engine is not built yet"))
}
