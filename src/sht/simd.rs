//! A minimal float64 SIMD vector for the CPU engine's lane loops: AVX2+FMA (4 lanes) when the
//! CPU has it, else one plain f64. The compiler does not vectorise the recurrence over lanes on
//! its own, so the engine is written against this trait.

/// A vector of `W` f64 lanes.
pub trait Simd: Copy + Send + Sync + 'static {
    const W: usize;
    fn splat(x: f64) -> Self;
    /// The first W values of `s`.
    fn load(s: &[f64]) -> Self;
    /// Into the first W values of `s`.
    fn store(self, s: &mut [f64]);
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// self·b + c (fused where available).
    fn mul_add(self, b: Self, c: Self) -> Self;
    /// self·b − c (fused where available).
    fn mul_sub(self, b: Self, c: Self) -> Self;
    /// c − self·b (fused where available; the same number as (−self)·b + c).
    fn neg_mul_add(self, b: Self, c: Self) -> Self;
    /// Whether some lane has |x| > t.
    fn any_abs_gt(self, t: f64) -> bool;
    /// Sum of the lanes.
    fn hsum(self) -> f64;
    /// Sums of the lanes of `a` and of `b`.
    #[inline(always)]
    fn hsum2(a: Self, b: Self) -> (f64, f64) {
        (a.hsum(), b.hsum())
    }
}

/// One f64 (portable fallback).
#[derive(Clone, Copy, Debug)]
pub struct S1(pub f64);

impl Simd for S1 {
    const W: usize = 1;
    #[inline(always)]
    fn splat(x: f64) -> Self {
        S1(x)
    }
    #[inline(always)]
    fn load(s: &[f64]) -> Self {
        S1(s[0])
    }
    #[inline(always)]
    fn store(self, s: &mut [f64]) {
        s[0] = self.0;
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        S1(self.0 + o.0)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        S1(self.0 - o.0)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        S1(self.0 * o.0)
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        S1(self.0 * b.0 + c.0)
    }
    #[inline(always)]
    fn mul_sub(self, b: Self, c: Self) -> Self {
        S1(self.0 * b.0 - c.0)
    }
    #[inline(always)]
    fn neg_mul_add(self, b: Self, c: Self) -> Self {
        S1(c.0 - self.0 * b.0)
    }
    #[inline(always)]
    fn any_abs_gt(self, t: f64) -> bool {
        self.0.abs() > t
    }
    #[inline(always)]
    fn hsum(self) -> f64 {
        self.0
    }
}

#[cfg(target_arch = "x86_64")]
pub use avx::F4;
#[cfg(target_arch = "x86_64")]
pub use avx512::F8;

