//! Separable 1-D filters (skyconv.filters).

use numpy::PyArrayDyn;
use pyo3::prelude::*;

use crate::backend;
use crate::cube::filters::{self, Filter1d, Mode, Pass};
use crate::py::arrays::{data_mut, empty, parts, FloatArray};
use crate::py::errors::{compute, to_pyerr};
use crate::real::Real;

fn run<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: &numpy::PyReadonlyArrayDyn<'py, T>,
    pass: Pass,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let (shape, input) = parts(a, "input")?;
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    let out = empty::<T>(py, &shape);
    let dst = data_mut(&out);
    compute(py, || filters::apply(dev, input, &shape, &pass, dst))?;
    Ok(out)
}

/// The generic binding: `input` filtered along `axis` by `filter`.
fn filter_any<'py>(
    py: Python<'py>,
    input: FloatArray<'py>,
    filter: Filter1d,
    axis: usize,
    mode: &str,
    cval: f64,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let pass = Pass {
        filter,
        axis,
        mode: Mode::parse(mode).map_err(to_pyerr)?,
        cval,
    };
    Ok(match input {
        FloatArray::F32(a) => run(py, &a, pass, device)?.into_any(),
        FloatArray::F64(a) => run(py, &a, pass, device)?.into_any(),
    })
}

#[pyfunction]
#[pyo3(signature = (input, weights, axis, mode, cval, origin, convolve, device=None))]
#[allow(clippy::too_many_arguments)]
fn _correlate1d<'py>(
    py: Python<'py>,
    input: FloatArray<'py>,
    weights: Vec<f64>,
    axis: usize,
    mode: &str,
    cval: f64,
    origin: isize,
    convolve: bool,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let f = if convolve {
        Filter1d::convolve(&weights, origin)
    } else {
        Filter1d::correlate(&weights, origin)
    }
    .map_err(to_pyerr)?;
    filter_any(py, input, f, axis, mode, cval, device)
}

#[pyfunction]
#[pyo3(signature = (input, sigma, axis, mode, cval, truncate, radius=None, device=None))]
#[allow(clippy::too_many_arguments)]
fn _gaussian_filter1d<'py>(
    py: Python<'py>,
    input: FloatArray<'py>,
    sigma: f64,
    axis: usize,
    mode: &str,
    cval: f64,
    truncate: f64,
    radius: Option<usize>,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let f = Filter1d::gaussian(sigma, truncate, radius).map_err(to_pyerr)?;
    filter_any(py, input, f, axis, mode, cval, device)
}

#[pyfunction]
#[pyo3(signature = (input, size, axis, mode, cval, origin, device=None))]
#[allow(clippy::too_many_arguments)]
fn _uniform_filter1d<'py>(
    py: Python<'py>,
    input: FloatArray<'py>,
    size: usize,
    axis: usize,
    mode: &str,
    cval: f64,
    origin: isize,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let f = Filter1d::uniform(size, origin).map_err(to_pyerr)?;
    filter_any(py, input, f, axis, mode, cval, device)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_correlate1d, m)?)?;
    m.add_function(wrap_pyfunction!(_gaussian_filter1d, m)?)?;
    m.add_function(wrap_pyfunction!(_uniform_filter1d, m)?)?;
    Ok(())
}
