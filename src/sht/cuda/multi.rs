//! One SHT split over several GPUs of one host (no Dask). Distinct GPUs run the device-resident
//! pipeline of `cuda::peer` (Δ moves GPU→GPU: peer copies, or copies the driver stages
//! through host memory where peer access is unavailable). A list with a GPU twice (`[0, 0]`)
//! runs the driver `crate::sht::split` with the GPU halves (`cuda::halves`, one host thread per
//! worker) and the all-to-all staged through host memory (`TRANSPORT`): its blocks run one
//! after the other on that GPU. NVLink multicast is never enabled.

use std::sync::atomic::Ordering;

use realfft::num_complex::Complex64 as C64;

use super::setup::PEAK;
use super::{halves, peer};
use crate::backend::cuda;
use crate::error::{Error, Result};
use crate::sht::split::{self, Halves};
use crate::sht::Plan;

pub use crate::sht::split::Stats;

/// How the all-to-all of the split driver moves Δ (a GPU listed twice).
pub const TRANSPORT: &str = "host-staged";

/// Whether `devices` lists a GPU twice (then the split driver runs, not `cuda::peer`).
fn repeated(devices: &[u32]) -> bool {
    let mut d = devices.to_vec();
    d.sort_unstable();
    d.windows(2).any(|w| w[0] == w[1])
}

/// The GPU halves, worker i on GPU devices[i].
struct Gpus<'a>(&'a [u32]);

impl Halves for Gpus<'_> {
    fn workers(&self) -> usize {
        self.0.len()
    }
    fn alm2leg(
        &self,
        i: usize,
        p: &Plan,
        s2: bool,
        ms: &[usize],
        r: &[usize],
        a: &[&[C64]],
        l: &mut [&mut [C64]],
    ) -> Result<()> {
        cuda::on(self.0[i], || halves::alm2leg(p, s2, ms, r, a, l))
    }
    fn leg2map(
        &self,
        i: usize,
        p: &Plan,
        r: &[usize],
        mmax: usize,
        l: &[&[C64]],
        m: &mut [&mut [f64]],
    ) -> Result<()> {
        cuda::on(self.0[i], || halves::leg2map(p, r, mmax, l, m))
    }
    fn map2leg(
        &self,
        i: usize,
        p: &Plan,
        r: &[usize],
        mmax: usize,
        m: &[&[f64]],
        l: &mut [&mut [C64]],
    ) -> Result<()> {
        cuda::on(self.0[i], || halves::map2leg(p, r, mmax, m, l))
    }
    fn leg2alm(
        &self,
        i: usize,
        p: &Plan,
        s2: bool,
        ms: &[usize],
        r: &[usize],
        l: &[&[C64]],
        a: &mut [&mut [C64]],
    ) -> Result<()> {
        cuda::on(self.0[i], || halves::leg2alm(p, s2, ms, r, l, a))
    }
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
    if repeated(devices) {
        st.transport = TRANSPORT;
        return split::alm2map(&Gpus(devices), plan, pol, alms, maps, st);
    }
    let (gpus, transport) = peer::open(devices)?;
    st.transport = transport;
    peer::alm2map(plan, pol, &gpus, alms, maps, st)
}

/// Analysis with `iter` Jacobi iterations split over `devices` (maps: float64 as given, UNSEEN
/// pixels included). One pass over distinct GPUs zeroes UNSEEN on the devices as the chunks go
/// up (`peer::analysis`); the other routes read the maps on the host again (the residuals,
/// the halves), so they take a copy with UNSEEN zeroed first (`clean_map`).
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
    let direct = !repeated(devices) && iter == 0;
    let clean: Vec<std::borrow::Cow<[f64]>> = maps
        .iter()
        .map(|m| {
            if direct {
                std::borrow::Cow::Borrowed(*m)
            } else {
                crate::sht::clean_map(m)
            }
        })
        .collect();
    let maps: Vec<&[f64]> = clean.iter().map(|c| &c[..]).collect();
    let maps = maps.as_slice();
    if repeated(devices) {
        st.transport = TRANSPORT;
        return split::map2alm(&Gpus(devices), plan, pol, maps, iter, alms, st);
    }
    let (gpus, transport) = peer::open(devices)?;
    st.transport = transport;
    split::jacobi(
        plan,
        maps,
        iter,
        alms,
        st,
        &|a, m, st| peer::alm2map(plan, pol, &gpus, a, m, st),
        &|m, a, st| peer::analysis(plan, pol, &gpus, m, a, st),
    )
}

/// Run a multi-GPU transform and fill the stats it reports (transport, blocks, peaks).
pub fn with_stats(
    plan: &Plan,
    devices: &[u32],
    f: impl FnOnce(&mut Stats) -> Result<()>,
) -> Result<Stats> {
    for &d in devices {
        if let Some(p) = PEAK.get(d as usize) {
            p.store(0, Ordering::Relaxed);
        }
    }
    let mut st = Stats {
        devices: devices.to_vec(),
        m_blocks: split::m_blocks(plan.lay.lmax, plan.lay.mmax, devices.len()),
        ring_blocks: split::ring_blocks(plan, devices.len()),
        ..Stats::default()
    };
    f(&mut st)?;
    st.peak_bytes = devices
        .iter()
        .map(|&d| {
            PEAK.get(d as usize)
                .map(|p| p.load(Ordering::Relaxed))
                .unwrap_or(0)
        })
        .collect();
    Ok(st)
}
