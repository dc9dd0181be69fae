//! Smoothing bindings (skyconv.smooth): the ring-method convolution and kernel profiles.

use numpy::{
    IntoPyArray, PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::py::arrays::{data_mut, empty_for, parts, with_float, FloatArray};
use crate::py::errors::{compute, compute_on, to_pyerr};
use crate::real::Real;
use crate::smooth::{self, profile};

/// (theta, values) per beam.
type Profiles<'a> = [(&'a [f64], &'a [f64])];

type ProfilePair<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

fn slice1<'a>(a: &'a PyReadonlyArray1<'_, f64>, name: &str) -> PyResult<&'a [f64]> {
    a.as_slice()
        .map_err(|_| crate::py::errors::value_err(format!("{name} must be C-contiguous")))
}

/// The map as float64: borrowed when it already is, converted (in parallel) when float32.
fn as_f64<T: Real>(m: &[T]) -> std::borrow::Cow<'_, [f64]> {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f64>() {
        // SAFETY: T is f64.
        std::borrow::Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(m.as_ptr() as *const f64, m.len())
        })
    } else {
        use rayon::prelude::*;
        std::borrow::Cow::Owned(m.par_iter().map(|v| v.to_f64()).collect())
    }
}

fn ring_run<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    map: &numpy::PyReadonlyArrayDyn<'py, T>,
    args: (usize, &[f64], &[f64], Option<&str>),
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let (nside, theta, values, device) = args;
    let dev = crate::backend::resolve(device).map_err(to_pyerr)?;
    let (shape, m) = parts(map, "map")?;
    let out = empty_for::<f64>(py, &shape, dev)?;
    let dst = data_mut(&out);
    compute_on(py, dev, || {
        let m64 = as_f64(m);
        smooth::ring_smooth(dev, nside, theta, values, &m64, dst)
    })?;
    Ok(out)
}

/// Ring-method smoothing of RING maps (float32/float64, (npix,) or (nmaps, npix), no missing
/// pixels; float64 out, same shape) with the radial profile K(theta) (K = 0 beyond theta[-1]);
/// several maps share the plan and the kernel spectra.
#[pyfunction]
#[pyo3(signature = (map, nside, theta, values, device=None))]
fn _smooth_ring<'py>(
    py: Python<'py>,
    map: FloatArray<'py>,
    nside: usize,
    theta: PyReadonlyArray1<'py, f64>,
    values: PyReadonlyArray1<'py, f64>,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let (t, v) = (slice1(&theta, "theta")?, slice1(&values, "values")?);
    let args = (nside, t, v, device);
    with_float!(map, a => ring_run(py, &a, args))
}

/// Where `_smooth_ring_beams` writes: a new array, or the rows `rows` of the caller's `out`.
type BeamsOut<'py> = Option<(Bound<'py, PyArrayDyn<f64>>, Vec<usize>)>;

fn beams_run<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    map: &numpy::PyReadonlyArrayDyn<'py, T>,
    args: (usize, &Profiles<'_>, Option<&str>),
    into: BeamsOut<'py>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let (nside, profiles, device) = args;
    let dev = crate::backend::resolve(device).map_err(to_pyerr)?;
    let (shape, m) = parts(map, "map")?;
    let (out, rows) = match into {
        Some((out, rows)) => {
            check_rows(&out, &shape, &rows, profiles.len())?;
            (out, rows)
        }
        None => {
            let mut oshape = vec![profiles.len()];
            oshape.extend_from_slice(&shape);
            (
                empty_for::<f64>(py, &oshape, dev)?,
                (0..profiles.len()).collect(),
            )
        }
    };
    let mut rw = out.try_readwrite().map_err(|_| {
        crate::py::errors::value_err("out must be a writeable array no other view is writing")
    })?;
    let all = rw
        .as_slice_mut()
        .map_err(|_| crate::py::errors::value_err("out must be C-contiguous"))?;
    let mut free: Vec<Option<&mut [f64]>> = all.chunks_mut(m.len().max(1)).map(Some).collect();
    let mut dst: Vec<&mut [f64]> = rows.iter().filter_map(|&r| free[r].take()).collect();
    compute_on(py, dev, || {
        let m64 = as_f64(m);
        smooth::ring_smooth_beams(dev, nside, profiles, &m64, &mut dst)
    })?;
    drop(rw);
    Ok(out)
}

