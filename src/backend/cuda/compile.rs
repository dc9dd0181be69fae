//! Compiling `kernels/` with the process's NVRTC (`toolkit`), through the on-disk cache.

use super::{cache, nvrtc, toolkit};
use crate::backend::trace;
use crate::error::Result;

/// NVRTC's (major, minor) version (without opening NVRTC when the loader's choice was
/// remembered).
pub fn version() -> Result<(i32, i32)> {
    toolkit::nvrtc_version()
}

/// NVRTC's options for `arch`, with the macros `defines` ("NAME=VALUE" each) defined: a module
/// compiled with definitions is a variant of it (its own CUBIN, its own cache entry).
pub fn options(arch: (i32, i32), defines: &[String]) -> Vec<String> {
    let mut opts = nvrtc::options(arch);
    opts.extend(defines.iter().map(|d| format!("-D{d}")));
    opts
}

/// Compile one translation unit to a CUBIN for `sm_{major}{minor}` (no cache).
pub fn compile_cubin(
    name: &str,
    source: &str,
    arch: (i32, i32),
    defines: &[String],
) -> Result<Vec<u8>> {
    toolkit::nvrtc()?.compile(name, source, &options(arch, defines))
}

/// `compile_cubin` through the on-disk cache: (cubin, whether it came from the cache).
/// NVRTC is opened only on a miss.
pub fn compile_cached(
    name: &str,
    source: &str,
    arch: (i32, i32),
    defines: &[String],
) -> Result<(Vec<u8>, bool)> {
    let (opts, key) = keyed(source, arch, defines)?;
    let found = trace::timed(
        "module cache read",
        || name.to_string(),
        || cache::load(&key),
    );
    if let Some(bin) = found {
        return Ok((bin, true));
    }
    Ok((compile_and_store(name, source, &opts, &key)?, false))
}

/// Compile afresh and replace the cache entry: for a cached CUBIN the driver refused.
pub fn recompile_cached(
    name: &str,
    source: &str,
    arch: (i32, i32),
    defines: &[String],
) -> Result<Vec<u8>> {
    let (opts, key) = keyed(source, arch, defines)?;
    compile_and_store(name, source, &opts, &key)
}

/// The options and the on-disk cache key of a compile.
pub fn keyed(source: &str, arch: (i32, i32), defines: &[String]) -> Result<(Vec<String>, String)> {
    let opts = options(arch, defines);
    let key = cache::key(source, &opts, arch, version()?);
    Ok((opts, key))
}

fn compile_and_store(name: &str, source: &str, opts: &[String], key: &str) -> Result<Vec<u8>> {
    let api = toolkit::nvrtc()?;
    let bin = trace::timed(
        "nvrtc compile",
        || name.to_string(),
        || api.compile(name, source, opts),
    )?;
    // A cache that cannot be written only costs the next process a compile.
    let _ = cache::store(key, &bin);
    Ok(bin)
}
