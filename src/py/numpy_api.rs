//! NumPy's C API, loaded when `_core` is imported (issue 17). rust-numpy loads it on first use
//! and runs a little Python code to do so (NumPy's version check); a Ctrl-C that lands in that
//! code made the first skyconv call of a process end in a `PanicException` ("Failed to access
//! NumPy array API capsule": found by `bench/cancel_latency.py`, SIGINT at 0 s). Loading it at
//! import, on a helper thread (Python raises `KeyboardInterrupt` on the main thread only),
//! leaves no such window.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;

/// Load NumPy's C API now (see the module doc); an `ImportError` if NumPy's is unusable.
pub fn load(py: Python<'_>) -> PyResult<()> {
    let loaded = py.detach(|| {
        std::thread::spawn(|| {
            Python::attach(|py| {
                catch_unwind(AssertUnwindSafe(|| {
                    numpy::PyArray1::<f64>::zeros(py, 0, false);
                }))
                .is_ok()
            })
        })
        .join()
        .unwrap_or(false)
    });
    if loaded {
        Ok(())
    } else {
        Err(PyImportError::new_err(
            "skyconv could not load NumPy's C API (is the installed NumPy usable?)",
        ))
    }
}
