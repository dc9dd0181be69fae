//! SoFiA-2's exact MAD (`stats::sofia2::mad`) of a noise sample that lives on the device, so
//! that only a few counts and the selected values come back (issue 22: the host rule took the
//! whole sample down and selected on one thread, ~8 ms a kernel with the GPU idle).
//!
//! The rule: the sample is in walk order; a last slot at flat index 0 is left out; with a
//! one-sided flux range only the first `walk.cap` in-range values count; the median of an even
//! count is the mean of the two middle values, in the element type. Here: per-chunk counts of
//! the in-range values (`sc_range_counts`) find the slot after the cap-th in-range value, and
//! the k-th values of that prefix come from the exact device selection
//! (`stats::select_ranks_device`, the same values the host sort finds). In-range infinities
//! (which the device selection skips) send the caller back to the host rule.

use crate::backend::cuda::{CudaSlice, Gpu, LaunchConfig, PushKernelArg};
use crate::cube::stats::noise::MAD_TO_STD;
use crate::cube::stats::sofia2::Walk;
use crate::cube::stats::{select_ranks_device, Range, Values};
use crate::error::Result;

/// Sample slots per block of `sc_range_counts`.
const CHUNK: usize = 2048;
const THREADS: u32 = 256;

fn range_code(range: Range) -> i32 {
    match range {
        Range::All => 0,
        Range::Negative => 1,
        Range::Positive => 2,
    }
}

/// The host rule's range test (`stats::sofia2`): NaN is never in range; infinities are.
fn in_range(x: f64, range: Range) -> bool {
    match range {
        Range::All => !x.is_nan(),
        Range::Negative => x < 0.0,
        Range::Positive => x > 0.0,
    }
}

/// The chunk holding the `cap`-th in-range value and its rank there (1-based), given the
/// in-range counts per chunk; None when there are at most `cap` in-range values.
fn cap_chunk(counts: &[u32], cap: usize) -> Option<(usize, usize)> {
    let mut before = 0usize;
    for (j, &c) in counts.iter().enumerate() {
        let c = c as usize;
        if before + c >= cap && c > 0 {
            return Some((j, cap - before));
        }
        before += c;
    }
    None
}

/// Position of the `need`-th (1-based) in-range value of `values`.
fn nth_in_range(values: &[f64], need: usize, range: Range) -> Option<usize> {
    values
        .iter()
        .enumerate()
        .filter(|(_, &x)| in_range(x, range))
        .nth(need.checked_sub(1)?)
        .map(|(i, _)| i)
}

