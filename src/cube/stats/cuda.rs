//! GPU engine of the statistics over a device-resident array (`kernels/select.cu`): the count
//! of kept values, and exact k-th values by radix selection on the order-preserving keys of
//! `keys::key` — per key digit one histogram pass over the data and one small kernel that picks
//! the digit holding the rank, all on the device, so a selection costs its passes and a single
//! round trip (the host's `refine` would need one per level). Two ranks are followed at once
//! (the two middle values of a median). Large 64-bit selections count their last four digits
//! over the few keys that share the first two digits' prefixes (`GATHER_MIN`).

use super::{keys, Values};
use crate::backend::cuda::{grid_stride, CudaSlice, DeviceRepr, Gpu, LaunchConfig, PushKernelArg};
use crate::error::{Error, Result};
use crate::real::Real;

/// Blocks per launch (grid-stride loops): enough to fill a large GPU several times over.
const MAX_BLOCKS: usize = 1024;
/// Key bits per histogram pass (`RDX_BITS` in kernels/select.cu), and of the first pass
/// (`RDX_FIRST_BITS`: its histogram is kept in several copies against contention).
const DIGIT_BITS: u32 = 12;
const FIRST_BITS: u32 = 11;
/// u64 words of `struct RdxState` in kernels/select.cu: 8 words, then two histograms.
const STATE_WORDS: usize = 8 + 2 * (1 << DIGIT_BITS);
/// Threads of `rdx_choose_digit` (it scans 4096 counts, four a thread).
const CHOOSE_THREADS: u32 = 1024;
/// 64-bit selections over at least this many values keep, once two digits are chosen (23 key
/// bits: sign, exponent and 11 bits of the significand), the keys that start with either
/// prefix in a buffer of `GATHER_CAP` (`rdx_gather`), and count the four later digits over it
/// instead of the whole array: a MAD's middle values share that prefix with ~1e-4 of a
/// Gaussian sample. Ties beyond the buffer (e.g. quantised data) select over the array again.
const GATHER_MIN: usize = 1 << 22;
const GATHER_CAP: usize = 1 << 20;
/// Key bits chosen before the gather (the first digit and one more).
const GATHER_AT: u32 = 64 - FIRST_BITS - DIGIT_BITS;

/// The float32 order-preserving key's value (as `rdx_key32` in kernels/select.cu builds it).
fn value32(k: u64) -> f64 {
    let k = k as u32;
    f32::from_bits(if k >> 31 == 1 { k & !(1 << 31) } else { !k }) as f64
}

/// Mirrors `struct SelParams` in kernels/select.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct SelParams {
    center: f64,
    abs_dev: i32,
    range: i32,
}

// SAFETY: plain-old-data with the same C layout as the kernel's struct.
unsafe impl DeviceRepr for SelParams {}

impl SelParams {
    fn new(vals: Values) -> Self {
        SelParams {
            center: vals.center,
            abs_dev: vals.abs as i32,
            range: vals.range_code(),
        }
    }
}

fn check_len<T>(data: &CudaSlice<T>, n: usize) -> Result<()> {
    if data.len() < n {
        return Err(Error::Internal(format!(
            "statistics over {n} values of a device buffer of {}",
            data.len()
        )));
    }
    Ok(())
}

/// Number of the first `n` device values that `vals` keeps.
pub fn count_device<T: Real>(
    gpu: &Gpu,
    data: &CudaSlice<T>,
    n: usize,
    vals: Values,
) -> Result<usize> {
    check_len(data, n)?;
    let f = gpu.function("select", &format!("sel_count_{}", T::CUDA))?;
    let mut out = gpu.alloc_zeros::<u64>(1)?;
    let (p, n64) = (SelParams::new(vals), n as i64);
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(data).arg(&n64).arg(&p).arg(&mut out);
    // SAFETY: arguments match sel_count_* in kernels/select.cu; data holds n elements.
    unsafe { l.launch(grid_stride(n, MAX_BLOCKS)) }?;
    let mut host = [0u64];
    gpu.download(&out, &mut host)?;
    Ok(host[0] as usize)
}

