//! The device's default memory pool (every `Gpu::alloc` is a stream-ordered `cuMemAllocAsync`
//! from it) keeps what calls free, up to `SKYCONV_GPU_POOL_MB` MiB (default: half the GPU's
//! memory; `0`: give everything back at each synchronisation, CUDA's default). Given back,
//! the next call maps the pages again: a 256×512² à trous call (five to ten arrays of 268 MB)
//! took 47.7–49.3 ms end to end giving back, 41.0–41.9 keeping (H200, session 20 call 2).
//! What the pool keeps counts as free in `Gpu::budget` (`reusable`). After a call that failed
//! or was interrupted the pool gives everything back until a call succeeds (`settle`).

use cudarc::driver::sys as dsys;

use crate::error::{Error, Result};

fn pool(dev: dsys::CUdevice) -> Result<dsys::CUmemoryPool> {
    let mut pool: dsys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `dev` is a valid device of an initialised driver; the pool handle is written.
    unsafe { dsys::cuDeviceGetDefaultMemPool(&mut pool, dev) }
        .result()
        .map_err(|e| Error::Internal(format!("the device's default memory pool: {e}")))?;
    Ok(pool)
}

fn attribute(pool: dsys::CUmemoryPool, attr: dsys::CUmemPool_attribute) -> Result<u64> {
    let mut v: u64 = 0;
    // SAFETY: the attributes read here are 64-bit values.
    unsafe { dsys::cuMemPoolGetAttribute(pool, attr, &mut v as *mut u64 as *mut _) }
        .result()
        .map_err(|e| Error::Internal(format!("a memory pool attribute: {e}")))?;
    Ok(v)
}

/// How much freed memory the pool of a device of `total` bytes keeps: `SKYCONV_GPU_POOL_MB`,
/// else half of it.
pub fn keep_of(total: usize) -> Result<u64> {
    let mb = crate::backend::env::usize_var(
        "SKYCONV_GPU_POOL_MB",
        0,
        "a whole number of MiB (0 gives freed GPU memory back at once)",
    )?;
    Ok(match mb {
        Some(mb) => (mb as u64).saturating_mul(1 << 20),
        None => total as u64 / 2,
    })
}

/// Let the pool of `dev` keep up to `keep` bytes of freed memory past a synchronisation.
pub fn keep_freed(dev: dsys::CUdevice, mut keep: u64) -> Result<()> {
    let pool = pool(dev)?;
    // SAFETY: the release threshold is a 64-bit value.
    unsafe {
        dsys::cuMemPoolSetAttribute(
            pool,
            dsys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut keep as *mut u64 as *mut _,
        )
    }
    .result()
    .map_err(|e| Error::Internal(format!("setting the memory pool's release threshold: {e}")))?;
    Ok(())
}

/// Bytes the pool of `dev` holds mapped but unused: allocations will take them first.
pub fn reusable(dev: dsys::CUdevice) -> Result<usize> {
    let pool = pool(dev)?;
    let reserved = attribute(
        pool,
        dsys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
    )?;
    let used = attribute(
        pool,
        dsys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
    )?;
    Ok(reserved.saturating_sub(used) as usize)
}

/// Give back everything the pool of `dev` keeps, and what is freed until `keep_freed` is
/// called again (after a call that failed or was interrupted: some of its buffers may be freed
/// only after it returned, and the memory a process holds should not depend on where a call
/// was cut).
pub fn give_back(dev: dsys::CUdevice) {
    let _ = keep_freed(dev, 0);
    if let Ok(pool) = pool(dev) {
        // SAFETY: a valid pool; trimming only releases unused memory.
        let _ = unsafe { dsys::cuMemPoolTrimTo(pool, 0) };
    }
}
