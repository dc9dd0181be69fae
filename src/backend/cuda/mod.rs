//! The CUDA engine's shared pieces: probing for a usable GPU without creating a context, one
//! lazily created context and stream per GPU ordinal, NVRTC modules compiled once per process
//! (through the on-disk cache), pinned staging buffers for host<->device copies, and stage
//! timings. Families use what this re-exports and never name cudarc themselves; a family's
//! `gpu()` is the GPU of the innermost `on(ordinal, ..)` scope (device 0 outside any).

pub mod admit;
pub mod cache;
pub mod compile;
pub mod device_pool;
pub mod fft;
pub mod fft_api;
pub mod host_pool;
mod kernels;
pub mod lib_record;
pub mod libs;
pub mod nvrtc;
pub mod pace;
pub mod peer;
pub mod profile;
pub mod ring_fft;
pub mod toolkit;
pub mod transfer;

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{result as dr, sys as dsys, CudaContext, CudaModule};

pub use cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceRepr, LaunchArgs,
    LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
pub use kernels::{Variant, MODULES};

use crate::backend::trace;
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

/// Oldest driver skyconv runs on: CUDA 12.0 (the driver API calls skyconv makes all exist
/// there; cudarc resolves each symbol on first use).
const MIN_DRIVER: i32 = 12000;

fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => Err(Error::device(format!(
            "{what} failed (the CUDA library aborted)"
        ))),
    }
}

fn driver_present() -> bool {
    // SAFETY: only probes with dlopen.
    unsafe { dsys::is_culib_present() }
}

/// cuDriverGetVersion's value (12040 for CUDA 12.4) when a driver library loads.
pub fn driver_version_if_present() -> Option<i32> {
    if !driver_present() {
        return None;
    }
    guarded("cuDriverGetVersion", driver_version).ok()
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
    let t0 = std::time::Instant::now();
    let init = guarded("cuInit", || {
        let v = driver_version()?;
        if v < MIN_DRIVER {
            return Err(Error::device(format!(
                "the NVIDIA driver supports CUDA {}, skyconv needs a driver for CUDA 12.0 or \
                 newer",
                libs::version_string(v)
            )));
        }
        dr::init().map_err(|e| Error::device(format!("cuInit failed: {e}")))?;
        let n = dr::device::get_count()
            .map_err(|e| Error::device(format!("cannot count CUDA devices: {e}")))?;
        if n < 1 {
            return Err(Error::device("the NVIDIA driver reports no CUDA device"));
        }
        Ok(())
    });
    trace::record(
        "driver init",
        "dlopen libcuda + cuInit + device count",
        t0.elapsed().as_secs_f64(),
    );
    init?;
    toolkit::usable()?;
    Ok(())
}

static PROBED: Mutex<Option<(u32, std::result::Result<(), String>)>> = Mutex::new(None);

