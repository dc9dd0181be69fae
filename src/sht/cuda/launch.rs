//! The kernel launches of the CUDA SHT, one function per kernel of `kernels/sht.cu`: the full
//! transform (`stages`) and the SHT halves (`halves`) queue the same launches, the full
//! transform on ring pairs and all m, the halves on any m list and any ring list.

use super::setup::{blocks, cfg, Group};
use super::{MODULE, TPB_LEG, TPB_MISC};
use crate::backend::cuda::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, Gpu, LaunchArgs, PushKernelArg,
};
use crate::error::{Error, Result};

/// What the Legendre kernels read besides the alm and the phase buffer.
pub(super) struct LegTabs<'a> {
    pub lmax: usize,
    pub norms: &'a CudaSlice<f64>,
    pub lnfact: &'a CudaSlice<f64>,
    /// The m of each phase column and the offset of its a_{m m} in the alm arrays.
    pub mlist: &'a CudaSlice<i64>,
    pub moff: &'a CudaSlice<i64>,
    /// Phase columns (entries of mlist and moff used).
    pub ncol: usize,
    /// cos θ and sin θ of each ring pair (the kernels read pair p0 + i).
    pub pair_x: &'a CudaSlice<f64>,
    pub pair_s: &'a CudaSlice<f64>,
}

/// What the ring kernels read: per ring (direct = false: indexed by ring, rows from the pair
/// layout) or per row (direct = true: row p0 + i of the call).
pub(super) struct RingTabs<'a> {
    pub nside: usize,
    pub nphi: &'a CudaSlice<i64>,
    pub shift: &'a CudaSlice<i32>,
    pub first: &'a CudaSlice<i64>,
    pub w: &'a CudaSlice<f64>,
    pub direct: bool,
}

impl RingTabs<'_> {
    /// Rows of a chunk of `n` pairs (pair layout) or `n` rows (direct).
    pub fn nrow(&self, n: usize) -> usize {
        if self.direct {
            n
        } else {
            2 * n
        }
    }
}

fn grid_y(n: usize, what: &str) -> Result<u32> {
    if n == 0 || n > 65535 {
        return Err(Error::Internal(format!(
            "CUDA SHT: {n} {what} in one launch (1..=65535 allowed)"
        )));
    }
    Ok(n as u32)
}

/// The arguments SYNTH_ENTRY and ANAL_ENTRY share after their arrays (kernels/sht.cu).
struct LegScalars {
    lmax: i64,
    mmax_unused: i64,
    p0: i64,
    np: i64,
}

impl LegScalars {
    fn new(t: &LegTabs, p0: usize, np: usize) -> Self {
        LegScalars {
            lmax: t.lmax as i64,
            mmax_unused: 0,
            p0: p0 as i64,
            np: np as i64,
        }
    }
    /// Push lmax, mmax, the tables and p0, np (in SYNTH_ENTRY / ANAL_ENTRY's order).
    fn push<'a>(&'a self, b: &mut LaunchArgs<'a>, t: &'a LegTabs) {
        b.arg(&self.lmax)
            .arg(&self.mmax_unused)
            .arg(t.norms)
            .arg(t.lnfact)
            .arg(t.mlist)
            .arg(t.moff)
            .arg(t.pair_x)
            .arg(t.pair_s)
            .arg(&self.p0)
            .arg(&self.np);
    }
}

/// `leg_synth_*` on `stream` (a stream of `gpu`): alm of the columns' m -> phase rows of pairs
/// p0..p0+np (phase[c][2·np rows][ncol] complex).
#[allow(clippy::too_many_arguments)]
pub(super) fn leg_synth(
    gpu: &Gpu,
    stream: &CudaStream,
    grp: &Group,
    a: [&CudaSlice<f64>; 3],
    t: &LegTabs,
    p0: usize,
    np: usize,
    phase: &mut CudaViewMut<f64>,
) -> Result<()> {
    let sc = LegScalars::new(t, p0, np);
    let f = gpu.function(MODULE, grp.synth_kernel())?;
    let mut b = stream.launch_builder(&f);
    b.arg(a[0]).arg(a[1]).arg(a[2]);
    sc.push(&mut b, t);
    b.arg(phase);
    let grid = (
        blocks(np, TPB_LEG * grp.synth_rings()),
        grid_y(t.ncol, "m columns")?,
        1,
    );
    // SAFETY: the argument list matches SYNTH_ENTRY in kernels/sht.cu; mlist and moff hold ncol
    // entries, the pair tables p0 + np, phase one plane of 2·np rows × ncol complex per
    // component of the group, and each alm array every a_lm of the listed m.
    unsafe { b.launch(cfg(grid, TPB_LEG)) }?;
    Ok(())
}

