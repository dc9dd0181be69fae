//! Run-time compilation of `kernels/` to CUBIN for one exact architecture (so the PTX ISA can
//! never be newer than what the driver accepts).

use std::ffi::CString;

use cudarc::nvrtc::{result, sys};

use crate::error::{Error, Result};

/// Whether libnvrtc can be opened (after `libs::preload`).
pub fn present() -> bool {
    // libnvrtc dlopens its builtins by bare name: load them first from the same folder.
    super::libs::preload("libnvrtc-builtins.so.13.0");
    super::libs::preload("libnvrtc.so.13");
    // SAFETY: only probes with dlopen.
    unsafe { sys::is_culib_present() }
}

/// NVRTC's (major, minor) version.
pub fn version() -> Result<(i32, i32)> {
    if !present() {
        return Err(Error::device("NVRTC (libnvrtc.so.13) was not found"));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| Error::Cuda(format!("nvrtcVersion failed: {e:?}")))?;
    Ok((major, minor))
}

/// Compile one translation unit to a CUBIN for `sm_{major}{minor}`.
pub fn compile_cubin(name: &str, source: &str, arch: (i32, i32)) -> Result<Vec<u8>> {
    if !present() {
        return Err(Error::device(
            "NVRTC (libnvrtc.so.13) was not found: `pip install nvidia-cuda-nvrtc==13.0.*` or put \
             CUDA 13's lib64 on LD_LIBRARY_PATH",
        ));
    }
    let src = CString::new(source).map_err(|_| Error::Internal("NUL in kernel source".into()))?;
    let cname = CString::new(format!("{name}.cu")).expect("module names have no NUL");
    let prog = result::create_program(&src, Some(&cname))
        .map_err(|e| Error::Cuda(format!("nvrtcCreateProgram({name}): {e:?}")))?;
    let opts = [
        format!("--gpu-architecture=sm_{}{}", arch.0, arch.1),
        "--std=c++17".to_string(),
        "-default-device".to_string(),
        "-lineinfo".to_string(),
    ];
    // SAFETY: prog is live until destroy_program below.
    let compiled = unsafe { result::compile_program(prog, &opts) };
    let out = match compiled {
        Ok(()) => cubin_of(prog),
        Err(e) => {
            let log = unsafe { result::get_program_log(prog) }
                .map(|chars| {
                    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
                    String::from_utf8_lossy(&bytes)
                        .trim_end_matches('\0')
                        .to_string()
                })
                .unwrap_or_default();
            Err(Error::Internal(format!(
                "NVRTC could not compile kernels/{name}.cu for sm_{}{} ({e:?}):\n{log}",
                arch.0, arch.1
            )))
        }
    };
    // SAFETY: prog was created above and is not used afterwards.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

fn cubin_of(prog: sys::nvrtcProgram) -> Result<Vec<u8>> {
    let mut size = 0usize;
    // SAFETY: prog compiled successfully; the buffer has the size NVRTC reports.
    unsafe {
        sys::nvrtcGetCUBINSize(prog, &mut size)
            .result()
            .map_err(|e| Error::Cuda(format!("nvrtcGetCUBINSize: {e:?}")))?;
        let mut buf = vec![0u8; size];
        sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut _)
            .result()
            .map_err(|e| Error::Cuda(format!("nvrtcGetCUBIN: {e:?}")))?;
        Ok(buf)
    }
}
