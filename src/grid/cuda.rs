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

use std::mem::{offset_of, size_of};
use std::sync::{mpsc, Arc};

use rayon::prelude::*;

use super::plan::nside_for;
use super::{Samples, Setup, Weights};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::transfer::{bytes_of, prefault};
use crate::backend::cuda::{
    self, grid_stride, CudaEvent, CudaSlice, CudaStream, DeviceRepr, Gpu, LaunchConfig,
    PushKernelArg,
};
use crate::error::{Error, Result};
use crate::real::Real;

/// Keys per radix tile (SC_RADIX_TILE) and threads of the radix kernels (SC_RADIX_THREADS).
const TILE: usize = 4096;
const RADIX_THREADS: u32 = 256;
/// Threads of the one-block kernels (grid_scan, grid_envelopes).
const ONE_BLOCK_THREADS: u32 = 1024;
/// Threads per block of the scalar gather (one warp per target).
const GATHER_THREADS: u32 = 256;
/// Targets per block of the spectral gather (SC_RUN) and its threads (SC_SPEC_THREADS).
const SPEC_RUN: usize = 16;
const SPEC_THREADS: u32 = 256;
const MAX_BLOCKS: usize = 1 << 16;
/// Channels per spectral launch (one per thread of a block).
const MAX_CW: usize = SPEC_THREADS as usize;
/// Fewest samples per chunk before giving up with a GpuMemoryError.
const MIN_CHUNK: usize = 1 << 12;

// ------------------------------------------------------------------ kernel arguments

/// `GridPlan` in kernels/grid.cu.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PlanArgs {
    x: u64,
    y: u64,
    z: u64,
    keys: u64,
    n: i64,
    ring_start: u64,
    zmin: u64,
    zmax: u64,
    lo_env: u64,
    hi_env: u64,
    nrings: i64,
}

/// `GridKernel`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct KernelArgs {
    kind: i64,
    c0: f64,
    c1: f64,
    c2: f64,
    c3: f64,
    radius: f64,
    c2_cut: f64,
}

/// `GridPrepArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PrepArgs {
    lon: u64,
    lat: u64,
    vcheck: u64,
    wcheck: u64,
    keys: u64,
    vals: u64,
    hist: u64,
    n: i64,
    nside: i64,
}

/// `GridRadixArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RadixArgs {
    keys_in: u64,
    vals_in: u64,
    keys_out: u64,
    vals_out: u64,
    counts: u64,
    n: i64,
    shift: i64,
    nblocks: i64,
}

/// `GridScanArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ScanArgs {
    data: u64,
    len: i64,
}

/// `GridRingArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RingArgs {
    keys: u64,
    z: u64,
    ring_start: u64,
    zmin: u64,
    zmax: u64,
    lo_env: u64,
    hi_env: u64,
    n: i64,
    nrings: i64,
}

/// `GridGeomArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct GeomArgs {
    lon: u64,
    lat: u64,
    order: u64,
    x: u64,
    y: u64,
    z: u64,
    n: i64,
}

/// `GridGatherArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct GatherArgs {
    order: u64,
    data: u64,
    weight: u64,
    wv: u64,
    w: u64,
    n: i64,
}

/// `GridScalarArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ScalarArgs {
    p: PlanArgs,
    k: KernelArgs,
    tlon: u64,
    tlat: u64,
    nt: i64,
    wv: u64,
    w: u64,
    out_u: u64,
    out_w: u64,
}

/// `GridSpectralArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SpectralArgs {
    p: PlanArgs,
    k: KernelArgs,
    tlon: u64,
    tlat: u64,
    nt: i64,
    order: u64,
    data: u64,
    wfull: u64,
    wsh: u64,
    stride: i64,
    c0: i64,
    cw: i64,
    out_u: u64,
    out_w: u64,
    wmap: u64,
    nan_flag: u64,
}

/// `GridFinishArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FinishArgs {
    su: u64,
    sw: u64,
    cube: u64,
    weights: u64,
    len: i64,
}

// SAFETY: plain-old-data structs of u64/i64/f64, laid out as the C structs (checked by
// tests/test_grid_cuda_host.py against the C side).
unsafe impl DeviceRepr for PlanArgs {}
unsafe impl DeviceRepr for KernelArgs {}
unsafe impl DeviceRepr for PrepArgs {}
unsafe impl DeviceRepr for RadixArgs {}
unsafe impl DeviceRepr for ScanArgs {}
unsafe impl DeviceRepr for RingArgs {}
unsafe impl DeviceRepr for GeomArgs {}
unsafe impl DeviceRepr for GatherArgs {}
unsafe impl DeviceRepr for ScalarArgs {}
unsafe impl DeviceRepr for SpectralArgs {}
unsafe impl DeviceRepr for FinishArgs {}

fn field_size<S, F>(_: fn(&S) -> &F) -> usize {
    size_of::<F>()
}

/// "Struct.field offset size" and "Struct size N" lines of every kernel argument struct, in
/// the format of `tests/cuda_host/grid_device_emu --layout`.
pub fn arg_layout() -> Vec<String> {
    let mut out = Vec::new();
    macro_rules! layout {
        ($c:literal, $s:ty, [$($f:ident),*]) => {{
            out.push(format!("{} size {}", $c, size_of::<$s>()));
            $(out.push(format!(
                "{}.{} {} {}",
                $c,
                stringify!($f),
                offset_of!($s, $f),
                field_size(|s: &$s| &s.$f)
            ));)*
        }};
    }
    layout!(
        "GridPlan",
        PlanArgs,
        [x, y, z, keys, n, ring_start, zmin, zmax, lo_env, hi_env, nrings]
    );
    layout!(
        "GridKernel",
        KernelArgs,
        [kind, c0, c1, c2, c3, radius, c2_cut]
    );
    layout!(
        "GridPrepArgs",
        PrepArgs,
        [lon, lat, vcheck, wcheck, keys, vals, hist, n, nside]
    );
    layout!(
        "GridRadixArgs",
        RadixArgs,
        [keys_in, vals_in, keys_out, vals_out, counts, n, shift, nblocks]
    );
    layout!("GridScanArgs", ScanArgs, [data, len]);
    layout!(
        "GridRingArgs",
        RingArgs,
        [keys, z, ring_start, zmin, zmax, lo_env, hi_env, n, nrings]
    );
    layout!("GridGeomArgs", GeomArgs, [lon, lat, order, x, y, z, n]);
    layout!(
        "GridGatherArgs",
        GatherArgs,
        [order, data, weight, wv, w, n]
    );
    layout!(
        "GridScalarArgs",
        ScalarArgs,
        [p, k, tlon, tlat, nt, wv, w, out_u, out_w]
    );
    layout!(
        "GridSpectralArgs",
        SpectralArgs,
        [
            p, k, tlon, tlat, nt, order, data, wfull, wsh, stride, c0, cw, out_u, out_w, wmap,
            nan_flag
        ]
    );
    layout!("GridFinishArgs", FinishArgs, [su, sw, cube, weights, len]);
    out
}

