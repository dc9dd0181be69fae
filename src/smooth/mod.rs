//! Smoothing on the sphere by real-space convolution with a radial kernel: the ring-FFT method
//! (ARKCoS, Elsner & Wandelt 2011) on HEALPix RING maps.
//!
//! s(q) = Σ_p K(γ_pq) r(p) · 4π/npix. For output ring i and input ring j (θ, nphi, φ0 from
//! `healpix::ring`), δ_ij = φ0_i − φ0_j and G_ij(x) = K(γ(θ_i, θ_j, x + δ_ij)):
//! s_i(φ0_i + 2πa/n_i) = Σ_j Σ_b G_ij(2πa/n_i − 2πb/n_j) r_j(b). G_ij is sampled at L_i points
//! x_k = 2πk/L_i (zero outside the kernel's support), real-FFT'd, multiplied by the input
//! ring's spectrum R_j(m mod n_j) (replicated periodically), summed over the rings j within θcut,
//! folded modulo n_i into the half spectrum and inverse-FFT'd at length n_i, scaled by
//! (4π/npix)/L_i. 1 − cos γ = 2u², u² = sin²((θ_i−θ_j)/2) + sin θ_i sin θ_j sin²(x/2).
//!
//! The kernel ring is even about x = −δ_ij: k_ij(y) = K(γ(θ_i, θ_j, y)) = k_ij(−y), so
//! Ĝ_ij(m) = e^{imδ_ij}·C_ij(m) with C_ij real, the cosine transform of k_ij on the symmetric
//! grid y = (k + o)·2π/L_i, o = 0 or ½ (whichever is nearer to the samples' offset δ_ij·L_i/2π;
//! exact when that offset is a whole or half sample, as on the belt; elsewhere the same
//! band-limited approximation as the plain FFT). The phases go to the rings: the engines
//! accumulate T_i(m) = Σ_j C_ij(m)·R̃_j(m) with R̃_j(m) = e^{−imφ0_j}R_j(m mod n_j), then
//! S_i(m) = e^{imφ0_i}T_i(m). C_ij is a direct cosine sum for narrow supports, else a DCT-I
//! (o = 0) or DCT-II (o = ½) through a real FFT of L_i/2 points.
//!
//! Exact (a circular convolution) where n_i = n_j = L_i: output rings of the equatorial belt
//! whose support lies in the belt use L_i = 4·nside. Elsewhere the only error is G_ij's spectral
//! content beyond L_i/2; L_i is chosen per output ring from the kernel's spectral extent M along
//! a great circle (G_ij is K stretched by 1/√(sin θ_i sin θ_j) in x): L_i/2 ≥ M·max_j
//! √(sin θ_i sin θ_j). North/south mirror rings share every kernel ring (G_i'j' = G_ij), so
//! each task does an output pair.
//!
//! Quadrature: input ring j is weighted by 1 + w_j, the HEALPix ring weights of `weights`
//! ([`RingPlan::ring_factor`]; engines multiply the ring by it before its FFT), so that the
//! pixel sum integrates band-limited functions exactly up to degree 3·nside in z (uniform
//! weights are off by ~1e-3 at the poles, which dominated the gap to healpy at FWHM ≥ 3 px).
//!
//! - `profile`: kernel profiles (Gaussian, beam window), truncation, tables.
//! - `weights`: the ring weights.
//! - `cpu`: the rayon engine; `cuda` (tables from `cuda::tables`): the GPU engine. Both follow
//!   [`RingPlan`].

pub mod cpu;
pub mod cuda;
pub mod masked;
pub mod profile;
pub mod weights;

use std::f64::consts::PI;

use realfft::RealFftPlanner;

use crate::backend::Device;
use crate::error::{Error, Result};
use crate::healpix as hp;
pub use profile::{Profile, Table};

/// Kernel spectral content below this fraction of its peak (along a great circle) is dropped
/// when choosing L_i off the exact belt.
pub const SPECTRAL_EPS: f64 = 1e-7;
/// L_i is at most this multiple of 4·nside.
const MAX_OVERSAMPLE: usize = 4;

/// One task: an output ring in the northern half (with its southern mirror) and the input
/// rings it sums.
#[derive(Clone, Copy, Debug)]
pub struct OutRing {
    /// Output ring (0-based, ≤ the equator ring).
    pub ring: usize,
    /// Its mirror (= ring for the equator).
    pub mirror: usize,
    /// Input rings lo ..= hi within θcut of `ring` (for the equator only the northern half
    /// and the equator: the mirrored inputs reuse the same kernel rings).
    pub lo: usize,
    pub hi: usize,
    /// Kernel-ring sampling length L_i (even).
    pub len: usize,
}

