//! skyconv's own rayon pool. Sized by `set_num_threads`, else `SKYCONV_NUM_THREADS`, else all
//! cores. Rebuilt in a forked child: the parent's worker threads do not exist there, and
//! installing work into that pool would hang forever.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{Error, Result};

struct PoolEntry {
    pid: u32,
    threads: usize,
    pool: Arc<ThreadPool>,
}

static POOL: Mutex<Option<PoolEntry>> = Mutex::new(None);
/// Thread count set by `set_num_threads`; 0 means "not set".
static REQUESTED: AtomicUsize = AtomicUsize::new(0);

/// The cores available to this process, read once: `available_parallelism` reads the cgroup
/// CPU quota files on every call (~60 µs), which every call into skyconv would pay.
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// `SKYCONV_NUM_THREADS`, else all cores; a value that is not a positive integer is an error
/// naming the variable.
fn default_threads() -> Result<usize> {
    Ok(crate::backend::env::usize_var(
        "SKYCONV_NUM_THREADS",
        1,
        "a positive integer (the number of CPU threads)",
    )?
    .unwrap_or_else(cores))
}

/// The number of threads the pool has (or will have when next used).
pub fn num_threads() -> Result<usize> {
    match REQUESTED.load(Ordering::Relaxed) {
        0 => default_threads(),
        n => Ok(n),
    }
}

/// Set the number of CPU threads for all later calls.
pub fn set_num_threads(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::value(
            "set_num_threads: n must be a positive integer",
        ));
    }
    REQUESTED.store(n, Ordering::Relaxed);
    Ok(())
}

/// The pool for this process, built (or rebuilt after fork or a size change) on demand.
pub fn pool() -> Result<Arc<ThreadPool>> {
    let want = num_threads()?;
    let pid = std::process::id();
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(entry) = guard.as_ref() {
        if entry.pid == pid && entry.threads == want {
            return Ok(entry.pool.clone());
        }
    }
    if let Some(old) = guard.take() {
        if old.pid != pid {
            // Its threads live only in the parent; dropping it here would signal ghosts.
            std::mem::forget(old);
        }
    }
    let pool = ThreadPoolBuilder::new()
        .num_threads(want)
        .thread_name(|i| format!("skyconv-{i}"))
        .start_handler(|_| IN_POOL.with(|c| c.set(true)))
        .build()
        .map_err(|e| Error::Internal(format!("cannot start {want} CPU threads: {e}")))?;
    let pool = Arc::new(pool);
    *guard = Some(PoolEntry {
        pid,
        threads: want,
        pool: pool.clone(),
    });
    Ok(pool)
}

thread_local! {
    /// True on the worker threads of skyconv's pools (set by their start handler).
    static IN_POOL: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is a worker of one of skyconv's pools.
pub fn in_pool() -> bool {
    IN_POOL.with(Cell::get)
}

/// Run `f` inside skyconv's pool, so rayon iterators in it use that pool. Entered once per
/// call: the bindings (`py::errors::compute`) enter it, and the engines' own `install`s (for
/// Rust callers) then run `f` in place, without looking the pool up again, and so in the same
/// pool even if `set_num_threads` replaced it meanwhile.
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> Result<R> {
    if IN_POOL.with(Cell::get) {
        return Ok(f());
    }
    let pool = pool()?;
    Ok(pool.install(f))
}

/// A raw pointer into one buffer, shared by parallel tasks that each write their own disjoint
/// elements (rayon closures need Send + Sync; `&mut` slices cannot be split that finely).
#[derive(Clone, Copy)]
pub struct Disjoint<T>(pub *mut T);

// SAFETY: users guarantee that no two tasks touch the same element.
unsafe impl<T> Send for Disjoint<T> {}
unsafe impl<T> Sync for Disjoint<T> {}

impl<T> Disjoint<T> {
    /// Pointer to element `i` (a method, so closures capture the whole Send wrapper). Reading
    /// or writing through it is the caller's unsafe promise: in bounds and not shared.
    #[inline(always)]
    pub fn at(&self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }

    #[inline(always)]
    pub fn get(&self) -> *mut T {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A nested `install` (an engine's, inside a binding's) runs in the pool the call entered,
    /// even after `set_num_threads` replaced the pool; the next call gets the new pool.
    #[test]
    fn nested_install_stays_in_the_entered_pool() {
        set_num_threads(2).unwrap();
        let (outer, inner, same_thread) = install(|| {
            let me = std::thread::current().id();
            let outer = rayon::current_num_threads();
            set_num_threads(3).unwrap();
            let (inner, who) =
                install(|| (rayon::current_num_threads(), std::thread::current().id())).unwrap();
            (outer, inner, who == me)
        })
        .unwrap();
        assert_eq!((outer, inner, same_thread), (2, 2, true));
        assert_eq!(install(rayon::current_num_threads).unwrap(), 3);
        assert!(
            !IN_POOL.with(Cell::get),
            "the calling thread is not a worker"
        );
    }
}
