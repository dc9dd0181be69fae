//! Gridding kernels with Cygrid 2.0.4's conventions. Users give widths in degrees and the
//! gauss2d position angle in radians; internally every width is converted to radians once and
//! the kernel is evaluated at a great-circle distance `d` in radians (the same value Cygrid gets
//! from degrees, up to rounding).
//!
//! - `gauss1d (σ)`: exp(−d²/2σ²)
//! - `gauss2d (σ_maj, σ_min, PA)`: exp(−d²/2 · (cos²(β−PA)/σ_maj² + sin²(β−PA)/σ_min²)), β the
//!   bearing from the target pixel to the sample, from north through +lon (east)
//! - `tapered_sinc (σ, a, b)`: sinc(x/b) · exp(−(x/a)²), x = π d/σ, sinc(0) = 1
//! - `gaussbessel (σ, a, b)`: J1(x)/x · exp(−d²/2(aσ)²), x = π d/(bσ); 1/2 at d = 0
//!   (Cygrid returns NaN there)
//!
//! Also the two branch-free helpers the CPU engine evaluates them with: `asin_small` (distance
//! from the chord) and `exp_neg`.

use crate::error::{Error, Result};

/// Which kernel, with the code shared with `kernels/grid.cu`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauss1d = 0,
    Gauss2d = 1,
    TaperedSinc = 2,
    GaussBessel = 3,
}

/// A kernel ready to evaluate: `c` holds precomputed constants (radians).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kernel {
    pub kind: Kind,
    /// gauss1d: [1/2σ², −, −, −]; gauss2d: [1/2σ_maj², 1/2σ_min², cos PA, sin PA];
    /// tapered_sinc: [π/(bσ), π/(aσ), −, −]; gaussbessel: [π/(bσ), 1/2(aσ)², −, −].
    pub c: [f64; 4],
    /// The widest σ in radians (sets the default sphere radius, 3σ).
    pub sigma: f64,
}

fn positive(v: f64, what: &str) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(Error::value(format!(
            "kernel parameter {what} must be finite and > 0, got {v}"
        )))
    }
}

impl Kernel {
    /// A kernel from Cygrid-style arguments: `name` and `params` (degrees, PA in radians).
    /// `tapered_sinc` and `gaussbessel` accept `(σ,)` with a = 2.52, b = 1.55.
    pub fn new(name: &str, params: &[f64]) -> Result<Kernel> {
        let need = |n: &[usize]| -> Result<()> {
            if n.contains(&params.len()) {
                Ok(())
            } else {
                Err(Error::value(format!(
                    "kernel {name:?} takes {} parameter(s), got {}",
                    n.iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(" or "),
                    params.len()
                )))
            }
        };
        let rad = |v: f64, what: &str| positive(v, what).map(f64::to_radians);
        match name {
            "gauss1d" => {
                need(&[1])?;
                let s = rad(params[0], "sigma")?;
                Ok(Kernel {
                    kind: Kind::Gauss1d,
                    c: [0.5 / (s * s), 0.0, 0.0, 0.0],
                    sigma: s,
                })
            }
            "gauss2d" => {
                need(&[3])?;
                let a = rad(params[0], "sigma_maj")?;
                let b = rad(params[1], "sigma_min")?;
                let pa = params[2];
                if !pa.is_finite() {
                    return Err(Error::value(format!("kernel PA must be finite, got {pa}")));
                }
                Ok(Kernel {
                    kind: Kind::Gauss2d,
                    c: [0.5 / (a * a), 0.5 / (b * b), pa.cos(), pa.sin()],
                    sigma: a.max(b),
                })
            }
            "tapered_sinc" | "gaussbessel" => {
                need(&[1, 3])?;
                let s = rad(params[0], "sigma")?;
                let (a, b) = if params.len() == 3 {
                    (positive(params[1], "a")?, positive(params[2], "b")?)
                } else {
                    (2.52, 1.55)
                };
                let (kind, c) = if name == "tapered_sinc" {
                    let c = [
                        std::f64::consts::PI / (b * s),
                        std::f64::consts::PI / (a * s),
                    ];
                    (Kind::TaperedSinc, [c[0], c[1], 0.0, 0.0])
                } else {
                    let c = [std::f64::consts::PI / (b * s), 0.5 / (a * s * a * s)];
                    (Kind::GaussBessel, [c[0], c[1], 0.0, 0.0])
                };
                Ok(Kernel { kind, c, sigma: s })
            }
            _ => Err(Error::value(format!(
                "unknown kernel {name:?}: choose 'gauss1d', 'gauss2d', 'tapered_sinc' or \
                 'gaussbessel'"
            ))),
        }
    }