/// `out` is float64 (n_rows, *map shape) and `rows` names `n_beams` distinct rows of it.
fn check_rows(
    out: &Bound<'_, PyArrayDyn<f64>>,
    shape: &[usize],
    rows: &[usize],
    n_beams: usize,
) -> PyResult<()> {
    let oshape = out.shape();
    if oshape.len() != shape.len() + 1 || oshape[1..] != *shape {
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        return Err(crate::py::errors::value_err(format!(
            "out must have shape (n, {}) (rows shaped like the map), got {oshape:?}",
            dims.join(", ")
        )));
    }
    // (rust-numpy's slices take Fortran order too: the rows must be C rows)
    if !out.is_c_contiguous() {
        return Err(crate::py::errors::value_err("out must be C-contiguous"));
    }
    let mut seen = vec![false; oshape[0]];
    for &r in rows {
        if r >= oshape[0] || std::mem::replace(&mut seen[r], true) {
            return Err(crate::py::errors::value_err(format!(
                "rows must be distinct rows of out (0 .. {}), got {rows:?}",
                oshape[0]
            )));
        }
    }
    if rows.len() != n_beams {
        return Err(crate::py::errors::value_err(format!(
            "rows must name one row per beam ({n_beams}), got {}",
            rows.len()
        )));
    }
    Ok(())
}

/// Ring-method smoothing of RING maps ((npix,) or (k, npix), no missing pixels) with several
/// radial profiles at once: (n_beams, *map.shape) float64, each equal to `_smooth_ring` with
/// that profile (on the GPU the maps go up and through the forward FFTs once). With `out`
/// (float64, C-contiguous, (n, *map.shape)) beam b is written into `out[rows[b]]` (`rows`:
/// default 0 .. n_beams) and `out` is returned: a mixed batch's ring beams go straight into
/// its output (on the GPU a page-locked block), with no copy.
#[pyfunction]
#[pyo3(signature = (map, nside, thetas, values, device=None, out=None, rows=None))]
#[allow(clippy::too_many_arguments)]
fn _smooth_ring_beams<'py>(
    py: Python<'py>,
    map: FloatArray<'py>,
    nside: usize,
    thetas: Vec<PyReadonlyArray1<'py, f64>>,
    values: Vec<PyReadonlyArray1<'py, f64>>,
    device: Option<&str>,
    out: Option<Bound<'py, PyArrayDyn<f64>>>,
    rows: Option<Vec<usize>>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    if thetas.len() != values.len() || thetas.is_empty() {
        return Err(crate::py::errors::value_err(
            "thetas and values must be non-empty lists of one length",
        ));
    }
    let mut profiles = Vec::with_capacity(thetas.len());
    for (t, v) in thetas.iter().zip(&values) {
        profiles.push((slice1(t, "theta")?, slice1(v, "values")?));
    }
    let into = match (out, rows) {
        (Some(o), r) => Some((o, r.unwrap_or_else(|| (0..profiles.len()).collect()))),
        (None, None) => None,
        (None, Some(_)) => return Err(crate::py::errors::value_err("rows needs out")),
    };
    let args = (nside, &profiles[..], device);
    with_float!(map, a => beams_run(py, &a, args, into))
}

type MaskedArgs<'a> = (
    usize,
    &'a Profiles<'a>,
    Option<&'a [f64]>,
    &'a [f64],
    Option<&'a str>,
);

fn masked_run<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    map: &numpy::PyReadonlyArrayDyn<'py, T>,
    args: MaskedArgs<'_>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let (nside, profiles, mask, thr, device) = args;
    let dev = crate::backend::resolve(device).map_err(to_pyerr)?;
    let (shape, m) = parts(map, "map")?;
    if shape.len() != 1 {
        return Err(crate::py::errors::value_err(format!(
            "map must be 1-D (npix,), got shape {shape:?}"
        )));
    }
    let out = empty_for::<f64>(py, &[profiles.len(), m.len()], dev)?;
    let dst = data_mut(&out);
    compute_on(py, dev, || {
        let m64 = as_f64(m);
        smooth::masked::ring_smooth_masked(dev, nside, profiles, &m64, mask, thr, dst)
    })?;
    Ok(out)
}

