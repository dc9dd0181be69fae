//! Radial kernel profiles K(γ) for the ring method, γ the angular distance (radians), K per
//! steradian so that the smooth map is Σ_p K(γ_pq) m(p) · 4π/npix.
//!
//! - [`gaussian`]: the spherical Gaussian whose Legendre window is exp(−½ℓ(ℓ+1)σ²), from a
//!   closed form for narrow beams or a Legendre sum for broad ones.
//! - [`from_window`]: K(γ) = Σ_ℓ (2ℓ+1)/(4π) b_ℓ P_ℓ(cos γ) for any beam window b_ℓ.
//! - Both are truncated at θcut, beyond which |K| < tol·|K(0)| everywhere, tabulated at
//!   nodes denser at small angle, and rescaled so that their ℓ = 0 window is b_0 (the
//!   truncation would otherwise lose ≈ tol of the integral).
//! - [`Spline`]: the cubic spline through any tabulated profile (K'(0) = 0, K even in γ).
//! - [`Table`]: the engine's lookup, uniform in u = sin(γ/2) (1 − cos γ = 2u², which the
//!   engines compute without cancellation), one cubic per interval.

use rayon::prelude::*;
use std::f64::consts::PI;

use crate::error::{Error, Result};

/// A tabulated profile: K at ascending nodes theta[0] = 0 … theta[last] = θcut; K = 0 beyond.
#[derive(Clone, Debug)]
pub struct Profile {
    pub theta: Vec<f64>,
    pub values: Vec<f64>,
}

impl Profile {
    pub fn theta_cut(&self) -> f64 {
        *self.theta.last().expect("profiles have nodes")
    }
}

/// Below this σ (radians) the closed form is within ~1e-12 of the peak (its error is
/// ≈ 0.0135·t² of K(0), t = σ²/2); above it the Legendre sum needs only ℓ ≲ 2300.
const SIGMA_CLOSED: f64 = 4e-3;
/// Minimum intervals of a tabulated profile.
const MIN_INTERVALS: usize = 1024;
/// Node placement θ = θcut·(t + A t²)/(1 + A), t uniform: 1 + 2A times denser at γ = 0 than at
/// θcut, where profiles are flat in relative terms.
const NODE_A: f64 = 1.0;

fn check_tol(tol: f64) -> Result<()> {
    if !(tol > 0.0 && tol < 1.0) {
        return Err(Error::value(format!("tol must be in (0, 1), got {tol}")));
    }
    Ok(())
}

/// σ = fwhm / √(8 ln 2).
pub fn sigma_of_fwhm(fwhm: f64) -> f64 {
    fwhm / (8.0 * std::f64::consts::LN_2).sqrt()
}

/// Closed form of the spherical Gaussian (heat kernel with t = σ²/2):
/// K(γ) = e^{t/3} / (4πt) · √(γ / sin γ) · exp(−γ² / 4t). The e^{t/3} (not e^{t/4}) absorbs the
/// first correction term; valid for γ < π and small t.
fn gauss_closed(sigma: f64, gamma: f64) -> f64 {
    let t = 0.5 * sigma * sigma;
    let r = if gamma > 1e-8 {
        gamma / gamma.sin()
    } else {
        1.0 + gamma * gamma / 6.0
    };
    (t / 3.0).exp() / (4.0 * PI * t) * r.sqrt() * (-gamma * gamma / (4.0 * t)).exp()
}

/// The Gaussian window exp(−½ℓ(ℓ+1)σ²) up to where it is below 1e-35 of b_0.
pub fn gauss_window(sigma: f64) -> Vec<f64> {
    let lmax = ((80.0f64).sqrt() / sigma).ceil() as usize + 2;
    (0..=lmax)
        .map(|l| (-0.5 * (l * (l + 1)) as f64 * sigma * sigma).exp())
        .collect()
}

