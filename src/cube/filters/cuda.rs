//! CUDA engine for the 1-D filters (`kernels/filters.cu`). Arrays larger than the GPU's memory
//! budget are filtered in chunks: whole outer slabs when they fit, else runs of rows along the
//! filtered axis with the halo their taps read.

use std::ops::Range;

use super::{extend_index, AxisView, Mode, Pass};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::{self, CudaSlice, Gpu, LaunchConfig, PushKernelArg};
use crate::error::{Error, Result};
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
    span: (isize, isize),
    host_mode: Mode,
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
            span: f.span(),
            host_mode: pass.mode,
        })
    }
}

/// One launch over a chunk: `outer` slabs, output rows `rows` of the axis, input rows `rows_in`.
#[derive(Debug, Clone)]
struct Chunk {
    outer: Range<usize>,
    rows: Range<usize>,
    rows_in: Range<usize>,
}

/// Queue one pass from `input` to `out`, both already on the device and covering the view.
pub fn apply_device<T: Real>(
    gpu: &Gpu,
    input: &CudaSlice<T>,
    view: AxisView,
    pass: &DevicePass,
    out: &mut CudaSlice<T>,
) -> Result<()> {
    let whole = Chunk {
        outer: 0..view.outer,
        rows: 0..view.n,
        rows_in: 0..view.n,
    };
    launch(gpu, input, view, &whole, pass, out)
}

