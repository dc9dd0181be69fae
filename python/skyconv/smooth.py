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
    fastest method that meets ``tol`` (``skyconv.split``, ``skyconv._smooth_cost``). For beams
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
treated as 0 for the convolution and get their input value back in the output.
"""

from __future__ import annotations

import numpy as np

from . import _core, healpix
from ._arrays import float_array, int_arg
from ._errors import ShapeError
from .sht import UNSEEN, almxfl, map2alm
from .sht import alm2map as _alm2map

METHODS = ("auto", "harmonic", "ring", "split")


def _missing(m: np.ndarray) -> np.ndarray:
    """healpy's UNSEEN test (|x - UNSEEN| <= 1e-8 + 1e-5 |UNSEEN|) or not finite."""
    m = np.asarray(m)
    return ~np.isfinite(m) | (np.abs(m - UNSEEN) <= 1e-8 + 1e-5 * abs(UNSEEN))


def _npix2nside(npix: int) -> int:
    ns = round(np.sqrt(npix / 12))
    if ns < 1 or 12 * ns * ns != npix:
        raise ShapeError(f"m has {npix} pixels, which is not 12*nside**2 for any nside")
    return ns


def _check_tol(tol) -> float:
    try:
        t = float(tol)
    except (TypeError, ValueError):
        raise TypeError(f"tol must be a number, got {type(tol).__name__}") from None
    if not 0.0 < t < 1.0:
        raise ValueError(f"tol must be in (0, 1), got {tol}")
    return t


def _check_fwhm(fwhm) -> float:
    try:
        f = float(fwhm)
    except (TypeError, ValueError):
        raise TypeError(f"fwhm must be a number (radians), got {type(fwhm).__name__}") from None
    if not (np.isfinite(f) and f > 0):
        raise ValueError(f"fwhm must be a positive number of radians, got {fwhm}")
    return f


