//! cuFFT's entry points (cuFFT 11 of CUDA 12 or cuFFT 12 of CUDA 13: the same stable C ABI),
//! opened by full path from the folder `libs` chose.

use std::ffi::{c_int, c_void};
use std::path::Path;

use super::libs::{self, sym};

/// cufftHandle.
pub type Handle = c_int;

// cufft.h's cufftType values.
pub const CUFFT_D2Z: c_int = 0x6a;
pub const CUFFT_Z2D: c_int = 0x6c;
pub const CUFFT_Z2Z: c_int = 0x69;

#[allow(clippy::type_complexity)]
pub struct Api {
    _lib: libloading::Library,
    /// cufftGetVersion's value (e.g. 11401 for cuFFT 11.4.1, 12000 for 12.0).
    pub version: i32,
    pub plan_many: unsafe extern "C" fn(
        *mut Handle,
        c_int,
        *mut c_int,
        *mut c_int,
        c_int,
        c_int,
        *mut c_int,
        c_int,
        c_int,
        c_int,
        c_int,
    ) -> c_int,
    pub set_stream: unsafe extern "C" fn(Handle, *mut c_void) -> c_int,
    pub exec_d2z: unsafe extern "C" fn(Handle, *mut c_void, *mut c_void) -> c_int,
    pub exec_z2d: unsafe extern "C" fn(Handle, *mut c_void, *mut c_void) -> c_int,
    pub exec_z2z: unsafe extern "C" fn(Handle, *mut c_void, *mut c_void, c_int) -> c_int,
    pub destroy: unsafe extern "C" fn(Handle) -> c_int,
}

// SAFETY: function pointers plus the handle that keeps them valid; cuFFT plans are used inside
// an engine section of the GPU (`Gpu::exclusive`: one admitted call, one thread of it).
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

impl Api {
    /// Open the cuFFT at `path`, checking that it is the one of CUDA `toolkit`.
    pub fn load(path: &Path, toolkit: u32) -> std::result::Result<Api, String> {
        let lib = libs::open(path, false)?;
        // SAFETY: the signatures of cufft.h.
        unsafe {
            let get_version: unsafe extern "C" fn(*mut c_int) -> c_int =
                sym(&lib, "cufftGetVersion")?;
            let mut version = 0;
            let r = get_version(&mut version);
            if r != 0 {
                return Err(format!("cufftGetVersion failed ({r})"));
            }
            let want = toolkit as i32 - 1;
            if version / 1000 != want {
                return Err(format!(
                    "reports cuFFT {}.{}, not cuFFT {want} of CUDA {toolkit}",
                    version / 1000,
                    (version % 1000) / 100
                ));
            }
            Ok(Api {
                version,
                plan_many: sym(&lib, "cufftPlanMany")?,
                set_stream: sym(&lib, "cufftSetStream")?,
                exec_d2z: sym(&lib, "cufftExecD2Z")?,
                exec_z2d: sym(&lib, "cufftExecZ2D")?,
                exec_z2z: sym(&lib, "cufftExecZ2Z")?,
                destroy: sym(&lib, "cufftDestroy")?,
                _lib: lib,
            })
        }
    }
}
