//! The CUDA toolkit libraries this process uses: searched and opened once (`libs::select`), on
//! the first GPU probe or kernel compile, for the driver found then.

use std::sync::OnceLock;

use super::libs::{self, Candidate, Lib, Rejected};
use super::{fft_api, nvrtc};
use crate::error::{Error, Result};

/// The libraries chosen, and what was rejected.
pub struct Toolkit {
    /// cuDriverGetVersion's value, if a driver was found.
    pub driver: Option<i32>,
    pub toolkit: Option<u32>,
    /// SKYCONV_CUDA_VERSION, if set.
    pub only: Option<u32>,
    pub nvrtc: Option<(Candidate, nvrtc::Api)>,
    pub cufft: Option<(Candidate, fft_api::Api)>,
    pub rejected: Vec<Rejected>,
    pub dirs: Vec<(std::path::PathBuf, String)>,
    /// A bad SKYCONV_CUDA_VERSION.
    pub error: Option<String>,
}

impl Toolkit {
    /// " (rejected: path: reason; ...)" or "".
    pub fn rejected_note(&self) -> String {
        let mut parts: Vec<String> = self
            .rejected
            .iter()
            .map(|r| format!("{}: {}", r.path.display(), r.reason))
            .collect();
        if let Some(e) = &self.error {
            parts.insert(0, e.clone());
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" (rejected: {})", parts.join("; "))
        }
    }
}

/// A library opened by `select`.
pub enum Opened {
    Nvrtc(nvrtc::Api),
    Cufft(fft_api::Api),
}

/// Open a candidate for real.
pub fn open(c: &Candidate) -> std::result::Result<Opened, String> {
    match c.lib {
        Lib::Nvrtc => nvrtc::Api::load(&c.path, c.toolkit).map(Opened::Nvrtc),
        Lib::Cufft => fft_api::Api::load(&c.path, c.toolkit).map(Opened::Cufft),
    }
}

/// Search `dirs` and choose for `driver`; `only` restricts to one toolkit.
pub fn choose(
    dirs: Vec<(std::path::PathBuf, String)>,
    driver: Option<i32>,
    only: Option<u32>,
) -> Toolkit {
    let cands = libs::scan(&dirs);
    let sel = libs::select(&cands, driver, only, open);
    Toolkit {
        driver,
        toolkit: sel.toolkit,
        only,
        nvrtc: sel.nvrtc.and_then(|(c, o)| match o {
            Opened::Nvrtc(a) => Some((c, a)),
            Opened::Cufft(_) => None,
        }),
        cufft: sel.cufft.and_then(|(c, o)| match o {
            Opened::Cufft(a) => Some((c, a)),
            Opened::Nvrtc(_) => None,
        }),
        rejected: sel.rejected,
        dirs,
        error: None,
    }
}

static TOOLKIT: OnceLock<Toolkit> = OnceLock::new();

/// The process's toolkit, chosen on first use for the driver present then (every toolkit is
/// accepted where there is no driver, e.g. compiling kernels on a machine without a GPU).
pub fn get() -> &'static Toolkit {
    TOOLKIT.get_or_init(|| {
        let driver = super::driver_version_if_present();
        let (only, error) = match libs::version_override() {
            Ok(v) => (v, None),
            Err(e) => (None, Some(e)),
        };
        let mut tk = choose(libs::search_dirs(), driver, only);
        tk.error = error;
        tk
    })
}

/// The NVRTC chosen for this process (DeviceError naming what is missing).
pub fn nvrtc() -> Result<&'static nvrtc::Api> {
    let tk = get();
    match &tk.nvrtc {
        Some((_, api)) => Ok(api),
        None => Err(Error::device(format!(
            "NVRTC was not found{}: {} (or put the lib folder of a CUDA 12 or 13 toolkit on \
             LD_LIBRARY_PATH){}",
            tk.driver
                .map(|d| format!(" for the driver's CUDA {}", libs::version_string(d)))
                .unwrap_or_default(),
            libs::pip_hint(tk.driver, tk.only),
            tk.rejected_note()
        ))),
    }
}

/// The cuFFT chosen for this process (DeviceError naming what is missing).
pub fn cufft() -> Result<&'static fft_api::Api> {
    let tk = get();
    match &tk.cufft {
        Some((_, api)) => Ok(api),
        None => {
            let want = match tk.toolkit {
                Some(t) => format!(
                    "cuFFT of CUDA {t} ({}) was not found",
                    libs::Lib::Cufft.soname(t)
                ),
                None => "cuFFT was not found".to_string(),
            };
            Err(Error::device(format!(
                "{want}: {} (or put the lib folder of a CUDA 12 or 13 toolkit on \
                 LD_LIBRARY_PATH){}",
                libs::pip_hint(tk.driver, tk.only),
                tk.rejected_note()
            )))
        }
    }
}