/// Masked (normalised) ring smoothing of one RING map (npix,) (float32/float64; UNSEEN and
/// non-finite pixels count as unobserved) with weights `mask` (float64 (npix,), None: 1) and
/// several radial profiles: (n_beams, npix) float64, smooth(m·w) / smooth(w) where
/// smooth(w) >= thr[b] (and > 0), else UNSEEN. One call: on the GPU the map and mask go up
/// once and only the normalised maps come down.
#[pyfunction]
#[pyo3(signature = (map, nside, thetas, values, thr, mask=None, device=None))]
#[allow(clippy::too_many_arguments)]
fn _smooth_ring_masked<'py>(
    py: Python<'py>,
    map: FloatArray<'py>,
    nside: usize,
    thetas: Vec<PyReadonlyArray1<'py, f64>>,
    values: Vec<PyReadonlyArray1<'py, f64>>,
    thr: Vec<f64>,
    mask: Option<PyReadonlyArray1<'py, f64>>,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    if thetas.len() != values.len() || thetas.is_empty() || thr.len() != thetas.len() {
        return Err(crate::py::errors::value_err(
            "thetas, values and thr must be non-empty lists of one length",
        ));
    }
    let mut profiles = Vec::with_capacity(thetas.len());
    for (t, v) in thetas.iter().zip(&values) {
        profiles.push((slice1(t, "theta")?, slice1(v, "values")?));
    }
    let mk = match &mask {
        Some(a) => Some(slice1(a, "mask")?),
        None => None,
    };
    let args = (nside, &profiles[..], mk, &thr[..], device);
    with_float!(map, a => masked_run(py, &a, args))
}

/// Tabulated kernel profile (theta, values) of a Gaussian (`fwhm`, radians) or a beam window,
/// truncated where |K| < tol·K(0).
#[pyfunction]
#[pyo3(signature = (fwhm=None, beam_window=None, tol=1e-5))]
fn _kernel_profile<'py>(
    py: Python<'py>,
    fwhm: Option<f64>,
    beam_window: Option<PyReadonlyArray1<'py, f64>>,
    tol: f64,
) -> PyResult<ProfilePair<'py>> {
    let p = match (&fwhm, &beam_window) {
        (Some(f), None) => {
            let f = *f;
            compute(py, move || profile::gaussian(f, tol))?
        }
        (None, Some(b)) => {
            let b = slice1(b, "beam_window")?;
            compute(py, || profile::from_window(b, tol))?
        }
        _ => {
            return Err(crate::py::errors::value_err(
                "give exactly one of fwhm and beam_window",
            ))
        }
    };
    Ok((p.theta.into_pyarray(py), p.values.into_pyarray(py)))
}

/// Legendre window b_l (l = 0 … lmax) of a tabulated profile: 2π ∫ K P_l(cos θ) sin θ dθ.
#[pyfunction]
fn _profile_window<'py>(
    py: Python<'py>,
    theta: PyReadonlyArray1<'py, f64>,
    values: PyReadonlyArray1<'py, f64>,
    lmax: usize,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (t, v) = (slice1(&theta, "theta")?, slice1(&values, "values")?);
    let w = compute(py, || profile::window_of(t, v, lmax))?;
    Ok(w.into_pyarray(py))
}

/// The ring plan of (nside, profile), built without the GIL.
fn ring_plan(
    py: Python<'_>,
    nside: usize,
    theta: &PyReadonlyArray1<'_, f64>,
    values: &PyReadonlyArray1<'_, f64>,
) -> PyResult<smooth::RingPlan> {
    let (t, v) = (slice1(theta, "theta")?, slice1(values, "values")?);
    compute(py, || {
        smooth::RingPlan::new(nside, smooth::Table::new(t, v, 0)?)
    })
}

/// The ring plan's shape and cost for (nside, profile): lengths, support sizes, flops, bytes.
#[pyfunction]
fn _ring_plan_info<'py>(
    py: Python<'py>,
    nside: usize,
    theta: PyReadonlyArray1<'py, f64>,
    values: PyReadonlyArray1<'py, f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let plan = ring_plan(py, nside, &theta, &values)?;
    let c = plan.cost();
    let d = PyDict::new(py);
    d.set_item("theta_cut", plan.table.theta_cut)?;
    d.set_item("extent", plan.extent)?;
    let lens: Vec<usize> = plan.outputs.iter().map(|o| o.len).collect();
    let inputs: Vec<usize> = plan.outputs.iter().map(|o| o.hi + 1 - o.lo).collect();
    d.set_item("lengths", lens.into_pyarray(py))?;
    d.set_item("inputs", inputs.into_pyarray(py))?;
    d.set_item("kernel_ffts", c.kernel_ffts)?;
    d.set_item("kernel_evals", c.kernel_evals)?;
    d.set_item("fft_flops", c.fft_flops)?;
    d.set_item("mac_flops", c.mac_flops)?;
    d.set_item("cos_flops", c.cos_flops)?;
    d.set_item("bytes", c.bytes)?;
    d.set_item("bytes_streamed", c.bytes_streamed)?;
    Ok(d)
}

