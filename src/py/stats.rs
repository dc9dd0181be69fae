//! Bindings for the exact selection primitive (used by tests and skyconv.stats).

use pyo3::prelude::*;

use crate::backend::{self, cuda, Device};
use crate::cube::stats::{self, Range, Values};
use crate::py::arrays::{parts, with_float, FloatArray};
use crate::py::errors::{compute, to_pyerr};
use crate::real::Real;

fn kth<T: Real>(dev: Device, data: &[T], k: usize, vals: Values) -> crate::Result<Option<f64>> {
    match dev {
        Device::Cpu => Ok(stats::select_kth(data, k, vals)),
        Device::Cuda(o) => {
            let gpu = cuda::gpu_on(o)?;
            let _only = gpu.exclusive();
            let d = gpu.upload(data)?;
            stats::select_kth_device(&gpu, &d, data.len(), k, vals)
        }
    }
}

/// The k-th smallest (0-based) of the values selected by (center, abs, range), or None.
#[pyfunction]
#[pyo3(signature = (data, k, center=0.0, abs=false, range="all", device=None))]
fn _select_kth(
    py: Python<'_>,
    data: FloatArray<'_>,
    k: usize,
    center: f64,
    abs: bool,
    range: &str,
    device: Option<&str>,
) -> PyResult<Option<f64>> {
    let range = match range {
        "all" => Range::All,
        "negative" => Range::Negative,
        "positive" => Range::Positive,
        other => {
            return Err(crate::py::errors::value_err(format!(
                "range must be 'all', 'negative' or 'positive', got {other:?}"
            )))
        }
    };
    let vals = Values { center, abs, range };
    let dev = backend::resolve(device).map_err(to_pyerr)?;
    with_float!(data, a => {
        let (_, d) = parts(&a, "data")?;
        compute(py, || kth(dev, d, k, vals))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_select_kth, m)?)?;
    Ok(())
}
