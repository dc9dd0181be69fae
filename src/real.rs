//! The floating-point element types skyconv computes on (f32, f64).

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

/// A float element type. Arithmetic that runs long is done in f64 through `to_f64`; the
/// operators are for code that must round in the element type at every step (SoFiA-2's
/// running means), where they equal the f64 operation rounded to the type.
pub trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + DeviceRepr
    + ValidAsZeroBits
    + Default
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + 'static
{
    /// The C type name used for the CUDA kernel of this element type.
    const CUDA: &'static str;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn is_nan(self) -> bool;
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
    #[inline(always)]
    fn is_nan(self) -> bool {
        f32::is_nan(self)
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
    #[inline(always)]
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}
