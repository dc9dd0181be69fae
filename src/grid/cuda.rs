//! CUDA engine (`kernels/grid.cu`): the host-built plan is uploaded once, then one warp per
//! target pixel gathers its candidates. Spectral data go up in chunks of up to `CHUNK` channels,
//! packed into plan order on the host while the previous chunk's kernel runs; the backend
//! stages each chunk through pinned buffers, so cubes of any channel count fit. Sums come back
//! as f64 and are added into the caller's accumulators on the host.

use rayon::prelude::*;

use super::{Plan, Samples, Setup, Weights};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::{self, CudaSlice, Gpu, LaunchConfig, PushKernelArg};
use crate::error::Result;
use crate::real::Real;

/// Channels per chunk (the kernel keeps 4 per lane of a warp).
const CHUNK: usize = 128;
const THREADS: u32 = 256;
const MAX_BLOCKS: usize = 1 << 16;

/// The plan and targets on the device.
struct DevicePlan {
    x: CudaSlice<f64>,
    y: CudaSlice<f64>,
    z: CudaSlice<f64>,
    keys: CudaSlice<u64>,
    n: i64,
    ring_start: CudaSlice<i64>,
    zmin: CudaSlice<f64>,
    zmax: CudaSlice<f64>,
    lo_env: CudaSlice<f64>,
    hi_env: CudaSlice<f64>,
    nrings: i32,
    tlon: CudaSlice<f64>,
    tlat: CudaSlice<f64>,
    nt: i64,
}

impl DevicePlan {
    fn new(gpu: &Gpu, plan: &Plan, tlon: &[f64], tlat: &[f64]) -> Result<Self> {
        let starts: Vec<i64> = plan.ring_start.iter().map(|&s| s as i64).collect();
        Ok(DevicePlan {
            x: gpu.upload(&plan.x)?,
            y: gpu.upload(&plan.y)?,
            z: gpu.upload(&plan.z)?,
            keys: gpu.upload(&plan.keys)?,
            n: plan.len() as i64,
            ring_start: gpu.upload(&starts)?,
            zmin: gpu.upload(&plan.zmin)?,
            zmax: gpu.upload(&plan.zmax)?,
            lo_env: gpu.upload(&plan.lo_env)?,
            hi_env: gpu.upload(&plan.hi_env)?,
            nrings: plan.zmin.len() as i32,
            tlon: gpu.upload(tlon)?,
            tlat: gpu.upload(tlat)?,
            nt: tlon.len() as i64,
        })
    }
}

/// Kernel constants in the order of `SC_PLAN_ARGS`.
struct KernelArgs {
    kind: i32,
    c: [f64; 4],
    radius: f64,
    c2_cut: f64,
}

impl KernelArgs {
    fn new(setup: &Setup) -> Self {
        let c = 2.0 * (0.5 * setup.radius).min(std::f64::consts::FRAC_PI_2).sin();
        KernelArgs {
            kind: setup.kernel.kind as i32,
            c: setup.kernel.c,
            radius: setup.radius,
            c2_cut: c * c * (1.0 + 1e-9),
        }
    }
}

