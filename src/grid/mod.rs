//! Convolution-based gridding of irregularly placed samples onto target pixels (a WCS map, a
//! list of sightlines or HEALPix pixels), as Cygrid does, computed exactly and deterministically.
//!
//! For every target pixel t and channel c:
//!   unweighted[c, t] = Σ_s K(d(s, t)) · w[s, c] · v[s, c],   weights[c, t] = Σ_s K(d(s, t)) · w[s, c]
//! over the samples s with great-circle distance d < sphere_radius, and cube = unweighted /
//! weights (NaN where no sample contributes). Sums run in f64 in a fixed order (ring by ring,
//! longitude inside a ring), so results do not depend on the thread count.
//!
//! NaN policy: a NaN coordinate drops the sample; a NaN shared weight drops the sample; a NaN
//! value (or per-channel weight) drops that sample for that channel only.
//!
//! Angles: coordinates and kernel widths in degrees at the API, radians inside.
//!
//! Engines: the CPU builds the lookup (`plan`) on the host and gathers per target pixel
//! (`cpu`); the GPU builds the same lookup on the device and gathers there (`cuda`).

mod cpu;
pub mod cuda;
pub mod kernels;
pub mod plan;

use crate::healpix as hpx;

pub use kernels::Kernel;
pub use plan::Plan;

use rayon::prelude::*;

use crate::backend::Device;
use crate::error::{Error, Result};
use crate::real::Real;

/// Per-sample weights, as the user gave them.
#[derive(Clone, Copy)]
pub enum Weights<'a, T> {
    /// All ones.
    Ones,
    /// One weight per sample, shared by all channels (`nsamples`).
    PerSample(&'a [T]),
    /// One weight per sample and channel (`nsamples × nchan`).
    Full(&'a [T]),
}

/// The input samples: coordinates in degrees, data `nsamples × nchan` (row-major).
#[derive(Clone, Copy)]
pub struct Samples<'a, T> {
    pub lon: &'a [f64],
    pub lat: &'a [f64],
    pub data: &'a [T],
    pub nchan: usize,
    pub weights: Weights<'a, T>,
}

impl<T: Real> Samples<'_, T> {
    pub fn len(&self) -> usize {
        self.lon.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lon.is_empty()
    }

    fn check(&self) -> Result<()> {
        let n = self.len();
        if self.lat.len() != n {
            return Err(Error::shape(format!(
                "lons and lats differ in length ({n} and {})",
                self.lat.len()
            )));
        }
        if self.nchan == 0 || self.data.len() != n * self.nchan {
            return Err(Error::shape(format!(
                "data must have {n} x {} elements, got {}",
                self.nchan,
                self.data.len()
            )));
        }
        match self.weights {
            Weights::PerSample(w) if w.len() != n => Err(Error::shape(format!(
                "weights must have {n} elements, got {}",
                w.len()
            ))),
            Weights::Full(w) if w.len() != self.data.len() => Err(Error::shape(format!(
                "weights must have data's shape ({n} x {}), got {} elements",
                self.nchan,
                w.len()
            ))),
            _ => Ok(()),
        }
    }

    /// Whether sample `i` takes part at all (finite coordinates, usable shared weight; with
    /// one channel also a usable value).
    fn keep(&self, i: usize) -> bool {
        if !self.lon[i].is_finite() || !self.lat[i].is_finite() || self.lat[i].abs() > 90.0 {
            return false;
        }
        let w_ok = match self.weights {
            Weights::Ones => true,
            Weights::PerSample(w) => !w[i].to_f64().is_nan(),
            Weights::Full(w) => self.nchan > 1 || !w[i].to_f64().is_nan(),
        };
        w_ok && (self.nchan > 1 || !self.data[i].to_f64().is_nan())
    }
}

/// The kernel and the sphere radius (radians).
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub kernel: Kernel,
    pub radius: f64,
}

