//! What a call of the CUDA SHT sets up on the device before its chunks run: the ring and
//! Legendre tables (`Geo`), the component groups of one launch (`Group`), the per-chunk
//! scratch sized to the memory budget (`Work`), and the launch shapes and chunk list.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::backend::cuda::ring_fft::RingFft;
use crate::backend::cuda::{CudaSlice, Gpu, LaunchConfig};
use crate::error::Result;
use crate::sht::{Job, Plan};

/// Most device memory the per-chunk work buffers may take.
const WORK_BUDGET: usize = 4 << 30;

/// Geometry and tables on the device.
pub(super) struct Geo {
    pub(super) pair_x: CudaSlice<f64>,
    pub(super) pair_s: CudaSlice<f64>,
    pub(super) nphi: CudaSlice<i64>,
    pub(super) first: CudaSlice<i64>,
    pub(super) shift: CudaSlice<i32>,
    pub(super) w: CudaSlice<f64>,
    pub(super) norms: CudaSlice<f64>,
    pub(super) lnfact: CudaSlice<f64>,
    /// The m of each phase column (0..=mmax) and the offset of its a_{m m} (healpy's layout).
    pub(super) mlist: CudaSlice<i64>,
    pub(super) moff: CudaSlice<i64>,
}

pub(super) fn geo(gpu: &Gpu, plan: &Plan) -> Result<Geo> {
    let px: Vec<f64> = plan.pairs.iter().map(|p| p.x).collect();
    let ps: Vec<f64> = plan.pairs.iter().map(|p| p.s).collect();
    let nphi: Vec<i64> = plan.rings.iter().map(|r| r.nphi as i64).collect();
    let first: Vec<i64> = plan.rings.iter().map(|r| r.first as i64).collect();
    let shift: Vec<i32> = plan.rings.iter().map(|r| (r.phi0 != 0.0) as i32).collect();
    Ok(Geo {
        pair_x: gpu.upload_small(&px)?,
        pair_s: gpu.upload_small(&ps)?,
        nphi: gpu.upload_small(&nphi)?,
        first: gpu.upload_small(&first)?,
        shift: gpu.upload_small(&shift)?,
        w: gpu.upload_small(&plan.weights)?,
        norms: gpu.upload_small(&plan.norms)?,
        lnfact: gpu.upload_small(&plan.ln_fact)?,
        mlist: gpu.upload_small(&(0..=plan.lay.mmax as i64).collect::<Vec<_>>())?,
        moff: gpu.upload_small(
            &(0..=plan.lay.mmax)
                .map(|m| plan.lay.mstart(m) as i64)
                .collect::<Vec<_>>(),
        )?,
    })
}

/// What every stage of one call reads: the GPU, the plan and its tables on the device.
pub(super) struct Ctx<'a> {
    pub(super) gpu: &'a Gpu,
    pub(super) plan: &'a Plan,
    pub(super) g: Geo,
}

/// Up to three components handled by one launch: spin 0 only, or T + (E, B) with spin 2, or
/// (E, B) alone (`pol` with two components: the spin-2 SHT halves).
#[derive(Debug, Clone)]
pub(super) struct Group {
    pub(super) comps: Vec<usize>,
    pub(super) pol: bool,
}

impl Group {
    pub(super) fn synth_kernel(&self) -> &'static str {
        match (self.pol, self.comps.len()) {
            (true, 2) => "leg_synth_pol0",
            (true, _) => "leg_synth_pol",
            (false, 1) => "leg_synth_s1",
            (false, 2) => "leg_synth_s2",
            _ => "leg_synth_s3",
        }
    }
    /// Ring pairs per thread of the synthesis kernel (R in kernels/sht.cu's SYNTH_ENTRY).
    pub(super) fn synth_rings(&self) -> u32 {
        if !self.pol && self.comps.len() == 1 {
            4
        } else {
            2
        }
    }
    pub(super) fn anal_kernel(&self) -> &'static str {
        match (self.pol, self.comps.len()) {
            (true, 2) => "leg_anal_pol0",
            (true, _) => "leg_anal_pol",
            (false, 1) => "leg_anal_s1",
            (false, 2) => "leg_anal_s2",
            _ => "leg_anal_s3",
        }
    }
}

pub(super) fn groups(jobs: &[Job], ncomp: usize) -> Vec<Group> {
    group_list(jobs.iter().any(|j| matches!(j, Job::Spin2(..))), ncomp)
}

