//! GPU-to-GPU plumbing for the multi-GPU transforms: peer access between the contexts (and
//! their stream-ordered pools), peer copies, pitched device copies and timing events. Plain
//! peer access only: NVLink multicast is never enabled.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys as dsys;

use super::{CudaEvent, CudaStream, Gpu};
use crate::backend::trace;
use crate::error::Result;

/// Whether GPU `a` reaches GPU `b` directly, per (a, b) ordinal pair: asked of the driver and
/// enabled (context and stream-ordered pool access) once a process, the first time the pair is
/// used; later calls read the answer here (issue 20: a first split call paid the set-up each
/// call).
static PEERS: Mutex<BTreeMap<(u32, u32), bool>> = Mutex::new(BTreeMap::new());

/// Whether every GPU of `devices` can reach every other one directly; enables that access
/// (contexts and their stream-ordered memory pools) where possible, once per ordered pair.
pub fn enable_peers(gpus: &[Arc<Gpu>]) -> Result<bool> {
    let mut known = PEERS.lock().unwrap_or_else(|e| e.into_inner());
    let mut all = true;
    for a in gpus {
        for b in gpus {
            if a.ordinal == b.ordinal {
                continue;
            }
            let ok = match known.get(&(a.ordinal, b.ordinal)) {
                Some(&ok) => ok,
                None => {
                    let ok = trace::timed(
                        "peer access",
                        || format!("cuda:{} -> cuda:{}", a.ordinal, b.ordinal),
                        || enable_pair(a, b),
                    )?;
                    known.insert((a.ordinal, b.ordinal), ok);
                    ok
                }
            };
            all &= ok;
        }
    }
    Ok(all)
}

/// Enable access from `a` to `b`'s memory (context, then `b`'s default pool); false where the
/// driver does not allow it.
fn enable_pair(a: &Gpu, b: &Gpu) -> Result<bool> {
    let mut can = 0i32;
    // SAFETY: plain queries and settings of the driver on live contexts.
    unsafe {
        dsys::cuDeviceCanAccessPeer(&mut can, a.ctx.cu_device(), b.ctx.cu_device()).result()?;
        if can == 0 {
            return Ok(false);
        }
        a.ctx.bind_to_thread()?;
        let r = dsys::cuCtxEnablePeerAccess(b.ctx.cu_ctx(), 0);
        if r != dsys::cudaError_enum::CUDA_SUCCESS
            && r != dsys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
        {
            return Ok(false);
        }
        // b's pool memory readable and writable from a (copies run on either side)
        let mut pool: dsys::CUmemoryPool = std::ptr::null_mut();
        dsys::cuDeviceGetMemPool(&mut pool, b.ctx.cu_device()).result()?;
        let desc = dsys::CUmemAccessDesc {
            location: dsys::CUmemLocation {
                type_: dsys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: a.ctx.cu_device(),
            },
            flags: dsys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        Ok(dsys::cuMemPoolSetAccess(pool, &desc, 1) == dsys::cudaError_enum::CUDA_SUCCESS)
    }
}

/// An event for timing a stage (CU_EVENT_DEFAULT: it records time).
pub fn timing_event(gpu: &Gpu) -> Result<CudaEvent> {
    Ok(gpu
        .ctx
        .new_event(Some(dsys::CUevent_flags::CU_EVENT_DEFAULT))?)
}

/// Copy `height` rows of `width` bytes between two pitched arrays of one GPU, on its compute
/// stream.
#[allow(clippy::too_many_arguments)]
pub fn copy_2d(
    gpu: &Gpu,
    (src, src_x, src_pitch): (u64, usize, usize),
    (dst, dst_x, dst_pitch): (u64, usize, usize),
    width: usize,
    height: usize,
) -> Result<()> {
    if width == 0 || height == 0 {
        return Ok(());
    }
    let copy = dsys::CUDA_MEMCPY2D {
        srcXInBytes: src_x,
        srcY: 0,
        srcMemoryType: dsys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: dst_x,
        dstY: 0,
        dstMemoryType: dsys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: width,
        Height: height,
    };
    gpu.ctx.bind_to_thread()?;
    // SAFETY: both arrays hold `height` rows of their pitch (the callers size them so).
    unsafe { dsys::cuMemcpy2DAsync_v2(&copy, gpu.stream.cu_stream()) }.result()?;
    Ok(())
}

/// Copy `bytes` from `src` on `src_gpu` to `dst` on `dst_gpu`, queued on `stream` (a stream of
/// `dst_gpu`).
///
/// # Safety
/// Both ranges hold `bytes` and stay allocated until `stream` has been synchronised.
pub unsafe fn copy_async(
    dst_gpu: &Gpu,
    dst: u64,
    src_gpu: &Gpu,
    src: u64,
    bytes: usize,
    stream: &CudaStream,
) -> Result<()> {
    cudarc::driver::result::memcpy_peer_async(
        dst_gpu.ctx.cu_ctx(),
        dst,
        src_gpu.ctx.cu_ctx(),
        src,
        bytes,
        stream.cu_stream(),
    )?;
    Ok(())
}
