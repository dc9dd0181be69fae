//! The lookup built on the device (`DevicePlan`): sort keys, a stable LSD radix sort of
//! (key, sample index), per-ring start tables, unit vectors in sorted order and the ring z
//! spans; the twin of the host plan in `grid/plan.rs`, in the same order.

use super::args::{
    blocks_of, launch, one_block, GeomArgs, PlanArgs, PrepArgs, RadixArgs, RingArgs, ScanArgs,
    MAX_BLOCKS, ONE_BLOCK_THREADS, RADIX_THREADS, TILE,
};
use crate::backend::cuda::{grid_stride, CudaSlice, Gpu};
use crate::error::Result;
use crate::real::Real;

/// The lookup on the device (see kernels/grid.cu). Only the first `kept` entries of `keys`
/// and `order` belong to kept samples.
pub(super) struct DevicePlan {
    pub(super) kept: usize,
    pub(super) nrings: usize,
    pub(super) keys: CudaSlice<u64>,
    pub(super) order: CudaSlice<u32>,
    pub(super) x: CudaSlice<f64>,
    pub(super) y: CudaSlice<f64>,
    pub(super) z: CudaSlice<f64>,
    pub(super) ring_start: CudaSlice<i64>,
    pub(super) zmin: CudaSlice<f64>,
    pub(super) zmax: CudaSlice<f64>,
    pub(super) lo_env: CudaSlice<f64>,
    pub(super) hi_env: CudaSlice<f64>,
}

impl DevicePlan {
    /// Sort the `n` samples at `lon`, `lat` (device, degrees). `vcheck` / `wcheck`: device
    /// addresses of `T` arrays whose NaN entries drop a sample (0 for none). None when no sample
    /// is kept. Synchronises once (to read the digit histogram); everything else is queued.
    pub(super) fn build<T: Real>(
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

    pub(super) fn args(&self, gpu: &Gpu) -> PlanArgs {
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
