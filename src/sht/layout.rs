//! healpy's alm layout: m-major, complex128, `index(l, m) = m·(2·lmax + 1 − m)/2 + l`
//! for 0 ≤ m ≤ mmax, m ≤ l ≤ lmax.

use crate::error::{Error, Result};

/// The (lmax, mmax) of a set of alm and its index arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlmLayout {
    pub lmax: usize,
    pub mmax: usize,
}

impl AlmLayout {
    /// A layout; `mmax` must not exceed `lmax`.
    pub fn new(lmax: usize, mmax: usize) -> Result<Self> {
        if mmax > lmax {
            return Err(Error::value(format!(
                "mmax ({mmax}) must not exceed lmax ({lmax})"
            )));
        }
        Ok(AlmLayout { lmax, mmax })
    }

    /// Number of coefficients: (mmax+1)(lmax+1) − mmax(mmax+1)/2.
    pub fn size(&self) -> usize {
        size(self.lmax, self.mmax)
    }

    /// Position of a_{l m}.
    #[inline]
    pub fn index(&self, l: usize, m: usize) -> usize {
        m * (2 * self.lmax + 1 - m) / 2 + l
    }

    /// Position of a_{m m}, the first coefficient of column m.
    #[inline]
    pub fn mstart(&self, m: usize) -> usize {
        self.index(m, m)
    }

    /// Coefficients in column m (l = m..=lmax).
    #[inline]
    pub fn mlen(&self, m: usize) -> usize {
        self.lmax + 1 - m
    }

    /// The layout of an alm array of `len` coefficients, as healpy infers it: from `lmax`
    /// and `mmax` when given, else assuming mmax = lmax.
    pub fn infer(len: usize, lmax: Option<usize>, mmax: Option<usize>) -> Result<Self> {
        let lmax = match lmax {
            Some(l) => l,
            None => lmax_from_size(len, mmax).ok_or_else(|| {
                Error::shape(format!(
                    "alm has {len} coefficients, which is not a valid alm size{}",
                    match mmax {
                        Some(mm) => format!(" for mmax={mm}"),
                        None => " (with mmax = lmax)".to_string(),
                    }
                ))
            })?,
        };
        let lay = AlmLayout::new(lmax, mmax.unwrap_or(lmax))?;
        if lay.size() != len {
            return Err(Error::shape(format!(
                "alm has {len} coefficients but lmax={} mmax={} needs {}",
                lay.lmax,
                lay.mmax,
                lay.size()
            )));
        }
        Ok(lay)
    }
}

/// (mmax+1)(lmax+1) − mmax(mmax+1)/2 (mmax ≤ lmax).
pub fn size(lmax: usize, mmax: usize) -> usize {
    (mmax + 1) * (lmax + 1) - mmax * (mmax + 1) / 2
}

/// healpy's `Alm.getlmax`: the lmax of an array of `len` coefficients, None if none fits.
pub fn lmax_from_size(len: usize, mmax: Option<usize>) -> Option<usize> {
    match mmax {
        Some(mm) => {
            let num = 2 * len + mm * mm;
            let sub = mm + 2;
            if num < sub || !(num - sub).is_multiple_of(2 * mm + 2) {
                return None;
            }
            let l = (num - sub) / (2 * mm + 2);
            (l >= mm && size(l, mm) == len).then_some(l)
        }
        None => {
            // len = (l+1)(l+2)/2
            let l = (((8.0 * len as f64 + 1.0).sqrt() - 3.0) / 2.0).round();
            if l < 0.0 {
                return None;
            }
            let l = l as usize;
            (size(l, l) == len).then_some(l)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_indices() {
        let lay = AlmLayout::new(5, 3).unwrap();
        let mut k = 0;
        for m in 0..=3 {
            for l in m..=5 {
                assert_eq!(lay.index(l, m), k);
                k += 1;
            }
        }
        assert_eq!(lay.size(), k);
        assert_eq!(lmax_from_size(k, Some(3)), Some(5));
        assert_eq!(lmax_from_size(size(7, 7), None), Some(7));
        assert_eq!(lmax_from_size(size(7, 7) + 1, None), None);
        assert!(AlmLayout::new(3, 4).is_err());
    }
}
