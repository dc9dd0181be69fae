//! The CUDA toolkit libraries this process uses: searched and chosen once (`libs::select`), on
//! the first GPU probe or kernel compile, for the driver found then. The choice is remembered
//! on disk (`lib_record`): a process that finds its record opens NVRTC only when a kernel
//! module misses the CUBIN cache and cuFFT only at its first FFT plan, instead of both at the
//! first probe (issue 18: a warm first call need not load 400 MB of libraries).

use std::sync::OnceLock;

use super::libs::{self, Candidate, Lib, Rejected};
use super::{fft_api, lib_record, nvrtc};
use crate::backend::trace;
use crate::error::{Error, Result};

/// A chosen library: its candidate, its version, and its entry points once opened.
pub struct Chosen<A, V> {
    pub candidate: Candidate,
    /// NVRTC: (major, minor); cuFFT: cufftGetVersion's value.
    pub version: V,
    api: OnceLock<std::result::Result<A, String>>,
}

impl<A, V> Chosen<A, V> {
    fn opened(candidate: Candidate, version: V, api: A) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(Ok(api));
        Chosen {
            candidate,
            version,
            api: cell,
        }
    }

    fn remembered(candidate: Candidate, version: V) -> Self {
        Chosen {
            candidate,
            version,
            api: OnceLock::new(),
        }
    }

    /// Whether the library has been opened in this process.
    pub fn is_open(&self) -> bool {
        self.api.get().is_some_and(|r| r.is_ok())
    }
}

/// The libraries chosen, and what was rejected.
pub struct Toolkit {
    /// cuDriverGetVersion's value, if a driver was found.
    pub driver: Option<i32>,
    pub toolkit: Option<u32>,
    /// SKYCONV_CUDA_VERSION, if set.
    pub only: Option<u32>,
    pub nvrtc: Option<Chosen<nvrtc::Api, (i32, i32)>>,
    pub cufft: Option<Chosen<fft_api::Api, i32>>,
    pub rejected: Vec<Rejected>,
    pub dirs: Vec<(std::path::PathBuf, String)>,
    /// A bad SKYCONV_CUDA_VERSION.
    pub error: Option<String>,
    /// The name of the on-disk record of this choice, if the cache is on; `from_record`:
    /// whether the choice was read from it (libraries opened on first use).
    pub record: Option<String>,
    pub from_record: bool,
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

/// Choose among `cands` (found in `dirs`) for `driver`, opening the libraries; `only`
/// restricts to one toolkit.
fn choose_among(
    dirs: Vec<(std::path::PathBuf, String)>,
    cands: &[Candidate],
    driver: Option<i32>,
    only: Option<u32>,
) -> Toolkit {
    let sel = libs::select(cands, driver, only, |c| {
        trace::timed(
            "library open",
            || format!("{} {}", c.lib.name(), c.path.display()),
            || open(c),
        )
    });
    Toolkit {
        driver,
        toolkit: sel.toolkit,
        only,
        nvrtc: sel.nvrtc.and_then(|(c, o)| match o {
            Opened::Nvrtc(a) => Some(Chosen::opened(c, a.version, a)),
            Opened::Cufft(_) => None,
        }),
        cufft: sel.cufft.and_then(|(c, o)| match o {
            Opened::Cufft(a) => Some(Chosen::opened(c, a.version, a)),
            Opened::Nvrtc(_) => None,
        }),
        rejected: sel.rejected,
        dirs,
        error: None,
        record: None,
        from_record: false,
    }
}

impl Toolkit {
    fn to_record(&self) -> lib_record::Record {
        lib_record::Record {
            toolkit: self.toolkit,
            nvrtc: self
                .nvrtc
                .as_ref()
                .map(|c| (c.candidate.clone(), c.version)),
            cufft: self
                .cufft
                .as_ref()
                .map(|c| (c.candidate.clone(), c.version)),
            rejected: self.rejected.clone(),
        }
    }

