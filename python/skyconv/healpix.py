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
from ._errors import ShapeError

MAX_NSIDE = 1 << 29
"""Largest nside HEALPix supports (2^29)."""

_I64_MAX = np.iinfo(np.int64).max


def isnsideok(nside, nest=False):
    """Whether ``nside`` is a valid HEALPix resolution (vectorised, like healpy).

    Valid: a whole number 1 ≤ nside ≤ 2^29 (int or integral float), and for ``nest=True`` a
    power of two. Returns a bool for a scalar, a bool array for an array. Non-numbers are not
    valid (False).
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
        raise TypeError(f"nside must be an int, got {type(nside).__name__}")
    if not _scalar_nside_ok(nside, nest):
        if nest:
            raise ValueError(
                f"nside must be a power of 2 between 1 and 2**29 for the NEST scheme, got {nside}"
            )
        raise ValueError(f"nside must be a whole number between 1 and 2**29, got {nside}")
    return int(nside)


def _pixels(ipix, name: str = "ipix") -> np.ndarray:
    """Pixel indices as a C-contiguous int64 array (range is checked in Rust)."""
    if isinstance(ipix, int) and not isinstance(ipix, bool) and not -_I64_MAX <= ipix <= _I64_MAX:
        raise ValueError(f"{name} = {ipix} is out of range for a pixel index")
    a = np.asarray(ipix)
    kind = a.dtype.kind
    if kind == "u" and a.dtype.itemsize == 8 and a.size and a.max() > _I64_MAX:
        raise ValueError(f"{name} = {a.max()} is out of range for a pixel index")
    if kind == "f":
        with np.errstate(invalid="ignore"):
            whole = np.isfinite(a) & (a == np.floor(a))
        if not np.all(whole):
            bad = a.flat[int(np.argmin(whole.ravel()))]
            raise TypeError(
                f"{name} must hold integer pixel indices; got dtype {a.dtype} with value {bad}"
            )
        if a.size and np.max(np.abs(a)) >= 2.0**63:
            raise ValueError(f"{name} = {a.flat[int(np.argmax(np.abs(a)))]} is out of range")
    elif kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {a.dtype}")
    return np.asarray(a, dtype=np.int64, order="C")  # keeps 0-d (ascontiguousarray would not)


def _reals(x, name: str) -> np.ndarray:
    """Real numbers as float64 (int and float dtypes; others are a TypeError)."""
    a = np.asarray(x)
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be real numbers, got dtype {a.dtype}")
    return a.astype(np.float64, copy=False)


def _out(a: np.ndarray, scalar: bool):
    return a[()] if scalar else a


def nside2npix(nside):
    """Number of pixels, 12·nside², of a map of resolution ``nside`` (int; array for array).

    Raises ValueError for an invalid nside (see ``isnsideok``).
    """
    if np.ndim(nside) == 0:
        n = _nside(nside, False)
        return 12 * n * n
    ok = isnsideok(nside)
    if not np.all(ok):
        raise ValueError("nside must hold whole numbers between 1 and 2**29")
    n = np.asarray(nside).astype(np.int64)
    return 12 * n * n


def npix2nside(npix):
    """nside of a map with ``npix`` = 12·nside² pixels (int).

    Raises ValueError naming ``npix`` when it is not 12·nside² for a valid nside, TypeError
    when it is not a whole number.
    """
    if isinstance(npix, np.ndarray) and npix.ndim == 0:
        npix = npix[()]
    if isinstance(npix, (float, np.floating)) and math.isfinite(npix) and npix == int(npix):
        npix = int(npix)
    if isinstance(npix, (bool, np.bool_)) or not isinstance(npix, (int, np.integer)):
        raise TypeError(f"npix must be an int, got {type(npix).__name__}")
    npix = int(npix)
    n = math.isqrt(npix // 12) if npix > 0 else 0
    if npix <= 0 or 12 * n * n != npix or n > MAX_NSIDE:
        raise ValueError(f"npix = {npix} is not 12*nside**2 for a valid nside")
    return n


def pix2ang(nside, ipix, nest=False, lonlat=False):
    """Centres of pixels ``ipix``: (θ, φ) in radians, or (lon, lat) in degrees with ``lonlat``.

    ``nest`` selects the NEST scheme (default RING). Returns two float64 arrays shaped like
    ``ipix`` (NumPy float64 scalars for a scalar ``ipix``), bit-identical to healpy.pix2ang.
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
    """Pixel containing each point: (θ, φ) in radians, or (lon, lat) in degrees with ``lonlat``.

    θ (colatitude) in [0, π], φ (longitude) any finite value; ``theta`` and ``phi`` broadcast
    together. ``nest`` selects the NEST scheme (default RING). Returns an int64 array of the
    broadcast shape (a NumPy int64 scalar for scalar input), identical to healpy.ang2pix.
    NaN/inf angles raise ValueError (see the module docstring).
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
            raise ValueError(f"lat[{k}] = {lat.ravel()[k]} must be in [-90, 90] degrees")
        if np.any(bad_lon):
            k = int(np.argmax(bad_lon.ravel()))
            raise ValueError(f"lon[{k}] = {lon.ravel()[k]} must be finite (degrees)")
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
    """NEST index of each RING pixel ``ipix`` (nside a power of two).

    Returns an int64 array shaped like ``ipix`` (an int64 scalar for a scalar).
    """
    n = _nside(nside, True)
    return _out(_core._healpix_ring2nest(n, _pixels(ipix)), np.ndim(ipix) == 0)


def nest2ring(nside, ipix):
    """RING index of each NEST pixel ``ipix`` (nside a power of two).

    Returns an int64 array shaped like ``ipix`` (an int64 scalar for a scalar).
    """
    n = _nside(nside, True)
    return _out(_core._healpix_nest2ring(n, _pixels(ipix)), np.ndim(ipix) == 0)


def ring_info(nside):
    """Geometry of the 4·nside−1 iso-latitude rings, north to south (RING scheme).

    Returns a dict of 1-D arrays, one entry per ring:

    - ``theta``: colatitude of the pixel centres (radians), bit-identical to ``pix2ang``;
    - ``z``: cos θ and ``sin_theta``: sin θ, both as healpy's ``ringinfo`` computes them
      (sin θ from a polar formula near the poles, accurate to the last bits there);
    - ``nphi``: pixels in the ring (int64);
    - ``phi0``: longitude of the first pixel's centre (radians), 0 or π/nphi;
    - ``first_pixel``: RING index of the ring's first pixel (int64).
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