/// The kept values of 0-based ranks `ranks` (in ascending order of the values) among the first
/// `n` device values, or None when a rank is not below the number of kept values. Exact: the
/// values themselves, as `Values::map` gives them.
pub fn select_ranks_device<T: Real>(
    gpu: &Gpu,
    data: &CudaSlice<T>,
    n: usize,
    ranks: [usize; 2],
    vals: Values,
) -> Result<Option<[f64; 2]>> {
    check_len(data, n)?;
    if let Some(plan) = Bracket::plan(n) {
        if let Some(found) = select_bracketed(gpu, data, n, ranks, vals, plan)? {
            return Ok(found);
        }
    }
    if !is_key32::<T>(vals) && n >= GATHER_MIN {
        if let Some(found) = select_ranks(gpu, data, n, ranks, vals, true)? {
            return Ok(found);
        }
    }
    Ok(select_ranks(gpu, data, n, ranks, vals, false)?.flatten())
}

/// float32 values taken as they are select on the 32-bit keys of the floats themselves (3
/// digits: 11, 12 and 9 key bits; 64-bit keys 11, 4 × 12 and 5).
fn is_key32<T: Real>(vals: Values) -> bool {
    T::CUDA == "f32" && vals == Values::FINITE
}

/// The selection state `rdx_start_state` starts for ranks `ranks`.
fn new_state(gpu: &Gpu, ranks: [u64; 2]) -> Result<CudaSlice<u64>> {
    let start = gpu.function("select", "rdx_start_state")?;
    // SAFETY: rdx_start_state writes every word the later kernels read.
    let mut st = unsafe { gpu.alloc::<u64>(STATE_WORDS)? };
    let mut l = gpu.stream.launch_builder(&start);
    l.arg(&mut st).arg(&ranks[0]).arg(&ranks[1]);
    // SAFETY: matches rdx_start_state; st holds a RdxState.
    unsafe { l.launch(one_block()) }?;
    Ok(st)
}

