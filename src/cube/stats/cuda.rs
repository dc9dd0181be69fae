//! GPU entry points of the statistics. For now the values are copied back and selected on the
//! CPU; a device histogram-selection kernel replaces this without changing the signatures.

use super::Values;
use crate::backend::cuda::{CudaSlice, Gpu};
use crate::error::Result;
use crate::real::Real;

fn to_host<T: Real>(gpu: &Gpu, data: &CudaSlice<T>, n: usize) -> Result<Vec<T>> {
    let mut host = vec![T::default(); n];
    gpu.download(data, &mut host)?;
    Ok(host)
}

/// Number of the first `n` device values that `vals` keeps.
pub fn count_device<T: Real>(
    gpu: &Gpu,
    data: &CudaSlice<T>,
    n: usize,
    vals: Values,
) -> Result<usize> {
    let host = to_host(gpu, data, n)?;
    Ok(super::count(&host, vals))
}

/// The k-th smallest kept value among the first `n` device values.
pub fn select_kth_device<T: Real>(
    gpu: &Gpu,
    data: &CudaSlice<T>,
    n: usize,
    k: usize,
    vals: Values,
) -> Result<Option<f64>> {
    let host = to_host(gpu, data, n)?;
    Ok(super::select_kth(&host, k, vals))
}
