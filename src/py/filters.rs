//! Separable 1-D filters (skyconv.filters).

use numpy::PyArrayDyn;
use pyo3::prelude::*;

use crate::backend;
use crate::cube::filters::{self, Filter1d, Mode, Pass};
use crate::py::arrays::{data_mut, empty, parts, with_float, FloatArray};
use crate::py::errors::{compute_on, to_pyerr};
use crate::real::Real;

fn run<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: &numpy::PyReadonlyArrayDyn<'py, T>,
    pass: Pass,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let (shape, input) = parts(a, "input")?;
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    let out = empty::<T>(py, &shape)?;
    let dst = data_mut(&out);
    compute_on(py, dev, || filters::apply(dev, input, &shape, &pass, dst))?;
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
    Ok(with_float!(input, a => run(py, &a, pass, device)?.into_any()))
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

/// One pass of a chain: (kind, axis, mode, cval, params) with kind "gaussian"
/// (params [sigma, truncate, radius or -1]), "uniform" ([size, origin]), "correlate"
/// ([origin, weights...]) or "dilated" ([step, weights...]: the à trous filter, taps `step`
/// apart, centred; the passes of one à trous scale, for the Dask path of atrous_denoise).
pub(crate) type PassSpec = (String, usize, String, f64, Vec<f64>);

pub(crate) fn pass_of(spec: PassSpec) -> crate::Result<Pass> {
    let (kind, axis, mode, cval, p) = spec;
    let bad = || crate::Error::value(format!("malformed {kind:?} pass parameters {p:?}"));
    let filter = match (kind.as_str(), p.as_slice()) {
        ("gaussian", [sigma, truncate, radius]) => Filter1d::gaussian(
            *sigma,
            *truncate,
            (*radius >= 0.0).then_some(*radius as usize),
        )?,
        ("uniform", [size, origin]) => Filter1d::uniform(*size as usize, *origin as isize)?,
        ("correlate", [origin, weights @ ..]) => Filter1d::correlate(weights, *origin as isize)?,
        ("dilated", [step, weights @ ..]) if *step >= 1.0 => {
            Filter1d::dilated(weights, *step as usize)?
        }
        _ => return Err(bad()),
    };
    Ok(Pass {
        filter,
        axis,
        mode: Mode::parse(&mode)?,
        cval,
    })
}

fn chain<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: &numpy::PyReadonlyArrayDyn<'py, T>,
    passes: &[Pass],
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let (shape, input) = parts(a, "input")?;
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    let out = empty::<T>(py, &shape)?;
    let dst = data_mut(&out);
    compute_on(py, dev, || {
        filters::apply_chain(dev, input, &shape, passes, dst)
    })?;
    Ok(out)
}

#[pyfunction]
#[pyo3(signature = (input, passes, device=None))]
fn _filter_chain<'py>(
    py: Python<'py>,
    input: FloatArray<'py>,
    passes: Vec<PassSpec>,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let passes = passes
        .into_iter()
        .map(pass_of)
        .collect::<crate::Result<Vec<_>>>()
        .map_err(to_pyerr)?;
    Ok(with_float!(input, a => chain(py, &a, &passes, device)?.into_any()))
}

/// The GPU kernel a pass along `axis` of an array of `shape` runs (the whole array on the
/// device; the first tap `offset` from the output, default centred) and its shared memory, and
/// every tile that fits: for benchmarks (`tile_plan`). On GPU `gpu` (an ordinal, whose shared
/// memory bounds the whole-axis tiles), or None: within the 48 KB any GPU gives a block.
#[pyfunction]
#[pyo3(signature = (shape, axis, taps, step, dtype, split=false, offset=None, gpu=None))]
#[allow(clippy::too_many_arguments)]
fn _filter_tile_plan(
    shape: Vec<usize>,
    axis: usize,
    taps: usize,
    step: usize,
    dtype: &str,
    split: bool,
    offset: Option<isize>,
    gpu: Option<u32>,
) -> PyResult<Option<(filters::KernelTile, Vec<filters::KernelTile>)>> {
    let view = filters::AxisView::new(&shape, axis).map_err(to_pyerr)?;
    if step == 0 {
        return Err(to_pyerr(crate::Error::value(
            "step must be at least 1, got 0",
        )));
    }
    if !matches!(dtype, "float32" | "float64") {
        return Err(to_pyerr(crate::Error::value(format!(
            "dtype must be 'float32' or 'float64', got {dtype:?}"
        ))));
    }
    // the arguments are checked before a GPU's context is created
    let shared = match gpu {
        Some(o) => {
            crate::backend::cuda::gpu_on(o)
                .map_err(to_pyerr)?
                .shared_four
        }
        None => crate::backend::cuda::SHARED_DEFAULT,
    };
    let offset = offset.unwrap_or(-((taps / 2 * step) as isize)); // centred
    match dtype {
        "float32" => Ok(filters::tile_plan::<f32>(
            view, taps, step, offset, split, shared,
        )),
        _ => Ok(filters::tile_plan::<f64>(
            view, taps, step, offset, split, shared,
        )),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_filter_chain, m)?)?;
    m.add_function(wrap_pyfunction!(_filter_tile_plan, m)?)?;
    m.add_function(wrap_pyfunction!(_correlate1d, m)?)?;
    m.add_function(wrap_pyfunction!(_gaussian_filter1d, m)?)?;
    m.add_function(wrap_pyfunction!(_uniform_filter1d, m)?)?;
    Ok(())
}