/// `leg_anal_*` on `stream` (a stream of `gpu`): phase rows of pairs p0..p0+np -> added into
/// the alm of the columns' m. `outs`: the group's alm arrays (1 to 3), `spare`: stand-ins for
/// missing ones.
#[allow(clippy::too_many_arguments)]
pub(super) fn leg_anal(
    gpu: &Gpu,
    stream: &CudaStream,
    grp: &Group,
    phase: &CudaView<f64>,
    outs: Vec<&mut CudaSlice<f64>>,
    spare: (&mut CudaSlice<f64>, &mut CudaSlice<f64>),
    t: &LegTabs,
    p0: usize,
    np: usize,
) -> Result<()> {
    if t.ncol == 0 || t.ncol > i32::MAX as usize {
        return Err(Error::Internal("leg_anal: bad column count".into()));
    }
    let sc = LegScalars::new(t, p0, np);
    let mut it = outs.into_iter();
    let a0 = it
        .next()
        .ok_or_else(|| Error::Internal("leg_anal without an output".into()))?;
    let a1 = it.next().unwrap_or(spare.0);
    let a2 = it.next().unwrap_or(spare.1);
    let f = gpu.function(MODULE, grp.anal_kernel())?;
    let mut b = stream.launch_builder(&f);
    b.arg(phase).arg(a0).arg(a1).arg(a2);
    sc.push(&mut b, t);
    // SAFETY: matches ANAL_ENTRY; one block per column adds into its own alm column.
    unsafe { b.launch(cfg((t.ncol as u32, 1, 1), TPB_LEG)) }?;
    Ok(())
}

/// `fold`: phase rows (m = 0..=mmax) -> half spectra, `nc` components.
#[allow(clippy::too_many_arguments)]
pub(super) fn fold(
    gpu: &Gpu,
    phase: &CudaSlice<f64>,
    spec: &mut CudaSlice<f64>,
    mmax: usize,
    r: &RingTabs,
    p0: usize,
    n: usize,
    nc: usize,
) -> Result<()> {
    let (mmax, ns, p0i, ni, direct) = (
        mmax as i64,
        r.nside as i64,
        p0 as i64,
        n as i64,
        r.direct as i64,
    );
    let h = 2 * r.nside + 1;
    let f = gpu.function(MODULE, "fold")?;
    let mut b = gpu.stream.launch_builder(&f);
    b.arg(phase)
        .arg(spec)
        .arg(&mmax)
        .arg(&ns)
        .arg(&p0i)
        .arg(&ni)
        .arg(r.nphi)
        .arg(r.shift)
        .arg(&direct);
    let grid = (blocks(h, TPB_MISC), grid_y(r.nrow(n), "rows")?, nc as u32);
    // SAFETY: matches `fold`; spec holds nrow × nc × H complex, phase nc × nrow × (mmax+1).
    unsafe { b.launch(cfg(grid, TPB_MISC)) }?;
    Ok(())
}

/// `unfold`: half spectra -> weighted phase rows (m = 0..=mmax), `nc` components.
#[allow(clippy::too_many_arguments)]
pub(super) fn unfold(
    gpu: &Gpu,
    spec: &CudaSlice<f64>,
    phase: &mut CudaSlice<f64>,
    mmax: usize,
    r: &RingTabs,
    p0: usize,
    n: usize,
    nc: usize,
) -> Result<()> {
    let (mmaxi, ns, p0i, ni, direct) = (
        mmax as i64,
        r.nside as i64,
        p0 as i64,
        n as i64,
        r.direct as i64,
    );
    let f = gpu.function(MODULE, "unfold")?;
    let mut b = gpu.stream.launch_builder(&f);
    b.arg(spec)
        .arg(phase)
        .arg(&mmaxi)
        .arg(&ns)
        .arg(&p0i)
        .arg(&ni)
        .arg(r.nphi)
        .arg(r.shift)
        .arg(r.w)
        .arg(&direct);
    let grid = (
        blocks(mmax + 1, TPB_MISC),
        grid_y(r.nrow(n), "rows")?,
        nc as u32,
    );
    // SAFETY: matches `unfold`.
    unsafe { b.launch(cfg(grid, TPB_MISC)) }?;
    Ok(())
}

