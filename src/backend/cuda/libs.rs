//! Finding CUDA's shared libraries. cudarc opens them by bare name (libnvrtc.so.13, ...);
//! we first open them by full path from known folders (pip's nvidia-* wheels, CUDA_HOME,
//! /usr/local/cuda) with RTLD_GLOBAL, so that cudarc's later dlopen finds them by soname.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

static EXTRA_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Libraries already opened by `preload` (name -> path).
static LOADED: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);

/// Folders to search besides the loader's own path (set by the Python package at import).
pub fn set_search_dirs(dirs: Vec<PathBuf>) {
    *EXTRA_DIRS.lock().unwrap_or_else(|e| e.into_inner()) = dirs;
}

fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = EXTRA_DIRS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(root) = std::env::var(var) {
            dirs.push(PathBuf::from(&root).join("lib64"));
            dirs.push(PathBuf::from(&root).join("lib"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.push(PathBuf::from("/usr/local/cuda-13/lib64"));
    dirs
}

/// Open `file_name` (e.g. "libnvrtc.so.13") from the first search folder holding it, keeping it
/// loaded for the life of the process. Returns the path used, if any.
pub fn preload(file_name: &str) -> Option<PathBuf> {
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    let loaded = loaded.get_or_insert_with(HashMap::new);
    if let Some(p) = loaded.get(file_name) {
        return Some(p.clone());
    }
    for dir in search_dirs() {
        let path = dir.join(file_name);
        if !path.is_file() {
            continue;
        }
        // SAFETY: loading a CUDA library runs only its own initialisers.
        let lib = unsafe {
            libloading::os::unix::Library::open(
                Some(&path),
                libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
            )
        };
        if let Ok(lib) = lib {
            std::mem::forget(lib);
            loaded.insert(file_name.to_string(), path.clone());
            return Some(path);
        }
    }
    None
}
