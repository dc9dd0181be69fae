//! CUDA engine for the 1-D filters (`kernels/filters.cu`). Arrays larger than the GPU's memory
//! budget are filtered in chunks: whole outer slabs when they fit, else runs of rows along the
//! filtered axis with the halo their taps read.

use std::ops::Range;

use super::{extend_index, AxisView, Mode, Pass};
use crate::backend::cuda::pace;
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::{
    self, CudaFunction, CudaSlice, Gpu, LaunchArgs, LaunchConfig, PushKernelArg, Variant,
};
use crate::error::{Error, Result};
use crate::real::Real;

/// The `filters` module holds one element type a compile (a call compiles the half it uses):
/// float32, and float64 as the variant FILTERS_F64 (kernels/filters.cu).
fn type_defines<T: Real>() -> Vec<String> {
    if T::CUDA == f64::CUDA {
        vec!["FILTERS_F64=1".to_string()]
    } else {
        Vec::new()
    }
}

/// Kernel `name` of element type T.
fn kernel<T: Real>(gpu: &Gpu, name: &str) -> Result<CudaFunction> {
    gpu.function_with("filters", &type_defines::<T>(), name)
}

/// The float64 variant: what `compile_all` compiles and `skyconv.warmup` loads with the module.
pub fn kernel_variants() -> Vec<Variant> {
    vec![Variant {
        module: "filters",
        label: "float64",
        defines: type_defines::<f64>(),
    }]
}

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
    /// Shared memory a whole-axis tile may take on this GPU (`Gpu::shared_four`).
    shared: usize,
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
            shared: gpu.shared_four,
        })
    }
}

impl DevicePass {
    /// The halo rows the whole-axis kernels stage for this pass over `view` (`halo_of`).
    fn halo<T: Real>(&self, view: AxisView) -> Option<usize> {
        halo_of::<T>(view, self.span, self.host_mode, self.cval)
    }

    /// Push the filter's arguments, in the order every kernel of kernels/filters.cu takes them
    /// (after the chunk's geometry): weights, taps, offset, step, scale, mode, cval.
    fn push<'a>(&'a self, l: &mut LaunchArgs<'a>) {
        l.arg(&self.weights)
            .arg(&self.taps)
            .arg(&self.offset)
            .arg(&self.step)
            .arg(&self.scale)
            .arg(&self.mode)
            .arg(&self.cval);
    }
}

/// One launch over a chunk: `outer` slabs, output rows `rows` of the axis, input rows
/// `rows_in`, and columns `cols` of the inner dimension.
#[derive(Debug, Clone)]
struct Chunk {
    outer: Range<usize>,
    rows: Range<usize>,
    rows_in: Range<usize>,
    cols: Range<usize>,
}

impl Chunk {
    /// The whole view in one chunk.
    fn whole(view: AxisView) -> Chunk {
        Chunk {
            outer: 0..view.outer,
            rows: 0..view.n,
            rows_in: 0..view.n,
            cols: 0..view.inner,
        }
    }

    fn full_width(&self, inner: usize) -> bool {
        self.cols.len() == inner
    }
}

/// Queue one pass from `input` to `out`, both already on the device and covering the view.
pub fn apply_device<T: Real>(
    gpu: &Gpu,
    input: &CudaSlice<T>,
    view: AxisView,
    pass: &DevicePass,
    out: &mut CudaSlice<T>,
) -> Result<()> {
    launch(gpu, input, view, &Chunk::whole(view), pass, out)
}

/// The à trous split fused into a pass's stores (`StoreSplit` in kernels/filters.cu): the pass
/// writes the wavelet plane `out = c − smoothed` and updates `c` to `c − out`, in place; voxels
/// where `data` is not finite (blanks) get NaN and keep `c`. Both hold the view's elements.
pub struct Split<'a, T> {
    pub c: &'a mut CudaSlice<T>,
    pub data: &'a CudaSlice<T>,
}

/// The tile of a fused split pass over the whole view (`Tiled::phase_tiles` with `split`).
fn split_tile<T: Real>(view: AxisView, pass: &DevicePass) -> Option<Tiled> {
    let (taps, step) = (pass.taps.max(1) as usize, pass.step as usize);
    let halo = pass.halo::<T>(view);
    tile_of::<T>(
        view,
        &Chunk::whole(view),
        taps,
        step,
        halo,
        pass.shared,
        true,
    )
}

/// Whether `apply_device_split` can run this pass over the whole view (a tiled pass).
pub fn can_split<T: Real>(view: AxisView, pass: &DevicePass) -> bool {
    split_tile::<T>(view, pass).is_some()
}

/// `apply_device` with the à trous split fused into its stores (`Split`); the caller checks
/// `can_split` first. `input` must not be `split.c`: other blocks still read it.
pub fn apply_device_split<T: Real>(
    gpu: &Gpu,
    input: &CudaSlice<T>,
    view: AxisView,
    pass: &DevicePass,
    out: &mut CudaSlice<T>,
    split: &mut Split<'_, T>,
) -> Result<()> {
    let Some(tiled) = split_tile::<T>(view, pass) else {
        return Err(Error::Internal(
            "the à trous split needs a tiled pass (can_split)".into(),
        ));
    };
    if view.outer == 0 || view.n == 0 || view.inner == 0 {
        return Ok(());
    }
    launch_tiled(
        gpu,
        input,
        view,
        &Chunk::whole(view),
        pass,
        out,
        tiled,
        Some(split),
    )
}

