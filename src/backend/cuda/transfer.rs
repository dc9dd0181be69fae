//! Host<->device copies of large arrays through two pinned staging buffers: while the DMA
//! engine moves one buffer, CPU threads fill (or drain) the other. Pageable copies run at about
//! 4.5 GB/s on the H100 machine, pinned ones at about 54 GB/s.
//!
//! The DMAs go on the stream the caller names (the compute stream by default, or
//! `Gpu::copy` to overlap them with kernels). Each buffer's `done` event is recorded after every
//! DMA that uses it and waited on before the buffer is touched again, whatever the stream.
//! `upload_with` fills the staging buffers with a caller's function, so data can be repacked
//! (e.g. a block of channels) on the way up with no extra host copy.

use cudarc::driver::{result as dr, sys as dsys, CudaEvent, CudaStream, DevicePtr, DevicePtrMut};
use rayon::prelude::*;

use std::sync::Arc;

use super::{host_pool, CudaSlice, DeviceRepr, Gpu};
use crate::error::Result;

/// Bytes in each staging buffer.
const STAGE_BYTES: usize = 32 << 20;
/// Below this size a plain (pageable) copy is as fast as staging.
const DIRECT_BYTES: usize = 2 << 20;
/// Grain of the parallel host-side memcpy.
const COPY_GRAIN: usize = 1 << 20;
/// Smallest copy that `SKYCONV_PIN_HOST=1` page-locks instead of staging.
const REGISTER_MIN: usize = 64 << 20;

/// Whether to page-lock the caller's array for a copy of `len` bytes (an experiment, off by
/// default: `SKYCONV_PIN_HOST=1` DMAs straight from/to the NumPy array after cuMemHostRegister,
/// saving the host copy through the staging buffers at the price of registering the pages;
/// which is faster is measured on the GPU machine).
fn register_wanted(len: usize) -> bool {
    len >= REGISTER_MIN
        && matches!(
            crate::backend::env::switch_var("SKYCONV_PIN_HOST"),
            Ok(Some(true))
        )
}

/// A host range page-locked by `register` until dropped.
struct Registered(*mut std::ffi::c_void);

impl Drop for Registered {
    fn drop(&mut self) {
        // SAFETY: registered by `register`; callers drop it only after the copies using it have
        // completed.
        unsafe {
            let _ = dsys::cuMemHostUnregister(self.0);
        }
    }
}

/// Page-lock `len` bytes at `ptr` (read-only registration first, for inputs that may be
/// read-only arrays); None when the driver refuses (the caller stages instead).
fn register(ptr: *const u8, len: usize, read_only: bool) -> Option<Registered> {
    let mut tries = vec![0];
    if read_only {
        tries.insert(0, dsys::CU_MEMHOSTREGISTER_READ_ONLY);
    }
    tries.into_iter().find_map(|flags| {
        // SAFETY: the range is a live host allocation of len bytes owned by the caller, who keeps
        // it alive while the Registered guard exists.
        let r = unsafe { dsys::cuMemHostRegister_v2(ptr as *mut _, len, flags) };
        (r == dsys::CUresult::CUDA_SUCCESS).then_some(Registered(ptr as *mut _))
    })
}

struct Pinned {
    ptr: *mut u8,
}

// SAFETY: the buffer is only touched while holding the Gpu's staging mutex.
unsafe impl Send for Pinned {}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: allocated by malloc_host in Staging::new and freed once.
        unsafe {
            let _ = dr::free_host(self.ptr as *mut _);
        }
    }
}

pub struct Staging {
    bufs: [Pinned; 2],
    done: [CudaEvent; 2],
}

impl Staging {
    fn new(gpu: &Gpu) -> Result<Self> {
        gpu.ctx.bind_to_thread()?;
        let alloc = || -> Result<Pinned> {
            // SAFETY: plain allocation of page-locked host memory (no write-combining: we read it).
            let ptr = unsafe { dr::malloc_host(STAGE_BYTES, 0)? } as *mut u8;
            Ok(Pinned { ptr })
        };
        let flags = Some(dsys::CUevent_flags::CU_EVENT_DISABLE_TIMING);
        let bufs = crate::backend::trace::timed(
            "staging alloc",
            || format!("2 x {} MiB page-locked", STAGE_BYTES >> 20),
            || -> Result<[Pinned; 2]> { Ok([alloc()?, alloc()?]) },
        )?;
        Ok(Staging {
            bufs,
            done: [gpu.ctx.new_event(flags)?, gpu.ctx.new_event(flags)?],
        })
    }
}

