//! HEALPix geometry bindings (skyconv.healpix). Arrays arrive C-contiguous and native-endian
//! (the Python layer makes sure); outputs take the input's shape.

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn};
use pyo3::prelude::*;

use crate::healpix::{self, Ring};
use crate::py::arrays::{data_mut, empty, parts};
use crate::py::errors::compute;

type F64Array<'py> = Bound<'py, PyArrayDyn<f64>>;
type I64Array<'py> = Bound<'py, PyArrayDyn<i64>>;

/// A new int64 array of `shape` (zeroed: there is no uninitialised constructor for ints
/// that `arrays::empty` covers, and the memset is negligible next to the work).
fn zeros_i64<'py>(py: Python<'py>, shape: &[usize]) -> PyResult<I64Array<'py>> {
    crate::py::arrays::zeros::<i64>(py, shape)
}

/// Run `f(input, output)` over an int64 array producing an int64 array of the same shape.
fn map_i64<'py>(
    py: Python<'py>,
    ipix: &PyReadonlyArrayDyn<'py, i64>,
    f: impl FnOnce(&[i64], &mut [i64]) -> crate::Result<()> + Send,
) -> PyResult<I64Array<'py>> {
    let (shape, pix) = parts(ipix, "ipix")?;
    let out = zeros_i64(py, &shape)?;
    {
        let mut rw = out.readwrite();
        let dst = rw.as_slice_mut().expect("new arrays are contiguous");
        compute(py, || f(pix, dst))?;
    }
    Ok(out)
}

#[pyfunction]
fn _healpix_pix2ang<'py>(
    py: Python<'py>,
    nside: u64,
    ipix: PyReadonlyArrayDyn<'py, i64>,
    nest: bool,
) -> PyResult<(F64Array<'py>, F64Array<'py>)> {
    let (shape, pix) = parts(&ipix, "ipix")?;
    let theta = empty::<f64>(py, &shape)?;
    let phi = empty::<f64>(py, &shape)?;
    let (t, p) = (data_mut(&theta), data_mut(&phi));
    compute(py, || healpix::pix2ang_slice(nside, nest, pix, t, p))?;
    Ok((theta, phi))
}

#[pyfunction]
fn _healpix_ang2pix<'py>(
    py: Python<'py>,
    nside: u64,
    theta: PyReadonlyArrayDyn<'py, f64>,
    phi: PyReadonlyArrayDyn<'py, f64>,
    nest: bool,
) -> PyResult<I64Array<'py>> {
    let (shape, t) = parts(&theta, "theta")?;
    let (pshape, p) = parts(&phi, "phi")?;
    if pshape != shape {
        return Err(crate::py::errors::to_pyerr(crate::Error::shape(format!(
            "theta and phi must have the same shape, got {shape:?} and {pshape:?}"
        ))));
    }
    let out = zeros_i64(py, &shape)?;
    {
        let mut rw = out.readwrite();
        let dst = rw.as_slice_mut().expect("new arrays are contiguous");
        compute(py, || healpix::ang2pix_slice(nside, nest, t, p, dst))?;
    }
    Ok(out)
}

#[pyfunction]
fn _healpix_vec2pix<'py>(
    py: Python<'py>,
    nside: u64,
    x: PyReadonlyArrayDyn<'py, f64>,
    y: PyReadonlyArrayDyn<'py, f64>,
    z: PyReadonlyArrayDyn<'py, f64>,
    nest: bool,
) -> PyResult<I64Array<'py>> {
    let (shape, xs) = parts(&x, "x")?;
    let (yshape, ys) = parts(&y, "y")?;
    let (zshape, zs) = parts(&z, "z")?;
    if yshape != shape || zshape != shape {
        return Err(crate::py::errors::to_pyerr(crate::Error::shape(format!(
            "x, y and z must have the same shape, got {shape:?}, {yshape:?} and {zshape:?}"
        ))));
    }
    let out = zeros_i64(py, &shape)?;
    {
        let mut rw = out.readwrite();
        let dst = rw.as_slice_mut().expect("new arrays are contiguous");
        compute(py, || healpix::vec2pix_slice(nside, nest, xs, ys, zs, dst))?;
    }
    Ok(out)
}

#[pyfunction]
fn _healpix_ring2nest<'py>(
    py: Python<'py>,
    nside: u64,
    ipix: PyReadonlyArrayDyn<'py, i64>,
) -> PyResult<I64Array<'py>> {
    map_i64(py, &ipix, |a, b| healpix::ring2nest_slice(nside, a, b))
}

#[pyfunction]
fn _healpix_nest2ring<'py>(
    py: Python<'py>,
    nside: u64,
    ipix: PyReadonlyArrayDyn<'py, i64>,
) -> PyResult<I64Array<'py>> {
    map_i64(py, &ipix, |a, b| healpix::nest2ring_slice(nside, a, b))
}

/// Per-ring arrays (theta, z, sin_theta, nphi, phi0, first_pixel) for rings 1 ..= 4·nside−1.
#[allow(clippy::type_complexity)]
#[pyfunction]
fn _healpix_ring_info(
    py: Python<'_>,
    nside: u64,
) -> PyResult<(
    Bound<'_, PyArray1<f64>>,
    Bound<'_, PyArray1<f64>>,
    Bound<'_, PyArray1<f64>>,
    Bound<'_, PyArray1<i64>>,
    Bound<'_, PyArray1<f64>>,
    Bound<'_, PyArray1<i64>>,
)> {
    let rings: Vec<Ring> = compute(py, || {
        healpix::check_nside(nside, false)?;
        // the ring table and its six columns, refused before anything is built
        let nrings = (4 * nside).saturating_sub(1) as usize;
        crate::backend::alloc::check(
            &format!("ring_info's tables for nside={nside} ({nrings} rings)"),
            nrings,
            std::mem::size_of::<Ring>() + 6 * 8,
        )?;
        Ok(healpix::rings(nside))
    })?;
    let col = |f: fn(&Ring) -> f64| PyArray1::from_iter(py, rings.iter().map(f));
    let icol = |f: fn(&Ring) -> i64| PyArray1::from_iter(py, rings.iter().map(f));
    Ok((
        col(|r| r.theta),
        col(|r| r.z),
        col(|r| r.sin_theta),
        icol(|r| r.nphi as i64),
        col(|r| r.phi0),
        icol(|r| r.first as i64),
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_healpix_pix2ang, m)?)?;
    m.add_function(wrap_pyfunction!(_healpix_ang2pix, m)?)?;
    m.add_function(wrap_pyfunction!(_healpix_vec2pix, m)?)?;
    m.add_function(wrap_pyfunction!(_healpix_ring2nest, m)?)?;
    m.add_function(wrap_pyfunction!(_healpix_nest2ring, m)?)?;
    m.add_function(wrap_pyfunction!(_healpix_ring_info, m)?)?;
    Ok(())
}