/// Whether a GPU can be used in this process (cached; never creates a context).
pub fn status() -> std::result::Result<(), String> {
    let pid = std::process::id();
    if let Some(gpu) = GPUS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .next()
    {
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
    /// The stream every kernel runs on (at the highest stream priority).
    pub stream: Arc<CudaStream>,
    /// A second stream for host<->device copies that overlap kernels on `stream`. Work on it is
    /// ordered against `stream` only by events the caller records and waits on; a caller that
    /// queues copies here synchronises it before the buffers involved are freed.
    pub copy: Arc<CudaStream>,
    /// Compute capability (major, minor).
    pub arch: (i32, i32),
    /// The device's ordinal (`cuda:N`).
    pub ordinal: u32,
    /// Dynamic shared memory a block may take with four blocks resident on an SM (bytes; at
    /// least the 48 KB any block gets, past it by opting in: `allow_shared`).
    pub shared_four: usize,
    pid: u32,
    /// Loaded modules by name, a variant's name followed by its definitions.
    modules: Mutex<HashMap<String, Arc<CudaModule>>>,
    staging: Mutex<Option<transfer::Staging>>,
    /// Freed memory the device pool keeps for the next call (`device_pool`).
    pool_keep: u64,
    /// Whether `settle` set the pool to give freed memory back (until a call succeeds).
    pool_given_back: AtomicBool,
}

/// Shared memory a block may take without opting in to more (bytes).
pub const SHARED_DEFAULT: usize = 48 * 1024;

/// `Gpu::shared_four` of the context's device.
fn shared_four(ctx: &CudaContext) -> Result<usize> {
    use dsys::CUdevice_attribute as A;
    let attr = |a| ctx.attribute(a).map(|v| v.max(0) as usize);
    Ok(shared_four_of(
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        attr(A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)?,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
    ))
}

/// A quarter of an SM's shared memory less what the driver reserves a block (H100 / H200: 228
/// KB an SM, 1 KB reserved → 56 KB), within what a block may opt in to, and at least 48 KB.
fn shared_four_of(per_sm: usize, reserved: usize, opt_in: usize) -> usize {
    (per_sm / 4)
        .saturating_sub(reserved)
        .min(opt_in)
        .max(SHARED_DEFAULT)
}

/// Let `f` take `bytes` of dynamic shared memory, past the 48 KB a launch gets by default (no-op
/// within it); the caller keeps `bytes` within `Gpu::shared_four` or the device's opt-in limit.
pub fn allow_shared(f: &CudaFunction, bytes: usize) -> Result<()> {
    if bytes > SHARED_DEFAULT {
        use dsys::CUfunction_attribute as F;
        f.set_attribute(
            F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )?;
    }
    Ok(())
}

/// The process's GPUs by ordinal, each created on first use.
static GPUS: Mutex<BTreeMap<u32, Arc<Gpu>>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// The ordinal `gpu()` returns on this thread (set by `on`).
    static ORDINAL: Cell<u32> = const { Cell::new(0) };
}

/// Run `f` with `gpu()` meaning GPU `ordinal` on this thread (families' GPU paths run on the
/// calling thread; the previous ordinal is restored afterwards, also on panic).
pub fn on<R>(ordinal: u32, f: impl FnOnce() -> R) -> R {
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            ORDINAL.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(ORDINAL.with(|o| o.replace(ordinal)));
    f()
}

/// The number of CUDA devices the driver reports (0 when the engine cannot run).
pub fn device_count() -> usize {
    if status().is_err() {
        return 0;
    }
    guarded("counting devices", || {
        Ok(dr::device::get_count().map_err(|e| Error::device(e.to_string()))? as usize)
    })
    .unwrap_or(0)
}

/// The GPU of the current `on` scope (device 0 outside any), its context created on first use.
pub fn gpu() -> Result<Arc<Gpu>> {
    gpu_on(ORDINAL.with(|o| o.get()))
}

/// GPU `ordinal`, its context created on first use.
pub fn gpu_on(ordinal: u32) -> Result<Arc<Gpu>> {
    status().map_err(Error::Device)?;
    if let Some(g) = GPUS.lock().unwrap_or_else(|e| e.into_inner()).get(&ordinal) {
        return Ok(g.clone());
    }
    let count = device_count();
    if ordinal as usize >= count {
        return Err(Error::device(format!(
            "device 'cuda:{ordinal}' requested but the driver reports {count} CUDA device(s)"
        )));
    }
    let mut slot = GPUS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(g) = slot.get(&ordinal) {
        return Ok(g.clone());
    }
    let gpu = guarded("creating the CUDA context", || {
        let ctx = trace::timed(
            "context",
            || format!("cuda:{ordinal} (primary context)"),
            || CudaContext::new(ordinal as usize),
        )?;
        // cudarc's cross-stream event tracking is not used: kernels run on `stream`, and
        // copies on `copy` are ordered by explicit events (see `Gpu::copy`).
        // SAFETY: every use of a buffer on `copy` is fenced by such events.
        unsafe { ctx.disable_event_tracking() };
        // The kernel stream at the highest priority: where a family runs long kernels on a
        // stream of its own beside it (the multi-GPU SHT's Legendre sums, default priority),
        // the short kernels queued here get the SMs first as blocks retire instead of waiting
        // behind a whole launch; alone on the GPU it changes nothing.
        ctx.bind_to_thread()?;
        let (_least, greatest) = dr::stream::get_priority_range()?;
        let stream = ctx.new_stream_with_priority(greatest)?;
        let copy = ctx.new_stream()?;
        let arch = ctx.compute_capability()?;
        let shared_four = shared_four(&ctx)?;
        let (_, total) = ctx.mem_get_info()?;
        let pool_keep = device_pool::keep_of(total)?;
        device_pool::keep_freed(ctx.cu_device(), pool_keep)?;
        Ok(Gpu {
            ctx,
            stream,
            copy,
            arch,
            ordinal,
            shared_four,
            pid: std::process::id(),
            modules: Mutex::new(HashMap::new()),
            staging: Mutex::new(None),
            pool_keep,
            pool_given_back: AtomicBool::new(false),
        })
    })?;
    let gpu = Arc::new(gpu);
    slot.insert(ordinal, gpu.clone());
    Ok(gpu)
}

