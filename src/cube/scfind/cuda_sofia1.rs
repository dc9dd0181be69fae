//! SoFiA 1's histogram noise fits (`rmsMode` "negative" and "gauss") on the GPU engine's
//! sample: the histograms are counted where the sample lies (`sc_edge_histogram`), so only
//! the bin edges go up and the counts come down, not the ~10⁶-value sample each kernel; the
//! fit itself is the host's (`stats::sofia1::sofia1_fit`), on the same counts.

use crate::backend::cuda::{grid_stride, CudaSlice, Gpu, PushKernelArg};
use crate::cube::stats::sofia1::Binned;
use crate::error::{Error, Result};

/// Blocks of `sc_edge_histogram` at most.
const MAX_BLOCKS: usize = 1024;

/// The first `n` values of a sample on the device.
pub(super) struct DeviceSample<'a> {
    pub gpu: &'a Gpu,
    pub values: &'a CudaSlice<f64>,
    pub n: usize,
}

impl Binned for DeviceSample<'_> {
    fn histogram(&self, edges: &[f64]) -> Result<Vec<u64>> {
        let nb = edges.len().saturating_sub(1);
        if nb == 0 {
            return Ok(Vec::new());
        }
        let bins = i32::try_from(nb)
            .map_err(|_| Error::Internal(format!("{nb} histogram bins: too many")))?;
        let gpu = self.gpu;
        let d_edges = gpu.upload(edges)?;
        let mut counts = gpu.alloc_zeros::<u64>(nb)?;
        let f = gpu.function("scfind", "sc_edge_histogram")?;
        let n = self.n as i64;
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(self.values)
            .arg(&n)
            .arg(&d_edges)
            .arg(&bins)
            .arg(&mut counts);
        // SAFETY: arguments match sc_edge_histogram in kernels/scfind.cu; `values` holds at
        // least n values, `d_edges` nb + 1 ascending edges, `counts` nb zeroed counts.
        unsafe { b.launch(grid_stride(self.n, MAX_BLOCKS)) }?;
        let mut host = vec![0u64; nb];
        gpu.download(&counts, &mut host)?;
        Ok(host)
    }
}
