//! GPU-to-GPU plumbing for the multi-GPU transforms: peer access between the contexts (and
//! their stream-ordered pools), peer copies, pitched device copies and timing events. Plain
//! peer access only: NVLink multicast is never enabled.

use std::sync::Arc;

use cudarc::driver::sys as dsys;

use super::{CudaEvent, CudaStream, Gpu};
use crate::error::Result;

/// Whether every GPU of `devices` can reach every other one directly; enables that access
/// (contexts and their stream-ordered memory pools) where possible.
pub fn enable_peers(gpus: &[Arc<Gpu>]) -> Result<bool> {
    let mut all = true;
    for a in gpus {
        for b in gpus {
            if a.ordinal == b.ordinal {
                continue;
            }
            let mut can = 0i32;
            // SAFETY: plain queries and settings of the driver on live contexts.
            unsafe {
                dsys::cuDeviceCanAccessPeer(&mut can, a.ctx.cu_device(), b.ctx.cu_device())
                    .result()?;
                if can == 0 {
                    all = false;
                    continue;
                }
                a.ctx.bind_to_thread()?;
                let r = dsys::cuCtxEnablePeerAccess(b.ctx.cu_ctx(), 0);
                if r != dsys::cudaError_enum::CUDA_SUCCESS
                    && r != dsys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
                {
                    all = false;
                    continue;
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
                if dsys::cuMemPoolSetAccess(pool, &desc, 1) != dsys::cudaError_enum::CUDA_SUCCESS {
                    all = false;
                }
            }
        }
    }
    Ok(all)
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
