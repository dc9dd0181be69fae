//! À trous wavelet reconstruction (skyconv.atrous_denoise).

use numpy::PyArray1;
use pyo3::prelude::*;

use crate::backend;
use crate::cube::atrous::blocks;
use crate::cube::atrous::{self, Params, Progress, Variant, WaveletFilter, DUCHAMP_BLANK};
use crate::cube::filters::Pass;
use crate::py::arrays::{data_mut, empty, parts, with_float, FloatArray, FloatArrays};
use crate::py::errors::{compute, compute_in, compute_on, to_pyerr, value_err, Call};
use crate::py::filters::{pass_of, PassSpec};
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

/// The arrays of one block call, in the order `[c_ext or c, x, out?, w?]`.
struct BlockArrays<'a, T> {
    first: &'a [T],
    shape: Vec<usize>,
    x: &'a [T],
    out: Option<&'a [T]>,
    w: Option<&'a [T]>,
}

fn block_arrays<'a, T: numpy::Element>(
    a: &'a [numpy::PyReadonlyArrayDyn<'_, T>],
    has_out: bool,
    has_w: bool,
) -> PyResult<BlockArrays<'a, T>> {
    let (shape, first) = parts(&a[0], "c")?;
    let (_, rest) = same_size(&a[1..], "x, out and w")?;
    let mut it = rest.into_iter();
    let x = it.next().unwrap_or_default();
    let out = if has_out { it.next() } else { None };
    let w = if has_w { it.next() } else { None };
    Ok(BlockArrays {
        first,
        shape,
        x,
        out,
        w,
    })
}

/// Group `c`, `x` and the optional `out` and `w` by dtype (a TypeError when they differ).
fn block_dtype<'py>(
    c: FloatArray<'py>,
    x: FloatArray<'py>,
    out: Option<FloatArray<'py>>,
    w: Option<FloatArray<'py>>,
) -> PyResult<(FloatArrays<'py>, bool, bool)> {
    let (has_out, has_w) = (out.is_some(), w.is_some());
    let mut v = vec![c, x];
    v.extend(out);
    v.extend(w);
    Ok((
        FloatArrays::same_dtype(v, "c, x, out and w")?,
        has_out,
        has_w,
    ))
}

type Block<'py> = (
    Option<Bound<'py, PyAny>>,
    Bound<'py, PyAny>,
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, PyArray1<u64>>>,
    f64,
);

#[allow(clippy::too_many_arguments)]
fn block_scale<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: &[numpy::PyReadonlyArrayDyn<'py, T>],
    (has_out, has_w): (bool, bool),
    lo: &[usize],
    thr: f64,
    passes: &[Pass],
    device: Option<&str>,
    keep_w: bool,
    counts: bool,
) -> PyResult<Block<'py>> {
    let b = block_arrays(a, has_out, has_w)?;
    let (shape, _) = parts(&a[1], "x")?;
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    let w = if keep_w {
        Some(empty::<T>(py, &shape)?)
    } else {
        None
    };
    let c = empty::<T>(py, &shape)?;
    let out = if has_w {
        Some(empty::<T>(py, &shape)?)
    } else {
        None
    };
    let (wd, cd) = (w.as_ref().map(|w| data_mut(w)), data_mut(&c));
    let od: &mut [T] = match out.as_ref() {
        Some(o) => data_mut(o),
        None => &mut [],
    };
    let inp = blocks::ScaleIn {
        c_ext: b.first,
        ext: &b.shape,
        lo,
        shape: &shape,
        x: b.x,
        out: b.out,
        add: b.w.map(|w| (w, thr)),
        counts,
    };
    // The GPU (if any) is admitted for the smoothing alone, not the host pass.
    let smooth = compute_on(py, dev, || blocks::smooth(dev, passes, &inp))?;
    let first = compute(py, || {
        let outp = blocks::ScaleOut {
            w: wd,
            c: cd,
            out: od,
        };
        blocks::split(&inp, &smooth, outp)
    })?;
    Ok((
        w.map(|w| w.into_any()),
        c.into_any(),
        out.map(|o| o.into_any()),
        counts.then(|| PyArray1::from_vec(py, first.counts)),
        first.sum,
    ))
}

/// One à trous scale of one block (`blocks::smooth`, then `blocks::split`): (w or None, the next c, out + the
/// previous scale's add or None, the key counts of w or None, Σw).
#[pyfunction]
#[pyo3(signature = (c_ext, lo, x, out, w_prev, thr, passes, device=None, keep_w=true,
                    counts=true))]
#[allow(clippy::too_many_arguments)]
fn _atrous_block_scale<'py>(
    py: Python<'py>,
    c_ext: FloatArray<'py>,
    lo: Vec<usize>,
    x: FloatArray<'py>,
    out: Option<FloatArray<'py>>,
    w_prev: Option<FloatArray<'py>>,
    thr: f64,
    passes: Vec<PassSpec>,
    device: Option<&str>,
    keep_w: bool,
    counts: bool,
) -> PyResult<Block<'py>> {
    let passes = passes
        .into_iter()
        .map(pass_of)
        .collect::<crate::Result<Vec<_>>>()
        .map_err(to_pyerr)?;
    let (arrays, has_out, has_w) = block_dtype(c_ext, x, out, w_prev)?;
    with_float!(FloatArrays: arrays, v => block_scale(
        py, &v, (has_out, has_w), &lo, thr, &passes, device, keep_w, counts
    ))
}

type Finish<'py> = (Bound<'py, PyAny>, Option<Bound<'py, PyArray1<u64>>>, f64);

fn block_finish<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: &[numpy::PyReadonlyArrayDyn<'py, T>],
    (has_out, has_w): (bool, bool),
    thr: f64,
    counts: bool,
) -> PyResult<Finish<'py>> {
    let b = block_arrays(a, has_out, has_w)?;
    let dst = empty::<T>(py, &b.shape)?;
    let dd = data_mut(&dst);
    let first = compute(py, || {
        blocks::finish(b.x, b.out, b.w.map(|w| (w, thr)), b.first, counts, dd)
    })?;
    Ok((
        dst.into_any(),
        counts.then(|| PyArray1::from_vec(py, first.counts)),
        first.sum,
    ))
}

/// The end of an iteration on one block (`blocks::finish`): (the output, the residual's key
/// counts or None, Σ of the residual).
#[pyfunction]
#[pyo3(signature = (c, x, out, w_prev, thr, counts=true))]
fn _atrous_block_finish<'py>(
    py: Python<'py>,
    c: FloatArray<'py>,
    x: FloatArray<'py>,
    out: Option<FloatArray<'py>>,
    w_prev: Option<FloatArray<'py>>,
    thr: f64,
    counts: bool,
) -> PyResult<Finish<'py>> {
    let (arrays, has_out, has_w) = block_dtype(c, x, out, w_prev)?;
    with_float!(FloatArrays: arrays, v => block_finish(py, &v, (has_out, has_w), thr, counts))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_atrous_block_scale, m)?)?;
    m.add_function(wrap_pyfunction!(_atrous_block_finish, m)?)?;
    m.add_function(wrap_pyfunction!(_atrous_denoise, m)?)?;
    m.add_function(wrap_pyfunction!(_atrous_plan, m)?)?;
    Ok(())
}
