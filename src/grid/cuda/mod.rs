//! CUDA engine (`kernels/grid.cu`). Everything after the upload of the raw inputs runs on the
//! device:
//!
//! 1. Coordinates (and the one-value-per-sample arrays: scalar data, shared weights) go up
//!    through the pinned staging buffers.
//! 2. The lookup is built on the device (`DevicePlan::build`): sort keys and a histogram of all
//!    eight key digits in one pass, then a stable LSD radix sort of (key, index) over the digits
//!    that vary, per-ring start tables, unit vectors in sorted order and the ring z spans. The
//!    order is the host plan's (src/grid/plan.rs): by key, ties by sample index, so the result
//!    does not depend on scheduling.
//! 3. Spectral data: either the raw `nsamples × nchan` rows go up once, on the copy stream
//!    while the plan is built ("resident"), and the gather reads them in place through the sort
//!    order; or blocks of 256 channels are packed into the staging buffers on the way up
//!    ("packed"), double-buffered: the calling thread packs block k + 1 and queues its DMAs on
//!    the copy stream while the device gathers block k (a second thread queues the gathers,
//!    each waiting on its block's upload event, and sends back an event after each gather that
//!    the copy stream waits on before overwriting that block's buffer). Packed is used over the
//!    memory budget, and for large pageable rows spanning several blocks, where the upload
//!    (a host copy at ~20 GB/s) would otherwise precede every gather (`prefer_overlap`).
//!    Page-locked rows go up resident, by one 2-D DMA per channel block (its columns of every
//!    row), each marked by an event that only that block's gather waits for.
//! 4. Per block of up to 256 channels: the gather (a thread block per run of 16 neighbouring
//!    targets; each pair's kernel weight once per launch, each value read once per run), then
//!    on the device the division and the cast to the output dtype; the block's cube comes down
//!    on a download stream of its own while the next block is gathered. Block 0 also writes the map of weight
//!    sums shared by all channels, and each block counts the NaN values that reach a target: a
//!    block's per-channel weight sums come down only if it has some (or weights are per value);
//!    else the map stands for them, and the unweighted sums are cube × weights on the host.
//! 5. More samples than the budget holds: the samples are split into chunks, each gridded as
//!    above into f64 host accumulators (`Sink::Add`), and divided on the host at the end.
//!
//! Every kernel takes one `#[repr(C)]` struct mirroring its C struct (all fields 8 bytes:
//! device pointers, i64, f64); `arg_layout` lists the Rust side for the layout test.
//!
//! Files, each using only those listed before it (and this one's `Sink`, `shared_weights`):
//! - `args`: the kernels' argument structs, launch geometry and `launch`.
//! - `buffers`: device buffers fenced against the copy stream, the per-block result slots.
//! - `plan`: the lookup built on the device (2.).
//! - `budget`: the device memory a call needs, the layout and sample chunks that fit (3., 5.).
//! - `gather`: the gathers block by block and the downloads into the sink (4.).
//! - `pipeline`: one call that fits, end to end: uploads, plan, rows, gathers (1. to 4.).
//! - `mod.rs` (this file): the entry `grid`, the sinks, the sample chunks (5.).

mod args;
mod budget;
mod buffers;
mod gather;
mod pipeline;
mod plan;

use std::mem::size_of;

use rayon::prelude::*;

use crate::backend::cuda::transfer::bytes_of;
use crate::backend::cuda::{self, Gpu};
use crate::error::Result;
use crate::grid::plan::nside_for;
use crate::grid::{Samples, Setup, Weights};
use crate::real::Real;
pub use args::arg_layout;
pub use budget::memory_plan;
use budget::{choose, prefer_overlap, Layout, Need};
use pipeline::run;

/// Where the sums go.
pub enum Sink<'a, O> {
    /// Overwrite `cube` (`nchan × nt`) and set `weights` to the weight sums: `nt` of them (a
    /// map shared by every channel) when no channel's differ, else `nchan × nt`. The unweighted
    /// sums are cube × weights (the caller derives them if asked): `skyconv.grid`.
    Finish {
        cube: &'a mut [O],
        weights: &'a mut Vec<O>,
    },
    /// Add the sums into the accumulators (each `nchan × nt`): `Gridder`.
    Add {
        unweighted: &'a mut [O],
        weights: &'a mut [O],
    },
}