impl Setup {
    /// `sphere_radius` in degrees; None means 3σ (σ_maj for gauss2d).
    pub fn new(kernel: Kernel, sphere_radius: Option<f64>) -> Result<Setup> {
        let radius = match sphere_radius {
            None => 3.0 * kernel.sigma,
            Some(r) if r.is_finite() && r > 0.0 && r <= 180.0 => r.to_radians(),
            Some(r) => {
                return Err(Error::value(format!(
                    "sphere_radius must be in (0, 180] degrees, got {r}"
                )))
            }
        };
        Ok(Setup { kernel, radius })
    }
}

/// Add this call's sums into `unweighted` and `weights` (both `nchan × ntargets`, row-major).
/// Target coordinates in degrees; non-finite targets receive nothing.
pub fn accumulate<T: Real, O: Real>(
    device: Device,
    samples: &Samples<'_, T>,
    target_lon: &[f64],
    target_lat: &[f64],
    setup: &Setup,
    unweighted: &mut [O],
    weights: &mut [O],
) -> Result<()> {
    check_call(
        samples,
        target_lon,
        target_lat,
        &[unweighted.len(), weights.len()],
    )?;
    if samples.is_empty() || target_lon.is_empty() {
        return Ok(());
    }
    match device {
        Device::Cpu => cpu_accumulate(samples, target_lon, target_lat, setup, unweighted, weights),
        Device::Cuda(o) => crate::backend::cuda::on(o, || {
            cuda::grid(
                samples,
                target_lon,
                target_lat,
                setup,
                cuda::Sink::Add {
                    unweighted,
                    weights,
                },
            )
        }),
    }
}

/// One call of `skyconv.grid`: `cube` (`nchan × ntargets`, overwritten) and `weights`, the
/// weight sums, computed from these samples alone. `weights` ends with `nchan × ntargets`
/// values, or with `ntargets` when every channel's weight sums are the same (then that map
/// stands for all). Returns the unweighted sums when the engine has them at no cost (the CPU);
/// else they are cube × weights. On the GPU the division and the cast to `O` happen on the
/// device, and only the cube (and the map) come down.
#[allow(clippy::too_many_arguments)]
pub fn grid_once<T: Real, O: Real>(
    device: Device,
    samples: &Samples<'_, T>,
    target_lon: &[f64],
    target_lat: &[f64],
    setup: &Setup,
    cube: &mut [O],
    weights: &mut Vec<O>,
) -> Result<Option<Vec<O>>> {
    check_call(samples, target_lon, target_lat, &[cube.len()])?;
    match device {
        Device::Cuda(o) if !samples.is_empty() && !target_lon.is_empty() => {
            crate::backend::cuda::on(o, || {
                cuda::grid(
                    samples,
                    target_lon,
                    target_lat,
                    setup,
                    cuda::Sink::Finish { cube, weights },
                )
            })?;
            Ok(None)
        }
        _ => {
            // Zeroed pages (no fill before the work: Ctrl-C, issue 17), refused if too large.
            let what = "the weight sums of skyconv.grid (nchan x targets)";
            let mut unweighted = crate::backend::alloc::try_zeros::<O>(cube.len(), what)?;
            *weights = crate::backend::alloc::try_zeros::<O>(cube.len(), what)?;
            if !samples.is_empty() && !target_lon.is_empty() {
                cpu_accumulate(
                    samples,
                    target_lon,
                    target_lat,
                    setup,
                    &mut unweighted,
                    weights,
                )?;
            }
            finish(&unweighted, weights, cube)?;
            Ok(Some(unweighted))
        }
    }
}

/// Shape checks shared by `accumulate` and `grid_once`: every output has `nchan × ntargets`.
fn check_call<T: Real>(
    samples: &Samples<'_, T>,
    target_lon: &[f64],
    target_lat: &[f64],
    outputs: &[usize],
) -> Result<()> {
    samples.check()?;
    let nt = target_lon.len();
    if target_lat.len() != nt {
        return Err(Error::shape("target lons and lats differ in length"));
    }
    if outputs.iter().any(|&len| len != samples.nchan * nt) {
        return Err(Error::shape(format!(
            "outputs must have {} x {nt} elements",
            samples.nchan
        )));
    }
    Ok(())
}

