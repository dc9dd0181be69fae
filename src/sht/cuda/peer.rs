//! One SHT split over several distinct GPUs of one host with Δ kept on the devices (S2HAT's
//! scheme): GPU i holds the alm of its m block (`split::m_blocks`), GPU j owns a block of ring
//! pairs (`pair_blocks`, balanced by the ring stage's cost: a polar ring's pixel weighs more for
//! its Bluestein FFT; a northern ring stays with its southern mirror).
//! The pairs of every block are cut into the same number of chunks ("rounds"). Per round k:
//!
//! - alm2map: every GPU computes Δ of its m on the k-th chunk of every pair block (`leg_synth`
//!   with its m list), the all-to-all moves each piece GPU→GPU (`cuMemcpyPeerAsync`), every GPU
//!   assembles the full m range of its own chunk, runs fold, ring FFTs and scatter and brings
//!   the chunk's pixels down (through pinned staging buffers) into the host map;
//! - map2alm (one pass): every GPU uploads the pixels of its k-th chunk, runs gather, the ring
//!   FFTs and unfold, splits the weighted Δ by m block and the all-to-all moves each piece to the
//!   GPU of those m, which adds it into its alm (`leg_anal`).
//!
//! The rounds are pipelined: GPU i computes round k + 1 while the Δ of round k crosses to the
//! other GPUs (two send and two receive slots per peer) and the pixels of round k − 1 move to or
//! from the host. On each GPU the Legendre sums (compute-bound) have their own stream beside
//! the ring stage (memory-bound: fold or gather, ring FFTs, the pitched copies). Each GPU's m
//! block is cut into sub-blocks (`SUB_SHARES`), one Legendre launch each (a Δ piece holds the
//! sub-blocks one after the other): alm2map uploads its alm a sub-block at a time in round 0,
//! each launch waiting only for its own, and map2alm downloads each sub-block's alm as soon as
//! the last round's sums of those m are done. One host thread per GPU queues its work; a
//! barrier per round orders the events the threads share; cancel is checked between rounds. Peer access (and access to the
//! peers' stream-ordered memory pools) is enabled where the driver allows it
//! (`TRANSPORT_PEER`); otherwise the same copies are staged through host memory by the driver
//! (`TRANSPORT_STAGED`). NVLink multicast is never used.
//!
//! Memory per GPU i (bytes), nc components (3 for pol), N GPUs, P pairs per chunk, w = mmax + 1,
//! nm_i the m of GPU i: nc·16·Σ_{m of i}(lmax + 1 − m) (its alm) + nc·P·(64·(N·nm_i + w) +
//! 32·w + 32·(2·nside + 1) + 320·nside) (send/receive slots, the assembled Δ, spectra, ring rows,
//! two pixel slots, cuFFT work). P is the largest chunk that fits `Gpu::budget` (at most
//! `WORK_BYTES` of chunk buffers, at least `MIN_ROUNDS` rounds); a GPU that cannot hold its
//! alm plus one pair is refused with `Error::GpuMemory` naming the bytes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use realfft::num_complex::Complex64 as C64;

use super::io::pixel_ranges;
use super::launch::{self, LegTabs, RingTabs};
use super::setup::{geo, group_list, note_used, work_for, Group, Work, LEG_BLOCK_PAIRS};
use super::stages::{comps_mut, ring_ffts};
use crate::backend::cancel::Token;
use crate::backend::cuda::peer::{self, copy_2d, enable_peers, timing_event};
use crate::backend::cuda::transfer::prefault_apart;
use crate::backend::cuda::{self, CudaEvent, CudaSlice, CudaStream, Gpu};
use crate::error::{human, Error, Result};
use crate::sht::split::{self, Stats};
use crate::sht::Plan;

/// The all-to-all ran as direct peer copies (peer access enabled between every pair of GPUs).
pub const TRANSPORT_PEER: &str = "peer";
/// The driver staged the GPU→GPU copies through host memory (no peer access between some pair).
pub const TRANSPORT_STAGED: &str = "driver-staged";
/// One GPU: the pieces are copied inside its memory.
pub const TRANSPORT_LOCAL: &str = "local";
/// Most bytes of chunk buffers per GPU.
const WORK_BYTES: usize = 16 << 30;
/// At least this many rounds (when the blocks have that many pairs), for the pipeline.
const MIN_ROUNDS: usize = 8;
/// The m sub-blocks of a GPU, by share of its alm: two large ones and a small last one. Its
/// Legendre launches run one sub-block at a time, so that its alm goes up (alm2map, in round 0)
/// or down (map2alm, after the last round) a sub-block at a time beside the launches of the
/// others. Fewer launches run the sums faster (each launch's last wave leaves multiprocessors
/// idle: 2 × H200, nside 8192 map2alm, Legendre 0.69 s a GPU with 4 equal sub-blocks, 0.66 s
/// with 2, 0.64 s with 1), but map2alm downloads a sub-block's alm only after the last round's
/// sums of its m, so the last sub-block's download is the pass's tail: a small one keeps it
/// short. Whole map2alm there: 4 equal 0.748–0.770 s, 2 equal 0.730–0.734 s, [4, 4, 1]
/// 0.720–0.721 s; alm2map unchanged (0.600–0.603 s against 0.589–0.609 s).
const SUB_SHARES: [usize; 3] = [4, 4, 1];

/// Up to `SUB_SHARES.len()` non-empty contiguous sub-blocks of the m block (m0, m1), of about
/// those shares of its alm (lmax + 1 − m each).
fn sub_blocks(lmax: usize, (m0, m1): (usize, usize)) -> Vec<(usize, usize)> {
    if m1 <= m0 {
        return Vec::new();
    }
    let cost: Vec<f64> = (m0..m1).map(|m| (lmax + 1 - m) as f64).collect();
    // equal parts, then consecutive parts joined by share (`cut` leaves only trailing parts
    // empty, so the joined blocks stay contiguous and in order)
    let parts = split::cut(&cost, SUB_SHARES.iter().sum());
    let mut out = Vec::new();
    let mut i = 0;
    for w in SUB_SHARES {
        let (a, b) = (parts[i].0, parts[i + w - 1].1);
        i += w;
        if b > a {
            out.push((m0 + a, m0 + b));
        }
    }
    out
}

/// (offset, length) in f64 of sub-block `sub` of an m block starting at `m_first` inside a Δ
/// piece of `np` pairs and `nc` components: the piece holds each sub-block's
/// [nc][2·np rows][its m] complex values one after the other.
fn sub_range(nc: usize, np: usize, m_first: usize, sub: (usize, usize)) -> (usize, usize) {
    let per_m = nc * 2 * np * 2;
    (per_m * (sub.0 - m_first), per_m * (sub.1 - sub.0))
}

