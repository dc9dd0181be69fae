//! Smooth-and-Clip and noise statistics bindings (skyconv.cube, skyconv.stats,
//! skyconv.compat.sofia). Argument checking is done in Python; this only translates.

use numpy::{
    IntoPyArray, PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyReadwriteArrayDyn,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::backend;
use crate::cube::filters::Mode;
use crate::cube::scfind::{
    self, kernels, BlockInput, ClipCandidates, Keep, Kernel, NoiseRule, Plan, Replace, Statistic,
};
use crate::cube::stats::noise::{
    fit_gaussian, gauss_about_zero, histogram, mad_about, std_about, Fitter, MAD_TO_STD,
};
use crate::cube::stats::sample::{gather, Sampling};
use crate::cube::stats::sofia1::{sofia1_rms, Sofia1Mode, Sofia1Rms};
use crate::cube::stats::sofia2::Walk;
use crate::cube::stats::Range;
use crate::error::{Error, Result};
use crate::py::arrays::{data_mut, empty, parts, with_float, FloatArray};
use crate::py::errors::{compute, compute_in, compute_on, to_pyerr, Call};
use crate::real::Real;

fn range(s: &str) -> Result<Range> {
    Ok(match s {
        "full" | "all" => Range::All,
        "negative" => Range::Negative,
        "positive" => Range::Positive,
        _ => return Err(Error::value(format!("unknown flux range {s:?}"))),
    })
}

fn sampling(kind: &str, n: usize) -> Result<Sampling> {
    Ok(match kind {
        "cadence" => Sampling::Cadence(n.max(1)),
        "stride" => Sampling::Stride(n.max(1)),
        "backward" => Sampling::Backward(n.max(1)),
        _ => return Err(Error::value(format!("unknown sampling {kind:?}"))),
    })
}

fn shape3(shape: &[usize]) -> Result<[usize; 3]> {
    match *shape {
        [x] => Ok([1, 1, x]),
        [y, x] => Ok([1, y, x]),
        [z, y, x] => Ok([z, y, x]),
        _ => Err(Error::shape("expected an array of 1 to 3 dimensions")),
    }
}

/// (kind, sofia1 mode) → noise rule. kind: "sofia2:{std,mad,gauss}" or "sofia1:{negative,...}".
fn noise_rule(
    kind: &str,
    range_s: &str,
    two_pass: bool,
    single: bool,
    size: usize,
) -> Result<NoiseRule> {
    let range = range(range_s)?;
    let (family, stat) = kind
        .split_once(':')
        .ok_or_else(|| Error::value(format!("unknown statistic {kind:?}")))?;
    Ok(match (family, stat) {
        ("sofia2", s) => NoiseRule::Sofia2 {
            stat: match s {
                "std" => Statistic::Std,
                "mad" => Statistic::Mad,
                "gauss" => Statistic::Gauss,
                _ => return Err(Error::value(format!("unknown statistic {s:?}"))),
            },
            range,
        },
        ("sofia2x", s) => NoiseRule::Sofia2Exact {
            stat: match s {
                "std" => Statistic::Std,
                "mad" => Statistic::Mad,
                "gauss" => Statistic::Gauss,
                _ => return Err(Error::value(format!("unknown statistic {s:?}"))),
            },
            range,
            // set from the sampling by the caller
            walk: Walk::new(size, 1),
            single,
        },
        ("sofia1", s) => NoiseRule::Sofia1(Sofia1Rms {
            mode: match s {
                "negative" => Sofia1Mode::Negative,
                "gauss" => Sofia1Mode::Gauss,
                "mad" => Sofia1Mode::Mad,
                "std" => Sofia1Mode::Std,
                _ => return Err(Error::value(format!("unknown rmsMode {s:?}"))),
            },
            range,
            two_pass,
            single,
            size,
        }),
        _ => return Err(Error::value(format!("unknown statistic {kind:?}"))),
    })
}

/// A Python callable (x, y, a0, s0) -> (a, s) as a Fitter.
fn py_fitter(f: Option<Py<PyAny>>) -> Option<Fitter> {
    f.map(|f| {
        Fitter(std::sync::Arc::new(
            move |x: &[f64], y: &[f64], a0: f64, s0: f64| {
                Python::attach(|py| {
                    f.bind(py)
                        .call1((x.to_vec(), y.to_vec(), a0, s0))
                        .and_then(|r| r.extract::<(f64, f64)>())
                        .map_err(|e| Error::value(format!("Gaussian fit failed: {e}")))
                })
            },
        ))
    })
}

/// (spatial kind, σy, σx, spectral kind, z, use_rms0) → kernel.
type KernelSpec = (String, f64, f64, String, f64, bool);

/// `e` with the kernel it came from named (the user gave sizes, not Gaussian sigmas).
fn in_kernel(which: &str, size: f64, e: Error) -> Error {
    match e {
        Error::Value(m) => Error::Value(format!("{which} kernel of size {size}: {m}")),
        e => e,
    }
}

fn kernel(spec: &KernelSpec) -> Result<Kernel> {
    let (sk, sy, sx, zk, z, use_rms0) = spec;
    let rule = match sk.as_str() {
        "gaussian" => kernels::SpatialRule::Gaussian,
        "boxcar_approx" => kernels::SpatialRule::BoxcarClosestSigma,
        "boxcar" => kernels::SpatialRule::BoxcarSofia2,
        _ => return Err(Error::value(format!("unknown spatial kernel {sk:?}"))),
    };
    let zf = match zk.as_str() {
        "none" => None,
        "boxcar" => {
            if z.is_nan() || *z < 0.0 || z.fract() != 0.0 {
                return Err(Error::value(format!(
                    "boxcar width must be a whole number >= 0, got {z}"
                )));
            }
            kernels::spectral_boxcar(*z as usize).map_err(|e| in_kernel("spectral", *z, e))?
        }
        "gaussian" => kernels::spectral_gauss(*z).map_err(|e| in_kernel("spectral", *z, e))?,
        _ => return Err(Error::value(format!("unknown spectral kernel {zk:?}"))),
    };
    Ok(Kernel {
        y: kernels::spatial_by(*sy, rule).map_err(|e| in_kernel("spatial (y)", *sy, e))?,
        x: kernels::spatial_by(*sx, rule).map_err(|e| in_kernel("spatial (x)", *sx, e))?,
        z: zf,
        use_rms0: *use_rms0,
    })
}

#[allow(clippy::too_many_arguments)]
fn scfind_typed<T: Real + numpy::Element>(
    py: Python<'_>,
    cube: &PyReadonlyArrayDyn<'_, T>,
    mask: &mut PyReadwriteArrayDyn<'_, u8>,
    kernels: &[KernelSpec],
    mode: &str,
    threshold: f64,
    inclusive: bool,
    replace: (&str, f64),
    noise: (&str, &str, bool),
    samp: (&str, usize),
    slab_planes: Option<usize>,
    progress: Option<Py<PyAny>>,
    fitter: Option<Py<PyAny>>,
    device: Option<&str>,
    exact: bool,
    detected: bool,
) -> PyResult<(f64, Vec<f64>)> {
    let (shape, data) = parts(cube, "cube")?;
    if mask.shape() != shape.as_slice() {
        return Err(to_pyerr(Error::shape("mask must have the cube's shape")));
    }
    let shape = shape3(&shape).map_err(to_pyerr)?;
    let size: usize = shape.iter().product();
    let single = std::mem::size_of::<T>() == 4;
    let build = || -> Result<Plan> {
        Ok(Plan {
            shape,
            kernels: kernels.iter().map(kernel).collect::<Result<_>>()?,
            mode: Mode::parse(mode)?,
            threshold,
            inclusive,
            replace: match replace.0 {
                "none" => Replace::None,
                "sign" => Replace::Sign(replace.1),
                "copysign" => Replace::CopySign(replace.1),
                r => return Err(Error::value(format!("unknown replacement {r:?}"))),
            },
            noise: match noise_rule(noise.0, noise.1, noise.2, single, size)? {
                NoiseRule::Sofia2Exact {
                    stat,
                    range,
                    single,
                    ..
                } => NoiseRule::Sofia2Exact {
                    stat,
                    range,
                    walk: Walk::new(size, samp.1),
                    single,
                },
                rule => rule,
            },
            sampling: sampling(samp.0, samp.1)?,
            exact,
            fitter: py_fitter(fitter),
            slab_planes,
            detected,
        })
    };
    let plan = build().map_err(to_pyerr)?;
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    let m = mask
        .as_slice_mut()
        .map_err(|_| crate::py::errors::value_err("mask must be C-contiguous"))?;
    // An exception raised by the progress callback ends the call and is re-raised unchanged
    // (the same rule as every other function that takes a callback).
    let call = Call::new();
    let report = |k: usize, rms: f64| {
        if let Some(cb) = &progress {
            let _ = call.report(cb, (k, rms));
        }
    };
    let out = compute_in(py, &call, dev, || scfind::run(dev, data, &plan, m, &report))?;
    Ok((out.rms0, out.rms))
}

/// The finder: fills `mask` (uint8, cube's shape) with MASKED|DETECTED bits (MASKED alone
/// with `detected=False`); returns (rms of the original cube, rms of each smoothed cube).
#[pyfunction]
#[pyo3(signature = (cube, mask, kernels, mode, threshold, inclusive, replace, noise, sampling,
                    slab_planes=None, progress=None, fitter=None, device=None, exact=false,
                    detected=true))]