/// A kernel's name and the shared memory its block takes (bytes).
pub type KernelTile = (String, usize);

/// The kernel a pass over a whole view runs and its shared memory in bytes, and every tile that
/// fits beside it (kernel name → bytes): for benchmarks that launch the kernels themselves, so
/// that they time what `apply_device` (`split` false) or `apply_device_split` (true) runs.
/// The pass's first tap is `offset` from its output, in a boundary mode other than constant.
/// The per-tap kernel takes no shared memory; None: the pass cannot be split (`can_split`).
/// `shared`: what a whole-axis tile may take (`Gpu::shared_four` on the GPU it plans for).
pub fn tile_plan<T: Real>(
    view: AxisView,
    taps: usize,
    step: usize,
    offset: isize,
    split: bool,
    shared: usize,
) -> Option<(KernelTile, Vec<KernelTile>)> {
    let taps = taps.max(1);
    let span = (offset, offset + ((taps - 1) * step) as isize);
    let halo = halo_of::<T>(view, span, Mode::Mirror, 0.0);
    let Some(chosen) = tile_of::<T>(view, &Chunk::whole(view), taps, step, halo, shared, split)
    else {
        // the per-tap kernel, which cannot fuse the split
        return (!split).then(|| ((per_tap_kernel::<T>(), 0), Vec::new()));
    };
    let elem = std::mem::size_of::<T>();
    let fits = Tiled::phase_tiles(view.inner, step, split)
        .into_iter()
        .chain(Tiled::whole_tiles(
            view.n,
            view.inner,
            elem,
            halo.unwrap_or(0),
        ))
        .filter(|t| t.shared_bytes(taps, step) <= t.shared_limit(shared))
        .map(|t| (t.kernel::<T>(split), t.shared_bytes(taps, step)))
        .collect();
    Some((
        (chosen.kernel::<T>(split), chosen.shared_bytes(taps, step)),
        fits,
    ))
}

/// Tap-reads (elements × taps) in the first piece of a paced launch: ~40 ms at the slowest
/// rate seen on an H200 (wide reflected filters, ~1.6e9/s); later pieces adapt to
/// `pace::TARGET_MS`.
const FIRST_PIECE_TAPS: usize = 1 << 26;
/// The same for the tiled kernels, which read taps from shared memory: ~40 ms at 1e11 tap-reads
/// a second, ten times under the slowest tiled pass measured on an H100 (à trous's z pass at
/// step 32, 3e11/s), so a cube's pass is one launch and needs no timed wait (a wait per pass
/// left the GPU idle between the passes of an à trous scale).
const FIRST_PIECE_TILED_TAPS: usize = 1 << 32;

/// Filters of at most this many taps take the whole-axis tiles when they fit. Those read each
/// input once but each output's taps from shared memory, where the phase tiles share the taps of
/// a thread's r outputs. Since the whole-axis kernels' rework (sessions 28–30) they are as fast
/// or faster up to 21 taps and slower from 41, along x and y alike (H200, 128×512² and
/// 32×256×2048 float32, step 1: at 21 taps x 0.299 / 0.155 ms against the windows' 0.402 /
/// 0.154, y 0.190 / 0.101 against 0.199 / 0.113; at 41 y 0.316 against 0.264; session 30 call 8).
const WHOLE_MAX_TAPS: usize = 21;

/// Rows past the two ends of an axis that a pass's taps read (`span`: its first and last tap's
/// offsets from the output), which the whole-axis kernel along an inner axis stages beside the
/// axis; None when it cannot: a constant mode whose cval T does not hold exactly (staged as T,
/// it would round).
fn halo_rows<T: Real>(span: (isize, isize), mode: Mode, cval: f64) -> Option<usize> {
    let exact = T::from_f64(cval).to_f64() == cval || cval.is_nan();
    (mode != Mode::Constant || exact).then(|| (-span.0).max(0) as usize + span.1.max(0) as usize)
}

/// The halo rows the whole-axis kernels stage for a pass over `view` (`halo_rows`): as T along
/// an inner axis, as double along the last one (its lines are staged as double), where any cval
/// is exact.
fn halo_of<T: Real>(view: AxisView, span: (isize, isize), mode: Mode, cval: f64) -> Option<usize> {
    if view.inner == 1 {
        halo_rows::<f64>(span, mode, cval)
    } else {
        halo_rows::<T>(span, mode, cval)
    }
}

/// The tile for a pass over `chunk`: the whole axis when the chunk covers it and its columns,
/// the filter is short or the phase tiles would hold at most 2 outputs a thread (wide steps),
/// and it fits with its halo (`halo_rows`; None: no whole-axis tile along an inner axis); else
/// a tile of `Tiled::plan`, or None for the per-tap kernel.
fn tile_of<T: Real>(
    view: AxisView,
    chunk: &Chunk,
    taps: usize,
    step: usize,
    halo: Option<usize>,
    shared: usize,
    split: bool,
) -> Option<Tiled> {
    let (n_out, width) = (chunk.rows.len(), chunk.cols.len());
    let phase = Tiled::plan(chunk.outer.len(), n_out, width, taps, step, split);
    let whole_axis =
        chunk.rows == (0..view.n) && chunk.rows_in == chunk.rows && chunk.full_width(view.inner);
    let short = taps <= WHOLE_MAX_TAPS || matches!(phase, Some(Tiled::Cols { r }) if r <= 2);
    whole_axis
        .then_some(short)
        .filter(|&s| s)
        .and_then(|_| Tiled::whole(n_out, width, taps, std::mem::size_of::<T>(), halo, shared))
        .or(phase)
}

