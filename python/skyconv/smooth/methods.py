"""The smoothing methods' leaf: beam windows, the ring kernel, and the two engines (harmonic
and ring) on a filled RING float64 map. Imports no other smoothing module; see
:mod:`skyconv.smooth` for the methods' accuracy."""

from __future__ import annotations

import math

import numpy as np

from .. import _core, healpix
from .._utils.arrays import int_arg
from .._utils.device import resolve
from ..exceptions import ArgumentError, ArgumentTypeError, ShapeError
from ..sht import UNSEEN, almxfl, map2alm
from ..sht import alm2map as _alm2map


def missing(m: np.ndarray) -> np.ndarray:
    """healpy's UNSEEN test (|x - UNSEEN| <= 1e-8 + 1e-5 |UNSEEN|) or not finite."""
    m = np.asarray(m)
    return ~np.isfinite(m) | (np.abs(m - UNSEEN) <= 1e-8 + 1e-5 * abs(UNSEEN))


def check_tol(tol) -> float:
    """``tol`` as a float in (0, 1) (TypeError/ValueError naming it)."""
    try:
        t = float(tol)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"tol must be a number, got {type(tol).__name__}") from None
    if not 0.0 < t < 1.0:
        raise ArgumentError(f"tol must be in (0, 1), got {tol}")
    return t


def check_fwhm(fwhm) -> float:
    """``fwhm`` as a positive finite float, radians (TypeError/ValueError naming it)."""
    try:
        f = float(fwhm)
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"fwhm must be a number (radians), got {type(fwhm).__name__}"
        ) from None
    if not (np.isfinite(f) and f > 0):
        raise ArgumentError(f"fwhm must be a positive number of radians, got {fwhm}")
    return f