#[allow(clippy::too_many_arguments)]
fn _scfind<'py>(
    py: Python<'py>,
    cube: FloatArray<'py>,
    mut mask: PyReadwriteArrayDyn<'py, u8>,
    kernels: Vec<KernelSpec>,
    mode: &str,
    threshold: f64,
    inclusive: bool,
    replace: (String, f64),
    noise: (String, String, bool),
    sampling: (String, usize),
    slab_planes: Option<usize>,
    progress: Option<Py<PyAny>>,
    fitter: Option<Py<PyAny>>,
    device: Option<&str>,
    exact: bool,
    detected: bool,
) -> PyResult<(f64, Vec<f64>)> {
    let rep = (replace.0.as_str(), replace.1);
    let noi = (noise.0.as_str(), noise.1.as_str(), noise.2);
    let sam = (sampling.0.as_str(), sampling.1);
    with_float!(cube, a => scfind_typed(
        py,
        &a,
        &mut mask,
        &kernels,
        mode,
        threshold,
        inclusive,
        rep,
        noi,
        sam,
        slab_planes,
        progress,
        fitter,
        device,
        exact,
        detected,
    ))
}

#[allow(clippy::too_many_arguments)]
fn stat_typed<T: Real + numpy::Element>(
    py: Python<'_>,
    a: &PyReadonlyArrayDyn<'_, T>,
    what: &str,
    center: f64,
    range_s: &str,
    samp: (&str, usize),
    clip: Option<f64>,
    two_pass: bool,
    fitter: Option<Py<PyAny>>,
) -> PyResult<Option<f64>> {
    let (shape, data) = parts(a, "data")?;
    let fitter = py_fitter(fitter);
    let shape = shape3(&shape).map_err(to_pyerr)?;
    let single = std::mem::size_of::<T>() == 4;
    compute(py, || {
        let r = range(range_s)?;
        let s = sampling(samp.0, samp.1)?;
        let samples = gather(data, shape, s);
        Ok(match what {
            "std" => std_about(&samples, center, r, clip),
            "mad" => mad_about(&samples, center, r, clip),
            "sigma_mad" => mad_about(&samples, center, r, clip).map(|m| MAD_TO_STD * m),
            "gauss" => gauss_about_zero(&samples, r)?,
            w if w.starts_with("sofia1:") => {
                let rule = noise_rule(w, range_s, two_pass, single, data.len())?;
                let NoiseRule::Sofia1(p) = rule else {
                    unreachable!()
                };
                let ext = p
                    .needs_extremes()
                    .then(|| scfind::extremes_of(data).unwrap_or((f64::NAN, f64::NAN)));
                Some(sofia1_rms(&samples, ext, &p, fitter.as_ref())?)
            }
            _ => return Err(Error::value(format!("unknown statistic {what:?}"))),
        })
    })
}