/// Wait for all work on the opened GPUs among `ordinals` (errors ignored) after a call that
/// failed or was interrupted. Its buffers were freed stream-ordered (`cuMemFreeAsync`), and the
/// default memory pool returns freed memory beyond what it keeps (`device_pool`) to the device
/// only at a synchronisation; a call cut short may have queued its frees after its last one, so
/// without this the process would keep that memory reserved (a different amount for each point
/// of interruption) until its next GPU call. Then the pool gives back all it kept, and what is
/// freed until a call succeeds (`keep_again`).
pub fn settle(ordinals: &[u32]) {
    let open: Vec<Arc<Gpu>> = {
        let gpus = GPUS.lock().unwrap_or_else(|e| e.into_inner());
        ordinals
            .iter()
            .filter_map(|o| gpus.get(o).cloned())
            .collect()
    };
    for g in open {
        let _ = g.ctx.synchronize();
        device_pool::give_back(g.ctx.cu_device());
        g.pool_given_back.store(true, Ordering::Relaxed);
    }
}

/// After a call that succeeded on `ordinals`: a pool that `settle` set to give freed memory
/// back keeps it again.
pub fn keep_again(ordinals: &[u32]) {
    let gpus = GPUS.lock().unwrap_or_else(|e| e.into_inner());
    for g in ordinals.iter().filter_map(|o| gpus.get(o)) {
        if g.pool_given_back.swap(false, Ordering::Relaxed) {
            let _ = device_pool::keep_freed(g.ctx.cu_device(), g.pool_keep);
        }
    }
}

impl Gpu {
    /// An engine's device work on this GPU (one stream, shared staging buffers): one call
    /// at a time, admitted before its job entered the pool (`admit`, issue 19), and one
    /// thread of that call at a time. Rust callers outside the pool are admitted here.
    pub fn exclusive(&self) -> Result<admit::Section> {
        admit::section(self.ordinal)
    }

    /// A kernel from `kernels/<module>.cu`, compiling the module on first use.
    pub fn function(&self, module: &'static str, name: &str) -> Result<CudaFunction> {
        self.function_with(module, &[], name)
    }

    /// A kernel from the variant of `module` compiled with `defines` (`module_with`).
    pub fn function_with(
        &self,
        module: &'static str,
        defines: &[String],
        name: &str,
    ) -> Result<CudaFunction> {
        let m = self.module_with(module, defines)?;
        m.load_function(name)
            .map_err(|e| Error::Internal(format!("kernel {module}::{name} not found: {e}")))
    }

    /// Kernel module `module`, loaded into this context on first use (from the CUBIN cache, or
    /// compiled by NVRTC on a miss).
    pub fn module(&self, module: &'static str) -> Result<Arc<CudaModule>> {
        self.module_with(module, &[])
    }

