//! HEALPix ring weights: the quadrature Σ_j c_j (1 + w_j) Σ_b f(θ_j, φ_b), c_j = 4π/npix, that
//! integrates every band-limited function whose ring averages are polynomials in z of even
//! degree ≤ 3·nside exactly (uniform weights, w = 0, are off by ~1e-3 of the integral near the
//! poles). The φ-sum over a ring already integrates e^{imφ} exactly for 0 < |m| < nphi, so
//! only the m = 0 part needs the weights. Among the solutions, the one of least
//! Σ_j nphi_j w_j² (area-weighted): w_j = Σ_ℓ y_ℓ P_ℓ(z_j) with G y = r,
//! G_ℓℓ' = Σ_j c_j nphi_j P_ℓ(z_j) P_ℓ'(z_j) ≈ 4π/(2ℓ+1) δ_ℓℓ' (the uniform quadrature), so
//! Jacobi-preconditioned CG converges in ~5 steps. The same weights as healpy's
//! `weight_ring_n*.fits` files up to the choice among solutions; as good for smoothing.

use std::collections::HashMap;
use std::f64::consts::PI;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

/// Rings per block of the Legendre recurrences (the inner loop vectorises).
const B: usize = 32;

/// z of the northern rings 1 … 2·nside (the last is the equator) and their pixel counts.
fn north_rings(nside: usize) -> (Vec<f64>, Vec<f64>) {
    let ns = nside as f64;
    (1..=2 * nside)
        .map(|j| {
            let jf = j as f64;
            if j < nside {
                (1.0 - jf * jf / (3.0 * ns * ns), 4.0 * jf)
            } else {
                (4.0 / 3.0 - 2.0 * jf / (3.0 * ns), 4.0 * ns)
            }
        })
        .unzip()
}

/// Run P_ℓ(z_k) up to `lmax` for a block of nodes and call `f(ℓ, P_ℓ)` at every even ℓ ≥ 2
/// (P_0 = 1 is left to the caller).
fn even_legendre(z: &[f64; B], lmax: usize, mut f: impl FnMut(usize, &[f64; B])) {
    let (mut p0, mut p1) = ([1.0; B], *z);
    for l in 2..=lmax {
        let (a, b) = ((2 * l - 1) as f64 / l as f64, (l - 1) as f64 / l as f64);
        for k in 0..B {
            let p2 = a * p1[k] * z[k] - b * p0[k];
            p0[k] = p1[k];
            p1[k] = p2;
        }
        if l % 2 == 0 {
            f(l, &p1);
        }
    }
}

/// f_j = Σ_ℓ y_ℓ P_ℓ(z_j) (y: even ℓ only, y[k] for ℓ = 2k).
fn synth(y: &[f64], z: &[f64]) -> Vec<f64> {
    let lmax = 2 * (y.len() - 1);
    let mut f = vec![0.0; z.len()];
    f.par_chunks_mut(B).zip(z.par_chunks(B)).for_each(|(f, z)| {
        let n = z.len();
        let mut zb = [0.0; B];
        zb[..n].copy_from_slice(z);
        let mut acc = [y[0]; B];
        even_legendre(&zb, lmax, |l, p| {
            let c = y[l / 2];
            for k in 0..B {
                acc[k] += c * p[k];
            }
        });
        f.copy_from_slice(&acc[..n]);
    });
    f
}

/// Blocks of B rings per parallel task in `analyse`: fixed, so that the partial sums and their
/// order do not depend on the thread count or on work stealing.
const BLOCKS_PER_TASK: usize = 8;

/// g_ℓ = Σ_j h_j P_ℓ(z_j) for even ℓ ≤ lmax (g[k] for ℓ = 2k). Deterministic: fixed tasks
/// whose partial sums are added in task order (a rayon fold/reduce groups by work stealing,
/// so its last bits changed from run to run, and with them the stored ring weights; issue 17).
fn analyse(h: &[f64], z: &[f64], lmax: usize) -> Vec<f64> {
    let nl = lmax / 2 + 1;
    let task = B * BLOCKS_PER_TASK;
    let partial: Vec<Vec<f64>> = z
        .par_chunks(task)
        .zip(h.par_chunks(task))
        .map(|(z, h)| {
            let mut g = vec![0.0; nl];
            for (z, h) in z.chunks(B).zip(h.chunks(B)) {
                let n = z.len();
                let (mut zb, mut hb) = ([0.0; B], [0.0; B]);
                zb[..n].copy_from_slice(z);
                hb[..n].copy_from_slice(h);
                g[0] += hb.iter().sum::<f64>();
                even_legendre(&zb, lmax, |l, p| {
                    g[l / 2] += (0..B).map(|k| hb[k] * p[k]).sum::<f64>();
                });
            }
            g
        })
        .collect();
    let mut g = vec![0.0; nl];
    for p in &partial {
        g.iter_mut().zip(p).for_each(|(x, y)| *x += y);
    }
    g
}

