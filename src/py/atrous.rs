//! À trous wavelet reconstruction (skyconv.atrous_denoise).

use pyo3::prelude::*;

use crate::backend;
use crate::cube::atrous::{self, Params, Progress, Variant, WaveletFilter, DUCHAMP_BLANK};
use crate::py::arrays::{data_mut, empty, parts, with_float, FloatArray};
use crate::py::errors::{compute_in, to_pyerr, Call};
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
    let o = compute_in(py, &call, || {
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_atrous_denoise, m)?)?;
    m.add_function(wrap_pyfunction!(_atrous_plan, m)?)?;
    Ok(())
}
