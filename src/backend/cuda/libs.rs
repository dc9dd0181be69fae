//! Finding CUDA's NVRTC and cuFFT of CUDA 12 or 13 and choosing the toolkit the driver can run.
//!
//! cudarc (built with `dynamic-loading`) opens NVRTC and cuFFT by bare name, trying
//! `libnvrtc.so`, then `.so.13`, `.so.12`, ... in that fixed order and keeping the first it gets
//! for the life of the process: it would pick CUDA 13's library on a CUDA 12 driver whenever one
//! is on the loader's path, and an unversioned `libnvrtc.so` before either. So skyconv opens
//! NVRTC and cuFFT itself (`nvrtc::Api`, `fft_api::Api`), by full path, from the folder this
//! module chooses; only the driver (`libcuda.so.1`, one soname for every CUDA version) goes
//! through cudarc.
//!
//! Search order (most specific first): the folders the Python package passes (pip's
//! `nvidia/cu13/lib`, `nvidia/cuda_nvrtc/lib`, `nvidia/cufft/lib` on sys.path and
//! `SKYCONV_CUDA_LIB_DIRS`), `$CONDA_PREFIX/lib`, `CUDA_HOME` / `CUDA_PATH`, `/usr/local/cuda*`,
//! `LD_LIBRARY_PATH`, then the system's library folders (a distribution's CUDA packages). A toolkit newer than the driver is rejected (a CUDA 13 library needs
//! a 13.x driver); within one major version any minor runs (CUDA's minor-version compatibility:
//! kernels are compiled to CUBIN, never PTX, so no JIT step needs a newer driver).
//! `SKYCONV_CUDA_VERSION=12|13` restricts the choice to one toolkit.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

static EXTRA_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Toolkit major versions skyconv can use, newest first.
pub const TOOLKITS: [u32; 2] = [13, 12];

/// The two libraries the GPU engine needs besides the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lib {
    Nvrtc,
    Cufft,
}

impl Lib {
    pub fn name(self) -> &'static str {
        match self {
            Lib::Nvrtc => "NVRTC",
            Lib::Cufft => "cuFFT",
        }
    }

    /// The library's file name (soname) in CUDA `toolkit` (cuFFT's major version is one less
    /// than CUDA's: cuFFT 11 ships with CUDA 12, cuFFT 12 with CUDA 13).
    pub fn soname(self, toolkit: u32) -> String {
        match self {
            Lib::Nvrtc => format!("libnvrtc.so.{toolkit}"),
            Lib::Cufft => format!("libcufft.so.{}", toolkit - 1),
        }
    }
}

/// A library file found in a search folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub lib: Lib,
    /// CUDA major version of the toolkit it belongs to (from its soname).
    pub toolkit: u32,
    pub path: PathBuf,
    /// Where the folder came from ("python", "conda", "CUDA_HOME", ...).
    pub source: String,
}

/// A candidate not used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub path: PathBuf,
    pub reason: String,
}

/// The outcome of a search: the toolkit chosen (None: no usable NVRTC), the library picked
/// for each of NVRTC and cuFFT (with what `load` returned for it), and the rejected ones.
#[derive(Debug)]
pub struct Selection<T> {
    pub toolkit: Option<u32>,
    pub nvrtc: Option<(Candidate, T)>,
    pub cufft: Option<(Candidate, T)>,
    pub rejected: Vec<Rejected>,
    /// Folders searched, in order, with their source.
    pub dirs: Vec<(PathBuf, String)>,
}

/// Folders to search besides the built-in ones (set by the Python package at import).
pub fn set_search_dirs(dirs: Vec<PathBuf>) {
    *EXTRA_DIRS.lock().unwrap_or_else(|e| e.into_inner()) = dirs;
}

