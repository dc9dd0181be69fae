//! Device selection, the CPU thread pool and the CUDA runtime pieces (context, NVRTC modules,
//! staging buffers, cuFFT plans). The only place in the crate that touches cudarc.

pub mod cpu_features;
pub mod cuda;
pub mod threads;

use crate::error::{Error, Result};

/// Where a computation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda,
}

impl Device {
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        }
    }
}

/// Resolve a user's `device` argument ("auto", "cpu", "cuda"; `None` means the
/// `SKYCONV_DEVICE` environment variable, else "auto") to a usable device.
pub fn resolve(requested: Option<&str>) -> Result<Device> {
    let from_env;
    let name = match requested {
        Some(s) => s,
        None => {
            from_env = std::env::var("SKYCONV_DEVICE").unwrap_or_else(|_| "auto".into());
            from_env.as_str()
        }
    };
    match name.trim().to_ascii_lowercase().as_str() {
        "cpu" => Ok(Device::Cpu),
        "cuda" | "gpu" => match cuda::status() {
            Ok(()) => Ok(Device::Cuda),
            Err(why) => Err(Error::device(format!("device='cuda' requested but {why}"))),
        },
        "auto" => Ok(if cuda::status().is_ok() {
            Device::Cuda
        } else {
            Device::Cpu
        }),
        other => Err(Error::value(format!(
            "device must be 'auto', 'cpu' or 'cuda', got {other:?}"
        ))),
    }
}