/// `scatter` (rows -> pixels) or `gather` (pixels -> rows) of up to three components.
#[allow(clippy::too_many_arguments)]
fn ring_pixels(
    gpu: &Gpu,
    name: &str,
    rows: &mut CudaSlice<f64>,
    maps: Vec<&mut CudaSlice<f64>>,
    spare: (&mut CudaSlice<f64>, &mut CudaSlice<f64>),
    r: &RingTabs,
    p0: usize,
    n: usize,
) -> Result<()> {
    let nc = maps.len();
    let (ns, p0i, ni, direct) = (r.nside as i64, p0 as i64, n as i64, r.direct as i64);
    let mut it = maps.into_iter();
    let m0 = it
        .next()
        .ok_or_else(|| Error::Internal("scatter/gather without a map".into()))?;
    let m1 = it.next().unwrap_or(spare.0);
    let m2 = it.next().unwrap_or(spare.1);
    let f = gpu.function(MODULE, name)?;
    let mut b = gpu.stream.launch_builder(&f);
    if name == "scatter" {
        b.arg(&*rows).arg(m0).arg(m1).arg(m2);
    } else {
        b.arg(&*m0).arg(&*m1).arg(&*m2).arg(rows);
    }
    b.arg(&ns)
        .arg(&p0i)
        .arg(&ni)
        .arg(r.nphi)
        .arg(r.first)
        .arg(&direct);
    let grid = (
        blocks(4 * r.nside, TPB_MISC),
        grid_y(r.nrow(n), "rows")?,
        nc as u32,
    );
    // SAFETY: matches `scatter`/`gather`; each row's pixels lie inside its map buffer (first
    // + nphi ≤ len), rows holds nrow × nc × 4·nside values.
    unsafe { b.launch(cfg(grid, TPB_MISC)) }?;
    Ok(())
}

/// `scatter`: rows -> map pixels.
pub(super) fn scatter(
    gpu: &Gpu,
    rows: &mut CudaSlice<f64>,
    maps: Vec<&mut CudaSlice<f64>>,
    spare: (&mut CudaSlice<f64>, &mut CudaSlice<f64>),
    r: &RingTabs,
    p0: usize,
    n: usize,
) -> Result<()> {
    ring_pixels(gpu, "scatter", rows, maps, spare, r, p0, n)
}

/// `gather`: map pixels -> rows (zero-padded to 4·nside).
pub(super) fn gather(
    gpu: &Gpu,
    maps: Vec<&mut CudaSlice<f64>>,
    spare: (&mut CudaSlice<f64>, &mut CudaSlice<f64>),
    rows: &mut CudaSlice<f64>,
    r: &RingTabs,
    p0: usize,
    n: usize,
) -> Result<()> {
    ring_pixels(gpu, "gather", rows, maps, spare, r, p0, n)
}

/// `clean_inplace_f64` on `stream`: healpy's UNSEEN pixels of `m` set to 0 (the values the CPU
/// engine's `clean_map` gives), so that maps can go up as they are.
pub(super) fn clean_f64(gpu: &Gpu, stream: &CudaStream, m: &mut CudaViewMut<f64>) -> Result<()> {
    let n = m.len();
    if n == 0 {
        return Ok(());
    }
    let ni = n as i64;
    let f = gpu.function(MODULE, "clean_inplace_f64")?;
    let mut b = stream.launch_builder(&f);
    b.arg(m).arg(&ni);
    // SAFETY: matches `clean_inplace_f64`; the view holds n values.
    unsafe { b.launch(crate::backend::cuda::grid_stride(n, 65535 * 16)) }?;
    Ok(())
}
