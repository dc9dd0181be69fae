//! HEALPix geometry bindings (skyconv.healpix). Filled in by the healpix work.

use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