/// The kernel ring of (i, j) on the `len`-point grid: k_ij(y) = K at
/// u² = a + b·sin²(y/2), y = (k + o)·2π/len for k = 0 … taps−1 (o = ½ when `half`), mirrored
/// to negative y; zero beyond. `full`: the support covers the whole ring.
#[derive(Clone, Copy, Debug)]
pub struct PairSupport {
    pub a: f64,
    pub b: f64,
    pub delta: f64,
    pub half: bool,
    pub taps: usize,
    pub full: bool,
}

/// Flop and byte counts of one convolution (the benchmark's floor).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cost {
    /// Kernel rings FFT'd (one per output pair and input ring).
    pub kernel_ffts: usize,
    /// Kernel samples evaluated (inside the φ-supports).
    pub kernel_evals: usize,
    /// Real-FFT flops (2.5·n·log2 n each): input and output rings, and kernel rings as if
    /// each were a full-length FFT (direct cosine sums and half-length DCTs do less).
    pub fft_flops: f64,
    /// Spectral multiply-accumulate flops (4 per real × complex MAC).
    pub mac_flops: f64,
    /// Direct cosine-sum flops (2 per kernel sample and spectrum bin): the GPU engine's C_ij.
    pub cos_flops: f64,
    /// Compulsory memory traffic: map in, spectra out and in, map out (bytes).
    pub bytes: f64,
    /// Input spectra streamed by the accumulation (bytes; mostly from cache).
    pub bytes_streamed: f64,
}

/// The plan of a ring convolution: geometry, kernel table and per-output-ring tasks. Shared by
/// the CPU and CUDA engines.
pub struct RingPlan {
    pub nside: usize,
    pub npix: usize,
    pub rings: Vec<hp::Ring>,
    pub table: Table,
    /// Spectral extent M of the kernel along a great circle (see the module docs).
    pub extent: usize,
    pub outputs: Vec<OutRing>,
    /// Quadrature factor 1 + w_j of every input ring (`weights`): engines multiply input ring
    /// j by it before its FFT.
    pub ring_factor: std::sync::Arc<Vec<f64>>,
}

/// Smallest 4·2^a·3^b·5^c ≥ n (a multiple of 4, so the half-length DCTs have even length).
pub fn good_len(n: usize) -> usize {
    let target = n.div_ceil(4).max(1);
    let mut best = usize::MAX;
    let mut p2 = 1usize;
    while p2 < 2 * target {
        let mut p3 = p2;
        while p3 < 2 * target {
            let mut p5 = p3;
            while p5 < target {
                p5 *= 5;
            }
            best = best.min(p5);
            p3 *= 3;
        }
        p2 *= 2;
    }
    4 * best
}

impl RingPlan {
    pub fn new(nside: usize, table: Table) -> Result<Self> {
        hp::check_nside(nside as u64, false)?;
        let npix = hp::nside2npix(nside as u64) as usize;
        let rings = hp::rings(nside as u64);
        let nr = rings.len();
        let eq = 2 * nside - 1;
        let belt = 4 * nside;
        let cap = good_len(MAX_OVERSAMPLE * belt);
        let extent = spectral_extent(&table, good_len(8 * belt));
        // Support: rings with sin²(Δθ/2) ≤ u²_cut (θ ascends with the index).
        let in_reach = |i: usize, j: usize| {
            let s = (0.5 * (rings[i].theta - rings[j].theta)).sin();
            s * s <= table.u2_cut
        };
        let mut outputs = Vec::with_capacity(eq + 1);
        let (mut lo, mut hi) = (0usize, 0usize);
        for i in 0..=eq {
            while !in_reach(i, lo) {
                lo += 1;
            }
            hi = hi.max(i);
            while hi + 1 < nr && in_reach(i, hi + 1) {
                hi += 1;
            }
            let ri = &rings[i];
            let belt_only = ri.nphi == belt && rings[lo].nphi == belt && rings[hi].nphi == belt;
            let len = if belt_only {
                belt
            } else {
                let s = (lo..=hi)
                    .map(|j| (ri.sin_theta * rings[j].sin_theta).sqrt())
                    .fold(0.0, f64::max);
                // Beyond m ≈ M·s the ring functions λ_lm(θ) decay over a turning-point zone of
                // width ~ l^(1/3): margin for it.
                let m = extent as f64 * s + 2.0 * (extent as f64).cbrt() + 2.0;
                let need = 2 * m.ceil() as usize + 2;
                good_len(need.max(ri.nphi)).min(cap.max(ri.nphi))
            };
            outputs.push(OutRing {
                ring: i,
                mirror: nr - 1 - i,
                lo,
                hi: if i == eq { eq } else { hi },
                len,
            });
        }
        Ok(RingPlan {
            nside,
            npix,
            rings,
            table,
            extent,
            outputs,
            ring_factor: weights::ring_factors(nside),
        })
    }

