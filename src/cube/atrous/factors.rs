//! The à trous filters and DUCHAMP 1.6.1's per-scale noise factors.
//!
//! For white noise of unit rms, the wavelet coefficients of scale s have rms `f[dim][s]`
//! (`f[·][0] = 1` is the data itself). DUCHAMP tabulates f for each filter and dimension up to
//! a maximum scale and extrapolates beyond it by dividing the previous factor by √2 (1-D), 2
//! (2-D) or √8 (3-D), the asymptotic drop per dyadic scale.
//!
//! DUCHAMP 1.6.1's tables have two quirks. `Variant::Duchamp` (the default) keeps them, so that
//! thresholds equal DUCHAMP's; `Variant::Corrected` mends them (see also the Python docstring):
//! - Triangle, 2-D: DUCHAMP declares 12 tabulated scales but copies only 11 of the 13 table
//!   values into the array it reads, so scale 12 reads an unfilled slot (0, a zero threshold
//!   factor) and every later scale extrapolates from that 0 (so stays 0). Corrected: the
//!   tabulated value 2.22868922e-4, extrapolated from.
//! - Triangle, 1-D: the last table entry (scale 18) reads 1.12763724e-4, a slip of a decade
//!   (every other entry falls by √2 per scale; 1.59471988e-3/√2 = 1.1276e-3). Corrected:
//!   1.12763724e-3.
//! - The loading loops also read past the ends of several source tables (B3 3-D, triangle
//!   2-D/3-D, Haar); those slots lie beyond the tabulated maximum scale and are never used for
//!   thresholds, so they change no result.
//!
//! The tables are the filters' propagated noise (the rms of (H_{s−1} − H_s)∗x for unit white
//! noise x, H_s the product of the dilated filters of scales 1..s) to 3e-8, except three entries
//! both variants keep as DUCHAMP has them: B3 2-D scale 4 (7.3e-4 high), Haar 1-D scale 1
//! (8.6e-5 high) and the whole Haar 2-D table (half the propagated noise). The extrapolation past
//! the tables is within 6e-7 of the propagated noise in 1-D and 2-D, 2.1e-4 in 3-D
//! (tests/test_atrous_duchamp.py).

use super::Variant;
use crate::error::{Error, Result};

/// The scaling functions DUCHAMP offers (its `filterCode` 1, 2, 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaveletFilter {
    /// B3 spline (1, 4, 6, 4, 1)/16.
    B3Spline,
    /// Triangle (1, 2, 1)/4.
    Triangle,
    /// Haar (0, 1, 1)/2: the pixel and its neighbour one hole-spacing up.
    Haar,
}

