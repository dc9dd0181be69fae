//! Spherical harmonic transform bindings (skyconv.sht).

use numpy::{Complex64, PyArrayDyn, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::backend;
use crate::py::arrays::{empty_for, parts, with_float, FloatArray, FloatArrays};
use crate::py::errors::{compute_on, to_pyerr};
use crate::real::Real;
use crate::sht::cuda::multi::{self, Stats as MultiStats};
use crate::sht::{self, AlmLayout};

fn slices<'a, T: numpy::Element>(
    arrs: &'a [PyReadonlyArray1<'_, T>],
    name: &str,
) -> PyResult<Vec<&'a [T]>> {
    arrs.iter()
        .map(|a| {
            a.as_slice()
                .map_err(|_| crate::py::errors::value_err(format!("{name} must be C-contiguous")))
        })
        .collect()
}

/// alm (list of complex128 arrays) -> (ncomp, npix) float64 maps.
#[pyfunction]
#[pyo3(signature = (alms, nside, lmax, mmax, pol, device=None))]
fn _alm2map<'py>(
    py: Python<'py>,
    alms: Vec<PyReadonlyArray1<'py, Complex64>>,
    nside: usize,
    lmax: usize,
    mmax: usize,
    pol: bool,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let lay = AlmLayout::new(lmax, mmax).map_err(to_pyerr)?;
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    let a = slices(&alms, "alms")?;
    crate::backend::alloc::check_dims("the output maps", &[a.len(), 12, nside, nside], 8)
        .map_err(to_pyerr)?;
    let npix = 12 * nside * nside;
    // every element is written by the transform before the array is returned
    let out = empty_for::<f64>(py, &[a.len(), npix], dev)?;
    {
        let data = unsafe { out.as_slice_mut() }.expect("new arrays are contiguous");
        let mut maps: Vec<&mut [f64]> = data.chunks_mut(npix.max(1)).collect();
        maps.truncate(a.len());
        compute_on(py, dev, || {
            sht::alm2map(dev, nside, lay, &a, pol, &mut maps)
        })?;
    }
    Ok(out)
}

fn run_map2alm<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    maps: &[numpy::PyReadonlyArrayDyn<'py, T>],
    args: (usize, AlmLayout, usize, bool, Option<&[f64]>, Option<&str>),
) -> PyResult<Bound<'py, PyArrayDyn<Complex64>>> {
    let (nside, lay, iter, pol, w, device) = args;
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    let m: Vec<&[T]> = maps
        .iter()
        .map(|a| parts(a, "maps").map(|(_, d)| d))
        .collect::<PyResult<_>>()?;
    let n = lay.size();
    // map2alm overwrites every coefficient
    let out = empty_for::<Complex64>(py, &[m.len(), n], dev)?;
    {
        let data = unsafe { out.as_slice_mut() }.expect("new arrays are contiguous");
        let mut alms: Vec<&mut [Complex64]> = data.chunks_mut(n).collect();
        compute_on(py, dev, || {
            sht::map2alm(dev, nside, lay, &m, pol, iter, w, &mut alms)
        })?;
    }
    Ok(out)
}

/// maps (list of float32 or float64 arrays, all of one dtype; UNSEEN pixels count as 0)
/// -> (ncomp, nalm) complex128 alm.
#[pyfunction]
#[pyo3(signature = (maps, nside, lmax, mmax, iter, pol, ring_weights=None, device=None))]
#[allow(clippy::too_many_arguments)]
fn _map2alm<'py>(
    py: Python<'py>,
    maps: Vec<FloatArray<'py>>,
    nside: usize,
    lmax: usize,
    mmax: usize,
    iter: usize,
    pol: bool,
    ring_weights: Option<PyReadonlyArray1<'py, f64>>,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<Complex64>>> {
    let lay = AlmLayout::new(lmax, mmax).map_err(to_pyerr)?;
    let w = match &ring_weights {
        Some(w) => Some(
            w.as_slice()
                .map_err(|_| crate::py::errors::value_err("ring_weights must be C-contiguous"))?,
        ),
        None => None,
    };
    let args = (nside, lay, iter, pol, w, device);
    let maps = FloatArrays::same_dtype(maps, "maps")?;
    with_float!(FloatArrays: maps, m => run_map2alm(py, &m, args))
}