/// Queue the chunk's filtering, cut into launches of bounded time (`pace::run`) along the
/// slow dimension (lines), or along the fast one when there is a single line.
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
    let width = chunk.cols.len();
    if outer == 0 || n_out == 0 || width == 0 {
        return Ok(());
    }
    let (fdim, sdim) = if width == 1 {
        (n_out, outer)
    } else {
        (width, outer * n_out)
    };
    let taps = pass.taps.max(1) as usize;
    let halo = pass.halo::<T>(view);
    let step = pass.step as usize;
    if let Some(tiled) = tile_of::<T>(view, chunk, taps, step, halo, pass.shared, false) {
        return launch_tiled(gpu, input, view, chunk, pass, out, tiled, None);
    }
    let func = kernel::<T>(gpu, &per_tap_kernel::<T>())?;
    if sdim > 1 {
        let first = (FIRST_PIECE_TAPS / (fdim * taps).max(1)).max(1);
        pace::run(gpu, sdim, first, |s| {
            launch_piece(&func, gpu, input, view, chunk, pass, out, s, 0..fdim)
        })
    } else {
        let first = (FIRST_PIECE_TAPS / taps).max(THREADS as usize);
        pace::run(gpu, fdim, first, |f| {
            launch_piece(&func, gpu, input, view, chunk, pass, out, 0..1, f)
        })
    }
}

/// The per-tap kernel (`correlate_*`), which runs where no tile fits.
fn per_tap_kernel<T: Real>() -> String {
    format!("correlate_{}", T::CUDA)
}

