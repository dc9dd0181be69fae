//! Device, threads and backend information.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::backend::cuda::libs::{self, Candidate};
use crate::backend::{self, cuda, threads};
use crate::py::errors::to_pyerr;

#[pyfunction]
fn set_num_threads(n: usize) -> PyResult<()> {
    threads::set_num_threads(n).map_err(to_pyerr)
}

#[pyfunction]
fn get_num_threads() -> PyResult<usize> {
    threads::num_threads().map_err(to_pyerr)
}

/// Resolve a device argument ("auto", "cpu", "cuda", "cuda:N") to the engine, "cpu" or
/// "cuda" (raising DeviceError/ValueError).
#[pyfunction]
#[pyo3(signature = (device=None))]
fn resolve_device(device: Option<&str>) -> PyResult<&'static str> {
    backend::resolve(device).map(|d| d.name()).map_err(to_pyerr)
}

/// Resolve a device argument to "cpu" or "cuda:N" (the ordinal checked against the driver's
/// device count).
#[pyfunction]
#[pyo3(signature = (device=None))]
fn resolve_device_label(device: Option<&str>) -> PyResult<String> {
    backend::resolve(device)
        .map(|d| d.label())
        .map_err(to_pyerr)
}

#[pyfunction]
fn _set_cuda_search_dirs(dirs: Vec<std::path::PathBuf>) {
    cuda::libs::set_search_dirs(dirs);
}

#[pyfunction]
fn backend_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", env!("CARGO_PKG_VERSION"))?;
    d.set_item("cpu_threads", threads::num_threads().map_err(to_pyerr)?)?;
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
    c.set_item("ordinal", info.ordinal)?;
    let devices = PyList::empty(py);
    for g in &info.devices {
        let e = PyDict::new(py);
        e.set_item("ordinal", g.ordinal)?;
        e.set_item("name", &g.name)?;
        e.set_item("compute_capability", g.compute_capability)?;
        e.set_item("total_memory_bytes", g.total_memory)?;
        e.set_item("context_created", g.context_created)?;
        devices.append(e)?;
    }
    c.set_item("devices", devices)?;
    let tk = py.detach(cuda::toolkit::get);
    c.set_item("toolkit", tk.toolkit)?;
    c.set_item(
        "nvrtc",
        lib_entry(
            py,
            tk.nvrtc
                .as_ref()
                .map(|c| (&c.candidate, format!("{}.{}", c.version.0, c.version.1))),
        )?,
    )?;
    c.set_item(
        "cufft",
        lib_entry(
            py,
            tk.cufft.as_ref().map(|c| {
                (
                    &c.candidate,
                    format!(
                        "{}.{}.{}",
                        c.version / 1000,
                        (c.version % 1000) / 100,
                        c.version % 100
                    ),
                )
            }),
        )?,
    )?;
    c.set_item("rejected", rejected_list(py, &tk.rejected)?)?;
    c.set_item(
        "nvrtc_loaded",
        tk.nvrtc.as_ref().is_some_and(|c| c.is_open()),
    )?;
    c.set_item(
        "cufft_loaded",
        tk.cufft.as_ref().is_some_and(|c| c.is_open()),
    )?;
    c.set_item("libraries_remembered", tk.from_record)?;
    if let Some(e) = &tk.error {
        c.set_item("config_error", e)?;
    }
    let dirs = PyList::empty(py);
    for (dir, source) in &tk.dirs {
        dirs.append((dir.to_string_lossy().to_string(), source))?;
    }
    c.set_item("search_dirs", dirs)?;
    c.set_item(
        "kernel_cache",
        cuda::cache::dir().map(|p| p.to_string_lossy().to_string()),
    )?;
    d.set_item("cuda", c)?;
    Ok(d)
}

fn lib_entry<'py>(
    py: Python<'py>,
    lib: Option<(&Candidate, String)>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some((c, version)) = lib else {
        return Ok(None);
    };
    let e = PyDict::new(py);
    e.set_item("path", c.path.to_string_lossy().to_string())?;
    e.set_item("version", version)?;
    e.set_item("cuda", c.toolkit)?;
    e.set_item("source", &c.source)?;
    Ok(Some(e))
}

fn rejected_list<'py>(py: Python<'py>, r: &[libs::Rejected]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for x in r {
        let e = PyDict::new(py);
        e.set_item("path", x.path.to_string_lossy().to_string())?;
        e.set_item("reason", &x.reason)?;
        out.append(e)?;
    }
    Ok(out)
}

