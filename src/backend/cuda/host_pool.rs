//! Page-locked host blocks for the large outputs of GPU calls.
//!
//! A NumPy output in ordinary (pageable) memory comes down through the staging buffers and a
//! host memcpy, and its pages are faulted in on first touch: on the H100 machine that is
//! 5–12 GB/s against 54 GB/s for a DMA into page-locked memory. So the Python layer hands the
//! engines outputs that live in page-locked blocks taken from this pool, and `transfer` DMAs
//! straight into them. A block is ordinary memory backed by transparent huge pages (where the
//! kernel allows them), faulted in on all cores and then page-locked with cuMemHostRegister:
//! cuMemHostAlloc took 0.3 s for 0.4 GB and 1 s for 1.6 GB on the H100 machine, more than the
//! staged copy it saves. A block goes back to the pool when its array is freed and the next
//! output of that size reuses it.
//!
//! Limits: blocks of at least `MIN_BYTES`; at most `SKYCONV_PINNED_MAX_MB` page-locked at once,
//! in use or idle (default: a quarter of the machine's memory, at most 8 GiB);
//! `SKYCONV_PINNED_MAX_MB=0` turns the pool off. Past the limit outputs are ordinary NumPy
//! arrays, which only costs speed. One output larger than the default limit (a batch of beams:
//! 100 maps of nside 2048 are 40 GB) gets a block of its own where `SKYCONV_PINNED_MAX_MB` is
//! not set, the block is at most half the machine's memory and the host has it free
//! (MemAvailable, with as much again to spare); such a block is not counted against the limit
//! and stays in the pool when its array is freed (the next batch of that size reuses it: the
//! page-locking costs about as much as the batch's DMAs) until an output of another size over
//! the limit needs one.

use std::collections::BTreeMap;
use std::sync::Mutex;

use cudarc::driver::sys as dsys;
use rayon::prelude::*;

/// Outputs smaller than this gain little from a DMA of their own.
pub const MIN_BYTES: usize = 16 << 20;
/// Block sizes are rounded up to this, so that outputs of nearly the same size share blocks.
const ROUND: usize = 2 << 20;
const DEFAULT_MAX_MB: usize = 8192;

/// Physical memory in MiB (Linux), if known; read once per process.
fn mem_total_mb() -> Option<usize> {
    static TOTAL: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib >> 10)
    })
}

struct Pool {
    /// Idle blocks: start address -> bytes.
    idle: BTreeMap<usize, usize>,
    /// Blocks held by arrays: start address -> bytes.
    live: BTreeMap<usize, usize>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    idle: BTreeMap::new(),
    live: BTreeMap::new(),
});

/// `SKYCONV_PINNED_MAX_MB`, checked (an error naming the variable when it is not a whole
/// number); the output allocation of a GPU call reads it through here first.
pub fn env_max_mb() -> crate::Result<Option<usize>> {
    crate::backend::env::usize_var("SKYCONV_PINNED_MAX_MB", 0, "a whole number of MiB (0: off)")
}

fn max_bytes() -> usize {
    env_max_mb()
        .ok()
        .flatten()
        .unwrap_or_else(|| DEFAULT_MAX_MB.min(mem_total_mb().map_or(0, |m| m / 4)))
        << 20
}

/// A page-locked block of at least the bytes asked for; back to the pool when dropped.
pub struct Block {
    ptr: *mut u8,
    bytes: usize,
}

// SAFETY: the block is plain host memory owned by this value alone.
unsafe impl Send for Block {}
unsafe impl Sync for Block {}

impl Block {
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        let addr = self.ptr as usize;
        pool.live.remove(&addr);
        pool.idle.insert(addr, self.bytes);
    }
}

// Linux x86-64/aarch64 values (the C library is linked anyway).
const PROT_READ_WRITE: i32 = 0x1 | 0x2;
const MAP_PRIVATE_ANONYMOUS: i32 = 0x02 | 0x20;
const MADV_HUGEPAGE: i32 = 14;
const HUGE: usize = 2 << 20;

extern "C" {
    fn mmap(
        addr: *mut std::ffi::c_void,
        len: usize,
        prot: i32,
        flags: i32,
        fd: i32,
        off: i64,
    ) -> *mut std::ffi::c_void;
    fn munmap(addr: *mut std::ffi::c_void, len: usize) -> i32;
    fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
}

/// A page-locked block of `bytes` (a multiple of 2 MiB), or None. The GPU context must be
/// current.
fn lock_new(bytes: usize) -> Option<usize> {
    crate::backend::trace::timed(
        "pinned block",
        || format!("{} MiB (fault in + cuMemHostRegister)", bytes >> 20),
        || lock_new_untimed(bytes),
    )
}