    /// Whether the kernel depends on the bearing (gauss2d).
    pub fn needs_bearing(&self) -> bool {
        self.kind == Kind::Gauss2d
    }

    /// The weight at distance `d` (radians). For gauss2d, (`cb`, `sb`) are cos and sin of the
    /// bearing (any values when `needs_bearing` is false).
    #[inline(always)]
    pub fn weight(&self, d: f64, cb: f64, sb: f64) -> f64 {
        let c = &self.c;
        match self.kind {
            Kind::Gauss1d => (-d * d * c[0]).exp(),
            Kind::Gauss2d => {
                // cos and sin of (bearing − PA).
                let cr = cb * c[2] + sb * c[3];
                let sr = sb * c[2] - cb * c[3];
                (-d * d * (c[0] * cr * cr + c[1] * sr * sr)).exp()
            }
            Kind::TaperedSinc => {
                let x = d * c[0];
                let y = d * c[1];
                sinc(x) * (-y * y).exp()
            }
            Kind::GaussBessel => j1_over_x(d * c[0]) * (-d * d * c[1]).exp(),
        }
    }
}

/// sin(x)/x, 1 at 0 (Cygrid switches to 1 below |x| = 1e-10, where the two agree in f64).
#[inline(always)]
pub fn sinc(x: f64) -> f64 {
    if x.abs() < 1e-10 {
        1.0
    } else {
        x.sin() / x
    }
}

/// J1(x)/x for x >= 0 (1/2 at 0): power series below 8, Miller's backward recurrence
/// normalised by J0 + 2ΣJ2k = 1 above. Absolute error about 1e-15.
pub fn j1_over_x(x: f64) -> f64 {
    let x = x.abs();
    if x < 8.0 {
        let q = -0.25 * x * x;
        let mut term = 0.5f64;
        let mut sum = 0.5f64;
        let mut k = 1.0;
        while term.abs() > 1e-18 * sum.abs().max(1e-3) {
            term *= q / (k * (k + 1.0));
            sum += term;
            k += 1.0;
        }
        return sum;
    }
    if !x.is_finite() {
        return 0.0;
    }
    // Start well above x so that the neglected J_N is below f64 precision.
    let n = 2 * ((x + 30.0 + 8.0 * x.cbrt()) as usize / 2);
    let (mut jp, mut j) = (0.0f64, 1e-300f64);
    let (mut norm, mut j1) = (0.0f64, 0.0f64);
    for k in (1..=n).rev() {
        let jm = 2.0 * k as f64 / x * j - jp;
        jp = j;
        j = jm;
        // j now holds J_{k-1} (unnormalised).
        if k - 1 == 1 {
            j1 = j;
        }
        if (k - 1) % 2 == 0 && k > 1 {
            norm += 2.0 * j;
        }
        if j.abs() > 1e250 {
            j *= 1e-250;
            jp *= 1e-250;
            norm *= 1e-250;
            j1 *= 1e-250;
        }
    }
    // After the loop j = J_0, and norm holds 2 Σ_{k>=1} J_2k.
    j1 / (j + norm) / x
}