/// A polar ring's pixel in the ring stage, in belt pixels: the polar rings (a length per pair)
/// go through the Bluestein ring transform (two FFTs of a padded length per ring), the belt
/// through one batched cuFFT. Session 13's 2-GPU map2alm at nside 8192 (blocks by pixels: GPU 0
/// held the polar cap, 4 nside² pixels, and 2 nside² of belt; GPU 1 6 nside² of belt) gave ring
/// stages of 0.16–0.24 s against 0.08 s: 2.5–4 belt pixels a polar pixel.
const POLAR_PIXEL_COST: f64 = 3.0;

/// Contiguous blocks [p0, p1) of the ring pairs, one per worker, of about equal ring-stage cost
/// (a pair holds its northern ring and its southern mirror, the equator pair one ring; a pixel
/// of a polar pair weighs `POLAR_PIXEL_COST`): the rule of `split::cut`.
pub fn pair_blocks(plan: &Plan, n: usize) -> Vec<(usize, usize)> {
    split::cut(&pair_costs(plan), n)
}

/// Each ring pair's ring-stage cost, in belt pixels (see `pair_blocks`).
fn pair_costs(plan: &Plan) -> Vec<f64> {
    let last = plan.rings.len() - 1;
    let polar_end = plan.nside - 1; // pairs before it are polar (`stages::ring_ffts`)
    (0..plan.pairs.len())
        .map(|p| {
            let px = (plan.rings[p].nphi * if last - p == p { 1 } else { 2 }) as f64;
            if p < polar_end {
                px * POLAR_PIXEL_COST
            } else {
                px
            }
        })
        .collect()
}

/// Chunk k of `rounds` of the pair block (p0, p1): (first pair, pairs), possibly empty. When the
/// chunks hold at least one Legendre thread block of pairs on average (LEG_BLOCK_PAIRS, 512),
/// the cuts fall on the nearest whole blocks from the pair block's start, so only a pair
/// block's last chunk leaves Legendre lanes idle (at nside 16384 on 2 GPUs the even cut gave
/// chunks of 1365 and 819 pairs: 11 % and 20 % of the lanes idle); chunks then hold 512·k
/// pairs, never none.
fn chunk(b: (usize, usize), k: usize, rounds: usize) -> (usize, usize) {
    let len = b.1 - b.0;
    let cut = |i: usize| {
        let even = len * i / rounds;
        if i >= rounds || len < LEG_BLOCK_PAIRS * rounds {
            even
        } else {
            ((even + LEG_BLOCK_PAIRS / 2) / LEG_BLOCK_PAIRS * LEG_BLOCK_PAIRS).min(len)
        }
    };
    let (a, z) = (cut(k), cut(k + 1));
    (b.0 + a, z - a)
}

/// The largest chunk of any pair block at `rounds` rounds.
fn largest_chunk(pb: &[(usize, usize)], rounds: usize) -> usize {
    pb.iter()
        .flat_map(|&b| (0..rounds).map(move |k| chunk(b, k, rounds).1))
        .max()
        .unwrap_or(1)
        .max(1)
}

/// Bytes per GPU: (its alm block, per pair of a chunk), as in the module docs.
fn bytes_per_gpu(plan: &Plan, nc: usize, n: usize, m: (usize, usize)) -> (usize, usize) {
    let (lmax, w, ns) = (plan.lay.lmax, plan.lay.mmax + 1, plan.nside);
    let nm = m.1 - m.0;
    let alm: usize = (m.0..m.1).map(|m| lmax + 1 - m).sum::<usize>() * 16 * nc;
    let per_pair = nc * (64 * (n * nm + w) + 32 * w + 32 * (2 * ns + 1) + 320 * ns);
    (alm, per_pair)
}

/// Which way a pass runs.
#[derive(Clone, Copy, PartialEq)]
enum Dir {
    Synth,
    Anal,
}

/// The host arrays of a pass, written by several threads at disjoint ranges.
struct Host {
    ptr: Vec<*mut f64>,
    len: Vec<usize>,
}
// SAFETY: each thread touches only its own disjoint ranges (pixels of its pairs, or the alm of
// its m), and the arrays outlive the scoped threads.
unsafe impl Sync for Host {}
unsafe impl Send for Host {}

impl Host {
    /// # Safety
    /// No other live reference overlaps [a, b) of component c.
    #[allow(clippy::mut_from_ref)]
    unsafe fn range(&self, c: usize, a: usize, b: usize) -> &mut [f64] {
        assert!(a <= b && b <= self.len[c], "host range out of bounds");
        // SAFETY: in bounds; disjointness by the caller.
        unsafe { std::slice::from_raw_parts_mut(self.ptr[c].add(a), b - a) }
    }
}

/// Events and buffer addresses one GPU shares with the others (index [slot]).
struct Shared {
    /// Its send slots are filled (compute stream).
    prod: [CudaEvent; 2],
    /// All copies into its receive slots of the round are done (its exchange stream).
    copied: [CudaEvent; 2],
    /// Device address of its send slot [slot][peer].
    send: Mutex<[Vec<u64>; 2]>,
}

/// Everything a pass's threads read.
struct Pass<'a> {
    dir: Dir,
    plan: &'a Plan,
    grp: &'a Group,
    gpus: &'a [Arc<Gpu>],
    mb: Vec<(usize, usize)>,
    /// The m sub-blocks of each GPU's block (`sub_blocks`).
    subs: Vec<Vec<(usize, usize)>>,
    pb: Vec<(usize, usize)>,
    rounds: usize,
    np_max: usize,
    shared: Vec<Shared>,
    barrier: Barrier,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
    stop: Token,
    /// alm2map: input alm (complex as f64 pairs), map2alm: output alm.
    alm: Host,
    /// alm2map: output maps, map2alm: input maps.
    map: Host,
    /// (legendre, exchange, ring) seconds per GPU, device time.
    times: Mutex<Vec<[f64; 3]>>,
    /// (set-up, rounds, final synchronisation) host wall seconds per GPU thread.
    walls: Mutex<Vec<[f64; 3]>>,
}