    /// The support of G_ij on the `len`-point grid.
    pub fn pair_support(&self, i: usize, j: usize, len: usize) -> PairSupport {
        let (ri, rj) = (&self.rings[i], &self.rings[j]);
        let sd = (0.5 * (ri.theta - rj.theta)).sin();
        let a = sd * sd;
        let b = ri.sin_theta * rj.sin_theta;
        let delta = ri.phi0 - rj.phi0;
        let q = delta * len as f64 / (2.0 * PI);
        let fr = q - q.floor();
        let half = (0.25..0.75).contains(&fr);
        let n2 = len / 2;
        let all = if half { n2 } else { n2 + 1 };
        let room = (self.table.u2_cut - a) / b;
        let (taps, full) = if room >= 1.0 {
            (all, true)
        } else if room < 0.0 {
            (0, false)
        } else {
            let phic = 2.0 * room.sqrt().asin();
            let o = if half { 0.5 } else { 0.0 };
            // One sample of slack: rounding at the edge is settled by the u² test.
            let t = (phic * len as f64 / (2.0 * PI) - o).floor() as usize + 2;
            if t >= all {
                (all, true)
            } else {
                (t, false)
            }
        };
        PairSupport {
            a,
            b,
            delta,
            half,
            taps,
            full,
        }
    }

    /// Flops and bytes of one convolution with this plan.
    pub fn cost(&self) -> Cost {
        let fft = |n: usize| 2.5 * n as f64 * (n as f64).log2().max(1.0);
        let mut c = Cost::default();
        for r in &self.rings {
            c.fft_flops += 2.0 * fft(r.nphi); // input and output ring
        }
        for o in &self.outputs {
            let outs = if o.ring == o.mirror { 1 } else { 2 };
            for j in o.lo..=o.hi {
                let n_inputs = if o.ring == o.mirror && j != o.ring {
                    2
                } else {
                    outs
                };
                c.kernel_ffts += 1;
                c.fft_flops += fft(o.len);
                let taps = self.pair_support(o.ring, j, o.len).taps;
                c.kernel_evals += taps;
                c.cos_flops += 2.0 * (taps * (o.len / 2 + 1)) as f64;
                c.mac_flops += 4.0 * (o.len / 2 + 1) as f64 * n_inputs as f64;
                c.bytes_streamed += 16.0 * (self.rings[j].nphi / 2 + 1) as f64 * n_inputs as f64;
            }
        }
        c.bytes = self.npix as f64 * (8.0 + 8.0 + 8.0 + 8.0);
        c
    }
}

/// Spectral extent of the kernel along a great circle: the largest m at which the Fourier
/// series F(m) of x ↦ K(|x|) (sampled at `lf` points) exceeds SPECTRAL_EPS of its peak plus
/// twice the tail that the truncation step J = |K(θcut)| alone leaves, J/(πm): content below
/// that floor is the truncation's (≈ tol), which no L resolves.
fn spectral_extent(table: &Table, lf: usize) -> usize {
    let mut f = vec![0.0; lf];
    let tc = table.theta_cut;
    for (k, v) in f.iter_mut().enumerate() {
        let x = 2.0 * PI * k as f64 / lf as f64;
        let g = x.min(2.0 * PI - x);
        if g <= tc {
            *v = table.eval(g) / lf as f64;
        }
    }
    // A kernel reaching π has no step: it closes smoothly on itself.
    let jump = if tc < PI { table.eval(tc).abs() } else { 0.0 };
    let fft = RealFftPlanner::<f64>::new().plan_fft_forward(lf);
    let mut spec = fft.make_output_vec();
    fft.process(&mut f, &mut spec)
        .expect("FFT sizes are consistent");
    let peak = spec.iter().map(|c| c.norm()).fold(0.0, f64::max);
    let over = |m: usize, c: &realfft::num_complex::Complex64| {
        c.norm() > SPECTRAL_EPS * peak + 2.0 * jump / (PI * m.max(1) as f64)
    };
    match spec.iter().enumerate().rposition(|(m, c)| over(m, c)) {
        Some(m) => m + 1,
        None => 1,
    }
}

/// Mark missing pixels (healpy's UNSEEN test, or not finite) in `out`; returns how many.
pub fn missing<T: crate::real::Real>(map: &[T], out: &mut [bool]) -> usize {
    use rayon::prelude::*;
    map.par_iter()
        .zip(out.par_iter_mut())
        .with_min_len(1 << 14)
        .map(|(v, o)| {
            let x = v.to_f64();
            *o = !x.is_finite() || crate::sht::is_unseen(x);
            *o as usize
        })
        .sum()
}