fn lock_new_untimed(bytes: usize) -> Option<usize> {
    // SAFETY: a fresh private anonymous mapping, owned by the pool until `unlock`.
    let p = unsafe {
        mmap(
            std::ptr::null_mut(),
            bytes,
            PROT_READ_WRITE,
            MAP_PRIVATE_ANONYMOUS,
            -1,
            0,
        )
    };
    if p as isize == -1 || p.is_null() {
        return None;
    }
    // SAFETY: the mapping just made; huge pages are a hint (ignored where THP is off).
    unsafe { madvise(p, bytes, MADV_HUGEPAGE) };
    let base = p as usize;
    // Fault the pages in on all cores before the driver walks them.
    let touch = || {
        (0..bytes / HUGE).into_par_iter().for_each(|k| {
            // SAFETY: inside the mapping; one write per 4 KiB page of the chunk.
            unsafe {
                for off in (0..HUGE).step_by(4096) {
                    std::ptr::write_volatile((base + k * HUGE + off) as *mut u8, 0);
                }
            }
        })
    };
    // (if the pool cannot run, the driver faults the pages in itself)
    let _ = crate::backend::threads::install(touch);
    // SAFETY: the range is a live mapping of `bytes` bytes.
    // PORTABLE: page-locked for every context, so a block serves outputs of any GPU.
    let r = unsafe { dsys::cuMemHostRegister_v2(p, bytes, dsys::CU_MEMHOSTREGISTER_PORTABLE) };
    if r != dsys::CUresult::CUDA_SUCCESS {
        // SAFETY: the mapping made above, not shared.
        unsafe { munmap(p, bytes) };
        return None;
    }
    Some(base)
}

/// Undo `lock_new`. The GPU context must be current.
fn unlock(addr: usize, bytes: usize) {
    // SAFETY: registered and mapped by lock_new; no array views it any more (idle).
    unsafe {
        let _ = dsys::cuMemHostUnregister(addr as *mut _);
        munmap(addr as *mut _, bytes);
    }
}

/// Free idle blocks until `need` more bytes fit under the limit; false if they cannot. Blocks
/// over the limit (see [`take_large`]) are neither counted nor freed here.
fn make_room(pool: &mut Pool, need: usize, limit: usize) -> bool {
    let held = |p: &Pool| {
        p.idle
            .values()
            .chain(p.live.values())
            .filter(|&&b| b <= limit)
            .sum::<usize>()
    };
    while held(pool) + need > limit {
        let Some((&addr, &bytes)) = pool.idle.iter().find(|&(_, &b)| b <= limit) else {
            return false;
        };
        pool.idle.remove(&addr);
        unlock(addr, bytes);
    }
    true
}

/// Whether a new block of `want` bytes (over the default limit) may be made: at most half the
/// machine's memory, and the host can give twice it now.
fn large_allowed(want: usize) -> bool {
    let half = mem_total_mb().map_or(0, |m| (m << 20) / 2);
    let free = crate::backend::alloc::limit().map_or(0, |l| l as usize);
    want <= half && want.saturating_mul(2) <= free
}

/// The address of a block of `want` bytes over `limit`: an idle one of that size, else a new
/// one after the idle blocks over the limit are freed (one such block is kept at a time). None
/// when `SKYCONV_PINNED_MAX_MB` is set: it caps every block (0: the pool is off).
fn take_large(pool: &mut Pool, want: usize, limit: usize) -> Option<usize> {
    if !matches!(env_max_mb(), Ok(None)) {
        return None;
    }
    if let Some(a) = pool.idle.iter().find(|&(_, &b)| b == want).map(|(&a, _)| a) {
        pool.idle.remove(&a);
        return Some(a);
    }
    let big: Vec<(usize, usize)> = pool
        .idle
        .iter()
        .filter(|&(_, &b)| b > limit)
        .map(|(&a, &b)| (a, b))
        .collect();
    for (a, b) in big {
        pool.idle.remove(&a);
        unlock(a, b);
    }
    if !large_allowed(want) {
        return None;
    }
    lock_new(want)
}

/// A page-locked block for `bytes` for an output of GPU `ordinal`, or None (pool off, over its
/// limit, too small to be worth it, no GPU, or the driver refused).
pub fn take(bytes: usize, ordinal: u32) -> Option<Block> {
    if bytes < MIN_BYTES {
        return None;
    }
    super::gpu_on(ordinal).ok()?.ctx.bind_to_thread().ok()?;
    let want = bytes.div_ceil(ROUND) * ROUND;
    let limit = max_bytes();
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if want > limit {
        let addr = take_large(&mut pool, want, limit)?;
        pool.live.insert(addr, want);
        return Some(Block {
            ptr: addr as *mut u8,
            bytes: want,
        });
    }
    let reuse = pool.idle.iter().find(|&(_, &b)| b == want).map(|(&a, _)| a);
    let addr = match reuse {
        Some(a) => {
            pool.idle.remove(&a);
            a
        }
        None => {
            if !make_room(&mut pool, want, limit) {
                return None;
            }
            lock_new(want)?
        }
    };
    pool.live.insert(addr, want);
    Some(Block {
        ptr: addr as *mut u8,
        bytes: want,
    })
}

/// Whether `len` bytes at `ptr` lie inside one page-locked block of the pool.
pub fn contains(ptr: *const u8, len: usize) -> bool {
    let a = ptr as usize;
    let pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    pool.live
        .range(..=a)
        .next_back()
        .is_some_and(|(&s, &b)| a + len <= s + b)
}
