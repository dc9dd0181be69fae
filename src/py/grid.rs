//! Gridding bindings (skyconv.grid, skyconv.compat.cygrid). Argument checks live in Python.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadwriteArrayDyn};

use pyo3::prelude::*;

use crate::backend;
use crate::grid::{self, Kernel, Samples, Setup, Weights};
use crate::py::arrays::{data_mut, empty, empty_for, parts, FloatArray};
use crate::py::errors::{compute, compute_on, to_pyerr};
use crate::real::Real;

/// A writable float32/float64 accumulator.
#[derive(FromPyObject)]
enum Acc<'py> {
    F32(PyReadwriteArrayDyn<'py, f32>),
    F64(PyReadwriteArrayDyn<'py, f64>),
}

fn slice1<'a>(a: &'a PyReadonlyArray1<'_, f64>, name: &str) -> PyResult<&'a [f64]> {
    a.as_slice()
        .map_err(|_| crate::py::errors::value_err(format!("{name} must be C-contiguous")))
}

fn acc_slice<'a, O: Real + numpy::Element>(
    a: &'a mut PyReadwriteArrayDyn<'_, O>,
) -> PyResult<&'a mut [O]> {
    a.as_slice_mut()
        .map_err(|_| crate::py::errors::value_err("accumulators must be C-contiguous"))
}

struct Call<'a> {
    lons: &'a [f64],
    lats: &'a [f64],
    tlons: &'a [f64],
    tlats: &'a [f64],
    setup: Setup,
    device: backend::Device,
}

/// The samples of one call: values (n, nchan) and weights none, per sample or per value.
fn samples<'a, 'py, T: Real + numpy::Element>(
    call: &'a Call<'a>,
    data: &'a numpy::PyReadonlyArrayDyn<'py, T>,
    weights: Option<&'a numpy::PyReadonlyArrayDyn<'py, T>>,
) -> PyResult<Samples<'a, T>> {
    let (shape, values) = parts(data, "data")?;
    let nchan = if shape.len() == 2 { shape[1] } else { 1 };
    let weights = match weights {
        None => Weights::Ones,
        Some(w) => {
            let (wshape, ws) = parts(w, "weights")?;
            if wshape.len() == 1 {
                Weights::PerSample(ws)
            } else {
                Weights::Full(ws)
            }
        }
    };
    Ok(Samples {
        lon: call.lons,
        lat: call.lats,
        data: values,
        nchan,
        weights,
    })
}

fn run<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    call: &Call<'_>,
    data: &numpy::PyReadonlyArrayDyn<'py, T>,
    weights: Option<&numpy::PyReadonlyArrayDyn<'py, T>>,
    unweighted: &mut Acc<'py>,
    weight_sums: &mut Acc<'py>,
) -> PyResult<()> {
    let samples = samples(call, data, weights)?;
    macro_rules! go {
        ($u:expr, $w:expr) => {{
            let (u, w) = (acc_slice($u)?, acc_slice($w)?);
            compute_on(py, call.device, || {
                grid::accumulate(
                    call.device,
                    &samples,
                    call.tlons,
                    call.tlats,
                    &call.setup,
                    u,
                    w,
                )
            })
        }};
    }
    match (unweighted, weight_sums) {
        (Acc::F32(u), Acc::F32(w)) => go!(u, w),
        (Acc::F64(u), Acc::F64(w)) => go!(u, w),
        _ => Err(crate::py::errors::value_err(
            "unweighted and weight accumulators must share a dtype",
        )),
    }
}

/// Add the kernel-weighted sums of one batch of samples into the accumulators
/// (`nchan × ntargets`, float32 or float64). Coordinates and kernel widths in degrees.
#[pyfunction]
#[pyo3(signature = (lons, lats, data, weights, target_lons, target_lats, kernel, kernel_params,
                    sphere_radius, unweighted, weight_sums, device=None))]