impl KernelArgs {
    fn new(setup: &Setup) -> Self {
        let c = 2.0 * (0.5 * setup.radius).min(std::f64::consts::FRAC_PI_2).sin();
        let k = &setup.kernel;
        KernelArgs {
            kind: k.kind as i64,
            c0: k.c[0],
            c1: k.c[1],
            c2: k.c[2],
            c3: k.c[3],
            radius: setup.radius,
            c2_cut: c * c * (1.0 + 1e-9),
        }
    }
}

/// Launch `grid.cu`'s kernel `name` with its one struct argument.
fn launch<A: DeviceRepr>(gpu: &Gpu, name: &str, cfg: LaunchConfig, args: &A) -> Result<()> {
    let func = gpu.function("grid", name)?;
    let mut b = gpu.stream.launch_builder(&func);
    b.arg(args);
    // SAFETY: every kernel of grid.cu takes exactly one struct argument, which `A` mirrors
    // (layouts checked by the test suite); the pointers in it are live device buffers of the
    // lengths documented beside the C struct, and `cfg` is the shape the kernel documents.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

fn one_block(threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn blocks_of(nblocks: usize, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (nblocks as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One warp per target, grid-stride over the rest.
fn gather_config(nt: usize) -> LaunchConfig {
    let warps_per_block = (GATHER_THREADS / 32) as usize;
    blocks_of(
        nt.div_ceil(warps_per_block).clamp(1, MAX_BLOCKS),
        GATHER_THREADS,
    )
}

/// A block per run of `SPEC_RUN` targets, grid-stride over the rest.
fn spectral_config(nt: usize) -> LaunchConfig {
    blocks_of(nt.div_ceil(SPEC_RUN).clamp(1, MAX_BLOCKS), SPEC_THREADS)
}

/// A device buffer that DMAs on the copy stream may use: dropping it first waits for that
/// stream, so an early return can never free memory a queued copy still touches.
struct Fenced<'g, T> {
    gpu: &'g Gpu,
    buf: CudaSlice<T>,
}

impl<'g, T: DeviceRepr> Fenced<'g, T> {
    /// `len` elements, uninitialised.
    ///
    /// # Safety
    /// Every element is written before it is read.
    unsafe fn alloc(gpu: &'g Gpu, len: usize) -> Result<Self> {
        Ok(Fenced {
            gpu,
            buf: unsafe { gpu.alloc::<T>(len)? },
        })
    }

    fn ptr(&self) -> u64 {
        self.gpu.dptr(&self.buf)
    }
}

impl<T> Drop for Fenced<'_, T> {
    fn drop(&mut self) {
        let _ = self.gpu.copy.synchronize();
    }
}

// ------------------------------------------------------------------ the device plan

/// The lookup on the device (see kernels/grid.cu). Only the first `kept` entries of `keys`
/// and `order` belong to kept samples.
struct DevicePlan {
    kept: usize,
    nrings: usize,
    keys: CudaSlice<u64>,
    order: CudaSlice<u32>,
    x: CudaSlice<f64>,
    y: CudaSlice<f64>,
    z: CudaSlice<f64>,
    ring_start: CudaSlice<i64>,
    zmin: CudaSlice<f64>,
    zmax: CudaSlice<f64>,
    lo_env: CudaSlice<f64>,
    hi_env: CudaSlice<f64>,
}

impl DevicePlan {
    /// Sort the `n` samples at `lon`, `lat` (device, degrees). `vcheck` / `wcheck`: device
    /// addresses of `T` arrays whose NaN entries drop a sample (0 for none). None when no sample
    /// is kept. Synchronises once (to read the digit histogram); everything else is queued.
    fn build<T: Real>(
        gpu: &Gpu,
        lon: &CudaSlice<f64>,
        lat: &CudaSlice<f64>,
        n: usize,
        vcheck: u64,
        wcheck: u64,
        nside: u64,
    ) -> Result<Option<DevicePlan>> {
        let nrings = 4 * nside as usize;
        // SAFETY: grid_prep writes all n keys and values.
        let keys = unsafe { gpu.alloc::<u64>(n)? };
        let vals = unsafe { gpu.alloc::<u32>(n)? };
        let hist = gpu.alloc_zeros::<u32>(8 * 256)?;
        let prep = PrepArgs {
            lon: gpu.dptr(lon),
            lat: gpu.dptr(lat),
            vcheck,
            wcheck,
            keys: gpu.dptr(&keys),
            vals: gpu.dptr(&vals),
            hist: gpu.dptr(&hist),
            n: n as i64,
            nside: nside as i64,
        };
        let prep_name = format!("grid_prep_{}", T::CUDA);
        launch(gpu, &prep_name, grid_stride(n, MAX_BLOCKS), &prep)?;
        let mut h = vec![0u32; 8 * 256];
        gpu.download(&hist, &mut h)?;
        // Digit 7 holds bit 63, set only for dropped samples.
        let kept: usize = h[7 * 256..7 * 256 + 128].iter().map(|&c| c as usize).sum();
        let passes: Vec<usize> = (0..8)
            .filter(|&p| h[p * 256..(p + 1) * 256].iter().all(|&c| (c as usize) < n))
            .collect();
        if kept == 0 {
            return Ok(None);
        }
        let nblocks = n.div_ceil(TILE);
        // SAFETY: each pass's count kernel writes all 256·nblocks counts before they are read,
        // and each scatter writes all n keys and values of its output.
        let counts = unsafe { gpu.alloc::<u32>(256 * nblocks)? };
        let mut cur = (keys, vals);
        let mut other = unsafe { (gpu.alloc::<u64>(n)?, gpu.alloc::<u32>(n)?) };
        for &p in &passes {
            let ra = RadixArgs {
                keys_in: gpu.dptr(&cur.0),
                vals_in: gpu.dptr(&cur.1),
                keys_out: gpu.dptr(&other.0),
                vals_out: gpu.dptr(&other.1),
                counts: gpu.dptr(&counts),
                n: n as i64,
                shift: 8 * p as i64,
                nblocks: nblocks as i64,
            };
            launch(
                gpu,
                "grid_radix_count",
                blocks_of(nblocks, RADIX_THREADS),
                &ra,
            )?;
            let scan = ScanArgs {
                data: gpu.dptr(&counts),
                len: (256 * nblocks) as i64,
            };
            launch(gpu, "grid_scan", one_block(ONE_BLOCK_THREADS), &scan)?;
            launch(
                gpu,
                "grid_radix_scatter",
                blocks_of(nblocks, RADIX_THREADS),
                &ra,
            )?;
            std::mem::swap(&mut cur, &mut other);
        }
        drop((other, counts, hist));
        let (keys, order) = cur;
        // SAFETY: grid_ring_starts writes all nrings + 1 starts, grid_plan_geom all kept unit
        // vectors, grid_ring_zspan all nrings spans and grid_envelopes all nrings envelopes.
        let (ring_start, x, y, z, zmin, zmax, lo_env, hi_env) = unsafe {
            (
                gpu.alloc::<i64>(nrings + 1)?,
                gpu.alloc::<f64>(kept)?,
                gpu.alloc::<f64>(kept)?,
                gpu.alloc::<f64>(kept)?,
                gpu.alloc::<f64>(nrings)?,
                gpu.alloc::<f64>(nrings)?,
                gpu.alloc::<f64>(nrings)?,
                gpu.alloc::<f64>(nrings)?,
            )
        };
        let rings = RingArgs {
            keys: gpu.dptr(&keys),
            z: gpu.dptr(&z),
            ring_start: gpu.dptr(&ring_start),
            zmin: gpu.dptr(&zmin),
            zmax: gpu.dptr(&zmax),
            lo_env: gpu.dptr(&lo_env),
            hi_env: gpu.dptr(&hi_env),
            n: kept as i64,
            nrings: nrings as i64,
        };
        launch(
            gpu,
            "grid_ring_starts",
            grid_stride(nrings + 1, MAX_BLOCKS),
            &rings,
        )?;
        let geom = GeomArgs {
            lon: gpu.dptr(lon),
            lat: gpu.dptr(lat),
            order: gpu.dptr(&order),
            x: gpu.dptr(&x),
            y: gpu.dptr(&y),
            z: gpu.dptr(&z),
            n: kept as i64,
        };
        launch(gpu, "grid_plan_geom", grid_stride(kept, MAX_BLOCKS), &geom)?;
        // One warp per ring.
        launch(
            gpu,
            "grid_ring_zspan",
            grid_stride(32 * nrings, MAX_BLOCKS),
            &rings,
        )?;
        launch(gpu, "grid_envelopes", one_block(ONE_BLOCK_THREADS), &rings)?;
        Ok(Some(DevicePlan {
            kept,
            nrings,
            keys,
            order,
            x,
            y,
            z,
            ring_start,
            zmin,
            zmax,
            lo_env,
            hi_env,
        }))
    }

    fn args(&self, gpu: &Gpu) -> PlanArgs {
        PlanArgs {
            x: gpu.dptr(&self.x),
            y: gpu.dptr(&self.y),
            z: gpu.dptr(&self.z),
            keys: gpu.dptr(&self.keys),
            n: self.kept as i64,
            ring_start: gpu.dptr(&self.ring_start),
            zmin: gpu.dptr(&self.zmin),
            zmax: gpu.dptr(&self.zmax),
            lo_env: gpu.dptr(&self.lo_env),
            hi_env: gpu.dptr(&self.hi_env),
            nrings: self.nrings as i64,
        }
    }
}

// ------------------------------------------------------------------ sinks and memory

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

/// Where the spectral rows live on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// All `n × nchan` rows (and per-channel weights) uploaded once; blocks of `MAX_CW`.
    Resident,
    /// Blocks of `cb` channels packed on the way up, two on the device at a time.
    Packed { cb: usize },
}

/// Sizes that decide the device memory a call needs.
struct Need {
    nt: usize,
    nchan: usize,
    sz_t: usize,
    sz_o: usize,
    /// Per-channel weights (a second array of rows).
    full: bool,
    /// One-value-per-sample arrays uploaded besides the coordinates (scalar data, shared w).
    per_sample_t: usize,
    finish: bool,
    nrings: usize,
}

impl Need {
    /// Block width (channels per gather launch).
    fn block(&self, layout: Layout) -> usize {
        match layout {
            Layout::Resident => self.nchan.min(MAX_CW),
            Layout::Packed { cb } => cb,
        }
    }

    /// Device bytes to grid `m` samples with `layout`.
    fn bytes(&self, m: usize, layout: Layout) -> usize {
        let rows = 1 + usize::from(self.full);
        // lon, lat, keys and values (twice for the sort), unit vectors, per-sample values.
        let plan = m * (16 + 16 + 8 + 24 + 16 + self.per_sample_t * self.sz_t)
            + 4 * 256 * m.div_ceil(TILE)
            + 40 * (self.nrings + 1)
            + 8 * 256 * 4;
        let cb = self.block(layout);
        let data = if self.nchan == 1 {
            0
        } else {
            match layout {
                Layout::Resident => m * self.nchan * self.sz_t * rows,
                Layout::Packed { cb } => 2 * m * cb * self.sz_t * rows,
            }
        };
        // Two slots of f64 sums and (Finish) of the two outputs.
        let slots = 2 * cb * self.nt * (16 + if self.finish { 2 * self.sz_o } else { 0 });
        // Coordinates and the weight map.
        let targets = 24 * self.nt;
        let total = plan + data + slots + targets;
        total + total / 64 + (8 << 20)
    }
}

/// How to split a call to fit the budget: a layout for whole calls, or sample chunks.
fn choose(need: &Need, n: usize, budget: usize) -> Result<(usize, Layout)> {
    let mut layouts = vec![Layout::Resident];
    if need.nchan > 1 {
        let mut cb = need.nchan.min(MAX_CW);
        loop {
            layouts.push(Layout::Packed { cb });
            if cb == 1 {
                break;
            }
            cb = cb.div_ceil(2);
        }
    }
    for &l in &layouts {
        if need.bytes(n, l) <= budget {
            return Ok((n, l));
        }
    }
    // Chunks of samples (the bytes are affine in m), with narrower channel blocks if the
    // per-block outputs leave too little room.
    let mut cb = need.nchan.min(32);
    loop {
        let layout = if need.nchan > 1 {
            Layout::Packed { cb }
        } else {
            Layout::Resident
        };
        let fixed = need.bytes(0, layout);
        let per = need.bytes(1 << 20, layout).saturating_sub(fixed) / (1 << 20) + 1;
        let m = budget.saturating_sub(fixed) / per;
        if m >= MIN_CHUNK {
            return Ok((m.min(n), layout));
        }
        if cb == 1 {
            return Err(Error::GpuMemory(format!(
                "gridding needs at least {:.2} GiB of GPU memory ({} target pixels), the budget \
                 is {:.2} GiB: use fewer target pixels per call, or device='cpu'",
                need.bytes(MIN_CHUNK, layout) as f64 / (1u64 << 30) as f64,
                need.nt,
                budget as f64 / (1u64 << 30) as f64
            )));
        }
        cb = cb.div_ceil(2);
    }
}

/// Pageable rows of at least this many bytes go up in packed blocks even when they would fit
/// resident (`prefer_overlap`).
const OVERLAP_BYTES: usize = 32 << 20;

/// The layout for a call whose samples all fit at once. Resident rows wait for the whole
/// upload before the first gather; when they are pageable (so the host copies them through the
/// staging buffers anyway), large, and span several gathers, packed blocks of `MAX_CW` channels
/// go faster: block k + 1 is repacked and uploaded while block k is gathered. Page-locked rows
/// stay resident (their blocks' 2-D DMAs overlap the gathers too, with no host copy at all).
fn prefer_overlap<T>(
    need: &Need,
    n: usize,
    layout: Layout,
    data: &[T],
    page_locked: bool,
    budget: usize,
) -> Layout {
    let packed = Layout::Packed { cb: MAX_CW };
    // SKYCONV_GRID_OVERLAP=0 keeps such rows resident (to compare the two on a machine).
    let off = std::env::var("SKYCONV_GRID_OVERLAP").is_ok_and(|v| v.trim() == "0");
    let wanted = !off
        && layout == Layout::Resident
        && need.nchan > MAX_CW
        && std::mem::size_of_val(data) >= OVERLAP_BYTES
        && need.bytes(n, packed) <= budget
        && !page_locked;
    if wanted {
        packed
    } else {
        layout
    }
}

/// What `grid` would do for a call of this size within `budget` bytes: (samples per chunk,
/// "resident" or "packed", channels per block, device bytes needed). `weights` is "none",
/// "shared" or "full". Lets the tests force each path with `SKYCONV_GPU_MEMORY_LIMIT`.
#[allow(clippy::too_many_arguments)]
pub fn memory_plan(
    n: usize,
    nt: usize,
    nchan: usize,
    sz_t: usize,
    sz_o: usize,
    weights: &str,
    finish: bool,
    radius: f64,
    budget: usize,
) -> Result<(usize, &'static str, usize, usize)> {
    let need = Need {
        nt,
        nchan,
        sz_t,
        sz_o,
        full: nchan > 1 && weights == "full",
        per_sample_t: usize::from(nchan == 1)
            + usize::from(weights == "shared" || (weights == "full" && nchan == 1)),
        finish,
        nrings: 4 * nside_for(radius) as usize,
    };
    let (m, layout) = choose(&need, n, budget)?;
    let name = match layout {
        Layout::Resident => "resident",
        Layout::Packed { .. } => "packed",
    };
    let cb = if nchan == 1 { 1 } else { need.block(layout) };
    Ok((m, name, cb, need.bytes(m, layout)))
}

// ------------------------------------------------------------------ entry

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
    let _only = gpu.exclusive();
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
            host_finish(&au, &aw, cube, weights);
            Ok(())
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
fn shared_weights<'a, T>(s: &Samples<'a, T>) -> Option<&'a [T]> {
    match s.weights {
        Weights::PerSample(w) => Some(w),
        Weights::Full(w) if s.nchan == 1 => Some(w),
        _ => None,
    }
}