def check_window(beam_window) -> np.ndarray:
    """``beam_window`` as a finite, non-empty 1-D float64 array (TypeError/ShapeError/
    ValueError naming it)."""
    w = np.asarray(beam_window)
    if w.dtype.kind not in "fiu" or w.dtype.kind == "b":
        raise ArgumentTypeError(f"beam_window must be a real array, got dtype {w.dtype}")
    w = np.ascontiguousarray(w, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise ShapeError(f"beam_window must be a non-empty 1-D array, got shape {w.shape}")
    bad = ~np.isfinite(w)
    if bad.any():
        raise ArgumentError(f"beam_window must be finite, got {w[bad][0]} at l={np.argmax(bad)}")
    return w


def gauss_window(fwhm: float, lmax: int) -> np.ndarray:
    """The Gaussian beam window exp(-l(l+1) sigma^2 / 2), sigma = fwhm / sqrt(8 ln 2).

    Parameters
    ----------
    fwhm : float
        Full width at half maximum, radians (> 0).
    lmax : int
        Highest multipole.

    Returns
    -------
    float64 array (lmax + 1,)
        b_l for l = 0 ... lmax (equal to ``healpy.gauss_beam(fwhm, lmax)``).

    Raises
    ------
    TypeError, ValueError
        ``fwhm`` not a positive finite number.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv.smooth import gauss_window
    >>> b = gauss_window(np.radians(1.0), 2)
    >>> float(b[0]), round(float(b[2]), 8)  # exp(-3 sigma^2), sigma = 1 deg / 2.3548
    (1.0, 0.99983521)
    """
    return gauss(check_fwhm(fwhm), int(lmax))


def gauss(fwhm: float, lmax: int) -> np.ndarray:
    """:func:`gauss_window` of a checked ``fwhm`` (radians) and ``lmax``."""
    sigma = fwhm / np.sqrt(8.0 * np.log(2.0))
    ell = np.arange(lmax + 1)
    return np.exp(-0.5 * ell * (ell + 1) * sigma**2)


def kernel_profile(fwhm=None, beam_window=None, tol=1e-5):
    """The ring method's radial kernel K(gamma), tabulated.

    |K| < ``tol`` K(0) at every angle beyond theta_tol = theta_cut / 1.2 (or theta_cut = pi);
    from theta_tol K is tapered smoothly to exactly 0 at theta_cut (K = 0 beyond). Nodes are
    denser at small angle (1025 or more, enough for cubic interpolation to ~1e-12 of K(0)).
    The smooth map is sum_p K(gamma_pq) m(p) 4 pi / npix, and K is rescaled so that its l = 0
    window 2 pi int K sin(theta) d theta equals b_0 (1 for a Gaussian).

    Parameters
    ----------
    fwhm : float, optional
        A Gaussian's FWHM, radians: the spherical Gaussian with window exp(-l(l+1) sigma^2/2)
        (a closed form for sigma < 4e-3 rad, else the Legendre sum).
    beam_window : 1-D array, optional
        b_l, l = 0 ... len - 1: K = sum_l (2l+1)/(4 pi) b_l P_l(cos gamma). Exactly one of
        ``fwhm`` and ``beam_window``.
    tol : float
        Truncation level relative to K(0), in (0, 1).

    Returns
    -------
    (theta, values) : float64 arrays
        ``theta`` in radians, ascending from 0 to theta_cut; ``values`` in sr^-1.

    Raises
    ------
    ValueError
        Both or neither of ``fwhm`` and ``beam_window``; ``tol`` outside (0, 1); a window that
        is not finite or all zero.
    TypeError
        Arguments of the wrong type.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv.smooth import kernel_profile
    >>> theta, values = kernel_profile(fwhm=np.radians(1.0), tol=1e-5)
    >>> float(theta[0]), float(values[-1])
    (0.0, 0.0)

    theta_cut is 1.2 times the angle where the Gaussian falls to tol, sigma sqrt(2 ln 1e5):

    >>> sigma = np.radians(1.0) / np.sqrt(8 * np.log(2))
    >>> round(float(theta[-1] / (1.2 * sigma * np.sqrt(2 * np.log(1e5)))), 2)
    1.0
    """
    tol = check_tol(tol)
    if (fwhm is None) == (beam_window is None):
        raise ArgumentError("give exactly one of fwhm and beam_window")
    if fwhm is not None:
        return _core._kernel_profile(fwhm=check_fwhm(fwhm), tol=tol)
    return _core._kernel_profile(beam_window=check_window(beam_window), tol=tol)


def profile_window(theta, values, lmax):
    """Legendre window of a tabulated radial profile.

    b_l = 2 pi int K(theta) P_l(cos theta) sin(theta) d theta, with K a cubic spline through
    the nodes and 0 beyond the last.

    Parameters
    ----------
    theta : 1-D float array
        Ascending nodes from 0, radians.
    values : 1-D float array
        K at the nodes, sr^-1.
    lmax : int
        Highest multipole.

    Returns
    -------
    float64 array (lmax + 1,)

    Raises
    ------
    ValueError, skyconv.ShapeError
        Nodes not ascending from 0, lengths that differ, non-finite values.

    Examples
    --------
    The window of the kernel of a Gaussian is the Gaussian's window:

    >>> import numpy as np
    >>> from skyconv.smooth import gauss_window, kernel_profile, profile_window
    >>> fwhm = np.radians(2.0)
    >>> theta, values = kernel_profile(fwhm=fwhm, tol=1e-9)
    >>> bool(np.allclose(profile_window(theta, values, 50), gauss_window(fwhm, 50), atol=1e-7))
    True
    """
    t = np.ascontiguousarray(theta, dtype=np.float64)
    v = np.ascontiguousarray(values, dtype=np.float64)
    return _core._profile_window(t, v, int_arg(lmax, "lmax"))


def window_profile(window, tol):
    """(theta, values) of the ring kernel of a checked float64 beam window (no argument
    checks; see :func:`kernel_profile`)."""
    return _core._kernel_profile(beam_window=window, tol=tol)


def fwhm_profile(fwhm, tol):
    """(theta, values) of the ring kernel of a Gaussian of a checked ``fwhm`` (radians)."""
    return _core._kernel_profile(fwhm=fwhm, tol=tol)


def gaussian_fwhm(window) -> float | None:
    """The FWHM (radians) when ``window`` is a Gaussian beam exp(-l(l+1) sigma^2 / 2) (to
    1e-9), else None. For callers that hold only a window (``choose_method``): the ring method
    then uses the Gaussian itself, not the band-limited sum."""
    w = np.asarray(window, dtype=np.float64)
    if w.size < 2 or w[0] != 1.0 or not np.all(w[1:] < 1) or w[1] <= 0:
        return None
    ell = np.arange(w.size)
    ref = int(np.argmin(np.abs(w - 0.5)))  # sigma^2 from the best-conditioned multipole
    sigma2 = -2 * math.log(w[ref]) / (ref * (ref + 1))
    if np.max(np.abs(np.exp(-0.5 * ell * (ell + 1) * sigma2) - w)) > 1e-9:
        return None
    return math.sqrt(sigma2 * 8 * math.log(2))


def ring(map_ring_f64_filled, nside, theta, values, device):
    """Ring-method convolution of one filled map.

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
    device : Device, str or None
        Where to run (a resolved :class:`skyconv._utils.device.Device` passes through).

    Returns
    -------
    float64 array (12 nside^2,)
        s(q) = sum_p K(gamma_pq) m(p) (1 + w_ring(p)) 4 pi / npix, RING, with the ring weights
        w (exact quadrature of ring averages up to degree 3 nside).
    """
    t = np.ascontiguousarray(theta, dtype=np.float64)
    v = np.ascontiguousarray(values, dtype=np.float64)
    return _core._smooth_ring(map_ring_f64_filled, int(nside), t, v, resolve(device).core)


def ring_beams(maps_ring_filled, nside, profiles, device, out=None, rows=None):
    """Ring-method convolution of filled RING maps (npix,) or (k, npix) with several kernels
    ``profiles`` [(theta, values), ...] in one engine call: (n, *shape) float64, each equal to
    :func:`ring` with that profile (on the GPU the maps go up and through the forward ring
    FFTs once for all the beams). With ``out`` (float64, C-contiguous, (N, *shape)) beam b is
    written straight into ``out[rows[b]]`` (``rows``: default 0 .. n - 1) and ``out`` returned."""
    ts = [np.ascontiguousarray(t, dtype=np.float64) for t, _ in profiles]
    vs = [np.ascontiguousarray(v, dtype=np.float64) for _, v in profiles]
    dev = resolve(device).core
    if out is None:
        return _core._smooth_ring_beams(maps_ring_filled, int(nside), ts, vs, dev)
    rows = None if rows is None else [int(r) for r in rows]
    return _core._smooth_ring_beams(maps_ring_filled, int(nside), ts, vs, dev, out, rows)


def harmonic(map_ring_f64_filled, window, lmax, iter, device):
    """Harmonic smoothing of filled maps: map2alm(map, lmax, iter) -> a_lm * window[l] (0
    where l >= len(window)) -> alm2map, on the SHT engines of ``device``.

    ``map_ring_f64_filled``: float64 (or float32) RING map (npix,) or maps (k, npix) without
    missing pixels (not modified; several go through one core call each way). Returns the
    float64 RING map(s), shaped like the input.
    """
    m = np.asarray(map_ring_f64_filled)
    if m.ndim == 1:
        return harmonic_batch(m[None], [window], lmax, iter, device)[0, 0]
    return harmonic_batch(m, [window], lmax, iter, device)[0]


#: The a_lm products one alm2map call of a harmonic batch holds at most (bytes).
BATCH_ALM_BYTES = 4 << 30


def harmonic_batch(maps_ring_filled, windows, lmax, iter, device, out=None, rows=None):
    """Harmonic smoothing of k filled RING maps with n beams: one map2alm of the k maps, then
    one alm2map of the n·k products a_lm·b_l (every spin-0 component in one core call, so on
    the GPU they stay on the device between beams; in groups of at most BATCH_ALM_BYTES of
    products, 4 GiB: ~14 beams of one map at nside 2048).

    Parameters
    ----------
    maps_ring_filled : float array (k, npix)
        RING maps without missing pixels (not modified).
    windows : sequence of n 1-D float arrays
        b_l of each beam (0 where l >= len).
    lmax, iter : int
        Band limit and Jacobi iterations of map2alm.
    device : Device, str or None
    out : float64 array (N, k, npix), optional
        Where to write (C-contiguous): beam b goes to ``out[rows[b]]`` (``rows``: default
        0 .. n - 1), and ``out`` is returned (a mixed batch's output, no copy of this part).

    Returns
    -------
    float64 array (n, k, npix)
        Each entry equal to :func:`harmonic` of that map and window (the same arithmetic). On
        a GPU a page-locked block (:func:`output_empty`): the one of the last batch of that
        size when it is free again, so a repeated batch writes into pages already mapped.
    """
    m = np.asarray(maps_ring_filled)
    k, npix = m.shape
    nside = healpix.npix2nside(npix)
    lmax = int(lmax)
    dev = resolve(device)
    alm = map2alm(m if k > 1 else m[0], lmax=lmax, mmax=lmax, iter=int(iter), pol=False, device=dev)
    alm = np.asarray(alm).reshape(k, -1)
    n = len(windows)
    # Beams go to alm2map in groups whose products hold at most ~BATCH_ALM_BYTES (each
    # component is synthesised on its own, so the grouping does not change the result).
    per_beam = 16 * alm.size
    group = max(1, min(n, BATCH_ALM_BYTES // max(per_beam, 1)))
    if n * k == 1 and out is None:  # one product, one output: no staging copies (issue 18:
        # the first call pays a pass over fresh pages for each; on the GPU the output is a
        # page-locked block)
        # map2alm's fresh output, used once: multiplied in place (the same arithmetic)
        inplace = alm.dtype == np.complex128 and alm.flags.writeable
        prod = almxfl(alm[0], np.asarray(windows[0], dtype=np.float64), inplace=inplace)
        maps = _alm2map(prod, nside, lmax=lmax, mmax=lmax, pol=False, device=dev)
        return np.asarray(maps).reshape(1, 1, npix)
    if out is None:
        out, rows = output_empty((n, k, npix), dev), None
    rows = list(range(n)) if rows is None else [int(r) for r in rows]
    buf = np.empty((min(group, n) * k, alm.shape[1]), dtype=np.complex128)  # every group's
    for b0 in range(0, n, group):
        ws = windows[b0 : b0 + group]
        prods = buf[: len(ws) * k]
        products_into(prods, alm, ws)
        maps = _alm2map(
            prods if prods.shape[0] > 1 else prods[0],
            nside,
            lmax=lmax,
            mmax=lmax,
            pol=False,
            device=dev,
        )
        maps = np.asarray(maps).reshape(len(ws), k, npix)
        r = rows[b0 : b0 + len(ws)]
        if r == list(range(r[0], r[0] + len(r))):  # contiguous rows: one threaded copy
            copy_into(out[r[0] : r[0] + len(r)], maps)
        else:
            for b, row in enumerate(r):
                copy_into(out[row], maps[b])
    return out


def products_into(prods: np.ndarray, alm: np.ndarray, windows) -> None:
    """``prods[b·k + i] = almxfl(alm[i], windows[b])`` for the k rows of ``alm`` (complex128,
    C-contiguous), the rows on skyconv's threads, each written once in place: a row is copied
    in (:func:`copy_into`) and multiplied there (``almxfl(inplace=True)``, the same arithmetic).
    Session 11: ``prods[r] = almxfl(...)`` made a fresh temporary and a second pass over fresh
    pages per row, on one thread (~0.3 s a beam at nside 2048: most of a 15-beam harmonic
    part of the 100-beam batch on the GPU)."""
    import concurrent.futures

    from .._backend import get_num_threads

    k = alm.shape[0]
    ws = [np.asarray(w, dtype=np.float64) for w in windows]

    def row(r: int) -> None:
        dst = prods[r]
        np.copyto(dst, alm[r % k])
        almxfl(dst, ws[r // k], inplace=True)

    workers = max(1, min(get_num_threads(), prods.shape[0]))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(row, range(len(ws) * k)))


def output_empty(shape, device) -> np.ndarray:
    """An uninitialised float64 array for a batch's output on ``device``: on a GPU a pooled
    page-locked block where the pool allows (``backend.cuda.host_pool``; the core calls' own
    outputs are such blocks), else ordinary memory; HostMemoryError naming the bytes where the
    host cannot hold it."""
    dev = resolve(device)
    return _core._output_empty([int(x) for x in shape], dev.core)


#: Elements per piece of :func:`copy_into` (64 MiB of float64).
COPY_PIECE = 1 << 23


def copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` (C-contiguous arrays of one shape and dtype) in pieces on skyconv's
    threads (``get_num_threads``): NumPy copies on one thread, and a batch's output is large
    (5.6 GB a group of 14 beams at nside 2048, into fresh pages), so one thread makes the
    copies, not the transforms, the batch's cost. NumPy releases the GIL while it copies."""
    from .._backend import get_num_threads

    n = dst.size
    workers = min(get_num_threads(), max(1, n // COPY_PIECE))
    if workers <= 1 or not (dst.flags.c_contiguous and src.flags.c_contiguous):
        dst[...] = src
        return
    d, s_ = dst.reshape(-1), src.reshape(-1)  # views (both C-contiguous)
    import concurrent.futures

    def piece(a):
        np.copyto(d[a : a + COPY_PIECE], s_[a : a + COPY_PIECE])

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(piece, range(0, n, COPY_PIECE)))


__all__ = ["gauss_window", "kernel_profile", "profile_window"]
