//! Bindings for the exact selection primitive (used by tests and skyconv.stats) and the key
//! passes of the distributed selection (skyconv._dask.select).

use numpy::PyArray1;
use pyo3::prelude::*;

use crate::backend::{self, cuda, Device};
use crate::cube::stats::{self, keys, Range, Values};
use crate::py::arrays::{parts, with_float, FloatArray};
use crate::py::errors::{compute, compute_on, to_pyerr};
use crate::real::Real;

/// The values of ranks `ks` (None when a rank is past the last kept value), on `dev`: the
/// CPU's refinement once a rank, the GPU's radix selection following both ranks at once.
fn ranks<T: Real>(
    dev: Device,
    data: &[T],
    ks: [usize; 2],
    vals: Values,
) -> crate::Result<Option<[f64; 2]>> {
    match dev {
        Device::Cpu => {
            let first = stats::select_kth(data, ks[0], vals);
            let second = if ks[1] == ks[0] {
                first
            } else {
                stats::select_kth(data, ks[1], vals)
            };
            Ok(first.zip(second).map(|(a, b)| [a, b]))
        }
        Device::Cuda(o) => {
            let gpu = cuda::gpu_on(o)?;
            let _only = gpu.exclusive()?;
            let d = gpu.upload(data)?;
            stats::select_ranks_device(&gpu, &d, data.len(), ks, vals)
        }
    }
}

fn values_of(center: f64, abs: bool, range: &str) -> PyResult<Values> {
    let range = match range {
        "all" => Range::All,
        "negative" => Range::Negative,
        "positive" => Range::Positive,
        other => {
            return Err(crate::py::errors::value_err(format!(
                "range must be 'all', 'negative' or 'positive', got {other:?}"
            )))
        }
    };
    Ok(Values { center, abs, range })
}

/// The k-th smallest (0-based) of the values selected by (center, abs, range), or None.
#[pyfunction]
#[pyo3(signature = (data, k, center=0.0, abs=false, range="all", device=None))]
fn _select_kth(
    py: Python<'_>,
    data: FloatArray<'_>,
    k: usize,
    center: f64,
    abs: bool,
    range: &str,
    device: Option<&str>,
) -> PyResult<Option<f64>> {
    Ok(_select_pair(py, data, k, k, center, abs, range, device)?.map(|p| p.0))
}

/// The `k0`-th and `k1`-th smallest (0-based) of the values selected by (center, abs, range),
/// or None when either rank is past the last of them.
#[pyfunction]
#[pyo3(signature = (data, k0, k1, center=0.0, abs=false, range="all", device=None))]
#[allow(clippy::too_many_arguments)]
fn _select_pair(
    py: Python<'_>,
    data: FloatArray<'_>,
    k0: usize,
    k1: usize,
    center: f64,
    abs: bool,
    range: &str,
    device: Option<&str>,
) -> PyResult<Option<(f64, f64)>> {
    let vals = values_of(center, abs, range)?;
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    let got = with_float!(data, a => {
        let (_, d) = parts(&a, "data")?;
        compute_on(py, dev, || ranks(dev, d, [k0, k1], vals))
    })?;
    Ok(got.map(|v| (v[0], v[1])))
}

/// `Values` for a key pass: the finite values, or |x − center| when `center` is given.
fn key_vals(center: Option<f64>) -> Values {
    center.map_or(Values::FINITE, Values::abs_about)
}

/// Checks `shift` and `bits` of a key pass.
fn check_key_bits(shift: u32, bits: u32) -> PyResult<()> {
    if shift > 64 || bits < 1 || bits > shift.min(keys::MAX_BITS) {
        return Err(crate::py::errors::value_err(format!(
            "shift must be in 1..=64 and bits in 1..=min(shift, {}), got shift {shift}, bits \
             {bits}",
            keys::MAX_BITS
        )));
    }
    Ok(())
}

/// Counts (uint64, 2**bits) of the finite values of `data` (or of |data − center|) whose
/// order-preserving key starts with `prefix` (its top 64 − shift bits), by the next `bits` key
/// bits: one block pass of the distributed radix selection (skyconv._dask.select).
#[pyfunction]
#[pyo3(signature = (data, prefix=0, shift=64, bits=16, center=None))]
fn _key_counts<'py>(
    py: Python<'py>,
    data: FloatArray<'py>,
    prefix: u64,
    shift: u32,
    bits: u32,
    center: Option<f64>,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    check_key_bits(shift, bits)?;
    let vals = key_vals(center);
    let h = with_float!(data, a => {
        let (_, d) = parts(&a, "data")?;
        compute(py, || Ok(keys::key_counts(d, vals, prefix, shift, bits)))?
    });
    Ok(PyArray1::from_vec(py, h))
}

/// The finite values of `data` (or |data − center|) as float64 whose key starts with `prefix`
/// (top 64 − shift bits; all when shift is 64), in data order.
#[pyfunction]
#[pyo3(signature = (data, prefix=0, shift=64, center=None))]
fn _key_values<'py>(
    py: Python<'py>,
    data: FloatArray<'py>,
    prefix: u64,
    shift: u32,
    center: Option<f64>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    check_key_bits(shift, 1)?;
    let vals = key_vals(center);
    let v = with_float!(data, a => {
        let (_, d) = parts(&a, "data")?;
        compute(py, || Ok(keys::key_values(d, vals, prefix, shift)))?
    });
    Ok(PyArray1::from_vec(py, v))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_select_kth, m)?)?;
    m.add_function(wrap_pyfunction!(_select_pair, m)?)?;
    m.add_function(wrap_pyfunction!(_key_counts, m)?)?;
    m.add_function(wrap_pyfunction!(_key_values, m)?)?;
    Ok(())
}