/// The Finish outputs (cube, weights) from f64 sums, as grid_finish computes them.
fn host_finish<O: Real>(su: &[f64], sw: &[f64], cube: &mut [O], weights: &mut [O]) {
    cube.par_iter_mut()
        .zip(weights.par_iter_mut())
        .zip(su.par_iter().zip(sw.par_iter()))
        .with_min_len(1 << 14)
        .for_each(|((c, w), (&a, &b))| {
            let u = O::from_f64(a);
            *w = O::from_f64(b);
            let wd = w.to_f64();
            *c = O::from_f64(if wd == 0.0 { f64::NAN } else { u.to_f64() / wd });
        });
}

/// acc[i] += add[i], in parallel.
fn add_into<O: Real>(acc: &mut [O], add: &[f64]) {
    acc.par_iter_mut()
        .zip(add.par_iter())
        .with_min_len(1 << 14)
        .for_each(|(a, &v)| *a = O::from_f64(a.to_f64() + v));
}

/// Copy packed elements `e0 .. e0 + dst.len()` of the `n × cw` block of channels
/// `c0 .. c0 + cw` of `src` (rows of `nchan`) into `dst`.
fn pack_block<T: Copy + Send + Sync>(
    src: &[T],
    nchan: usize,
    c0: usize,
    cw: usize,
    e0: usize,
    dst: &mut [T],
) {
    // A partial first row, then whole rows (the last one maybe partial).
    let head = ((cw - e0 % cw) % cw).min(dst.len());
    let (first, rest) = dst.split_at_mut(head);
    if head > 0 {
        let (r, c) = (e0 / cw, e0 % cw);
        let s = r * nchan + c0 + c;
        first.copy_from_slice(&src[s..s + head]);
    }
    let r0 = (e0 + head) / cw;
    // Tasks of about 256 KiB: row pieces are short (cw values), so finer tasks cost more in
    // scheduling than they gain in balance.
    let rows_per_task = ((256 << 10) / (cw * size_of::<T>()).max(1)).max(1);
    rest.par_chunks_mut(cw)
        .enumerate()
        .with_min_len(rows_per_task)
        .for_each(|(j, row)| {
            let s = (r0 + j) * nchan + c0;
            row.copy_from_slice(&src[s..s + row.len()]);
        });
}

