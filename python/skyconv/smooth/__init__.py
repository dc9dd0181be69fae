"""Smoothing of HEALPix maps with a radial beam: ``smooth_map``.

Methods
-------
``"harmonic"``
    map2alm -> multiply by the beam window b_l -> alm2map on skyconv's SHT engines (healpy's
    ``smoothing``; band-limited at ``lmax``, so a point source rings).
``"ring"``
    Real-space convolution s(q) = sum_p K(gamma_pq) m(p) * 4 pi / npix with the radial kernel
    K(gamma) of the beam, cut where |K| falls below ``tol`` * K(0) for good (theta_tol) and
    tapered smoothly (C-infinity) to exactly 0 at theta_cut = 1.2 theta_tol (no ringing; the
    kernel stays within tol * K(0) of the uncut one, as with a hard cut, but has no step), by
    the ring-FFT method (ARKCoS, Elsner & Wandelt 2011): per output ring, the kernel rings of
    the input rings in reach are Fourier-transformed, multiplied by the input rings' spectra,
    summed, folded to the output ring and inverse-transformed. The kernel is the spherical
    Gaussian whose Legendre window is exactly exp(-l(l+1) sigma^2 / 2) (``fwhm``), or
    sum_l (2l+1)/(4 pi) b_l P_l(cos gamma) (``beam_window``), rescaled so that its l = 0 window
    is b_0. CPU engine (rayon) and CUDA engine (the same plan and sums, equal to ~1e-14; the
    whole map on the device in one upload; see src/smooth/cuda.rs).
``"split"`` / ``"auto"``
    A kernel split (harmonic part below l_cut + ring part) and the cost-model choice of the
    fastest method that meets ``tol`` (``skyconv.smooth.split``, ``skyconv.smooth.auto``,
    ``skyconv.smooth.cost``). For beams
    of a few pixels no method meets a small tol against the exact smoothing (the pixel grid:
    ~4e-3 at 3 px on white noise, harmonic and ring alike); there auto takes the ring method
    when it is faster and measured within 1.25x of the harmonic method's error against the
    exact smoothing (from ~2 px up), else the harmonic method.

Accuracy of the ring method against the direct float64 sum with the same truncated kernel
(measured on white-noise maps, nside 16-64, all ring types; fractional to the smoothed map's
RMS):

- output rings of the equatorial belt whose support lies in the belt: exact (a circular
  convolution), ~1e-12;
- other rings: their kernel rings are resampled at L_i points (chosen per ring from the
  kernel's spectral extent, at most 4x oversampled); the error is the kernel's spectral
  content beyond L_i / 2. With the default tol = 1e-5: RMS ~1e-7, worst pixel <= 9e-7 for
  FWHM >= 1.5 px (1-10 px: RMS 0.4-1.2e-7). It grows for kernels narrower than the pixels
  (measured, tol = 1e-5, nside 32):

  ======= ========= =========
  FWHM    RMS       worst
  ======= ========= =========
  0.5 px  5e-3      5e-2
  0.75 px 1.3e-4    1.5e-3
  1 px    8.4e-7    1.1e-5
  1.5 px  1.2e-7    8.1e-7
  2-5 px  1.0e-7    6.7e-7
  10 px   3.6e-8    2.4e-7
  ======= ========= =========

  A hard cut at theta_tol (a step of tol * K(0)) would add ~0.4 tol RMS and ~3 tol worst
  pixel whatever the width (the step's resampling error); the taper costs ~25% more kernel
  rings. A kernel reaching pi has neither and is resampled exactly (~1e-13).
- Beyond theta_cut the result is 0 to roundoff on the belt and below ~1e-6 * peak elsewhere;
  the harmonic method rings at the percent level.

Quadrature: the input ring j is weighted by 1 + w_j, HEALPix ring weights (``src/smooth/
weights.rs``: exact for ring averages of even degree <= 3 nside in z, least area-weighted
norm; equivalent to healpy's weight_ring files). Uniform weights miss the integral by ~1e-3
near the poles; the weights cost O(npix) multiplies per map (computed once per nside).

Against healpy.smoothing(iter=3) (band-limited at 3 nside - 1), fractional RMS, CMB-like map
C_l ~ (l+10)^-2 exp(-(l/nside)^2) synthesised to 3 nside - 1 (before the weights in brackets):

  ===== ================ ================ ================ ================
  FWHM  nside 64         128              256              512
  ===== ================ ================ ================ ================
  2 px  1.0e-3 (1.2e-3)  7.9e-4 (8.3e-4)  6.7e-4 (6.8e-4)  5.9e-4 (5.9e-4)
  3 px  1.2e-4 (5.6e-4)  6.4e-5 (2.2e-4)  4.9e-5 (8.3e-5)  4.4e-5 (5.9e-5)
  5 px  4.6e-5 (4.0e-4)  8.3e-6 (1.5e-4)  3.0e-6 (4.5e-5)  2.4e-6 (2.6e-5)
  ===== ================ ================ ================ ================

  At 2 px the difference is healpy's own error: against the exact smoothing of the map's
  a_lm, healpy.smoothing(iter=3) is off by 5.4e-4, 4.8e-4, 4.3e-4, 3.9e-4 (nside 64-512), the
  ring method by 6.3e-4, 4.4e-4, 3.6e-4, 3.0e-4; both errors sit in the polar caps, where the
  samples do not determine the high-m a_lm (ring j has 4j pixels). No pixel quadrature
  reaches 1e-4 against healpy there; a kernel band-limited at healpy's lmax would remove a
  further ~2x but its ringing tail (b_l ~ 3% at 3 nside for 2 px) widens the support ~50x.

Missing pixels: UNSEEN (-1.6375e30, healpy's criterion) and non-finite (NaN, +-inf) pixels are
treated as 0 for the convolution and get their input value back in the output (no ``mask``).

Masked and partial skies (``mask=``, or ``m = (ipix, values)``): the normalised convolution
smooth(m·w) / smooth(w), the kernel-weighted mean of the observed neighbours, UNSEEN where the
observed fraction of the beam is below ``min_weight`` (default 0.5); m·w and w go through the
method as two maps of one call (``skyconv.smooth.masked``).

Many beams (``fwhm=[...]`` or a 2-D ``beam_window``): one call returns (n_beams, ...), the
harmonic method sharing one map2alm and one alm2map (``skyconv.smooth.batch``).

Memory: ``skyconv.smooth.memory.smooth_memory`` (bytes per method and device; nside 16384 is
3.2e9 pixels, 25.8 GB per float64 map; the ring method on the GPU needs 40 bytes per pixel
held whole, else it runs in ring blocks of 40 bytes per block pixel, at least 10.7 GB there).

Layout (each module imports only those above it in this list): ``methods`` (the leaf: windows,
the ring kernel, the harmonic and ring engines), ``beam`` (the beam of one call, built once),
``cost`` (the measured cost model), ``_split_store`` (fitted splits kept on disk beside the
cost model's constants), ``split`` (kernel splitting), ``auto`` (the chooser), ``batch`` (many
beams), ``masked`` (weights, partial skies, normalisation), ``memory`` (the byte counts),
``api`` (``smooth_map``).
"""

from .api import METHODS, smooth_map
from .methods import gauss_window, kernel_profile, profile_window

# Internal entry points kept at their old names (compat.healpy, tests, notebooks).
from .methods import harmonic as _harmonic  # noqa: F401
from .methods import missing as _missing  # noqa: F401
from .methods import ring as _ring  # noqa: F401

__all__ = ["METHODS", "gauss_window", "kernel_profile", "profile_window", "smooth_map"]