/// The loader's choice among the CUDA libraries in `dirs` for a driver of CUDA `driver_version`
/// (cuDriverGetVersion's value, e.g. 12040; None: no driver) and `only` (the
/// SKYCONV_CUDA_VERSION override). With `loadable` (a list of paths) nothing is opened: those
/// paths load and every other candidate fails ("not loadable (test)"); without it the libraries
/// are opened for real. Returns {"toolkit", "nvrtc", "cufft" (paths or None), "candidates",
/// "rejected"}. For the tests; touches none of the process's state.
#[pyfunction]
#[pyo3(signature = (dirs, driver_version=None, only=None, loadable=None))]
fn _select_cuda_libs(
    py: Python<'_>,
    dirs: Vec<std::path::PathBuf>,
    driver_version: Option<i32>,
    only: Option<u32>,
    loadable: Option<Vec<std::path::PathBuf>>,
) -> PyResult<Bound<'_, PyDict>> {
    let dirs: Vec<_> = dirs.into_iter().map(|d| (d, "test".to_string())).collect();
    let cands = libs::scan(&dirs);
    let sel = match &loadable {
        Some(ok) => libs::select(&cands, driver_version, only, |c| {
            if ok.contains(&c.path) {
                Ok(())
            } else {
                Err("not loadable (test)".to_string())
            }
        }),
        None => libs::select(&cands, driver_version, only, |c| {
            cuda::toolkit::open(c).map(|_| ())
        }),
    };
    let d = PyDict::new(py);
    let path = |c: &Option<(Candidate, ())>| {
        c.as_ref()
            .map(|(c, _)| c.path.to_string_lossy().to_string())
    };
    d.set_item("toolkit", sel.toolkit)?;
    d.set_item("nvrtc", path(&sel.nvrtc))?;
    d.set_item("cufft", path(&sel.cufft))?;
    let all = PyList::empty(py);
    for c in &cands {
        all.append((c.path.to_string_lossy().to_string(), c.toolkit))?;
    }
    d.set_item("candidates", all)?;
    d.set_item("rejected", rejected_list(py, &sel.rejected)?)?;
    Ok(d)
}

/// The kernel cache folder (None when off).
#[pyfunction]
fn _kernel_cache_dir() -> Option<String> {
    cuda::cache::dir().map(|p| p.to_string_lossy().to_string())
}

/// Remove every cached kernel module; returns the number of files removed.
#[pyfunction]
fn _clear_kernel_cache() -> PyResult<usize> {
    let err = |e: std::io::Error| {
        pyo3::exceptions::PyOSError::new_err(format!("cannot clear the kernel cache: {e}"))
    };
    Ok(cuda::cache::clear().map_err(err)? + cuda::lib_record::clear().map_err(err)?)
}

/// The cache key of a source, options, arch and NVRTC version (for the tests).
#[pyfunction]
fn _kernel_cache_key(
    source: &str,
    options: Vec<String>,
    arch: (i32, i32),
    nvrtc_version: (i32, i32),
) -> String {
    cuda::cache::key(source, &options, arch, nvrtc_version)
}

/// Compile kernel module `name` for sm_{major}{minor} through the on-disk cache:
/// (CUBIN bytes, whether it came from the cache).
#[pyfunction]
fn _compile_module_cached(
    py: Python<'_>,
    name: &str,
    major: i32,
    minor: i32,
) -> PyResult<(usize, bool)> {
    crate::py::errors::compute(py, || cuda::compile_module_cached(name, (major, minor)))
}

/// The cache key kernel module `name` has for sm_{major}{minor} with the NVRTC in use.
#[pyfunction]
fn _module_cache_key(py: Python<'_>, name: &str, major: i32, minor: i32) -> PyResult<String> {
    crate::py::errors::compute(py, || cuda::module_cache_key(name, (major, minor)))
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

/// Compile every module in kernels/ (and the families' variants of them) with NVRTC for
/// sm_{major}{minor}; returns {module or "module+label": bytes}.
#[pyfunction]
fn _compile_kernels(py: Python<'_>, major: i32, minor: i32) -> PyResult<Bound<'_, PyDict>> {
    // and every kernel the families compile on demand
    let variants = crate::cube::kernel_variants();
    let out = crate::py::errors::compute(py, || cuda::compile_all((major, minor), &variants))?;
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
    m.add_function(wrap_pyfunction!(resolve_device_label, m)?)?;
    m.add_function(wrap_pyfunction!(_select_cuda_libs, m)?)?;
    m.add_function(wrap_pyfunction!(_kernel_cache_dir, m)?)?;
    m.add_function(wrap_pyfunction!(_clear_kernel_cache, m)?)?;
    m.add_function(wrap_pyfunction!(_kernel_cache_key, m)?)?;
    m.add_function(wrap_pyfunction!(_compile_module_cached, m)?)?;
    m.add_function(wrap_pyfunction!(_module_cache_key, m)?)?;
    m.add_function(wrap_pyfunction!(_set_cuda_search_dirs, m)?)?;
    m.add_function(wrap_pyfunction!(backend_info, m)?)?;
    m.add_function(wrap_pyfunction!(last_profile, m)?)?;
    m.add_function(wrap_pyfunction!(_compile_kernels, m)?)?;
    m.add_function(wrap_pyfunction!(_dma_direct, m)?)?;
    Ok(())
}