/// One slot of per-block results: f64 sums and (Finish) the two outputs, with the event
/// that marks them complete.
struct Slot<'g, O> {
    su: Fenced<'g, f64>,
    sw: Fenced<'g, f64>,
    /// cube, weights.
    out: Option<[Fenced<'g, O>; 2]>,
    ready: CudaEvent,
}

/// Grid all of `s` in one go (the plan and a layout that fit the budget).
fn run<T: Real, O: Real>(
    gpu: &Gpu,
    s: &Samples<'_, T>,
    target_lon: &[f64],
    target_lat: &[f64],
    setup: &Setup,
    mut sink: Sink<'_, O>,
    layout: Layout,
) -> Result<()> {
    let (n, nt, nchan) = (s.len(), target_lon.len(), s.nchan);
    if n == 0 || nt == 0 {
        finish_empty(sink, nt);
        return Ok(());
    }
    let mut tl = Timeline::start(gpu)?;
    let lon = gpu.upload(s.lon)?;
    let lat = gpu.upload(s.lat)?;
    let tlon = gpu.upload(target_lon)?;
    let tlat = gpu.upload(target_lat)?;
    let shared = shared_weights(s).map(|w| gpu.upload(w)).transpose()?;
    let scalar = if nchan == 1 {
        Some(gpu.upload(s.data)?)
    } else {
        None
    };
    tl.mark(gpu, "h2d")?;
    // Buffers that DMAs on the copy stream use, allocated before any kernel is queued: the
    // allocations are ordered on the compute stream, so the copy stream waits for them (and for
    // nothing else yet) before it may touch them.
    let full = match s.weights {
        Weights::Full(w) if nchan > 1 => Some(w),
        _ => None,
    };
    let cb = if nchan == 1 {
        1
    } else {
        match layout {
            Layout::Resident => nchan.min(MAX_CW),
            Layout::Packed { cb } => cb.clamp(1, MAX_CW),
        }
    };
    // SAFETY (allocations below): the resident rows are fully written by their uploads; each
    // packed block's upload writes the n·cw elements its gather reads; the gather writes all
    // cw·nt sums of a block and the finish kernel all its outputs before they are downloaded,
    // and only those cw·nt elements are downloaded.
    let resident_rows = nchan > 1 && layout == Layout::Resident;
    let rows_len = if resident_rows { n * nchan } else { n * cb };
    let mut rows: Vec<(Fenced<'_, T>, Option<Fenced<'_, T>>)> = Vec::new();
    if nchan > 1 {
        for _ in 0..if resident_rows { 1 } else { 2 } {
            let d = unsafe { Fenced::<T>::alloc(gpu, rows_len)? };
            let w = match full {
                Some(_) => Some(unsafe { Fenced::<T>::alloc(gpu, rows_len)? }),
                None => None,
            };
            rows.push((d, w));
        }
    }
    let finish = matches!(sink, Sink::Finish { .. });
    let mut slots: Vec<Slot<'_, O>> = Vec::new();
    for _ in 0..2 {
        let slot = unsafe {
            Slot {
                su: Fenced::alloc(gpu, cb * nt)?,
                sw: Fenced::alloc(gpu, cb * nt)?,
                out: if finish {
                    Some([Fenced::alloc(gpu, cb * nt)?, Fenced::alloc(gpu, cb * nt)?])
                } else {
                    None
                },
                ready: gpu.event()?,
            }
        };
        slots.push(slot);
    }
    // Per block: how many threads saw a NaN value or weight (then its weight sums differ
    // between channels). The map of weight sums shared by all channels, written by block 0.
    let nblocks = nchan.div_ceil(cb);
    let flags = gpu.alloc_zeros::<u32>(nblocks)?;
    let want_map = finish && nchan > 1 && full.is_none();
    // SAFETY: block 0's gather writes all nt entries before they are downloaded.
    let wmap = unsafe { Fenced::<f64>::alloc(gpu, if want_map { nt } else { 1 })? };
    let allocated = gpu.event()?;
    allocated.record(&gpu.stream)?;
    gpu.copy.wait(&allocated)?;
    let wcheck = shared.as_ref().map_or(0, |w| gpu.dptr(w));
    let vcheck = scalar.as_ref().map_or(0, |v| gpu.dptr(v));
    let plan = DevicePlan::build::<T>(gpu, &lon, &lat, n, vcheck, wcheck, nside_for(setup.radius))?;
    let Some(plan) = plan else {
        // No sample is kept: zero sums.
        finish_empty(sink, nt);
        tl.finish()?;
        return gpu.sync();
    };
    drop((lon, lat));
    let kept = plan.kept;
    // Per-sample values in sorted order: (w·v, w) with one channel, else the shared weight.
    // SAFETY: grid_gather writes all `kept` entries.
    let wv = if nchan == 1 {
        Some(unsafe { gpu.alloc::<f64>(kept)? })
    } else {
        None
    };
    let w_sorted = unsafe { gpu.alloc::<f64>(kept)? };
    let gather = GatherArgs {
        order: gpu.dptr(&plan.order),
        data: vcheck,
        weight: wcheck,
        wv: wv.as_ref().map_or(0, |b| gpu.dptr(b)),
        w: gpu.dptr(&w_sorted),
        n: kept as i64,
    };
    let gather_name = format!("grid_gather_{}", T::CUDA);
    launch(gpu, &gather_name, grid_stride(kept, MAX_BLOCKS), &gather)?;
    drop((shared, scalar));
    tl.mark(gpu, "plan")?;

    // All spectral rows go up now, on the copy stream, while the plan kernels run. Page-locked
    // rows go up by 2-D DMAs a block of channels at a time, each marked by an event, so that
    // the gather of block k waits for its own columns only; other rows in one upload.
    let mut ready: Vec<CudaEvent> = Vec::new();
    if resident_rows {
        let (d, w) = &mut rows[0];
        let locked = gpu.dma_direct(bytes_of(s.data))?
            && match full {
                Some(wsrc) => gpu.dma_direct(bytes_of(wsrc))?,
                None => true,
            };
        if locked && nchan > cb {
            let sz_t = size_of::<T>();
            for c0 in (0..nchan).step_by(cb) {
                let cw = cb.min(nchan - c0);
                // SAFETY: the rows are page-locked (checked), belong to the caller for the
                // whole call, and the copy stream is synchronised before `run` returns (also
                // on errors: `Fenced` buffers synchronise it when dropped); the device rows hold
                // n·nchan elements.
                unsafe {
                    gpu.upload_columns_async(
                        &gpu.copy,
                        bytes_of(s.data),
                        d.ptr(),
                        nchan,
                        sz_t,
                        c0,
                        cw,
                    )?;
                    if let (Some(wb), Some(wsrc)) = (w.as_ref(), full) {
                        gpu.upload_columns_async(
                            &gpu.copy,
                            bytes_of(wsrc),
                            wb.ptr(),
                            nchan,
                            sz_t,
                            c0,
                            cw,
                        )?;
                    }
                }
                let ev = gpu.event()?;
                ev.record(&gpu.copy)?;
                ready.push(ev);
            }
        } else {
            gpu.upload_into_on(&gpu.copy, s.data, &mut d.buf)?;
            if let (Some(wb), Some(wsrc)) = (w.as_mut(), full) {
                gpu.upload_into_on(&gpu.copy, wsrc, &mut wb.buf)?;
            }
            let ev = gpu.event()?;
            ev.record(&gpu.copy)?;
            gpu.stream.wait(&ev)?;
            tl.mark(gpu, "h2d")?;
        }
    }
    let packed: Vec<(u64, u64)> = if resident_rows {
        Vec::new()
    } else {
        rows.iter()
            .map(|(d, w)| (d.ptr(), w.as_ref().map_or(0, |b| b.ptr())))
            .collect()
    };
    // The blocks come down on a stream of their own, so that they do not queue behind the
    // packed uploads on the copy stream (the two directions use separate copy engines).
    let down = gpu.ctx.new_stream()?;
    let blocks = Blocks {
        gpu,
        plan: &plan,
        setup,
        tlon: &tlon,
        tlat: &tlat,
        w_sorted: &w_sorted,
        wv: wv.as_ref(),
        resident: rows
            .first()
            .filter(|_| resident_rows)
            .map(|(d, w)| (d.ptr(), w.as_ref().map_or(0, |b| b.ptr()))),
        ready: &ready,
        slots: &slots,
        flags: &flags,
        wmap: &wmap,
        want_map,
        full: full.is_some(),
        down: &down,
        nt,
        nchan,
        cb,
    };
    let done = if packed.is_empty() {
        blocks.gather_all::<T>(&mut sink, &mut tl, None)
    } else {
        // Packed: this thread packs and uploads the blocks while a second one queues the
        // gathers and brings the results down, so the host repacks block k + 1 whatever the
        // gather of block k waits for. The packing stays here, on skyconv's pool: a pool
        // worker runs its own parallel loops, so it cannot wait on workers that are busy
        // elsewhere. The second thread's few parallel loops (copies of the map, a staged
        // download) run on rayon's global pool.
        std::thread::scope(|sc| {
            let (up_tx, up_rx) = mpsc::channel();
            let (free_tx, free_rx) = mpsc::channel();
            let (blocks, sink, tl) = (&blocks, &mut sink, &mut tl);
            let consumer = sc.spawn(move || {
                gpu.ctx.bind_to_thread()?;
                blocks.gather_all::<T>(sink, tl, Some((&up_rx, free_tx)))
            });
            // On an error here `up_tx` is dropped, which stops the gathers.
            let produced = upload_blocks(gpu, s.data, full, nchan, cb, &packed, up_tx, free_rx);
            let gathered = consumer.join().unwrap_or_else(|_| {
                Err(Error::Internal(
                    "the gathers of packed channel blocks panicked".into(),
                ))
            });
            // A failed upload is the cause of a failed gather, so its error comes first.
            produced.and(gathered)
        })
    };
    let _ = down.synchronize();
    done?;
    tl.finish()?;
    gpu.copy.synchronize()?;
    gpu.sync()
}

