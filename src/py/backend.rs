//! Device, threads and backend information.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::backend::{self, cuda, threads};
use crate::py::errors::to_pyerr;

#[pyfunction]
fn set_num_threads(n: usize) -> PyResult<()> {
    threads::set_num_threads(n).map_err(to_pyerr)
}

#[pyfunction]
fn get_num_threads() -> usize {
    threads::num_threads()
}

/// Resolve a device argument to "cpu" or "cuda" (raising DeviceError/ValueError).
#[pyfunction]
#[pyo3(signature = (device=None))]
fn resolve_device(device: Option<&str>) -> PyResult<&'static str> {
    backend::resolve(device).map(|d| d.name()).map_err(to_pyerr)
}

#[pyfunction]
fn _set_cuda_search_dirs(dirs: Vec<std::path::PathBuf>) {
    cuda::libs::set_search_dirs(dirs);
}

#[pyfunction]
fn backend_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", env!("CARGO_PKG_VERSION"))?;
    d.set_item("cpu_threads", threads::num_threads())?;
    let info = py.detach(cuda::info);
    let c = PyDict::new(py);
    c.set_item("available", info.available)?;
    c.set_item("reason", info.reason)?;
    c.set_item("device_name", info.device_name)?;
    c.set_item("compute_capability", info.compute_capability)?;
    c.set_item("total_memory_bytes", info.total_memory)?;
    c.set_item(
        "driver_version",
        info.driver_version
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
    )?;
    c.set_item(
        "nvrtc_version",
        info.nvrtc_version.map(|(a, b)| format!("{a}.{b}")),
    )?;
    c.set_item("context_created", info.context_created)?;
    d.set_item("cuda", c)?;
    Ok(d)
}

/// Stage timings (ms) of the last GPU call.
#[pyfunction]
fn last_profile(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in cuda::profile::last() {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// Whether the GPU engines DMA straight from/to the `nbytes` bytes at host address `address`
/// (page-locked memory) rather than staging them; for the tests.
#[pyfunction]
fn _dma_direct(py: Python<'_>, address: usize, nbytes: usize) -> PyResult<bool> {
    crate::py::errors::compute(py, || {
        // SAFETY: the bytes are only passed to the driver's pointer queries, never read.
        let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, nbytes) };
        cuda::gpu()?.dma_direct(bytes)
    })
}

/// Compile every module in kernels/ with NVRTC for sm_{major}{minor}; returns {module: bytes}.
#[pyfunction]
fn _compile_kernels(py: Python<'_>, major: i32, minor: i32) -> PyResult<Bound<'_, PyDict>> {
    let out = crate::py::errors::compute(py, || cuda::compile_all((major, minor)))?;
    let d = PyDict::new(py);
    for (k, v) in out {
        d.set_item(k, v)?;
    }
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_device, m)?)?;
    m.add_function(wrap_pyfunction!(_set_cuda_search_dirs, m)?)?;
    m.add_function(wrap_pyfunction!(backend_info, m)?)?;
    m.add_function(wrap_pyfunction!(last_profile, m)?)?;
    m.add_function(wrap_pyfunction!(_compile_kernels, m)?)?;
    m.add_function(wrap_pyfunction!(_dma_direct, m)?)?;
    Ok(())
}