/// Grid `samples` onto the targets (degrees) on the GPU, into `sink`.
pub fn grid<T: Real, O: Real>(
    samples: &Samples<'_, T>,
    target_lon: &[f64],
    target_lat: &[f64],
    setup: &Setup,
    sink: Sink<'_, O>,
) -> Result<()> {
    let (n, nt, nchan) = (samples.len(), target_lon.len(), samples.nchan);
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let need = Need {
        nt,
        nchan,
        sz_t: size_of::<T>(),
        sz_o: size_of::<O>(),
        full: nchan > 1 && matches!(samples.weights, Weights::Full(_)),
        per_sample_t: usize::from(nchan == 1) + usize::from(shared_weights(samples).is_some()),
        finish: matches!(sink, Sink::Finish { .. }),
        nrings: 4 * nside_for(setup.radius) as usize,
    };
    let budget = gpu.budget()?;
    let (m, layout) = choose(&need, n, budget)?;
    if m >= n {
        let locked = gpu.dma_direct(bytes_of(samples.data))?;
        let layout = prefer_overlap(&need, n, layout, samples.data, locked, budget);
        return run(&gpu, samples, target_lon, target_lat, setup, sink, layout);
    }
    // Sample chunks, each added into f64 accumulators (the caller's, or ours when finishing).
    let chunk = |s0: usize| {
        let s1 = (s0 + m).min(n);
        let rows = s0 * nchan..s1 * nchan;
        Samples {
            lon: &samples.lon[s0..s1],
            lat: &samples.lat[s0..s1],
            data: &samples.data[rows.clone()],
            nchan,
            weights: match samples.weights {
                Weights::Ones => Weights::Ones,
                Weights::PerSample(w) => Weights::PerSample(&w[s0..s1]),
                Weights::Full(w) => Weights::Full(&w[rows]),
            },
        }
    };
    let targets = (target_lon, target_lat);
    match sink {
        Sink::Add {
            unweighted,
            weights,
        } => add_chunks(
            &gpu, n, m, &chunk, targets, setup, layout, unweighted, weights,
        ),
        Sink::Finish { cube, weights } => {
            let mut au = vec![0.0f64; nchan * nt];
            let mut aw = vec![0.0f64; nchan * nt];
            add_chunks(&gpu, n, m, &chunk, targets, setup, layout, &mut au, &mut aw)?;
            weights.resize(nchan * nt, O::from_f64(0.0));
            host_finish(&au, &aw, cube, weights)
        }
    }
}

/// Add samples `0..n`, `m` at a time (`chunk(first)`), into the accumulators.
#[allow(clippy::too_many_arguments)]
fn add_chunks<'a, T: Real, P: Real>(
    gpu: &Gpu,
    n: usize,
    m: usize,
    chunk: &impl Fn(usize) -> Samples<'a, T>,
    (target_lon, target_lat): (&[f64], &[f64]),
    setup: &Setup,
    layout: Layout,
    unweighted: &mut [P],
    weights: &mut [P],
) -> Result<()> {
    for s0 in (0..n).step_by(m) {
        crate::backend::cancel::check()?;
        let sink = Sink::Add {
            unweighted: &mut *unweighted,
            weights: &mut *weights,
        };
        run(gpu, &chunk(s0), target_lon, target_lat, setup, sink, layout)?;
    }
    Ok(())
}

/// The weights shared by all channels of a sample, if any (per-sample weights, or full
/// weights with one channel).
pub(super) fn shared_weights<'a, T>(s: &Samples<'a, T>) -> Option<&'a [T]> {
    match s.weights {
        Weights::PerSample(w) => Some(w),
        Weights::Full(w) if s.nchan == 1 => Some(w),
        _ => None,
    }
}

/// The Finish outputs (cube, weights) from f64 sums, as grid_finish computes them (stops at
/// a cancel, polled per element).
fn host_finish<O: Real>(su: &[f64], sw: &[f64], cube: &mut [O], weights: &mut [O]) -> Result<()> {
    let stop = crate::backend::cancel::current();
    cube.par_iter_mut()
        .zip(weights.par_iter_mut())
        .zip(su.par_iter().zip(sw.par_iter()))
        .with_min_len(1 << 14)
        .for_each(|((c, w), (&a, &b))| {
            if stop.is_set() {
                return;
            }
            let u = O::from_f64(a);
            *w = O::from_f64(b);
            let wd = w.to_f64();
            *c = O::from_f64(if wd == 0.0 { f64::NAN } else { u.to_f64() / wd });
        });
    stop.check()
}