/// One noise statistic of `data` on a sample; None when no value counts.
#[pyfunction]
#[pyo3(signature = (data, what, center, flux_range, sampling, clip=None, two_pass=false,
                    fitter=None))]
#[allow(clippy::too_many_arguments)]
fn _stat(
    py: Python<'_>,
    data: FloatArray<'_>,
    what: &str,
    center: f64,
    flux_range: &str,
    sampling: (String, usize),
    clip: Option<f64>,
    two_pass: bool,
    fitter: Option<Py<PyAny>>,
) -> PyResult<Option<f64>> {
    let s = (sampling.0.as_str(), sampling.1);
    with_float!(data, a => stat_typed(py, &a, what, center, flux_range, s, clip, two_pass, fitter))
}

/// NumPy-rule histogram counts of the finite values of `data` in bins `edges`.
#[pyfunction]
fn _histogram(py: Python<'_>, data: FloatArray<'_>, edges: Vec<f64>) -> PyResult<Vec<u64>> {
    fn go<T: Real + numpy::Element>(
        py: Python<'_>,
        a: &PyReadonlyArrayDyn<'_, T>,
        e: &[f64],
    ) -> PyResult<Vec<u64>> {
        let (shape, data) = parts(a, "data")?;
        let n: usize = shape.iter().product();
        compute(py, || {
            Ok(histogram(&gather(data, [1, 1, n], Sampling::Cadence(1)), e))
        })
    }
    with_float!(data, a => go(py, &a, &edges))
}

/// Least-squares fit of A·exp(−x²/2σ²); returns (A, σ).
#[pyfunction]
fn _fit_gaussian(x: Vec<f64>, y: Vec<f64>, a0: f64, s0: f64) -> PyResult<(f64, f64)> {
    fit_gaussian(&x, &y, a0, s0).map_err(to_pyerr)
}