/// The component groups of `nc` components, one launch each: with `pol` all of them in one
/// spin-2 group (T, E, B: nc = 3, or E, B alone: nc = 2, the spin-2 halves), else the spin-0
/// components three at a time. The one rule of the full transform, the halves and the
/// multi-GPU pipeline.
pub(super) fn group_list(pol: bool, nc: usize) -> Vec<Group> {
    if pol {
        return vec![Group {
            comps: (0..nc).collect(),
            pol: true,
        }];
    }
    (0..nc)
        .collect::<Vec<_>>()
        .chunks(3)
        .map(|c| Group {
            comps: c.to_vec(),
            pol: false,
        })
        .collect()
}

/// Per-chunk scratch on the device.
pub(super) struct Work {
    pub(super) np_max: usize,
    pub(super) phase: CudaSlice<f64>,
    pub(super) spec: CudaSlice<f64>,
    pub(super) rows: CudaSlice<f64>,
    /// Stand-ins for unused component pointers (never accessed by the kernels).
    pub(super) dummy1: CudaSlice<f64>,
    pub(super) dummy2: CudaSlice<f64>,
    /// Polar ring transforms per (first pair, pairs, components) of a chunk.
    pub(super) polar: HashMap<(usize, usize, usize), RingFft>,
}

/// Work buffers for groups of up to `planes` components.
/// Chunks a call is cut into at least when its transfers overlap the kernels (more chunks hide
/// more of the PCIe time; fewer keep the Legendre launches wide).
const OVERLAP_CHUNKS: usize = 4;
/// Legendre work of one chunk at most (ring pairs × (lmax+1)(mmax+1)/2 × components): about
/// 50 ms at the rate measured at nside 8192 on an H200 (2.2e12 in 1.2 s), so that with
/// `pace::DEPTH` chunks queued Ctrl-C stops a transform within ~0.1-0.2 s (issue 17).
const CHUNK_WORK: f64 = 1e11;
/// Ring pairs of one Legendre thread block of the one-component kernels: TPB_LEG
/// threads × 4 pairs each (`Group::synth_rings`; the other groups: 2 pairs, half a block).
pub(super) const LEG_BLOCK_PAIRS: usize = super::TPB_LEG as usize * 4;

/// The CHUNK_WORK bound `by_work` on pairs per chunk in whole Legendre blocks for groups of
/// `planes` components (LEG_BLOCK_PAIRS for one, half of it for more): rounded down to a
/// multiple of a block, or up to one block when below it. A chunk of fewer pairs leaves the rest
/// of each block's lanes idle for its whole l loop: at nside 16384, lmax 32768 the bound is 186
/// pairs for one component, 36 % of a 512-pair block (likely why one H100's alm2map took 23.5 s
/// there in session 10, one H200's 10.9 s in session 8 before the bound existed). Rounding up
/// makes a chunk's Legendre work up to 2.75× CHUNK_WORK there (4.1× for T, Q, U: ~0.15–0.2 s,
/// so Ctrl-C within ~0.3–0.4 s with `pace::DEPTH` chunks queued) at the sizes where the bound
/// is below one block (nside ≳ 9000 at lmax = 2 nside).
pub(super) fn whole_leg_blocks(by_work: usize, planes: usize) -> usize {
    let unit = if planes <= 1 {
        LEG_BLOCK_PAIRS
    } else {
        LEG_BLOCK_PAIRS / 2
    };
    if by_work >= unit {
        by_work / unit * unit
    } else {
        unit
    }
}

/// Below this many pixels per map a call is not worth cutting for overlap.
const OVERLAP_MIN_NPIX: usize = 1 << 22;

/// Order the copy stream after the allocations just made on the compute stream (stream-ordered
/// memory may be reused from work still queued there).
pub(super) fn fence_copy_stream(gpu: &Gpu) -> Result<()> {
    let ev = gpu.event()?;
    ev.record(&gpu.stream)?;
    gpu.copy.wait(&ev)?;
    Ok(())
}