const B3_1D: [f64; 19] = [
    1.0,
    7.23489806e-1,
    2.85450405e-1,
    1.77947535e-1,
    1.22223156e-1,
    8.58113122e-2,
    6.05703043e-2,
    4.28107206e-2,
    3.02684024e-2,
    2.14024008e-2,
    1.51336781e-2,
    1.07011079e-2,
    7.56682272e-3,
    5.35055108e-3,
    3.78341085e-3,
    2.67527545e-3,
    1.89170541e-3,
    1.33763772e-3,
    9.45852704e-4,
];
const B3_2D: [f64; 12] = [
    1.0,
    8.90796310e-1,
    2.00663851e-1,
    8.55075048e-2,
    4.12474444e-2,
    2.04249666e-2,
    1.01897592e-2,
    5.09204670e-3,
    2.54566946e-3,
    1.27279050e-3,
    6.36389722e-4,
    3.18194170e-4,
];
const B3_3D: [f64; 8] = [
    1.0,
    9.56543592e-1,
    1.20336499e-1,
    3.49500154e-2,
    1.18164242e-2,
    4.13233507e-3,
    1.45703714e-3,
    5.14791120e-4,
];
const TRIANGLE_1D: [f64; 19] = [
    1.0,
    6.12372436e-1,
    3.30718914e-1,
    2.11947812e-1,
    1.45740298e-1,
    1.02310944e-1,
    7.22128185e-2,
    5.10388224e-2,
    3.60857673e-2,
    2.55157615e-2,
    1.80422389e-2,
    1.27577667e-2,
    9.02109930e-3,
    6.37887978e-3,
    4.51054902e-3,
    3.18942978e-3,
    2.25527449e-3,
    1.59471988e-3,
    1.12763724e-3, // Variant::Duchamp: 1.12763724e-4 (see the module notes)
];
const TRIANGLE_2D: [f64; 13] = [
    1.0,
    8.00390530e-1,
    2.72878894e-1,
    1.19779282e-1,
    5.77664785e-2,
    2.86163283e-2,
    1.42747506e-2,
    7.13319703e-3,
    3.56607618e-3,
    1.78297280e-3,
    8.91478237e-4,
    4.45738098e-4,
    2.22868922e-4, // Variant::Duchamp: 0 (see the module notes)
];
const TRIANGLE_3D: [f64; 9] = [
    1.0,
    8.959544490e-1,
    1.92033014e-1,
    5.76484078e-2,
    1.94912393e-2,
    6.812783870e-3,
    2.40175885e-3,
    8.48538128e-4,
    2.99949455e-4,
];
const HAAR_1D: [f64; 7] = [
    1.0,
    7.07167810e-1,
    5.00000000e-1,
    3.53553391e-1,
    2.50000000e-1,
    1.76776695e-1,
    1.25000000e-1,
];
const HAAR_2D: [f64; 7] = [
    1.0,
    4.33012702e-1,
    2.16506351e-1,
    1.08253175e-1,
    5.41265877e-2,
    2.70632939e-2,
    1.35316469e-2,
];
const HAAR_3D: [f64; 9] = [
    1.0,
    9.35414347e-1,
    3.30718914e-1,
    1.16926793e-1,
    4.13398642e-2,
    1.46158492e-2,
    5.16748303e-3,
    1.82698115e-3,
    6.45935379e-4,
];

impl WaveletFilter {
    pub fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "b3spline" | "b3" | "1" => Ok(WaveletFilter::B3Spline),
            "triangle" | "2" => Ok(WaveletFilter::Triangle),
            "haar" | "3" => Ok(WaveletFilter::Haar),
            _ => Err(Error::value(format!(
                "filter must be 'b3spline', 'triangle' or 'haar', got {name:?}"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WaveletFilter::B3Spline => "b3spline",
            WaveletFilter::Triangle => "triangle",
            WaveletFilter::Haar => "haar",
        }
    }

    /// The 1-D filter weights (the 2-D/3-D filters are their outer products).
    pub fn weights(self) -> &'static [f64] {
        match self {
            WaveletFilter::B3Spline => &[0.0625, 0.25, 0.375, 0.25, 0.0625],
            WaveletFilter::Triangle => &[0.25, 0.5, 0.25],
            WaveletFilter::Haar => &[0.0, 0.5, 0.5],
        }
    }

    /// DUCHAMP's number of scales for a smallest dimension of `length` pixels:
    /// B3 `int(log2(L−1)) − 1`, triangle and Haar `int(log2(L−1))`. Zero or less means the data
    /// are too small for the filter.
    pub fn num_scales(self, length: usize) -> i64 {
        if length < 2 {
            return 0;
        }
        // floor(log2(L−1)) exactly, without floating point.
        let lg = (usize::BITS - 1 - (length - 1).leading_zeros()) as i64;
        match self {
            WaveletFilter::B3Spline => lg - 1,
            WaveletFilter::Triangle | WaveletFilter::Haar => lg,
        }
    }

    /// The smallest dimension (pixels) that allows one scale.
    pub fn min_length(self) -> usize {
        match self {
            WaveletFilter::B3Spline => 5,
            WaveletFilter::Triangle | WaveletFilter::Haar => 3,
        }
    }