#[allow(clippy::too_many_arguments)]
fn _grid_accumulate<'py>(
    py: Python<'py>,
    lons: PyReadonlyArray1<'py, f64>,
    lats: PyReadonlyArray1<'py, f64>,
    data: FloatArray<'py>,
    weights: Option<FloatArray<'py>>,
    target_lons: PyReadonlyArray1<'py, f64>,
    target_lats: PyReadonlyArray1<'py, f64>,
    kernel: &str,
    kernel_params: Vec<f64>,
    sphere_radius: Option<f64>,
    mut unweighted: Acc<'py>,
    mut weight_sums: Acc<'py>,
    device: Option<&str>,
) -> PyResult<()> {
    let kernel = Kernel::new(kernel, &kernel_params).map_err(to_pyerr)?;
    let call = Call {
        lons: slice1(&lons, "lons")?,
        lats: slice1(&lats, "lats")?,
        tlons: slice1(&target_lons, "target lons")?,
        tlats: slice1(&target_lats, "target lats")?,
        setup: Setup::new(kernel, sphere_radius).map_err(to_pyerr)?,
        device: backend::resolve(device).map_err(to_pyerr)?,
    };
    let (u, w) = (&mut unweighted, &mut weight_sums);
    match (data, weights) {
        (FloatArray::F32(d), None) => run(py, &call, &d, None, u, w),
        (FloatArray::F64(d), None) => run(py, &call, &d, None, u, w),
        (FloatArray::F32(d), Some(FloatArray::F32(ws))) => run(py, &call, &d, Some(&ws), u, w),
        (FloatArray::F64(d), Some(FloatArray::F64(ws))) => run(py, &call, &d, Some(&ws), u, w),
        _ => Err(crate::py::errors::value_err(
            "data and weights must share a dtype",
        )),
    }
}

/// Outputs (cube, weights, unweighted): cube `nchan × ntargets`; weights the same or, when no
/// channel's weight sums differ, `ntargets` (one map for all); unweighted, or None when it is
/// cube × weights (derived in Python on request).
type Outputs<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<Bound<'py, PyAny>>,
);

fn once_typed<'py, T: Real + numpy::Element, O: Real + numpy::Element>(
    py: Python<'py>,
    call: &Call<'_>,
    data: &numpy::PyReadonlyArrayDyn<'py, T>,
    weights: Option<&numpy::PyReadonlyArrayDyn<'py, T>>,
) -> PyResult<Outputs<'py>> {
    let samples = samples(call, data, weights)?;
    let cube = empty_for::<O>(py, &[samples.nchan, call.tlons.len()], call.device)?;
    let c = data_mut(&cube);
    let mut wsum = Vec::new();
    let usum = compute_on(py, call.device, || {
        grid::grid_once(
            call.device,
            &samples,
            call.tlons,
            call.tlats,
            &call.setup,
            c,
            &mut wsum,
        )
    })?;
    Ok((
        cube.into_any(),
        wsum.into_pyarray(py).into_any(),
        usum.map(|u| u.into_pyarray(py).into_any()),
    ))
}

fn once_any<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    call: &Call<'_>,
    data: &numpy::PyReadonlyArrayDyn<'py, T>,
    weights: Option<&numpy::PyReadonlyArrayDyn<'py, T>>,
    out64: bool,
) -> PyResult<Outputs<'py>> {
    if out64 {
        once_typed::<T, f64>(py, call, data, weights)
    } else {
        once_typed::<T, f32>(py, call, data, weights)
    }
}

/// `skyconv.grid` in one call: (cube, weights, unweighted), each `nchan × ntargets` of
/// `dtype` ("float32" or "float64"), from this batch of samples alone.
#[pyfunction]
#[pyo3(signature = (lons, lats, data, weights, target_lons, target_lats, kernel, kernel_params,
                    sphere_radius, dtype, device=None))]
#[allow(clippy::too_many_arguments)]
fn _grid_once<'py>(
    py: Python<'py>,
    lons: PyReadonlyArray1<'py, f64>,
    lats: PyReadonlyArray1<'py, f64>,
    data: FloatArray<'py>,
    weights: Option<FloatArray<'py>>,
    target_lons: PyReadonlyArray1<'py, f64>,
    target_lats: PyReadonlyArray1<'py, f64>,
    kernel: &str,
    kernel_params: Vec<f64>,
    sphere_radius: Option<f64>,
    dtype: &str,
    device: Option<&str>,
) -> PyResult<Outputs<'py>> {
    let out64 = match dtype {
        "float32" => false,
        "float64" => true,
        _ => {
            return Err(crate::py::errors::value_err(format!(
                "dtype must be 'float32' or 'float64', got {dtype:?}"
            )))
        }
    };
    let kernel = Kernel::new(kernel, &kernel_params).map_err(to_pyerr)?;
    let call = Call {
        lons: slice1(&lons, "lons")?,
        lats: slice1(&lats, "lats")?,
        tlons: slice1(&target_lons, "target lons")?,
        tlats: slice1(&target_lats, "target lats")?,
        setup: Setup::new(kernel, sphere_radius).map_err(to_pyerr)?,
        device: backend::resolve(device).map_err(to_pyerr)?,
    };
    match (data, weights) {
        (FloatArray::F32(d), None) => once_any(py, &call, &d, None, out64),
        (FloatArray::F64(d), None) => once_any(py, &call, &d, None, out64),
        (FloatArray::F32(d), Some(FloatArray::F32(w))) => once_any(py, &call, &d, Some(&w), out64),
        (FloatArray::F64(d), Some(FloatArray::F64(w))) => once_any(py, &call, &d, Some(&w), out64),
        _ => Err(crate::py::errors::value_err(
            "data and weights must share a dtype",
        )),
    }
}

