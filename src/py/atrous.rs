//! À trous wavelet reconstruction (skyconv.atrous_denoise).

use pyo3::prelude::*;

use crate::backend;
use crate::cube::atrous::blocks;
use crate::cube::atrous::{self, Params, Progress, Variant, WaveletFilter, DUCHAMP_BLANK};
use crate::py::arrays::{data_mut, empty, parts, with_float, FloatArray, FloatArrays};
use crate::py::errors::{compute, compute_in, to_pyerr, value_err, Call};
use crate::real::Real;

/// (reconstruction, iterations, noise, input_noise, scales, device) per unit.
type Answer<'py> = (
    Bound<'py, PyAny>,
    Vec<u32>,
    Vec<f64>,
    Vec<f64>,
    usize,
    &'static str,
);

fn run<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: &numpy::PyReadonlyArrayDyn<'py, T>,
    params: &Params,
    device: Option<&str>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Answer<'py>> {
    let (shape, input) = parts(a, "data")?;
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    let out = empty::<T>(py, &shape)?;
    let dst = data_mut(&out);
    // An exception raised by the progress callback ends the call and is re-raised unchanged.
    let call = Call::new();
    let mut report = |p: Progress| -> crate::Result<()> {
        match progress.as_ref() {
            Some(cb) => call.report(cb, (p.iteration, p.active, p.units, p.noise, p.change)),
            None => Ok(()),
        }
    };
    let o = compute_in(py, &call, dev, || {
        atrous::atrous_denoise(dev, input, &shape, params, dst, &mut report)
    })?;
    Ok((
        out.into_any(),
        o.iterations,
        o.noise,
        o.input_noise,
        o.scales,
        dev.name(),
    ))
}

#[pyfunction]
#[pyo3(signature = (data, dim, snr_recon, scale_min, scale_max, filter, convergence, robust,
                    device=None, progress=None, variant="duchamp", blank_value=DUCHAMP_BLANK))]
#[allow(clippy::too_many_arguments)]
fn _atrous_denoise<'py>(
    py: Python<'py>,
    data: FloatArray<'py>,
    dim: usize,
    snr_recon: f64,
    scale_min: usize,
    scale_max: usize,
    filter: &str,
    convergence: f64,
    robust: bool,
    device: Option<&str>,
    progress: Option<Py<PyAny>>,
    variant: &str,
    blank_value: f64,
) -> PyResult<Answer<'py>> {
    let params = Params {
        dim,
        snr: snr_recon,
        scale_min,
        scale_max,
        filter: WaveletFilter::parse(filter).map_err(to_pyerr)?,
        convergence,
        robust,
        variant: Variant::parse(variant).map_err(to_pyerr)?,
        blank_value,
    };
    with_float!(data, a => run(py, &a, &params, device, progress))
}

/// Number of scales and noise factors f[0..=N] for a reconstruction of `shape`.
#[pyfunction]
#[pyo3(signature = (shape, dim, filter, variant="duchamp"))]
fn _atrous_plan(
    shape: Vec<usize>,
    dim: usize,
    filter: &str,
    variant: &str,
) -> PyResult<(usize, Vec<f64>)> {
    let params = Params {
        dim,
        snr: 0.0,
        scale_min: 1,
        scale_max: 0,
        filter: WaveletFilter::parse(filter).map_err(to_pyerr)?,
        convergence: 1.0,
        robust: true,
        variant: Variant::parse(variant).map_err(to_pyerr)?,
        blank_value: DUCHAMP_BLANK,
    };
    let plan = atrous::Plan::new(&shape, &params).map_err(to_pyerr)?;
    Ok((plan.scales, plan.factors))
}

/// The contiguous data of `arrays`, all of one size (else a ValueError naming `names`).
fn same_size<'a, T: numpy::Element>(
    arrays: &'a [numpy::PyReadonlyArrayDyn<'_, T>],
    names: &str,
) -> PyResult<(Vec<usize>, Vec<&'a [T]>)> {
    let mut shape = None;
    let mut data = Vec::with_capacity(arrays.len());
    for a in arrays {
        let (s, d) = parts(a, names)?;
        if shape.as_ref().is_some_and(|t: &Vec<usize>| *t != s) {
            return Err(value_err(format!("{names} must have one shape")));
        }
        shape = Some(s);
        data.push(d);
    }
    Ok((shape.unwrap_or_default(), data))
}

fn split<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    arrays: &[numpy::PyReadonlyArrayDyn<'py, T>],
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (shape, d) = same_size(arrays, "c, smooth and x")?;
    let (w, next) = (empty::<T>(py, &shape)?, empty::<T>(py, &shape)?);
    let (wd, nd) = (data_mut(&w), data_mut(&next));
    compute(py, || {
        blocks::split(d[0], d[1], d[2], wd, nd);
        Ok(())
    })?;
    Ok((w.into_any(), next.into_any()))
}

/// One à trous scale's coefficients and next smooth array of a block:
/// (c − smooth, c − (c − smooth)) where `x` is finite, (NaN, c) at its blanks.
#[pyfunction]
fn _atrous_split<'py>(
    py: Python<'py>,
    c: FloatArray<'py>,
    smooth: FloatArray<'py>,
    x: FloatArray<'py>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let arrays = FloatArrays::same_dtype(vec![c, smooth, x], "c, smooth and x")?;
    with_float!(FloatArrays: arrays, v => split(py, &v))
}

fn add_above<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    arrays: &[numpy::PyReadonlyArrayDyn<'py, T>],
    thr: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let (shape, d) = same_size(arrays, "out and w")?;
    let dst = empty::<T>(py, &shape)?;
    let dd = data_mut(&dst);
    compute(py, || {
        blocks::add_above(d[0], d[1], thr, dd);
        Ok(())
    })?;
    Ok(dst.into_any())
}

/// `out + w` where |w| > thr (compared in float64), else `out`: a new array.
#[pyfunction]
fn _atrous_add_above<'py>(
    py: Python<'py>,
    out: FloatArray<'py>,
    w: FloatArray<'py>,
    thr: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let arrays = FloatArrays::same_dtype(vec![out, w], "out and w")?;
    with_float!(FloatArrays: arrays, v => add_above(py, &v, thr))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_atrous_split, m)?)?;
    m.add_function(wrap_pyfunction!(_atrous_add_above, m)?)?;
    m.add_function(wrap_pyfunction!(_atrous_denoise, m)?)?;
    m.add_function(wrap_pyfunction!(_atrous_plan, m)?)?;
    Ok(())
}
