"""HEALPix geometry (RING and NEST), identical to healpy's pixelisation.

``pix2ang``, ``ang2pix``, ``ring2nest``, ``nest2ring``, ``nside2npix``, ``npix2nside`` and
``isnsideok`` take healpy's arguments and return what healpy returns: the same pixel for every
point and the same float64 bits for every pixel centre (both schemes, any valid nside; checked
against healpy 1.20 for every pixel up to nside 1024 and 10^6 random points at nside 8192 and
2^29). ``ring_info`` gives the ring geometry (θ, cos θ, sin θ, pixels per ring, φ of the first
pixel, first pixel index) that skyconv's spherical-harmonic code uses.

Conventions: θ is the colatitude in radians, 0 at the north pole, π at the south pole; φ the
longitude in radians (any finite value, taken modulo 2π). With ``lonlat=True`` angles are
longitude and latitude in degrees instead. Inputs are NumPy arrays of any shape (or scalars,
which give scalars back); θ and φ are broadcast together. Work runs in Rust on skyconv's CPU
thread pool with the GIL released.

Errors and deliberate differences from healpy:

- Invalid ``nside`` raises ValueError naming ``nside`` (NEST and ``ring2nest``/``nest2ring``
  need a power of two; RING accepts any 1 ≤ nside ≤ 2^29, as healpy's core does).
- Pixel indices outside [0, 12·nside²) raise ValueError naming ``ipix`` (healpy returns
  garbage or NaN for them). Pixel indices must be integers: float arrays are accepted only if
  every value is a whole number, otherwise (and for bool, complex, str, object) TypeError.
- θ must be in [0, π]; like healpy, up to π + 1e-5 is tolerated and folded back across the
  pole (φ + π). NaN or out-of-range θ raises ValueError (healpy does the same). A NaN or
  infinite φ also raises ValueError naming ``phi`` (healpy silently returns an arbitrary
  pixel). With ``lonlat=True`` the messages name ``lon`` and ``lat``.
- ``nside`` is a scalar here (healpy also broadcasts arrays of nside).
- ``lonlat=True`` with float32 (or float16) lon/lat: skyconv converts to float64 before
  degrees → radians; healpy does that conversion in float32, which moves points by ~1e-7 rad
  and can change the pixel near edges. For float64 (and integer) input both agree exactly.
"""

from __future__ import annotations

import math

import numpy as np

from . import _core
from .exceptions import ArgumentError, ArgumentTypeError, ShapeError

MAX_NSIDE = 1 << 29
#: healpy's marker of missing pixels (also ``skyconv.sht.UNSEEN``).
UNSEEN = -1.6375e30
"""Largest nside HEALPix supports (2^29)."""

_I64_MAX = np.iinfo(np.int64).max


def isnsideok(nside, nest=False):
    """Whether ``nside`` is a valid HEALPix resolution (vectorised, like healpy).

    Valid: a whole number 1 <= nside <= 2^29 (int or integral float), and for ``nest=True``
    a power of two. Non-numbers are not valid.

    Parameters
    ----------
    nside : int, float or array
        The resolution(s) to test.
    nest : bool
        Also require a power of two (the NEST scheme).

    Returns
    -------
    bool or bool array
        A bool for a scalar, a bool array shaped like an array ``nside``.

    Examples
    --------
    >>> from skyconv import healpix
    >>> healpix.isnsideok(12), healpix.isnsideok(12, nest=True), healpix.isnsideok(0)
    (True, False, False)
    """
    if np.ndim(nside) == 0:
        return _scalar_nside_ok(nside, bool(nest))
    a = np.asarray(nside)
    if a.dtype.kind in "iu":
        ok = (a > 0) & (a <= MAX_NSIDE)
    elif a.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(a) & (a == np.floor(a)) & (a > 0) & (a <= MAX_NSIDE)
    else:
        return np.zeros(a.shape, dtype=bool)
    if nest:
        n = np.where(ok, a, 1).astype(np.int64)
        ok &= (n & (n - 1)) == 0
    return ok


