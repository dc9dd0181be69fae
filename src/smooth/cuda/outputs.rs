//! The downloads of a batch's output maps, overlapped with the next beam's work on the device.
//!
//! Each output is written into one of one or two device map buffers (two where the budget has
//! room for the second); a `ready` event on the compute stream marks it done. Where the host
//! outputs are page-locked (the pooled output block, `host_pool`) its DMA is queued at once on
//! the copy stream behind that event, and the compute stream only waits (an event, not a host
//! sync) before it writes the same buffer again: the host never blocks between beams and beam
//! k's download runs while beam k + 1's products and inverse FFTs compute. Otherwise (pageable
//! outputs, which need the staging buffers and a host copy) the download of beam k is made by
//! the host after beam k + 1's products are queued ([`Downloads::flush`]), so the two still
//! overlap. The copy stream is synchronised before the value is dropped (also on errors), so the
//! host slices and the device buffers outlive every DMA.

use std::sync::Arc;

use crate::backend::cuda::transfer::prefault;
use crate::backend::cuda::{CudaEvent, CudaSlice, CudaStream, Gpu};
use crate::error::Result;

/// A queued output: (device buffer, output index, its ready event).
type Pending = (usize, usize, CudaEvent);

pub(super) struct Downloads {
    copy: Arc<CudaStream>,
    /// DMA straight into page-locked host outputs, on the copy stream.
    direct: bool,
    /// Per device buffer: the event after its last DMA (direct mode).
    freed: Vec<Option<CudaEvent>>,
    /// Outputs whose kernels are queued and whose download is not (staged mode).
    pending: Vec<Pending>,
}

impl Downloads {
    /// `nbufs` device buffers take turns; `direct`: every host output is page-locked.
    pub fn new(gpu: &Gpu, nbufs: usize, direct: bool) -> Self {
        Downloads {
            copy: gpu.copy.clone(),
            direct,
            freed: (0..nbufs.max(1)).map(|_| None).collect(),
            pending: Vec::new(),
        }
    }

    /// Whether every host output is page-locked (then downloads need no host work).
    pub fn page_locked(gpu: &Gpu, outs: &[&mut [f64]]) -> Result<bool> {
        let mut all = true;
        for o in outs {
            all &= gpu.dma_direct(crate::backend::cuda::transfer::bytes_of(o))?;
        }
        Ok(all)
    }

    /// The buffer the `j`-th output goes to, free for the compute stream to write: its previous
    /// DMA is waited for (an event on the compute stream, direct mode; a host download of the
    /// pending output that holds it, staged mode).
    pub fn buffer(
        &mut self,
        gpu: &Gpu,
        j: usize,
        bufs: &[&CudaSlice<f64>],
        outs: &mut [&mut [f64]],
    ) -> Result<usize> {
        let b = j % self.freed.len();
        if let Some(ev) = self.freed[b].take() {
            gpu.stream.wait(&ev)?;
        }
        if self.pending.iter().any(|p| p.0 == b) {
            self.flush(gpu, bufs, outs)?;
        }
        Ok(b)
    }

    /// Output `out` is queued into buffer `b` on the compute stream: record that, and queue its
    /// DMA now (direct mode) or keep it for [`flush`](Self::flush).
    pub fn queued(
        &mut self,
        gpu: &Gpu,
        b: usize,
        out: usize,
        bufs: &[&CudaSlice<f64>],
        outs: &mut [&mut [f64]],
    ) -> Result<()> {
        let ready = gpu.event()?;
        ready.record(&gpu.stream)?;
        if !self.direct {
            self.pending.push((b, out, ready));
            return Ok(());
        }
        self.copy.wait(&ready)?;
        // SAFETY: `outs[out]` is page-locked (checked by the caller through `page_locked`) and
        // outlives the DMA: the copy stream is synchronised in `finish` or on drop, before the
        // call that owns the outputs returns. The buffer holds at least that many doubles and
        // stays allocated until then (the caller declares it before this value).
        unsafe { gpu.download_async_on(&self.copy, bufs[b], outs[out])? };
        let freed = gpu.event()?;
        freed.record(&self.copy)?;
        self.freed[b] = Some(freed);
        Ok(())
    }

    /// Download the pending outputs (staged mode; nothing to do in direct mode), each after its
    /// ready event, while the compute stream goes on with what is queued behind it.
    pub fn flush(
        &mut self,
        gpu: &Gpu,
        bufs: &[&CudaSlice<f64>],
        outs: &mut [&mut [f64]],
    ) -> Result<()> {
        for (b, out, ready) in std::mem::take(&mut self.pending) {
            let host = &mut *outs[out];
            crate::backend::threads::install(|| prefault(host))?;
            self.copy.wait(&ready)?;
            gpu.download_on(&self.copy, bufs[b], host)?;
        }
        Ok(())
    }

    /// Download what is pending and wait for every DMA.
    pub fn finish(
        mut self,
        gpu: &Gpu,
        bufs: &[&CudaSlice<f64>],
        outs: &mut [&mut [f64]],
    ) -> Result<()> {
        self.flush(gpu, bufs, outs)?;
        self.copy.synchronize()?;
        gpu.ctx.check_err()?;
        Ok(())
    }
}

impl Drop for Downloads {
    fn drop(&mut self) {
        // An error left DMAs queued: they must end before the host outputs and the device
        // buffers can go.
        let _ = self.copy.synchronize();
    }
}