/// Whether every byte of `len` bytes at `ptr` is page-locked host memory the device can DMA
/// straight from or to: a block of our pool, or any range the driver knows as host memory
/// (cuMemHostAlloc'd, e.g. `cupyx.empty_pinned`, or cuMemHostRegister'ed by the user). Asked of
/// the driver on every call (a registration can end at any time), for the first and the last
/// byte, both of one allocation when the driver reports its range. Managed memory migrates on
/// demand, so it is staged like pageable memory.
pub fn page_locked(ptr: *const u8, len: usize) -> bool {
    if len == 0 || host_pool::contains(ptr, len) {
        return len > 0;
    }
    let first = ptr as usize;
    let last = first + len - 1;
    match host_range(first) {
        None => false,
        Some((start, size)) if size > 0 => last < start + size,
        Some(_) => host_range(last).is_some(),
    }
}

/// Some((start, bytes)) of its allocation when `addr` is page-locked, unmanaged host memory
/// (bytes 0 when the driver does not report the range).
fn host_range(addr: usize) -> Option<(usize, usize)> {
    use dsys::CUpointer_attribute as A;
    let mut mem_type: u32 = 0;
    let mut managed: u32 = 0;
    let mut start: u64 = 0;
    let mut size: usize = 0;
    let mut attrs = [
        A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        A::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        A::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let mut data: [*mut std::ffi::c_void; 4] = [
        &mut mem_type as *mut u32 as *mut _,
        &mut managed as *mut u32 as *mut _,
        &mut start as *mut u64 as *mut _,
        &mut size as *mut usize as *mut _,
    ];
    // SAFETY: four attributes, each with a slot of the type the driver writes (CUmemorytype and
    // a bool as 32-bit values, a CUdeviceptr, a size_t). Unknown addresses (pageable memory)
    // leave the slots zero and still succeed.
    let r = unsafe {
        dsys::cuPointerGetAttributes(
            attrs.len() as u32,
            attrs.as_mut_ptr(),
            data.as_mut_ptr(),
            addr as dsys::CUdeviceptr,
        )
    };
    let host = dsys::CUmemorytype::CU_MEMORYTYPE_HOST as u32;
    if r != dsys::CUresult::CUDA_SUCCESS || mem_type != host || managed != 0 {
        return None;
    }
    let start = start as usize;
    let known = size > 0 && start <= addr && addr < start + size;
    Some(if known { (start, size) } else { (0, 0) })
}

fn par_copy(src: &[u8], dst: &mut [u8]) {
    dst.par_chunks_mut(COPY_GRAIN)
        .zip(src.par_chunks(COPY_GRAIN))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

pub fn bytes_of<T>(s: &[T]) -> &[u8] {
    // SAFETY: any initialised T is readable as bytes.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

fn bytes_of_mut<T: DeviceRepr>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: T is plain old data (DeviceRepr), so any bytes written form a valid T.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u8, std::mem::size_of_val(s)) }
}

/// Touch every page of `host` (write the zero it will be overwritten with) on all cores. A
/// fresh NumPy array is only reserved, not mapped: faulting its pages in during `download`
/// halves the copy rate, so families call this while the device is still computing.
pub fn prefault<T: DeviceRepr + Send>(host: &mut [T]) {
    let bytes = bytes_of_mut(host);
    if page_locked(bytes.as_ptr(), bytes.len()) {
        return; // page-locked: already mapped
    }
    bytes.par_chunks_mut(COPY_GRAIN).for_each(touch_pages);
}