/// asin(h) by its Taylor series, for 0 <= h < 0.1 (relative error < 1e-17 there);
/// branch-free so that loops over it vectorise.
#[inline(always)]
pub fn asin_series(h: f64) -> f64 {
    let q = h * h;
    let p = 143.0 / 10240.0;
    let p = p * q + 231.0 / 13312.0;
    let p = p * q + 63.0 / 2816.0;
    let p = p * q + 35.0 / 1152.0;
    let p = p * q + 5.0 / 112.0;
    let p = p * q + 3.0 / 40.0;
    let p = p * q + 1.0 / 6.0;
    h + h * q * p
}

/// asin for 0 <= h <= 1: the series below 0.1, libm above.
#[inline(always)]
pub fn asin_small(h: f64) -> f64 {
    if h < 0.1 {
        asin_series(h)
    } else {
        h.min(1.0).asin()
    }
}

/// e^x for x <= 0 (0 below −708), within about 2 ulp: Cody–Waite reduction by ln 2 and a
/// degree-13 Taylor polynomial on |r| <= ln2/2; branch-free so that loops over it vectorise.
#[inline(always)]
pub fn exp_neg(x: f64) -> f64 {
    const MAGIC: f64 = 6755399441055744.0; // 1.5·2^52: adding it rounds to an integer
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let x = x.max(-708.0);
    let t = x * std::f64::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.0 / 6_227_020_800.0;
    p = p * r + 1.0 / 479_001_600.0;
    p = p * r + 1.0 / 39_916_800.0;
    p = p * r + 1.0 / 3_628_800.0;
    p = p * r + 1.0 / 362_880.0;
    p = p * r + 1.0 / 40_320.0;
    p = p * r + 1.0 / 5_040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    // The low bits of t hold n (two's complement); put n + 1023 in the exponent field.
    let scale = f64::from_bits(t.to_bits().wrapping_add(1023) << 52);
    p * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn j1_matches_known_values() {
        // scipy.special.j1 values.
        let cases = [
            (0.5, 0.24226845767487387),
            (1.0, 0.44005058574493355),
            (5.0, -0.3275791375914653),
            (8.0, 0.2346363468539146),
            (10.0, 0.04347274616886141),
            (20.0, 0.0668331241758502),
            (50.0, -0.09751182812517509),
        ];
        for (x, j1) in cases {
            let got = j1_over_x(x) * x;
            assert!((got - j1).abs() < 2e-15, "x={x}: {got} vs {j1}");
        }
        assert_eq!(j1_over_x(0.0), 0.5);
    }

    #[test]
    fn kernels_at_zero_and_params() {
        for (name, p) in [
            ("gauss1d", vec![0.1]),
            ("gauss2d", vec![0.1, 0.05, 0.3]),
            ("tapered_sinc", vec![0.1, 2.52, 1.55]),
            ("tapered_sinc", vec![0.1]),
        ] {
            assert_eq!(Kernel::new(name, &p).unwrap().weight(0.0, 1.0, 0.0), 1.0);
        }
        let gb = Kernel::new("gaussbessel", &[0.1]).unwrap();
        assert_eq!(gb.weight(0.0, 1.0, 0.0), 0.5);
        assert!(Kernel::new("gauss1d", &[0.0]).is_err());
        assert!(Kernel::new("gauss1d", &[0.1, 0.2]).is_err());
        assert!(Kernel::new("box", &[0.1]).is_err());
    }

    #[test]
    fn exp_neg_is_within_two_ulp() {
        let mut x = 0.0f64;
        while x > -700.0 {
            let (got, want) = (exp_neg(x), x.exp());
            assert!(
                (got - want).abs() <= 4.5e-16 * want,
                "x={x}: {got} vs {want}"
            );
            x -= 0.0137;
        }
        assert_eq!(exp_neg(0.0), 1.0);
        assert_eq!(exp_neg(-800.0), (-708.0f64).exp().max(exp_neg(-708.0)));
    }

    #[test]
    fn asin_series_matches_libm() {
        for i in 0..1000 {
            let h = i as f64 * 1e-4;
            assert!((asin_small(h) - h.asin()).abs() <= 2.3e-16 * h.asin().max(1e-300));
        }
    }
}
