//! The kernels' side of `kernels/grid.cu`: its launch geometry (the constants its macros
//! mirror), one `#[repr(C)]` struct per kernel argument (all fields 8 bytes: device pointers,
//! i64, f64), `arg_layout` for the layout test, and `launch` with the launch shapes.

use std::mem::{offset_of, size_of};

use crate::backend::cuda::{DeviceRepr, Gpu, LaunchConfig, PushKernelArg};
use crate::error::Result;
use crate::grid::Setup;

/// Keys per radix tile (SC_RADIX_TILE) and threads of the radix kernels (SC_RADIX_THREADS).
pub(super) const TILE: usize = 4096;
pub(super) const RADIX_THREADS: u32 = 256;
/// Threads of the one-block kernels (grid_scan, grid_envelopes).
pub(super) const ONE_BLOCK_THREADS: u32 = 1024;
/// Threads per block of the scalar gather (one warp per target).
pub(super) const GATHER_THREADS: u32 = 256;
/// Targets per block of the spectral gather (SC_RUN) and its threads (SC_SPEC_THREADS).
pub(super) const SPEC_RUN: usize = 16;
const SPEC_THREADS: u32 = 256;
pub(super) const MAX_BLOCKS: usize = 1 << 16;
/// Channels per spectral launch (one per thread of a block).
pub(super) const MAX_CW: usize = SPEC_THREADS as usize;

/// `GridPlan` in kernels/grid.cu.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct PlanArgs {
    pub(super) x: u64,
    pub(super) y: u64,
    pub(super) z: u64,
    pub(super) keys: u64,
    pub(super) n: i64,
    pub(super) ring_start: u64,
    pub(super) zmin: u64,
    pub(super) zmax: u64,
    pub(super) lo_env: u64,
    pub(super) hi_env: u64,
    pub(super) nrings: i64,
}

/// `GridKernel`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct KernelArgs {
    pub(super) kind: i64,
    pub(super) c0: f64,
    pub(super) c1: f64,
    pub(super) c2: f64,
    pub(super) c3: f64,
    pub(super) radius: f64,
    pub(super) c2_cut: f64,
}

/// `GridPrepArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct PrepArgs {
    pub(super) lon: u64,
    pub(super) lat: u64,
    pub(super) vcheck: u64,
    pub(super) wcheck: u64,
    pub(super) keys: u64,
    pub(super) vals: u64,
    pub(super) hist: u64,
    pub(super) n: i64,
    pub(super) nside: i64,
}

/// `GridRadixArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct RadixArgs {
    pub(super) keys_in: u64,
    pub(super) vals_in: u64,
    pub(super) keys_out: u64,
    pub(super) vals_out: u64,
    pub(super) counts: u64,
    pub(super) n: i64,
    pub(super) shift: i64,
    pub(super) nblocks: i64,
}

/// `GridScanArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct ScanArgs {
    pub(super) data: u64,
    pub(super) len: i64,
}

/// `GridRingArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct RingArgs {
    pub(super) keys: u64,
    pub(super) z: u64,
    pub(super) ring_start: u64,
    pub(super) zmin: u64,
    pub(super) zmax: u64,
    pub(super) lo_env: u64,
    pub(super) hi_env: u64,
    pub(super) n: i64,
    pub(super) nrings: i64,
}

/// `GridGeomArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct GeomArgs {
    pub(super) lon: u64,
    pub(super) lat: u64,
    pub(super) order: u64,
    pub(super) x: u64,
    pub(super) y: u64,
    pub(super) z: u64,
    pub(super) n: i64,
}

/// `GridGatherArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct GatherArgs {
    pub(super) order: u64,
    pub(super) data: u64,
    pub(super) weight: u64,
    pub(super) wv: u64,
    pub(super) w: u64,
    pub(super) n: i64,
}

/// `GridScalarArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct ScalarArgs {
    pub(super) p: PlanArgs,
    pub(super) k: KernelArgs,
    pub(super) tlon: u64,
    pub(super) tlat: u64,
    pub(super) nt: i64,
    pub(super) wv: u64,
    pub(super) w: u64,
    pub(super) out_u: u64,
    pub(super) out_w: u64,
}

/// `GridSpectralArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct SpectralArgs {
    pub(super) p: PlanArgs,
    pub(super) k: KernelArgs,
    pub(super) tlon: u64,
    pub(super) tlat: u64,
    pub(super) nt: i64,
    pub(super) order: u64,
    pub(super) data: u64,
    pub(super) wfull: u64,
    pub(super) wsh: u64,
    pub(super) stride: i64,
    pub(super) c0: i64,
    pub(super) cw: i64,
    pub(super) out_u: u64,
    pub(super) out_w: u64,
    pub(super) wmap: u64,
    pub(super) nan_flag: u64,
    pub(super) ostride: i64,
}

/// `GridFinishArgs`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct FinishArgs {
    pub(super) su: u64,
    pub(super) sw: u64,
    pub(super) cube: u64,
    pub(super) weights: u64,
    pub(super) len: i64,
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
            nan_flag, ostride
        ]
    );
    layout!("GridFinishArgs", FinishArgs, [su, sw, cube, weights, len]);
    out
}

impl KernelArgs {
    pub(super) fn new(setup: &Setup) -> Self {
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
pub(super) fn launch<A: DeviceRepr>(
    gpu: &Gpu,
    name: &str,
    cfg: LaunchConfig,
    args: &A,
) -> Result<()> {
    let func = gpu.function("grid", name)?;
    let mut b = gpu.stream.launch_builder(&func);
    b.arg(args);
    // SAFETY: every kernel of grid.cu takes exactly one struct argument, which `A` mirrors
    // (layouts checked by the test suite); the pointers in it are live device buffers of the
    // lengths documented beside the C struct, and `cfg` is the shape the kernel documents.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

pub(super) fn one_block(threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

pub(super) fn blocks_of(nblocks: usize, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (nblocks as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One warp per target, grid-stride over the rest.
pub(super) fn gather_config(nt: usize) -> LaunchConfig {
    let warps_per_block = (GATHER_THREADS / 32) as usize;
    blocks_of(
        nt.div_ceil(warps_per_block).clamp(1, MAX_BLOCKS),
        GATHER_THREADS,
    )
}

/// A block per run of `SPEC_RUN` targets, grid-stride over the rest.
pub(super) fn spectral_config(nt: usize) -> LaunchConfig {
    blocks_of(nt.div_ceil(SPEC_RUN).clamp(1, MAX_BLOCKS), SPEC_THREADS)
}
