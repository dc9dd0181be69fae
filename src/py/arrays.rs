//! Accepting float32/float64 NumPy arrays and creating outputs.

use numpy::{PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::real::Real;

/// A C-contiguous, native-endian float array (the Python layer makes sure of that).
#[derive(FromPyObject)]
pub enum FloatArray<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

/// A new uninitialised C-contiguous array of `shape`.
pub fn empty<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    shape: &[usize],
) -> Bound<'py, PyArrayDyn<T>> {
    // SAFETY: every caller writes all elements before returning the array to Python.
    unsafe { PyArrayDyn::<T>::new(py, shape, false) }
}

/// The shape and contiguous data of a readonly array.
pub fn parts<'a, T: numpy::Element>(
    a: &'a PyReadonlyArrayDyn<'_, T>,
    name: &str,
) -> PyResult<(Vec<usize>, &'a [T])> {
    let shape = a.shape().to_vec();
    let data = a.as_slice().map_err(|_| {
        pyo3::exceptions::PyValueError::new_err(format!("{name} must be C-contiguous"))
    })?;
    Ok((shape, data))
}

/// Mutable contiguous data of an array created by `empty`.
#[allow(clippy::mut_from_ref)] // the array is fresh and owned by the caller: no aliasing
pub fn data_mut<'a, T: Real + numpy::Element>(a: &'a Bound<'_, PyArrayDyn<T>>) -> &'a mut [T] {
    // SAFETY: the array was just created by us and is not shared yet.
    unsafe { a.as_slice_mut().expect("new arrays are contiguous") }
}