fn launch<T: Real>(
    gpu: &Gpu,
    input: &CudaSlice<T>,
    view: AxisView,
    chunk: &Chunk,
    pass: &DevicePass,
    out: &mut CudaSlice<T>,
) -> Result<()> {
    let outer = chunk.outer.len();
    let n_out = chunk.rows.len();
    if outer == 0 || n_out == 0 || view.inner == 0 {
        return Ok(());
    }
    let func = gpu.function("filters", &format!("correlate_{}", T::CUDA))?;
    let (fdim, sdim) = if view.inner == 1 {
        (n_out, outer)
    } else {
        (view.inner, outer * n_out)
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
    let (outer, n_out, inner) = (outer as i64, n_out as i64, view.inner as i64);
    let n_in = chunk.rows_in.len() as i64;
    let (out_row0, in_row0) = (chunk.rows.start as i64, chunk.rows_in.start as i64);
    let n_global = view.n as i64;
    let mut l = gpu.stream.launch_builder(&func);
    l.arg(input)
        .arg(out)
        .arg(&outer)
        .arg(&n_out)
        .arg(&inner)
        .arg(&n_in)
        .arg(&out_row0)
        .arg(&in_row0)
        .arg(&n_global)
        .arg(&pass.weights)
        .arg(&pass.taps)
        .arg(&pass.offset)
        .arg(&pass.step)
        .arg(&pass.scale)
        .arg(&pass.mode)
        .arg(&pass.cval);
    // SAFETY: argument types and order match `correlate_*` in kernels/filters.cu; the buffers
    // hold the chunk's input rows (with halo) and output rows.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// Input rows that output rows `rows` read (through the boundary extension).
fn input_rows(rows: &Range<usize>, n: usize, span: (isize, isize), mode: Mode) -> Range<usize> {
    let (lo, hi) = span;
    let (p0, p1) = (rows.start as isize + lo, rows.end as isize - 1 + hi);
    if p0 >= 0 && p1 < n as isize {
        return p0 as usize..p1 as usize + 1;
    }
    if p1 - p0 >= 2 * n as isize {
        return 0..n;
    }
    let (mut a, mut b) = (n, 0);
    for p in p0..=p1 {
        if let Some(q) = extend_index(p, n, mode) {
            a = a.min(q);
            b = b.max(q + 1);
        }
    }
    if a >= b {
        0..0
    } else {
        a..b
    }
}

/// Split the view into chunks whose input + output fit in `budget` elements.
fn plan(view: AxisView, pass: &DevicePass, budget: usize) -> Result<Vec<Chunk>> {
    let slab = view.n * view.inner;
    if 2 * slab * view.outer <= budget {
        return Ok(vec![Chunk {
            outer: 0..view.outer,
            rows: 0..view.n,
            rows_in: 0..view.n,
        }]);
    }
    if 2 * slab <= budget {
        let per = budget / (2 * slab);
        return Ok((0..view.outer)
            .step_by(per)
            .map(|o| Chunk {
                outer: o..(o + per).min(view.outer),
                rows: 0..view.n,
                rows_in: 0..view.n,
            })
            .collect());
    }
    // Runs of rows of one slab at a time, each with its halo.
    let halo = (pass.span.1 - pass.span.0).unsigned_abs();
    let rows_fit = (budget / view.inner.max(1)).saturating_sub(halo) / 2;
    if rows_fit == 0 {
        return Err(Error::GpuMemory(format!(
            "GPU memory budget of {budget} elements is too small for one row of {} elements \
             plus the filter's halo of {halo} rows",
            view.inner
        )));
    }
    let mut chunks = Vec::new();
    for o in 0..view.outer {
        for a in (0..view.n).step_by(rows_fit) {
            let rows = a..(a + rows_fit).min(view.n);
            let rows_in = input_rows(&rows, view.n, pass.span, pass.host_mode);
            if 2 * rows.len().max(rows_in.len()) * view.inner > budget {
                return Err(Error::GpuMemory(format!(
                    "a filter this long ({halo} rows) needs more GPU memory than the budget of \
                     {budget} elements"
                )));
            }
            chunks.push(Chunk {
                outer: o..o + 1,
                rows,
                rows_in,
            });
        }
    }
    Ok(chunks)
}

/// One pass from host memory to host memory: upload, filter, download (chunked if needed).
pub fn apply<T: Real>(input: &[T], view: AxisView, pass: &Pass, out: &mut [T]) -> Result<()> {
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive();
    let dpass = DevicePass::new(&gpu, pass)?;
    let budget = gpu.budget()? / std::mem::size_of::<T>();
    let chunks = plan(view, &dpass, budget)?;
    let longest = |f: fn(&Chunk) -> usize| chunks.iter().map(f).max().unwrap_or(0);
    let in_len = longest(|c| c.outer.len() * c.rows_in.len()) * view.inner;
    let out_len = longest(|c| c.outer.len() * c.rows.len()) * view.inner;
    let mut timeline = Timeline::start(&gpu)?;
    // SAFETY: each chunk's input is uploaded before the kernel reads it, and only the rows the
    // kernel wrote are downloaded.
    let mut d_in = unsafe { gpu.alloc::<T>(in_len)? };
    let mut d_out = unsafe { gpu.alloc::<T>(out_len)? };
    let slab = view.n * view.inner;
    for c in &chunks {
        let at = |o: usize, r: usize| o * slab + r * view.inner;
        let src = &input[at(c.outer.start, c.rows_in.start)..at(c.outer.end - 1, c.rows_in.end)];
        gpu.upload_into(src, &mut d_in)?;
        timeline.mark(&gpu, "h2d")?;
        launch(&gpu, &d_in, view, c, &dpass, &mut d_out)?;
        timeline.mark(&gpu, "kernel")?;
        let dst = &mut out[at(c.outer.start, c.rows.start)..at(c.outer.end - 1, c.rows.end)];
        gpu.download(&d_out, dst)?;
        timeline.mark(&gpu, "d2h")?;
    }
    timeline.finish()?;
    gpu.sync()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cube::filters::{Filter1d, Mode};

    #[test]
    fn input_rows_cover_every_tap() {
        for mode in [
            Mode::Constant,
            Mode::Nearest,
            Mode::Reflect,
            Mode::Mirror,
            Mode::Wrap,
        ] {
            for (taps, n) in [(5usize, 40usize), (41, 30), (3, 7), (9, 1)] {
                let f = Filter1d::correlate(&vec![1.0; taps], 1).unwrap();
                let (lo, hi) = f.span();
                for a in (0..n).step_by(4) {
                    let rows = a..(a + 4).min(n);
                    let r = input_rows(&rows, n, f.span(), mode);
                    for i in rows.clone() {
                        for p in i as isize + lo..=i as isize + hi {
                            if let Some(q) = extend_index(p, n, mode) {
                                assert!(r.contains(&q), "{mode:?} n={n} rows={rows:?} q={q}");
                            }
                        }
                    }
                }
            }
        }
    }
}
