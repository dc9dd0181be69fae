//! Spherical harmonic transforms on the HEALPix RING grid with healpy's conventions:
//! alm2map (synthesis) and map2alm (analysis with Jacobi iterations), spin 0 and the (T, E, B)
//! ↔ (I, Q, U) transform with spin 2 for polarisation.
//!
//! - `layout`: healpy's alm indexing.
//! - `legendre`: the scaled float64 recurrence (shared maths of both engines).
//! - `cpu`: rayon engine; `cuda`: GPU engine (`kernels/sht.cu`).
//! - `split`: one transform split over several workers (m blocks, all-to-all, ring blocks),
//!   used by `cuda::multi`.
//! - `halves`: the two stages of each transform on blocks of m and of rings (CPU), the building
//!   blocks of distributed transforms.

pub mod cpu;
pub mod cuda;
pub mod halves;
pub mod layout;
pub mod legendre;
mod simd;
pub mod split;

use realfft::num_complex::Complex64 as C64;

use std::borrow::Cow;

use crate::backend::Device;
use crate::error::{Error, Result};
use crate::healpix as hp;
use crate::real::Real;
pub use cpu::{jobs, Job};
pub use layout::AlmLayout;

/// A ring pair: the northern ring and its southern mirror (none for the equator).
#[derive(Debug, Clone, Copy)]
pub struct Pair {
    pub north: usize,
    pub south: Option<usize>,
    /// cos θ of the northern ring (≥ 0).
    pub x: f64,
    /// sin θ.
    pub s: f64,
    /// log2 sin θ (for the quick negligibility test).
    pub log2s: f64,
}

/// Geometry and tables of one transform size.
pub struct Plan {
    pub nside: usize,
    pub npix: usize,
    pub lay: AlmLayout,
    /// All 4·nside−1 rings, north to south.
    pub rings: Vec<hp::Ring>,
    /// 2·nside pairs, pole to equator.
    pub pairs: Vec<Pair>,
    /// Quadrature weight of each ring (4π/npix times the ring weight factor).
    pub weights: Vec<f64>,
    /// Start normalisation of λ_mm (with the Condon–Shortley sign).
    pub norms: Vec<f64>,
    /// log2 |norms|.
    pub log2_norms: Vec<f64>,
    /// ln k! for k ≤ 2·lmax + 1.
    pub ln_fact: Vec<f64>,
    /// The CPU engine's ring FFTs, one per ring.
    ffts: Vec<std::sync::Arc<cpu::RingFft>>,
}

impl Plan {
    /// A plan for maps of `nside` and alm of `lay`. `ring_weights`: a factor per ring
    /// (length 4·nside−1, or 2·nside for the northern half and equator, mirrored), multiplying
    /// the uniform quadrature weight 4π/npix in map2alm; None = 1.
    pub fn new(nside: usize, lay: AlmLayout, ring_weights: Option<&[f64]>) -> Result<Self> {
        hp::check_nside(nside as u64, false)?;
        let npix = hp::nside2npix(nside as u64) as usize;
        let rings = hp::rings(nside as u64);
        let nr = rings.len();
        let pairs = (0..2 * nside)
            .map(|i| {
                let s = nr - 1 - i;
                Pair {
                    north: i,
                    south: (s != i).then_some(s),
                    x: rings[i].z,
                    s: rings[i].sin_theta,
                    log2s: rings[i].sin_theta.log2(),
                }
            })
            .collect();
        let w0 = 4.0 * std::f64::consts::PI / npix as f64;
        let weights = match ring_weights {
            None => vec![w0; nr],
            Some(w) if w.len() == nr => w.iter().map(|f| f * w0).collect(),
            Some(w) if w.len() == 2 * nside => (0..nr).map(|i| w0 * w[i.min(nr - 1 - i)]).collect(),
            Some(w) => {
                return Err(Error::shape(format!(
                    "ring_weights must have 4*nside-1 = {nr} or 2*nside = {} entries, got {}",
                    2 * nside,
                    w.len()
                )))
            }
        };
        if weights.iter().any(|w| !w.is_finite()) {
            return Err(Error::value("ring_weights must be finite"));
        }
        Ok(Plan {
            nside,
            npix,
            lay,
            norms: legendre::mm_norms(lay.mmax),
            log2_norms: legendre::mm_norms(lay.mmax)
                .iter()
                .map(|v| v.abs().log2())
                .collect(),
            ln_fact: legendre::ln_factorials(2 * lay.lmax + 1),
            rings,
            pairs,
            weights,
            ffts: Vec::new(),
        })
    }