fn compute(nside: usize) -> Vec<f64> {
    let (z, nphi) = north_rings(nside);
    let npix = 12.0 * (nside * nside) as f64;
    let eq = 2 * nside - 1;
    // c_j: the ring's share of the sphere (north and south mirror counted together).
    let c: Vec<f64> = nphi
        .iter()
        .enumerate()
        .map(|(j, &n)| if j == eq { 1.0 } else { 2.0 } * n * 4.0 * PI / npix)
        .collect();
    let lmax = 3 * nside;
    // r_ℓ = 4π δ_ℓ0 − Σ_j c_j P_ℓ(z_j): what the uniform weights miss.
    let mut r: Vec<f64> = analyse(&c, &z, lmax).iter().map(|v| -v).collect();
    r[0] += 4.0 * PI;
    let gmul = |p: &[f64]| {
        let f = synth(p, &z);
        let h: Vec<f64> = f.iter().zip(&c).map(|(f, c)| f * c).collect();
        analyse(&h, &z, lmax)
    };
    let minv: Vec<f64> = (0..r.len())
        .map(|k| (4 * k + 1) as f64 / (4.0 * PI))
        .collect();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut y = vec![0.0; r.len()];
    let mut zr: Vec<f64> = r.iter().zip(&minv).map(|(a, b)| a * b).collect();
    let mut p = zr.clone();
    let mut rz = dot(&r, &zr);
    for _ in 0..50 {
        if r.iter().fold(0.0f64, |m, v| m.max(v.abs())) < 1e-15 * 4.0 * PI {
            break;
        }
        let gp = gmul(&p);
        let a = rz / dot(&p, &gp);
        y.iter_mut().zip(&p).for_each(|(y, p)| *y += a * p);
        r.iter_mut().zip(&gp).for_each(|(r, g)| *r -= a * g);
        zr = r.iter().zip(&minv).map(|(a, b)| a * b).collect();
        let rz2 = dot(&r, &zr);
        let beta = rz2 / rz;
        rz = rz2;
        p.iter_mut().zip(&zr).for_each(|(p, z)| *p = z + beta * *p);
    }
    synth(&y, &z)
}

/// From this nside on the weights are kept on disk: the CG solve takes ~0.1 s at nside 1024 and
/// ~0.3-0.9 s at 2048, paid at the first ring smoothing of every process otherwise (issue 18).
const STORED_FROM: usize = 512;
/// Change when `compute` changes: files of another version are not read.
const STORE_VERSION: u32 = 2;
const STORE_MAGIC: &[u8; 8] = b"SKYRWT01";

/// `compute(nside)` through `<cache folder>/ring_weights/` (see `backend::cuda::cache`): a file
/// holds a header (magic, version, nside, count, FNV-64 of the values) and the values as
/// little-endian f64; one that does not check out is ignored and rewritten. Written to a
/// temporary name and renamed, so concurrent processes never read half a file.
fn stored_or_computed(nside: usize) -> Vec<f64> {
    let t0 = std::time::Instant::now();
    let (w, how) = stored_or_computed_untimed(nside);
    crate::backend::trace::record(
        "ring weights",
        &format!("nside {nside} ({how})"),
        t0.elapsed().as_secs_f64(),
    );
    w
}

fn stored_or_computed_untimed(nside: usize) -> (Vec<f64>, &'static str) {
    if nside < STORED_FROM {
        return (compute(nside), "solved");
    }
    let path = crate::backend::cuda::cache::base_dir().map(|d| {
        d.join("ring_weights").join(format!(
            "v{STORE_VERSION}-{}-nside{nside}.f64",
            env!("CARGO_PKG_VERSION")
        ))
    });
    if let Some(w) = path.as_ref().and_then(|p| load_weights(p, nside)) {
        return (w, "read from the cache");
    }
    let w = compute(nside);
    if let Some(p) = &path {
        let _ = store_weights(p, nside, &w); // a read-only cache only costs the solve again
    }
    (w, "solved and stored")
}