/// Pack and upload the channel blocks of `data` (and of the per-channel weights `full`) on the
/// copy stream, block k into the device rows `bufs[k % 2]` (data, weights) once the gather of
/// block k - 2 is done with them (its event comes through `freed`); after each block, send an
/// event that marks it uploaded. Stops quietly when the gathers stop listening.
#[allow(clippy::too_many_arguments)]
fn upload_blocks<T: Real>(
    gpu: &Gpu,
    data: &[T],
    full: Option<&[T]>,
    nchan: usize,
    cb: usize,
    bufs: &[(u64, u64)],
    uploaded: mpsc::Sender<(u64, u64, CudaEvent)>,
    freed: mpsc::Receiver<CudaEvent>,
) -> Result<()> {
    gpu.ctx.bind_to_thread()?;
    let n = data.len() / nchan;
    let sz_t = size_of::<T>();
    for (k, c0) in (0..nchan).step_by(cb).enumerate() {
        let cw = cb.min(nchan - c0);
        if k >= 2 {
            let Ok(ev) = freed.recv() else {
                return Ok(());
            };
            // Only the DMAs wait for the gather: the host packs meanwhile.
            gpu.copy.wait(&ev)?;
        }
        let (d, w) = bufs[k % 2];
        let up = |dst: u64, src: &[T]| -> Result<()> {
            // SAFETY: dst holds n·cb >= n·cw elements of T, in a Fenced buffer of the caller
            // that outlives this thread and synchronises the copy stream before it is freed.
            unsafe {
                gpu.upload_with(&gpu.copy, dst, n * cw * sz_t, |off, stage| {
                    // SAFETY: staging buffers are page-aligned and chunk offsets are multiples
                    // of 32 MiB, so `stage` holds whole T values.
                    let typed = std::slice::from_raw_parts_mut(
                        stage.as_mut_ptr() as *mut T,
                        stage.len() / sz_t,
                    );
                    pack_block(src, nchan, c0, cw, off / sz_t, typed);
                })
            }
        };
        up(d, data)?;
        if let Some(wsrc) = full {
            up(w, wsrc)?;
        }
        let ev = gpu.event()?;
        ev.record(&gpu.copy)?;
        if uploaded.send((d, w, ev)).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// The gathers' ends of the packed uploads' channels: (device rows, uploaded) per block in,
/// the gather of each block queued, out.
type Packed<'r> = (
    &'r mpsc::Receiver<(u64, u64, CudaEvent)>,
    mpsc::Sender<CudaEvent>,
);

/// What the gathers of one call use: the plan, the targets, the rows (resident) and the slots.
struct Blocks<'a, 'g, O> {
    gpu: &'g Gpu,
    plan: &'a DevicePlan,
    setup: &'a Setup,
    tlon: &'a CudaSlice<f64>,
    tlat: &'a CudaSlice<f64>,
    w_sorted: &'a CudaSlice<f64>,
    wv: Option<&'a CudaSlice<f64>>,
    /// Device addresses of the resident rows (data, per-channel weights or 0).
    resident: Option<(u64, u64)>,
    /// Resident rows uploaded a block at a time: the event that marks block k's columns up.
    ready: &'a [CudaEvent],
    slots: &'a [Slot<'g, O>],
    flags: &'a CudaSlice<u32>,
    wmap: &'a Fenced<'g, f64>,
    want_map: bool,
    full: bool,
    down: &'a Arc<CudaStream>,
    nt: usize,
    nchan: usize,
    cb: usize,
}

