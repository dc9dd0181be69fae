"""Smoothing of HEALPix maps with a radial beam: ``smooth_map``.

Methods
-------
``"harmonic"``
    map2alm -> multiply by the beam window b_l -> alm2map on skyconv's SHT engines (healpy's
    ``smoothing``; band-limited at ``lmax``, so a point source rings).
``"ring"``
    Real-space convolution s(q) = sum_p K(gamma_pq) m(p) * 4 pi / npix with the radial kernel
    K(gamma) of the beam, truncated where |K| falls below ``tol`` * K(0) (exactly 0 beyond: no
    ringing), by the ring-FFT method (ARKCoS, Elsner & Wandelt 2011): per output ring, the
    kernel rings of the input rings in reach are Fourier-transformed, multiplied by the input
    rings' spectra, summed, folded to the output ring and inverse-transformed. The kernel is
    the spherical Gaussian whose Legendre window is exactly exp(-l(l+1) sigma^2 / 2) (``fwhm``),
    or sum_l (2l+1)/(4 pi) b_l P_l(cos gamma) (``beam_window``), rescaled after truncation so
    that its l = 0 window is b_0. CPU engine (rayon); the CUDA engine is not built yet.
``"split"`` / ``"auto"``
    A kernel split (harmonic part below l_cut + ring part) and the cost-model choice of the
    fastest method that meets ``tol`` (``skyconv.split``, ``skyconv._smooth_cost``).

Accuracy of the ring method against the direct sum with the same truncated kernel
(measured, white-noise maps, nside 16-64; fractional to the smoothed map's RMS):

- output rings of the equatorial belt whose support lies in the belt: exact (a circular
  convolution), ~1e-12;
- all other rings (kernel rings resampled at L_i points, chosen per ring from the kernel's
  spectral extent): the error is set by the truncation step of ~tol * K(0) at the edge of the
  support, independent of the kernel width: whole-map RMS ~0.3-0.6 tol, worst pixel ~3 tol
  (tol = 1e-5: RMS 3-6e-6, max 2-4e-5; tol = 1e-7: RMS 5e-8; tol = 1e-9: RMS 1e-9) for
  FWHM >= 1.5 pixels. Narrower kernels also lose spectral content beyond the 4x oversampling
  cap: at FWHM = 1 pixel the RMS stays ~8e-7 whatever tol.

Against healpy.smoothing (band-limited at 3 nside - 1) the ring result differs by the beam's
part beyond lmax and the pixel quadrature (see tests/test_smooth.py for the measured values).

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

    ``theta`` (radians) ascends from 0 to the cut theta_cut, beyond which |K| < ``tol`` * K(0)
    everywhere (K = 0 there); nodes are denser at small angle (about 1000-4000, enough for
    cubic interpolation to ~1e-12 of K(0)). ``values`` are per steradian, so that the smooth
    map is sum_p K(gamma_pq) m(p) * 4 pi / npix, rescaled after truncation so that the l = 0
    window 2 pi int K sin(theta) d theta equals b_0 (1 for a Gaussian).

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
        "auto"/"cpu" (or None: SKYCONV_DEVICE); "cuda" raises DeviceError (no CUDA engine yet).

    Returns
    -------
    float64 array (12 nside^2,): s(q) = sum_p K(gamma_pq) m(p) * 4 pi / npix, RING.
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
        auto methods keep the predicted fractional error below tol. In (0, 1).
    method : str
        "auto", "harmonic", "ring" or "split" (see the module docs).
    iter : int
        Jacobi iterations of map2alm in the harmonic (part of the) method (healpy's ``iter``).
    device : str or None
        "auto", "cpu" or "cuda" (None: SKYCONV_DEVICE, else "auto"). The ring method runs on
        the CPU under "auto"; "cuda" with it raises DeviceError until its CUDA engine exists.

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
    out = np.empty(maps.shape, dtype=np.float64)
    for k, mk in enumerate(maps):
        miss = _missing(mk)
        filled = np.where(miss, 0.0, mk).astype(np.float64, copy=False)
        if nest:
            ring = np.empty_like(filled)
            ring[ring_of] = filled
            filled = ring
        s = runner(np.ascontiguousarray(filled))
        if nest:
            s = s[ring_of]
        if miss.any():
            s[miss] = mk[miss]
        out[k] = s
    return out.reshape(arr.shape)


def _runner(method, nside, fwhm, window, lmax, tol, iter, device):
    """A function RING-filled map -> smoothed map for the chosen method."""
    if method == "auto":
        from ._smooth_cost import choose_method

        method, _ = choose_method(nside, lmax, window, tol, device=device, iter=iter)
    if method == "harmonic":
        return lambda f: _harmonic(f, window, lmax, iter, device)
    if method == "ring":
        if fwhm is not None:
            theta, values = kernel_profile(fwhm=fwhm, tol=tol)
        else:
            theta, values = _profile(window, tol)
        _core._ring_device(device)  # refuses "cuda" before any work
        return lambda f: _ring(f, nside, theta, values, device)
    from .split import _smooth_split

    return lambda f: _smooth_split(f, nside, window, lmax, tol, iter, device)


__all__ = ["gauss_window", "kernel_profile", "profile_window", "smooth_map"]