// The AVX-512 intrinsics and target feature are stable since Rust 1.89, newer than the crate's
// declared rust-version (1.85): building with 1.85..1.88 fails here. The MSRV needs raising to
// 1.89 (or this module gating) before a release; flagged in the sht hand-off.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::Simd;
    use std::arch::x86_64::*;

    /// Eight f64 in an AVX-512 register. Only use inside functions compiled with
    /// `#[target_feature(enable = "avx512f")]` on a CPU that has it.
    #[derive(Clone, Copy, Debug)]
    pub struct F8(__m512d);

    // SAFETY (all methods): callers run only where AVX-512F was detected, inside functions
    // compiled with it, so the intrinsics are available and inline.
    impl Simd for F8 {
        const W: usize = 8;
        #[inline(always)]
        fn splat(x: f64) -> Self {
            unsafe { F8(_mm512_set1_pd(x)) }
        }
        #[inline(always)]
        fn load(s: &[f64]) -> Self {
            assert!(s.len() >= 8);
            unsafe { F8(_mm512_loadu_pd(s.as_ptr())) }
        }
        #[inline(always)]
        fn store(self, s: &mut [f64]) {
            assert!(s.len() >= 8);
            unsafe { _mm512_storeu_pd(s.as_mut_ptr(), self.0) }
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            unsafe { F8(_mm512_add_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            unsafe { F8(_mm512_sub_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            unsafe { F8(_mm512_mul_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn mul_add(self, b: Self, c: Self) -> Self {
            unsafe { F8(_mm512_fmadd_pd(self.0, b.0, c.0)) }
        }
        #[inline(always)]
        fn mul_sub(self, b: Self, c: Self) -> Self {
            unsafe { F8(_mm512_fmsub_pd(self.0, b.0, c.0)) }
        }
        #[inline(always)]
        fn neg_mul_add(self, b: Self, c: Self) -> Self {
            unsafe { F8(_mm512_fnmadd_pd(self.0, b.0, c.0)) }
        }
        #[inline(always)]
        fn any_abs_gt(self, t: f64) -> bool {
            unsafe {
                let a = _mm512_abs_pd(self.0);
                _mm512_cmp_pd_mask::<_CMP_GT_OQ>(a, _mm512_set1_pd(t)) != 0
            }
        }
        #[inline(always)]
        fn hsum(self) -> f64 {
            let mut t = [0.0; 8];
            self.store(&mut t);
            ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]))
        }
        #[inline(always)]
        fn hsum2(a: Self, b: Self) -> (f64, f64) {
            unsafe {
                let a4 = _mm256_add_pd(
                    _mm512_castpd512_pd256(a.0),
                    _mm512_extractf64x4_pd::<1>(a.0),
                );
                let b4 = _mm256_add_pd(
                    _mm512_castpd512_pd256(b.0),
                    _mm512_extractf64x4_pd::<1>(b.0),
                );
                let h = _mm256_hadd_pd(a4, b4);
                let s = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd::<1>(h));
                (_mm_cvtsd_f64(s), _mm_cvtsd_f64(_mm_unpackhi_pd(s, s)))
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use super::Simd;
    use std::arch::x86_64::*;

    /// Four f64 in an AVX register. Only use inside functions compiled with
    /// `#[target_feature(enable = "avx2,fma")]` on a CPU that has them.
    #[derive(Clone, Copy, Debug)]
    pub struct F4(__m256d);

    // SAFETY (all methods): callers run only where AVX2 and FMA were detected, inside
    // functions compiled with those features, so the intrinsics are available and inline.
    impl Simd for F4 {
        const W: usize = 4;
        #[inline(always)]
        fn splat(x: f64) -> Self {
            unsafe { F4(_mm256_set1_pd(x)) }
        }
        #[inline(always)]
        fn load(s: &[f64]) -> Self {
            assert!(s.len() >= 4);
            unsafe { F4(_mm256_loadu_pd(s.as_ptr())) }
        }
        #[inline(always)]
        fn store(self, s: &mut [f64]) {
            assert!(s.len() >= 4);
            unsafe { _mm256_storeu_pd(s.as_mut_ptr(), self.0) }
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            unsafe { F4(_mm256_add_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            unsafe { F4(_mm256_sub_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            unsafe { F4(_mm256_mul_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn mul_add(self, b: Self, c: Self) -> Self {
            unsafe { F4(_mm256_fmadd_pd(self.0, b.0, c.0)) }
        }
        #[inline(always)]
        fn mul_sub(self, b: Self, c: Self) -> Self {
            unsafe { F4(_mm256_fmsub_pd(self.0, b.0, c.0)) }
        }
        #[inline(always)]
        fn neg_mul_add(self, b: Self, c: Self) -> Self {
            unsafe { F4(_mm256_fnmadd_pd(self.0, b.0, c.0)) }
        }
        #[inline(always)]
        fn any_abs_gt(self, t: f64) -> bool {
            unsafe {
                let mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fff_ffff_ffff_ffff));
                let a = _mm256_and_pd(self.0, mask);
                let c = _mm256_cmp_pd::<_CMP_GT_OQ>(a, _mm256_set1_pd(t));
                _mm256_movemask_pd(c) != 0
            }
        }
        #[inline(always)]
        fn hsum(self) -> f64 {
            let mut t = [0.0; 4];
            self.store(&mut t);
            (t[0] + t[1]) + (t[2] + t[3])
        }
        #[inline(always)]
        fn hsum2(a: Self, b: Self) -> (f64, f64) {
            unsafe {
                // [a0+a1, b0+b1, a2+a3, b2+b3] -> [a, b]
                let h = _mm256_hadd_pd(a.0, b.0);
                let s = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd::<1>(h));
                (_mm_cvtsd_f64(s), _mm_cvtsd_f64(_mm_unpackhi_pd(s, s)))
            }
        }
    }
}