impl<O: Real> Blocks<'_, '_, O> {
    /// Gather every block of channels and bring each down while the next one computes. Packed
    /// rows: block k's device rows (data, weights) and the event that marks them uploaded come
    /// through the receiver, and the sender gets an event once its gather is queued.
    fn gather_all<T: Real>(
        &self,
        sink: &mut Sink<'_, O>,
        tl: &mut Timeline,
        packed: Option<Packed<'_>>,
    ) -> Result<()> {
        let gpu = self.gpu;
        let (nt, nchan, cb) = (self.nt, self.nchan, self.cb);
        let pa = self.plan.args(gpu);
        let ka = KernelArgs::new(self.setup);
        let spectral_name = format!("grid_spectral_{}", T::CUDA);
        let finish_name = format!("grid_finish_{}", O::CUDA);
        let mut pending: Option<Block> = None;
        let mut fetched = Fetched {
            map: Vec::new(),
            per_channel: self.full && nchan > 1,
        };
        for (k, c0) in (0..nchan).step_by(cb).enumerate() {
            let cw = cb.min(nchan - c0);
            let slot = &self.slots[k % 2];
            if nchan == 1 {
                let sa = ScalarArgs {
                    p: pa,
                    k: ka,
                    tlon: gpu.dptr(self.tlon),
                    tlat: gpu.dptr(self.tlat),
                    nt: nt as i64,
                    wv: self.wv.map_or(0, |b| gpu.dptr(b)),
                    w: gpu.dptr(self.w_sorted),
                    out_u: slot.su.ptr(),
                    out_w: slot.sw.ptr(),
                };
                launch(gpu, "grid_scalar", gather_config(nt), &sa)?;
            } else {
                let (data, wfull, stride, coff) = match (&packed, self.resident) {
                    (_, Some((d, w))) => {
                        if let Some(ev) = self.ready.get(k) {
                            gpu.stream.wait(ev)?;
                            tl.mark(gpu, "h2d")?;
                        }
                        (d, w, nchan, c0)
                    }
                    (None, None) => return Err(Error::Internal("no rows to gather".into())),
                    (Some((uploaded, _)), None) => {
                        let (d, w, ev) = uploaded.recv().map_err(|_| {
                            Error::Internal("the upload of channel blocks stopped".into())
                        })?;
                        gpu.stream.wait(&ev)?;
                        tl.mark(gpu, "h2d")?;
                        (d, w, cw, 0)
                    }
                };
                let sa = SpectralArgs {
                    p: pa,
                    k: ka,
                    tlon: gpu.dptr(self.tlon),
                    tlat: gpu.dptr(self.tlat),
                    nt: nt as i64,
                    order: gpu.dptr(&self.plan.order),
                    data,
                    wfull,
                    wsh: gpu.dptr(self.w_sorted),
                    stride: stride as i64,
                    c0: coff as i64,
                    cw: cw as i64,
                    out_u: slot.su.ptr(),
                    out_w: slot.sw.ptr(),
                    wmap: if self.want_map && k == 0 {
                        self.wmap.ptr()
                    } else {
                        0
                    },
                    nan_flag: gpu.dptr(self.flags) + (4 * k) as u64,
                };
                launch(gpu, &spectral_name, spectral_config(nt), &sa)?;
                if let Some((_, freed)) = &packed {
                    let ev = gpu.event()?;
                    ev.record(&gpu.stream)?;
                    // The uploads may have stopped (their error is reported by the caller).
                    let _ = freed.send(ev);
                }
            }
            tl.mark(gpu, "kernel")?;
            if let Some([c, w]) = &slot.out {
                let fa = FinishArgs {
                    su: slot.su.ptr(),
                    sw: slot.sw.ptr(),
                    cube: c.ptr(),
                    weights: w.ptr(),
                    len: (cw * nt) as i64,
                };
                launch(gpu, &finish_name, grid_stride(cw * nt, MAX_BLOCKS), &fa)?;
                tl.mark(gpu, "finish")?;
            }
            slot.ready.record(&gpu.stream)?;
            if k == 0 {
                if let Sink::Finish { cube, .. } = sink {
                    // The first gather is queued: map the cube's pages meanwhile (a fresh NumPy
                    // array would fault them in during the downloads, at half the copy rate).
                    prefault(cube);
                }
            }
            // Bring the previous block down while this one computes.
            if let Some(b) = pending.take() {
                self.fetch(sink, &b, &mut fetched)?;
            }
            pending = Some(Block {
                k,
                c0,
                cw,
                nt,
                nchan,
            });
        }
        if let Some(b) = pending {
            self.fetch(sink, &b, &mut fetched)?;
        }
        if let Sink::Finish { weights, .. } = sink {
            if weights.len() < nchan * nt {
                // No channel's weight sums differ: the map is the answer.
                weights.clear();
                weights.extend_from_slice(if nchan > 1 { &fetched.map } else { &[] });
            }
        }
        let ev = gpu.event()?;
        ev.record(self.down)?;
        gpu.stream.wait(&ev)?;
        tl.mark(gpu, "d2h")
    }
}

