//! The gathers of one call, a block of channels at a time (`Blocks::gather_all`), and the
//! downloads of each block into the sink while the next one computes (`Blocks::fetch`).

use std::ops::Range;
use std::sync::{mpsc, Arc};

use rayon::prelude::*;

use super::args::{
    gather_config, launch, spectral_config, FinishArgs, KernelArgs, ScalarArgs, SpectralArgs,
    MAX_BLOCKS, SPEC_RUN,
};
use super::buffers::{Fenced, Slot};
use super::plan::DevicePlan;
use super::Sink;
use crate::backend::cuda::pace::{self, Pacer};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::transfer::prefault;
use crate::backend::cuda::{grid_stride, CudaEvent, CudaSlice, CudaStream, Gpu};
use crate::error::{Error, Result};
use crate::grid::Setup;
use crate::real::Real;

/// acc[i] += add[i], in parallel.
fn add_into<O: Real>(acc: &mut [O], add: &[f64]) {
    acc.par_iter_mut()
        .zip(add.par_iter())
        .with_min_len(1 << 14)
        .for_each(|(a, &v)| *a = O::from_f64(a.to_f64() + v));
}

/// Units per piece of the gathers' paced launches (`paced`), carried from one block of
/// channels to the next: targets of the scalar gather, runs of `SPEC_RUN` targets of the
/// spectral one.
struct Piece {
    scalar: usize,
    spectral: usize,
}

/// First pieces: a few waves of thread blocks on a large GPU (the scalar gather has a warp per
/// target, the spectral a block per run), well below `pace::TARGET_MS` unless each target has
/// 10^5 candidates or more; later pieces are scaled from the measured time of the one before.
const FIRST_TARGETS: usize = 1 << 14;
const FIRST_RUNS: usize = 1 << 10;
/// Pieces never grow past 4x the first: the cost of a target is its number of candidates,
/// which can jump from none (a target far from every sample) to 10^5 from one piece to the
/// next, so a piece sized on empty targets must stay short on dense ones.
const MAX_GROWTH: usize = 4;

impl Default for Piece {
    fn default() -> Self {
        Piece {
            scalar: FIRST_TARGETS,
            spectral: FIRST_RUNS,
        }
    }
}

