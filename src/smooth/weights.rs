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

/// g_ℓ = Σ_j h_j P_ℓ(z_j) for even ℓ ≤ lmax (g[k] for ℓ = 2k).
fn analyse(h: &[f64], z: &[f64], lmax: usize) -> Vec<f64> {
    let nl = lmax / 2 + 1;
    z.par_chunks(B)
        .zip(h.par_chunks(B))
        .fold(
            || vec![0.0; nl],
            |mut g, (z, h)| {
                let n = z.len();
                let (mut zb, mut hb) = ([0.0; B], [0.0; B]);
                zb[..n].copy_from_slice(z);
                hb[..n].copy_from_slice(h);
                g[0] += hb.iter().sum::<f64>();
                even_legendre(&zb, lmax, |l, p| {
                    g[l / 2] += (0..B).map(|k| hb[k] * p[k]).sum::<f64>();
                });
                g
            },
        )
        .reduce(
            || vec![0.0; nl],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                a
            },
        )
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

/// The factors 1 + w_j of every ring j = 0 … 4·nside − 2 (RING order, north to south),
/// computed once per nside and cached.
pub fn ring_factors(nside: usize) -> Arc<Vec<f64>> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<Vec<f64>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(v) = cache.lock().expect("not poisoned").get(&nside) {
        return v.clone();
    }
    let w = compute(nside);
    let nr = 4 * nside - 1;
    let f: Arc<Vec<f64>> = Arc::new((0..nr).map(|j| 1.0 + w[j.min(nr - 1 - j)]).collect());
    cache.lock().expect("not poisoned").insert(nside, f.clone());
    f
}

#[cfg(test)]
mod tests {
    use super::*;

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
