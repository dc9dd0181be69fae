//! One SHT split over several GPUs of one host (S2HAT's scheme, no Dask): the alm are split by
//! m into contiguous blocks balanced by work (the cost of an m is about lmax + 1 − m), the map
//! by rings into contiguous blocks balanced by pixels. alm2map: each GPU computes Δ_m(θ) for
//! its m on all rings (`halves::alm2leg`), the all-to-all moves Δ from m-blocks to ring-blocks,
//! each GPU finishes its ring block (`halves::leg2map`); map2alm runs the steps backwards, and
//! its Jacobi iterations repeat both. One host thread per GPU (`cuda::on`).
//!
//! Transport of the all-to-all: staged through host memory (each GPU's Δ comes down to the
//! host, the host regroups it by ring block, each GPU takes its block up). Peer copies between
//! the GPUs are not used by this version; `Stats::transport` says which ran. NVLink multicast
//! is never enabled. A device listed twice (`[0, 0]`) runs its blocks one after the other.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use realfft::num_complex::Complex64 as C64;

use super::halves;
use crate::backend::cuda::{self, Gpu};
use crate::error::{Error, Result};
use crate::sht::Plan;

/// The all-to-all's transport (the only one in this version).
pub const TRANSPORT: &str = "host-staged";

const MAX_ORD: usize = 64;
static PEAK: [AtomicUsize; MAX_ORD] = [const { AtomicUsize::new(0) }; MAX_ORD];

/// Record the device memory in use now (total − free) as a candidate peak for its GPU.
pub(crate) fn note_used(gpu: &Gpu) {
    if let Ok((free, total)) = gpu.mem_info() {
        if let Some(p) = PEAK.get(gpu.ordinal as usize) {
            p.fetch_max(total.saturating_sub(free), Ordering::Relaxed);
        }
    }
}

/// What a multi-GPU transform did.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub transport: &'static str,
    pub devices: Vec<u32>,
    /// [m0, m1) of each device.
    pub m_blocks: Vec<(usize, usize)>,
    /// [r0, r1) rings of each device.
    pub ring_blocks: Vec<(usize, usize)>,
    /// Seconds in the Legendre stage (all devices, wall), the all-to-all (host regrouping)
    /// and the ring stage (wall), summed over the passes of the call.
    pub legendre_s: f64,
    pub exchange_s: f64,
    pub ring_s: f64,
    /// Most device memory in use seen during the call on each device (bytes, whole device).
    pub peak_bytes: Vec<usize>,
}

/// Contiguous blocks [m0, m1) of 0..=mmax, one per device, with about equal Σ (lmax + 1 − m).
pub fn m_blocks(lmax: usize, mmax: usize, n: usize) -> Vec<(usize, usize)> {
    let cost = |m: usize| (lmax + 1 - m) as f64;
    let total: f64 = (0..=mmax).map(cost).sum();
    let mut out = Vec::with_capacity(n);
    let mut m0 = 0;
    let mut acc = 0.0;
    for d in 0..n {
        let target = total * (d + 1) as f64 / n as f64;
        let mut m1 = m0;
        while m1 <= mmax && (d + 1 == n || acc + cost(m1) / 2.0 <= target) {
            acc += cost(m1);
            m1 += 1;
        }
        out.push((m0, m1));
        m0 = m1;
    }
    out
}

/// Contiguous blocks [r0, r1) of the rings, one per device, with about equal pixel counts.
pub fn ring_blocks(plan: &Plan, n: usize) -> Vec<(usize, usize)> {
    let nr = plan.rings.len();
    let mut out = Vec::with_capacity(n);
    let mut r0 = 0;
    for d in 0..n {
        let target = plan.npix as f64 * (d + 1) as f64 / n as f64;
        let mut r1 = r0;
        while r1 < nr
            && (d + 1 == n
                || (plan.rings[r1].first as f64 + plan.rings[r1].nphi as f64 / 2.0) < target)
        {
            r1 += 1;
        }
        out.push((r0, r1));
        r0 = r1;
    }
    out
}

fn check_devices(devices: &[u32]) -> Result<()> {
    if devices.is_empty() {
        return Err(Error::value("devices must list at least one GPU"));
    }
    let count = cuda::device_count();
    if let Some(d) = devices.iter().find(|&&d| d as usize >= count) {
        return Err(Error::device(format!(
            "devices lists cuda:{d} but the driver reports {count} CUDA device(s)"
        )));
    }
    Ok(())
}

