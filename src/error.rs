//! The one error type of the crate. `py::errors` maps each variant to a Python exception.

use thiserror::Error;

/// Everything that can go wrong in skyconv, grouped by the Python exception it becomes.
#[derive(Debug, Error)]
pub enum Error {
    /// Wrong array shape or length (Python `ShapeError`, a `ValueError`).
    #[error("{0}")]
    Shape(String),
    /// An argument has an invalid value (Python `ValueError`).
    #[error("{0}")]
    Value(String),
    /// An argument has the wrong type or dtype (Python `TypeError`).
    #[error("{0}")]
    Type(String),
    /// The requested device cannot be used (Python `DeviceError`).
    #[error("{0}")]
    Device(String),
    /// The GPU ran out of memory (Python `GpuMemoryError`, also a `MemoryError`).
    #[error("{0}")]
    GpuMemory(String),
    /// A CUDA call failed after the device was set up (Python `CudaError`).
    #[error("{0}")]
    Cuda(String),
    /// Host memory for a buffer cannot be had (Python `HostMemoryError`, a `MemoryError`).
    #[error("{}", host_memory_message(what, *bytes, *limit))]
    HostMemory {
        /// What the buffer was for ("the output array", "the filter kernel", ...).
        what: String,
        /// Bytes asked for.
        bytes: u128,
        /// Bytes available (MemAvailable + SwapFree), where known.
        limit: Option<u64>,
    },
    /// The call was cancelled (Ctrl-C, or a progress callback raised): the binding raises the
    /// Python exception that cancelled it.
    #[error("the call was cancelled")]
    Cancelled,
    /// A bug: an invariant broke or a panic was caught (Python `InternalError`).
    #[error("internal error: {0}")]
    Internal(String),
}

/// A byte count for messages: "1.5 GiB (1610612736 bytes)".
pub fn human(bytes: u128) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {} ({bytes} bytes)", units[u])
    }
}

fn host_memory_message(what: &str, bytes: u128, limit: Option<u64>) -> String {
    let lim = match limit {
        Some(l) => format!(
            "{} are available (MemAvailable + SwapFree in /proc/meminfo)",
            human(l as u128)
        ),
        None => "that is more than this machine can allocate".to_string(),
    };
    format!("cannot allocate {what}: it needs {}; {lim}", human(bytes))
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn shape(msg: impl Into<String>) -> Self {
        Error::Shape(msg.into())
    }
    pub fn value(msg: impl Into<String>) -> Self {
        Error::Value(msg.into())
    }
    pub fn type_(msg: impl Into<String>) -> Self {
        Error::Type(msg.into())
    }
    pub fn device(msg: impl Into<String>) -> Self {
        Error::Device(msg.into())
    }
}

impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        use cudarc::driver::sys::cudaError_enum as E;
        if e.0 == E::CUDA_ERROR_OUT_OF_MEMORY {
            Error::GpuMemory(format!("GPU out of memory: {e}"))
        } else {
            Error::Cuda(format!("CUDA driver error: {e}"))
        }
    }
}
