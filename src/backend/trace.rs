//! The process's set-up log: one entry per one-time cost (CUDA library search and loads,
//! driver initialisation, context creation, kernel modules read from the cache or compiled,
//! cuFFT plans, page-locked and device pools, and the Python layer's host set-up such as the
//! smoothing cost model, fitted splits and ring weights), in the order they happened, so that
//! a first call's time can be split into its stages (`bench/gpu/first_call.py`).
//!
//! Always kept (a few entries a process; at most `CAP`, the oldest dropped); printed to stderr
//! as they happen when `SKYCONV_TRACE` is set (to anything but "" or "0").

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Most entries kept (a long-lived process creating many FFT plans drops the oldest).
pub const CAP: usize = 4096;

/// One timed stage.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// What was done ("context", "module load", "cufft plan", ...).
    pub stage: String,
    /// Which (a module name, a plan size, a byte count; may be empty).
    pub detail: String,
    /// How long it took, in seconds.
    pub seconds: f64,
    /// When it ended, in seconds since the log's origin (the first entry or `origin()` call).
    pub at: f64,
}

static LOG: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The instant `Entry::at` counts from: the first time the log is touched.
pub fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn printing() -> bool {
    std::env::var("SKYCONV_TRACE").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Add an entry for a stage that took `seconds` and ended now.
pub fn record(stage: &str, detail: &str, seconds: f64) {
    let at = origin().elapsed().as_secs_f64();
    if printing() {
        let sep = if detail.is_empty() { "" } else { " " };
        eprintln!(
            "skyconv trace: {stage}{sep}{detail}: {:.1} ms (at {at:.3} s)",
            seconds * 1e3
        );
    }
    let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    if log.len() >= CAP {
        log.remove(0);
    }
    log.push(Entry {
        stage: stage.to_string(),
        detail: detail.to_string(),
        seconds,
        at,
    });
}

/// Run `f`, recording its wall time as `stage` (`detail` built only after it ran).
pub fn timed<T>(stage: &str, detail: impl FnOnce() -> String, f: impl FnOnce() -> T) -> T {
    origin();
    let t = Instant::now();
    let out = f();
    record(stage, &detail(), t.elapsed().as_secs_f64());
    out
}

/// Every entry kept, oldest first.
pub fn entries() -> Vec<Entry> {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Forget every entry (the origin stays).
pub fn clear() {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_records_in_order_and_caps() {
        let before = entries().len();
        let v = timed("unit-a", || "x".into(), || 7);
        assert_eq!(v, 7);
        record("unit-b", "", 0.25);
        let e = entries();
        assert!(e.len() >= before + 2);
        let a = e.iter().position(|x| x.stage == "unit-a").unwrap();
        let b = e.iter().position(|x| x.stage == "unit-b").unwrap();
        assert!(a < b);
        assert_eq!(e[b].seconds, 0.25);
        assert_eq!(e[a].detail, "x");
        assert!(e[a].at <= e[b].at);
    }
}