/// Run `f(i)` for each device i on its own thread with `gpu()` meaning that device.
fn per_device<T: Send>(
    devices: &[u32],
    f: impl Fn(usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let f = &f;
    let outs: Vec<Result<T>> = std::thread::scope(|s| {
        let hs: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(i, &d)| s.spawn(move || cuda::on(d, || f(i))))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Internal("a GPU thread panicked".into())))
            })
            .collect()
    });
    outs.into_iter().collect()
}

/// Which components are spin 0 and which pair (if any) is spin 2.
fn comp_sets(ncomp: usize, pol: bool) -> (Vec<usize>, Option<[usize; 2]>) {
    if pol && ncomp == 3 {
        (vec![0], Some([1, 2]))
    } else {
        ((0..ncomp).collect(), None)
    }
}

/// Split each of `bufs` at the given boundaries into disjoint pieces, per piece the list over
/// buffers.
fn split_all<'a, T>(bufs: &'a mut [&mut [T]], bounds: &[(usize, usize)]) -> Vec<Vec<&'a mut [T]>> {
    let mut out: Vec<Vec<&'a mut [T]>> = bounds.iter().map(|_| Vec::new()).collect();
    for b in bufs.iter_mut() {
        let mut rest: &'a mut [T] = unsafe {
            // SAFETY: each buffer is borrowed once, for 'a, and split into disjoint pieces.
            std::slice::from_raw_parts_mut(b.as_mut_ptr(), b.len())
        };
        let mut at = 0;
        for (k, &(lo, hi)) in bounds.iter().enumerate() {
            let (_, r) = rest.split_at_mut(lo - at);
            let (piece, r) = r.split_at_mut(hi - lo);
            out[k].push(piece);
            rest = r;
            at = hi;
        }
    }
    out
}

fn peaks(devices: &[u32]) -> Vec<usize> {
    devices
        .iter()
        .map(|&d| {
            PEAK.get(d as usize)
                .map(|p| p.load(Ordering::Relaxed))
                .unwrap_or(0)
        })
        .collect()
}

fn reset_peaks(devices: &[u32]) {
    for &d in devices {
        if let Some(p) = PEAK.get(d as usize) {
            p.store(0, Ordering::Relaxed);
        }
    }
}

/// Synthesis split over `devices`: `alms` (healpy layout of plan.lay) -> RING maps.
pub fn alm2map(
    plan: &Plan,
    pol: bool,
    devices: &[u32],
    alms: &[&[C64]],
    maps: &mut [&mut [f64]],
    st: &mut Stats,
) -> Result<()> {
    check_devices(devices)?;
    let (lay, nr) = (plan.lay, plan.rings.len());
    let ncomp = alms.len();
    let (s0, s2) = comp_sets(ncomp, pol);
    let mb = m_blocks(lay.lmax, lay.mmax, devices.len());
    let rb = ring_blocks(plan, devices.len());
    let all_rings: Vec<usize> = (0..nr).collect();
    let w = lay.mmax + 1;
    // 1. Legendre: Δ of each device's m on all rings, per component (nr, nm) row-major.
    let t = Instant::now();
    let legs: Vec<Vec<Vec<C64>>> = per_device(devices, |i| {
        let (m0, m1) = mb[i];
        let nm = m1 - m0;
        let mut out: Vec<Vec<C64>> = (0..ncomp).map(|_| vec![C64::new(0.0, 0.0); nr * nm]).collect();
        if nm == 0 {
            return Ok(out);
        }
        let ms: Vec<usize> = (m0..m1).collect();
        let (a0, a1) = (lay.mstart(m0), lay.mstart(m1));
        {
            let a: Vec<&[C64]> = s0.iter().map(|&c| &alms[c][a0..a1]).collect();
            let mut l: Vec<&mut [C64]> = Vec::new();
            let mut taken: Vec<Option<&mut Vec<C64>>> = out.iter_mut().map(Some).collect();
            for &c in &s0 {
                l.push(taken[c].take().expect("distinct"));
            }
            halves::alm2leg(plan, false, &ms, &all_rings, &a, &mut l)?;
            if let Some([e, b]) = s2 {
                let a: Vec<&[C64]> = vec![&alms[e][a0..a1], &alms[b][a0..a1]];
                let mut l: Vec<&mut [C64]> = vec![
                    taken[e].take().expect("distinct"),
                    taken[b].take().expect("distinct"),
                ];
                halves::alm2leg(plan, true, &ms, &all_rings, &a, &mut l)?;
            }
        }
        Ok(out)
    })?;
    st.legendre_s += t.elapsed().as_secs_f64();
    // 2. All-to-all through host memory: each ring block gets all m of its rings.
    let t = Instant::now();
    let blocks: Vec<Vec<Vec<C64>>> = rb
        .iter()
        .map(|&(r0, r1)| {
            (0..ncomp)
                .map(|c| {
                    let mut dst = vec![C64::new(0.0, 0.0); (r1 - r0) * w];
                    dst.par_chunks_mut(w).enumerate().for_each(|(i, row)| {
                        let r = r0 + i;
                        for (d, &(m0, m1)) in mb.iter().enumerate() {
                            let nm = m1 - m0;
                            row[m0..m1].copy_from_slice(&legs[d][c][r * nm..(r + 1) * nm]);
                        }
                    });
                    dst
                })
                .collect()
        })
        .collect();
    drop(legs);
    st.exchange_s += t.elapsed().as_secs_f64();
    // 3. Ring stage: each device's rings -> its pixels.
    let t = Instant::now();
    let bounds: Vec<(usize, usize)> = rb
        .iter()
        .map(|&(r0, r1)| pix_range(plan, r0, r1))
        .collect();
    let pieces = split_all(maps, &bounds);
    let pieces: Vec<std::sync::Mutex<Vec<&mut [f64]>>> =
        pieces.into_iter().map(std::sync::Mutex::new).collect();
    per_device(devices, |i| {
        let (r0, r1) = rb[i];
        if r0 == r1 {
            return Ok(());
        }
        let rings: Vec<usize> = (r0..r1).collect();
        let leg: Vec<&[C64]> = blocks[i].iter().map(|v| &v[..]).collect();
        let mut p = pieces[i].lock().unwrap_or_else(|e| e.into_inner());
        halves::leg2map(plan, &rings, lay.mmax, &leg, &mut p)
    })?;
    st.ring_s += t.elapsed().as_secs_f64();
    Ok(())
}