/// SoFiA 2's sampling cadence for an array of shape (z, y, x).
#[pyfunction]
fn _sofia2_cadence(shape: Vec<usize>) -> PyResult<usize> {
    match Sampling::sofia2(shape3(&shape).map_err(to_pyerr)?) {
        Sampling::Cadence(c) | Sampling::Backward(c) => Ok(c),
        Sampling::Stride(s) => Ok(s),
    }
}

// ---------------------------------------------------------------- stages (skyconv._dask.cube)

fn replace_rule(kind: &str, factor: f64) -> Result<Replace> {
    Ok(match kind {
        "none" => Replace::None,
        "sign" => Replace::Sign(factor),
        "copysign" => Replace::CopySign(factor),
        r => return Err(Error::value(format!("unknown replacement {r:?}"))),
    })
}

/// A one-kernel plan for the stage functions (noise, threshold and sampling unused).
fn stage_plan(
    shape: &[usize],
    spec: &KernelSpec,
    mode: &str,
    replace: (&str, f64),
    exact: bool,
) -> Result<Plan> {
    let plan = Plan {
        shape: shape3(shape)?,
        kernels: vec![kernel(spec)?],
        mode: Mode::parse(mode)?,
        threshold: 0.0,
        inclusive: false,
        replace: replace_rule(replace.0, replace.1)?,
        noise: NoiseRule::Sofia2 {
            stat: Statistic::Std,
            range: Range::All,
        },
        sampling: Sampling::Cadence(1),
        fitter: None,
        exact,
        slab_planes: None,
        detected: true,
    };
    if plan.exact && plan.mode != Mode::Constant {
        return Err(Error::value(
            "SoFiA-2's boxcar arithmetic pads with zeros: edge mode must be 'constant'",
        ));
    }
    Ok(plan)
}

#[allow(clippy::too_many_arguments)]
fn stage_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: &PyReadonlyArrayDyn<'py, T>,
    mask: &PyReadonlyArrayDyn<'py, u8>,
    spec: &KernelSpec,
    mode: &str,
    replace: (&str, f64),
    rms0: f64,
    exact: bool,
    spatial: bool,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let (shape, data) = parts(a, "cube")?;
    let (mshape, m) = parts(mask, "mask")?;
    if mshape != shape {
        return Err(to_pyerr(Error::shape("mask must have the cube's shape")));
    }
    let plan = stage_plan(&shape, spec, mode, replace, exact).map_err(to_pyerr)?;
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    let out = empty::<T>(py, &shape)?;
    let dst = data_mut(&out);
    compute_on(py, dev, || {
        let v = if spatial {
            scfind::spatial_stage(dev, data, m, &plan, rms0)?
        } else {
            scfind::spectral_stage(dev, data, m, &plan)?
        };
        dst.copy_from_slice(&v);
        Ok(())
    })?;
    Ok(out)
}

/// S+C stage 1 of one kernel on `device` ("cpu", "cuda", "cuda:N"; None: the default rule):
/// the cube (whole (y, x) planes) prepared with `mask` (bit 0 = replace) and `rms0`, smoothed
/// spatially, in the cube's dtype.
#[pyfunction]
#[pyo3(signature = (cube, mask, kernel, mode, replace, rms0, exact=false, device=None))]
#[allow(clippy::too_many_arguments)]
fn _scfind_spatial<'py>(
    py: Python<'py>,
    cube: FloatArray<'py>,
    mask: PyReadonlyArrayDyn<'py, u8>,
    kernel: KernelSpec,
    mode: &str,
    replace: (String, f64),
    rms0: f64,
    exact: bool,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let rep = (replace.0.as_str(), replace.1);
    Ok(with_float!(cube, a => stage_typed(
        py, &a, &mask, &kernel, mode, rep, rms0, exact, true, device
    )?
    .into_any()))
}

/// S+C stage 2 of one kernel on `device`: the spectral pass over `s` (whole z lines), rounded
/// to the dtype, NaN where `mask` has bit 7 (blank voxel).
#[pyfunction]
#[pyo3(signature = (s, mask, kernel, mode, exact=false, device=None))]
fn _scfind_spectral<'py>(
    py: Python<'py>,
    s: FloatArray<'py>,
    mask: PyReadonlyArrayDyn<'py, u8>,
    kernel: KernelSpec,
    mode: &str,
    exact: bool,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(with_float!(s, a => stage_typed(
        py, &a, &mask, &kernel, mode, ("none", 0.0), 0.0, exact, false, device
    )?
    .into_any()))
}

fn block_input(s: &str) -> Result<BlockInput> {
    Ok(match s {
        "raw" => BlockInput::Raw,
        "cube" => BlockInput::Cube,
        "smoothed" => BlockInput::Smoothed,
        _ => {
            return Err(Error::value(format!(
                "input must be 'raw', 'cube' or 'smoothed', got {s:?}"
            )))
        }
    })
}