/// Which block of channels a fetch brings down.
struct Block {
    k: usize,
    c0: usize,
    cw: usize,
    nt: usize,
    nchan: usize,
}

/// What earlier fetches of a Finish call learnt: the map of weight sums shared by all channels
/// (from block 0) and whether some channel's weight sums differ from it.
struct Fetched<O> {
    map: Vec<O>,
    per_channel: bool,
}

/// Finish outputs of a call in which no sample reaches any target: NaN cube, a zero map.
fn finish_empty<O: Real>(sink: Sink<'_, O>, nt: usize) {
    if let Sink::Finish { cube, weights } = sink {
        weights.clear();
        weights.resize(nt, O::from_f64(0.0));
        let nan = O::from_f64(f64::NAN);
        cube.par_iter_mut().for_each(|c| *c = nan);
    }
}

impl<O: Real> Blocks<'_, '_, O> {
    /// Download block `b` from its slot on the download stream, after the compute stream has
    /// finished it, into the sink. Returns when the data are on the host. Finish: the cube always; the weight
    /// sums of the block only once some block's differ between channels (full weights, or a NaN
    /// that reaches a target), else the map from block 0 stands for them.
    fn fetch(&self, sink: &mut Sink<'_, O>, b: &Block, fetched: &mut Fetched<O>) -> Result<()> {
        let (gpu, down) = (self.gpu, self.down);
        let slot = &self.slots[b.k % 2];
        down.wait(&slot.ready)?;
        let nt = b.nt;
        let rows = b.c0 * nt..(b.c0 + b.cw) * nt;
        match sink {
            Sink::Finish { cube, weights } => {
                let [c, w] = slot.out.as_ref().expect("Finish slots hold outputs");
                gpu.download_on(down, &c.buf, &mut cube[rows.clone()])?;
                if b.nchan == 1 {
                    weights.resize(nt, O::from_f64(0.0));
                    return gpu.download_on(down, &w.buf, &mut weights[..]);
                }
                let mut flag = [0u32];
                gpu.download_at_on(down, self.flags, b.k, &mut flag)?;
                if b.k == 0 && !fetched.per_channel {
                    let mut m = vec![0.0f64; nt];
                    gpu.download_on(down, &self.wmap.buf, &mut m)?;
                    fetched.map = m.into_par_iter().map(O::from_f64).collect();
                }
                if flag[0] != 0 && !fetched.per_channel {
                    // The first block whose weight sums differ between channels: the earlier
                    // channels' sums are the map.
                    fetched.per_channel = true;
                    weights.resize(b.nchan * nt, O::from_f64(0.0));
                    let map = &fetched.map;
                    weights[..b.c0 * nt]
                        .par_chunks_mut(nt)
                        .for_each(|row| row.copy_from_slice(map));
                }
                if fetched.per_channel {
                    if weights.len() < b.nchan * nt {
                        weights.resize(b.nchan * nt, O::from_f64(0.0));
                    }
                    if flag[0] != 0 || fetched.map.is_empty() {
                        gpu.download_on(down, &w.buf, &mut weights[rows])?;
                    } else {
                        let map = &fetched.map;
                        weights[rows]
                            .par_chunks_mut(nt)
                            .for_each(|row| row.copy_from_slice(map));
                    }
                }
            }
            Sink::Add {
                unweighted,
                weights,
            } => {
                let mut tmp = vec![0.0f64; b.cw * nt];
                gpu.download_on(down, &slot.su.buf, &mut tmp)?;
                add_into(&mut unweighted[rows.clone()], &tmp);
                gpu.download_on(down, &slot.sw.buf, &mut tmp)?;
                add_into(&mut weights[rows], &tmp);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_block_matches_a_plain_repack() {
        let (n, nchan) = (37, 11);
        let src: Vec<u32> = (0..(n * nchan) as u32).collect();
        for (c0, cw) in [(0, 11), (0, 4), (3, 5), (10, 1), (8, 3)] {
            let want: Vec<u32> = (0..n)
                .flat_map(|r| (0..cw).map(move |c| (r * nchan + c0 + c) as u32))
                .collect();
            // Every split of the packed array into two pieces, as the staging chunks do.
            for cut in [0, 1, cw - 1, cw, 5 * cw + 2, n * cw] {
                let cut = cut.min(n * cw);
                let mut got = vec![u32::MAX; n * cw];
                let (a, b) = got.split_at_mut(cut);
                pack_block(&src, nchan, c0, cw, 0, a);
                pack_block(&src, nchan, c0, cw, cut, b);
                assert_eq!(got, want, "c0={c0} cw={cw} cut={cut}");
            }
        }
    }

    #[test]
    fn choose_fits_the_budget() {
        let need = Need {
            nt: 90_000,
            nchan: 1024,
            sz_t: 4,
            sz_o: 4,
            full: false,
            per_sample_t: 0,
            finish: true,
            nrings: 8192,
        };
        let n = 200_000;
        let (m, l) = choose(&need, n, 64 << 30).unwrap();
        assert_eq!((m, l), (n, Layout::Resident));
        let (m, l) = choose(&need, n, 600 << 20).unwrap();
        assert_eq!(m, n);
        assert!(matches!(l, Layout::Packed { .. }), "{l:?}");
        assert!(need.bytes(m, l) <= 600 << 20);
        let (m, l) = choose(&need, 20_000_000, 600 << 20).unwrap();
        assert!(m < 20_000_000 && need.bytes(m, l) <= 600 << 20, "{m} {l:?}");
        assert!(choose(&need, n, 1 << 20).is_err());
        let scalar = Need {
            nchan: 1,
            per_sample_t: 1,
            ..need
        };
        let (m, l) = choose(&scalar, 10_000_000, 300 << 20).unwrap();
        assert!(m < 10_000_000 && scalar.bytes(m, l) <= 300 << 20, "{m}");
    }
}