def _check_window(beam_window) -> np.ndarray:
    w = np.asarray(beam_window)
    if w.dtype.kind not in "fiu" or w.dtype.kind == "b":
        raise TypeError(f"beam_window must be a real array, got dtype {w.dtype}")
    w = np.ascontiguousarray(w, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise ShapeError(f"beam_window must be a non-empty 1-D array, got shape {w.shape}")
    bad = ~np.isfinite(w)
    if bad.any():
        raise ValueError(f"beam_window must be finite, got {w[bad][0]} at l={np.argmax(bad)}")
    return w


def gauss_window(fwhm: float, lmax: int) -> np.ndarray:
    """The Gaussian beam window exp(-l(l+1) sigma^2 / 2), sigma = fwhm / sqrt(8 ln 2), for
    l = 0 ... lmax (``fwhm`` in radians)."""
    sigma = _check_fwhm(fwhm) / np.sqrt(8.0 * np.log(2.0))
    ell = np.arange(int(lmax) + 1)
    return np.exp(-0.5 * ell * (ell + 1) * sigma**2)


def kernel_profile(fwhm=None, beam_window=None, tol=1e-5):
    """The ring method's radial kernel K(gamma), tabulated: ``(theta, values)``.

    ``theta`` (radians) ascends from 0 to theta_cut. |K| < ``tol`` * K(0) at every angle beyond
    theta_tol = theta_cut / 1.2 (or theta_cut = pi); from theta_tol K is tapered smoothly to
    exactly 0 at theta_cut (K = 0 beyond). Nodes are denser at small angle (1025 or more,
    enough for cubic interpolation to ~1e-12 of K(0)). ``values`` are per steradian, so that
    the smooth map is sum_p K(gamma_pq) m(p) * 4 pi / npix, rescaled so that the l = 0 window
    2 pi int K sin(theta) d theta equals b_0 (1 for a Gaussian).

    Give exactly one of ``fwhm`` (radians; the spherical Gaussian with window
    exp(-l(l+1) sigma^2/2), from a closed form for sigma < 4e-3 rad, else the Legendre sum) or
    ``beam_window`` (b_l, l = 0 ... len - 1: K = sum_l (2l+1)/(4 pi) b_l P_l(cos gamma)).
    """
    tol = _check_tol(tol)
    if (fwhm is None) == (beam_window is None):
        raise ValueError("give exactly one of fwhm and beam_window")
    if fwhm is not None:
        return _core._kernel_profile(fwhm=_check_fwhm(fwhm), tol=tol)
    return _core._kernel_profile(beam_window=_check_window(beam_window), tol=tol)


def profile_window(theta, values, lmax):
    """Legendre window b_l = 2 pi int K(theta) P_l(cos theta) sin(theta) d theta, l = 0 ...
    ``lmax``, of a tabulated profile (cubic spline through the nodes, K = 0 beyond the last)."""
    t = np.ascontiguousarray(theta, dtype=np.float64)
    v = np.ascontiguousarray(values, dtype=np.float64)
    return _core._profile_window(t, v, int_arg(lmax, "lmax"))


def _profile(window, tol):
    """(theta, values) of the ring kernel of a beam window (see :func:`kernel_profile`)."""
    return kernel_profile(beam_window=window, tol=tol)


def _ring(map_ring_f64_filled, nside, theta, values, device):
    """Ring-method convolution (internal; used by ``smooth_map`` and ``skyconv.split``).

    Parameters
    ----------
    map_ring_f64_filled : float64 array (12 nside^2,)
        RING map without missing pixels (UNSEEN/NaN already replaced); not modified.
    nside : int
    theta, values : float64 arrays
        The radial profile K(theta) at ascending nodes theta[0] = 0 ... theta[-1] = theta_cut
        (radians; K per steradian), K = 0 beyond theta_cut. Interpolated by a cubic spline with
        K'(0) = 0. A profile that ends in a step (K(theta_cut) != 0) carries that step's
        resampling error off the equatorial belt, ~ the step relative to K(0).
    device : str or None
        "auto" (the GPU when there is one), "cpu" or "cuda" (or None: SKYCONV_DEVICE).

    Returns
    -------
    float64 array (12 nside^2,): s(q) = sum_p K(gamma_pq) m(p) (1 + w_ring(p)) 4 pi / npix,
    RING, with the ring weights w (exact quadrature of ring averages up to degree 3 nside).
    """
    t = np.ascontiguousarray(theta, dtype=np.float64)
    v = np.ascontiguousarray(values, dtype=np.float64)
    return _core._smooth_ring(map_ring_f64_filled, int(nside), t, v, device)


def _harmonic(map_ring_f64_filled, window, lmax, iter, device):
    """Harmonic smoothing (internal; used by ``smooth_map`` and ``skyconv.split``).

    map2alm(map, lmax, iter) -> a_lm * window[l] (0 where l >= len(window)) -> alm2map, on the
    SHT engines of ``device``. ``map_ring_f64_filled``: float64 RING map without missing
    pixels (not modified). Returns the float64 RING map.
    """
    m = np.asarray(map_ring_f64_filled)
    nside = _npix2nside(m.size)
    lmax = int(lmax)
    alm = map2alm(m, lmax=lmax, mmax=lmax, iter=int(iter), pol=False, device=device)
    alm = almxfl(alm, np.asarray(window, dtype=np.float64), inplace=True)
    return _alm2map(alm, nside, lmax=lmax, mmax=lmax, pol=False, device=device)


def smooth_map(
    m,
    fwhm=None,
    beam_window=None,
    lmax=None,
    nest=False,
    tol=1e-5,
    method="auto",
    iter=0,
    device="auto",
):
    """Smooth a HEALPix map with a Gaussian beam or a beam window.

    Parameters
    ----------
    m : float32 or float64 array (npix,) or (nmaps, npix)
        HEALPix map(s), npix = 12 nside^2 (any unit; the result has the same). Several maps
        are smoothed independently. UNSEEN and non-finite pixels are missing: they count as 0
        in the convolution and keep their input value in the output.
    fwhm : float, optional
        Full width at half maximum of a Gaussian beam, in radians (use ``np.radians(x / 60)``
        for x arcmin).
    beam_window : array, optional
        Beam window b_l, l = 0 ... len - 1 (b_l = 0 beyond). Exactly one of ``fwhm`` and
        ``beam_window``.
    lmax : int, optional
        Band limit of the harmonic method and of ``beam_window`` (default 3 nside - 1). The
        ring method with ``fwhm`` uses the Gaussian itself, not band-limited.
    nest : bool
        The map is in the NEST ordering (nside a power of two); the result is too.
    tol : float
        Accuracy: the ring kernel is truncated where it falls below tol * K(0); the split and
        auto methods keep the predicted fractional error below tol (auto: or, where the pixel
        grid puts every method above it, take the ring method when it is as close to the
        exact smoothing as the harmonic method; see the module docs). In (0, 1).
    method : str
        "auto", "harmonic", "ring" or "split" (see the module docs).
    iter : int
        Jacobi iterations of map2alm in the harmonic (part of the) method (healpy's ``iter``).
    device : str or None
        "auto", "cpu" or "cuda" (None: SKYCONV_DEVICE, else "auto": the GPU when there is
        one). Every method runs on either.

    Returns
    -------
    float64 array shaped like ``m``, in the input's ordering.
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if device is not None and not isinstance(device, str):
        raise TypeError(f"device must be a str or None, got {type(device).__name__}")
    arr = float_array(m, "m")
    if arr.ndim > 2:
        raise ShapeError(f"m must be 1-D (npix,) or 2-D (nmaps, npix), got shape {arr.shape}")
    maps = arr.reshape(-1, arr.shape[-1])
    nside = _npix2nside(maps.shape[1])
    tol = _check_tol(tol)
    iter = int_arg(iter, "iter")
    if iter < 0:
        raise ValueError(f"iter must be >= 0, got {iter}")
    lmax = 3 * nside - 1 if lmax is None else int_arg(lmax, "lmax")
    if lmax < 0:
        raise ValueError(f"lmax must be >= 0, got {lmax}")
    if (fwhm is None) == (beam_window is None):
        raise ValueError("give exactly one of fwhm (radians) and beam_window")
    if fwhm is not None:
        fwhm = _check_fwhm(fwhm)
        window = gauss_window(fwhm, lmax)
    else:
        w = _check_window(beam_window)
        window = np.zeros(lmax + 1)
        window[: min(w.size, lmax + 1)] = w[: lmax + 1]
    if nest:
        if nside & (nside - 1):
            raise ValueError(f"nest=True needs nside a power of 2, got {nside}")
        # ring_of[k]: RING index of NEST pixel k.
        ring_of = healpix.nest2ring(nside, np.arange(maps.shape[1]))

    runner = _runner(method, nside, fwhm, window, lmax, tol, iter, device)
    outs = []
    for mk in maps:
        miss = _core._smooth_missing(mk)
        filled = mk
        if miss is not None:
            filled = mk.astype(np.float64)
            filled[miss] = 0.0
        if nest:
            ring = np.empty(filled.shape, dtype=filled.dtype)
            ring[ring_of] = filled
            filled = ring
        s = runner(filled)
        if nest:
            s = s[ring_of]
        if miss is not None:
            s[miss] = mk[miss]
        outs.append(s)
    return outs[0] if arr.ndim == 1 else np.stack(outs)


def _runner(method, nside, fwhm, window, lmax, tol, iter, device):
    """A function RING-filled map -> smoothed map for the chosen method."""
    if method == "auto":
        from ._smooth_cost import choose_method

        method, _ = choose_method(nside, lmax, window, tol, device=device, iter=iter)
    if method == "harmonic":
        # float32 maps go to the engines as they are (they compute in float64).
        return lambda f: _harmonic(f, window, lmax, iter, device)
    if method == "ring":
        if fwhm is not None:
            theta, values = kernel_profile(fwhm=fwhm, tol=tol)
        else:
            theta, values = _profile(window, tol)
        _core._ring_device(device)  # refuses "cuda" without a GPU before any work
        return lambda f: _core._smooth_ring(f, nside, theta, values, device)
    from .split import _smooth_split

    return lambda f: _smooth_split(f, nside, window, lmax, tol, iter, device)


__all__ = ["gauss_window", "kernel_profile", "profile_window", "smooth_map"]
