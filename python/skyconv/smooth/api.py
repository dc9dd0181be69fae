"""``smooth_map``: arguments checked once, the beam built once, the method chosen, then each
map run through it (see :mod:`skyconv.smooth` for the methods)."""

from __future__ import annotations

import warnings

import numpy as np

from .. import _core, healpix
from .._utils.arrays import float_array, int_arg
from .._utils.device import resolve
from .._utils.lazy import is_dask_array
from ..exceptions import ArgumentError, ShapeError, SkyconvWarning
from . import methods
from .auto import choose
from .beam import Beam
from .split import apply_split, cached_split

METHODS = ("auto", "harmonic", "ring", "split")
#: The narrowest beam (FWHM, in pixels of side sqrt(4π/npix)) the ring method runs; below it
#: the pixel sum of a kernel about a pixel wide is far off the normalised integral: against
#: the exact smoothing of band-limited white noise at nside 64 (``auto.grid_errors``) the ring
#: method is 9.8% off at 1.5 px (harmonic 6.3%), 39% at 1 px (10%), 2.9x at 0.5 px (13%);
#: against healpy 88x at 0.1 px. ``smooth_map`` uses the harmonic method there, with a
#: SkyconvWarning.
RING_MIN_PIXELS = 1.5


def smooth_map(
    m,
    fwhm=None,
    beam_window=None,
    lmax=None,
    nest=False,
    tol=1e-5,
    method="auto",
    iter=0,
    device=None,
):
    """Smooth a HEALPix map with a Gaussian beam or a beam window.

    Parameters
    ----------
    m : float32 or float64 array (npix,) or (nmaps, npix)
        HEALPix map(s), npix = 12 nside^2 (any unit; the result has the same). Several maps
        are smoothed independently. UNSEEN and non-finite pixels are missing: they count as 0
        in the convolution and keep their input value in the output. A dask array gives a
        dask array: "auto" and "harmonic" run through the distributed transforms (as
        ``skyconv.map2alm`` / ``alm2map`` of dask arrays); "ring" and "split" smooth each map
        in one task; ``nest=True`` is refused for dask input.
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
        exact smoothing as the harmonic method; see :mod:`skyconv.smooth`). In (0, 1).
    method : str
        "auto", "harmonic", "ring" or "split" (see :mod:`skyconv.smooth`). "ring" with a beam
        narrower than ``RING_MIN_PIXELS`` (1.5) pixels FWHM (pixel side sqrt(4π/npix)) runs
        the harmonic method instead and warns (:class:`skyconv.SkyconvWarning`): the ring sum
        of a kernel about a pixel wide is far off (39% at 1 px, 88x the input at 0.1 px).
    iter : int
        Jacobi iterations of map2alm in the harmonic (part of the) method (healpy's ``iter``).
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto": the GPU
        when there is one). Every method runs on either.

    Returns
    -------
    float64 array
        Shaped like ``m``, in the input's ordering and unit.

    Raises
    ------
    TypeError
        A non-float map, or an argument of the wrong type.
    skyconv.ShapeError
        ``m`` is not (npix,) or (nmaps, npix) with npix = 12 nside^2; ``beam_window`` not 1-D.
    ValueError
        An unknown ``method`` or ``device``, both or neither of ``fwhm`` and ``beam_window``,
        ``tol`` outside (0, 1), a negative ``lmax`` or ``iter``, ``nest`` with nside not a
        power of 2.
    skyconv.DeviceError
        ``device="cuda"`` and no GPU works.

    Examples
    --------
    A dipole keeps its shape; a Gaussian beam multiplies it by b_1 = exp(-sigma^2) (band
    limit 4 and 3 Jacobi iterations, so that the quadrature is exact to ~1e-10):

    >>> import numpy as np
    >>> import skyconv
    >>> nside = 16
    >>> theta, phi = skyconv.healpix.pix2ang(nside, np.arange(12 * nside**2))
    >>> fwhm = np.radians(5.0)
    >>> out = skyconv.smooth_map(np.cos(theta), fwhm=fwhm, lmax=4, method="harmonic", iter=3,
    ...                          device="cpu")
    >>> b1 = np.exp(-(fwhm**2) / (8 * np.log(2)))
    >>> bool(np.allclose(out, b1 * np.cos(theta), rtol=0, atol=1e-9))
    True
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ArgumentError(f"method must be one of {METHODS}, got {method!r}")
    if is_dask_array(m):  # distributed smoothing: skyconv._dask.smooth
        from .._dask import smooth as _dsm

        return _dsm.smooth_map(
            m, fwhm, beam_window, lmax, nest, tol, method, iter, device, single=smooth_map
        )
    arr = float_array(m, "m")
    if arr.ndim > 2:
        raise ShapeError(f"m must be 1-D (npix,) or 2-D (nmaps, npix), got shape {arr.shape}")
    maps = arr.reshape(-1, arr.shape[-1])
    nside = healpix.npix2nside(maps.shape[1])
    iter = int_arg(iter, "iter")
    if iter < 0:
        raise ArgumentError(f"iter must be >= 0, got {iter}")
    lmax = 3 * nside - 1 if lmax is None else int_arg(lmax, "lmax")
    if lmax < 0:
        raise ArgumentError(f"lmax must be >= 0, got {lmax}")
    beam = Beam.from_args(fwhm, beam_window, lmax, tol)
    if nest:
        if nside & (nside - 1):
            raise ArgumentError(f"nest=True needs nside a power of 2, got {nside}")
        # ring_of[k]: RING index of NEST pixel k.
        ring_of = healpix.nest2ring(nside, np.arange(maps.shape[1]))
    dev = resolve(device)
    runner = _runner(method, beam, nside, iter, dev)
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


def _runner(method, beam: Beam, nside, iter, device):
    """A function RING-filled map -> smoothed map for the chosen method."""
    if method == "auto":
        method, _ = choose(beam, nside, iter, device)
    if method == "ring" and beam.fwhm_pixels(nside) < RING_MIN_PIXELS:
        warnings.warn(
            f"smooth_map: the ring method needs a beam of at least {RING_MIN_PIXELS:g} pixel(s) "
            f"FWHM, got {beam.fwhm_pixels(nside):.3g} at nside {nside}; using the harmonic "
            "method instead",
            SkyconvWarning,
            stacklevel=3,
        )
        method = "harmonic"
    if method == "harmonic":
        # float32 maps go to the engines as they are (they compute in float64).
        return lambda f: methods.harmonic(f, beam.window, beam.lmax, iter, device)
    if method == "ring":
        theta, values = beam.profile
        return lambda f: methods.ring(f, nside, theta, values, device)
    ks = cached_split(beam.window, nside, beam.lmax, beam.tol, iter, device)
    return lambda f: apply_split(ks, f, iter)


__all__ = ["METHODS", "RING_MIN_PIXELS", "smooth_map"]
