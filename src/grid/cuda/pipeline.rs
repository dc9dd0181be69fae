//! One call that fits the budget, end to end (`run`): the uploads, the device plan, the
//! spectral rows resident or packed block by block on the copy stream (`upload_blocks`,
//! `pack_block`) while a second thread queues the gathers (`gather`).

use std::mem::size_of;
use std::sync::mpsc;

use rayon::prelude::*;

use super::args::{launch, GatherArgs, MAX_BLOCKS, MAX_CW};
use super::budget::Layout;
use super::buffers::{Fenced, Slot};
use super::gather::{finish_empty, Blocks};
use super::plan::DevicePlan;
use super::{shared_weights, Sink};
use crate::backend::cuda::profile::Timeline;
use crate::backend::cuda::transfer::bytes_of;
use crate::backend::cuda::{grid_stride, CudaEvent, Gpu};
use crate::error::{Error, Result};
use crate::grid::plan::nside_for;
use crate::grid::{Samples, Setup, Weights};
use crate::real::Real;

/// Copy packed elements `e0 .. e0 + dst.len()` of the `n × cw` block of channels
/// `c0 .. c0 + cw` of `src` (rows of `nchan`) into `dst`.
fn pack_block<T: Copy + Send + Sync>(
    src: &[T],
    nchan: usize,
    c0: usize,
    cw: usize,
    e0: usize,
    dst: &mut [T],
) {
    // A partial first row, then whole rows (the last one maybe partial).
    let head = ((cw - e0 % cw) % cw).min(dst.len());
    let (first, rest) = dst.split_at_mut(head);
    if head > 0 {
        let (r, c) = (e0 / cw, e0 % cw);
        let s = r * nchan + c0 + c;
        first.copy_from_slice(&src[s..s + head]);
    }
    let r0 = (e0 + head) / cw;
    // Tasks of about 256 KiB: row pieces are short (cw values), so finer tasks cost more in
    // scheduling than they gain in balance.
    let rows_per_task = ((256 << 10) / (cw * size_of::<T>()).max(1)).max(1);
    rest.par_chunks_mut(cw)
        .enumerate()
        .with_min_len(rows_per_task)
        .for_each(|(j, row)| {
            let s = (r0 + j) * nchan + c0;
            row.copy_from_slice(&src[s..s + row.len()]);
        });
}