fn env_dirs(var: &str) -> Vec<PathBuf> {
    std::env::var_os(var)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// `/usr/local/cuda-X.Y/lib64` folders, newest version first.
fn usr_local_cuda() -> Vec<PathBuf> {
    let mut vers: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir("/usr/local")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let v = name.strip_prefix("cuda-")?;
            let key = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
            Some((key, e.path().join("lib64")))
        })
        .collect();
    vers.sort_by(|a, b| b.0.cmp(&a.0));
    let mut out = vec![PathBuf::from("/usr/local/cuda/lib64")];
    out.extend(vers.into_iter().map(|(_, p)| p));
    out
}

/// Every folder searched, in order, with where it came from; duplicates removed.
pub fn search_dirs() -> Vec<(PathBuf, String)> {
    let mut dirs: Vec<(PathBuf, String)> = EXTRA_DIRS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|d| (d.clone(), "python".to_string()))
        .collect();
    if let Some(prefix) = std::env::var_os("CONDA_PREFIX").filter(|v| !v.is_empty()) {
        dirs.push((PathBuf::from(prefix).join("lib"), "conda".into()));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let root = PathBuf::from(root);
            dirs.push((root.join("lib64"), var.into()));
            dirs.push((root.join("lib"), var.into()));
        }
    }
    for d in usr_local_cuda() {
        dirs.push((d, "/usr/local/cuda".into()));
    }
    for d in env_dirs("LD_LIBRARY_PATH") {
        dirs.push((d, "LD_LIBRARY_PATH".into()));
    }
    let multiarch = format!("/usr/lib/{}-linux-gnu", std::env::consts::ARCH);
    for d in [multiarch.as_str(), "/usr/lib64", "/usr/lib"] {
        dirs.push((PathBuf::from(d), "system".into()));
    }
    dedup(dirs)
}

fn dedup(dirs: Vec<(PathBuf, String)>) -> Vec<(PathBuf, String)> {
    let mut seen = std::collections::HashSet::new();
    dirs.into_iter()
        .filter(|(d, _)| d.is_dir())
        .filter(|(d, _)| seen.insert(std::fs::canonicalize(d).unwrap_or_else(|_| d.clone())))
        .collect()
}

/// Library files in `dirs`, in folder order, then newest toolkit first.
pub fn scan(dirs: &[(PathBuf, String)]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (dir, source) in dirs {
        for lib in [Lib::Nvrtc, Lib::Cufft] {
            for toolkit in TOOLKITS {
                let path = dir.join(lib.soname(toolkit));
                if path.exists() {
                    out.push(Candidate {
                        lib,
                        toolkit,
                        path,
                        source: source.clone(),
                    });
                }
            }
        }
    }
    out
}

/// `SKYCONV_CUDA_VERSION` (12 or 13), if set; an error for any other value (the checked read
/// is `backend::env::cuda_version`, which device resolution runs before touching a GPU).
pub fn version_override() -> std::result::Result<Option<u32>, String> {
    crate::backend::env::cuda_version().map_err(|e| e.to_string())
}

