//! Paced GPU work: one long computation cut into launches of bounded time, so that Ctrl-C (the
//! call's cancel token, `backend::cancel`) stops it within about a second (issue 17). A single
//! launch cannot be stopped once queued, and a host thread blocked in a stream sync cannot poll
//! the token, so a long call must both cut its work and keep little of it queued.
//!
//! [`Pacer`] keeps at most [`DEPTH`] pieces queued ahead of the GPU: before each launch it polls
//! the token and waits for the piece `DEPTH` back (an event, not a stream sync). After a
//! cancel, what is left to finish on the device is at most `DEPTH` pieces. [`run`] also sizes
//! the pieces: it starts small and grows or shrinks them from the measured time of each piece
//! (event timing), towards [`TARGET_MS`] per piece.

use std::collections::VecDeque;
use std::ops::Range;

use super::{CudaEvent, Gpu};
use crate::backend::cancel;
use crate::error::Result;

/// Pieces queued ahead of the GPU at most.
pub const DEPTH: usize = 2;
/// Aimed-for GPU time of one piece (ms): cancel latency is about `DEPTH` pieces.
pub const TARGET_MS: f64 = 60.0;

/// Polls the cancel token between launches and bounds the queued work (see the module doc).
pub struct Pacer<'g> {
    gpu: &'g Gpu,
    /// Timed events on the kernel stream: the first marks the start of the oldest piece still
    /// queued, each next one the end of a piece (so `len() - 1` pieces are in flight).
    events: VecDeque<CudaEvent>,
}

impl<'g> Pacer<'g> {
    pub fn new(gpu: &'g Gpu) -> Self {
        Pacer {
            gpu,
            events: VecDeque::new(),
        }
    }

    /// Call before queuing a piece: `Err(Cancelled)` once the call is cancelled; first waits
    /// (on an event) until fewer than [`DEPTH`] pieces are queued.
    pub fn before(&mut self) -> Result<()> {
        cancel::check()?;
        if self.events.is_empty() {
            self.events.push_back(self.record()?);
        }
        while self.events.len() > DEPTH {
            self.events[1].synchronize()?;
            self.events.pop_front();
            cancel::check()?;
        }
        Ok(())
    }

    /// Call after queuing a piece (records its end; no wait).
    pub fn after(&mut self) -> Result<()> {
        let ev = self.record()?;
        self.events.push_back(ev);
        Ok(())
    }

    /// [`after`](Self::after), then wait for the piece and return its GPU time in ms (from the
    /// end of the piece before; an idle gap in between counts too, which only errs short).
    pub fn after_timed(&mut self) -> Result<f64> {
        self.after()?;
        self.last_ms()
    }

    /// Wait for the piece queued last (after [`after`](Self::after)) and return its GPU time
    /// in ms, as [`after_timed`](Self::after_timed) does: for a caller that does host work
    /// between queuing a piece and timing it.
    pub fn last_ms(&mut self) -> Result<f64> {
        let n = self.events.len();
        let ms = if n >= 2 {
            self.events[n - 2].elapsed_ms(&self.events[n - 1])? as f64
        } else {
            0.0
        };
        // Everything queued has finished: keep only the last event, as the next start.
        self.events.drain(..n - 1);
        Ok(ms)
    }

    fn record(&self) -> Result<CudaEvent> {
        let ev = self
            .gpu
            .ctx
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        ev.record(&self.gpu.stream)?;
        Ok(ev)
    }
}

/// Pieces timed (a wait each) at the start, while the piece size settles; after them one in
/// `TIME_EVERY` is timed and the others only queue an event.
const SETTLE: usize = 4;
const TIME_EVERY: usize = 4;

/// Run `total` units of work as launches of whole units, `launch(range)` queuing one piece on
/// `gpu.stream`. The first piece has `first` units (a guess that should take well under
/// [`TARGET_MS`]); later pieces are scaled from measured times towards `TARGET_MS` (at most 4×
/// up or down per step). Polls the cancel token before every launch; at most [`DEPTH`] pieces
/// are queued, so a cancelled call leaves at most that much work to finish on the device.
pub fn run(
    gpu: &Gpu,
    total: usize,
    first: usize,
    mut launch: impl FnMut(Range<usize>) -> Result<()>,
) -> Result<()> {
    let mut pacer = Pacer::new(gpu);
    let mut piece = first.clamp(1, total.max(1));
    let (mut a, mut k) = (0, 0);
    while a < total {
        pacer.before()?;
        let b = (a + piece).min(total);
        launch(a..b)?;
        if b < total && (k < SETTLE || k % TIME_EVERY == 0) {
            let ms = pacer.after_timed()?;
            piece = next_piece(b - a, ms);
        } else {
            pacer.after()?;
        }
        a = b;
        k += 1;
    }
    Ok(())
}

/// The next piece's units after `units` took `ms` (scaled towards [`TARGET_MS`], 4× at most).
pub fn next_piece(units: usize, ms: f64) -> usize {
    let scale = if ms > 0.0 { TARGET_MS / ms } else { 4.0 };
    ((units as f64 * scale.clamp(0.25, 4.0)) as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_grow_and_shrink_towards_the_target() {
        assert_eq!(next_piece(100, 0.0), 400);
        assert_eq!(next_piece(100, TARGET_MS / 10.0), 400);
        assert_eq!(next_piece(100, TARGET_MS / 2.0), 200);
        assert_eq!(next_piece(100, TARGET_MS), 100);
        assert_eq!(next_piece(100, TARGET_MS * 100.0), 25);
        assert_eq!(next_piece(1, TARGET_MS * 100.0), 1);
    }
}