/// Queue `launch(range)` over units `0..total` as launches of bounded GPU time
/// (`backend::cuda::pace`: a cancel poll before each), calling `meanwhile` once, right after
/// the first piece is queued, so that the host's work for the previous block overlaps this
/// one. Every piece but the last is waited for and timed, and the next one scaled towards
/// `pace::TARGET_MS` (at most `MAX_GROWTH` x `first` units): one piece at a time is in flight,
/// so Ctrl-C waits for one piece at most, and a piece sized on cheap targets stops growing at
/// that bound (a host round trip per piece, ~20 us, against pieces of milliseconds).
fn paced(
    gpu: &Gpu,
    total: usize,
    (units, first): (&mut usize, usize),
    mut launch: impl FnMut(Range<usize>) -> Result<()>,
    meanwhile: &mut impl FnMut() -> Result<()>,
) -> Result<()> {
    let mut pacer = Pacer::new(gpu);
    let mut called = false;
    let mut a = 0;
    while a < total {
        pacer.before()?;
        let b = (a + *units).min(total);
        launch(a..b)?;
        pacer.after()?;
        if !called {
            meanwhile()?;
            called = true;
        }
        if b < total {
            *units = pace::next_piece(b - a, pacer.last_ms()?).min(MAX_GROWTH * first);
        }
        a = b;
    }
    if !called {
        meanwhile()?;
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
pub(super) struct Blocks<'a, 'g, O> {
    pub(super) gpu: &'g Gpu,
    pub(super) plan: &'a DevicePlan,
    pub(super) setup: &'a Setup,
    pub(super) tlon: &'a CudaSlice<f64>,
    pub(super) tlat: &'a CudaSlice<f64>,
    pub(super) w_sorted: &'a CudaSlice<f64>,
    pub(super) wv: Option<&'a CudaSlice<f64>>,
    /// Device addresses of the resident rows (data, per-channel weights or 0).
    pub(super) resident: Option<(u64, u64)>,
    /// Resident rows uploaded a block at a time: the event that marks block k's columns up.
    pub(super) ready: &'a [CudaEvent],
    pub(super) slots: &'a [Slot<'g, O>],
    pub(super) flags: &'a CudaSlice<u32>,
    pub(super) wmap: &'a Fenced<'g, f64>,
    pub(super) want_map: bool,
    pub(super) full: bool,
    pub(super) down: &'a Arc<CudaStream>,
    pub(super) nt: usize,
    pub(super) nchan: usize,
    pub(super) cb: usize,
}

impl<O: Real> Blocks<'_, '_, O> {
    /// Gather every block of channels and bring each down while the next one computes. Packed
    /// rows: block k's device rows (data, weights) and the event that marks them uploaded come
    /// through the receiver, and the sender gets an event once its gather is queued.
    pub(super) fn gather_all<T: Real>(
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
        let mut piece = Piece::default();
        for (k, c0) in (0..nchan).step_by(cb).enumerate() {
            let cw = cb.min(nchan - c0);
            let slot = &self.slots[k % 2];
            // While the first piece of this block's gather runs: block 0 maps the cube's pages
            // (a fresh NumPy array would fault them in during the downloads, at half the copy
            // rate), later blocks bring the previous block down.
            let prev = pending.take();
            let mut meanwhile = || -> Result<()> {
                match (&prev, &mut *sink) {
                    (Some(b), sink) => self.fetch(sink, b, &mut fetched),
                    (None, Sink::Finish { cube, .. }) if k == 0 => {
                        prefault(cube);
                        Ok(())
                    }
                    _ => Ok(()),
                }
            };
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
                // Pieces of targets: every pointer moves to the piece's first target.
                let launch_piece = |r: Range<usize>| {
                    let off = (8 * r.start) as u64;
                    let piece = ScalarArgs {
                        tlon: sa.tlon + off,
                        tlat: sa.tlat + off,
                        nt: r.len() as i64,
                        out_u: sa.out_u + off,
                        out_w: sa.out_w + off,
                        ..sa
                    };
                    launch(gpu, "grid_scalar", gather_config(r.len()), &piece)
                };
                let units = (&mut piece.scalar, FIRST_TARGETS);
                paced(gpu, nt, units, launch_piece, &mut meanwhile)?;
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
                    ostride: nt as i64,
                };
                // Pieces of runs of SPEC_RUN targets (the runs a single launch would make):
                // the target pointers move to the piece's first target, the outputs stay rows
                // of `ostride`.
                let launch_piece = |r: Range<usize>| {
                    let (t0, t1) = (r.start * SPEC_RUN, (r.end * SPEC_RUN).min(nt));
                    let off = (8 * t0) as u64;
                    let piece = SpectralArgs {
                        tlon: sa.tlon + off,
                        tlat: sa.tlat + off,
                        nt: (t1 - t0) as i64,
                        out_u: sa.out_u + off,
                        out_w: sa.out_w + off,
                        wmap: if sa.wmap == 0 { 0 } else { sa.wmap + off },
                        ..sa
                    };
                    launch(gpu, &spectral_name, spectral_config(t1 - t0), &piece)
                };
                let runs = nt.div_ceil(SPEC_RUN);
                let units = (&mut piece.spectral, FIRST_RUNS);
                paced(gpu, runs, units, launch_piece, &mut meanwhile)?;
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
    pub(super) k: usize,
    pub(super) c0: usize,
    pub(super) cw: usize,
    pub(super) nt: usize,
    pub(super) nchan: usize,
}

/// What earlier fetches of a Finish call learnt: the map of weight sums shared by all channels
/// (from block 0) and whether some channel's weight sums differ from it.
struct Fetched<O> {
    pub(super) map: Vec<O>,
    pub(super) per_channel: bool,
}

/// Finish outputs of a call in which no sample reaches any target: NaN cube, a zero map.
pub(super) fn finish_empty<O: Real>(sink: Sink<'_, O>, nt: usize) {
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