/// Grid all of `s` in one go (the plan and a layout that fit the budget).
pub(super) fn run<T: Real, O: Real>(
    gpu: &Gpu,
    s: &Samples<'_, T>,
    target_lon: &[f64],
    target_lat: &[f64],
    setup: &Setup,
    mut sink: Sink<'_, O>,
    layout: Layout,
) -> Result<()> {
    let (n, nt, nchan) = (s.len(), target_lon.len(), s.nchan);
    if n == 0 || nt == 0 {
        finish_empty(sink, nt);
        return Ok(());
    }
    let mut tl = Timeline::start(gpu)?;
    let lon = gpu.upload(s.lon)?;
    let lat = gpu.upload(s.lat)?;
    let tlon = gpu.upload(target_lon)?;
    let tlat = gpu.upload(target_lat)?;
    let shared = shared_weights(s).map(|w| gpu.upload(w)).transpose()?;
    let scalar = if nchan == 1 {
        Some(gpu.upload(s.data)?)
    } else {
        None
    };
    tl.mark(gpu, "h2d")?;
    // Buffers that DMAs on the copy stream use, allocated before any kernel is queued: the
    // allocations are ordered on the compute stream, so the copy stream waits for them (and for
    // nothing else yet) before it may touch them.
    let full = match s.weights {
        Weights::Full(w) if nchan > 1 => Some(w),
        _ => None,
    };
    let cb = if nchan == 1 {
        1
    } else {
        match layout {
            Layout::Resident => nchan.min(MAX_CW),
            Layout::Packed { cb } => cb.clamp(1, MAX_CW),
        }
    };
    // SAFETY (allocations below): the resident rows are fully written by their uploads; each
    // packed block's upload writes the n·cw elements its gather reads; the gather writes all
    // cw·nt sums of a block and the finish kernel all its outputs before they are downloaded,
    // and only those cw·nt elements are downloaded.
    let resident_rows = nchan > 1 && layout == Layout::Resident;
    let rows_len = if resident_rows { n * nchan } else { n * cb };
    let mut rows: Vec<(Fenced<'_, T>, Option<Fenced<'_, T>>)> = Vec::new();
    if nchan > 1 {
        for _ in 0..if resident_rows { 1 } else { 2 } {
            let d = unsafe { Fenced::<T>::alloc(gpu, rows_len)? };
            let w = match full {
                Some(_) => Some(unsafe { Fenced::<T>::alloc(gpu, rows_len)? }),
                None => None,
            };
            rows.push((d, w));
        }
    }
    let finish = matches!(sink, Sink::Finish { .. });
    let mut slots: Vec<Slot<'_, O>> = Vec::new();
    for _ in 0..2 {
        let slot = unsafe {
            Slot {
                su: Fenced::alloc(gpu, cb * nt)?,
                sw: Fenced::alloc(gpu, cb * nt)?,
                out: if finish {
                    Some([Fenced::alloc(gpu, cb * nt)?, Fenced::alloc(gpu, cb * nt)?])
                } else {
                    None
                },
                ready: gpu.event()?,
            }
        };
        slots.push(slot);
    }
    // Per block: how many threads saw a NaN value or weight (then its weight sums differ
    // between channels). The map of weight sums shared by all channels, written by block 0.
    let nblocks = nchan.div_ceil(cb);
    let flags = gpu.alloc_zeros::<u32>(nblocks)?;
    let want_map = finish && nchan > 1 && full.is_none();
    // SAFETY: block 0's gather writes all nt entries before they are downloaded.
    let wmap = unsafe { Fenced::<f64>::alloc(gpu, if want_map { nt } else { 1 })? };
    let allocated = gpu.event()?;
    allocated.record(&gpu.stream)?;
    gpu.copy.wait(&allocated)?;
    let wcheck = shared.as_ref().map_or(0, |w| gpu.dptr(w));
    let vcheck = scalar.as_ref().map_or(0, |v| gpu.dptr(v));
    let plan = DevicePlan::build::<T>(gpu, &lon, &lat, n, vcheck, wcheck, nside_for(setup.radius))?;
    let Some(plan) = plan else {
        // No sample is kept: zero sums.
        finish_empty(sink, nt);
        tl.finish()?;
        return gpu.sync();
    };
    drop((lon, lat));
    let kept = plan.kept;
    // Per-sample values in sorted order: (w·v, w) with one channel, else the shared weight.
    // SAFETY: grid_gather writes all `kept` entries.
    let wv = if nchan == 1 {
        Some(unsafe { gpu.alloc::<f64>(kept)? })
    } else {
        None
    };
    let w_sorted = unsafe { gpu.alloc::<f64>(kept)? };
    let gather = GatherArgs {
        order: gpu.dptr(&plan.order),
        data: vcheck,
        weight: wcheck,
        wv: wv.as_ref().map_or(0, |b| gpu.dptr(b)),
        w: gpu.dptr(&w_sorted),
        n: kept as i64,
    };
    let gather_name = format!("grid_gather_{}", T::CUDA);
    launch(gpu, &gather_name, grid_stride(kept, MAX_BLOCKS), &gather)?;
    drop((shared, scalar));
    tl.mark(gpu, "plan")?;

    // All spectral rows go up now, on the copy stream, while the plan kernels run. Page-locked
    // rows go up by 2-D DMAs a block of channels at a time, each marked by an event, so that
    // the gather of block k waits for its own columns only; other rows in one upload.
    let mut ready: Vec<CudaEvent> = Vec::new();
    if resident_rows {
        let (d, w) = &mut rows[0];
        let locked = gpu.dma_direct(bytes_of(s.data))?
            && match full {
                Some(wsrc) => gpu.dma_direct(bytes_of(wsrc))?,
                None => true,
            };
        if locked && nchan > cb {
            let sz_t = size_of::<T>();
            for c0 in (0..nchan).step_by(cb) {
                crate::backend::cancel::check()?;
                let cw = cb.min(nchan - c0);
                // SAFETY: the rows are page-locked (checked), belong to the caller for the
                // whole call, and the copy stream is synchronised before `run` returns (also
                // on errors: `Fenced` buffers synchronise it when dropped); the device rows hold
                // n·nchan elements.
                unsafe {
                    gpu.upload_columns_async(
                        &gpu.copy,
                        bytes_of(s.data),
                        d.ptr(),
                        nchan,
                        sz_t,
                        c0,
                        cw,
                    )?;
                    if let (Some(wb), Some(wsrc)) = (w.as_ref(), full) {
                        gpu.upload_columns_async(
                            &gpu.copy,
                            bytes_of(wsrc),
                            wb.ptr(),
                            nchan,
                            sz_t,
                            c0,
                            cw,
                        )?;
                    }
                }
                let ev = gpu.event()?;
                ev.record(&gpu.copy)?;
                ready.push(ev);
            }
        } else {
            gpu.upload_into_on(&gpu.copy, s.data, &mut d.buf)?;
            if let (Some(wb), Some(wsrc)) = (w.as_mut(), full) {
                gpu.upload_into_on(&gpu.copy, wsrc, &mut wb.buf)?;
            }
            let ev = gpu.event()?;
            ev.record(&gpu.copy)?;
            gpu.stream.wait(&ev)?;
            tl.mark(gpu, "h2d")?;
        }
    }
    let packed: Vec<(u64, u64)> = if resident_rows {
        Vec::new()
    } else {
        rows.iter()
            .map(|(d, w)| (d.ptr(), w.as_ref().map_or(0, |b| b.ptr())))
            .collect()
    };
    // The blocks come down on a stream of their own, so that they do not queue behind the
    // packed uploads on the copy stream (the two directions use separate copy engines).
    let down = gpu.ctx.new_stream()?;
    let blocks = Blocks {
        gpu,
        plan: &plan,
        setup,
        tlon: &tlon,
        tlat: &tlat,
        w_sorted: &w_sorted,
        wv: wv.as_ref(),
        resident: rows
            .first()
            .filter(|_| resident_rows)
            .map(|(d, w)| (d.ptr(), w.as_ref().map_or(0, |b| b.ptr()))),
        ready: &ready,
        slots: &slots,
        flags: &flags,
        wmap: &wmap,
        want_map,
        full: full.is_some(),
        down: &down,
        nt,
        nchan,
        cb,
    };
    let done = if packed.is_empty() {
        blocks.gather_all::<T>(&mut sink, &mut tl, None)
    } else {
        // Packed: this thread packs and uploads the blocks while a second one queues the
        // gathers and brings the results down, so the host repacks block k + 1 whatever the
        // gather of block k waits for. The packing stays here, on skyconv's pool: a pool
        // worker runs its own parallel loops, so it cannot wait on workers that are busy
        // elsewhere. The second thread's few parallel loops (copies of the map, a staged
        // download) run on rayon's global pool.
        std::thread::scope(|sc| {
            let (up_tx, up_rx) = mpsc::channel();
            let (free_tx, free_rx) = mpsc::channel();
            let (blocks, sink, tl) = (&blocks, &mut sink, &mut tl);
            // The call's cancel token is thread-local: the gathers poll it from this thread.
            let token = crate::backend::cancel::current();
            let consumer = sc.spawn(move || {
                let _entered = crate::backend::cancel::enter(token);
                gpu.ctx.bind_to_thread()?;
                blocks.gather_all::<T>(sink, tl, Some((&up_rx, free_tx)))
            });
            // On an error here `up_tx` is dropped, which stops the gathers.
            let produced = upload_blocks(gpu, s.data, full, nchan, cb, &packed, up_tx, free_rx);
            let gathered = consumer.join().unwrap_or_else(|_| {
                Err(Error::Internal(
                    "the gathers of packed channel blocks panicked".into(),
                ))
            });
            // A failed upload is the cause of a failed gather, so its error comes first.
            produced.and(gathered)
        })
    };
    let _ = down.synchronize();
    done?;
    tl.finish()?;
    gpu.copy.synchronize()?;
    gpu.sync()
}