/// One block of `CHOOSE_THREADS` (the state kernels).
fn one_block() -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (CHOOSE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Chooses the digits of the state's ranks, most significant first: `pass(shift, bits, st)`
/// counts the keys by the `bits` key bits below `shift`, then `rdx_choose_digit` picks the
/// digit holding each rank.
fn choose_digits(
    gpu: &Gpu,
    st: &mut CudaSlice<u64>,
    kbits: u32,
    mut pass: impl FnMut(i32, i32, &mut CudaSlice<u64>) -> Result<()>,
) -> Result<()> {
    let choose = gpu.function("select", "rdx_choose_digit")?;
    let mut shift = kbits;
    while shift > 0 {
        let bits = if shift == kbits {
            FIRST_BITS
        } else {
            DIGIT_BITS.min(shift)
        };
        let (s, b, kb) = (shift as i32, bits as i32, kbits as i32);
        pass(s, b, st)?;
        let mut l = gpu.stream.launch_builder(&choose);
        l.arg(&mut *st).arg(&s).arg(&b).arg(&kb);
        // SAFETY: matches rdx_choose_digit, which needs exactly 1024 threads in one block.
        unsafe { l.launch(one_block()) }?;
        shift -= bits;
    }
    Ok(())
}

/// A digit pass over `len` kept keys (`rdx_gather`'s or `rdx_bracket`'s buffer, or a sample;
/// 0 marks an empty slot), 32-bit keys (`key32`) or 64-bit ones.
fn kept_pass(
    gpu: &Gpu,
    keys: &CudaSlice<u64>,
    len: usize,
    key32: bool,
    (shift, bits): (i32, i32),
    st: &mut CudaSlice<u64>,
) -> Result<()> {
    let name = if key32 {
        "rdx_histogram_gathered32"
    } else {
        "rdx_histogram_gathered"
    };
    let f = gpu.function("select", name)?;
    let (p, len64) = (SelParams::new(Values::FINITE), len as i64);
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(keys)
        .arg(&len64)
        .arg(&p)
        .arg(&shift)
        .arg(&bits)
        .arg(st);
    // SAFETY: matches rdx_histogram_gathered{,32}; keys holds len keys.
    unsafe { l.launch(grid_stride(len, MAX_BLOCKS)) }?;
    Ok(())
}

/// The selected values once the state's last digit is chosen: None when the kept keys
/// overflowed their buffer (or a bracket missed its ranks), Some(None) when a rank lies past
/// the last kept value.
fn read_state(gpu: &Gpu, st: &CudaSlice<u64>, key32: bool) -> Result<Option<Option<[f64; 2]>>> {
    let mut head = [0u64; 8];
    gpu.download(st, &mut head)?;
    if head[7] != 0 {
        return Ok(None);
    }
    if head[4] != 0 {
        return Ok(Some(None));
    }
    let value = if key32 { value32 } else { keys::value };
    Ok(Some(Some([value(head[5]), value(head[6])])))
}

/// `select_ranks_device` with the later digits counted over the gathered keys (`gather`), or
/// over the whole array; None when the gathered keys overflowed their buffer.
fn select_ranks<T: Real>(
    gpu: &Gpu,
    data: &CudaSlice<T>,
    n: usize,
    ranks: [usize; 2],
    vals: Values,
    gather: bool,
) -> Result<Option<Option<[f64; 2]>>> {
    let key32 = is_key32::<T>(vals);
    let (kbits, name) = if key32 {
        (32u32, "rdx_histogram_key32_f32".to_string())
    } else {
        (64, format!("rdx_histogram_{}", T::CUDA))
    };
    let hist = gpu.function("select", &name)?;
    let mut st = new_state(gpu, [ranks[0] as u64, ranks[1] as u64])?;
    let (p, n64) = (SelParams::new(vals), n as i64);
    // the gathered keys and their count, alive until the state is read back
    let mut kept: Option<[CudaSlice<u64>; 2]> = None;
    choose_digits(gpu, &mut st, kbits, |s, b, st| {
        if gather && s == GATHER_AT as i32 {
            kept = Some(gather_keys(gpu, data, n, &p, s, st)?);
        }
        if let Some([keys, _]) = &kept {
            return kept_pass(gpu, keys, GATHER_CAP, false, (s, b), st);
        }
        let mut l = gpu.stream.launch_builder(&hist);
        l.arg(data).arg(&n64).arg(&p).arg(&s).arg(&b).arg(st);
        // SAFETY: matches rdx_histogram_* (whole warps); data holds n elements.
        unsafe { l.launch(grid_stride(n, MAX_BLOCKS)) }?;
        Ok(())
    })?;
    read_state(gpu, &st, key32)
}

/// The shape of a bracketed selection over `n` values (`rdx_sample`, `rdx_bracket` in
/// kernels/select.cu): `sample` keys at spread positions, the bracket `margin` sample ranks
/// either side of the ranks' expected places among them, and a buffer of `cap` keys for the
/// values inside the bracket.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bracket {
    sample: usize,
    margin: usize,
    cap: usize,
}

/// Selections over at least this many values are bracketed first (below it the digit passes
/// over the array cost less than the sample's).
const BRACKET_MIN: usize = 1 << 22;

impl Bracket {
    fn plan(n: usize) -> Option<Bracket> {
        if n < BRACKET_MIN {
            return None;
        }
        let sample = (n / 64).next_power_of_two().clamp(1 << 14, 1 << 20);
        // A kept value's place among the sample keys varies by at most sqrt(sample) / 2 (one
        // standard deviation of a binomial count): the margin is ten of those.
        let margin = 5 * (sample as f64).sqrt().ceil() as usize;
        // The bracket spans ~2·margin sample ranks, i.e. 2·margin·n / sample values: room for
        // half as many again.
        let cap = (3 * margin * (n / sample + 1)).next_power_of_two();
        Some(Bracket {
            sample,
            margin,
            cap,
        })
    }
}

