//! pyo3 bindings: thin wrappers, one file per family, no numerics here.

mod arrays;
mod backend;
mod errors;
mod filters;
mod healpix;
mod sht;
mod stats;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    backend::register(m)?;
    filters::register(m)?;
    healpix::register(m)?;
    stats::register(m)?;
    sht::register(m)?;
    Ok(())
}