fn weights_header(nside: usize, w: &[f64], body: &[u8]) -> Vec<u8> {
    let mut h = STORE_MAGIC.to_vec();
    h.extend_from_slice(&STORE_VERSION.to_le_bytes());
    h.extend_from_slice(&(nside as u64).to_le_bytes());
    h.extend_from_slice(&(w.len() as u64).to_le_bytes());
    h.extend_from_slice(&crate::backend::cuda::cache::fnv64(body).to_le_bytes());
    h
}

fn load_weights(path: &std::path::Path, nside: usize) -> Option<Vec<f64>> {
    let raw = std::fs::read(path).ok()?;
    let n = 2 * nside; // north rings and the equator
    let head = 8 + 4 + 8 + 8 + 8;
    if raw.len() != head + 8 * n {
        return None;
    }
    let body = &raw[head..];
    let w: Vec<f64> = body
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    (raw[..head] == weights_header(nside, &w, body)[..] && w.iter().all(|v| v.is_finite()))
        .then_some(w)
}

fn store_weights(path: &std::path::Path, nside: usize, w: &[f64]) -> std::io::Result<()> {
    let folder = path.parent().expect("a file in a folder");
    std::fs::create_dir_all(folder)?;
    let body: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut bytes = weights_header(nside, w, &body);
    bytes.extend_from_slice(&body);
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().expect("a file name").to_string_lossy();
    let tmp = folder.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let r = std::fs::write(&tmp, &bytes).and_then(|_| std::fs::rename(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// The factors 1 + w_j of every ring j = 0 … 4·nside − 2 (RING order, north to south),
/// computed once per nside and cached.
pub fn ring_factors(nside: usize) -> Arc<Vec<f64>> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<Vec<f64>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(v) = cache.lock().expect("not poisoned").get(&nside) {
        return v.clone();
    }
    let w = stored_or_computed(nside);
    let nr = 4 * nside - 1;
    let f: Arc<Vec<f64>> = Arc::new((0..nr).map(|j| 1.0 + w[j.min(nr - 1 - j)]).collect());
    cache.lock().expect("not poisoned").insert(nside, f.clone());
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored file gives back the same bits; a damaged or foreign one is refused.
    #[test]
    fn stored_weights_round_trip_and_refuse_damage() {
        let dir = std::env::temp_dir().join(format!("skyconv-rwt-{}", std::process::id()));
        let path = dir.join("w.f64");
        let nside = 8;
        let w = compute(nside);
        store_weights(&path, nside, &w).unwrap();
        let back = load_weights(&path, nside).unwrap();
        assert!(w.iter().zip(&back).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!(load_weights(&path, 4).is_none(), "another nside");
        let mut raw = std::fs::read(&path).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        std::fs::write(&path, &raw).unwrap();
        assert!(load_weights(&path, nside).is_none(), "a flipped bit");
        std::fs::write(&path, &raw[..raw.len() - 8]).unwrap();
        assert!(load_weights(&path, nside).is_none(), "a short file");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Exact for even ℓ ≤ 3·nside: Σ_j c_j (1 + w_j) P_ℓ(z_j) = 4π δ_ℓ0; not so at w = 0.
    #[test]
    fn weights_integrate_legendre_exactly() {
        for nside in [1usize, 2, 4, 16, 64] {
            let (z, nphi) = north_rings(nside);
            let f = ring_factors(nside);
            let npix = 12.0 * (nside * nside) as f64;
            let eq = 2 * nside - 1;
            let cw = |with: bool| -> Vec<f64> {
                (0..2 * nside)
                    .map(|j| {
                        let m = if j == eq { 1.0 } else { 2.0 };
                        m * nphi[j] * 4.0 * PI / npix * if with { f[j] } else { 1.0 }
                    })
                    .collect()
            };
            let g = analyse(&cw(true), &z, 3 * nside);
            let g0 = analyse(&cw(false), &z, 3 * nside);
            let err = |g: &[f64]| {
                g.iter()
                    .enumerate()
                    .map(|(k, v)| (v - if k == 0 { 4.0 * PI } else { 0.0 }).abs())
                    .fold(0.0, f64::max)
            };
            assert!(err(&g) < 1e-13, "nside {nside}: {}", err(&g));
            if nside >= 4 {
                assert!(err(&g0) > 1e-6, "nside {nside}: {}", err(&g0));
            }
            let nr = 4 * nside - 1;
            assert!((0..nr).all(|j| f[j] == f[nr - 1 - j]));
        }
    }
}