def _scalar_nside_ok(nside, nest: bool) -> bool:
    if isinstance(nside, np.ndarray):
        nside = nside[()]
    if isinstance(nside, (bool, np.bool_)):
        return False
    if isinstance(nside, (int, np.integer)):
        n = int(nside)
    elif isinstance(nside, (float, np.floating)):
        if not (math.isfinite(nside) and nside == math.floor(nside)):
            return False
        n = int(nside)
    else:
        return False
    if not 0 < n <= MAX_NSIDE:
        return False
    return not nest or (n & (n - 1)) == 0


def _nside(nside, nest: bool) -> int:
    """``nside`` as a Python int, or TypeError/ValueError naming ``nside``."""
    if isinstance(nside, np.ndarray) and nside.ndim == 0:
        nside = nside[()]
    if isinstance(nside, (bool, np.bool_)) or not isinstance(
        nside, (int, np.integer, float, np.floating)
    ):
        raise ArgumentTypeError(f"nside must be an int, got {type(nside).__name__}")
    if not _scalar_nside_ok(nside, nest):
        if nest:
            raise ArgumentError(
                f"nside must be a power of 2 between 1 and 2**29 for the NEST scheme, got {nside}"
            )
        raise ArgumentError(f"nside must be a whole number between 1 and 2**29, got {nside}")
    return int(nside)


def _pixels(ipix, name: str = "ipix") -> np.ndarray:
    """Pixel indices as a C-contiguous int64 array (range is checked in Rust)."""
    if isinstance(ipix, int) and not isinstance(ipix, bool) and not -_I64_MAX <= ipix <= _I64_MAX:
        raise ArgumentError(f"{name} = {ipix} is out of range for a pixel index")
    a = np.asarray(ipix)
    kind = a.dtype.kind
    if kind == "u" and a.dtype.itemsize == 8 and a.size and a.max() > _I64_MAX:
        raise ArgumentError(f"{name} = {a.max()} is out of range for a pixel index")
    if kind == "f":
        with np.errstate(invalid="ignore"):
            whole = np.isfinite(a) & (a == np.floor(a))
        if not np.all(whole):
            bad = a.flat[int(np.argmin(whole.ravel()))]
            raise ArgumentTypeError(
                f"{name} must hold integer pixel indices; got dtype {a.dtype} with value {bad}"
            )
        if a.size and np.max(np.abs(a)) >= 2.0**63:
            raise ArgumentError(f"{name} = {a.flat[int(np.argmax(np.abs(a)))]} is out of range")
    elif kind not in "iu":
        raise ArgumentTypeError(f"{name} must be an integer array, got dtype {a.dtype}")
    return np.asarray(a, dtype=np.int64, order="C")  # keeps 0-d (ascontiguousarray would not)


def _reals(x, name: str) -> np.ndarray:
    """Real numbers as float64 (int and float dtypes; others are a TypeError)."""
    a = np.asarray(x)
    if a.dtype.kind not in "iuf":
        raise ArgumentTypeError(f"{name} must be real numbers, got dtype {a.dtype}")
    return a.astype(np.float64, copy=False)


def _out(a: np.ndarray, scalar: bool):
    return a[()] if scalar else a


def nside2npix(nside):
    """Number of pixels, 12 nside^2, of a map of resolution ``nside``.

    Parameters
    ----------
    nside : int or array of int
        Resolution(s), 1 <= nside <= 2^29.

    Returns
    -------
    int, or int64 array for an array

    Raises
    ------
    ValueError
        An invalid nside (see :func:`isnsideok`).

    Examples
    --------
    >>> from skyconv import healpix
    >>> healpix.nside2npix(64)
    49152
    """
    if np.ndim(nside) == 0:
        n = _nside(nside, False)
        return 12 * n * n
    ok = isnsideok(nside)
    if not np.all(ok):
        raise ArgumentError("nside must hold whole numbers between 1 and 2**29")
    n = np.asarray(nside).astype(np.int64)
    return 12 * n * n