fn missing_run<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    map: &numpy::PyReadonlyArrayDyn<'py, T>,
) -> PyResult<Option<Bound<'py, PyArrayDyn<bool>>>> {
    let (shape, m) = parts(map, "m")?;
    let out = crate::py::arrays::zeros::<bool>(py, &shape[..])?;
    let n = {
        let mut rw = out.readwrite();
        let dst = rw.as_slice_mut().expect("new arrays are contiguous");
        compute(py, || Ok(smooth::missing(m, dst)))?
    };
    Ok((n > 0).then_some(out))
}

/// Boolean mask of the missing pixels of `m` (UNSEEN by healpy's test, NaN, ±inf), or None
/// when there are none.
#[pyfunction]
fn _smooth_missing<'py>(
    py: Python<'py>,
    m: FloatArray<'py>,
) -> PyResult<Option<Bound<'py, PyArrayDyn<bool>>>> {
    with_float!(m, a => missing_run(py, &a))
}

/// GPU bytes the ring method needs at `nside` for `nmaps` maps at once, besides the kernel
/// samples (which are chunked into what is left).
///
/// `blocked=True`: the least the engine runs in where the whole map does not fit (ring blocks,
/// `smooth::cuda::blocked::min_bytes`; the same for any nmaps: the maps go one at a time).
#[pyfunction]
#[pyo3(signature = (nside, nmaps=1, blocked=false))]
fn _ring_gpu_bytes(nside: usize, nmaps: usize, blocked: bool) -> usize {
    if blocked {
        smooth::cuda::blocked::min_bytes(nside)
    } else {
        smooth::cuda::device_bytes(nside, nmaps)
    }
}

/// A new uninitialised float64 array of `shape` for a call's output on `device`: on a GPU a
/// large one is a pooled page-locked block (`backend::cuda::host_pool`), as the core calls'
/// own outputs are; a HostMemoryError naming the bytes when it cannot be had.
#[pyfunction]
#[pyo3(signature = (shape, device=None))]
fn _output_empty<'py>(
    py: Python<'py>,
    shape: Vec<usize>,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let dev = crate::backend::resolve(device).map_err(to_pyerr)?;
    empty_for::<f64>(py, &shape, dev)
}

/// Bytes a GPU call may use on `device` now (`Gpu::budget`: 80% of the free memory, at most
/// SKYCONV_GPU_MEMORY_LIMIT); None on the CPU.
#[pyfunction]
#[pyo3(signature = (device=None))]
fn _gpu_budget(device: Option<&str>) -> PyResult<Option<usize>> {
    match crate::backend::resolve(device).map_err(to_pyerr)? {
        crate::backend::Device::Cpu => Ok(None),
        crate::backend::Device::Cuda(o) => {
            crate::backend::cuda::on(o, || crate::backend::cuda::gpu().and_then(|g| g.budget()))
                .map(Some)
                .map_err(to_pyerr)
        }
    }
}

/// The device the ring method runs on for `device` (DeviceError for "cuda" without a GPU).
#[pyfunction]
#[pyo3(signature = (device=None))]
fn _ring_device(device: Option<&str>) -> PyResult<&'static str> {
    Ok(crate::backend::resolve(device).map_err(to_pyerr)?.name())
}

/// The chunks as the host emulation reads them: six i64 a chunk (entries, tiles, taps; each a
/// [first, end) pair).
fn chunk_rows(chunks: &[smooth::cuda::tables::Chunk]) -> Vec<i64> {
    chunks
        .iter()
        .flat_map(|c| {
            [
                c.entries.0,
                c.entries.1,
                c.tiles.0,
                c.tiles.1,
                c.taps.0,
                c.taps.1,
            ]
        })
        .map(|v| v as i64)
        .collect()
}

