//! Page-locked host blocks for the large outputs of GPU calls.
//!
//! A NumPy output in ordinary (pageable) memory comes down through the staging buffers and a
//! host memcpy, and its pages are faulted in on first touch: on the H100 machine that is
//! 5–12 GB/s against 54 GB/s for a DMA into page-locked memory. So the Python layer hands the
//! engines outputs that live in page-locked blocks taken from this pool, and `transfer` DMAs
//! straight into them. Page-locking is slow (0.4 GB: 0.3 s, 1.6 GB: 1 s on the H100 machine,
//! far more than the staged copy it saves), so no call waits for it: when no idle block of the
//! size is there, the output is an ordinary array and a background thread page-locks a block
//! for the next output of that size. A block goes back to the pool when its array is freed.
//! Up to `PER_SIZE` blocks of one size are kept, enough for `m = f(m0)` in a loop (the old
//! result is still alive while the next is made).
//!
//! Limits: blocks of at least `MIN_BYTES`; at most `SKYCONV_PINNED_MAX_MB` page-locked at once,
//! in use or idle (default: a quarter of the machine's memory, at most 8 GiB);
//! `SKYCONV_PINNED_MAX_MB=0` turns the pool off. Past the limit outputs are ordinary NumPy
//! arrays, which only costs speed.

use std::collections::BTreeMap;
use std::sync::Mutex;

use cudarc::driver::result as dr;

/// Outputs smaller than this gain little from a DMA of their own.
pub const MIN_BYTES: usize = 16 << 20;
/// Block sizes are rounded up to this, so that outputs of nearly the same size share blocks.
const ROUND: usize = 2 << 20;
const DEFAULT_MAX_MB: usize = 8192;
/// Most blocks of one size (in use, idle or being made).
const PER_SIZE: usize = 2;

/// Physical memory in MiB (Linux), if known.
fn mem_total_mb() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib >> 10)
}

struct Pool {
    /// Idle blocks: start address -> bytes.
    idle: BTreeMap<usize, usize>,
    /// Blocks held by arrays: start address -> bytes.
    live: BTreeMap<usize, usize>,
    /// Sizes of the blocks being page-locked in the background.
    pending: Vec<usize>,
}

impl Pool {
    fn held(&self) -> usize {
        self.idle
            .values()
            .chain(self.live.values())
            .chain(&self.pending)
            .sum()
    }
    fn count(&self, bytes: usize) -> usize {
        let same = |&b: &usize| b == bytes;
        self.idle.values().copied().filter(same).count()
            + self.live.values().copied().filter(same).count()
            + self.pending.iter().copied().filter(same).count()
    }
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    idle: BTreeMap::new(),
    live: BTreeMap::new(),
    pending: Vec::new(),
});

fn max_bytes() -> usize {
    std::env::var("SKYCONV_PINNED_MAX_MB")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
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

/// Free idle blocks until `need` more bytes fit under the limit; false if they cannot. The
/// GPU context must be current.
fn make_room(pool: &mut Pool, need: usize, limit: usize) -> bool {
    while pool.held() + need > limit {
        let Some((&addr, _)) = pool.idle.iter().next() else {
            return false;
        };
        pool.idle.remove(&addr);
        // SAFETY: allocated by malloc_host below and no longer referenced (idle).
        unsafe {
            let _ = dr::free_host(addr as *mut _);
        }
    }
    true
}

/// A page-locked block for `bytes` when an idle one of that size is there, else None (the
/// caller makes an ordinary array; pool off, over its limit, too small to be worth it or no
/// GPU also give None). Either way, one more block of this size is page-locked in the
/// background when fewer than `PER_SIZE` exist.
pub fn take(bytes: usize) -> Option<Block> {
    let limit = max_bytes();
    if bytes < MIN_BYTES || limit == 0 {
        return None;
    }
    let want = bytes.div_ceil(ROUND) * ROUND;
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let reuse = pool.idle.iter().find(|&(_, &b)| b == want).map(|(&a, _)| a);
    if let Some(a) = reuse {
        pool.idle.remove(&a);
        pool.live.insert(a, want);
    }
    if pool.count(want) < PER_SIZE && pool.held() + want <= limit {
        pool.pending.push(want);
        if std::thread::Builder::new()
            .name("skyconv-pin".into())
            .spawn(move || lock_in_background(want, limit))
            .is_err()
        {
            pool.pending.retain(|&b| b != want);
        }
    }
    reuse.map(|a| Block {
        ptr: a as *mut u8,
        bytes: want,
    })
}

/// Page-lock a block of `bytes` and add it to the idle ones (the background half of `take`).
fn lock_in_background(bytes: usize, limit: usize) {
    let ctx_ok = super::gpu().is_ok_and(|g| g.ctx.bind_to_thread().is_ok());
    // SAFETY: plain allocation of page-locked host memory (the context is current).
    let ptr = ctx_ok.then(|| unsafe { dr::malloc_host(bytes, 0) }.ok());
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = pool.pending.iter().position(|&b| b == bytes) {
        pool.pending.swap_remove(i);
    }
    if let Some(Some(p)) = ptr {
        if make_room(&mut pool, bytes, limit) {
            pool.idle.insert(p as usize, bytes);
        } else {
            // SAFETY: just allocated above and never shared.
            unsafe {
                let _ = dr::free_host(p);
            }
        }
    }
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
