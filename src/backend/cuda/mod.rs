//! The CUDA engine's shared pieces: probing for a usable GPU without creating a context, the
//! lazily created context and stream, NVRTC modules compiled once per process, pinned staging
//! buffers for host<->device copies, and stage timings. Families use what this re-exports and
//! never name cudarc themselves.

pub mod fft;
pub mod host_pool;
mod kernels;
pub mod libs;
pub mod nvrtc;
pub mod profile;
pub mod ring_fft;
pub mod transfer;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{result as dr, sys as dsys, CudaContext, CudaModule};

pub use cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
    ValidAsZeroBits,
};
pub use kernels::MODULES;

use crate::error::{Error, Result};

/// Threads per block of skyconv's element-wise (grid-stride) kernels.
pub const THREADS: u32 = 256;

/// Launch shape of a grid-stride kernel over `n` elements: a thread per element, at most
/// `max_blocks` blocks of `THREADS` (the kernel loops over the rest).
pub fn grid_stride(n: usize, max_blocks: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            n.div_ceil(THREADS as usize).clamp(1, max_blocks) as u32,
            1,
            1,
        ),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Oldest driver API we load symbols for (cudarc's `cuda-13000` feature).
const MIN_DRIVER: i32 = 13000;

fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => Err(Error::device(format!(
            "{what} failed (the CUDA library aborted)"
        ))),
    }
}

fn driver_present() -> bool {
    libs::preload("libcuda.so.1");
    // SAFETY: only probes with dlopen.
    unsafe { dsys::is_culib_present() }
}

fn driver_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: plain out-parameter; the driver library is present.
    unsafe { dsys::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(|e| Error::device(format!("cuDriverGetVersion failed: {e}")))?;
    Ok(v)
}

fn probe() -> Result<()> {
    if std::env::var_os("SKYCONV_DISABLE_CUDA").is_some_and(|v| !v.is_empty() && v != "0") {
        return Err(Error::device("CUDA is disabled by SKYCONV_DISABLE_CUDA"));
    }
    if !driver_present() {
        return Err(Error::device(
            "no NVIDIA driver was found (libcuda.so.1 cannot be loaded)",
        ));
    }
    guarded("cuInit", || {
        let v = driver_version()?;
        if v < MIN_DRIVER {
            return Err(Error::device(format!(
                "the NVIDIA driver supports CUDA {}.{}, skyconv needs CUDA 13.0 or newer",
                v / 1000,
                (v % 1000) / 10
            )));
        }
        dr::init().map_err(|e| Error::device(format!("cuInit failed: {e}")))?;
        let n = dr::device::get_count()
            .map_err(|e| Error::device(format!("cannot count CUDA devices: {e}")))?;
        if n < 1 {
            return Err(Error::device("the NVIDIA driver reports no CUDA device"));
        }
        Ok(())
    })?;
    if !nvrtc::present() {
        return Err(Error::device(
            "NVRTC (libnvrtc.so.13) was not found: `pip install nvidia-cuda-nvrtc==13.0.*` or \
             put CUDA 13's lib64 on LD_LIBRARY_PATH",
        ));
    }
    Ok(())
}

static PROBED: Mutex<Option<(u32, std::result::Result<(), String>)>> = Mutex::new(None);

/// Whether a GPU can be used in this process (cached; never creates a context).
pub fn status() -> std::result::Result<(), String> {
    let pid = std::process::id();
    if let Some(gpu) = GPU.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if gpu.pid != pid {
            return Err(
                "CUDA was initialised in a parent process and cannot be used after \
                        fork(); use the 'spawn' start method for GPU work in child processes"
                    .into(),
            );
        }
    }
    let mut cached = PROBED.lock().unwrap_or_else(|e| e.into_inner());
    match cached.as_ref() {
        Some((p, r)) if *p == pid => r.clone(),
        _ => {
            let r = probe().map_err(|e| e.to_string());
            *cached = Some((pid, r.clone()));
            r
        }
    }
}

/// A device, its context and stream, and the modules compiled for it.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    /// The stream every kernel runs on.
    pub stream: Arc<CudaStream>,
    /// A second stream for host<->device copies that overlap kernels on `stream`. Work on it is
    /// ordered against `stream` only by events the caller records and waits on; a caller that
    /// queues copies here synchronises it before the buffers involved are freed.
    pub copy: Arc<CudaStream>,
    /// Compute capability (major, minor).
    pub arch: (i32, i32),
    pid: u32,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    staging: Mutex<Option<transfer::Staging>>,
    busy: Mutex<()>,
}

static GPU: Mutex<Option<Arc<Gpu>>> = Mutex::new(None);

/// The process's GPU (device 0), creating the context on first use.
pub fn gpu() -> Result<Arc<Gpu>> {
    status().map_err(Error::Device)?;
    let mut slot = GPU.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(g) = slot.as_ref() {
        return Ok(g.clone());
    }
    let gpu = guarded("creating the CUDA context", || {
        let ctx = CudaContext::new(0)?;
        // cudarc's cross-stream event tracking is not used: kernels run on `stream`, and
        // copies on `copy` are ordered by explicit events (see `Gpu::copy`).
        // SAFETY: every use of a buffer on `copy` is fenced by such events.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream()?;
        let copy = ctx.new_stream()?;
        let arch = ctx.compute_capability()?;
        Ok(Gpu {
            ctx,
            stream,
            copy,
            arch,
            pid: std::process::id(),
            modules: Mutex::new(HashMap::new()),
            staging: Mutex::new(None),
            busy: Mutex::new(()),
        })
    })?;
    let gpu = Arc::new(gpu);
    *slot = Some(gpu.clone());
    Ok(gpu)
}