/// The CUDA ring engine's ring blocks of at most `cap` pixels for (nside, profile), as the
/// blocked engine runs them (for the host emulation in the tests): per block a dict of its
/// pairs (p0, p1), input and output ring ranges (inclusive), packed `first` table, pixels,
/// phase tiles (t0, t1) and chunks (at `max_taps` samples, flattened as in
/// `_ring_cuda_tables`).
#[pyfunction]
fn _ring_cuda_blocks<'py>(
    py: Python<'py>,
    nside: usize,
    theta: PyReadonlyArray1<'py, f64>,
    values: PyReadonlyArray1<'py, f64>,
    cap: usize,
    max_taps: usize,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    use smooth::cuda::blocks;
    let plan = ring_plan(py, nside, &theta, &values)?;
    let (tabs, bl) = compute(py, || {
        let tabs = smooth::cuda::tables::Tables::new(&plan)?;
        Ok((tabs, blocks::blocks(&plan, cap.max(1))))
    })?;
    let mut out = Vec::with_capacity(bl.len());
    for b in bl {
        let d = PyDict::new(py);
        let (q0, q1) = blocks::phase_pairs(&plan, &b);
        let chunks = tabs
            .chunks_between(b.pairs.0, b.pairs.1, max_taps, usize::MAX)
            .map_err(to_pyerr)?;
        let ch = chunk_rows(&chunks);
        d.set_item("pairs", b.pairs)?;
        d.set_item("ins", b.ins.clone())?;
        d.set_item("outs", b.outs.clone())?;
        d.set_item("pixels", b.pixels)?;
        d.set_item("phase_tiles", tabs.tiles_of(q0, q1))?;
        d.set_item("first", b.first.into_pyarray(py))?;
        d.set_item("chunks", ch.into_pyarray(py))?;
        out.push(d);
    }
    Ok(out)
}

/// The CUDA ring engine's tables for (nside, profile), chunked at `max_taps` kernel samples
/// (for the host emulation of kernels/smooth.cu in the tests).
#[pyfunction]
fn _ring_cuda_tables<'py>(
    py: Python<'py>,
    nside: usize,
    theta: PyReadonlyArray1<'py, f64>,
    values: PyReadonlyArray1<'py, f64>,
    max_taps: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let plan = ring_plan(py, nside, &theta, &values)?;
    let (tabs, chunks) = compute(py, || {
        let tabs = smooth::cuda::tables::Tables::new(&plan)?;
        let chunks = tabs.chunks(max_taps, usize::MAX)?;
        Ok((tabs, chunks))
    })?;
    let d = PyDict::new(py);
    let ints64 = [
        ("first", tabs.first),
        ("pairs", tabs.pairs),
        ("tap_off", tabs.tap_off),
    ];
    for (name, a) in ints64 {
        d.set_item(name, a.into_pyarray(py))?;
    }
    let ints32 = [
        ("nphi", tabs.nphi),
        ("shifted", tabs.shifted),
        ("tap_n", tabs.tap_n),
        ("flags", tabs.flags),
        ("len", tabs.len),
        ("tile_pair", tabs.tile_pair),
        ("tile_k0", tabs.tile_k0),
    ];
    for (name, a) in ints32 {
        d.set_item(name, a.into_pyarray(py))?;
    }
    for (name, a) in [
        ("scale", tabs.scale),
        ("factor", tabs.factor),
        ("ab", tabs.ab),
        ("coef", tabs.coef),
    ] {
        d.set_item(name, a.into_pyarray(py))?;
    }
    d.set_item("inv_h", plan.table.inv_h)?;
    d.set_item("u2_cut", plan.table.u2_cut)?;
    let ch = chunk_rows(&chunks);
    d.set_item("chunks", ch.into_pyarray(py))?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_ring_device, m)?)?;
    m.add_function(wrap_pyfunction!(_gpu_budget, m)?)?;
    m.add_function(wrap_pyfunction!(_ring_gpu_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(_output_empty, m)?)?;
    m.add_function(wrap_pyfunction!(_smooth_missing, m)?)?;
    m.add_function(wrap_pyfunction!(_smooth_ring, m)?)?;
    m.add_function(wrap_pyfunction!(_smooth_ring_beams, m)?)?;
    m.add_function(wrap_pyfunction!(_smooth_ring_masked, m)?)?;
    m.add_function(wrap_pyfunction!(_kernel_profile, m)?)?;
    m.add_function(wrap_pyfunction!(_profile_window, m)?)?;
    m.add_function(wrap_pyfunction!(_ring_plan_info, m)?)?;
    m.add_function(wrap_pyfunction!(_ring_cuda_tables, m)?)?;
    m.add_function(wrap_pyfunction!(_ring_cuda_blocks, m)?)?;
    Ok(())
}