    /// The plan with the CPU engine's ring FFTs (the CPU transforms and halves need them).
    pub fn with_ffts(mut self) -> Self {
        self.ffts = self.rings.iter().map(|r| cpu::ring_fft(r.nphi)).collect();
        self
    }
}

/// Ring pairs per chunk forced by SKYCONV_SHT_CHUNK_PAIRS (for testing the chunked paths), else
/// None (each engine sizes chunks by its memory budget).
pub fn forced_chunk_pairs() -> Option<usize> {
    checked_chunk_pairs().ok().flatten()
}

/// SKYCONV_SHT_CHUNK_PAIRS, checked: the transforms read it through here at their entry, so
/// that a bad value is an error naming the variable.
fn checked_chunk_pairs() -> Result<Option<usize>> {
    crate::backend::env::usize_var(
        "SKYCONV_SHT_CHUNK_PAIRS",
        1,
        "a positive integer (ring pairs per chunk)",
    )
}

fn check_inputs(plan: &Plan, jobs: &[Job], nalm: usize, nmap: usize) -> Result<()> {
    for j in jobs {
        let (a, m): (Vec<usize>, Vec<usize>) = match *j {
            Job::Spin0(a, m) => (vec![a], vec![m]),
            Job::Spin2(a, m) => (a.to_vec(), m.to_vec()),
        };
        if a.iter().any(|&a| a >= nalm) || m.iter().any(|&m| m >= nmap) {
            return Err(Error::Internal("job refers to a missing component".into()));
        }
    }
    let _ = plan;
    Ok(())
}

/// Synthesis: `alms` (each `lay.size()` coefficients) to RING maps of `nside` (each npix).
/// `pol`: with three components, (T, E, B) → (I, Q, U) with spin 2 for Q, U; else each is a
/// spin-0 transform.
pub fn alm2map(
    device: Device,
    nside: usize,
    lay: AlmLayout,
    alms: &[&[C64]],
    pol: bool,
    maps: &mut [&mut [f64]],
) -> Result<()> {
    if alms.len() != maps.len() || alms.is_empty() {
        return Err(Error::shape("alm2map: need as many maps as alm arrays"));
    }
    checked_chunk_pairs()?;
    let plan = Plan::new(nside, lay, None)?;
    for a in alms {
        if a.len() != lay.size() {
            return Err(Error::shape(format!(
                "alm has {} coefficients, lmax={} mmax={} needs {}",
                a.len(),
                lay.lmax,
                lay.mmax,
                lay.size()
            )));
        }
    }
    for m in maps.iter() {
        if m.len() != plan.npix {
            return Err(Error::shape(format!(
                "map has {} pixels, nside={nside} needs {}",
                m.len(),
                plan.npix
            )));
        }
    }
    let jobs = jobs(alms.len(), pol);
    check_inputs(&plan, &jobs, alms.len(), maps.len())?;
    match device {
        Device::Cpu => {
            let plan = plan.with_ffts();
            crate::backend::threads::install(|| cpu::alm2map(&plan, &jobs, alms, maps))
        }
        Device::Cuda(o) => crate::backend::cuda::on(o, || cuda::alm2map(&plan, &jobs, alms, maps)),
    }
}