impl Pass<'_> {
    fn nc(&self) -> usize {
        self.grp.comps.len()
    }
    /// f64 values of the piece from GPU `src` to GPU `dst` in round k.
    fn piece(&self, src: usize, dst: usize, k: usize) -> usize {
        let (owner, mowner) = match self.dir {
            Dir::Synth => (dst, src),
            Dir::Anal => (src, dst),
        };
        let np = chunk(self.pb[owner], k, self.rounds).1;
        self.nc() * 2 * np * (self.mb[mowner].1 - self.mb[mowner].0) * 2
    }
    /// (offset, length) in f64 of GPU `owner`'s m sub-block `b` in a piece of `np` pairs.
    fn sub_range(&self, owner: usize, b: usize, np: usize) -> (usize, usize) {
        sub_range(self.nc(), np, self.mb[owner].0, self.subs[owner][b])
    }
    /// Range [x0, x1) of healpy's packed alm holding the m of GPU j's sub-block b.
    fn sub_alm(&self, j: usize, b: usize) -> (usize, usize) {
        let (m0, m1) = self.subs[j][b];
        let lay = &self.plan.lay;
        (lay.mstart(m0), lay.mstart(m1 - 1) + lay.lmax + 2 - m1)
    }
    fn piece_max(&self, src: usize, dst: usize) -> usize {
        (0..self.rounds)
            .map(|k| self.piece(src, dst, k))
            .max()
            .unwrap_or(0)
    }
    fn fail(&self, e: Error) {
        self.failed.store(true, Ordering::SeqCst);
        let mut slot = self.error.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() || matches!(slot.as_ref(), Some(Error::Cancelled)) {
            *slot = Some(e);
        }
    }
    fn ok(&self) -> bool {
        !self.failed.load(Ordering::SeqCst)
    }
}

/// Tables on one GPU (read by its launches).
struct Tabs {
    g: super::setup::Geo,
    /// Per m sub-block: its m and the offset of each one's a_mm in the GPU's alm block.
    cols: Vec<(CudaSlice<i64>, CudaSlice<i64>)>,
    first: CudaSlice<i64>,
}

/// Buffers on one GPU (written by its launches and copies).
struct Bufs {
    /// [slot][peer]: Δ pieces for / from each GPU.
    send: [Vec<CudaSlice<f64>>; 2],
    recv: [Vec<CudaSlice<f64>>; 2],
    /// [slot][component]: the pixels of a chunk (northern rings, then southern).
    pix: [Vec<CudaSlice<f64>>; 2],
    /// Its alm block, per component of the group.
    alm: Vec<CudaSlice<f64>>,
    work: Work,
}

/// One GPU of a pass: its streams, events, tables and buffers.
struct Local {
    gpu: Arc<Gpu>,
    /// The Legendre sums (compute-bound); the ring stage (fold or gather, the ring FFTs, the
    /// pitched copies: memory-bound) runs on the GPU's own stream beside them.
    leg: Arc<CudaStream>,
    /// The all-to-all copies into this GPU.
    xchg: Arc<CudaStream>,
    /// Host transfers of pixels.
    io: Arc<CudaStream>,
    /// Receive slot free again; pixel slot filled (alm2map) or read (map2alm); pixels uploaded.
    freed: [CudaEvent; 2],
    pix_ev: [CudaEvent; 2],
    up_ev: CudaEvent,
    /// map2alm: the Legendre sums of m sub-block b are done (for the alm download).
    sub_ev: Vec<CudaEvent>,
    t: Tabs,
    b: Bufs,
    /// (stage: 0 Legendre, 1 all-to-all, 2 rings; start, end).
    spans: Vec<(usize, CudaEvent, CudaEvent)>,
}

fn timed(l: &mut Local, what: usize, stream: &CudaStream, start: CudaEvent) -> Result<()> {
    let e = timing_event(&l.gpu)?;
    e.record(stream)?;
    l.spans.push((what, start, e));
    Ok(())
}

fn mark(gpu: &Gpu, stream: &CudaStream) -> Result<CudaEvent> {
    let e = timing_event(gpu)?;
    e.record(stream)?;
    Ok(e)
}

/// Per-ring offset of each ring inside its chunk's pixel slot (northern rings of the chunk,
/// then its southern rings) for the chunks of block `b`.
fn local_first(plan: &Plan, b: (usize, usize), rounds: usize) -> Vec<i64> {
    let mut first = vec![0i64; plan.rings.len()];
    let last = plan.rings.len() - 1;
    for k in 0..rounds {
        let (p0, np) = chunk(b, k, rounds);
        if np == 0 {
            continue;
        }
        let [(a, z), (c, _)] = pixel_ranges(plan, p0, np);
        for q in p0..p0 + np {
            first[q] = (plan.rings[q].first as usize - a) as i64;
            let s = last - q;
            if s != q {
                first[s] = ((z - a) + plan.rings[s].first as usize - c) as i64;
            }
        }
    }
    first
}

fn setup(p: &Pass, j: usize) -> Result<Local> {
    let gpu = p.gpus[j].clone();
    let (plan, nc, n) = (p.plan, p.nc(), p.gpus.len());
    let (m0, m1) = p.mb[j];
    let a0 = plan.lay.mstart(m0);
    let nalm = if m1 > m0 {
        plan.lay.mstart(m1 - 1) + plan.lay.lmax + 2 - m1 - a0
    } else {
        0
    };
    let alm: Vec<CudaSlice<f64>> = (0..nc)
        .map(|_| match p.dir {
            // SAFETY: round 0 uploads every sub-block's alm before its launches read them.
            Dir::Synth => unsafe { gpu.alloc::<f64>((2 * nalm).max(1)) },
            Dir::Anal => gpu.alloc_zeros::<f64>((2 * nalm).max(1)),
        })
        .collect::<Result<_>>()?;
    let cols = p.subs[j]
        .iter()
        .map(|&(b0, b1)| {
            let ml: Vec<i64> = (b0..b1).map(|m| m as i64).collect();
            let mo: Vec<i64> = (b0..b1).map(|m| (plan.lay.mstart(m) - a0) as i64).collect();
            Ok((gpu.upload_small(&ml)?, gpu.upload_small(&mo)?))
        })
        .collect::<Result<Vec<_>>>()?;
    let slot_bufs = |out: bool| -> Result<Vec<CudaSlice<f64>>> {
        (0..n)
            .map(|q| {
                let len = if out {
                    p.piece_max(j, q)
                } else {
                    p.piece_max(q, j)
                };
                // SAFETY: every piece is written (kernel or copy) before it is read.
                unsafe { gpu.alloc::<f64>(len) }
            })
            .collect()
    };
    let np = p.np_max;
    let px_max = (0..p.rounds)
        .map(|k| {
            let (p0, cnt) = chunk(p.pb[j], k, p.rounds);
            if cnt == 0 {
                return 0;
            }
            pixel_ranges(plan, p0, cnt)
                .iter()
                .map(|r| r.1 - r.0)
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    let pix_bufs = || -> Result<Vec<CudaSlice<f64>>> {
        (0..nc)
            // SAFETY: scatter writes (or the upload fills) every pixel of a chunk before use.
            .map(|_| unsafe { gpu.alloc::<f64>(px_max) })
            .collect()
    };
    let b = Bufs {
        send: [slot_bufs(true)?, slot_bufs(true)?],
        recv: [slot_bufs(false)?, slot_bufs(false)?],
        pix: [pix_bufs()?, pix_bufs()?],
        alm,
        work: work_for(&gpu, plan, nc, np)?,
    };
    let t = Tabs {
        g: geo(&gpu, plan)?,
        cols,
        first: gpu.upload_small(&local_first(plan, p.pb[j], p.rounds))?,
    };
    let local = Local {
        leg: gpu.ctx.new_stream()?,
        xchg: gpu.ctx.new_stream()?,
        io: gpu.ctx.new_stream()?,
        freed: [gpu.event()?, gpu.event()?],
        pix_ev: [gpu.event()?, gpu.event()?],
        up_ev: gpu.event()?,
        sub_ev: p.subs[j]
            .iter()
            .map(|_| gpu.event())
            .collect::<Result<_>>()?,
        t,
        b,
        spans: Vec::new(),
        gpu,
    };
    // the other streams start after the allocations and uploads queued on the compute stream
    local.gpu.sync()?;
    note_used(&local.gpu);
    let ptrs = [0, 1].map(|s| local.b.send[s].iter().map(|b| local.gpu.dptr(b)).collect());
    *p.shared[j].send.lock().unwrap_or_else(|e| e.into_inner()) = ptrs;
    Ok(local)
}

/// The Legendre tables of GPU j's m sub-block b.
fn leg_tabs<'a>(p: &Pass, t: &'a Tabs, j: usize, b: usize) -> LegTabs<'a> {
    let (b0, b1) = p.subs[j][b];
    LegTabs {
        lmax: p.plan.lay.lmax,
        norms: &t.g.norms,
        lnfact: &t.g.lnfact,
        mlist: &t.cols[b].0,
        moff: &t.cols[b].1,
        ncol: b1 - b0,
        pair_x: &t.g.pair_x,
        pair_s: &t.g.pair_s,
    }
}