    /// Kernel module `module` compiled with the macros `defines` ("NAME=VALUE" each; a family
    /// picks which of its kernels to instantiate that way), loaded on first use as `module`.
    pub fn module_with(&self, module: &'static str, defines: &[String]) -> Result<Arc<CudaModule>> {
        let id = if defines.is_empty() {
            module.to_string()
        } else {
            format!("{module} -D{}", defines.join(" -D"))
        };
        let mut mods = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = mods.get(&id) {
            return Ok(m.clone());
        }
        let src = kernels::translation_unit(module)
            .ok_or_else(|| Error::Internal(format!("no kernel module {module}")))?;
        let (cubin, cached) = compile::compile_cached(module, &src, self.arch, defines)?;
        let kib = cubin.len() >> 10;
        let loaded = trace::timed(
            "module load",
            || format!("{module} ({kib} KiB CUBIN)"),
            || self.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin)),
        );
        let m = match loaded {
            Ok(m) => m,
            // A cached CUBIN the driver refuses: compile afresh (and re-cache).
            Err(_) if cached => {
                let cubin = compile::recompile_cached(module, &src, self.arch, defines)?;
                self.ctx
                    .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))?
            }
            Err(e) => return Err(e.into()),
        };
        mods.insert(id, m.clone());
        Ok(m)
    }

    /// Allocate `len` elements on the device, uninitialised.
    ///
    /// # Safety
    /// The caller writes every element before reading it.
    pub unsafe fn alloc<T: DeviceRepr>(&self, len: usize) -> Result<CudaSlice<T>> {
        self.stream
            .alloc::<T>(len.max(1))
            .map_err(|e| self.out_of_memory::<T>(e.into(), len))
    }

    /// Allocate `len` zeroed elements on the device.
    pub fn alloc_zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>> {
        self.stream
            .alloc_zeros::<T>(len.max(1))
            .map_err(|e| self.out_of_memory::<T>(e.into(), len))
    }

    /// A GpuMemory error from an allocation of `len` elements, with the bytes asked for and
    /// the device's free and total memory (issue 17: every GPU out-of-memory says how much).
    fn out_of_memory<T>(&self, e: Error, len: usize) -> Error {
        match e {
            Error::GpuMemory(_) => {
                let bytes = len as u128 * std::mem::size_of::<T>() as u128;
                let have = match self.mem_info() {
                    Ok((free, total)) => format!(
                        "{} free of {} on this GPU",
                        crate::error::human(free as u128),
                        crate::error::human(total as u128)
                    ),
                    Err(_) => "the GPU's free memory is unknown".into(),
                };
                Error::GpuMemory(format!(
                    "GPU out of memory: an allocation of {} failed, {have}; \
                     use smaller inputs, fewer maps per call, or the CPU (device='cpu')",
                    crate::error::human(bytes)
                ))
            }
            other => other,
        }
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

    /// Bytes a call may allocate on the device now: 80% of the free memory (with what the
    /// memory pool keeps for reuse, `device_pool`), capped by
    /// `SKYCONV_GPU_MEMORY_LIMIT` (bytes; lets tests force the chunked paths on any GPU).
    pub fn budget(&self) -> Result<usize> {
        let (free, _) = self.mem_info()?;
        let free = free + device_pool::reusable(self.ctx.cu_device())?;
        let mut budget = free / 10 * 8;
        if let Some(limit) = crate::backend::env::usize_var(
            "SKYCONV_GPU_MEMORY_LIMIT",
            0,
            "a whole number of bytes",
        )? {
            budget = budget.min(limit);
        }
        Ok(budget)
    }
}

/// One GPU as `backend_info()` reports it.
#[derive(Debug, Default, Clone)]
pub struct DeviceInfo {
    pub ordinal: u32,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub total_memory: usize,
    pub context_created: bool,
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
    /// Every GPU the driver reports.
    pub devices: Vec<DeviceInfo>,
    /// The ordinal `device="cuda"` uses on this thread.
    pub ordinal: u32,
}

fn describe(ordinal: u32) -> Result<DeviceInfo> {
    let dev = dr::device::get(ordinal as i32)?;
    let name = dr::device::get_name(dev)?;
    use dsys::CUdevice_attribute as A;
    // SAFETY: dev comes from device::get.
    unsafe {
        let total_memory = dr::device::total_mem(dev)?;
        let major =
            dr::device::get_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor =
            dr::device::get_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        Ok(DeviceInfo {
            ordinal,
            name,
            compute_capability: (major, minor),
            total_memory,
            context_created: false,
        })
    }
}

/// Describe the GPUs without creating a context.
pub fn info() -> Info {
    let mut info = Info {
        driver_version: driver_version_if_present(),
        ordinal: ORDINAL.with(|o| o.get()),
        ..Info::default()
    };
    info.nvrtc_version = compile::version().ok();
    let created: Vec<u32> = GPUS
        .lock()
        .map(|g| g.keys().copied().collect())
        .unwrap_or_default();
    match status() {
        Ok(()) => {
            info.available = true;
            for k in 0..device_count() as u32 {
                if let Ok(mut d) = guarded("querying a device", || describe(k)) {
                    d.context_created = created.contains(&k);
                    info.devices.push(d);
                }
            }
            if let Some(d) = info.devices.iter().find(|d| d.ordinal == info.ordinal) {
                info.device_name = Some(d.name.clone());
                info.compute_capability = Some(d.compute_capability);
                info.total_memory = Some(d.total_memory);
            }
        }
        Err(why) => info.reason = Some(why),
    }
    info.context_created = !created.is_empty();
    info
}