/// `select_ranks_device` through a bracket from a sample (`Bracket`): one pass over the array,
/// then the digits over the keys inside the bracket. None when the bracket misses a rank or
/// overflows its buffer (the caller then selects over the array).
fn select_bracketed<T: Real>(
    gpu: &Gpu,
    data: &CudaSlice<T>,
    n: usize,
    ranks: [usize; 2],
    vals: Values,
    plan: Bracket,
) -> Result<Option<Option<[f64; 2]>>> {
    let key32 = is_key32::<T>(vals);
    let (kbits, kind) = if key32 {
        (32u32, "key32_f32".to_string())
    } else {
        (64, T::CUDA.to_string())
    };
    let Bracket {
        sample: s,
        margin,
        cap,
    } = plan;
    let (p, n64, s64, cap64) = (SelParams::new(vals), n as i64, s as i64, cap as i64);
    // SAFETY: rdx_sample writes each of the s keys.
    let mut sample = unsafe { gpu.alloc::<u64>(s)? };
    let f = gpu.function("select", &format!("rdx_sample_{kind}"))?;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(data).arg(&n64).arg(&p).arg(&mut sample).arg(&s64);
    // SAFETY: matches rdx_sample_*; data holds n elements, sample s keys.
    unsafe { l.launch(grid_stride(s, MAX_BLOCKS)) }?;
    // The ranks' expected places among the sample keys, widened by the margin.
    let place = |k: usize| (k as f64 * s as f64 / n as f64) as usize;
    let lo_open = place(ranks[0]) < margin;
    let hi_open = place(ranks[1]) + margin >= s - 1;
    let lo = if lo_open { 0 } else { place(ranks[0]) - margin };
    let hi = if hi_open {
        s - 1
    } else {
        place(ranks[1]) + margin
    };
    let mut bounds = new_state(gpu, [lo as u64, hi as u64])?;
    choose_digits(gpu, &mut bounds, kbits, |sh, b, st| {
        kept_pass(gpu, &sample, s, key32, (sh, b), st)
    })?;
    let mut kept = gpu.alloc_zeros::<u64>(cap)?;
    let mut tally = gpu.alloc_zeros::<u64>(2)?;
    let f = gpu.function("select", &format!("rdx_bracket_{kind}"))?;
    let (lo_open, hi_open) = (lo_open as i32, hi_open as i32);
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(data)
        .arg(&n64)
        .arg(&p)
        .arg(&bounds)
        .arg(&lo_open)
        .arg(&hi_open)
        .arg(&mut kept)
        .arg(&cap64)
        .arg(&mut tally);
    // SAFETY: matches rdx_bracket_* (blocks of THREADS = 8 warps, RDX_STAGE_WARPS); data holds
    // n elements, kept cap keys, tally 2 counts.
    unsafe { l.launch(grid_stride(n, MAX_BLOCKS)) }?;
    let mut st = new_state(gpu, [ranks[0] as u64, ranks[1] as u64])?;
    let settle = gpu.function("select", "rdx_bracket_settle")?;
    let mut l = gpu.stream.launch_builder(&settle);
    l.arg(&mut st).arg(&tally).arg(&cap64);
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: matches rdx_bracket_settle (one warp, thread 0 works); st holds a RdxState.
    unsafe { l.launch(one) }?;
    choose_digits(gpu, &mut st, kbits, |sh, b, st| {
        kept_pass(gpu, &kept, cap, key32, (sh, b), st)
    })?;
    read_state(gpu, &st, key32)
}

/// The 64-bit keys of the kept values that start with either rank's prefix (bits at and above
/// `shift`), in a zeroed buffer of `GATHER_CAP` (`rdx_gather`; past it the state's overflow
/// flag is set), and their count.
fn gather_keys<T: Real>(
    gpu: &Gpu,
    data: &CudaSlice<T>,
    n: usize,
    p: &SelParams,
    shift: i32,
    st: &mut CudaSlice<u64>,
) -> Result<[CudaSlice<u64>; 2]> {
    let f = gpu.function("select", &format!("rdx_gather_{}", T::CUDA))?;
    let mut keys = gpu.alloc_zeros::<u64>(GATHER_CAP)?;
    let mut count = gpu.alloc_zeros::<u64>(1)?;
    let (n64, cap) = (n as i64, GATHER_CAP as i64);
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(data)
        .arg(&n64)
        .arg(p)
        .arg(&shift)
        .arg(st)
        .arg(&mut keys)
        .arg(&cap)
        .arg(&mut count);
    // SAFETY: matches rdx_gather_* (whole warps); data holds n elements, keys GATHER_CAP.
    unsafe { l.launch(grid_stride(n, MAX_BLOCKS)) }?;
    Ok([keys, count])
}
