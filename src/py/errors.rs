//! Error -> Python exception. The exception classes live in `skyconv/_errors.py` (so that
//! `ShapeError` can subclass both `SkyconvError` and `ValueError`); each is looked up once.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::error::Error;

/// The module that defines skyconv's exception classes.
const MODULE: &str = "skyconv._errors";

/// One of skyconv's exception classes, looked up in `skyconv._errors` on its first raise and
/// cached for the life of the process.
struct Class {
    name: &'static str,
    cell: PyOnceLock<Py<PyType>>,
}

impl Class {
    const fn new(name: &'static str) -> Self {
        Class {
            name,
            cell: PyOnceLock::new(),
        }
    }

    /// The exception `msg` of this class (a RuntimeError if the class cannot be imported; a
    /// failed import is not cached, so the next raise tries again).
    fn err(&self, py: Python<'_>, msg: String) -> PyErr {
        match self.cell.import(py, MODULE, self.name) {
            Ok(cls) => PyErr::from_type(cls.clone(), msg),
            Err(_) => PyRuntimeError::new_err(msg),
        }
    }
}

static SHAPE_ERROR: Class = Class::new("ShapeError");
static DEVICE_ERROR: Class = Class::new("DeviceError");
static GPU_MEMORY_ERROR: Class = Class::new("GpuMemoryError");
static CUDA_ERROR: Class = Class::new("CudaError");
static INTERNAL_ERROR: Class = Class::new("InternalError");

pub fn to_pyerr(e: Error) -> PyErr {
    Python::attach(|py| match e {
        Error::Shape(m) => SHAPE_ERROR.err(py, m),
        Error::Value(m) => PyValueError::new_err(m),
        Error::Type(m) => PyTypeError::new_err(m),
        Error::Device(m) => DEVICE_ERROR.err(py, m),
        Error::GpuMemory(m) => GPU_MEMORY_ERROR.err(py, m),
        Error::Cuda(m) => CUDA_ERROR.err(py, m),
        e @ Error::Internal(_) => INTERNAL_ERROR.err(py, e.to_string()),
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