/// Ring-method smoothing of RING maps (float64, no missing pixels) with the profile
/// (theta, values) (K at ascending nodes, theta[0] = 0, K = 0 beyond theta[last]). `map` holds
/// one or several maps of 12·nside² pixels one after the other (`out` likewise): they share the
/// plan and every kernel spectrum, and each result equals that of its map alone.
pub fn ring_smooth(
    device: Device,
    nside: usize,
    theta: &[f64],
    values: &[f64],
    map: &[f64],
    out: &mut [f64],
) -> Result<()> {
    hp::check_nside(nside as u64, false)?;
    let npix = hp::nside2npix(nside as u64) as usize;
    if map.is_empty() || !map.len().is_multiple_of(npix) || out.len() != map.len() {
        return Err(Error::shape(format!(
            "map has {} pixels, nside={nside} needs a multiple of {npix}",
            map.len()
        )));
    }
    let table = Table::new(theta, values, 0)?;
    let plan = RingPlan::new(nside, table)?;
    let maps: Vec<&[f64]> = map.chunks(npix).collect();
    let mut outs: Vec<&mut [f64]> = out.chunks_mut(npix).collect();
    match device {
        Device::Cpu => {
            crate::backend::threads::install(|| cpu::convolve_many(&plan, &maps, &mut outs))
        }
        Device::Cuda(o) => {
            crate::backend::cuda::on(o, || cuda::convolve_many(&plan, &maps, &mut outs))
        }
    }
}

/// The ring plans of a batch of kernels (theta, values), built on the host's cores at once.
pub fn plans_of(nside: usize, profiles: &[(&[f64], &[f64])]) -> Result<Vec<RingPlan>> {
    use rayon::prelude::*;
    crate::backend::threads::install(|| {
        profiles
            .par_iter()
            .map(|(t, v)| RingPlan::new(nside, Table::new(t, v, 0)?))
            .collect::<Result<Vec<_>>>()
    })?
}

/// Ring-method smoothing of RING maps with several kernels: `profiles` holds (theta, values)
/// per beam, `map` k maps of 12·nside² pixels one after the other and `out[b]` beam b's k
/// results (k·npix each; the rows of one array, or rows picked from a larger one). On the GPU
/// the maps go up and through the forward FFTs once for all beams ([`cuda::convolve_beams`]);
/// on the CPU each beam is one [`cpu::convolve_many`]. Each result equals [`ring_smooth`] of
/// its map and beam.
pub fn ring_smooth_beams(
    device: Device,
    nside: usize,
    profiles: &[(&[f64], &[f64])],
    map: &[f64],
    out: &mut [&mut [f64]],
) -> Result<()> {
    hp::check_nside(nside as u64, false)?;
    let npix = hp::nside2npix(nside as u64) as usize;
    if map.is_empty()
        || !map.len().is_multiple_of(npix)
        || out.len() != profiles.len()
        || out.iter().any(|o| o.len() != map.len())
    {
        return Err(Error::shape(format!(
            "map has {} pixels and out {} rows, nside={nside} needs a multiple of {npix} and \
             {} rows of that",
            map.len(),
            out.len(),
            profiles.len()
        )));
    }
    let plans = plans_of(nside, profiles)?;
    let maps: Vec<&[f64]> = map.chunks(npix).collect();
    let mut outs: Vec<&mut [f64]> = out.iter_mut().flat_map(|o| o.chunks_mut(npix)).collect();
    match device {
        Device::Cpu => crate::backend::threads::install(|| {
            for (plan, o) in plans.iter().zip(outs.chunks_mut(maps.len())) {
                cpu::convolve_many(plan, &maps, o);
            }
        }),
        Device::Cuda(o) => {
            let refs: Vec<&RingPlan> = plans.iter().collect();
            crate::backend::cuda::on(o, || cuda::convolve_beams(&refs, &maps, &mut outs))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_lengths() {
        assert_eq!(good_len(1), 4);
        assert_eq!(good_len(8192), 8192);
        assert_eq!(good_len(8193), 8640);
        assert_eq!(good_len(14), 16);
        assert_eq!(good_len(22), 24);
        for n in 1..2000 {
            let g = good_len(n);
            assert!(g >= n && g.is_multiple_of(4));
            let mut h = g / 4;
            for p in [2, 3, 5] {
                while h.is_multiple_of(p) {
                    h /= p;
                }
            }
            assert_eq!(h, 1);
        }
    }
}