fn config(nt: usize) -> LaunchConfig {
    let warps_per_block = (THREADS / 32) as usize;
    LaunchConfig {
        grid_dim: (
            nt.div_ceil(warps_per_block).clamp(1, MAX_BLOCKS) as u32,
            1,
            1,
        ),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

macro_rules! plan_args {
    ($launch:expr, $p:expr, $k:expr) => {
        $launch
            .arg(&$p.x)
            .arg(&$p.y)
            .arg(&$p.z)
            .arg(&$p.keys)
            .arg(&$p.n)
            .arg(&$p.ring_start)
            .arg(&$p.zmin)
            .arg(&$p.zmax)
            .arg(&$p.lo_env)
            .arg(&$p.hi_env)
            .arg(&$p.nrings)
            .arg(&$p.tlon)
            .arg(&$p.tlat)
            .arg(&$p.nt)
            .arg(&$k.kind)
            .arg(&$k.c[0])
            .arg(&$k.c[1])
            .arg(&$k.c[2])
            .arg(&$k.c[3])
            .arg(&$k.radius)
            .arg(&$k.c2_cut)
    };
}

/// acc[i] += add[i] for the first `add.len()` elements, in parallel.
fn add_into<O: Real>(acc: &mut [O], add: &[f64]) {
    acc.par_iter_mut()
        .zip(add.par_iter())
        .with_min_len(1 << 14)
        .for_each(|(a, &v)| *a = O::from_f64(a.to_f64() + v));
}

pub fn accumulate<T: Real, O: Real>(
    plan: &Plan,
    samples: &Samples<'_, T>,
    target_lon: &[f64],
    target_lat: &[f64],
    setup: &Setup,
    unweighted: &mut [O],
    weights: &mut [O],
) -> Result<()> {
    let nt = target_lon.len();
    if plan.is_empty() || nt == 0 {
        return Ok(());
    }
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive();
    let mut timeline = Timeline::start(&gpu)?;
    let dp = DevicePlan::new(&gpu, plan, target_lon, target_lat)?;
    let ka = KernelArgs::new(setup);
    timeline.mark(&gpu, "h2d")?;
    let nchan = samples.nchan;
    let n = plan.len();
    let shared_w = |i: usize| match samples.weights {
        Weights::Ones => 1.0,
        Weights::PerSample(w) | Weights::Full(w) => w[i].to_f64(),
    };
    if nchan == 1 {
        let (wv, w): (Vec<f64>, Vec<f64>) = plan
            .order
            .par_iter()
            .with_min_len(4096)
            .map(|&i| {
                let i = i as usize;
                let w = shared_w(i);
                (w * samples.data[i].to_f64(), w)
            })
            .unzip();
        let d_wv = gpu.upload(&wv)?;
        let d_w = gpu.upload(&w)?;
        timeline.mark(&gpu, "h2d")?;
        // SAFETY: the kernel writes all nt elements of both.
        let mut out_u = unsafe { gpu.alloc::<f64>(nt)? };
        let mut out_w = unsafe { gpu.alloc::<f64>(nt)? };
        let func = gpu.function("grid", "grid_scalar")?;
        let mut launch = gpu.stream.launch_builder(&func);
        plan_args!(launch, dp, ka)
            .arg(&d_wv)
            .arg(&d_w)
            .arg(&mut out_u)
            .arg(&mut out_w);
        // SAFETY: arguments match `grid_scalar` in kernels/grid.cu; every buffer has the
        // length the kernel reads (n samples, nt targets).
        unsafe { launch.launch(config(nt)) }?;
        timeline.mark(&gpu, "kernel")?;
        let mut host = vec![0.0f64; nt];
        gpu.download(&out_u, &mut host)?;
        add_into(unweighted, &host);
        gpu.download(&out_w, &mut host)?;
        add_into(weights, &host);
        timeline.mark(&gpu, "d2h")?;
        timeline.finish()?;
        return gpu.sync();
    }

    let full = matches!(samples.weights, Weights::Full(_));
    let d_wsh = if full {
        gpu.alloc_zeros::<f64>(1)?
    } else {
        let w: Vec<f64> = plan
            .order
            .par_iter()
            .map(|&i| shared_w(i as usize))
            .collect();
        gpu.upload(&w)?
    };
    // Channels per chunk: at most CHUNK, fewer when the chunk's data (n·cw) and f64 sums
    // (2·cw·nt) would take more than half the free device memory.
    let (free, _) = gpu.mem_info()?;
    let per_chan = n * std::mem::size_of::<T>() * (1 + usize::from(full)) + 16 * nt;
    let cw_max = CHUNK.min(nchan).min((free / 2 / per_chan).max(1));
    // SAFETY: each chunk uploads the n·cw elements its kernel reads before launching it.
    let mut d_data = unsafe { gpu.alloc::<T>(n * cw_max)? };
    let mut d_wfull = if full {
        unsafe { gpu.alloc::<T>(n * cw_max)? }
    } else {
        gpu.alloc_zeros::<T>(1)?
    };
    let mut out_u = unsafe { gpu.alloc::<f64>(cw_max * nt)? };
    let mut out_w = unsafe { gpu.alloc::<f64>(cw_max * nt)? };
    let func = gpu.function("grid", &format!("grid_spectral_{}", T::CUDA))?;
    let mut h_data = vec![T::default(); n * cw_max];
    let mut h_w = if full {
        vec![T::default(); n * cw_max]
    } else {
        Vec::new()
    };
    let mut h_out = vec![0.0f64; cw_max * nt];
    let full_flag = i32::from(full);
    let pack = |c0: usize, cw: usize, hd: &mut [T], hw: &mut [T]| {
        let (hd, hw) = (&mut hd[..n * cw], &mut hw[..if full { n * cw } else { 0 }]);
        hd.par_chunks_mut(cw)
            .zip(plan.order.par_iter())
            .with_min_len(256)
            .for_each(|(row, &i)| {
                let i = i as usize * nchan + c0;
                row.copy_from_slice(&samples.data[i..i + cw]);
            });
        if let Weights::Full(w) = samples.weights {
            hw.par_chunks_mut(cw)
                .zip(hd.par_chunks_mut(cw))
                .zip(plan.order.par_iter())
                .with_min_len(256)
                .for_each(|((rw, rd), &i)| {
                    let i = i as usize * nchan + c0;
                    rw.copy_from_slice(&w[i..i + cw]);
                    for (v, wt) in rd.iter_mut().zip(rw.iter_mut()) {
                        if v.to_f64().is_nan() || wt.to_f64().is_nan() {
                            *v = T::default();
                            *wt = T::default();
                        }
                    }
                });
        }
    };
    pack(0, cw_max, &mut h_data, &mut h_w);
    let mut c0 = 0;
    while c0 < nchan {
        let cw = cw_max.min(nchan - c0);
        gpu.upload_into(&h_data[..n * cw], &mut d_data)?;
        if full {
            gpu.upload_into(&h_w[..n * cw], &mut d_wfull)?;
        }
        timeline.mark(&gpu, "h2d")?;
        let cw_i = cw as i32;
        let mut launch = gpu.stream.launch_builder(&func);
        plan_args!(launch, dp, ka)
            .arg(&d_data)
            .arg(&d_wsh)
            .arg(&d_wfull)
            .arg(&full_flag)
            .arg(&cw_i)
            .arg(&mut out_u)
            .arg(&mut out_w);
        // SAFETY: arguments match `grid_spectral_*` in kernels/grid.cu; d_data (and d_wfull
        // when full) hold n·cw elements, d_wsh n (when not full), out_* cw·nt.
        unsafe { launch.launch(config(nt)) }?;
        timeline.mark(&gpu, "kernel")?;
        // Pack the next chunk while this one computes.
        let next = c0 + cw;
        if next < nchan {
            pack(next, cw_max.min(nchan - next), &mut h_data, &mut h_w);
        }
        let rows = c0 * nt..(c0 + cw) * nt;
        gpu.download(&out_u, &mut h_out[..cw * nt])?;
        add_into(&mut unweighted[rows.clone()], &h_out[..cw * nt]);
        gpu.download(&out_w, &mut h_out[..cw * nt])?;
        add_into(&mut weights[rows], &h_out[..cw * nt]);
        timeline.mark(&gpu, "d2h")?;
        c0 = next;
    }
    timeline.finish()?;
    gpu.sync()
}