impl Gpu {
    /// Serialise GPU calls from several Python threads (one stream, shared staging buffers).
    pub fn exclusive(&self) -> MutexGuard<'_, ()> {
        self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A kernel from `kernels/<module>.cu`, compiling the module on first use.
    pub fn function(&self, module: &'static str, name: &str) -> Result<CudaFunction> {
        let m = {
            let mut mods = self.modules.lock().unwrap_or_else(|e| e.into_inner());
            match mods.get(module) {
                Some(m) => m.clone(),
                None => {
                    let src = kernels::translation_unit(module)
                        .ok_or_else(|| Error::Internal(format!("no kernel module {module}")))?;
                    let cubin = nvrtc::compile_cubin(module, &src, self.arch)?;
                    let m = self
                        .ctx
                        .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))?;
                    mods.insert(module, m.clone());
                    m
                }
            }
        };
        m.load_function(name)
            .map_err(|e| Error::Internal(format!("kernel {module}::{name} not found: {e}")))
    }

    /// Allocate `len` elements on the device, uninitialised.
    ///
    /// # Safety
    /// The caller writes every element before reading it.
    pub unsafe fn alloc<T: DeviceRepr>(&self, len: usize) -> Result<CudaSlice<T>> {
        Ok(self.stream.alloc::<T>(len.max(1))?)
    }

    /// Allocate `len` zeroed elements on the device.
    pub fn alloc_zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>> {
        Ok(self.stream.alloc_zeros::<T>(len.max(1))?)
    }

    /// Copy a small host slice (parameters, tables) to the device.
    pub fn upload_small<T: DeviceRepr>(&self, host: &[T]) -> Result<CudaSlice<T>> {
        Ok(self.stream.clone_htod(host)?)
    }

    /// Wait for all queued work and surface any asynchronous error.
    pub fn sync(&self) -> Result<()> {
        self.stream.synchronize()?;
        self.ctx.check_err()?;
        Ok(())
    }

    /// The device address of `buf`, for kernels that take pointers inside a struct argument.
    /// The caller keeps `buf` alive (and unmoved on the device) while the address is in use.
    pub fn dptr<T>(&self, buf: &CudaSlice<T>) -> u64 {
        use cudarc::driver::DevicePtr;
        let (ptr, _sync) = buf.device_ptr(&self.stream);
        ptr
    }

    /// A new event (no timing) to order work between `stream` and `copy`.
    pub fn event(&self) -> Result<CudaEvent> {
        Ok(self
            .ctx
            .new_event(Some(dsys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?)
    }

    /// (free, total) device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        Ok(self.ctx.mem_get_info()?)
    }

    /// Bytes a call may allocate on the device now: 80% of the free memory, capped by
    /// `SKYCONV_GPU_MEMORY_LIMIT` (bytes; lets tests force the chunked paths on any GPU).
    pub fn budget(&self) -> Result<usize> {
        let (free, _) = self.mem_info()?;
        let mut budget = free / 10 * 8;
        if let Some(limit) = std::env::var("SKYCONV_GPU_MEMORY_LIMIT")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
        {
            budget = budget.min(limit);
        }
        Ok(budget)
    }
}

/// What `backend_info()` reports about CUDA.
#[derive(Debug, Default, Clone)]
pub struct Info {
    pub available: bool,
    pub reason: Option<String>,
    pub device_name: Option<String>,
    pub compute_capability: Option<(i32, i32)>,
    pub total_memory: Option<usize>,
    pub driver_version: Option<i32>,
    pub nvrtc_version: Option<(i32, i32)>,
    pub context_created: bool,
}

/// Describe the GPU without creating a context.
pub fn info() -> Info {
    let mut info = Info::default();
    if driver_present() {
        info.driver_version = guarded("cuDriverGetVersion", driver_version).ok();
    }
    info.nvrtc_version = nvrtc::version().ok();
    match status() {
        Ok(()) => {
            info.available = true;
            let _ = guarded("querying device 0", || {
                let dev = dr::device::get(0)?;
                info.device_name = Some(dr::device::get_name(dev)?);
                // SAFETY: dev comes from device::get.
                unsafe {
                    info.total_memory = Some(dr::device::total_mem(dev)?);
                    use dsys::CUdevice_attribute as A;
                    let major = dr::device::get_attribute(
                        dev,
                        A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    )?;
                    let minor = dr::device::get_attribute(
                        dev,
                        A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    )?;
                    info.compute_capability = Some((major, minor));
                }
                Ok(())
            });
        }
        Err(why) => info.reason = Some(why),
    }
    info.context_created = GPU.lock().map(|g| g.is_some()).unwrap_or(false);
    info
}

/// Compile every kernel module for `arch` (used by the test suite on machines with no GPU).
/// Returns (module, cubin size in bytes).
pub fn compile_all(arch: (i32, i32)) -> Result<Vec<(String, usize)>> {
    MODULES
        .iter()
        .map(|(name, _)| {
            let src = kernels::translation_unit(name).expect("listed module");
            let cubin = nvrtc::compile_cubin(name, &src, arch)?;
            Ok((name.to_string(), cubin.len()))
        })
        .collect()
}
