//! Fallible host memory: every buffer whose size comes from user input is asked for here,
//! before the work starts, so that a request the machine cannot hold is an
//! [`Error::HostMemory`] (Python `skyconv.HostMemoryError`, a `MemoryError`) saying what was
//! asked for, how many bytes and the limit, never an abort.
//!
//! The limit is the memory the kernel says it can give without swapping out other work:
//! `MemAvailable + SwapFree` from `/proc/meminfo` (where that file exists; elsewhere only the
//! allocator's own answer counts). Requests under [`QUIET_BYTES`] skip the look-up.

use crate::error::{Error, Result};

/// Requests smaller than this are not compared with the limit (the allocator still answers).
pub const QUIET_BYTES: u128 = 64 << 20;

/// Bytes of host memory this process may still take: MemAvailable + SwapFree, or None where
/// `/proc/meminfo` cannot be read.
pub fn limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb.saturating_mul(1024))
    };
    let avail = field("MemAvailable:")?;
    Some(avail.saturating_add(field("SwapFree:").unwrap_or(0)))
}

/// [`limit`], capped by `SKYCONV_HOST_MEMORY_LIMIT` (bytes) where that is set: a share of a
/// node for one process, and the way the tests make a large host refuse what a small one would.
pub fn capped_limit() -> Result<Option<u64>> {
    let cap =
        crate::backend::env::usize_var("SKYCONV_HOST_MEMORY_LIMIT", 0, "a whole number of bytes")?;
    Ok(match (limit(), cap) {
        (Some(l), Some(c)) => Some(l.min(c as u64)),
        (l, c) => l.or(c.map(|c| c as u64)),
    })
}

pub use crate::error::human;

/// Refuse `count` elements of `elem_bytes` each for `what` when they cannot fit: more than the
/// address space, or more than [`limit`]. Returns the byte count.
pub fn check(what: &str, count: usize, elem_bytes: usize) -> Result<usize> {
    let bytes = count as u128 * elem_bytes as u128;
    let too_big = |limit: Option<u64>| Error::HostMemory {
        what: what.to_string(),
        bytes,
        limit,
    };
    if bytes > isize::MAX as u128 {
        return Err(too_big(limit()));
    }
    if bytes >= QUIET_BYTES {
        if let Some(l) = capped_limit()? {
            if bytes > l as u128 {
                return Err(too_big(Some(l)));
            }
        }
    }
    Ok(bytes as usize)
}

/// Refuse a buffer of the given dimensions (their product, in elements of `elem_bytes`), with
/// the product itself checked for overflow.
pub fn check_dims(what: &str, dims: &[usize], elem_bytes: usize) -> Result<usize> {
    let count = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    match count {
        Some(c) => check(what, c, elem_bytes),
        None => Err(Error::HostMemory {
            what: what.to_string(),
            bytes: dims
                .iter()
                .fold(elem_bytes as u128, |a, &d| a.saturating_mul(d as u128)),
            limit: limit(),
        }),
    }
}

/// `vec![value; len]`, fallibly: checked against the limit, then reserved with
/// `try_reserve_exact` (an allocator refusal is the same error, not an abort).
pub fn try_vec<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    try_reserve(&mut v, len, what)?;
    v.resize(len, value);
    Ok(v)
}

/// `vec![0.0; len]` of f32 or f64, fallibly (as [`try_vec`]), from zeroed memory: for large
/// sizes the allocator hands over fresh zero pages, so nothing is written up front (a memset of
/// gigabytes would be a long stretch without a cancel poll before the work starts).
pub fn try_zeros<T: crate::real::Real>(len: usize, what: &str) -> Result<Vec<T>> {
    let bytes = check(what, len, std::mem::size_of::<T>())?;
    if bytes == 0 {
        return Ok(Vec::new());
    }
    let refused = || Error::HostMemory {
        what: what.to_string(),
        bytes: bytes as u128,
        limit: limit(),
    };
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| refused())?;
    // SAFETY: the layout has a non-zero size (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
    if ptr.is_null() {
        return Err(refused());
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `len` T's (what
    // `Vec` frees it with), and all-zero bits are 0.0 for f32 and f64, the only `Real` types.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// Ask the kernel to back the 2 MiB-aligned interior of `bytes` at `ptr` with transparent huge
/// pages (Linux `madvise(MADV_HUGEPAGE)`, as NumPy does for its large arrays), before the
/// memory is first touched: one fault and one TLB entry per 2 MiB instead of 512, and a cheap
/// unmap. Only a hint: nothing happens elsewhere, below 4 MiB, or where the kernel declines.
pub fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        const MADV_HUGEPAGE: std::ffi::c_int = 14;
        extern "C" {
            fn madvise(
                addr: *mut std::ffi::c_void,
                len: usize,
                advice: std::ffi::c_int,
            ) -> std::ffi::c_int;
        }
        if bytes < 2 * HUGE {
            return;
        }
        let start = (ptr as usize).div_ceil(HUGE) * HUGE;
        let end = (ptr as usize + bytes) / HUGE * HUGE;
        if end > start {
            // SAFETY: [start, end) lies inside the caller's allocation; MADV_HUGEPAGE changes
            // no contents, only how untouched pages will be backed (its result is ignored).
            unsafe { madvise(start as *mut std::ffi::c_void, end - start, MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes);
}

/// `v.reserve_exact(additional)`, fallibly (see [`try_vec`]).
pub fn try_reserve<T>(v: &mut Vec<T>, additional: usize, what: &str) -> Result<()> {
    let total = v.len().saturating_add(additional);
    check(what, total, std::mem::size_of::<T>().max(1))?;
    v.try_reserve_exact(additional)
        .map_err(|_| Error::HostMemory {
            what: what.to_string(),
            bytes: total as u128 * std::mem::size_of::<T>() as u128,
            limit: limit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_are_zero_and_huge_zeros_are_errors() {
        let v: Vec<f64> = try_zeros(1000, "test zeros").unwrap();
        assert_eq!(v.len(), 1000);
        assert!(v.iter().all(|&x| x == 0.0));
        assert!(try_zeros::<f32>(0, "none").unwrap().is_empty());
        assert!(matches!(
            try_zeros::<f64>(usize::MAX / 4, "too many"),
            Err(Error::HostMemory { .. })
        ));
    }

    #[test]
    fn huge_requests_are_errors_not_aborts() {
        let e = try_vec(usize::MAX / 4, 0f64, "a test buffer").unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::HostMemory { .. }), "{msg}");
        assert!(msg.contains("a test buffer"), "{msg}");
        assert!(check_dims("x", &[usize::MAX, 3], 8).is_err());
        if let Some(l) = limit() {
            // just over the limit: refused before any allocation
            let n = (l / 8 + 1) as usize;
            assert!(matches!(check("y", n, 8), Err(Error::HostMemory { .. })));
        }
    }

    #[test]
    fn small_requests_succeed() {
        let v = try_vec(1000, 1.5f32, "small").unwrap();
        assert_eq!(v.len(), 1000);
        assert!(v.iter().all(|&x| x == 1.5));
        assert_eq!(check_dims("z", &[10, 20], 8).unwrap(), 1600);
    }
}
