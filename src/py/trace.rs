//! The set-up log (`backend::trace`) and the opt-in warm-up, for Python.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::backend::{cuda, trace};

/// Every set-up entry kept: [{"stage", "detail", "seconds", "at"}], oldest first.
#[pyfunction]
fn _trace_entries(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for e in trace::entries() {
        let d = PyDict::new(py);
        d.set_item("stage", e.stage)?;
        d.set_item("detail", e.detail)?;
        d.set_item("seconds", e.seconds)?;
        d.set_item("at", e.at)?;
        out.append(d)?;
    }
    Ok(out)
}

/// Add an entry (the Python layer's host set-up stages).
#[pyfunction]
fn _trace_record(stage: &str, detail: &str, seconds: f64) {
    trace::record(stage, detail, seconds);
}

/// Forget every entry.
#[pyfunction]
fn _trace_clear() {
    trace::clear();
}

/// Create GPU `ordinal`'s context, load `modules` (None: all), open cuFFT when `fft`; the
/// modules loaded.
#[pyfunction]
#[pyo3(signature = (ordinal, modules=None, fft=true))]
fn _warmup(
    py: Python<'_>,
    ordinal: u32,
    modules: Option<Vec<String>>,
    fft: bool,
) -> PyResult<Vec<String>> {
    // the families' kernels compiled on demand that warmup also pays for
    let variants = crate::cube::warm_variants();
    crate::py::errors::compute(py, || cuda::warmup(ordinal, modules, fft, &variants))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_trace_entries, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_record, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_clear, m)?)?;
    m.add_function(wrap_pyfunction!(_warmup, m)?)?;
    Ok(())
}