fn ring_tabs<'a>(p: &Pass, t: &'a Tabs) -> RingTabs<'a> {
    RingTabs {
        nside: p.plan.nside,
        nphi: &t.g.nphi,
        shift: &t.g.shift,
        first: &t.first,
        w: &t.g.w,
        direct: false,
    }
}

/// alm2map, round 0: GPU j's alm of m sub-block b up (io stream; `up_ev` marks them there).
fn upload_alm(p: &Pass, l: &mut Local, j: usize, b: usize) -> Result<()> {
    let a0 = p.plan.lay.mstart(p.mb[j].0);
    let (x0, x1) = p.sub_alm(j, b);
    for (ci, &comp) in p.grp.comps.iter().enumerate() {
        // SAFETY: the input alm are only read, by every thread.
        let h = unsafe { p.alm.range(comp, 2 * x0, 2 * x1) };
        l.gpu
            .upload_at_on(&l.io, h, &mut l.b.alm[ci], 2 * (x0 - a0))?;
    }
    l.up_ev.record(&l.io)?;
    Ok(())
}

/// Round k's first step on GPU j, into its send slots: the Legendre sums of its m on the
/// k-th chunk of every pair block (alm2map), or its own chunk's pixels -> weighted Δ split by
/// m block (map2alm).
fn produce(p: &Pass, l: &mut Local, j: usize, k: usize) -> Result<()> {
    let s = k % 2;
    let gpu = l.gpu.clone();
    // alm2map: the Legendre stream, map2alm: the ring stage's (the GPU's own stream)
    let st = match p.dir {
        Dir::Synth => l.leg.clone(),
        Dir::Anal => gpu.stream.clone(),
    };
    for sh in &p.shared {
        st.wait(&sh.copied[s])?; // round k − 2 has left this send slot
    }
    let (plan, grp, n, nc) = (p.plan, p.grp, p.gpus.len(), p.nc());
    let w = plan.lay.mmax + 1;
    match p.dir {
        Dir::Synth => {
            for b in 0..p.subs[j].len() {
                if k == 0 {
                    upload_alm(p, l, j, b)?;
                    st.wait(&l.up_ev)?;
                }
                let t0 = mark(&gpu, &st)?;
                let lt = leg_tabs(p, &l.t, j, b);
                let alm = &l.b.alm;
                let a = |i: usize| &alm[i.min(nc - 1)];
                for q in 0..n {
                    let (p0, np) = chunk(p.pb[q], k, p.rounds);
                    if np == 0 {
                        continue;
                    }
                    let (off, len) = p.sub_range(j, b, np);
                    let mut out = l.b.send[s][q].slice_mut(off..off + len);
                    let alms = [a(0), a(1), a(2)];
                    launch::leg_synth(&gpu, &st, grp, alms, &lt, p0, np, &mut out)?;
                }
                timed(l, 0, &st, t0)?;
            }
        }
        Dir::Anal => {
            let (p0, np) = chunk(p.pb[j], k, p.rounds);
            if np > 0 {
                let [(a, z), (c, d)] = pixel_ranges(plan, p0, np);
                l.io.wait(&l.pix_ev[s])?; // round k − 2's gather has read this slot
                for (ci, &comp) in grp.comps.iter().enumerate() {
                    // SAFETY: the input maps are only read, by every thread.
                    let north = unsafe { p.map.range(comp, a, z) };
                    gpu.upload_at_on(&l.io, north, &mut l.b.pix[s][ci], 0)?;
                    if c < d {
                        // SAFETY: as above.
                        let south = unsafe { p.map.range(comp, c, d) };
                        gpu.upload_at_on(&l.io, south, &mut l.b.pix[s][ci], z - a)?;
                    }
                    // the maps go up as given: UNSEEN pixels are zeroed here, not in a host
                    // pass over the whole map before the call
                    let used = (z - a) + d.saturating_sub(c);
                    let mut slot = l.b.pix[s][ci].slice_mut(0..used);
                    launch::clean_f64(&gpu, &l.io, &mut slot)?;
                }
                l.up_ev.record(&l.io)?;
                gpu.stream.wait(&l.up_ev)?;
                let t0 = mark(&gpu, &gpu.stream)?;
                let rt = ring_tabs(p, &l.t);
                let wk = &mut l.b.work;
                let ins = comps_mut(&mut l.b.pix[s], &(0..nc).collect::<Vec<_>>());
                launch::gather(
                    &gpu,
                    ins,
                    (&mut wk.dummy1, &mut wk.dummy2),
                    &mut wk.rows,
                    &rt,
                    p0,
                    np,
                )?;
                l.pix_ev[s].record(&gpu.stream)?;
                ring_ffts(&gpu, plan, wk, p0, np, nc, true)?;
                launch::unfold(
                    &gpu,
                    &wk.spec,
                    &mut wk.phase,
                    plan.lay.mmax,
                    &rt,
                    p0,
                    np,
                    nc,
                )?;
                let src = gpu.dptr(&wk.phase);
                for q in 0..n {
                    for (b, &(b0, b1)) in p.subs[q].iter().enumerate() {
                        let off = p.sub_range(q, b, np).0;
                        let dst = gpu.dptr(&l.b.send[s][q]) + (off * 8) as u64;
                        let wid = (b1 - b0) * 16;
                        copy_2d(
                            &gpu,
                            (src, b0 * 16, w * 16),
                            (dst, 0, wid),
                            wid,
                            nc * 2 * np,
                        )?;
                    }
                }
                timed(l, 2, &gpu.stream, t0)?;
            }
        }
    }
    p.shared[j].prod[s].record(&st)?;
    Ok(())
}