/// What the CUDA engine would do for a call of this size within `budget` bytes: (samples per
/// chunk, "resident" or "packed", channels per block, bytes needed). Radius in degrees.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _grid_memory_plan(
    nsamples: usize,
    ntargets: usize,
    nchan: usize,
    data_itemsize: usize,
    out_itemsize: usize,
    weights: &str,
    finish: bool,
    sphere_radius: f64,
    budget: usize,
) -> PyResult<(usize, &'static str, usize, usize)> {
    grid::cuda::memory_plan(
        nsamples,
        ntargets,
        nchan,
        data_itemsize,
        out_itemsize,
        weights,
        finish,
        sphere_radius.to_radians(),
        budget,
    )
    .map_err(to_pyerr)
}

/// The CUDA engine's kernel argument layouts ("Struct.field offset size" lines), for the test
/// that compares them with kernels/grid.cu's structs.
#[pyfunction]
fn _grid_arg_layout() -> Vec<String> {
    grid::cuda::arg_layout()
}

fn finish_any<'py, O: Real + numpy::Element>(
    py: Python<'py>,
    u: &numpy::PyReadonlyArrayDyn<'py, O>,
    w: &numpy::PyReadonlyArrayDyn<'py, O>,
) -> PyResult<Bound<'py, PyAny>> {
    let (shape, us) = parts(u, "unweighted")?;
    let (_, ws) = parts(w, "weights")?;
    let out = empty::<O>(py, &shape)?;
    let dst = data_mut(&out);
    compute(py, || grid::finish(us, ws, dst))?;
    Ok(out.into_any())
}

/// unweighted / weights with NaN where the weight is 0 (no NumPy warning).
#[pyfunction]
fn _grid_finish<'py>(
    py: Python<'py>,
    unweighted: FloatArray<'py>,
    weights: FloatArray<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    match (unweighted, weights) {
        (FloatArray::F32(u), FloatArray::F32(w)) => finish_any(py, &u, &w),
        (FloatArray::F64(u), FloatArray::F64(w)) => finish_any(py, &u, &w),
        _ => Err(crate::py::errors::value_err(
            "unweighted and weights must share a dtype",
        )),
    }
}

type LonLat<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// (lons, lats) in degrees of HEALPix pixel centres (all pixels, or `pixels`).
#[pyfunction]
#[pyo3(signature = (nside, nest, pixels=None))]
fn _healpix_centres<'py>(
    py: Python<'py>,
    nside: u64,
    nest: bool,
    pixels: Option<PyReadonlyArray1<'py, i64>>,
) -> PyResult<LonLat<'py>> {
    let pix = match &pixels {
        Some(p) => Some(
            p.as_slice()
                .map_err(|_| crate::py::errors::value_err("pixels must be C-contiguous"))?,
        ),
        None => None,
    };
    let (lon, lat) = compute(py, || grid::healpix_centres(nside, nest, pix))?;
    Ok((lon.into_pyarray(py), lat.into_pyarray(py)))
}

/// Check a kernel (name, parameters in degrees, sphere radius in degrees or None) without
/// gridding anything: the errors `_grid_accumulate` and `_grid_once` would raise for it.
/// Returns the sphere radius the core will use (degrees).
#[pyfunction]
#[pyo3(signature = (kernel, kernel_params, sphere_radius=None))]
fn _grid_check_kernel(
    kernel: &str,
    kernel_params: Vec<f64>,
    sphere_radius: Option<f64>,
) -> PyResult<f64> {
    let kernel = Kernel::new(kernel, &kernel_params).map_err(to_pyerr)?;
    let setup = Setup::new(kernel, sphere_radius).map_err(to_pyerr)?;
    Ok(setup.radius.to_degrees())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_grid_check_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(_grid_accumulate, m)?)?;
    m.add_function(wrap_pyfunction!(_grid_finish, m)?)?;
    m.add_function(wrap_pyfunction!(_grid_once, m)?)?;
    m.add_function(wrap_pyfunction!(_grid_arg_layout, m)?)?;
    m.add_function(wrap_pyfunction!(_grid_memory_plan, m)?)?;
    m.add_function(wrap_pyfunction!(_healpix_centres, m)?)?;
    Ok(())
}