/// Analysis: RING `maps` of `nside` to alm of `lay` with `iter` Jacobi iterations
/// (alm = A(m); repeat: alm += A(m − S(alm))), A using the ring quadrature weights.
#[allow(clippy::too_many_arguments)]
pub fn map2alm<T: Real>(
    device: Device,
    nside: usize,
    lay: AlmLayout,
    maps: &[&[T]],
    pol: bool,
    iter: usize,
    ring_weights: Option<&[f64]>,
    alms: &mut [&mut [C64]],
) -> Result<()> {
    if alms.len() != maps.len() || maps.is_empty() {
        return Err(Error::shape("map2alm: need as many alm arrays as maps"));
    }
    checked_chunk_pairs()?;
    let plan = Plan::new(nside, lay, ring_weights)?;
    for m in maps {
        if m.len() != plan.npix {
            return Err(Error::shape(format!(
                "map has {} pixels, nside={nside} needs {}",
                m.len(),
                plan.npix
            )));
        }
    }
    for a in alms.iter() {
        if a.len() != lay.size() {
            return Err(Error::shape("map2alm: output alm has the wrong size"));
        }
    }
    let jobs = jobs(maps.len(), pol);
    check_inputs(&plan, &jobs, alms.len(), maps.len())?;
    match device {
        Device::Cpu => {
            let plan = plan.with_ffts();
            crate::backend::threads::install(|| {
                let clean: Vec<Cow<[f64]>> = maps.iter().map(|m| clean_map(m)).collect();
                let refs: Vec<&[f64]> = clean.iter().map(|c| &c[..]).collect();
                map2alm_cpu(&plan, &jobs, &refs, iter, alms)
            })
        }
        Device::Cuda(o) => {
            crate::backend::cuda::on(o, || cuda::map2alm(&plan, &jobs, maps, iter, alms))
        }
    }
}

/// healpy's marker of missing pixels.
pub const UNSEEN: f64 = -1.6375e30;

/// healpy's `mask_bad`: |x − UNSEEN| ≤ 1e-8 + 1e-5·|UNSEEN|.
#[inline]
pub fn is_unseen(x: f64) -> bool {
    (x - UNSEEN).abs() <= 1e-8 + 1e-5 * 1.6375e30
}

/// The map as float64 with UNSEEN pixels zeroed: borrowed when it is float64 without UNSEEN
/// pixels, else a parallel copy.
pub fn clean_map<T: Real>(m: &[T]) -> Cow<'_, [f64]> {
    use rayon::prelude::*;
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f64>() {
        // SAFETY: T is f64.
        let m64 = unsafe { std::slice::from_raw_parts(m.as_ptr() as *const f64, m.len()) };
        if !m64.par_iter().any(|&v| is_unseen(v)) {
            return Cow::Borrowed(m64);
        }
    }
    Cow::Owned(
        m.par_iter()
            .map(|v| {
                let x = v.to_f64();
                if is_unseen(x) {
                    0.0
                } else {
                    x
                }
            })
            .collect(),
    )
}

fn map2alm_cpu(plan: &Plan, jobs: &[Job], maps: &[&[f64]], iter: usize, alms: &mut [&mut [C64]]) {
    cpu::map2alm(plan, jobs, maps, alms);
    let stop = crate::backend::cancel::current();
    if iter == 0 || stop.is_set() {
        return;
    }
    let nc = maps.len();
    let mut resid: Vec<Vec<f64>> = (0..nc).map(|_| vec![0.0; plan.npix]).collect();
    let mut delta: Vec<Vec<C64>> = (0..nc)
        .map(|_| vec![C64::new(0.0, 0.0); plan.lay.size()])
        .collect();
    for _ in 0..iter {
        if stop.is_set() {
            return;
        }
        {
            let a: Vec<&[C64]> = alms.iter().map(|a| &a[..]).collect();
            let mut r: Vec<&mut [f64]> = resid.iter_mut().map(|r| &mut r[..]).collect();
            cpu::alm2map(plan, jobs, &a, &mut r);
        }
        if stop.is_set() {
            return;
        }
        use rayon::prelude::*;
        for (r, m) in resid.iter_mut().zip(maps) {
            r.par_iter_mut()
                .zip(m.par_iter())
                .for_each(|(r, m)| *r = m - *r);
        }
        {
            let r: Vec<&[f64]> = resid.iter().map(|r| &r[..]).collect();
            let mut d: Vec<&mut [C64]> = delta.iter_mut().map(|d| &mut d[..]).collect();
            cpu::map2alm(plan, jobs, &r, &mut d);
        }
        for (a, d) in alms.iter_mut().zip(&delta) {
            a.par_iter_mut()
                .zip(d.par_iter())
                .for_each(|(a, d)| *a += d);
        }
    }
}
