//! The floating-point element types skyconv computes on (f32, f64).

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

/// A float element type. Arithmetic that runs long is done in f64 through `to_f64`.
pub trait Real:
    Copy + Send + Sync + PartialOrd + DeviceRepr + ValidAsZeroBits + Default + 'static
{
    /// The C type name used for the CUDA kernel of this element type.
    const CUDA: &'static str;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl Real for f32 {
    const CUDA: &'static str = "f32";
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl Real for f64 {
    const CUDA: &'static str = "f64";
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
}