/// A block's sample part: (slots, values, extremes, the block's W if kept).
type BlockSampleOut<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<f64>>,
    Option<(f64, f64)>,
    Option<Bound<'py, PyAny>>,
);

/// Arguments shared by the block passes, after the arrays.
struct BlockArgs<'a> {
    spec: &'a KernelSpec,
    mode: &'a str,
    replace: (&'a str, f64),
    rms0: f64,
    input: &'a str,
    exact: bool,
    device: Option<&'a str>,
}

impl<'a> BlockArgs<'a> {
    /// A z-slab of the spatial stage's planes (the slab pass's sample and clip calls): nothing
    /// replaced, input "smoothed".
    fn smoothed_slab(
        spec: &'a KernelSpec,
        mode: &'a str,
        exact: bool,
        device: Option<&'a str>,
    ) -> Self {
        BlockArgs {
            spec,
            mode,
            replace: ("none", 0.0),
            rms0: 0.0,
            input: "smoothed",
            exact,
            device,
        }
    }
}

/// The block's plan, its data and mask slices, input kind and device.
type BlockSetup<'a, T> = (Plan, &'a [T], &'a [u8], BlockInput, backend::Device);

fn block_setup<'a, T: Real + numpy::Element>(
    a: &'a PyReadonlyArrayDyn<'_, T>,
    mask: &'a PyReadonlyArrayDyn<'_, u8>,
    args: &BlockArgs<'_>,
) -> PyResult<BlockSetup<'a, T>> {
    let (shape, data) = parts(a, "block")?;
    let (mshape, m) = parts(mask, "mask")?;
    if mshape != shape {
        return Err(to_pyerr(Error::shape("mask must have the block's shape")));
    }
    let plan =
        stage_plan(&shape, args.spec, args.mode, args.replace, args.exact).map_err(to_pyerr)?;
    let input = block_input(args.input).map_err(to_pyerr)?;
    let dev = backend::resolve(args.device).map_err(to_pyerr)?;
    Ok((plan, data, m, input, dev))
}

#[allow(clippy::too_many_arguments)]
fn block_sample_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: &PyReadonlyArrayDyn<'py, T>,
    mask: &PyReadonlyArrayDyn<'py, u8>,
    args: &BlockArgs<'_>,
    start: &[usize],
    shape: &[usize],
    samp: (&str, usize),
    extremes: bool,
    keep: bool,
) -> PyResult<BlockSampleOut<'py>> {
    let (mut plan, data, m, input, dev) = block_setup(a, mask, args)?;
    plan.sampling = sampling(samp.0, samp.1).map_err(to_pyerr)?;
    let global = shape3(shape).map_err(to_pyerr)?;
    let start: [usize; 3] = match *start {
        [z, y, x] => [z, y, x],
        _ => {
            return Err(to_pyerr(Error::shape(
                "start must have 3 entries (z, y, x)",
            )))
        }
    };
    let out = compute_on(py, dev, || {
        scfind::block_sample(
            dev, data, m, &plan, args.rms0, input, global, start, extremes, keep,
        )
    })?;
    let slots: Vec<i64> = out.slots.iter().map(|&k| k as i64).collect();
    let w = match out.w {
        Some(w) => Some(w.into_pyarray(py).reshape(mask.shape())?.into_any()),
        None => None,
    };
    Ok((
        slots.into_pyarray(py),
        out.values.into_pyarray(py),
        out.extremes,
        w,
    ))
}

/// S+C for Dask, one task of a kernel's noise: W of the block (`input` "raw": the cube itself;
/// "cube": prepared and smoothed by both stages of `kernel` — whole planes if it smooths
/// spatially, whole z lines if spectrally; "smoothed": the spatial stage's output, the
/// spectral stage only) at the positions of `sampling` over the whole cube `shape` that lie in
/// the block at `start`: (slots, values, (min, max) of W or None, W or None). W (the block's
/// shape and dtype, NaN where blank) only with `keep`, for `_scfind_block_clip` with input
/// "raw"; else no W array is made.
#[pyfunction]
#[pyo3(signature = (x, mask, kernel, mode, replace, rms0, input, start, shape, sampling,
                    extremes, exact=false, device=None, keep=false))]