/// Round k's all-to-all into GPU d: the piece of every GPU for d, peer copies on d's stream.
fn exchange(p: &Pass, l: &mut Local, d: usize, k: usize) -> Result<()> {
    let s = k % 2;
    let gpu = l.gpu.clone();
    l.xchg.wait(&l.freed[s])?; // round k − 2 has left this receive slot
    for (i, sh) in p.shared.iter().enumerate() {
        if p.piece(i, d, k) > 0 {
            l.xchg.wait(&sh.prod[s])?;
        }
    }
    let t0 = mark(&gpu, &l.xchg)?; // the copies alone, not the wait for the pieces
    for (i, src_gpu) in p.gpus.iter().enumerate() {
        let len = p.piece(i, d, k);
        if len == 0 {
            continue;
        }
        let src = p.shared[i].send.lock().unwrap_or_else(|e| e.into_inner())[s][d];
        let dst = gpu.dptr(&l.b.recv[s][i]);
        gpu.ctx.bind_to_thread()?;
        // SAFETY: both pieces hold `len` f64 and stay allocated until every stream is
        // synchronised at the end of the pass.
        unsafe { peer::copy_async(&gpu, dst, src_gpu, src, len * 8, &l.xchg) }?;
    }
    let xchg = l.xchg.clone();
    timed(l, 1, &xchg, t0)?;
    p.shared[d].copied[s].record(&l.xchg)?;
    Ok(())
}

/// Round k's last step on GPU j: its chunk's full Δ -> pixels (alm2map), or the pieces of its
/// m from every chunk -> added into its alm (map2alm).
fn consume(p: &Pass, l: &mut Local, j: usize, k: usize) -> Result<()> {
    let s = k % 2;
    let gpu = l.gpu.clone();
    let (plan, grp, n, nc) = (p.plan, p.grp, p.gpus.len(), p.nc());
    let w = plan.lay.mmax + 1;
    match p.dir {
        Dir::Synth => {
            gpu.stream.wait(&p.shared[j].copied[s])?;
            let (p0, np) = chunk(p.pb[j], k, p.rounds);
            if np == 0 {
                l.freed[s].record(&gpu.stream)?;
                return Ok(());
            }
            let t0 = mark(&gpu, &gpu.stream)?;
            let wk = &mut l.b.work;
            let dst = gpu.dptr(&wk.phase);
            for i in 0..n {
                for (b, &(b0, b1)) in p.subs[i].iter().enumerate() {
                    let off = p.sub_range(i, b, np).0;
                    let src = gpu.dptr(&l.b.recv[s][i]) + (off * 8) as u64;
                    let wid = (b1 - b0) * 16;
                    copy_2d(
                        &gpu,
                        (src, 0, wid),
                        (dst, b0 * 16, w * 16),
                        wid,
                        nc * 2 * np,
                    )?;
                }
            }
            l.freed[s].record(&gpu.stream)?;
            let rt = ring_tabs(p, &l.t);
            launch::fold(
                &gpu,
                &wk.phase,
                &mut wk.spec,
                plan.lay.mmax,
                &rt,
                p0,
                np,
                nc,
            )?;
            ring_ffts(&gpu, plan, wk, p0, np, nc, false)?;
            let outs = comps_mut(&mut l.b.pix[s], &(0..nc).collect::<Vec<_>>());
            launch::scatter(
                &gpu,
                &mut wk.rows,
                outs,
                (&mut wk.dummy1, &mut wk.dummy2),
                &rt,
                p0,
                np,
            )?;
            l.pix_ev[s].record(&gpu.stream)?;
            timed(l, 2, &gpu.stream, t0)?;
        }
        Dir::Anal => {
            let leg = l.leg.clone();
            leg.wait(&p.shared[j].copied[s])?;
            for b in 0..p.subs[j].len() {
                let t0 = mark(&gpu, &leg)?;
                let lt = leg_tabs(p, &l.t, j, b);
                for q in 0..n {
                    let (p0, np) = chunk(p.pb[q], k, p.rounds);
                    if np == 0 {
                        continue;
                    }
                    let (off, len) = p.sub_range(j, b, np);
                    let phase = l.b.recv[s][q].slice(off..off + len);
                    let wk = &mut l.b.work;
                    let outs = comps_mut(&mut l.b.alm, &(0..nc).collect::<Vec<_>>());
                    launch::leg_anal(
                        &gpu,
                        &leg,
                        grp,
                        &phase,
                        outs,
                        (&mut wk.dummy1, &mut wk.dummy2),
                        &lt,
                        p0,
                        np,
                    )?;
                }
                l.sub_ev[b].record(&leg)?;
                timed(l, 0, &leg, t0)?;
            }
            l.freed[s].record(&leg)?;
        }
    }
    Ok(())
}

/// alm2map: bring round k's pixels of GPU j down into the host maps (returns when there).
fn drain(p: &Pass, l: &mut Local, j: usize, k: usize) -> Result<()> {
    let s = k % 2;
    let (p0, np) = chunk(p.pb[j], k, p.rounds);
    if np == 0 {
        return Ok(());
    }
    let gpu = l.gpu.clone();
    l.io.wait(&l.pix_ev[s])?;
    let [(a, z), (c, d)] = pixel_ranges(p.plan, p0, np);
    for (ci, &comp) in p.grp.comps.iter().enumerate() {
        // SAFETY: the pixels of GPU j's pairs are written by this thread only.
        let north = unsafe { p.map.range(comp, a, z) };
        gpu.download_at_on(&l.io, &l.b.pix[s][ci], 0, north)?;
        if c < d {
            // SAFETY: as above.
            let south = unsafe { p.map.range(comp, c, d) };
            gpu.download_at_on(&l.io, &l.b.pix[s][ci], z - a, south)?;
        }
    }
    Ok(())
}

