//! Compiling `kernels/` with the process's NVRTC (`toolkit`), through the on-disk cache.

use super::{cache, nvrtc, toolkit};
use crate::error::Result;

/// NVRTC's (major, minor) version.
pub fn version() -> Result<(i32, i32)> {
    Ok(toolkit::nvrtc()?.version)
}

/// Compile one translation unit to a CUBIN for `sm_{major}{minor}` (no cache).
pub fn compile_cubin(name: &str, source: &str, arch: (i32, i32)) -> Result<Vec<u8>> {
    toolkit::nvrtc()?.compile(name, source, &nvrtc::options(arch))
}

/// `compile_cubin` through the on-disk cache: (cubin, whether it came from the cache).
pub fn compile_cached(name: &str, source: &str, arch: (i32, i32)) -> Result<(Vec<u8>, bool)> {
    let api = toolkit::nvrtc()?;
    let opts = nvrtc::options(arch);
    let key = cache::key(source, &opts, arch, api.version);
    if let Some(bin) = cache::load(&key) {
        return Ok((bin, true));
    }
    let bin = api.compile(name, source, &opts)?;
    // A cache that cannot be written only costs the next process a compile.
    let _ = cache::store(&key, &bin);
    Ok((bin, false))
}
