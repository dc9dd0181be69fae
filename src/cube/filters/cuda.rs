//! CUDA engine for the 1-D filters (`kernels/filters.cu`).

use super::{AxisView, Pass};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::{self, CudaSlice, Gpu, LaunchConfig, PushKernelArg};
use crate::error::Result;
use crate::real::Real;

const THREADS: u32 = 256;
const MAX_GRID_Y: usize = 65535;

/// A pass whose weights already live on the device, for reuse across launches.
pub struct DevicePass {
    weights: CudaSlice<f64>,
    taps: i32,
    offset: i64,
    step: i64,
    scale: f64,
    mode: i32,
    cval: f64,
}

impl DevicePass {
    pub fn new(gpu: &Gpu, pass: &Pass) -> Result<Self> {
        let f = &pass.filter;
        Ok(DevicePass {
            weights: gpu.upload_small(&f.weights)?,
            taps: f.taps() as i32,
            offset: f.offset as i64,
            step: f.step as i64,
            scale: f.scale,
            mode: pass.mode.code(),
            cval: pass.cval,
        })
    }
}

/// Queue one pass from `input` to `out`, both already on the device.
pub fn apply_device<T: Real>(
    gpu: &Gpu,
    input: &CudaSlice<T>,
    view: AxisView,
    pass: &DevicePass,
    out: &mut CudaSlice<T>,
) -> Result<()> {
    if view.is_empty() {
        return Ok(());
    }
    let func = gpu.function("filters", &format!("correlate_{}", T::CUDA))?;
    let (fdim, sdim) = if view.inner == 1 {
        (view.n, view.outer)
    } else {
        (view.inner, view.outer * view.n)
    };
    let cfg = LaunchConfig {
        grid_dim: (
            fdim.div_ceil(THREADS as usize) as u32,
            sdim.min(MAX_GRID_Y) as u32,
            1,
        ),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let (outer, n, inner) = (view.outer as i64, view.n as i64, view.inner as i64);
    let mut launch = gpu.stream.launch_builder(&func);
    launch
        .arg(input)
        .arg(out)
        .arg(&outer)
        .arg(&n)
        .arg(&inner)
        .arg(&pass.weights)
        .arg(&pass.taps)
        .arg(&pass.offset)
        .arg(&pass.step)
        .arg(&pass.scale)
        .arg(&pass.mode)
        .arg(&pass.cval);
    // SAFETY: argument types and order match `correlate_*` in kernels/filters.cu; both buffers
    // hold view.len() elements.
    unsafe { launch.launch(cfg) }?;
    Ok(())
}

/// One pass from host memory to host memory: upload, filter, download.
pub fn apply<T: Real>(input: &[T], view: AxisView, pass: &Pass, out: &mut [T]) -> Result<()> {
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive();
    let mut timeline = Timeline::start(&gpu)?;
    let d_in = gpu.upload(input)?;
    timeline.mark(&gpu, "h2d")?;
    let dpass = DevicePass::new(&gpu, pass)?;
    // SAFETY: the kernel writes every element.
    let mut d_out = unsafe { gpu.alloc::<T>(input.len())? };
    apply_device(&gpu, &d_in, view, &dpass, &mut d_out)?;
    timeline.mark(&gpu, "kernel")?;
    gpu.download(&d_out, out)?;
    timeline.mark(&gpu, "d2h")?;
    timeline.finish()?;
    gpu.sync()
}