/// What a multi-GPU transform reports, as a dict.
fn stats_dict<'py>(py: Python<'py>, st: &MultiStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("transport", st.transport)?;
    d.set_item("devices", st.devices.clone())?;
    d.set_item("m_blocks", st.m_blocks.clone())?;
    d.set_item("ring_blocks", st.ring_blocks.clone())?;
    d.set_item("legendre_s", st.legendre_s)?;
    d.set_item("exchange_s", st.exchange_s)?;
    d.set_item("ring_s", st.ring_s)?;
    d.set_item("peak_bytes", st.peak_bytes.clone())?;
    d.set_item("pair_blocks", st.pair_blocks.clone())?;
    d.set_item("rounds", st.rounds)?;
    d.set_item("planned_bytes", st.planned_bytes.clone())?;
    d.set_item("stage_s_per_gpu", st.stage_s_per_gpu.clone())?;
    d.set_item("wall_s_per_gpu", st.wall_s_per_gpu.clone())?;
    Ok(d)
}

/// alm2map split over several GPUs: -> ((ncomp, npix) maps, stats dict).
#[pyfunction]
#[pyo3(signature = (alms, nside, lmax, mmax, pol, devices))]
fn _alm2map_multi<'py>(
    py: Python<'py>,
    alms: Vec<PyReadonlyArray1<'py, Complex64>>,
    nside: usize,
    lmax: usize,
    mmax: usize,
    pol: bool,
    devices: Vec<u32>,
) -> PyResult<(Bound<'py, PyArrayDyn<f64>>, Bound<'py, PyDict>)> {
    let lay = AlmLayout::new(lmax, mmax).map_err(to_pyerr)?;
    let a = slices(&alms, "alms")?;
    for x in &a {
        if x.len() != lay.size() {
            return Err(to_pyerr(crate::error::Error::shape(format!(
                "alm has {} coefficients, lmax={lmax} mmax={mmax} needs {}",
                x.len(),
                lay.size()
            ))));
        }
    }
    let npix = 12 * nside * nside;
    let dev = backend::Device::Cpu; // host output
                                    // every pixel is written by the ring stage
    let out = empty_for::<f64>(py, &[a.len(), npix], dev)?;
    let st = {
        let data = unsafe { out.as_slice_mut() }.expect("new arrays are contiguous");
        let mut maps: Vec<&mut [f64]> = data.chunks_mut(npix.max(1)).collect();
        maps.truncate(a.len());
        compute_on(py, devices.as_slice(), || {
            let plan = sht::Plan::new(nside, lay, None)?;
            multi::with_stats(&plan, &devices, |st| {
                multi::alm2map(&plan, pol && a.len() == 3, &devices, &a, &mut maps, st)
            })
        })?
    };
    Ok((out, stats_dict(py, &st)?))
}

/// map2alm split over several GPUs (float64 maps, UNSEEN zeroed here): -> (alm, stats dict).
#[pyfunction]
#[pyo3(signature = (maps, nside, lmax, mmax, iter, pol, devices, ring_weights=None))]
#[allow(clippy::too_many_arguments)]
fn _map2alm_multi<'py>(
    py: Python<'py>,
    maps: Vec<PyReadonlyArray1<'py, f64>>,
    nside: usize,
    lmax: usize,
    mmax: usize,
    iter: usize,
    pol: bool,
    devices: Vec<u32>,
    ring_weights: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<(Bound<'py, PyArrayDyn<Complex64>>, Bound<'py, PyDict>)> {
    let lay = AlmLayout::new(lmax, mmax).map_err(to_pyerr)?;
    let w = match &ring_weights {
        Some(w) => Some(
            w.as_slice()
                .map_err(|_| crate::py::errors::value_err("ring_weights must be C-contiguous"))?,
        ),
        None => None,
    };
    let m = slices(&maps, "maps")?;
    let n = lay.size();
    let out = empty_for::<Complex64>(py, &[m.len(), n], backend::Device::Cpu)?;
    let st = {
        let data = unsafe { out.as_slice_mut() }.expect("new arrays are contiguous");
        let mut alms: Vec<&mut [Complex64]> = data.chunks_mut(n.max(1)).collect();
        alms.truncate(m.len());
        compute_on(py, devices.as_slice(), || {
            let plan = sht::Plan::new(nside, lay, w)?;
            for x in &m {
                if x.len() != plan.npix {
                    return Err(crate::error::Error::shape(format!(
                        "map has {} pixels, nside={nside} needs {}",
                        x.len(),
                        plan.npix
                    )));
                }
            }
            multi::with_stats(&plan, &devices, |st| {
                multi::map2alm(
                    &plan,
                    pol && m.len() == 3,
                    &devices,
                    &m,
                    iter,
                    &mut alms,
                    st,
                )
            })
        })?
    };
    Ok((out, stats_dict(py, &st)?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_alm2map, m)?)?;
    m.add_function(wrap_pyfunction!(_map2alm, m)?)?;
    m.add_function(wrap_pyfunction!(_alm2map_multi, m)?)?;
    m.add_function(wrap_pyfunction!(_map2alm_multi, m)?)?;
    Ok(())
}