fn pix_range(plan: &Plan, r0: usize, r1: usize) -> (usize, usize) {
    let first = |r: usize| {
        if r < plan.rings.len() {
            plan.rings[r].first as usize
        } else {
            plan.npix
        }
    };
    (first(r0), first(r1))
}

/// One analysis pass (no iterations) split over `devices` of cleaned float64 maps.
fn analysis(
    plan: &Plan,
    pol: bool,
    devices: &[u32],
    maps: &[&[f64]],
    alms: &mut [&mut [C64]],
    st: &mut Stats,
) -> Result<()> {
    let (lay, nr) = (plan.lay, plan.rings.len());
    let ncomp = maps.len();
    let (s0, s2) = comp_sets(ncomp, pol);
    let mb = m_blocks(lay.lmax, lay.mmax, devices.len());
    let rb = ring_blocks(plan, devices.len());
    let all_rings: Vec<usize> = (0..nr).collect();
    let w = lay.mmax + 1;
    // 1. Ring stage: each device's rings -> their Fourier coefficients (nr_d, mmax+1).
    let t = Instant::now();
    let legs: Vec<Vec<Vec<C64>>> = per_device(devices, |i| {
        let (r0, r1) = rb[i];
        let mut out: Vec<Vec<C64>> = (0..ncomp)
            .map(|_| vec![C64::new(0.0, 0.0); (r1 - r0) * w])
            .collect();
        if r0 == r1 {
            return Ok(out);
        }
        let (p0, p1) = pix_range(plan, r0, r1);
        let rings: Vec<usize> = (r0..r1).collect();
        let m: Vec<&[f64]> = maps.iter().map(|m| &m[p0..p1]).collect();
        let mut l: Vec<&mut [C64]> = out.iter_mut().map(|v| &mut v[..]).collect();
        halves::map2leg(plan, &rings, lay.mmax, &m, &mut l)?;
        Ok(out)
    })?;
    st.ring_s += t.elapsed().as_secs_f64();
    // 2. All-to-all: each m block gets its columns on all rings (nr, nm).
    let t = Instant::now();
    let blocks: Vec<Vec<Vec<C64>>> = mb
        .iter()
        .map(|&(m0, m1)| {
            let nm = m1 - m0;
            (0..ncomp)
                .map(|c| {
                    let mut dst = vec![C64::new(0.0, 0.0); nr * nm];
                    if nm > 0 {
                        dst.par_chunks_mut(nm).enumerate().for_each(|(r, row)| {
                            let d = rb.iter().position(|&(a, b)| a <= r && r < b).expect("ring");
                            let i = r - rb[d].0;
                            row.copy_from_slice(&legs[d][c][i * w + m0..i * w + m1]);
                        });
                    }
                    dst
                })
                .collect()
        })
        .collect();
    drop(legs);
    st.exchange_s += t.elapsed().as_secs_f64();
    // 3. Legendre: each device's m from all rings, straight into its slice of the alm.
    let t = Instant::now();
    let bounds: Vec<(usize, usize)> = mb
        .iter()
        .map(|&(m0, m1)| (lay.mstart(m0), lay.mstart(m1)))
        .collect();
    let pieces = split_all(alms, &bounds);
    let pieces: Vec<std::sync::Mutex<Vec<&mut [C64]>>> =
        pieces.into_iter().map(std::sync::Mutex::new).collect();
    per_device(devices, |i| {
        let (m0, m1) = mb[i];
        if m0 == m1 {
            return Ok(());
        }
        let ms: Vec<usize> = (m0..m1).collect();
        let mut p = pieces[i].lock().unwrap_or_else(|e| e.into_inner());
        let mut taken: Vec<Option<&mut [C64]>> = p.iter_mut().map(|s| Some(&mut **s)).collect();
        let leg: Vec<&[C64]> = s0.iter().map(|&c| &blocks[i][c][..]).collect();
        let mut a: Vec<&mut [C64]> = s0
            .iter()
            .map(|&c| taken[c].take().expect("distinct"))
            .collect();
        halves::leg2alm(plan, false, &ms, &all_rings, &leg, &mut a)?;
        if let Some([e, b]) = s2 {
            let leg: Vec<&[C64]> = vec![&blocks[i][e][..], &blocks[i][b][..]];
            let mut a: Vec<&mut [C64]> = vec![
                taken[e].take().expect("distinct"),
                taken[b].take().expect("distinct"),
            ];
            halves::leg2alm(plan, true, &ms, &all_rings, &leg, &mut a)?;
        }
        Ok(())
    })?;
    st.legendre_s += t.elapsed().as_secs_f64();
    Ok(())
}