    fn table(self, dim: usize) -> &'static [f64] {
        use WaveletFilter::*;
        match (self, dim) {
            (B3Spline, 1) => &B3_1D,
            (B3Spline, 2) => &B3_2D,
            (B3Spline, _) => &B3_3D,
            (Triangle, 1) => &TRIANGLE_1D,
            (Triangle, 2) => &TRIANGLE_2D,
            (Triangle, _) => &TRIANGLE_3D,
            (Haar, 1) => &HAAR_1D,
            (Haar, 2) => &HAAR_2D,
            (Haar, _) => &HAAR_3D,
        }
    }

    /// DUCHAMP's value where its table differs from `table(dim)` (see the module notes).
    fn duchamp_quirk(self, dim: usize, s: usize) -> Option<f64> {
        match (self, dim, s) {
            (WaveletFilter::Triangle, 1, 18) => Some(1.12763724e-4),
            (WaveletFilter::Triangle, 2, 12) => Some(0.0),
            _ => None,
        }
    }

    /// Noise factors f[0..=scales] for a `dim`-dimensional reconstruction, extrapolated beyond
    /// the table by 1/√2, 1/2 or 1/√8 per scale; `variant` picks DUCHAMP's or the corrected
    /// table entries.
    pub fn noise_factors(self, dim: usize, scales: usize, variant: Variant) -> Vec<f64> {
        let table = self.table(dim);
        let drop = match dim {
            1 => 2f64.sqrt(),
            2 => 2.0,
            _ => 8f64.sqrt(),
        };
        let mut f = Vec::with_capacity(scales + 1);
        for s in 0..=scales {
            let quirk = match variant {
                Variant::Duchamp => self.duchamp_quirk(dim, s),
                Variant::Corrected => None,
            };
            let v = match (quirk, table.get(s)) {
                (Some(q), _) => q,
                (None, Some(&v)) => v,
                (None, None) => f[s - 1] / drop,
            };
            f.push(v);
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_follow_duchamp() {
        let b3 = WaveletFilter::B3Spline;
        assert_eq!(b3.num_scales(4), 0);
        assert_eq!(b3.num_scales(5), 1);
        assert_eq!(b3.num_scales(9), 2);
        assert_eq!(b3.num_scales(64), 4);
        assert_eq!(b3.num_scales(65), 5);
        assert_eq!(WaveletFilter::Triangle.num_scales(3), 1);
        assert_eq!(WaveletFilter::Haar.num_scales(2), 0);
        assert_eq!(WaveletFilter::Triangle.num_scales(129), 7);
    }

    #[test]
    fn factors_extrapolate() {
        for v in [Variant::Duchamp, Variant::Corrected] {
            let f = WaveletFilter::B3Spline.noise_factors(3, 9, v);
            assert_eq!(f[7], 5.14791120e-4);
            assert!((f[8] - 5.14791120e-4 / 8f64.sqrt()).abs() < 1e-18);
            assert!((f[9] - f[8] / 8f64.sqrt()).abs() < 1e-18);
            let f = WaveletFilter::Haar.noise_factors(2, 8, v);
            assert_eq!(f[8], 1.35316469e-2 / 4.0);
        }
    }

    #[test]
    fn duchamp_quirks() {
        let t = WaveletFilter::Triangle;
        let d = t.noise_factors(2, 14, Variant::Duchamp);
        assert_eq!((d[11], d[12], d[13], d[14]), (4.45738098e-4, 0.0, 0.0, 0.0));
        let c = t.noise_factors(2, 14, Variant::Corrected);
        assert_eq!((c[12], c[13]), (2.22868922e-4, 2.22868922e-4 / 2.0));
        assert_eq!(t.noise_factors(1, 19, Variant::Duchamp)[18], 1.12763724e-4);
        assert_eq!(
            t.noise_factors(1, 19, Variant::Corrected)[18],
            1.12763724e-3
        );
    }
}