#[allow(clippy::too_many_arguments)]
fn _scfind_block_sample<'py>(
    py: Python<'py>,
    x: FloatArray<'py>,
    mask: PyReadonlyArrayDyn<'py, u8>,
    kernel: KernelSpec,
    mode: &str,
    replace: (String, f64),
    rms0: f64,
    input: &str,
    start: Vec<usize>,
    shape: Vec<usize>,
    sampling: (String, usize),
    extremes: bool,
    exact: bool,
    device: Option<&str>,
    keep: bool,
) -> PyResult<BlockSampleOut<'py>> {
    let args = BlockArgs {
        spec: &kernel,
        mode,
        replace: (replace.0.as_str(), replace.1),
        rms0,
        input,
        exact,
        device,
    };
    let samp = (sampling.0.as_str(), sampling.1);
    with_float!(x, a => block_sample_typed(
        py, &a, &mask, &args, &start, &shape, samp, extremes, keep
    ))
}

/// A slab's sample part and the carry for the slab below.
type SlabSampleOut<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<f64>>,
    Option<(f64, f64)>,
    Option<Bound<'py, PyAny>>,
    Bound<'py, PyAny>,
);

/// The clip candidates as Python holds them: (floor, ends, idx, val), one-dimensional arrays
/// of float64, uint64, uint64, float64 (`ClipCandidates`).
type CandidateArrays<'py> = (
    PyReadonlyArrayDyn<'py, f64>,
    PyReadonlyArrayDyn<'py, usize>,
    PyReadonlyArrayDyn<'py, usize>,
    PyReadonlyArrayDyn<'py, f64>,
);

fn candidates_to_py<'py>(py: Python<'py>, c: ClipCandidates) -> PyResult<Bound<'py, PyAny>> {
    let arrays = (
        c.floor.into_pyarray(py),
        c.ends.into_pyarray(py),
        c.idx.into_pyarray(py),
        c.val.into_pyarray(py),
    );
    Ok(arrays.into_pyobject(py)?.into_any())
}

fn candidates_from_py(c: &CandidateArrays<'_>) -> PyResult<ClipCandidates> {
    Ok(ClipCandidates {
        floor: parts(&c.0, "candidates' floor")?.1.to_vec(),
        ends: parts(&c.1, "candidates' ends")?.1.to_vec(),
        idx: parts(&c.2, "candidates' idx")?.1.to_vec(),
        val: parts(&c.3, "candidates' val")?.1.to_vec(),
    })
}

#[allow(clippy::too_many_arguments)]
fn slab_sample_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: &PyReadonlyArrayDyn<'py, T>,
    mask: &PyReadonlyArrayDyn<'py, u8>,
    args: &BlockArgs<'_>,
    below: usize,
    carry: Option<&Bound<'py, PyAny>>,
    start: (usize, usize),
    shape: &[usize],
    samp: (&str, usize),
    flags: (bool, Keep),
) -> PyResult<SlabSampleOut<'py>> {
    let (_, data) = parts(a, "s")?;
    let (mshape, m) = parts(mask, "mask")?;
    let mut plan =
        stage_plan(&mshape, args.spec, args.mode, args.replace, args.exact).map_err(to_pyerr)?;
    plan.sampling = sampling(samp.0, samp.1).map_err(to_pyerr)?;
    let global = shape3(shape).map_err(to_pyerr)?;
    let dev = backend::resolve(args.device).map_err(to_pyerr)?;
    let carry: Option<PyReadonlyArrayDyn<'py, T>> = carry.map(|c| c.extract()).transpose()?;
    let cdata = match &carry {
        Some(c) => Some(parts(c, "carry")?.1),
        None => None,
    };
    let (out, next) = compute_on(py, dev, || {
        scfind::slab_sample(
            dev, data, m, &plan, global, start.0, start.1, below, cdata, flags.0, flags.1,
        )
    })?;
    let slots: Vec<i64> = out.slots.iter().map(|&k| k as i64).collect();
    let kept = match (out.w, out.candidates) {
        (Some(w), _) => Some(w.into_pyarray(py).reshape(mask.shape())?.into_any()),
        (None, Some(c)) => Some(candidates_to_py(py, c)?),
        (None, None) => None,
    };
    let next = next
        .into_pyarray(py)
        .reshape(&mask.shape()[1..])?
        .into_any();
    Ok((
        slots.into_pyarray(py),
        out.values.into_pyarray(py),
        out.extremes,
        kept,
        next,
    ))
}

/// S+C for Dask, one task of a kernel's noise on a z-slab (either engine; `exact`, a boxcar
/// along z of radius r): `_scfind_block_sample` with input "smoothed" for the slab at plane
/// `z0` of the whole cube `shape`, whose own planes `mask` covers, from `s`, the spatial
/// stage's planes z0 − below .. z0 + nz + above (below = min(r, z0), above = min(r + 1,
/// planes over the slab)), and `carry`, the running mean at the first plane over the slab
/// (None for the top slab) -> (slots, values, extremes, kept, the carry for the slab below,
/// one (y, x) plane in `s`'s dtype). kept: W with `keep`; with `candidates` (CPU engine) the
/// single call's clip candidates for `_scfind_slab_clip` (floor, ends, idx, val: float64,
/// uint64, uint64, float64 arrays); else None. With `y0`, the slab is the group of rows y0 ..
/// y0 + ny (`mask`'s, `s`'s and `carry`'s rows; whole rows of x) of the cube's planes.
#[pyfunction]
#[pyo3(signature = (s, mask, kernel, mode, below, carry, z0, shape, sampling, extremes,
                    exact=true, device=None, keep=false, y0=0, candidates=false))]