    fn from_record(
        r: lib_record::Record,
        dirs: Vec<(std::path::PathBuf, String)>,
        driver: Option<i32>,
        only: Option<u32>,
        key: String,
    ) -> Toolkit {
        Toolkit {
            driver,
            toolkit: r.toolkit,
            only,
            nvrtc: r.nvrtc.map(|(c, v)| Chosen::remembered(c, v)),
            cufft: r.cufft.map(|(c, v)| Chosen::remembered(c, v)),
            rejected: r.rejected,
            dirs,
            error: None,
            record: Some(key),
            from_record: true,
        }
    }
}

/// Search, then take the remembered choice for this situation or choose (opening the
/// libraries) and remember it.
fn search(driver: Option<i32>, only: Option<u32>) -> Toolkit {
    let dirs = libs::search_dirs();
    let cands = libs::scan(&dirs);
    let key = lib_record::dir().map(|_| lib_record::key(driver, only, &dirs, &cands));
    if let Some(k) = &key {
        if let Some(r) = lib_record::load(k) {
            return Toolkit::from_record(r, dirs, driver, only, k.clone());
        }
    }
    let mut tk = choose_among(dirs, &cands, driver, only);
    if let Some(k) = &key {
        lib_record::store(k, &tk.to_record());
    }
    tk.record = key;
    tk
}

static TOOLKIT: OnceLock<Toolkit> = OnceLock::new();

/// The process's toolkit, chosen on first use for the driver present then (every toolkit is
/// accepted where there is no driver, e.g. compiling kernels on a machine without a GPU).
pub fn get() -> &'static Toolkit {
    TOOLKIT.get_or_init(|| {
        trace::timed(
            "cuda libraries",
            || "search and choice of NVRTC and cuFFT".into(),
            || {
                let driver = super::driver_version_if_present();
                let (only, error) = match libs::version_override() {
                    Ok(v) => (v, None),
                    Err(e) => (None, Some(e)),
                };
                let mut tk = search(driver, only);
                tk.error = error;
                tk
            },
        )
    })
}

fn nvrtc_missing(tk: &Toolkit) -> Error {
    Error::device(format!(
        "NVRTC was not found{}: {} (or put the lib folder of a CUDA 12 or 13 toolkit on \
         LD_LIBRARY_PATH){}",
        tk.driver
            .map(|d| format!(" for the driver's CUDA {}", libs::version_string(d)))
            .unwrap_or_default(),
        libs::pip_hint(tk.driver, tk.only),
        tk.rejected_note()
    ))
}

/// The entry points of one kind of library, out of what `open` returned.
trait FromOpened: Sized {
    fn take(o: Opened) -> Option<Self>;
}

impl FromOpened for nvrtc::Api {
    fn take(o: Opened) -> Option<Self> {
        match o {
            Opened::Nvrtc(a) => Some(a),
            Opened::Cufft(_) => None,
        }
    }
}

impl FromOpened for fft_api::Api {
    fn take(o: Opened) -> Option<Self> {
        match o {
            Opened::Cufft(a) => Some(a),
            Opened::Nvrtc(_) => None,
        }
    }
}

/// Open a remembered library on first use (a library that no longer opens: its record is
/// forgotten, so the next process searches afresh).
fn opened<'a, A: FromOpened, V>(tk: &Toolkit, c: &'a Chosen<A, V>, lib: Lib) -> Result<&'a A> {
    let r = c.api.get_or_init(|| {
        let got = trace::timed(
            "library open",
            || {
                format!(
                    "{} {} (remembered choice)",
                    lib.name(),
                    c.candidate.path.display()
                )
            },
            || open(&c.candidate),
        );
        got.and_then(|o| A::take(o).ok_or_else(|| "is not the library expected".to_string()))
    });
    match r {
        Ok(a) => Ok(a),
        Err(why) => {
            if let Some(k) = &tk.record {
                lib_record::forget(k);
            }
            Err(Error::device(format!(
                "the {} chosen for this machine ({}) {why}; the choice is searched again in \
                 the next process",
                lib.name(),
                c.candidate.path.display()
            )))
        }
    }
}

/// Whether an NVRTC was chosen (without opening it): the GPU engine can run.
pub fn usable() -> Result<()> {
    let tk = get();
    match &tk.nvrtc {
        Some(_) => Ok(()),
        None => Err(nvrtc_missing(tk)),
    }
}

/// NVRTC's (major, minor) version, without opening it when the choice was remembered.
pub fn nvrtc_version() -> Result<(i32, i32)> {
    let tk = get();
    match &tk.nvrtc {
        Some(c) => Ok(c.version),
        None => Err(nvrtc_missing(tk)),
    }
}

/// The NVRTC chosen for this process, opened (DeviceError naming what is missing).
pub fn nvrtc() -> Result<&'static nvrtc::Api> {
    let tk = get();
    match &tk.nvrtc {
        Some(c) => opened(tk, c, Lib::Nvrtc),
        None => Err(nvrtc_missing(tk)),
    }
}

/// The cuFFT chosen for this process, opened (DeviceError naming what is missing).
pub fn cufft() -> Result<&'static fft_api::Api> {
    let tk = get();
    match &tk.cufft {
        Some(c) => opened(tk, c, Lib::Cufft),
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