/// `prefault` on `threads` threads of its own (not the pool, capped by the cores), for a helper
/// thread that must not wait on the pool (whose workers may be blocked waiting for it). One
/// thread faults ~3.5 GB/s on the H100 machine, four ~10: a caller picks the fewest that
/// finish within the device work they hide behind, since they take memory bandwidth from the
/// host side of the uploads (S+C's 2 GB call: its 0.5 GB mask on one thread; four slowed its
/// upload by ~9 ms).
pub fn prefault_apart<T: DeviceRepr + Send>(host: &mut [T], threads: usize) {
    let bytes = bytes_of_mut(host);
    if page_locked(bytes.as_ptr(), bytes.len()) {
        return;
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(threads)
        .max(1);
    let part = bytes.len().div_ceil(threads).max(1);
    std::thread::scope(|sc| {
        for c in bytes.chunks_mut(part) {
            sc.spawn(move || touch_pages(c));
        }
    });
}

fn touch_pages(c: &mut [u8]) {
    const PAGE: usize = 4096;
    for i in (0..c.len()).step_by(PAGE) {
        // SAFETY: in bounds; volatile so the store is not elided.
        unsafe { std::ptr::write_volatile(c.as_mut_ptr().add(i), 0) };
    }
}

impl Gpu {
    fn with_staging<R>(&self, f: impl FnOnce(&mut Staging) -> Result<R>) -> Result<R> {
        let mut slot = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(Staging::new(self)?);
        }
        f(slot.as_mut().expect("just created"))
    }

    /// Whether copies to or from `bytes` DMA straight from the caller's memory (it is
    /// page-locked: `page_locked`) instead of going through the staging buffers.
    pub fn dma_direct(&self, bytes: &[u8]) -> Result<bool> {
        // The driver's pointer attributes need the context current on this thread.
        self.ctx.bind_to_thread()?;
        Ok(page_locked(bytes.as_ptr(), bytes.len()))
    }

    /// Queue on `stream` the DMA of columns [c0, c0 + cw) of the page-locked row-major
    /// `rows × ncol` array `host` (elements of `sz` bytes) into the same columns of a device
    /// array of the same layout at `dst` (one 2-D copy: the rows' slices go up strided). Returns
    /// once queued.
    ///
    /// # Safety
    /// `host` must be page-locked (`dma_direct`) and stay alive and unmodified until `stream`
    /// has been synchronised; `dst` must hold rows·ncol·sz bytes until then.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn upload_columns_async(
        &self,
        stream: &Arc<CudaStream>,
        host: &[u8],
        dst: u64,
        ncol: usize,
        sz: usize,
        c0: usize,
        cw: usize,
    ) -> Result<()> {
        let pitch = ncol * sz;
        assert!(
            pitch > 0 && host.len().is_multiple_of(pitch) && c0 + cw <= ncol,
            "upload_columns_async: columns out of range"
        );
        let copy = dsys::CUDA_MEMCPY2D {
            srcXInBytes: c0 * sz,
            srcY: 0,
            srcMemoryType: dsys::CUmemorytype::CU_MEMORYTYPE_HOST,
            srcHost: host.as_ptr().cast(),
            srcDevice: 0,
            srcArray: std::ptr::null_mut(),
            srcPitch: pitch,
            dstXInBytes: c0 * sz,
            dstY: 0,
            dstMemoryType: dsys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: dst,
            dstArray: std::ptr::null_mut(),
            dstPitch: pitch,
            WidthInBytes: cw * sz,
            Height: host.len() / pitch,
        };
        self.ctx.bind_to_thread()?;
        // SAFETY: the ranges lie inside both arrays (checked above and by the caller).
        unsafe { dsys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }.result()?;
        Ok(())
    }

    /// Copy `host` into the start of `dst`.
    pub fn upload_into<T: DeviceRepr + Sync>(
        &self,
        host: &[T],
        dst: &mut CudaSlice<T>,
    ) -> Result<()> {
        self.upload_into_on(&self.stream, host, dst)
    }

    /// Copy `host` into the start of `dst`, the DMAs on `stream`. Returns once the last chunk is
    /// queued: record an event on `stream` to order later work after the copy.
    pub fn upload_into_on<T: DeviceRepr + Sync>(
        &self,
        stream: &Arc<CudaStream>,
        host: &[T],
        dst: &mut CudaSlice<T>,
    ) -> Result<()> {
        self.upload_at_on(stream, host, dst, 0)
    }

    /// Copy `host` into `dst` from element `at` on, the DMAs on `stream` (as `upload_into_on`).
    pub fn upload_at_on<T: DeviceRepr + Sync>(
        &self,
        stream: &Arc<CudaStream>,
        host: &[T],
        dst: &mut CudaSlice<T>,
        at: usize,
    ) -> Result<()> {
        assert!(
            dst.len() >= at + host.len(),
            "upload_into: destination too short"
        );
        let bytes = bytes_of(host);
        if bytes.len() <= DIRECT_BYTES {
            let mut view = dst.slice_mut(at..at + host.len());
            stream.memcpy_htod(host, &mut view)?;
            return Ok(());
        }
        let (base, _rec) = dst.device_ptr_mut(stream);
        let base = base + (at * std::mem::size_of::<T>()) as u64;
        if self.dma_direct(bytes)? {
            // SAFETY: dst holds bytes.len() bytes; the source is page-locked and its array
            // (kept alive by the caller for the whole call) outlives the copy: the stream is
            // synchronised before returning.
            unsafe { dr::memcpy_htod_async(base, bytes, stream.cu_stream())? };
            stream.synchronize()?;
            return Ok(());
        }
        if register_wanted(bytes.len()) {
            if let Some(_pinned) = register(bytes.as_ptr(), bytes.len(), true) {
                // SAFETY: dst holds bytes.len() bytes; the registration outlives the copy (the
                // stream is synchronised before `_pinned` is dropped).
                unsafe { dr::memcpy_htod_async(base, bytes, stream.cu_stream())? };
                stream.synchronize()?;
                return Ok(());
            }
        }
        // SAFETY: dst holds at least bytes.len() bytes from base.
        unsafe {
            self.upload_with(stream, base, bytes.len(), |off, stage| {
                par_copy(&bytes[off..off + stage.len()], stage)
            })
        }
    }

    /// Copy `total` bytes to device address `dst` through the staging buffers, the DMAs on
    /// `stream`: `fill(offset, stage)` writes bytes `offset..offset + stage.len()` of the data
    /// into `stage` (offsets are multiples of 32 MiB). Returns once the last chunk is queued.
    ///
    /// # Safety
    /// `dst..dst + total` must be device memory that stays allocated until the copy completes.
    pub unsafe fn upload_with(
        &self,
        stream: &Arc<CudaStream>,
        dst: dsys::CUdeviceptr,
        total: usize,
        fill: impl Fn(usize, &mut [u8]) + Sync,
    ) -> Result<()> {
        let cu_stream = stream.cu_stream();
        self.with_staging(|st| {
            for k in 0..total.div_ceil(STAGE_BYTES) {
                let off = k * STAGE_BYTES;
                let len = STAGE_BYTES.min(total - off);
                let b = k % 2;
                st.done[b].synchronize()?;
                // SAFETY: the buffer's previous DMA has completed (event above).
                let stage = unsafe { std::slice::from_raw_parts_mut(st.bufs[b].ptr, len) };
                fill(off, stage);
                // SAFETY: dst holds total bytes (caller); stage stays alive and untouched
                // until done[b] fires.
                unsafe { dr::memcpy_htod_async(dst + off as u64, &*stage, cu_stream)? };
                st.done[b].record(stream)?;
            }
            Ok(())
        })
    }

    /// A new device buffer holding a copy of `host`.
    pub fn upload<T: DeviceRepr + Sync>(&self, host: &[T]) -> Result<CudaSlice<T>> {
        // SAFETY: fully written by upload_into.
        let mut dst = unsafe { self.alloc::<T>(host.len())? };
        self.upload_into(host, &mut dst)?;
        Ok(dst)
    }

    /// Queue on `stream` the DMA of the first `host.len()` elements of `src` into the
    /// page-locked `host` (`dma_direct`); returns at once (record an event on `stream`, or
    /// synchronise it, to know the data is there).
    ///
    /// # Safety
    /// `host` must be page-locked and stay alive and untouched, and `src` allocated, until
    /// `stream` has been synchronised.
    pub unsafe fn download_async_on<T: DeviceRepr>(
        &self,
        stream: &Arc<CudaStream>,
        src: &CudaSlice<T>,
        host: &mut [T],
    ) -> Result<()> {
        assert!(src.len() >= host.len(), "download: source too short");
        let (base, _rec) = src.device_ptr(stream);
        let bytes = bytes_of_mut(host);
        // SAFETY: src holds bytes.len() bytes; the rest is the caller's promise.
        unsafe { dr::memcpy_dtoh_async(bytes, base, stream.cu_stream())? };
        Ok(())
    }

    /// Copy the first `host.len()` elements of `src` into `host`; returns when they are there.
    pub fn download<T: DeviceRepr + Send>(&self, src: &CudaSlice<T>, host: &mut [T]) -> Result<()> {
        self.download_on(&self.stream, src, host)
    }

    /// `download` with the DMAs on `stream` (queued after the work already on it).
    pub fn download_on<T: DeviceRepr + Send>(
        &self,
        stream: &Arc<CudaStream>,
        src: &CudaSlice<T>,
        host: &mut [T],
    ) -> Result<()> {
        self.download_at_on(stream, src, 0, host)
    }

    /// Copy elements `at..at + host.len()` of `src` into `host`, the DMAs on `stream` (as
    /// `download_on`).
    pub fn download_at_on<T: DeviceRepr + Send>(
        &self,
        stream: &Arc<CudaStream>,
        src: &CudaSlice<T>,
        at: usize,
        host: &mut [T],
    ) -> Result<()> {
        assert!(src.len() >= at + host.len(), "download: source too short");
        let n = host.len();
        if std::mem::size_of_val(host) <= DIRECT_BYTES {
            let view = src.slice(at..at + n);
            stream.memcpy_dtoh(&view, host)?;
            stream.synchronize()?;
            self.ctx.check_err()?;
            return Ok(());
        }
        let bytes = bytes_of_mut(host);
        let (base, _rec) = src.device_ptr(stream);
        let base = base + (at * std::mem::size_of::<T>()) as u64;
        // SAFETY: src holds at least bytes.len() bytes from base.
        unsafe { self.download_raw(stream, base, bytes) }
    }

    /// Copy `host.len()` bytes from device address `src` into `host` through the staging
    /// buffers, the DMAs on `stream`; returns when they are there.
    ///
    /// # Safety
    /// `src..src + host.len()` must be device memory that stays allocated during the call.
    pub unsafe fn download_raw(
        &self,
        stream: &Arc<CudaStream>,
        src: dsys::CUdeviceptr,
        bytes: &mut [u8],
    ) -> Result<()> {
        let cu_stream = stream.cu_stream();
        if self.dma_direct(bytes)? {
            // SAFETY: src holds bytes.len() bytes (caller); the destination is page-locked.
            unsafe { dr::memcpy_dtoh_async(&mut bytes[..], src, cu_stream)? };
            stream.synchronize()?;
            self.ctx.check_err()?;
            return Ok(());
        }
        if register_wanted(bytes.len()) {
            if let Some(_pinned) = register(bytes.as_ptr(), bytes.len(), false) {
                // SAFETY: src holds bytes.len() bytes (caller); the registration outlives the
                // copy (the stream is synchronised before `_pinned` is dropped).
                unsafe { dr::memcpy_dtoh_async(&mut bytes[..], src, cu_stream)? };
                stream.synchronize()?;
                self.ctx.check_err()?;
                return Ok(());
            }
        }
        let total = bytes.len();
        let nchunks = total.div_ceil(STAGE_BYTES);
        let span = |k: usize| (k * STAGE_BYTES, ((k + 1) * STAGE_BYTES).min(total));
        self.with_staging(|st| {
            let issue = |st: &mut Staging, k: usize| -> Result<()> {
                let (lo, hi) = span(k);
                let b = k % 2;
                // The buffer's previous DMA (perhaps an upload on another stream) must be done.
                st.done[b].synchronize()?;
                // SAFETY: no DMA uses buffer b now, and the host drained it before this.
                let stage = unsafe { std::slice::from_raw_parts_mut(st.bufs[b].ptr, hi - lo) };
                unsafe { dr::memcpy_dtoh_async(stage, src + lo as u64, cu_stream)? };
                st.done[b].record(stream)?;
                Ok(())
            };
            for k in 0..nchunks.min(2) {
                issue(st, k)?;
            }
            for k in 0..nchunks {
                let (lo, hi) = span(k);
                let b = k % 2;
                st.done[b].synchronize()?;
                // SAFETY: the DMA into buffer b has completed.
                let stage = unsafe { std::slice::from_raw_parts(st.bufs[b].ptr, hi - lo) };
                par_copy(stage, &mut bytes[lo..hi]);
                if k + 2 < nchunks {
                    issue(st, k + 2)?;
                }
            }
            Ok(())
        })?;
        self.ctx.check_err()?;
        Ok(())
    }
}