#[allow(clippy::too_many_arguments)]
fn _scfind_slab_sample<'py>(
    py: Python<'py>,
    s: FloatArray<'py>,
    mask: PyReadonlyArrayDyn<'py, u8>,
    kernel: KernelSpec,
    mode: &str,
    below: usize,
    carry: Option<Bound<'py, PyAny>>,
    z0: usize,
    shape: Vec<usize>,
    sampling: (String, usize),
    extremes: bool,
    exact: bool,
    device: Option<&str>,
    keep: bool,
    y0: usize,
    candidates: bool,
) -> PyResult<SlabSampleOut<'py>> {
    let args = BlockArgs::smoothed_slab(&kernel, mode, exact, device);
    let keep = match (keep, candidates) {
        (true, true) => {
            return Err(to_pyerr(Error::value(
                "keep W or the clip candidates, not both",
            )))
        }
        (true, false) => Keep::W,
        (false, true) => Keep::Candidates,
        (false, false) => Keep::Nothing,
    };
    let samp = (sampling.0.as_str(), sampling.1);
    with_float!(s, a => slab_sample_typed(
        py, &a, &mask, &args, below, carry.as_ref(), (z0, y0), &shape, samp, (extremes, keep)
    ))
}

#[allow(clippy::too_many_arguments)]
fn slab_clip_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    s: Option<&PyReadonlyArrayDyn<'py, T>>,
    mask: &PyReadonlyArrayDyn<'py, u8>,
    args: &BlockArgs<'_>,
    below: usize,
    carry: Option<&Bound<'py, PyAny>>,
    start: (usize, usize),
    shape: &[usize],
    cands: &ClipCandidates,
    level: f64,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let (mshape, m) = parts(mask, "mask")?;
    let plan =
        stage_plan(&mshape, args.spec, args.mode, args.replace, args.exact).map_err(to_pyerr)?;
    let global = shape3(shape).map_err(to_pyerr)?;
    let dev = backend::resolve(args.device).map_err(to_pyerr)?;
    let data = match s {
        Some(s) => Some(parts(s, "s")?.1),
        None => None,
    };
    let carry: Option<PyReadonlyArrayDyn<'py, T>> = carry.map(|c| c.extract()).transpose()?;
    let cdata = match &carry {
        Some(c) => Some(parts(c, "carry")?.1),
        None => None,
    };
    let out = compute_on(py, dev, || {
        scfind::slab_clip(
            dev, data, m, &plan, global, start.0, start.1, below, cdata, cands, level,
        )
    })?;
    match out {
        Some(v) => Ok(Some(v.into_pyarray(py).reshape(mask.shape())?.into_any())),
        None => Ok(None),
    }
}

/// S+C for Dask, one task's clip of a z-slab (CPU engine) from the clip candidates its
/// `_scfind_slab_sample` kept (`candidates`; `mask`, `kernel`, `mode`, `z0`, `shape`, `y0`,
/// `exact` as there): `mask` with bit 0 added where W is above `level`, decided as the single
/// call decides it — a column block whose list holds every voxel above `level` from the list,
/// any other by its spectral pass again over `s` with `below` and `carry` (the slab call's
/// own inputs: the same W bit for bit). Without `s`, None when a block needs that pass (call
/// again with `s`, `below` and `carry`).
#[pyfunction]
#[pyo3(signature = (mask, kernel, mode, level, candidates, z0, shape, y0=0, s=None, below=0,
                    carry=None, exact=true, device=None))]
#[allow(clippy::too_many_arguments)]
fn _scfind_slab_clip<'py>(
    py: Python<'py>,
    mask: PyReadonlyArrayDyn<'py, u8>,
    kernel: KernelSpec,
    mode: &str,
    level: f64,
    candidates: CandidateArrays<'py>,
    z0: usize,
    shape: Vec<usize>,
    y0: usize,
    s: Option<FloatArray<'py>>,
    below: usize,
    carry: Option<Bound<'py, PyAny>>,
    exact: bool,
    device: Option<&str>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let args = BlockArgs::smoothed_slab(&kernel, mode, exact, device);
    let cands = candidates_from_py(&candidates)?;
    let at = (z0, y0);
    match s {
        Some(s) => with_float!(s, a => slab_clip_typed(
            py, Some(&a), &mask, &args, below, carry.as_ref(), at, &shape, &cands, level
        )),
        // no spectral pass: the element type is not read
        None => slab_clip_typed::<f32>(py, None, &mask, &args, 0, None, at, &shape, &cands, level),
    }
}

