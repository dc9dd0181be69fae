//! Host transfers of the CUDA SHT overlapped with its kernels. A call processes its ring pairs
//! in chunks; the map pixels of a chunk go up (map2alm) just before its kernels are queued, or
//! come down (alm2map) while the next chunk computes, on the GPU's copy stream and fenced by
//! events, so the PCIe time hides behind the Legendre stage.

use super::MODULE;
use crate::backend::cuda::{CudaEvent, CudaSlice, Gpu, LaunchConfig, PushKernelArg};
use crate::error::Result;
use crate::real::Real;
use crate::sht::Plan;

/// What a chunk loop does around each chunk's kernels.
pub(super) trait ChunkIo {
    /// Before the kernels of pairs p0..p0+np are queued: their pixels must be on the device.
    fn before(
        &mut self,
        _: &Gpu,
        _: &Plan,
        _p0: usize,
        _np: usize,
        _: &mut [CudaSlice<f64>],
    ) -> Result<()> {
        Ok(())
    }
    /// After they are queued.
    fn after(
        &mut self,
        _: &Gpu,
        _: &Plan,
        _p0: usize,
        _np: usize,
        _: &[CudaSlice<f64>],
    ) -> Result<()> {
        Ok(())
    }
    /// After the last chunk.
    fn finish(&mut self, _: &Gpu, _: &Plan, _: &[CudaSlice<f64>]) -> Result<()> {
        Ok(())
    }
}

/// Nothing around the chunks (inputs already resident, outputs stay on the device).
pub(super) struct Resident;
impl ChunkIo for Resident {}

/// Pixel ranges [a, b) of the rings of pairs p0..p0+np: northern rings, then their southern
/// mirrors (the equator, which has no mirror, counted once; the second range may be empty).
pub(super) fn pixel_ranges(plan: &Plan, p0: usize, np: usize) -> [(usize, usize); 2] {
    let last = plan.rings.len() - 1; // ring 4·nside − 2
    let equator = last / 2;
    let end = |r: usize| plan.rings[r].first as usize + plan.rings[r].nphi;
    let p1 = p0 + np - 1;
    let north = (plan.rings[p0].first as usize, end(p1));
    let (s_lo, s_hi) = ((last - p1).max(equator + 1), last - p0);
    let south = if s_lo <= s_hi {
        (plan.rings[s_lo].first as usize, end(s_hi))
    } else {
        (north.1, north.1)
    };
    [north, south]
}

/// Downloads each chunk's pixels of the device maps into the host maps. Every chunk's kernels
/// are queued first (the host never holds the compute stream up); then the chunks come down in
/// order, each as soon as its kernels are done, while the later ones compute.
pub(super) struct MapDownload<'h, 'm> {
    pub hosts: &'h mut [&'m mut [f64]],
    done: Vec<(usize, usize, CudaEvent)>,
}

impl<'h, 'm> MapDownload<'h, 'm> {
    pub fn new(hosts: &'h mut [&'m mut [f64]]) -> Self {
        MapDownload {
            hosts,
            done: Vec::new(),
        }
    }
}

impl ChunkIo for MapDownload<'_, '_> {
    fn after(
        &mut self,
        gpu: &Gpu,
        _: &Plan,
        p0: usize,
        np: usize,
        _: &[CudaSlice<f64>],
    ) -> Result<()> {
        let ready = gpu.event()?;
        ready.record(&gpu.stream)?;
        self.done.push((p0, np, ready));
        Ok(())
    }

    fn finish(&mut self, gpu: &Gpu, plan: &Plan, maps: &[CudaSlice<f64>]) -> Result<()> {
        for (p0, np, ready) in self.done.drain(..) {
            gpu.copy.wait(&ready)?;
            for (d, h) in maps.iter().zip(self.hosts.iter_mut()) {
                for (a, b) in pixel_ranges(plan, p0, np) {
                    if a < b {
                        gpu.download_at_on(&gpu.copy, d, a, &mut h[a..b])?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Uploads each chunk's pixels of the host maps (float32 or float64) just before its kernels,
/// converting to float64 with UNSEEN pixels zeroed on the device.
pub(super) struct MapUpload<'h, T: Real> {
    hosts: &'h [&'h [T]],
    /// float32 maps land here before the conversion (unused for float64).
    raw: Vec<CudaSlice<T>>,
    uploaded: Vec<bool>,
}

impl<'h, T: Real> MapUpload<'h, T> {
    /// `maps`: the device maps the pixels go to (allocated by the caller).
    pub fn new(gpu: &Gpu, plan: &Plan, hosts: &'h [&'h [T]]) -> Result<Self> {
        let raw = if T::CUDA == "f64" {
            Vec::new()
        } else {
            // SAFETY: each chunk's ranges are written before the conversion reads them.
            hosts
                .iter()
                .map(|_| unsafe { gpu.alloc::<T>(plan.npix) })
                .collect::<Result<_>>()?
        };
        Ok(MapUpload {
            hosts,
            raw,
            uploaded: vec![false; plan.pairs.len()],
        })
    }
}

fn clean_cfg(n: usize) -> LaunchConfig {
    crate::backend::cuda::grid_stride(n, 65535 * 16)
}

impl<T: Real> ChunkIo for MapUpload<'_, T> {
    fn before(
        &mut self,
        gpu: &Gpu,
        plan: &Plan,
        p0: usize,
        np: usize,
        maps: &mut [CudaSlice<f64>],
    ) -> Result<()> {
        if self.uploaded[p0] {
            return Ok(());
        }
        self.uploaded[p0] = true;
        let ranges = pixel_ranges(plan, p0, np);
        for (c, h) in self.hosts.iter().enumerate() {
            for &(a, b) in &ranges {
                if a == b {
                    continue;
                }
                if T::CUDA == "f64" {
                    // SAFETY: T is f64 here.
                    let hf: &[f64] =
                        unsafe { std::slice::from_raw_parts(h.as_ptr() as *const f64, h.len()) };
                    gpu.upload_at_on(&gpu.copy, &hf[a..b], &mut maps[c], a)?;
                } else {
                    gpu.upload_at_on(&gpu.copy, &h[a..b], &mut self.raw[c], a)?;
                }
            }
        }
        let ready = gpu.event()?;
        ready.record(&gpu.copy)?;
        gpu.stream.wait(&ready)?;
        for (c, map) in maps.iter_mut().enumerate().take(self.hosts.len()) {
            for &(a, b) in &ranges {
                if a == b {
                    continue;
                }
                let n = (b - a) as i64;
                if T::CUDA == "f64" {
                    super::launch::clean_f64(gpu, &gpu.stream, &mut map.slice_mut(a..b))?;
                } else {
                    let f = gpu.function(MODULE, "clean_f32")?;
                    let mut l = gpu.stream.launch_builder(&f);
                    let src = self.raw[c].slice(a..b);
                    let mut view = map.slice_mut(a..b);
                    l.arg(&src).arg(&mut view).arg(&n);
                    // SAFETY: matches clean_f32; both views hold n values.
                    unsafe { l.launch(clean_cfg(b - a)) }?;
                }
            }
        }
        Ok(())
    }
}