/// The spherical Gaussian of full width `fwhm` (radians), truncated at tol·K(0).
pub fn gaussian(fwhm: f64, tol: f64) -> Result<Profile> {
    if !(fwhm.is_finite() && fwhm > 0.0) {
        return Err(Error::value(format!(
            "fwhm must be a positive number of radians, got {fwhm}"
        )));
    }
    check_tol(tol)?;
    let sigma = sigma_of_fwhm(fwhm);
    if sigma >= SIGMA_CLOSED {
        return from_window(&gauss_window(sigma), tol);
    }
    // Monotone: bisect K(γ) = tol·K(0) (the closed form stays accurate far beyond θcut).
    let k0 = gauss_closed(sigma, 0.0);
    let (mut lo, mut hi) = (0.0, (40.0 * sigma).min(PI));
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if gauss_closed(sigma, mid) >= tol * k0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let theta = nodes(hi, MIN_INTERVALS);
    let values = theta.iter().map(|&g| gauss_closed(sigma, g)).collect();
    let mut p = Profile { theta, values };
    normalise(&mut p, 1.0);
    Ok(p)
}

/// K(γ) = Σ_ℓ (2ℓ+1)/(4π) b_ℓ P_ℓ(cos γ) from a beam window b_ℓ (ℓ = 0 … len−1), truncated where
/// |K| stays below tol·|K(0)| out to π.
pub fn from_window(window: &[f64], tol: f64) -> Result<Profile> {
    check_tol(tol)?;
    if window.is_empty() {
        return Err(Error::shape("beam_window must have at least one value"));
    }
    if let Some(l) = window.iter().position(|b| !b.is_finite()) {
        return Err(Error::value(format!(
            "beam_window must be finite, got {} at l={l}",
            window[l]
        )));
    }
    let lmax = window.len() - 1;
    let k0 = legendre_sum(window, &[1.0])[0];
    if k0 == 0.0 || !k0.is_finite() {
        return Err(Error::value(
            "beam_window gives a kernel with K(0) = 0: nothing to truncate against",
        ));
    }
    // 16 samples per oscillation of P_lmax find the last |K| >= floor, bisection refines it;
    // the 0.9 covers peaks between samples (≤ 2% above the sampled values).
    let floor = 0.9 * tol * k0.abs();
    let ngrid = (8 * lmax).max(64);
    let h = PI / ngrid as f64;
    let xs: Vec<f64> = (0..=ngrid).map(|k| (k as f64 * h).cos()).collect();
    let ks = legendre_sum(window, &xs);
    let last = ks.iter().rposition(|v| v.abs() >= floor).unwrap_or(0);
    let theta_cut = if last == ngrid {
        PI
    } else {
        let (mut lo, mut hi) = (last as f64 * h, (last + 1) as f64 * h);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if legendre_sum(window, &[mid.cos()])[0].abs() >= floor {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    };
    // ~24 nodes per oscillation of P_lmax inside the support.
    let n = ((4.0 * theta_cut * lmax as f64).ceil() as usize).clamp(MIN_INTERVALS, 1 << 20);
    let theta = nodes(theta_cut, n);
    let cs: Vec<f64> = theta.iter().map(|t| t.cos()).collect();
    let values = legendre_sum(window, &cs);
    let mut p = Profile { theta, values };
    normalise(&mut p, window[0]);
    Ok(p)
}

/// `n` intervals on [0, θcut], denser at small angle.
fn nodes(theta_cut: f64, n: usize) -> Vec<f64> {
    (0..=n)
        .map(|k| {
            let t = k as f64 / n as f64;
            if k == n {
                theta_cut
            } else {
                theta_cut * (t + NODE_A * t * t) / (1.0 + NODE_A)
            }
        })
        .collect()
}

/// Rescale so that the ℓ = 0 window 2π∫K sin θ dθ equals `b0` (no-op if either is zero).
fn normalise(p: &mut Profile, b0: f64) {
    let have = window_of(&p.theta, &p.values, 0)
        .map(|w| w[0])
        .unwrap_or(0.0);
    if have != 0.0 && b0 != 0.0 && have.is_finite() {
        let f = b0 / have;
        p.values.iter_mut().for_each(|v| *v *= f);
    }
}

/// Σ_ℓ (2ℓ+1)/(4π) b_ℓ P_ℓ(x) at every x (cos γ), by the normalised recurrence
/// λ_ℓ = √((2ℓ+1)/4π) P_ℓ: λ_ℓ = a_ℓ x λ_{ℓ−1} − c_ℓ λ_{ℓ−2}. Blocks of x run together (the
/// inner loop vectorises); parallel over blocks.
pub fn legendre_sum(window: &[f64], xs: &[f64]) -> Vec<f64> {
    const B: usize = 64;
    let lmax = window.len().saturating_sub(1);
    // Per ℓ: a_ℓ, c_ℓ and the weight √((2ℓ+1)/4π) b_ℓ.
    let coef: Vec<(f64, f64, f64)> = (0..=lmax)
        .map(|l| {
            let lf = l as f64;
            let a = if l >= 1 {
                ((4.0 * lf * lf - 1.0) / (lf * lf)).sqrt()
            } else {
                0.0
            };
            let c = if l >= 2 {
                ((2.0 * lf + 1.0) / (2.0 * lf - 3.0)).sqrt() * (lf - 1.0) / lf
            } else {
                0.0
            };
            (a, c, ((2.0 * lf + 1.0) / (4.0 * PI)).sqrt() * window[l])
        })
        .collect();
    let mut out = vec![0.0; xs.len()];
    out.par_chunks_mut(B)
        .zip(xs.par_chunks(B))
        .for_each(|(o, x)| {
            let n = x.len();
            let mut xb = [0.0; B];
            xb[..n].copy_from_slice(x);
            let l0 = (1.0 / (4.0 * PI)).sqrt();
            let mut p0 = [l0; B];
            let mut p1 = [0.0; B];
            let mut acc = [0.0; B];
            for k in 0..B {
                acc[k] = coef[0].2 * l0;
                p1[k] = 3f64.sqrt() * xb[k] * l0;
            }
            if lmax >= 1 {
                for k in 0..B {
                    acc[k] += coef[1].2 * p1[k];
                }
            }
            for &(a, c, w) in coef.iter().skip(2) {
                for k in 0..B {
                    let p2 = a * xb[k] * p1[k] - c * p0[k];
                    acc[k] += w * p2;
                    p0[k] = p1[k];
                    p1[k] = p2;
                }
            }
            o.copy_from_slice(&acc[..n]);
        });
    out
}

// ------------------------------------------------------------------------------------------
// Interpolation

/// Cubic spline through (theta, values), clamped K'(0) = 0 and, at θcut, the slope of the
/// cubic through the last four nodes. Evaluated as cubic Hermite pieces.
pub struct Spline {
    x: Vec<f64>,
    y: Vec<f64>,
    d: Vec<f64>,
}

/// Check a user profile: ≥ 2 nodes, theta[0] = 0, strictly ascending, ≤ π, all finite.
pub fn check_profile(theta: &[f64], values: &[f64]) -> Result<()> {
    if theta.len() != values.len() {
        return Err(Error::shape(format!(
            "theta and values must have the same length, got {} and {}",
            theta.len(),
            values.len()
        )));
    }
    if theta.len() < 2 {
        return Err(Error::shape("theta must have at least 2 nodes"));
    }
    if theta[0] != 0.0 {
        return Err(Error::value(format!(
            "theta must start at 0, got {}",
            theta[0]
        )));
    }
    if !theta.iter().all(|t| t.is_finite()) || theta.windows(2).any(|w| w[1] <= w[0]) {
        return Err(Error::value("theta must be finite and strictly ascending"));
    }
    if *theta.last().unwrap() > PI {
        return Err(Error::value("theta must not exceed pi"));
    }
    if let Some(k) = values.iter().position(|v| !v.is_finite()) {
        return Err(Error::value(format!(
            "values must be finite, got {} at index {k}",
            values[k]
        )));
    }
    Ok(())
}

impl Spline {
    /// The spline of a profile already checked by [`check_profile`].
    pub fn new(theta: &[f64], values: &[f64]) -> Self {
        let n = theta.len();
        let x = theta.to_vec();
        let y = values.to_vec();
        let h: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
        let s: Vec<f64> = (0..n - 1).map(|k| (y[k + 1] - y[k]) / h[k]).collect();
        let d_end = end_slope(&x, &y);
        let mut d = vec![0.0; n];
        d[n - 1] = d_end;
        if n > 2 {
            // Interior slopes: h_k d_{k−1} + 2(h_{k−1} + h_k) d_k + h_{k−1} d_{k+1}
            // = 3(h_k s_{k−1} + h_{k−1} s_k), d_0 = 0 and d_{n−1} known (Thomas algorithm).
            let m = n - 2;
            let mut diag = vec![0.0; m];
            let mut rhs = vec![0.0; m];
            let mut up = vec![0.0; m];
            let mut lowv = vec![0.0; m];
            for r in 0..m {
                let k = r + 1;
                lowv[r] = h[k];
                diag[r] = 2.0 * (h[k - 1] + h[k]);
                up[r] = h[k - 1];
                rhs[r] = 3.0 * (h[k] * s[k - 1] + h[k - 1] * s[k]);
            }
            rhs[m - 1] -= up[m - 1] * d_end;
            for r in 1..m {
                let w = lowv[r] / diag[r - 1];
                diag[r] -= w * up[r - 1];
                rhs[r] -= w * rhs[r - 1];
            }
            d[m] = rhs[m - 1] / diag[m - 1];
            for r in (0..m - 1).rev() {
                d[r + 1] = (rhs[r] - up[r] * d[r + 2]) / diag[r];
            }
        }
        Spline { x, y, d }
    }

    pub fn theta_cut(&self) -> f64 {
        *self.x.last().unwrap()
    }

    /// K and dK/dθ at γ (0 beyond θcut).
    pub fn eval(&self, g: f64) -> (f64, f64) {
        let n = self.x.len();
        if g > self.x[n - 1] || g < 0.0 {
            return (0.0, 0.0);
        }
        let k = match self.x.partition_point(|&v| v <= g) {
            0 => 0,
            p => (p - 1).min(n - 2),
        };
        let h = self.x[k + 1] - self.x[k];
        let t = (g - self.x[k]) / h;
        let (y0, y1, d0, d1) = (self.y[k], self.y[k + 1], self.d[k] * h, self.d[k + 1] * h);
        let t2 = t * t;
        let t3 = t2 * t;
        let v = (2.0 * t3 - 3.0 * t2 + 1.0) * y0
            + (t3 - 2.0 * t2 + t) * d0
            + (-2.0 * t3 + 3.0 * t2) * y1
            + (t3 - t2) * d1;
        let dv = ((6.0 * t2 - 6.0 * t) * y0
            + (3.0 * t2 - 4.0 * t + 1.0) * d0
            + (-6.0 * t2 + 6.0 * t) * y1
            + (3.0 * t2 - 2.0 * t) * d1)
            / h;
        (v, dv)
    }
}

/// Slope at the last node from the cubic (or lower) through the last up-to-four nodes.
fn end_slope(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len();
    let k0 = n.saturating_sub(4);
    let xe = x[n - 1];
    // Derivative of the Lagrange interpolant at xe.
    let mut d = 0.0;
    for i in k0..n {
        let mut li_d = 0.0;
        for j in k0..n {
            if j == i {
                continue;
            }
            let mut term = 1.0 / (x[i] - x[j]);
            for m in k0..n {
                if m != i && m != j {
                    term *= (xe - x[m]) / (x[i] - x[m]);
                }
            }
            li_d += term;
        }
        d += y[i] * li_d;
    }
    d
}

/// b_ℓ = 2π ∫_0^θcut K(θ) P_ℓ(cos θ) sin θ dθ for ℓ = 0 … lmax (Gauss–Legendre, 6 points per
/// node interval, on the spline). Checks the profile.
pub fn window_of(theta: &[f64], values: &[f64], lmax: usize) -> Result<Vec<f64>> {
    check_profile(theta, values)?;
    let sp = Spline::new(theta, values);
    const GX: [f64; 6] = [
        -0.932_469_514_203_152,
        -0.661_209_386_466_264_5,
        -0.238_619_186_083_196_9,
        0.238_619_186_083_196_9,
        0.661_209_386_466_264_5,
        0.932_469_514_203_152,
    ];
    const GW: [f64; 6] = [
        0.171_324_492_379_170_3,
        0.360_761_573_048_138_6,
        0.467_913_934_572_691,
        0.467_913_934_572_691,
        0.360_761_573_048_138_6,
        0.171_324_492_379_170_3,
    ];
    let mut pts = Vec::with_capacity(6 * theta.len());
    for w in theta.windows(2) {
        let (a, b) = (w[0], w[1]);
        for (gx, gw) in GX.iter().zip(GW) {
            let t = 0.5 * (a + b) + 0.5 * (b - a) * gx;
            pts.push((
                t.cos(),
                0.5 * (b - a) * gw * t.sin() * sp.eval(t).0 * 2.0 * PI,
            ));
        }
    }
    // One recurrence over ℓ per point, accumulated into every b_ℓ; fixed chunks summed in
    // order, so the result does not depend on the thread count.
    let partial: Vec<Vec<f64>> = pts
        .par_chunks(256)
        .map(|chunk| {
            let mut b = vec![0.0; lmax + 1];
            for &(x, w) in chunk {
                let (mut p0, mut p1) = (1.0, x);
                b[0] += w;
                if lmax >= 1 {
                    b[1] += w * x;
                }
                for (l, bl) in b.iter_mut().enumerate().skip(2) {
                    let lf = l as f64;
                    let p2 = ((2.0 * lf - 1.0) * x * p1 - (lf - 1.0) * p0) / lf;
                    *bl += w * p2;
                    p0 = p1;
                    p1 = p2;
                }
            }
            b
        })
        .collect();
    let mut out = vec![0.0; lmax + 1];
    for b in &partial {
        out.iter_mut().zip(b).for_each(|(o, v)| *o += v);
    }
    Ok(out)
}

// ------------------------------------------------------------------------------------------
// The engine's lookup table

/// K as cubics on a uniform grid in u = sin(γ/2) over [0, sin(θcut/2)]. Built from a spline in
/// u through the profile's values at the grid (clamped dK/du = 0 at u = 0, since K is even).
#[derive(Clone, Debug)]
pub struct Table {
    /// Per interval (c0, c1, c2, c3): K = c0 + t(c1 + t(c2 + t c3)), t ∈ [0, 1).
    pub coef: Vec<[f64; 4]>,
    /// Intervals per unit u.
    pub inv_h: f64,
    /// sin²(θcut/2): K = 0 where u² exceeds it.
    pub u2_cut: f64,
    pub theta_cut: f64,
}

impl Table {
    /// The table of a profile (checked here); `intervals` = 0 picks 2× the profile's nodes
    /// (at least 2048), so the grid is as fine as the profile's finest spacing.
    pub fn new(theta: &[f64], values: &[f64], intervals: usize) -> Result<Self> {
        check_profile(theta, values)?;
        let sp = Spline::new(theta, values);
        let theta_cut = sp.theta_cut();
        let n = if intervals == 0 {
            (2 * theta.len()).max(2048)
        } else {
            intervals
        };
        let ucut = (0.5 * theta_cut).sin();
        let h = ucut / n as f64;
        // Values at the u grid; the last node sits exactly at θcut.
        let y: Vec<f64> = (0..=n)
            .map(|k| {
                let g = if k == n {
                    theta_cut
                } else {
                    2.0 * (k as f64 * h).asin()
                };
                sp.eval(g.min(theta_cut)).0
            })
            .collect();
        let xs: Vec<f64> = (0..=n).map(|k| k as f64 * h).collect();
        let su = Spline::new(&xs, &y);
        let coef = (0..n)
            .map(|k| {
                let (y0, y1) = (su.y[k], su.y[k + 1]);
                let (d0, d1) = (su.d[k] * h, su.d[k + 1] * h);
                [
                    y0,
                    d0,
                    3.0 * (y1 - y0) - 2.0 * d0 - d1,
                    2.0 * (y0 - y1) + d0 + d1,
                ]
            })
            .collect();
        Ok(Table {
            coef,
            inv_h: 1.0 / h,
            u2_cut: ucut * ucut,
            theta_cut,
        })
    }

    /// K at u² = sin²(γ/2) (0 beyond the cut).
    #[inline(always)]
    pub fn eval_u2(&self, u2: f64) -> f64 {
        if u2 > self.u2_cut {
            return 0.0;
        }
        let q = u2.sqrt() * self.inv_h;
        let k = (q as usize).min(self.coef.len() - 1);
        let t = q - k as f64;
        let c = &self.coef[k];
        c[0] + t * (c[1] + t * (c[2] + t * c[3]))
    }

    /// K at angle γ (radians).
    pub fn eval(&self, gamma: f64) -> f64 {
        let s = (0.5 * gamma).sin();
        if gamma > self.theta_cut {
            return 0.0;
        }
        self.eval_u2(s * s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_gaussian_matches_legendre_sum() {
        for sigma in [3.9e-3, 1e-3] {
            let w = gauss_window(sigma);
            let gs: Vec<f64> = (0..50).map(|k| k as f64 * 0.12 * sigma).collect();
            let xs: Vec<f64> = gs.iter().map(|g| g.cos()).collect();
            let exact = legendre_sum(&w, &xs);
            for (g, e) in gs.iter().zip(&exact) {
                let c = gauss_closed(sigma, *g);
                // The reference recurrence is marginally stable at x → 1: over ~9/σ terms it
                // carries up to ~ε·ℓ^1.5 ≈ 1e-9 of roundoff itself.
                assert!(
                    (c - e).abs() < 1e-9 * exact[0],
                    "sigma {sigma} g {g}: {c} vs {e}"
                );
            }
        }
    }

    #[test]
    fn gaussian_window_is_exp() {
        for fwhm in [0.005, 0.02, 0.2] {
            let p = gaussian(fwhm, 1e-8).unwrap();
            let s = sigma_of_fwhm(fwhm);
            let lmax = (3.0 / s) as usize;
            let w = window_of(&p.theta, &p.values, lmax).unwrap();
            for (l, b) in w.iter().enumerate() {
                let want = (-0.5 * (l * (l + 1)) as f64 * s * s).exp();
                assert!((b - want).abs() < 2e-8, "fwhm {fwhm} l {l}: {b} vs {want}");
            }
        }
    }

    #[test]
    fn truncation_is_at_tol() {
        // Closed form (σ < 4e-3): at tol exactly; Legendre sum: at 0.9 tol (sampling margin).
        for (fwhm, at) in [(0.005, 1e-5), (0.02, 0.9e-5)] {
            let p = gaussian(fwhm, 1e-5).unwrap();
            let n = p.values.len();
            let r = p.values[n - 1] / p.values[0];
            assert!((r - at).abs() < 1e-9, "{r}");
        }
        // A window with sidelobes: the tail beyond θcut stays below tol.
        let w: Vec<f64> = (0..65)
            .map(|l| (0.5 * PI * l as f64 / 65.0).cos().powi(2))
            .collect();
        let p = from_window(&w, 1e-3).unwrap();
        let tc = p.theta_cut();
        assert!(tc < 1.0, "{tc}");
        let k0 = p.values[0];
        let xs: Vec<f64> = (0..2000)
            .map(|k| (tc + (PI - tc) * k as f64 / 1999.0).cos())
            .collect();
        let tail = legendre_sum(&w, &xs);
        let scale = k0 / legendre_sum(&w, &[1.0])[0];
        let worst = tail.iter().map(|v| (v * scale).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-3 * k0, "{tc} {} {}", worst / k0, scale);
        assert!(p.values[p.values.len() - 1].abs() > 0.8e-3 * k0);
    }

    #[test]
    fn table_matches_spline() {
        let p = gaussian(0.003, 1e-6).unwrap();
        let t = Table::new(&p.theta, &p.values, 0).unwrap();
        let sigma = sigma_of_fwhm(0.003);
        let k0 = p.values[0];
        for k in 0..997 {
            let g = k as f64 / 997.0 * t.theta_cut;
            let want = gauss_closed(sigma, g) * p.values[0] / gauss_closed(sigma, 0.0);
            assert!((t.eval(g) - want).abs() < 1e-10 * k0, "g {g}");
        }
        assert_eq!(t.eval(t.theta_cut * 1.0001), 0.0);
    }
}