def npix2nside(npix):
    """nside of a map with ``npix`` = 12 nside^2 pixels.

    The one npix -> nside rule of skyconv (the SHTs and smoothing use it for map sizes).

    Parameters
    ----------
    npix : int
        Number of pixels (a whole-number float is accepted).

    Returns
    -------
    int

    Raises
    ------
    skyconv.ShapeError
        ``npix`` is not 12 nside^2 for a valid nside (a ValueError).
    TypeError
        ``npix`` is not a whole number.

    Examples
    --------
    >>> from skyconv import healpix
    >>> healpix.npix2nside(49152)
    64
    """
    if isinstance(npix, np.ndarray) and npix.ndim == 0:
        npix = npix[()]
    if isinstance(npix, (float, np.floating)) and math.isfinite(npix) and npix == int(npix):
        npix = int(npix)
    if isinstance(npix, (bool, np.bool_)) or not isinstance(npix, (int, np.integer)):
        raise ArgumentTypeError(f"npix must be an int, got {type(npix).__name__}")
    npix = int(npix)
    n = math.isqrt(npix // 12) if npix > 0 else 0
    if npix <= 0 or 12 * n * n != npix or n > MAX_NSIDE:
        raise ShapeError(f"npix = {npix} pixels is not 12*nside**2 for a valid nside")
    return n


def pix2ang(nside, ipix, nest=False, lonlat=False):
    """Centres of pixels ``ipix``, bit-identical to ``healpy.pix2ang``.

    Parameters
    ----------
    nside : int
        Resolution, 1 <= nside <= 2^29 (a power of two for NEST).
    ipix : int or int array
        Pixel indices in [0, 12 nside^2).
    nest : bool
        NEST scheme (default RING).
    lonlat : bool
        Return (lon, lat) in degrees instead of (theta, phi) in radians.

    Returns
    -------
    (theta, phi) or (lon, lat) : float64 arrays shaped like ``ipix``
        NumPy float64 scalars for a scalar ``ipix``. theta: colatitude, phi: longitude
        (radians).

    Raises
    ------
    ValueError
        An invalid ``nside`` or a pixel out of range.
    TypeError
        Non-integer pixel indices.

    Examples
    --------
    >>> from skyconv import healpix
    >>> theta, phi = healpix.pix2ang(1, 4)
    >>> float(theta), float(phi)
    (1.5707963267948966, 0.0)
    """
    nest = bool(nest)
    n = _nside(nside, nest)
    scalar = np.ndim(ipix) == 0
    theta, phi = _core._healpix_pix2ang(n, _pixels(ipix), nest)
    if lonlat:
        # healpy's own expressions, so the degrees come out bit-identical too.
        theta, phi = np.degrees(phi), 90.0 - np.degrees(theta)
    return _out(theta, scalar), _out(phi, scalar)


def ang2pix(nside, theta, phi, nest=False, lonlat=False):
    """Pixel containing each point, identical to ``healpy.ang2pix``.

    Parameters
    ----------
    nside : int
        Resolution, 1 <= nside <= 2^29 (a power of two for NEST).
    theta, phi : float or array
        Colatitude in [0, pi] and longitude (any finite value), radians; or, with ``lonlat``,
        longitude and latitude in degrees. Broadcast together.
    nest : bool
        NEST scheme (default RING).
    lonlat : bool
        Angles are (lon, lat) in degrees.

    Returns
    -------
    int64 array of the broadcast shape
        A NumPy int64 scalar for scalar input.

    Raises
    ------
    ValueError
        An invalid ``nside``, NaN/inf or out-of-range angles (see the module docstring).
    skyconv.ShapeError
        ``theta`` and ``phi`` do not broadcast.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import healpix
    >>> int(healpix.ang2pix(1, np.pi / 2, 0.0))
    4
    >>> healpix.ang2pix(16, [30.0, 200.0], [10.0, -45.0], lonlat=True).tolist()
    [1253, 2625]
    """
    nest = bool(nest)
    n = _nside(nside, nest)
    scalar = np.ndim(theta) == 0 and np.ndim(phi) == 0
    if lonlat:
        lon, lat = _reals(theta, "lon"), _reals(phi, "lat")
        theta, phi = np.pi / 2.0 - np.radians(lat), np.radians(lon)
        # Same test as the Rust core applies to θ, but reported in the caller's terms.
        with np.errstate(invalid="ignore"):
            bad_lat = ~((theta >= 0) & (theta <= np.pi + 1e-5))
            bad_lon = ~np.isfinite(phi)
        if np.any(bad_lat):
            k = int(np.argmax(bad_lat.ravel()))
            raise ArgumentError(f"lat[{k}] = {lat.ravel()[k]} must be in [-90, 90] degrees")
        if np.any(bad_lon):
            k = int(np.argmax(bad_lon.ravel()))
            raise ArgumentError(f"lon[{k}] = {lon.ravel()[k]} must be finite (degrees)")
    else:
        theta, phi = _reals(theta, "theta"), _reals(phi, "phi")
    try:
        t, p = np.broadcast_arrays(theta, phi)
    except ValueError:
        raise ShapeError(
            f"theta and phi cannot be broadcast together: shapes {np.shape(theta)} and "
            f"{np.shape(phi)}"
        ) from None
    pix = _core._healpix_ang2pix(n, np.asarray(t, order="C"), np.asarray(p, order="C"), nest)
    return _out(pix, scalar)


def ring2nest(nside, ipix):
    """NEST index of each RING pixel ``ipix``.

    Parameters
    ----------
    nside : int
        Resolution, a power of two.
    ipix : int or int array
        RING pixel indices in [0, 12 nside^2).

    Returns
    -------
    int64 array shaped like ``ipix`` (an int64 scalar for a scalar)

    Raises
    ------
    ValueError
        ``nside`` not a power of two in 1..2^29, or a pixel out of range.

    Examples
    --------
    >>> from skyconv import healpix
    >>> healpix.ring2nest(2, [0, 1, 2, 3]).tolist()
    [3, 7, 11, 15]
    """
    n = _nside(nside, True)
    return _out(_core._healpix_ring2nest(n, _pixels(ipix)), np.ndim(ipix) == 0)


def nest2ring(nside, ipix):
    """RING index of each NEST pixel ``ipix``.

    Parameters
    ----------
    nside : int
        Resolution, a power of two.
    ipix : int or int array
        NEST pixel indices in [0, 12 nside^2).

    Returns
    -------
    int64 array shaped like ``ipix`` (an int64 scalar for a scalar)

    Raises
    ------
    ValueError
        ``nside`` not a power of two in 1..2^29, or a pixel out of range.

    Examples
    --------
    >>> from skyconv import healpix
    >>> healpix.nest2ring(2, [3, 7, 11, 15]).tolist()
    [0, 1, 2, 3]
    """
    n = _nside(nside, True)
    return _out(_core._healpix_nest2ring(n, _pixels(ipix)), np.ndim(ipix) == 0)


def ring_info(nside):
    """Geometry of the 4 nside - 1 iso-latitude rings, north to south (RING scheme).

    Parameters
    ----------
    nside : int
        Resolution, 1 <= nside <= 2^29.

    Returns
    -------
    dict of 1-D arrays, one entry per ring
        ``theta``: colatitude of the pixel centres (radians), bit-identical to ``pix2ang``;
        ``z``: cos theta and ``sin_theta``: sin theta, as healpy's ``ringinfo`` computes them
        (sin theta from a polar formula near the poles); ``nphi``: pixels in the ring
        (int64); ``phi0``: longitude of the first pixel's centre (radians), 0 or pi/nphi;
        ``first_pixel``: RING index of the ring's first pixel (int64).

    Raises
    ------
    ValueError
        An invalid ``nside``.

    Examples
    --------
    >>> from skyconv import healpix
    >>> info = healpix.ring_info(2)
    >>> info["nphi"].tolist(), info["first_pixel"][:3].tolist()
    ([4, 8, 8, 8, 8, 8, 4], [0, 4, 12])
    """
    n = _nside(nside, False)
    theta, z, sin_theta, nphi, phi0, first = _core._healpix_ring_info(n)
    return {
        "theta": theta,
        "z": z,
        "sin_theta": sin_theta,
        "nphi": nphi,
        "phi0": phi0,
        "first_pixel": first,
    }


__all__ = [
    "MAX_NSIDE",
    "ang2pix",
    "isnsideok",
    "nest2ring",
    "npix2nside",
    "nside2npix",
    "pix2ang",
    "ring2nest",
    "ring_info",
]
