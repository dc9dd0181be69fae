//! pyo3 bindings: thin wrappers, one file per family, no numerics here.

mod admission;
mod arrays;
mod atrous;
mod backend;
mod cube;
mod errors;
mod filters;
mod grid;
mod healpix;
mod numpy_api;
mod scope;
mod sht;
mod sht_halves;
mod smooth;
mod stats;
mod trace;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    numpy_api::load(m.py())?;
    backend::register(m)?;
    admission::register(m)?;
    atrous::register(m)?;
    filters::register(m)?;
    cube::register(m)?;
    grid::register(m)?;
    healpix::register(m)?;
    stats::register(m)?;
    sht::register(m)?;
    sht_halves::register(m)?;
    smooth::register(m)?;
    scope::register(m)?;
    trace::register(m)?;
    Ok(())
}