/// Pack and upload the channel blocks of `data` (and of the per-channel weights `full`) on the
/// copy stream, block k into the device rows `bufs[k % 2]` (data, weights) once the gather of
/// block k - 2 is done with them (its event comes through `freed`); after each block, send an
/// event that marks it uploaded. Stops quietly when the gathers stop listening.
#[allow(clippy::too_many_arguments)]
fn upload_blocks<T: Real>(
    gpu: &Gpu,
    data: &[T],
    full: Option<&[T]>,
    nchan: usize,
    cb: usize,
    bufs: &[(u64, u64)],
    uploaded: mpsc::Sender<(u64, u64, CudaEvent)>,
    freed: mpsc::Receiver<CudaEvent>,
) -> Result<()> {
    gpu.ctx.bind_to_thread()?;
    let n = data.len() / nchan;
    let sz_t = size_of::<T>();
    for (k, c0) in (0..nchan).step_by(cb).enumerate() {
        crate::backend::cancel::check()?;
        let cw = cb.min(nchan - c0);
        if k >= 2 {
            let Ok(ev) = freed.recv() else {
                return Ok(());
            };
            // Only the DMAs wait for the gather: the host packs meanwhile.
            gpu.copy.wait(&ev)?;
        }
        let (d, w) = bufs[k % 2];
        let up = |dst: u64, src: &[T]| -> Result<()> {
            // SAFETY: dst holds n·cb >= n·cw elements of T, in a Fenced buffer of the caller
            // that outlives this thread and synchronises the copy stream before it is freed.
            unsafe {
                gpu.upload_with(&gpu.copy, dst, n * cw * sz_t, |off, stage| {
                    // SAFETY: staging buffers are page-aligned and chunk offsets are multiples
                    // of 32 MiB, so `stage` holds whole T values.
                    let typed = std::slice::from_raw_parts_mut(
                        stage.as_mut_ptr() as *mut T,
                        stage.len() / sz_t,
                    );
                    pack_block(src, nchan, c0, cw, off / sz_t, typed);
                })
            }
        };
        up(d, data)?;
        if let Some(wsrc) = full {
            up(w, wsrc)?;
        }
        let ev = gpu.event()?;
        ev.record(&gpu.copy)?;
        if uploaded.send((d, w, ev)).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_block_matches_a_plain_repack() {
        let (n, nchan) = (37, 11);
        let src: Vec<u32> = (0..(n * nchan) as u32).collect();
        for (c0, cw) in [(0, 11), (0, 4), (3, 5), (10, 1), (8, 3)] {
            let want: Vec<u32> = (0..n)
                .flat_map(|r| (0..cw).map(move |c| (r * nchan + c0 + c) as u32))
                .collect();
            // Every split of the packed array into two pieces, as the staging chunks do.
            for cut in [0, 1, cw - 1, cw, 5 * cw + 2, n * cw] {
                let cut = cut.min(n * cw);
                let mut got = vec![u32::MAX; n * cw];
                let (a, b) = got.split_at_mut(cut);
                pack_block(&src, nchan, c0, cw, 0, a);
                pack_block(&src, nchan, c0, cw, cut, b);
                assert_eq!(got, want, "c0={c0} cw={cw} cut={cut}");
            }
        }
    }
}
