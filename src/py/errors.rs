//! Error -> Python exception. The exception classes live in `skyconv/_errors.py` (so that
//! `ShapeError` can subclass both `SkyconvError` and `ValueError`).

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::error::Error;

fn raise(py: Python<'_>, class: &str, msg: String) -> PyErr {
    match py.import("skyconv._errors").and_then(|m| m.getattr(class)) {
        Ok(cls) => PyErr::from_type(cls.cast_into().expect("exception class"), msg),
        Err(_) => PyRuntimeError::new_err(msg),
    }
}

pub fn to_pyerr(e: Error) -> PyErr {
    Python::attach(|py| match e {
        Error::Shape(m) => raise(py, "ShapeError", m),
        Error::Value(m) => PyValueError::new_err(m),
        Error::Type(m) => PyTypeError::new_err(m),
        Error::Device(m) => raise(py, "DeviceError", m),
        Error::GpuMemory(m) => raise(py, "GpuMemoryError", m),
        Error::Cuda(m) => raise(py, "CudaError", m),
        e @ Error::Internal(_) => raise(py, "InternalError", e.to_string()),
    })
}

/// Run `f` with the GIL released, inside skyconv's thread pool, turning errors and panics into
/// Python exceptions. Every binding that computes goes through here.
pub fn compute<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> crate::Result<T> + Send,
) -> PyResult<T> {
    let out = py.detach(|| {
        let caught = catch_unwind(AssertUnwindSafe(|| crate::backend::threads::install(f)));
        match caught {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(e),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                Err(Error::Internal(format!("a Rust panic was caught: {what}")))
            }
        }
    });
    out.map_err(to_pyerr)
}