fn block_clip_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: &PyReadonlyArrayDyn<'py, T>,
    mask: &PyReadonlyArrayDyn<'py, u8>,
    args: &BlockArgs<'_>,
    level: f64,
) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
    let (plan, data, m, input, dev) = block_setup(a, mask, args)?;
    let v = compute_on(py, dev, || {
        scfind::block_clip(dev, data, m, &plan, args.rms0, input, level)
    })?;
    v.into_pyarray(py).reshape(mask.shape())
}

/// S+C for Dask, one task of a kernel's clip: `mask` (bit 0 = in the mask, bit 7 = blank)
/// with bit 0 added where the block's W (as `_scfind_block_sample`, input "cube" or
/// "smoothed"; "raw": the block is W, as `_scfind_block_sample` kept it) is above `level`.
#[pyfunction]
#[pyo3(signature = (x, mask, kernel, mode, replace, rms0, input, level, exact=false,
                    device=None))]
#[allow(clippy::too_many_arguments)]
fn _scfind_block_clip<'py>(
    py: Python<'py>,
    x: FloatArray<'py>,
    mask: PyReadonlyArrayDyn<'py, u8>,
    kernel: KernelSpec,
    mode: &str,
    replace: (String, f64),
    rms0: f64,
    input: &str,
    level: f64,
    exact: bool,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let args = BlockArgs {
        spec: &kernel,
        mode,
        replace: (replace.0.as_str(), replace.1),
        rms0,
        input,
        exact,
        device,
    };
    Ok(with_float!(x, a => block_clip_typed(py, &a, &mask, &args, level)?.into_any()))
}

/// The noise rule of `_scfind` applied to a gathered sample (slot order of `sampling` over
/// `shape`) and the (nanmin, nanmax) of the whole (smoothed) cube.
#[pyfunction]
#[pyo3(signature = (samples, extremes, noise, sampling, shape, single, fitter=None))]
#[allow(clippy::too_many_arguments)]
fn _scfind_noise(
    py: Python<'_>,
    samples: PyReadonlyArrayDyn<'_, f64>,
    extremes: Option<(f64, f64)>,
    noise: (String, String, bool),
    sampling: (String, usize),
    shape: Vec<usize>,
    single: bool,
    fitter: Option<Py<PyAny>>,
) -> PyResult<f64> {
    let (_, v) = parts(&samples, "samples")?;
    let shape = shape3(&shape).map_err(to_pyerr)?;
    let size: usize = shape.iter().product();
    let fitter = py_fitter(fitter);
    let rule = match noise_rule(&noise.0, &noise.1, noise.2, single, size).map_err(to_pyerr)? {
        NoiseRule::Sofia2Exact {
            stat,
            range,
            single,
            ..
        } => NoiseRule::Sofia2Exact {
            stat,
            range,
            walk: Walk::new(size, sampling.1),
            single,
        },
        rule => rule,
    };
    let smp = self::sampling(&sampling.0, sampling.1).map_err(to_pyerr)?;
    if v.len() != smp.len(shape) {
        return Err(to_pyerr(Error::shape(format!(
            "the sample has {} values, the sampling of this shape {}",
            v.len(),
            smp.len(shape)
        ))));
    }
    let ext = rule
        .needs_extremes()
        .then(|| extremes.unwrap_or((f64::NAN, f64::NAN)));
    compute(py, || rule.measure(v, ext, fitter.as_ref()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_scfind_spatial, m)?)?;
    m.add_function(wrap_pyfunction!(_scfind_spectral, m)?)?;
    m.add_function(wrap_pyfunction!(_scfind_noise, m)?)?;
    m.add_function(wrap_pyfunction!(_scfind_block_sample, m)?)?;
    m.add_function(wrap_pyfunction!(_scfind_block_clip, m)?)?;
    m.add_function(wrap_pyfunction!(_scfind_slab_sample, m)?)?;
    m.add_function(wrap_pyfunction!(_scfind_slab_clip, m)?)?;
    m.add_function(wrap_pyfunction!(_scfind, m)?)?;
    m.add_function(wrap_pyfunction!(_stat, m)?)?;
    m.add_function(wrap_pyfunction!(_histogram, m)?)?;
    m.add_function(wrap_pyfunction!(_fit_gaussian, m)?)?;
    m.add_function(wrap_pyfunction!(_sofia2_cadence, m)?)?;
    Ok(())
}
