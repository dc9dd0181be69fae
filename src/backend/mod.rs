//! Device selection, the CPU thread pool and the CUDA runtime pieces (context, NVRTC modules,
//! staging buffers, cuFFT plans). The only place in the crate that touches cudarc.

pub mod alloc;
pub mod cancel;
pub mod cpu_features;
pub mod cuda;
pub mod env;
pub mod threads;
pub mod trace;

use crate::error::{Error, Result};

/// Where a computation runs: the CPU, or the CUDA device of that ordinal (`cuda:N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda(u32),
}

impl Device {
    /// "cpu" or "cuda" (the engine, whatever the ordinal).
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda(_) => "cuda",
        }
    }

    /// "cpu" or "cuda:N".
    pub fn label(self) -> String {
        match self {
            Device::Cpu => "cpu".into(),
            Device::Cuda(n) => format!("cuda:{n}"),
        }
    }

    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
    }
}

/// `f` with the CUDA families' `gpu()` meaning this device's GPU (device 0 for the CPU).
pub fn scoped<R>(device: Device, f: impl FnOnce() -> R) -> R {
    match device {
        Device::Cuda(n) => cuda::on(n, f),
        Device::Cpu => f(),
    }
}

/// Resolve a user's `device` argument ("auto", "cpu", "cuda", "cuda:N"; `None` means the
/// `SKYCONV_DEVICE` environment variable, else "auto") to a usable device. "cuda" is
/// "cuda:0"; "auto" is "cuda:0" when the GPU engine can run, else "cpu".
pub fn resolve(requested: Option<&str>) -> Result<Device> {
    let from_env;
    let name = match requested {
        Some(s) => s,
        None => {
            from_env = std::env::var("SKYCONV_DEVICE").unwrap_or_else(|_| "auto".into());
            from_env.as_str()
        }
    };
    let lower = name.trim().to_ascii_lowercase();
    if lower != "cpu" {
        // The GPU engine's variables, before any device is touched.
        env::check_gpu_vars()?;
    }
    let cuda = |ordinal: u32| match cuda::status() {
        Ok(()) => {
            let count = cuda::device_count();
            if (ordinal as usize) < count {
                Ok(Device::Cuda(ordinal))
            } else {
                Err(Error::device(format!(
                    "device='cuda:{ordinal}' requested but the driver reports {count} CUDA \
                     device(s) (ordinals 0 to {})",
                    count.saturating_sub(1)
                )))
            }
        }
        Err(why) => Err(Error::device(format!(
            "device={name:?} requested but {why}"
        ))),
    };
    match lower.as_str() {
        "cpu" => Ok(Device::Cpu),
        "cuda" | "gpu" => cuda(0),
        "auto" => Ok(if cuda::status().is_ok() {
            Device::Cuda(0)
        } else {
            Device::Cpu
        }),
        other => match other
            .strip_prefix("cuda:")
            .or_else(|| other.strip_prefix("gpu:"))
        {
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                let ordinal = n
                    .parse::<u32>()
                    .map_err(|_| Error::value(format!("device ordinal too large: {other:?}")))?;
                cuda(ordinal)
            }
            _ => Err(Error::value(match requested {
                Some(_) => {
                    format!("device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {other:?}")
                }
                None => format!(
                    "environment variable SKYCONV_DEVICE must be 'auto', 'cpu', 'cuda' or \
                     'cuda:N', got {name:?} (unset it for 'auto')"
                ),
            })),
        },
    }
}
