//! The device buffers of a call that DMAs on the copy stream may touch (`Fenced`), and the
//! per-block result slots built from them.

use crate::backend::cuda::{CudaEvent, CudaSlice, DeviceRepr, Gpu};
use crate::error::Result;

/// A device buffer that DMAs on the copy stream may use: dropping it first waits for that
/// stream, so an early return can never free memory a queued copy still touches.
pub(super) struct Fenced<'g, T> {
    pub(super) gpu: &'g Gpu,
    pub(super) buf: CudaSlice<T>,
}

impl<'g, T: DeviceRepr> Fenced<'g, T> {
    /// `len` elements, uninitialised.
    ///
    /// # Safety
    /// Every element is written before it is read.
    pub(super) unsafe fn alloc(gpu: &'g Gpu, len: usize) -> Result<Self> {
        Ok(Fenced {
            gpu,
            buf: unsafe { gpu.alloc::<T>(len)? },
        })
    }

    pub(super) fn ptr(&self) -> u64 {
        self.gpu.dptr(&self.buf)
    }
}

impl<T> Drop for Fenced<'_, T> {
    fn drop(&mut self) {
        let _ = self.gpu.copy.synchronize();
    }
}

/// One slot of per-block results: f64 sums and (Finish) the two outputs, with the event
/// that marks them complete.
pub(super) struct Slot<'g, O> {
    pub(super) su: Fenced<'g, f64>,
    pub(super) sw: Fenced<'g, f64>,
    /// cube, weights.
    pub(super) out: Option<[Fenced<'g, O>; 2]>,
    pub(super) ready: CudaEvent,
}