/// One launch of the per-tap kernel `func`: lines `s` of the slow dimension, elements `f` of
/// the fast one.
#[allow(clippy::too_many_arguments)]
fn launch_piece<T: Real>(
    func: &CudaFunction,
    gpu: &Gpu,
    input: &CudaSlice<T>,
    view: AxisView,
    chunk: &Chunk,
    pass: &DevicePass,
    out: &mut CudaSlice<T>,
    s: Range<usize>,
    f: Range<usize>,
) -> Result<()> {
    let cfg = LaunchConfig {
        grid_dim: (
            f.len().div_ceil(THREADS as usize) as u32,
            s.len().min(MAX_GRID_Y) as u32,
            1,
        ),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let (outer, n_out, inner) = (
        chunk.outer.len() as i64,
        chunk.rows.len() as i64,
        chunk.cols.len() as i64,
    );
    let n_in = chunk.rows_in.len() as i64;
    let (out_row0, in_row0) = (chunk.rows.start as i64, chunk.rows_in.start as i64);
    let n_global = view.n as i64;
    let (s0, s1, f0, f1) = (s.start as i64, s.end as i64, f.start as i64, f.end as i64);
    let mut l = gpu.stream.launch_builder(func);
    l.arg(input)
        .arg(out)
        .arg(&outer)
        .arg(&n_out)
        .arg(&inner)
        .arg(&n_in)
        .arg(&out_row0)
        .arg(&in_row0)
        .arg(&n_global);
    pass.push(&mut l);
    l.arg(&s0).arg(&s1).arg(&f0).arg(&f1);
    // SAFETY: argument types and order match `correlate_*` in kernels/filters.cu; the buffers
    // hold the chunk's input rows (with halo) and output rows; `s` and `f` lie inside the
    // chunk's lines and fast dimension.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// Shared memory a block may take without opting in to more (bytes).
const TILE_SHARED: usize = cuda::SHARED_DEFAULT;

/// A tiled pass (`correlate_cols*` / `correlate_line*` in kernels/filters.cu): each thread
/// computes `r` outputs that share taps from inputs its block staged in shared memory, instead of
/// one global load per tap and output (4-8x the HBM floor per pass, issue 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tiled {
    /// Along an inner axis: 32 columns × 8·r outputs of one phase (rows ≡ p mod step) a block.
    Cols { r: usize },
    /// Along the last axis: a window of 256·r outputs of one line a block.
    Line { r: usize },
    /// Along an inner axis, whole: `c` columns of its `rows` (the axis and its halo) staged in
    /// shared memory a block (`elem` bytes a value), each input read once.
    Whole { c: usize, rows: usize, elem: usize },
    /// Along the last axis, whole lines: `l` of them staged a block as double, `n` values a
    /// line (the line, its halo, and 2 for 16-byte aligned lines).
    Lines { l: usize, n: usize },
}

impl Tiled {
    /// The phase tile for `outer` slabs of `n_out` outputs along the axis and `width` columns
    /// (`split`: the fused à trous split): the first of `phase_tiles` with at most the outputs
    /// a thread that the work fills, or None when none fits in shared memory (very long
    /// filters) or the kernels' 32-bit tile arithmetic would overflow: then the per-tap kernel
    /// runs.
    fn plan(
        outer: usize,
        n_out: usize,
        width: usize,
        taps: usize,
        step: usize,
        split: bool,
    ) -> Option<Tiled> {
        if n_out + step >= 1 << 31 || (width > 1 && outer * step >= 1 << 31) {
            return None;
        }
        // Along the last axis, lines long enough that a window is mostly busy (measured on an
        // H200: 512 values run best at r = 3, session 17); along an inner one 8·r rows a tile,
        // as many as one phase's rows fill.
        let want = if width == 1 {
            match n_out {
                n if n >= 1280 => 5,
                n if n >= 512 => 3,
                _ => 1,
            }
        } else {
            match n_out.div_ceil(step) {
                n if n >= 64 => 8,
                n if n >= 32 => 4,
                n if n >= 16 => 2,
                _ => 1,
            }
        };
        Tiled::phase_tiles(width, step, split)
            .into_iter()
            .filter(|t| matches!(t, Tiled::Line { r } | Tiled::Cols { r } if *r <= want))
            .find(|t| t.shared_bytes(taps, step) <= TILE_SHARED)
    }

    /// The phase tiles a pass may take, most outputs a thread first. Along the last axis r =
    /// 5, 3 or 1 outputs a thread (r odd: a warp reads shared memory without bank conflicts;
    /// r > 1 needs step | 256, so that a thread's r outputs are one phase's); along an inner
    /// axis r = 8, 4, 2 or 1, at most 4 with the fused split (`split`), whose threads keep
    /// their data and plane values through the sums (8 took 110 registers and ran slower than
    /// the split apart, session 19 call 2).
    fn phase_tiles(width: usize, step: usize, split: bool) -> Vec<Tiled> {
        if width == 1 {
            [5, 3, 1]
                .into_iter()
                .filter(|&r| r == 1 || 256 % step == 0)
                .map(|r| Tiled::Line { r })
                .collect()
        } else {
            [8, 4, 2, 1]
                .into_iter()
                .filter(|&r| !split || r <= 4)
                .map(|r| Tiled::Cols { r })
                .collect()
        }
    }

    /// The whole-axis tile for a chunk that covers the view's axis and columns (`n` rows,
    /// `width` columns, values of `elem` bytes, `halo` rows past the axis's ends): the first of
    /// `whole_tiles` whose staged values fit in shared memory (`shared_limit`); None when none
    /// does, without a halo, or with `SKYCONV_FILTER_WHOLE=0` (for comparisons).
    fn whole(
        n: usize,
        width: usize,
        taps: usize,
        elem: usize,
        halo: Option<usize>,
        shared: usize,
    ) -> Option<Tiled> {
        let off = matches!(
            crate::backend::env::switch_var("SKYCONV_FILTER_WHOLE"),
            Ok(Some(false))
        );
        let halo = halo.filter(|h| !off && n + h + 2 < 1 << 31)?;
        Tiled::whole_tiles(n, width, elem, halo)
            .into_iter()
            .find(|t| t.shared_bytes(taps, 1) <= t.shared_limit(shared))
    }

    /// The shared memory this tile may take where a whole-axis tile may take `shared`
    /// (`Gpu::shared_four`): the columns of an inner axis up to it, opting in past 48 KB, since
    /// the widest tile with four blocks an SM ran fastest (à trous z at step 32 on an H200: 32
    /// columns in 48 KB 185 µs, 16 in 24 KB 197; y with 32 columns in 68–80 KB, two blocks an
    /// SM, lost to 16: session 30); the other tiles within 48 KB (not measured past it).
    fn shared_limit(self, shared: usize) -> usize {
        match self {
            Tiled::Whole { .. } => shared.max(TILE_SHARED),
            _ => TILE_SHARED,
        }
    }

    /// The whole-axis tiles, most work a block first: along an inner axis 32, 16 or 8 columns
    /// (at most `width`) of the axis and its halo as T; along the last one 8, 2 or 1 lines and
    /// their halo as double (each value converted once, not once a tap).
    fn whole_tiles(n: usize, width: usize, elem: usize, halo: usize) -> Vec<Tiled> {
        let rows = n + halo;
        if width == 1 {
            return [8, 2, 1].map(|l| Tiled::Lines { l, n: rows + 2 }).to_vec();
        }
        [32, 16, 8]
            .into_iter()
            .filter(|&c| c <= width)
            .map(|c| Tiled::Whole { c, rows, elem })
            .collect()
    }

    /// The kernel's name (kernels/filters.cu): `split` for the fused à trous split.
    fn kernel<T: Real>(self, split: bool) -> String {
        let fused = if split { "_split" } else { "" };
        let ty = T::CUDA;
        match self {
            Tiled::Cols { r } => format!("correlate_cols{r}{fused}_{ty}"),
            Tiled::Line { r } => format!("correlate_line{r}{fused}_{ty}"),
            Tiled::Whole { c, .. } => format!("correlate_whole{c}{fused}_{ty}"),
            Tiled::Lines { l, .. } => format!("correlate_lines{l}{fused}_{ty}"),
        }
    }

    fn shared_bytes(self, taps: usize, step: usize) -> usize {
        let weights = 8 * taps.div_ceil(2) * 2;
        weights
            + match self {
                Tiled::Cols { r } => 8 * (8 * r + taps - 1) * 32,
                Tiled::Line { r } => 8 * (256 * r + (taps - 1) * step),
                Tiled::Whole { c, rows, elem } => rows * c * elem,
                Tiled::Lines { l, n } => n * l * 8,
            }
    }

    /// (units, tiles a unit): the launch's two levels of work. Cols: units are the (slab,
    /// phase) pairs, tiles the 8·r-row tiles of a phase; Line: units are lines, tiles windows.
    fn work(self, outer: usize, n_out: usize, width: usize, step: usize) -> (usize, usize) {
        match self {
            Tiled::Cols { r } => (outer * step, n_out.div_ceil(step).div_ceil(8 * r)),
            Tiled::Line { r } => (outer, n_out.div_ceil(256 * r)),
            Tiled::Whole { c, .. } => (outer * width.div_ceil(c), 1),
            Tiled::Lines { l, .. } => (outer.div_ceil(l), 1),
        }
    }
}

/// Queue a tiled pass over the chunk, cut into launches of bounded time (`pace::run`) along its
/// units, or along the tiles of its single unit; `split` fuses the à trous split (whole view).
#[allow(clippy::too_many_arguments)]
fn launch_tiled<T: Real>(
    gpu: &Gpu,
    input: &CudaSlice<T>,
    view: AxisView,
    chunk: &Chunk,
    pass: &DevicePass,
    out: &mut CudaSlice<T>,
    tiled: Tiled,
    mut split: Option<&mut Split<'_, T>>,
) -> Result<()> {
    let (n_out, width) = (chunk.rows.len(), chunk.cols.len());
    let taps = pass.taps.max(1) as usize;
    let (units, tiles) = tiled.work(chunk.outer.len(), n_out, width, pass.step as usize);
    let func = kernel::<T>(gpu, &tiled.kernel::<T>(split.is_some()))?;
    cuda::allow_shared(&func, tiled.shared_bytes(taps, pass.step as usize))?;
    // Cut along the units when there are several, else along the single unit's tiles.
    let (count, per_piece) = if units > 1 {
        (units, (chunk.outer.len() * n_out * width).div_ceil(units))
    } else {
        (tiles, (n_out * width).div_ceil(tiles))
    };
    let first = (FIRST_PIECE_TILED_TAPS / (per_piece.max(1) * taps)).max(1);
    pace::run(gpu, count, first, |r| {
        let (u, t) = if units > 1 { (r, 0..tiles) } else { (0..1, r) };
        let split = split.as_deref_mut();
        launch_tiles(
            &func, gpu, input, view, chunk, pass, out, tiled, split, u, t,
        )
    })
}

/// One launch of the tiled kernel `func` (`Tiled::kernel`): units `u` and tiles `t` of each.
#[allow(clippy::too_many_arguments)]
fn launch_tiles<T: Real>(
    func: &CudaFunction,
    gpu: &Gpu,
    input: &CudaSlice<T>,
    view: AxisView,
    chunk: &Chunk,
    pass: &DevicePass,
    out: &mut CudaSlice<T>,
    tiled: Tiled,
    split: Option<&mut Split<'_, T>>,
    u: Range<usize>,
    t: Range<usize>,
) -> Result<()> {
    let taps = pass.taps.max(1) as usize;
    let step = pass.step as usize;
    let width = chunk.cols.len();
    let grid = |n: usize, max: usize| n.clamp(1, max) as u32;
    let (grid_dim, block_dim) = match tiled {
        Tiled::Cols { .. } => (
            (
                width.div_ceil(32) as u32,
                grid(t.len(), MAX_GRID_Y),
                grid(u.len(), MAX_GRID_Y),
            ),
            (32, 8, 1),
        ),
        Tiled::Line { .. } => (
            (
                grid(t.len(), i32::MAX as usize),
                grid(u.len(), MAX_GRID_Y),
                1,
            ),
            (THREADS, 1, 1),
        ),
        Tiled::Whole { .. } | Tiled::Lines { .. } => {
            ((grid(u.len(), i32::MAX as usize), 1, 1), (THREADS, 1, 1))
        }
    };
    let cfg = LaunchConfig {
        grid_dim,
        block_dim,
        shared_mem_bytes: tiled.shared_bytes(taps, step) as u32,
    };
    let (n_out, inner, n_in) = (
        chunk.rows.len() as i64,
        width as i64,
        chunk.rows_in.len() as i64,
    );
    let (out_row0, in_row0) = (chunk.rows.start as i64, chunk.rows_in.start as i64);
    let n_global = view.n as i64;
    let (u0, u1, t0, t1) = (u.start as i64, u.end as i64, t.start as i64, t.end as i64);
    let lines = chunk.outer.len() as i64;
    let mut l = gpu.stream.launch_builder(func);
    l.arg(input).arg(out);
    if let Tiled::Whole { .. } | Tiled::Lines { .. } = tiled {
        // the chunk is the whole axis and all its columns (`tile_of`)
        if let Tiled::Lines { .. } = tiled {
            l.arg(&lines).arg(&n_out);
        } else {
            l.arg(&n_out).arg(&inner);
        }
        pass.push(&mut l);
        l.arg(&u0).arg(&u1);
    } else {
        l.arg(&n_out);
        if let Tiled::Cols { .. } = tiled {
            l.arg(&inner);
        }
        l.arg(&n_in).arg(&out_row0).arg(&in_row0).arg(&n_global);
        pass.push(&mut l);
        l.arg(&u0).arg(&u1).arg(&t0).arg(&t1);
    }
    if let Some(split) = split {
        l.arg(&mut *split.c).arg(split.data);
    }
    // SAFETY: argument types and order match `correlate_cols*` / `correlate_line*` /
    // `correlate_whole*` / `correlate_lines*` in kernels/filters.cu (the cols and whole kernels
    // take `inner` after `n_out`, the lines ones the lines before it; the whole and lines ones
    // take no row offsets and no tiles; the `_split` ones
    // take c and data last, which hold the whole view, as does the chunk then); the buffers hold
    // the chunk's input rows (with halo) and output rows; `u` and `t` lie inside the chunk's
    // units and tiles (`Tiled::work`), whose indices `Tiled::plan` keeps below 2^31; the shared
    // memory is the tile's size.
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

/// Split the view into chunks whose input + output fit in `budget` elements: whole outer slabs
/// if they fit, else runs of rows with their halo, else blocks of columns of such runs.
fn plan(view: AxisView, span: (isize, isize), mode: Mode, budget: usize) -> Result<Vec<Chunk>> {
    let slab = view.n * view.inner;
    let all = |outer: Range<usize>| Chunk {
        outer,
        rows: 0..view.n,
        rows_in: 0..view.n,
        cols: 0..view.inner,
    };
    if 2 * slab * view.outer <= budget {
        return Ok(vec![all(0..view.outer)]);
    }
    if 2 * slab <= budget {
        let per = budget / (2 * slab);
        return Ok((0..view.outer)
            .step_by(per)
            .map(|o| all(o..(o + per).min(view.outer)))
            .collect());
    }
    let halo = (span.1 - span.0).unsigned_abs();
    // Column blocks at least this wide keep the kernel's loads coalesced.
    let min_width = view.inner.min(32);
    let (rows_fit, width) = if (budget / view.inner).saturating_sub(halo) / 2 >= 1 {
        ((budget / view.inner - halo) / 2, view.inner)
    } else if 2 * view.n + halo <= budget / min_width {
        (view.n, (budget / (2 * view.n + halo)).min(view.inner))
    } else {
        let width = (budget / (2 + halo)).clamp(1, view.inner);
        ((budget / width).saturating_sub(halo) / 2, width)
    };
    if rows_fit == 0 {
        return Err(Error::GpuMemory(format!(
            "GPU memory budget of {budget} elements is too small for one row and the filter's \
             halo of {halo} rows"
        )));
    }
    let mut chunks = Vec::new();
    for o in 0..view.outer {
        let mut a = 0;
        while a < view.n {
            // Wrapped or reflected edges may read far rows: fewer rows, narrower columns.
            let mut rows = a..(a + rows_fit).min(view.n);
            let (rows_in, w) = loop {
                let rows_in = input_rows(&rows, view.n, span, mode);
                let w = width.min(budget / (rows.len() + rows_in.len()));
                if w > 0 {
                    break (rows_in, w);
                }
                if rows.len() == 1 {
                    return Err(Error::GpuMemory(format!(
                        "GPU memory budget of {budget} elements is too small for one row and \
                         the {} rows the filter reads for it ({mode:?} edges)",
                        rows_in.len()
                    )));
                }
                rows.end = rows.start + rows.len() / 2;
            };
            for c in (0..view.inner).step_by(w) {
                chunks.push(Chunk {
                    outer: o..o + 1,
                    rows: rows.clone(),
                    rows_in: rows_in.clone(),
                    cols: c..(c + w).min(view.inner),
                });
            }
            a = rows.end;
        }
    }
    Ok(chunks)
}

/// One pass from host memory to host memory: upload, filter, download (chunked if needed).
pub fn apply<T: Real>(input: &[T], view: AxisView, pass: &Pass, out: &mut [T]) -> Result<()> {
    let gpu = cuda::gpu()?;
    let _only = gpu.exclusive()?;
    let dpass = DevicePass::new(&gpu, pass)?;
    let budget = gpu.budget()? / std::mem::size_of::<T>();
    let chunks = plan(view, dpass.span, dpass.host_mode, budget)?;
    let longest = |f: fn(&Chunk) -> usize| chunks.iter().map(f).max().unwrap_or(0);
    let in_len = longest(|c| c.outer.len() * c.rows_in.len() * c.cols.len());
    let out_len = longest(|c| c.outer.len() * c.rows.len() * c.cols.len());
    let mut timeline = Timeline::start(&gpu)?;
    // SAFETY: each chunk's input is uploaded before the kernel reads it, and only the rows the
    // kernel wrote are downloaded.
    let mut d_in = unsafe { gpu.alloc::<T>(in_len)? };
    let mut d_out = unsafe { gpu.alloc::<T>(out_len)? };
    let slab = view.n * view.inner;
    let at = |o: usize, r: usize| o * slab + r * view.inner;
    let mut host_in: Vec<T> = Vec::new();
    let mut host_out: Vec<T> = Vec::new();
    for c in &chunks {
        if c.full_width(view.inner) {
            let src =
                &input[at(c.outer.start, c.rows_in.start)..at(c.outer.end - 1, c.rows_in.end)];
            gpu.upload_into(src, &mut d_in)?;
        } else {
            // A block of columns: gather its rows into one contiguous buffer.
            host_in.clear();
            for r in c.rows_in.clone() {
                let row = at(c.outer.start, r);
                host_in.extend_from_slice(&input[row + c.cols.start..row + c.cols.end]);
            }
            gpu.upload_into(&host_in, &mut d_in)?;
        }
        timeline.mark(&gpu, "h2d")?;
        launch(&gpu, &d_in, view, c, &dpass, &mut d_out)?;
        timeline.mark(&gpu, "kernel")?;
        if c.full_width(view.inner) {
            let dst = &mut out[at(c.outer.start, c.rows.start)..at(c.outer.end - 1, c.rows.end)];
            gpu.download(&d_out, dst)?;
        } else {
            host_out.resize(c.rows.len() * c.cols.len(), T::default());
            gpu.download(&d_out, &mut host_out)?;
            for (k, r) in c.rows.clone().enumerate() {
                let row = at(c.outer.start, r);
                let w = c.cols.len();
                out[row + c.cols.start..row + c.cols.end]
                    .copy_from_slice(&host_out[k * w..(k + 1) * w]);
            }
        }
        timeline.mark(&gpu, "d2h")?;
    }
    timeline.finish()?;
    gpu.sync()
}

/// Several passes with the array resident on the device (one upload, one download). When two
/// copies of the array do not fit the memory budget, each pass runs chunked through the host.
pub fn apply_chain<T: Real>(
    input: &[T],
    shape: &[usize],
    passes: &[Pass],
    out: &mut [T],
) -> Result<()> {
    let gpu = cuda::gpu()?;
    let len = input.len();
    if 2 * len * std::mem::size_of::<T>() > gpu.budget()? {
        // Chunked pass by pass through the host.
        return super::ping_pong(input, out, passes.len(), |k, src, dst| {
            let p = &passes[k];
            apply(src, AxisView::new(shape, p.axis)?, p, dst)
        });
    }
    let _only = gpu.exclusive()?;
    let dpasses = passes
        .iter()
        .map(|p| DevicePass::new(&gpu, p))
        .collect::<Result<Vec<_>>>()?;
    let mut timeline = Timeline::start(&gpu)?;
    let mut a = gpu.upload(input)?;
    timeline.mark(&gpu, "h2d")?;
    // SAFETY: every pass writes all elements of its output before the next reads them.
    let mut b = unsafe { gpu.alloc::<T>(len)? };
    for (p, dp) in passes.iter().zip(&dpasses) {
        apply_device(&gpu, &a, AxisView::new(shape, p.axis)?, dp, &mut b)?;
        std::mem::swap(&mut a, &mut b);
    }
    timeline.mark(&gpu, "kernel")?;
    gpu.download(&a, out)?;
    timeline.mark(&gpu, "d2h")?;
    timeline.finish()?;
    gpu.sync()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cube::filters::{Filter1d, Mode};

    #[test]
    fn tiles_follow_the_rows_of_a_phase_and_fit_shared_memory() {
        use Tiled::{Cols, Line};
        assert_eq!(
            Tiled::plan(1, 512, 262_144, 5, 1, false),
            Some(Cols { r: 8 })
        );
        assert_eq!(
            Tiled::plan(256, 512, 512, 5, 32, false),
            Some(Cols { r: 2 })
        );
        assert_eq!(
            Tiled::plan(1, 256, 262_144, 5, 32, false),
            Some(Cols { r: 1 })
        );
        assert_eq!(Tiled::plan(9, 300, 1, 21, 1, false), Some(Line { r: 1 }));
        assert_eq!(Tiled::plan(9, 900, 1, 5, 32, false), Some(Line { r: 3 }));
        assert_eq!(Tiled::plan(9, 4096, 1, 5, 3, false), Some(Line { r: 1 }));
        assert_eq!(Tiled::plan(9, 4096, 1, 5, 512, false), Some(Line { r: 1 }));
        // long filters: a smaller tile, then none (the per-tap kernel)
        assert_eq!(Tiled::plan(9, 512, 64, 161, 1, false), Some(Cols { r: 2 }));
        assert_eq!(Tiled::plan(9, 512, 64, 241, 1, false), None);
        assert_eq!(Tiled::plan(9, 4000, 1, 3201, 1, false), None);
        for t in [Cols { r: 8 }, Line { r: 5 }] {
            assert!(t.shared_bytes(21, 4) <= TILE_SHARED);
        }
        assert_eq!(Tiled::plan(9, 512, 1, 5, 1, false), Some(Line { r: 3 }));
        // a window of 5 too long with its halo, of 3 not
        assert_eq!(Tiled::plan(9, 4096, 1, 20, 256, false), Some(Line { r: 3 }));
        // the fused split: at most 4 outputs a thread along an inner axis
        assert_eq!(
            Tiled::plan(1, 512, 262_144, 5, 1, true),
            Some(Cols { r: 4 })
        );
        assert_eq!(Tiled::plan(9, 4096, 1, 5, 1, true), Some(Line { r: 5 }));
        // indices past the kernels' 32-bit tile arithmetic: the per-tap kernel
        assert_eq!(Tiled::plan(1 << 30, 16, 8, 5, 4, false), None);
        assert_eq!(Tiled::plan(1, 1 << 31, 1, 5, 1, false), None);
        // (units, tiles a unit) cover every output once
        assert_eq!(Cols { r: 2 }.work(3, 100, 64, 7), (21, 1)); // 15 rows a phase: one 16-row tile
        assert_eq!(Cols { r: 8 }.work(1, 512, 64, 1), (1, 8));
        assert_eq!(Line { r: 3 }.work(2, 1000, 1, 1), (2, 2));
    }

    #[test]
    fn whole_axis_tiles_fit_shared_memory_and_cover_the_view() {
        use Tiled::{Lines, Whole};
        // à trous's cube at step 1 (halo 2 + 2 rows): z (256 rows) in 32 columns, y (512) in
        // 16, x lines 8 at a time (staged as double, with their halo and 2 for alignment)
        let (h, s) = (Some(4), TILE_SHARED);
        assert_eq!(
            Tiled::whole(256, 262_144, 5, 4, h, s),
            Some(Whole {
                c: 32,
                rows: 260,
                elem: 4
            })
        );
        assert_eq!(
            Tiled::whole(512, 512, 5, 4, h, s),
            Some(Whole {
                c: 16,
                rows: 516,
                elem: 4
            })
        );
        // at step 32 (halo 64 + 64): z in 16 columns within 48 KB, in 32 where a whole-axis
        // tile may take 56 KB (an H200's four blocks an SM), which the x lines do not take
        assert_eq!(
            Tiled::whole(256, 262_144, 5, 4, Some(128), s),
            Some(Whole {
                c: 16,
                rows: 384,
                elem: 4
            })
        );
        assert_eq!(
            Tiled::whole(256, 262_144, 5, 4, Some(128), 56 << 10),
            Some(Whole {
                c: 32,
                rows: 384,
                elem: 4
            })
        );
        assert_eq!(
            Tiled::whole(800, 1, 5, 8, Some(4), 56 << 10),
            Some(Lines { l: 2, n: 806 })
        );
        assert_eq!(
            Tiled::whole(512, 1, 5, 4, h, s),
            Some(Lines { l: 8, n: 518 })
        );
        // at step 32 the x lines' halo (128) still lets 8 fit
        assert_eq!(
            Tiled::whole(512, 1, 5, 4, Some(128), s),
            Some(Lines { l: 8, n: 642 })
        );
        assert_eq!(
            Tiled::whole(5000, 1, 5, 8, Some(4), s),
            Some(Lines { l: 1, n: 5006 })
        );
        // too long to stage, too few columns to fill a warp's run, or no halo (a constant mode
        // whose cval the type does not hold: `DevicePass::halo` gives lines one always)
        assert_eq!(Tiled::whole(2000, 64, 5, 4, h, s), None);
        assert_eq!(Tiled::whole(7000, 1, 5, 8, h, s), None);
        assert_eq!(Tiled::whole(100, 5, 5, 4, h, s), None);
        assert_eq!(Tiled::whole(100, 64, 5, 4, None, s), None);
        for t in [
            Tiled::whole(1500, 8, 7, 4, Some(6), s),
            Tiled::whole(6000, 1, 7, 8, Some(6), s),
        ] {
            assert!(t.unwrap().shared_bytes(7, 1) <= TILE_SHARED);
        }
        assert_eq!(halo_rows::<f32>((-4, 4), Mode::Mirror, 0.7), Some(8));
        assert_eq!(halo_rows::<f32>((-3, 2), Mode::Constant, 1.5), Some(5));
        assert_eq!(halo_rows::<f32>((-3, 2), Mode::Constant, 0.7), None);
        assert_eq!(halo_rows::<f64>((-3, 2), Mode::Constant, 0.7), Some(5));
        assert_eq!(halo_rows::<f32>((1, 9), Mode::Wrap, 0.0), Some(9)); // origin shifts

        // the lines stage their halo as double: any cval; an inner axis as T
        let (x, y) = (
            AxisView::new(&[4, 6, 10], 2).unwrap(),
            AxisView::new(&[4, 6, 10], 1).unwrap(),
        );
        assert_eq!(halo_of::<f32>(x, (-3, 2), Mode::Constant, 0.7), Some(5));
        assert_eq!(halo_of::<f32>(y, (-3, 2), Mode::Constant, 0.7), None);
        assert_eq!(halo_of::<f32>(y, (-3, 2), Mode::Constant, 1.5), Some(5));
        let z = Whole {
            c: 32,
            rows: 260,
            elem: 4,
        };
        assert_eq!(z.work(1, 256, 262_144, 32), (8192, 1));
        assert_eq!(Lines { l: 8, n: 518 }.work(131_073, 512, 1, 1), (16_385, 1));
    }

    #[test]
    fn plan_covers_each_output_once_within_budget() {
        let f = Filter1d::gaussian(3.0, 4.0, None).unwrap();
        for shape in [[20usize, 50, 60], [1, 5000, 1], [7, 900, 1], [3, 4, 1000]] {
            for axis in 0..3 {
                let view = AxisView::new(&shape, axis).unwrap();
                for budget in [1usize << 40, 40_000, 5_000, 375] {
                    for mode in [Mode::Reflect, Mode::Wrap, Mode::Constant, Mode::Mirror] {
                        let chunks = match plan(view, f.span(), mode, budget) {
                            Ok(c) => c,
                            Err(_) => {
                                // Only when one column of the whole axis cannot fit.
                                assert!(budget < view.n + 1, "{shape:?} {axis} {mode:?} {budget}");
                                continue;
                            }
                        };
                        let mut seen = vec![0u8; view.len()];
                        for c in &chunks {
                            let used =
                                c.outer.len() * (c.rows.len() + c.rows_in.len()) * c.cols.len();
                            assert!(used <= budget, "{shape:?} axis {axis} budget {budget}");
                            for o in c.outer.clone() {
                                for r in c.rows.clone() {
                                    for k in c.cols.clone() {
                                        seen[(o * view.n + r) * view.inner + k] += 1;
                                    }
                                }
                            }
                        }
                        assert!(
                            seen.iter().all(|&s| s == 1),
                            "{shape:?} axis {axis} {budget}"
                        );
                    }
                }
            }
        }
    }

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