/// The host pages GPU j's last downloads write, faulted in on a helper thread while the GPUs
/// compute (a fresh NumPy array is only reserved; faulting during the staged copy halves its
/// rate, and these copies are the pass's tail): map2alm its whole alm block (downloaded after
/// the last round), alm2map the pixels of its last chunk (the earlier ones drain while later
/// rounds compute). `rounds` joins this before the first of those downloads.
fn prefault_output(p: &Pass, j: usize) {
    match p.dir {
        Dir::Anal => {
            let (x0, x1) = (p.plan.lay.mstart(p.mb[j].0), p.plan.lay.mstart(p.mb[j].1));
            for &comp in &p.grp.comps {
                // SAFETY: GPU j's alm are written only by its thread, after this returns.
                prefault_apart(unsafe { p.alm.range(comp, 2 * x0, 2 * x1) }, 1);
            }
        }
        Dir::Synth => {
            let (p0, np) = chunk(p.pb[j], p.rounds.saturating_sub(1), p.rounds);
            if p.rounds < 3 || np == 0 {
                return;
            }
            for (a, z) in pixel_ranges(p.plan, p0, np) {
                for &comp in &p.grp.comps {
                    if z > a {
                        // SAFETY: as above; the last chunk drains after this returns.
                        prefault_apart(unsafe { p.map.range(comp, a, z) }, 1);
                    }
                }
            }
        }
    }
}

/// The rounds of GPU j after its setup (every thread runs every barrier, failed or not).
fn rounds(p: &Pass, l: &mut Option<Local>, j: usize, pages: std::thread::ScopedJoinHandle<'_, ()>) {
    let mut pages = Some(pages);
    let mut wait_pages = || {
        if let Some(h) = pages.take() {
            let _ = h.join();
        }
    };
    let run = |f: &mut dyn FnMut(&mut Local) -> Result<()>, l: &mut Option<Local>| {
        if !p.ok() {
            return;
        }
        if let Some(l) = l.as_mut() {
            if let Err(e) = f(l) {
                p.fail(e);
            }
        }
    };
    for k in 0..=p.rounds {
        if p.stop.is_set() {
            p.fail(Error::Cancelled);
        }
        if k < p.rounds {
            run(&mut |l| produce(p, l, j, k), l);
        }
        p.barrier.wait();
        if k < p.rounds {
            run(&mut |l| exchange(p, l, j, k), l);
        }
        if k >= 1 {
            run(&mut |l| consume(p, l, j, k - 1), l);
        }
        if p.dir == Dir::Synth && k >= 2 {
            run(&mut |l| drain(p, l, j, k - 2), l);
        }
    }
    wait_pages();
    if p.dir == Dir::Synth && p.rounds >= 1 {
        run(&mut |l| drain(p, l, j, p.rounds - 1), l);
    }
    if p.dir == Dir::Anal {
        run(
            &mut |l| {
                // each sub-block as soon as the last round's sums of its m are in
                let a0 = p.plan.lay.mstart(p.mb[j].0);
                for b in 0..p.subs[j].len() {
                    l.io.wait(&l.sub_ev[b])?;
                    let (x0, x1) = p.sub_alm(j, b);
                    for (ci, &comp) in p.grp.comps.iter().enumerate() {
                        // SAFETY: the alm of GPU j's m are written by this thread only.
                        let h = unsafe { p.alm.range(comp, 2 * x0, 2 * x1) };
                        l.gpu
                            .download_at_on(&l.io, &l.b.alm[ci], 2 * (x0 - a0), h)?;
                    }
                }
                Ok(())
            },
            l,
        );
    }
}

/// One GPU's thread: setup, rounds, then every stream drained (also after a failure) and its
/// stage times.
fn device_thread(p: &Pass, j: usize) {
    let gpu = p.gpus[j].clone();
    let (_only, admitted) = match gpu.exclusive() {
        Ok(s) => (Some(s), Ok(())),
        Err(e) => (None, Err(e)),
    };
    let t0 = Instant::now();
    let mut local = match admitted.and_then(|()| setup(p, j)) {
        Ok(l) => Some(l),
        Err(e) => {
            p.fail(e);
            None
        }
    };
    let t_setup = t0.elapsed().as_secs_f64();
    p.barrier.wait(); // every send address is published
    let t1 = Instant::now();
    std::thread::scope(|sc| {
        let pages = sc.spawn(|| prefault_output(p, j));
        rounds(p, &mut local, j, pages);
    });
    let t_rounds = t1.elapsed().as_secs_f64();
    if let Some(l) = local {
        let t2 = Instant::now();
        for s in [&l.gpu.stream, &l.leg, &l.xchg, &l.io] {
            if let Err(e) = s.synchronize() {
                p.fail(e.into());
            }
        }
        let t_sync = t2.elapsed().as_secs_f64();
        p.walls.lock().unwrap_or_else(|e| e.into_inner())[j] = [t_setup, t_rounds, t_sync];
        note_used(&l.gpu);
        let mut t = [0.0f64; 3];
        for (what, a, b) in &l.spans {
            match a.elapsed_ms(b) {
                Ok(ms) => t[*what] += ms as f64 / 1e3,
                Err(e) => p.fail(e.into()),
            }
        }
        p.times.lock().unwrap_or_else(|e| e.into_inner())[j] = t;
    }
}

/// Component groups of one launch: T + (E, B) with pol, else up to three spin-0 components.
fn groups(pol: bool, nc: usize) -> Vec<Group> {
    group_list(pol && nc == 3, nc)
}

/// The GPUs of `devices` (distinct ordinals) and whether peer copies are direct.
pub fn open(devices: &[u32]) -> Result<(Vec<Arc<Gpu>>, &'static str)> {
    let gpus: Vec<Arc<Gpu>> = devices
        .iter()
        .map(|&d| cuda::gpu_on(d))
        .collect::<Result<_>>()?;
    let transport = if gpus.len() == 1 {
        TRANSPORT_LOCAL
    } else if enable_peers(&gpus)? {
        TRANSPORT_PEER
    } else {
        TRANSPORT_STAGED
    };
    Ok((gpus, transport))
}

/// Chunk size and rounds for the pass, or the memory error.
fn plan_rounds(
    plan: &Plan,
    nc: usize,
    gpus: &[Arc<Gpu>],
    mb: &[(usize, usize)],
    pb: &[(usize, usize)],
    st: &mut Stats,
) -> Result<(usize, usize)> {
    let n = gpus.len();
    let mut np_fit = usize::MAX;
    let mut need = Vec::with_capacity(n);
    for (i, g) in gpus.iter().enumerate() {
        let (alm, per_pair) = bytes_per_gpu(plan, nc, n, mb[i]);
        let budget = g.budget()?;
        let avail = budget.saturating_sub(alm).min(WORK_BYTES);
        if avail < per_pair {
            return Err(Error::GpuMemory(format!(
                "the SHT split over {n} GPUs needs at least {} on cuda:{} (its alm block {} + \
                 the buffers of one ring pair {}) but {} is available there",
                human((alm + per_pair) as u128),
                g.ordinal,
                human(alm as u128),
                human(per_pair as u128),
                human(budget as u128)
            )));
        }
        np_fit = np_fit.min(avail / per_pair);
        need.push((alm, per_pair));
    }
    let longest = pb.iter().map(|b| b.1 - b.0).max().unwrap_or(1).max(1);
    let np = match crate::sht::forced_chunk_pairs() {
        Some(f) => f.min(np_fit),
        None => np_fit.min(longest.div_ceil(MIN_ROUNDS)),
    }
    .clamp(1, 16384);
    let mut rounds = longest.div_ceil(np);
    // whole-block cuts may make a chunk up to a block larger than the even cut: more rounds
    // until the largest fits (the even cut's largest, ≤ np, always does)
    while largest_chunk(pb, rounds) > np_fit {
        rounds += 1;
    }
    let np = largest_chunk(pb, rounds);
    st.planned_bytes = need.iter().map(|&(a, pp)| a + pp * np).collect();
    Ok((np, rounds))
}