/// Analysis with `iter` Jacobi iterations split over `devices` (maps: float64, UNSEEN zeroed).
pub fn map2alm(
    plan: &Plan,
    pol: bool,
    devices: &[u32],
    maps: &[&[f64]],
    iter: usize,
    alms: &mut [&mut [C64]],
    st: &mut Stats,
) -> Result<()> {
    check_devices(devices)?;
    analysis(plan, pol, devices, maps, alms, st)?;
    if iter == 0 {
        return Ok(());
    }
    let nc = maps.len();
    let mut resid: Vec<Vec<f64>> = (0..nc).map(|_| vec![0.0; plan.npix]).collect();
    let mut delta: Vec<Vec<C64>> = (0..nc)
        .map(|_| vec![C64::new(0.0, 0.0); plan.lay.size()])
        .collect();
    for _ in 0..iter {
        {
            let a: Vec<&[C64]> = alms.iter().map(|a| &a[..]).collect();
            let mut r: Vec<&mut [f64]> = resid.iter_mut().map(|r| &mut r[..]).collect();
            alm2map(plan, pol, devices, &a, &mut r, st)?;
        }
        for (r, m) in resid.iter_mut().zip(maps) {
            r.par_iter_mut()
                .zip(m.par_iter())
                .for_each(|(r, m)| *r = m - *r);
        }
        {
            let r: Vec<&[f64]> = resid.iter().map(|r| &r[..]).collect();
            let mut d: Vec<&mut [C64]> = delta.iter_mut().map(|d| &mut d[..]).collect();
            analysis(plan, pol, devices, &r, &mut d, st)?;
        }
        for (a, d) in alms.iter_mut().zip(&delta) {
            a.par_iter_mut()
                .zip(d.par_iter())
                .for_each(|(a, d)| *a += d);
        }
    }
    Ok(())
}

/// Run a multi-GPU transform and fill the stats it reports (transport, blocks, peaks).
pub fn with_stats(
    plan: &Plan,
    devices: &[u32],
    f: impl FnOnce(&mut Stats) -> Result<()>,
) -> Result<Stats> {
    reset_peaks(devices);
    let mut st = Stats {
        transport: TRANSPORT,
        devices: devices.to_vec(),
        m_blocks: m_blocks(plan.lay.lmax, plan.lay.mmax, devices.len()),
        ring_blocks: ring_blocks(plan, devices.len()),
        ..Stats::default()
    };
    f(&mut st)?;
    st.peak_bytes = peaks(devices);
    Ok(st)
}
