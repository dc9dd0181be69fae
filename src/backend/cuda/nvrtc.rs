//! NVRTC's entry points (NVRTC 12 or 13, opened by full path: `libs` says why not through
//! cudarc) and the options kernels are compiled with: CUBIN for one exact architecture, so no
//! driver JIT step is needed and the PTX ISA can never be newer than what the driver accepts.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

use super::libs::{self, sym};
use crate::error::{Error, Result};

type Prog = *mut c_void;

/// NVRTC's entry points (a stable C ABI across CUDA 12 and 13).
pub struct Api {
    _lib: libloading::Library,
    /// (major, minor), from nvrtcVersion.
    pub version: (i32, i32),
    create: unsafe extern "C" fn(
        *mut Prog,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> c_int,
    compile: unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> c_int,
    log_size: unsafe extern "C" fn(Prog, *mut usize) -> c_int,
    log: unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
    cubin_size: unsafe extern "C" fn(Prog, *mut usize) -> c_int,
    cubin: unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut Prog) -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
}

// SAFETY: NVRTC's functions are thread safe; the struct only holds function pointers and the
// library handle that keeps them valid.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

impl Api {
    /// Open the NVRTC at `path` (after its builtins, which NVRTC opens by bare name), check
    /// that it belongs to CUDA `toolkit`. Err: why it cannot be used.
    pub fn load(path: &Path, toolkit: u32) -> std::result::Result<Api, String> {
        if let Some(dir) = path.parent() {
            let builtins = std::fs::read_dir(dir).into_iter().flatten().flatten();
            for e in builtins {
                let name = e.file_name().to_string_lossy().to_string();
                if name.starts_with(&format!("libnvrtc-builtins.so.{toolkit}.")) {
                    // Best effort: NVRTC reports a missing builtins library when compiling.
                    if let Ok(lib) = libs::open(&e.path(), true) {
                        std::mem::forget(lib);
                    }
                }
            }
        }
        let lib = libs::open(path, false)?;
        // SAFETY: the signatures of nvrtc.h.
        let api = unsafe {
            Api {
                version: (0, 0),
                create: sym(&lib, "nvrtcCreateProgram")?,
                compile: sym(&lib, "nvrtcCompileProgram")?,
                log_size: sym(&lib, "nvrtcGetProgramLogSize")?,
                log: sym(&lib, "nvrtcGetProgramLog")?,
                cubin_size: sym(&lib, "nvrtcGetCUBINSize")?,
                cubin: sym(&lib, "nvrtcGetCUBIN")?,
                destroy: sym(&lib, "nvrtcDestroyProgram")?,
                error_string: sym(&lib, "nvrtcGetErrorString")?,
                _lib: lib,
            }
        };
        // SAFETY: as above.
        let version_fn: unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int =
            unsafe { sym(&api._lib, "nvrtcVersion")? };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: plain out-parameters.
        let r = unsafe { version_fn(&mut major, &mut minor) };
        if r != 0 {
            return Err(format!("nvrtcVersion failed ({r})"));
        }
        if major != toolkit as i32 {
            return Err(format!("reports NVRTC {major}.{minor}, not CUDA {toolkit}"));
        }
        Ok(Api {
            version: (major, minor),
            ..api
        })
    }

    fn err(&self, what: &str, r: c_int) -> Error {
        // SAFETY: NVRTC returns a static string for any code.
        let s = unsafe { CStr::from_ptr((self.error_string)(r)) };
        Error::Cuda(format!("{what}: {}", s.to_string_lossy()))
    }

    fn check(&self, what: &str, r: c_int) -> Result<()> {
        if r == 0 {
            Ok(())
        } else {
            Err(self.err(what, r))
        }
    }

    fn program_log(&self, prog: Prog) -> String {
        let mut n = 0usize;
        // SAFETY: prog is live; the buffer has the size NVRTC reports.
        unsafe {
            if (self.log_size)(prog, &mut n) != 0 || n == 0 {
                return String::new();
            }
            let mut buf = vec![0u8; n];
            if (self.log)(prog, buf.as_mut_ptr().cast()) != 0 {
                return String::new();
            }
            String::from_utf8_lossy(&buf)
                .trim_end_matches('\0')
                .to_string()
        }
    }

    /// Compile `source` (named `name`.cu) with `opts` to a CUBIN, on skyconv's number of
    /// threads where this NVRTC can split a module (`split_compile`).
    pub fn compile(&self, name: &str, source: &str, opts: &[String]) -> Result<Vec<u8>> {
        let src =
            CString::new(source).map_err(|_| Error::Internal("NUL in kernel source".into()))?;
        let cname = CString::new(format!("{name}.cu")).expect("module names have no NUL");
        let threads = crate::backend::threads::num_threads()?;
        let copts: Vec<CString> = opts
            .iter()
            .cloned()
            .chain(split_compile(self.version, threads))
            .map(|o| CString::new(o).expect("options have no NUL"))
            .collect();
        let ptrs: Vec<*const c_char> = copts.iter().map(|o| o.as_ptr()).collect();
        let mut prog: Prog = std::ptr::null_mut();
        // SAFETY: valid C strings; no headers.
        let r = unsafe {
            (self.create)(
                &mut prog,
                src.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        self.check(&format!("nvrtcCreateProgram({name})"), r)?;
        // SAFETY: prog is live until destroy below; the options outlive the call.
        let r = unsafe { (self.compile)(prog, ptrs.len() as c_int, ptrs.as_ptr()) };
        let out = if r == 0 {
            let mut size = 0usize;
            // SAFETY: compiled; the buffer has the size NVRTC reports.
            unsafe {
                self.check("nvrtcGetCUBINSize", (self.cubin_size)(prog, &mut size))
                    .and_then(|()| {
                        let mut buf = vec![0u8; size];
                        self.check("nvrtcGetCUBIN", (self.cubin)(prog, buf.as_mut_ptr().cast()))
                            .map(|()| buf)
                    })
            }
        } else {
            let log = self.program_log(prog);
            Err(Error::Internal(format!(
                "NVRTC {}.{} could not compile kernels/{name}.cu ({}):\n{log}",
                self.version.0,
                self.version.1,
                self.err("", r)
            )))
        };
        // SAFETY: created above, not used afterwards.
        unsafe { (self.destroy)(&mut prog) };
        out
    }
}

/// NVRTC 12.1 and later optimise a module's kernels on several threads with this option: the
/// S+C module, with its register-ring variants, compiles in 17 s instead of 28 s on 2 cores.
/// It changes how the compiler schedules its work, not what the kernels do, so it stays out of
/// `options` (the cache key).
fn split_compile(version: (i32, i32), threads: usize) -> Option<String> {
    (version >= (12, 1) && threads > 1).then(|| format!("-split-compile={threads}"))
}

/// The options every kernel module is compiled with, for `sm_{major}{minor}`.
pub fn options(arch: (i32, i32)) -> Vec<String> {
    vec![
        format!("--gpu-architecture=sm_{}{}", arch.0, arch.1),
        "--std=c++17".to_string(),
        "-default-device".to_string(),
        "-lineinfo".to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::split_compile;

    #[test]
    fn split_compile_from_nvrtc_12_1_on_several_threads() {
        assert_eq!(split_compile((12, 0), 16), None);
        assert_eq!(
            split_compile((12, 1), 16).as_deref(),
            Some("-split-compile=16")
        );
        assert_eq!(
            split_compile((13, 0), 2).as_deref(),
            Some("-split-compile=2")
        );
        assert_eq!(split_compile((13, 0), 1), None);
    }
}