/// "12.4" for the driver version 12040.
pub fn version_string(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// Why a toolkit cannot be used with this driver and override, or None if it can. `driver`
/// is cuDriverGetVersion's value (12040 for 12.4); None (no driver: compiling on a machine
/// without a GPU) accepts every toolkit.
pub fn toolkit_refused(toolkit: u32, driver: Option<i32>, only: Option<u32>) -> Option<String> {
    if let Some(v) = only {
        if v != toolkit {
            return Some(format!("SKYCONV_CUDA_VERSION={v} asks for CUDA {v}"));
        }
    }
    match driver {
        Some(d) if d < toolkit as i32 * 1000 => Some(format!(
            "CUDA {toolkit} library, newer than the driver (it supports CUDA {})",
            version_string(d)
        )),
        _ => None,
    }
}

/// Choose the toolkit and its libraries among `cands` (pure logic apart from `load`).
///
/// Toolkits are tried newest first, skipping those `toolkit_refused` refuses; within one, the
/// candidates of each library in search order, `load` opening one (Err: why it is broken). The
/// first toolkit whose NVRTC and cuFFT both load wins; failing that, the newest with NVRTC
/// alone (kernels work, FFT-based calls report the missing cuFFT).
pub fn select<T>(
    cands: &[Candidate],
    driver: Option<i32>,
    only: Option<u32>,
    mut load: impl FnMut(&Candidate) -> std::result::Result<T, String>,
) -> Selection<T> {
    let mut sel = Selection {
        toolkit: None,
        nvrtc: None,
        cufft: None,
        rejected: Vec::new(),
        dirs: Vec::new(),
    };
    let mut fallback: Option<(u32, Candidate, T)> = None;
    for toolkit in TOOLKITS {
        if let Some(why) = toolkit_refused(toolkit, driver, only) {
            for c in cands.iter().filter(|c| c.toolkit == toolkit) {
                sel.rejected.push(Rejected {
                    path: c.path.clone(),
                    reason: why.clone(),
                });
            }
            continue;
        }
        let mut first = |lib: Lib, rejected: &mut Vec<Rejected>| {
            for c in cands
                .iter()
                .filter(|c| c.toolkit == toolkit && c.lib == lib)
            {
                match load(c) {
                    Ok(t) => return Some((c.clone(), t)),
                    Err(reason) => rejected.push(Rejected {
                        path: c.path.clone(),
                        reason,
                    }),
                }
            }
            None
        };
        let Some(nv) = first(Lib::Nvrtc, &mut sel.rejected) else {
            continue;
        };
        if let Some(ff) = first(Lib::Cufft, &mut sel.rejected) {
            if let Some((_, c, _)) = fallback.take() {
                sel.rejected.push(Rejected {
                    path: c.path,
                    reason: format!(
                        "CUDA {toolkit} has both NVRTC and cuFFT here; CUDA {} lacks cuFFT",
                        c.toolkit
                    ),
                });
            }
            sel.toolkit = Some(toolkit);
            sel.nvrtc = Some(nv);
            sel.cufft = Some(ff);
            return sel;
        }
        if fallback.is_none() {
            fallback = Some((toolkit, nv.0, nv.1));
        }
    }
    if let Some((toolkit, c, t)) = fallback {
        sel.toolkit = Some(toolkit);
        sel.nvrtc = Some((c, t));
    }
    sel
}

/// Open `path` (lazy binding: cuFFT alone is 280 MB), its symbols global or local to it,
/// keeping the error text.
pub fn open(path: &Path, global: bool) -> std::result::Result<libloading::Library, String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_LAZY, RTLD_LOCAL};
    let flags = RTLD_LAZY | if global { RTLD_GLOBAL } else { RTLD_LOCAL };
    // SAFETY: loading a CUDA library runs only its own initialisers.
    unsafe { Library::open(Some(path), flags) }
        .map(Into::into)
        .map_err(|e| format!("cannot be loaded: {e}"))
}

/// The `pip install` command that brings NVRTC and cuFFT matching `driver` (and the
/// SKYCONV_CUDA_VERSION override `only`).
pub fn pip_hint(driver: Option<i32>, only: Option<u32>) -> &'static str {
    match (only, driver) {
        (Some(12), _) => "pip install 'skyconv[cuda12]'",
        (Some(_), _) => "pip install 'skyconv[cuda13]'",
        (None, Some(d)) if d < 13000 => "pip install 'skyconv[cuda12]'",
        _ => "pip install 'skyconv[cuda13]'",
    }
}

/// A function pointer of type `F` named `name` in `lib`.
///
/// # Safety
/// `F` must be the symbol's true C signature.
pub unsafe fn sym<F: Copy>(
    lib: &libloading::Library,
    name: &str,
) -> std::result::Result<F, String> {
    // SAFETY: the caller gives the true signature.
    unsafe { lib.get::<F>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|_| format!("lacks the symbol {name}"))
}