/// Do a GPU call's one-time set-up now (`skyconv.warmup`): create GPU `ordinal`'s context, load
/// `modules` (every kernel module when None) and those of `variants` that are variants of
/// them from the CUBIN cache or NVRTC, and open cuFFT when `fft`. Returns the names of the
/// modules loaded.
pub fn warmup(
    ordinal: u32,
    modules: Option<Vec<String>>,
    fft: bool,
    variants: &[Variant],
) -> Result<Vec<String>> {
    let gpu = gpu_on(ordinal)?;
    let names: Vec<&'static str> = match modules {
        None => MODULES.iter().map(|(n, _)| *n).collect(),
        Some(list) => list
            .iter()
            .map(|want| {
                MODULES
                    .iter()
                    .map(|(n, _)| *n)
                    .find(|n| n == want)
                    .ok_or_else(|| {
                        Error::value(format!(
                            "modules: no kernel module {want:?}; the modules are {:?}",
                            MODULES.iter().map(|(n, _)| *n).collect::<Vec<_>>()
                        ))
                    })
            })
            .collect::<Result<_>>()?,
    };
    for n in &names {
        crate::backend::cancel::check()?;
        gpu.module(n)?;
        for v in variants.iter().filter(|v| v.module == *n) {
            gpu.module_with(v.module, &v.defines)?;
        }
    }
    if fft {
        toolkit::cufft()?;
    }
    Ok(names.iter().map(|n| n.to_string()).collect())
}

/// Compile kernel module `name` for `arch` through the on-disk cache (for the tests and the
/// first-call benchmark): (CUBIN size in bytes, whether it came from the cache).
pub fn compile_module_cached(name: &str, arch: (i32, i32)) -> Result<(usize, bool)> {
    let src = kernels::translation_unit(name)
        .ok_or_else(|| Error::value(format!("no kernel module {name:?}")))?;
    let (cubin, hit) = compile::compile_cached(name, &src, arch, &[])?;
    Ok((cubin.len(), hit))
}

/// The cache key of kernel module `name` for `arch` with the NVRTC in use.
pub fn module_cache_key(name: &str, arch: (i32, i32)) -> Result<String> {
    let src = kernels::translation_unit(name)
        .ok_or_else(|| Error::value(format!("no kernel module {name:?}")))?;
    Ok(compile::keyed(&src, arch, &[])?.1)
}

/// Compile every kernel module for `arch`, and each of `variants` (used by the test suite on
/// machines with no GPU). Returns (module or "module+label", cubin size in bytes).
pub fn compile_all(arch: (i32, i32), variants: &[Variant]) -> Result<Vec<(String, usize)>> {
    MODULES
        .iter()
        .map(|(name, _)| {
            let src = kernels::translation_unit(name).expect("listed module");
            let cubin = compile::compile_cubin(name, &src, arch, &[])?;
            let mut out = vec![(name.to_string(), cubin.len())];
            for v in variants.iter().filter(|v| v.module == *name) {
                let cubin = compile::compile_cubin(name, &src, arch, &v.defines)?;
                out.push((format!("{name}+{}", v.label), cubin.len()));
            }
            Ok(out)
        })
        .collect::<Result<Vec<_>>>()
        .map(|v| v.concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_four_blocks_an_sm() {
        // H100 / H200 (sm_90): 228 KB an SM, 227 KB a block opted in, 1 KB reserved
        assert_eq!(shared_four_of(233_472, 1024, 232_448), 56 << 10);
        // A100 (164 KB an SM): four blocks fit under 48 KB, which any block gets
        assert_eq!(shared_four_of(167_936, 1024, 166_912), SHARED_DEFAULT);
        // a block may not opt in past its limit
        assert_eq!(shared_four_of(262_144, 0, 50_000), 50_000);
    }
}