/// One pass (synthesis, or one analysis without iterations) of group `grp`.
#[allow(clippy::too_many_arguments)]
fn pass(
    dir: Dir,
    plan: &Plan,
    grp: &Group,
    gpus: &[Arc<Gpu>],
    alm: Host,
    map: Host,
    st: &mut Stats,
) -> Result<()> {
    let n = gpus.len();
    let inactive = match dir {
        Dir::Synth => split::INACTIVE_SYNTH,
        Dir::Anal => split::INACTIVE_ANAL,
    };
    let mb = split::m_blocks_for(plan, n, inactive);
    if let Some(&(m0, m1)) = mb.iter().find(|b| b.1 - b.0 > 65535) {
        return Err(Error::value(format!(
            "the multi-GPU SHT handles at most 65535 m per GPU; m {m0}..{m1} of mmax={} fall on \
             one GPU: list more devices",
            plan.lay.mmax
        )));
    }
    let pb = pair_blocks(plan, n);
    let subs = mb.iter().map(|&b| sub_blocks(plan.lay.lmax, b)).collect();
    let (np_max, rounds) = plan_rounds(plan, grp.comps.len(), gpus, &mb, &pb, st)?;
    let shared = gpus
        .iter()
        .map(|g| {
            Ok(Shared {
                prod: [g.event()?, g.event()?],
                copied: [g.event()?, g.event()?],
                send: Mutex::new([Vec::new(), Vec::new()]),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let p = Pass {
        dir,
        plan,
        grp,
        gpus,
        mb,
        subs,
        pb,
        rounds,
        np_max,
        shared,
        barrier: Barrier::new(n),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
        stop: crate::backend::cancel::current(),
        alm,
        map,
        times: Mutex::new(vec![[0.0; 3]; n]),
        walls: Mutex::new(vec![[0.0; 3]; n]),
    };
    // The call's GPU admission is thread-local: each device thread carries it.
    let ticket = cuda::admit::current();
    std::thread::scope(|s| {
        for j in 0..n {
            let (p, t) = (&p, ticket.clone());
            s.spawn(move || {
                let _admitted = cuda::admit::enter(t);
                device_thread(p, j)
            });
        }
    });
    if let Some(e) = p.error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let times = p.times.into_inner().unwrap_or_else(|e| e.into_inner());
    let walls = p.walls.into_inner().unwrap_or_else(|e| e.into_inner());
    let most = |i: usize| times.iter().map(|t| t[i]).fold(0.0, f64::max);
    st.legendre_s += most(0);
    st.exchange_s += most(1);
    st.ring_s += most(2);
    st.rounds = rounds;
    st.pair_blocks = p.pb.clone();
    st.m_blocks = p.mb.clone();
    for (acc, per) in [
        (&mut st.stage_s_per_gpu, &times),
        (&mut st.wall_s_per_gpu, &walls),
    ] {
        if acc.len() != n {
            *acc = vec![[0.0; 3]; n];
        }
        for (a, t) in acc.iter_mut().zip(per) {
            for i in 0..3 {
                a[i] += t[i];
            }
        }
    }
    Ok(())
}

/// Read-only host arrays (the pass only reads them).
fn host_in<T>(a: &[&[T]], per: usize) -> Host {
    Host {
        ptr: a.iter().map(|x| x.as_ptr() as *mut f64).collect(),
        len: a.iter().map(|x| per * x.len()).collect(),
    }
}

/// Host arrays the pass writes (disjoint ranges per thread).
fn host_out<T>(a: &mut [&mut [T]], per: usize) -> Host {
    Host {
        ptr: a.iter_mut().map(|x| x.as_mut_ptr() as *mut f64).collect(),
        len: a.iter().map(|x| per * x.len()).collect(),
    }
}

/// Synthesis split over the distinct GPUs `gpus`: `alms` (healpy layout of plan.lay) -> RING
/// maps.
pub fn alm2map(
    plan: &Plan,
    pol: bool,
    gpus: &[Arc<Gpu>],
    alms: &[&[C64]],
    maps: &mut [&mut [f64]],
    st: &mut Stats,
) -> Result<()> {
    super::check_sizes_multi(plan)?;
    for grp in groups(pol, alms.len()) {
        let (a, m) = (host_in(alms, 2), host_out(maps, 1));
        pass(Dir::Synth, plan, &grp, gpus, a, m, st)?;
    }
    Ok(())
}

/// One analysis pass (no iterations) split over `gpus` of float64 maps (UNSEEN pixels are
/// zeroed on the devices as the chunks go up).
pub fn analysis(
    plan: &Plan,
    pol: bool,
    gpus: &[Arc<Gpu>],
    maps: &[&[f64]],
    alms: &mut [&mut [C64]],
    st: &mut Stats,
) -> Result<()> {
    super::check_sizes_multi(plan)?;
    for grp in groups(pol, maps.len()) {
        let (a, m) = (host_out(alms, 2), host_in(maps, 1));
        pass(Dir::Anal, plan, &grp, gpus, a, m, st)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sht::AlmLayout;

    #[test]
    fn chunks_cover_the_block_on_whole_legendre_blocks() {
        // nside 16384 on 2 GPUs: blocks of 20480 and 12288 pairs, 15 rounds
        for (b, rounds) in [
            ((0, 20480), 15),
            ((20480, 32768), 15),
            ((7, 5000), 3),
            ((0, 1000), 8),
            ((3, 3), 4),
            ((0, 600), 1),
            ((100, 100 + 512 * 9 + 17), 9),
        ] {
            let len = b.1 - b.0;
            let mut next = b.0;
            for k in 0..rounds {
                let (p0, np) = chunk(b, k, rounds);
                assert_eq!(p0, next, "{b:?} {rounds} {k}");
                next += np;
                if len >= LEG_BLOCK_PAIRS * rounds {
                    assert!(np > 0, "{b:?} {rounds} {k}");
                    if k + 1 < rounds {
                        assert_eq!(np % LEG_BLOCK_PAIRS, 0, "{b:?} {rounds} {k}");
                    }
                } else {
                    assert_eq!(np, len * (k + 1) / rounds - len * k / rounds);
                }
            }
            assert_eq!(next, b.1, "{b:?} {rounds}");
        }
        // the largest chunk at nside 16384: 1536 pairs (even cut: 1366)
        assert_eq!(largest_chunk(&[(0, 20480), (20480, 32768)], 15), 1536);
    }

    #[test]
    fn pair_blocks_cover_and_balance() {
        let plan = Plan::new(64, AlmLayout::new(10, 10).unwrap(), None).unwrap();
        let npairs = plan.pairs.len();
        // the cost written out: 2 rings of 4(p+1) pixels a polar pair (weighed), 2 of 256
        // a belt pair, the equator ring alone
        let cost = |p: usize| match p {
            p if p < 63 => 2.0 * 4.0 * (p + 1) as f64 * POLAR_PIXEL_COST,
            p if p == npairs - 1 => 256.0,
            _ => 512.0,
        };
        let total: f64 = (0..npairs).map(cost).sum();
        let largest = (0..npairs).map(cost).fold(0.0, f64::max);
        for n in 1..5 {
            let b = pair_blocks(&plan, n);
            assert_eq!((b[0].0, b[n - 1].1), (0, npairs));
            assert!(b.windows(2).all(|w| w[0].1 == w[1].0));
            for &(p0, p1) in &b {
                let share = (p0..p1).map(cost).sum::<f64>() / total;
                // `cut` misses the even share by at most the largest pair's cost
                assert!((share - 1.0 / n as f64).abs() <= largest / total, "{b:?}");
            }
        }
        // two GPUs: the first holds most of the polar cap, the second the rest and the belt
        let b = pair_blocks(&plan, 2);
        assert!(b[0].1 > 50 && b[0].1 < 63, "{b:?}");
        // more workers than pairs: the last ones are empty, none before
        let tiny = Plan::new(1, AlmLayout::new(2, 2).unwrap(), None).unwrap();
        assert_eq!(pair_blocks(&tiny, 3), vec![(0, 1), (1, 2), (2, 2)]);
    }

    /// Every chunk's slot holds each of its pixels exactly once, northern rings first, and the
    /// chunks of all blocks cover the map once.
    #[test]
    fn chunks_and_slot_offsets_cover_the_map_once() {
        for (nside, n, rounds) in [(8usize, 2usize, 3usize), (16, 3, 7), (4, 1, 1), (8, 2, 40)] {
            let plan = Plan::new(nside, AlmLayout::new(4, 4).unwrap(), None).unwrap();
            let last = plan.rings.len() - 1;
            let mut seen = vec![0u8; plan.npix];
            for b in pair_blocks(&plan, n) {
                let first = local_first(&plan, b, rounds);
                let mut at = b.0;
                for k in 0..rounds {
                    let (p0, np) = chunk(b, k, rounds);
                    assert_eq!(p0, at);
                    at += np;
                    if np == 0 {
                        continue;
                    }
                    let [(a, z), (c, d)] = pixel_ranges(&plan, p0, np);
                    let mut slot = vec![0u8; (z - a) + (d - c)];
                    for q in p0..p0 + np {
                        let rings = if last - q == q {
                            vec![q]
                        } else {
                            vec![q, last - q]
                        };
                        for r in rings {
                            let ring = &plan.rings[r];
                            for j in 0..ring.nphi {
                                let g = ring.first as usize + j;
                                let l = first[r] as usize + j;
                                let want = if r != q { (z - a) + g - c } else { g - a };
                                assert_eq!(l, want);
                                slot[l] += 1;
                            }
                        }
                    }
                    assert!(
                        slot.iter().all(|&v| v == 1),
                        "nside {nside} chunk {p0}+{np}"
                    );
                    for g in (a..z).chain(c..d) {
                        seen[g] += 1;
                    }
                }
                assert_eq!(at, b.1);
            }
            assert!(
                seen.iter().all(|&v| v == 1),
                "nside {nside}: map not covered once"
            );
        }
    }

    /// Sub-blocks tile the m block in order, none empty, at most SUB_SHARES.len(), of about
    /// SUB_SHARES' shares of the alm;
    /// their ranges tile a Δ piece exactly.
    #[test]
    fn sub_blocks_tile_the_block_and_the_piece() {
        for (lmax, m0, m1) in [
            (40usize, 0usize, 41usize),
            (40, 10, 13),
            (40, 7, 8),
            (100, 0, 0),
        ] {
            let subs = sub_blocks(lmax, (m0, m1));
            // `cut` gives each of the first parts one m while there are fewer m than parts,
            // so a sub-block is empty exactly when the m run out before its parts
            let (n, mut first) = (m1 - m0, 0);
            let want = SUB_SHARES
                .iter()
                .filter(|&&w| {
                    first += w;
                    n > first - w
                })
                .count();
            assert_eq!(subs.len(), want, "m {m0}..{m1}: {subs:?}");
            let mut at = m0;
            for &(a, b) in &subs {
                assert_eq!(a, at);
                assert!(b > a);
                at = b;
            }
            assert_eq!(at, m1);
            for (nc, np) in [(1usize, 3usize), (3, 5)] {
                let mut off = 0;
                for &sb in &subs {
                    let (o, len) = sub_range(nc, np, m0, sb);
                    assert_eq!(o, off);
                    off += len;
                }
                assert_eq!(off, nc * 2 * np * (m1 - m0) * 2);
            }
        }
        let subs = sub_blocks(1000, (0, 1001));
        let alm = |&(a, b): &(usize, usize)| (a..b).map(|m| 1001 - m).sum::<usize>() as f64;
        let total: f64 = subs.iter().map(alm).sum();
        let sum: usize = SUB_SHARES.iter().sum();
        assert_eq!(subs.len(), SUB_SHARES.len());
        for (sb, w) in subs.iter().zip(SUB_SHARES) {
            assert!(
                (alm(sb) / total - w as f64 / sum as f64).abs() < 0.01,
                "{subs:?}"
            );
        }
    }

    #[test]
    fn memory_formula_grows_with_the_chunk() {
        let plan = Plan::new(16, AlmLayout::new(32, 32).unwrap(), None).unwrap();
        let (alm, pp) = bytes_per_gpu(&plan, 3, 2, (0, 12));
        let want_alm: usize = (0..12).map(|m| 33 - m).sum::<usize>() * 16 * 3;
        assert_eq!(alm, want_alm);
        assert_eq!(pp, 3 * (64 * (2 * 12 + 33) + 32 * 33 + 32 * 33 + 320 * 16));
    }
}