/// SoFiA-2's MAD (scaled) of the first `ns` values of `samples`, or None where the host rule
/// must decide (no value in range, in-range infinities, or a selection that found nothing).
pub(super) fn sofia2_mad(
    gpu: &Gpu,
    samples: &CudaSlice<f64>,
    ns: usize,
    range: Range,
    walk: Walk,
    single: bool,
) -> Result<Option<f64>> {
    let used = if walk.ends_at_zero {
        ns.saturating_sub(1)
    } else {
        ns
    };
    let cap = match range {
        Range::All => usize::MAX,
        _ => walk.cap,
    };
    if used == 0 || cap == 0 {
        return Ok(None);
    }
    let chunks = used.div_ceil(CHUNK);
    // SAFETY: sc_range_counts writes every one of the `chunks` counts.
    let mut counts = unsafe { gpu.alloc::<u32>(chunks)? };
    let mut bad = gpu.alloc_zeros::<u32>(1)?;
    let f = gpu.function("scfind", "sc_range_counts")?;
    let (n, chunk, code) = (used as i64, CHUNK as i64, range_code(range));
    let mut b = gpu.stream.launch_builder(&f);
    b.arg(samples)
        .arg(&n)
        .arg(&chunk)
        .arg(&code)
        .arg(&mut counts)
        .arg(&mut bad);
    let lc = LaunchConfig {
        grid_dim: (chunks as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: arguments match sc_range_counts in kernels/scfind.cu; `samples` holds `used`
    // values, `counts` one per chunk.
    unsafe { b.launch(lc) }?;
    let mut host = vec![0u32; chunks];
    gpu.download(&counts, &mut host)?;
    let mut nonfinite = [0u32];
    gpu.download(&bad, &mut nonfinite)?;
    if nonfinite[0] > 0 {
        return Ok(None);
    }
    let total: usize = host.iter().map(|&c| c as usize).sum();
    // the kept values: every in-range value of slots [0, end), `kept` of them
    let (end, kept) = match cap_chunk(&host, cap) {
        Some((j, need)) if total > cap => {
            let a = j * CHUNK;
            let mut vals = vec![0f64; ((j + 1) * CHUNK).min(used) - a];
            let view = samples.slice(a..a + vals.len());
            gpu.stream.memcpy_dtoh(&view, &mut vals)?;
            gpu.sync()?;
            match nth_in_range(&vals, need, range) {
                Some(p) => (a + p + 1, cap),
                None => return Ok(None),
            }
        }
        _ => (used, total),
    };
    if kept == 0 {
        return Ok(None);
    }
    let vals = Values {
        center: 0.0,
        abs: true,
        range,
    };
    // Both middle ranks in one selection: the largest of the lower half is what the host rule
    // takes after its partition for an even count.
    let half = kept / 2;
    let below = if kept % 2 == 1 { half } else { half - 1 };
    let Some([below, mid]) = select_ranks_device(gpu, samples, end, [below, half], vals)? else {
        return Ok(None);
    };
    let med = if kept % 2 == 1 {
        mid
    } else {
        let r = |v: f64| if single { v as f32 as f64 } else { v };
        r(r(below + mid) * 0.5)
    };
    Ok(Some(MAD_TO_STD * med))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_chunk_finds_the_cap_th_value() {
        let counts = [3, 0, 2, 5];
        assert_eq!(cap_chunk(&counts, 1), Some((0, 1)));
        assert_eq!(cap_chunk(&counts, 3), Some((0, 3)));
        assert_eq!(cap_chunk(&counts, 4), Some((2, 1)));
        assert_eq!(cap_chunk(&counts, 5), Some((2, 2)));
        assert_eq!(cap_chunk(&counts, 6), Some((3, 1)));
        assert_eq!(cap_chunk(&counts, 10), Some((3, 5)));
        assert_eq!(cap_chunk(&counts, 11), None);
        assert_eq!(cap_chunk(&[0, 0], 1), None);
    }

    #[test]
    fn nth_in_range_follows_the_host_rule() {
        let v = [1.0, -2.0, f64::NAN, -0.0, f64::NEG_INFINITY, -3.0, 4.0];
        assert_eq!(nth_in_range(&v, 1, Range::Negative), Some(1));
        assert_eq!(nth_in_range(&v, 2, Range::Negative), Some(4));
        assert_eq!(nth_in_range(&v, 3, Range::Negative), Some(5));
        assert_eq!(nth_in_range(&v, 4, Range::Negative), None);
        assert_eq!(nth_in_range(&v, 2, Range::Positive), Some(6));
        assert_eq!(nth_in_range(&v, 3, Range::All), Some(3));
        assert_eq!(nth_in_range(&v, 0, Range::All), None);
    }

    /// The prefix rule of cap_chunk + nth_in_range keeps what `take(cap)` keeps.
    #[test]
    fn prefix_equals_take_cap() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let v: Vec<f64> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 1000) as f64 - 520.0
            })
            .collect();
        let chunk = 64;
        let counts: Vec<u32> = v
            .chunks(chunk)
            .map(|c| c.iter().filter(|&&y| in_range(y, Range::Negative)).count() as u32)
            .collect();
        let total = counts.iter().sum::<u32>() as usize;
        assert!(total > 2500, "{total}");
        assert_eq!(cap_chunk(&counts, total + 1), None);
        for cap in [1, 63, 64, 65, 1000, 2500] {
            let want: Vec<f64> = v.iter().cloned().filter(|&y| y < 0.0).take(cap).collect();
            let (j, need) = cap_chunk(&counts, cap).unwrap();
            let a = j * chunk;
            let p = nth_in_range(&v[a..(a + chunk).min(v.len())], need, Range::Negative).unwrap();
            let got: Vec<f64> = v[..a + p + 1]
                .iter()
                .cloned()
                .filter(|&y| y < 0.0)
                .collect();
            assert_eq!(got, want, "cap {cap}");
        }
    }
}