/// Work buffers for groups of up to `planes` components; `overlap`: cut the call into at
/// least OVERLAP_CHUNKS chunks so that transfers can overlap the kernels.
pub(super) fn work(gpu: &Gpu, plan: &Plan, planes: usize, overlap: bool) -> Result<Work> {
    let ns = plan.nside;
    let h = 2 * ns + 1;
    let per_pair = planes * 2 * 8 * (2 * (plan.lay.mmax + 1) + 2 * h + 4 * ns);
    let (free, _) = gpu.mem_info()?;
    let budget = WORK_BUDGET.min(free / 3).max(per_pair);
    let mut np_max = budget / per_pair;
    if overlap && plan.npix >= OVERLAP_MIN_NPIX {
        np_max = np_max.min(plan.pairs.len().div_ceil(OVERLAP_CHUNKS));
    }
    let per_pair_work =
        (plan.lay.lmax + 1) as f64 * (plan.lay.mmax + 1) as f64 / 2.0 * planes as f64;
    let by_work = whole_leg_blocks((CHUNK_WORK / per_pair_work) as usize, planes);
    np_max = np_max.min(by_work).max(1);
    let np_max = crate::sht::forced_chunk_pairs()
        .unwrap_or(np_max)
        .clamp(1, 16384)
        .min(plan.pairs.len());
    work_for(gpu, plan, planes, np_max)
}

/// Work buffers for chunks of up to `np_max` ring pairs and `planes` components (the full
/// transform, sized by `work`, and the multi-GPU pipeline, sized by its rounds).
pub(super) fn work_for(gpu: &Gpu, plan: &Plan, planes: usize, np_max: usize) -> Result<Work> {
    let (ns, nrow) = (plan.nside, 2 * np_max);
    Ok(Work {
        np_max,
        phase: gpu.alloc_zeros::<f64>(planes * nrow * (plan.lay.mmax + 1) * 2)?,
        spec: gpu.alloc_zeros::<f64>(planes * nrow * (2 * ns + 1) * 2)?,
        rows: gpu.alloc_zeros::<f64>(planes * nrow * 4 * ns)?,
        dummy1: gpu.alloc_zeros::<f64>(1)?,
        dummy2: gpu.alloc_zeros::<f64>(1)?,
        polar: HashMap::new(),
    })
}

pub(super) fn cfg(grid: (u32, u32, u32), block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: grid,
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

pub(super) fn blocks(n: usize, per: u32) -> u32 {
    n.div_ceil(per as usize).max(1) as u32
}

/// (first, count) of the chunks of ring pairs.
pub(super) fn chunk_list(plan: &Plan, np_max: usize) -> Vec<(usize, usize)> {
    let n = plan.pairs.len();
    (0..n)
        .step_by(np_max)
        .map(|p0| (p0, np_max.min(n - p0)))
        .collect()
}

/// Most device memory in use seen by the SHT halves per GPU ordinal (`multi` resets and reads
/// it around a multi-GPU transform).
pub(super) static PEAK: [AtomicUsize; 64] = [const { AtomicUsize::new(0) }; 64];

/// Record the device memory in use now (total − free) as a candidate peak for its GPU.
pub(super) fn note_used(gpu: &Gpu) {
    if let Ok((free, total)) = gpu.mem_info() {
        if let Some(p) = PEAK.get(gpu.ordinal as usize) {
            p.fetch_max(total.saturating_sub(free), Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{whole_leg_blocks, LEG_BLOCK_PAIRS};

    #[test]
    fn chunks_hold_whole_legendre_blocks() {
        assert_eq!(LEG_BLOCK_PAIRS, 512);
        // nside 16384, lmax 32768: 1e11 / (32769² / 2) = 186 pairs -> one whole block
        assert_eq!(whole_leg_blocks(186, 1), 512);
        assert_eq!(whole_leg_blocks(1, 1), 512);
        // T, Q, U (62 pairs): half a block, the s3 / pol kernels' 2 pairs a thread
        assert_eq!(whole_leg_blocks(62, 3), 256);
        // nside 8192 (745 pairs) and 4096 (2979 pairs): rounded down, never above the bound
        assert_eq!(whole_leg_blocks(745, 1), 512);
        assert_eq!(whole_leg_blocks(2979, 1), 2560);
        assert_eq!(whole_leg_blocks(2979, 2), 2816);
        for planes in 1..4 {
            let unit = if planes == 1 { 512 } else { 256 };
            for w in unit..5000 {
                let n = whole_leg_blocks(w, planes);
                assert!(n <= w && n.is_multiple_of(unit) && n + unit > w);
            }
        }
    }
}
