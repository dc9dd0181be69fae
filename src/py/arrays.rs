//! Accepting float32/float64 NumPy arrays and creating outputs.

use numpy::ndarray::{ArrayViewMut, IxDyn};
use numpy::{PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::backend::alloc;
use crate::backend::cuda::host_pool;
use crate::backend::Device;
use crate::error::Error;
use crate::py::errors::to_pyerr;

use crate::real::Real;

/// A C-contiguous, native-endian float array (the Python layer makes sure of that).
#[derive(FromPyObject)]
pub enum FloatArray<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

/// A list of arrays of one float dtype (as `sht.map2alm` takes its maps).
pub enum FloatArrays<'py> {
    F32(Vec<PyReadonlyArrayDyn<'py, f32>>),
    F64(Vec<PyReadonlyArrayDyn<'py, f64>>),
}

impl<'py> FloatArrays<'py> {
    /// Group `arrays` by dtype; a TypeError when they mix float32 and float64 or there are
    /// none.
    pub fn same_dtype(arrays: Vec<FloatArray<'py>>, name: &str) -> PyResult<Self> {
        let (mut f32s, mut f64s) = (Vec::new(), Vec::new());
        for a in arrays {
            match a {
                FloatArray::F32(a) => f32s.push(a),
                FloatArray::F64(a) => f64s.push(a),
            }
        }
        match (f32s.is_empty(), f64s.is_empty()) {
            (true, false) => Ok(FloatArrays::F64(f64s)),
            (false, true) => Ok(FloatArrays::F32(f32s)),
            _ => Err(crate::py::errors::type_err(format!(
                "{name} must all have the same dtype (float32 or float64)"
            ))),
        }
    }
}

/// The float32/float64 dispatch of every binding, written once: evaluates `$body` with `$a`
/// bound to the typed array(s) inside a [`FloatArray`] (or, with the `FloatArrays:` prefix,
/// a [`FloatArrays`]), once per dtype, so that the body calls a generic function with its
/// arguments listed once (adding an argument is a one-line change).
///
/// ```ignore
/// with_float!(data, a => run(py, &a, &params, device))
/// with_float!(FloatArrays: maps, m => run_map2alm(py, &m, args))
/// ```
macro_rules! with_float {
    (FloatArrays: $arr:expr, $a:ident => $body:expr) => {
        match $arr {
            $crate::py::arrays::FloatArrays::F32($a) => $body,
            $crate::py::arrays::FloatArrays::F64($a) => $body,
        }
    };
    ($arr:expr, $a:ident => $body:expr) => {
        match $arr {
            $crate::py::arrays::FloatArray::F32($a) => $body,
            $crate::py::arrays::FloatArray::F64($a) => $body,
        }
    };
}
pub(crate) use with_float;

/// A new uninitialised C-contiguous array of `shape` (a `HostMemoryError` when it cannot be
/// had).
pub fn empty<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    empty_for(py, shape, Device::Cpu)
}

/// Run a NumPy constructor that panics when NumPy cannot allocate (rust-numpy's `new` and
/// `zeros` do): the panic and NumPy's MemoryError become one `HostMemoryError` naming the
/// shape and bytes. The size was checked against the limit first, so this is a last resort.
fn numpy_alloc<'py, A>(
    py: Python<'py>,
    shape: &[usize],
    bytes: usize,
    make: impl FnOnce() -> A,
) -> PyResult<A> {
    catch_unwind(AssertUnwindSafe(make)).map_err(|_| {
        let _ = PyErr::take(py);
        to_pyerr(Error::HostMemory {
            what: format!("an output array of shape {shape:?}"),
            bytes: bytes as u128,
            limit: alloc::limit(),
        })
    })
}

/// A new zero-filled C-contiguous array of `shape` (a `HostMemoryError` when it cannot be
/// had).
pub fn zeros<'py, T: numpy::Element>(
    py: Python<'py>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let what = format!("an output array of shape {shape:?}");
    let bytes = alloc::check_dims(&what, shape, std::mem::size_of::<T>()).map_err(to_pyerr)?;
    numpy_alloc(py, shape, bytes, || {
        PyArrayDyn::<T>::zeros(py, shape, false)
    })
}

/// The shape and contiguous data of a readonly array.
pub fn parts<'a, T: numpy::Element>(
    a: &'a PyReadonlyArrayDyn<'_, T>,
    name: &str,
) -> PyResult<(Vec<usize>, &'a [T])> {
    let shape = a.shape().to_vec();
    let data = a
        .as_slice()
        .map_err(|_| crate::py::errors::value_err(format!("{name} must be C-contiguous")))?;
    Ok((shape, data))
}

/// Mutable contiguous data of an array created by `empty`.
#[allow(clippy::mut_from_ref)] // the array is fresh and owned by the caller: no aliasing
pub fn data_mut<'a, T: Real + numpy::Element>(a: &'a Bound<'_, PyArrayDyn<T>>) -> &'a mut [T] {
    // SAFETY: the array was just created by us and is not shared yet.
    unsafe { a.as_slice_mut().expect("new arrays are contiguous") }
}

/// Keeps a page-locked block alive for as long as a NumPy array views it.
#[pyclass(frozen)]
struct PinnedOwner(#[allow(dead_code)] host_pool::Block);

/// A new uninitialised C-contiguous array of `shape` for the output of a call on `dev`: on
/// the GPU a large one lives in page-locked memory (`backend::cuda::host_pool`), so that the
/// result is DMA'd straight into it.
pub fn empty_for<'py, T: numpy::Element>(
    py: Python<'py>,
    shape: &[usize],
    dev: Device,
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let what = format!("an output array of shape {shape:?}");
    let bytes = alloc::check_dims(&what, shape, std::mem::size_of::<T>()).map_err(to_pyerr)?;
    if dev.is_cuda() {
        host_pool::env_max_mb().map_err(to_pyerr)?;
    }
    if let (Device::Cuda(ordinal), true) = (dev, bytes >= host_pool::MIN_BYTES) {
        if let Some(block) = host_pool::take(bytes, ordinal) {
            let ptr = block.as_ptr() as *mut T;
            if let Ok(owner) = Bound::new(py, PinnedOwner(block)) {
                // SAFETY: the block holds at least `bytes` bytes, suitably aligned (page
                // aligned), and `owner` keeps it alive (it becomes the array's base object).
                unsafe {
                    let view = ArrayViewMut::from_shape_ptr(IxDyn(shape), ptr);
                    return Ok(PyArrayDyn::borrow_from_array(&view, owner.into_any()));
                }
            }
        }
    }
    // SAFETY: every caller writes all elements before returning the array to Python.
    numpy_alloc(py, shape, bytes, || unsafe {
        PyArrayDyn::<T>::new(py, shape, false)
    })
}
