//! A test hook for the GPU admission rule (`backend::cuda::admit`, issue 19) that needs no GPU.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use rayon::prelude::*;

use crate::backend::cuda::admit;
use crate::backend::Device;
use crate::py::errors::{compute, compute_on, value_err};

/// Probes inside their section: per ordinal 0..8, and in all.
static INSIDE: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];
static INSIDE_ALL: AtomicUsize = AtomicUsize::new(0);
/// The old rule's lock (a per-GPU mutex taken on the pool worker running the call).
static LEGACY: Mutex<()> = Mutex::new(());

/// The engine's part: inside the section, a parallel loop of `parts` pieces of `micros` µs on
/// skyconv's pool; returns (the sum of 0..parts, probes in a section on this ordinal and on
/// any ordinal at the loop's end, this one included).
fn body(ordinal: u32, parts: usize, micros: u64) -> (u64, usize, usize) {
    let mine = &INSIDE[ordinal as usize];
    mine.fetch_add(1, Ordering::SeqCst);
    INSIDE_ALL.fetch_add(1, Ordering::SeqCst);
    let sum = (0..parts)
        .into_par_iter()
        .map(|i| {
            std::thread::sleep(Duration::from_micros(micros));
            i as u64
        })
        .sum();
    let seen = (
        mine.load(Ordering::SeqCst),
        INSIDE_ALL.load(Ordering::SeqCst),
    );
    mine.fetch_sub(1, Ordering::SeqCst);
    INSIDE_ALL.fetch_sub(1, Ordering::SeqCst);
    (sum, seen.0, seen.1)
}

/// A stand-in for a GPU engine call on `cuda:ordinal` (no GPU is touched): the engine's
/// section around a parallel loop on the pool. `mode` "admitted": the rule (the call admitted
/// in the calling thread); "unadmitted": a pool job not admitted (the section refuses it);
/// "legacy": the old per-GPU mutex taken inside the pool job (two threads calling at once may
/// deadlock; for reproducing that defect only). Returns (sum of 0..parts, probes in a section
/// on this ordinal, on any ordinal, at the loop's end).
#[pyfunction]
#[pyo3(signature = (ordinal, parts, micros, mode="admitted"))]
fn _gpu_admission_probe(
    py: Python<'_>,
    ordinal: u32,
    parts: usize,
    micros: u64,
    mode: &str,
) -> PyResult<(u64, usize, usize)> {
    if ordinal as usize >= INSIDE.len() {
        return Err(value_err(format!(
            "ordinal must be 0 to {}, got {ordinal}",
            INSIDE.len() - 1
        )));
    }
    match mode {
        "admitted" => compute_on(py, Device::Cuda(ordinal), || {
            let _s = admit::section(ordinal)?;
            Ok(body(ordinal, parts, micros))
        }),
        "unadmitted" => compute(py, || {
            let _s = admit::section(ordinal)?;
            Ok(body(ordinal, parts, micros))
        }),
        "legacy" => compute(py, || {
            let _l = LEGACY.lock().unwrap_or_else(|e| e.into_inner());
            Ok(body(ordinal, parts, micros))
        }),
        _ => Err(value_err(format!(
            "mode must be 'admitted', 'unadmitted' or 'legacy', got {mode:?}"
        ))),
    }
}

/// This process's GPU admissions by ordinal since the last reset: {ordinal: (calls, seconds
/// their threads waited for the GPU, seconds the GPU was admitted to a call)}.
#[pyfunction]
#[pyo3(signature = (reset=false))]
fn _gpu_admission_stats(reset: bool) -> BTreeMap<u32, (u64, f64, f64)> {
    admit::take_stats(reset)
        .into_iter()
        .map(|(o, s)| (o, (s.calls, s.waited_s, s.admitted_s)))
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_gpu_admission_probe, m)?)?;
    m.add_function(wrap_pyfunction!(_gpu_admission_stats, m)?)?;
    Ok(())
}