/// The CPU engine: the host plan, then the gather (src/grid/cpu.rs).
fn cpu_accumulate<T: Real, O: Real>(
    samples: &Samples<'_, T>,
    target_lon: &[f64],
    target_lat: &[f64],
    setup: &Setup,
    unweighted: &mut [O],
    weights: &mut [O],
) -> Result<()> {
    let keep: Vec<bool> = (0..samples.len())
        .into_par_iter()
        .with_min_len(4096)
        .map(|i| samples.keep(i))
        .collect();
    let plan = Plan::new(samples.lon, samples.lat, &keep, setup.radius)?;
    drop(keep);
    cpu::accumulate(
        &plan, samples, target_lon, target_lat, setup, unweighted, weights,
    )
}

/// cube = unweighted / weights, NaN where the weight is 0.
pub fn finish<O: Real>(unweighted: &[O], weights: &[O], cube: &mut [O]) -> Result<()> {
    if unweighted.len() != weights.len() || cube.len() != weights.len() {
        return Err(Error::shape("unweighted, weights and cube sizes differ"));
    }
    let stop = crate::backend::cancel::current();
    cube.par_iter_mut()
        .zip(unweighted.par_iter().zip(weights.par_iter()))
        .with_min_len(1 << 14)
        .for_each(|(c, (&u, &w))| {
            if stop.is_set() {
                return;
            }
            let w = w.to_f64();
            *c = O::from_f64(if w == 0.0 { f64::NAN } else { u.to_f64() / w });
        });
    stop.check()
}

/// Centres (lon, lat in degrees) of HEALPix pixels: all of them in RING or NEST order, or the
/// given pixel indices of that scheme.
pub fn healpix_centres(
    nside: u64,
    nest: bool,
    pixels: Option<&[i64]>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    hpx::check_nside(nside, nest)?;
    let npix = hpx::nside2npix(nside);
    if let Some(p) = pixels {
        if let Some(&bad) = p.iter().find(|&&v| v < 0 || v as u64 >= npix) {
            return Err(Error::value(format!(
                "pixel index {bad} is out of range for nside {nside} (0..{npix})"
            )));
        }
    }
    let count = pixels.map_or(npix as usize, |p| p.len());
    let what = format!("the pixel centres of a HEALPix target (nside={nside}, {count} pixels)");
    crate::backend::alloc::check(&what, count, 16)?;
    // Zeroed pages filled a chunk at a time, each chunk after a cancel poll: a cancelled call
    // stops at once, without writing (and faulting in) the rest of the output (issue 17).
    let mut lon = crate::backend::alloc::try_zeros::<f64>(count, &what)?;
    let mut lat = crate::backend::alloc::try_zeros::<f64>(count, &what)?;
    const CHUNK: usize = 4096;
    let stop = crate::backend::cancel::current();
    lon.par_chunks_mut(CHUNK)
        .zip(lat.par_chunks_mut(CHUNK))
        .enumerate()
        .for_each(|(c, (lo, la))| {
            if stop.is_set() {
                return;
            }
            for (j, (lo, la)) in lo.iter_mut().zip(la.iter_mut()).enumerate() {
                let k = c * CHUNK + j;
                let pix = pixels.map_or(k as u64, |p| p[k] as u64);
                let ring = if nest {
                    hpx::nest2ring(nside, pix)
                } else {
                    pix
                };
                let (theta, phi) = hpx::pix2ang_ring(nside, ring);
                (*lo, *la) = (phi.to_degrees(), 90.0 - theta.to_degrees());
            }
        });
    stop.check()?;
    Ok((lon, lat))
}
