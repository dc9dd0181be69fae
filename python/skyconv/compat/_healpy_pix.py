"""healpy's pixel functions with healpy 1.20.1's signatures, on skyconv's HEALPix core.

``pix2ang``, ``ang2pix``, ``vec2pix``, ``ring2nest``, ``nest2ring`` and ``npix2nside`` run
skyconv's Rust geometry (bit-identical to healpy); the rest is small numpy built on them.
Angles: θ colatitude and φ longitude in radians, or (``lonlat=True``) longitude and latitude in
degrees.

Hand-overs to healpy (when installed; otherwise NotImplementedError naming the case): an array
``nside`` (healpy broadcasts it; skyconv takes one resolution per call), ``query_disc`` with
``inclusive=True`` or ``return_ranges=True``.
"""

from __future__ import annotations

import numpy as np

from .. import _core
from .. import healpix as _hpx
from ..exceptions import ArgumentError, ArgumentTypeError, UnsupportedError
from . import _healpy_orig
from ._healpy_masked import UNSEEN, accept_ma


def _handover(name: str, why: str, *args, **kwargs):
    if _healpy_orig.module() is None:
        raise UnsupportedError(
            f"skyconv.compat.healpy.{name}: {why} is handed to healpy, which is not installed "
            "(pip install healpy)"
        )
    return _healpy_orig.original(name)(*args, **kwargs)


def _vector_nside(nside) -> bool:
    return np.ndim(nside) > 0


def nside2npix(nside):
    """Number of pixels 12·nside² (int, or an array for an array of nside)."""
    return _hpx.nside2npix(nside)


def npix2nside(npix):
    """nside of a map of ``npix`` pixels; ValueError when npix is not 12·nside²."""
    return _hpx.npix2nside(npix)


def nside2order(nside):
    """HEALPix order log2(nside); ValueError unless nside is a power of 2."""
    if _vector_nside(nside):
        return np.array([nside2order(n) for n in np.asarray(nside).ravel()]).reshape(
            np.shape(nside)
        )
    n = _hpx._nside(nside, True)
    return n.bit_length() - 1


def order2nside(order):
    """nside = 2**order (int, or an array for an array of orders); ValueError out of range."""
    o = np.asarray(order)
    if o.dtype.kind not in "iu":
        raise ArgumentTypeError(f"order must be an integer, got dtype {o.dtype}")
    if np.any(o < 0) or np.any(o > 29):
        raise ArgumentError(f"order must be in 0..29, got {order}")
    n = np.left_shift(1, o.astype(np.int64))
    return int(n) if o.ndim == 0 else n


def nside2pixarea(nside, degrees=False):
    """Pixel area 4π / npix in steradians (square degrees with ``degrees``)."""
    area = 4.0 * np.pi / nside2npix(nside)
    return area * (180.0 / np.pi) ** 2 if degrees else area


def nside2resol(nside, arcmin=False):
    """Approximate pixel size sqrt(pixel area) in radians (arcminutes with ``arcmin``)."""
    res = np.sqrt(nside2pixarea(nside))
    return np.degrees(res) * 60.0 if arcmin else res


def pix2ang(nside, ipix, nest=False, lonlat=False):
    """Centres of pixels: (θ, φ) in radians, or (lon, lat) in degrees with ``lonlat``."""
    if _vector_nside(nside):
        return _handover("pix2ang", "an array nside", nside, ipix, nest=nest, lonlat=lonlat)
    return _hpx.pix2ang(nside, ipix, nest=nest, lonlat=lonlat)


def _fold_lat(lon, lat, latbounce):
    """healpy's ``latauto``: latitudes beyond ±90° fold back over the pole; without
    ``latbounce`` the longitude moves by 180° where a pole was crossed."""
    lat = np.asarray(lat, dtype=np.float64)
    lon = np.asarray(lon, dtype=np.float64)
    crossed = (lat > 90.0) | (lat < -90.0)
    folded = np.where(lat > 90.0, 180.0 - lat, np.where(lat < -90.0, -180.0 - lat, lat))
    if not latbounce:
        lon = np.where(crossed, lon + 180.0, lon)
    return lon, folded


def ang2pix(nside, theta, phi, nest=False, lonlat=False, latauto=False, latbounce=True):
    """Pixel of each point: (θ, φ) in radians, or (lon, lat) in degrees with ``lonlat``.

    ``latauto`` (with ``lonlat``): latitudes in (90, 180] and [-180, -90) fold back over the
    pole; ``latbounce=False`` then adds 180° to the longitude of those points.
    """
    if _vector_nside(nside):
        return _handover(
            "ang2pix",
            "an array nside",
            nside,
            theta,
            phi,
            nest=nest,
            lonlat=lonlat,
            latauto=latauto,
            latbounce=latbounce,
        )
    if lonlat and latauto:
        scalar = np.ndim(theta) == 0 and np.ndim(phi) == 0
        theta, phi = _fold_lat(theta, phi, latbounce)
        if scalar:
            theta, phi = theta[()], phi[()]
    return _hpx.ang2pix(nside, theta, phi, nest=nest, lonlat=lonlat)


def pix2vec(nside, ipix, nest=False):
    """Unit vectors (x, y, z) of pixel centres, three float64 arrays shaped like ``ipix``."""
    theta, phi = pix2ang(nside, ipix, nest=nest)
    st = np.sin(theta)
    return st * np.cos(phi), st * np.sin(phi), np.cos(theta)


def vec2pix(nside, x, y, z, nest=False):
    """Pixel containing the direction of each vector (x, y, z) (any length > 0), computed as
    HEALPix does (z straight from the vector), so the same pixel as healpy for every vector.
    ValueError for a zero or non-finite vector (healpy returns an arbitrary pixel)."""
    if _vector_nside(nside):
        return _handover("vec2pix", "an array nside", nside, x, y, z, nest=nest)
    nest = bool(nest)
    n = _hpx._nside(nside, nest)
    try:
        x, y, z = np.broadcast_arrays(*(_hpx._reals(v, name) for v, name in zip((x, y, z), "xyz")))
    except ValueError:
        raise _hpx.ShapeError("x, y and z cannot be broadcast together") from None
    scalar = x.ndim == 0
    x, y, z = (np.asarray(v, order="C") for v in (x, y, z))  # keeps 0-d
    pix = _core._healpix_vec2pix(n, x, y, z, nest)
    return pix[()] if scalar else pix


def ring2nest(nside, ipix):
    """NEST index of each RING pixel (nside a power of 2)."""
    if _vector_nside(nside):
        return _handover("ring2nest", "an array nside", nside, ipix)
    return _hpx.ring2nest(nside, ipix)


def nest2ring(nside, ipix):
    """RING index of each NEST pixel (nside a power of 2)."""
    if _vector_nside(nside):
        return _handover("nest2ring", "an array nside", nside, ipix)
    return _hpx.nest2ring(nside, ipix)


def _scheme(name, value):
    if value is not None:
        v = str(value).strip().upper()[:4]
        if v not in ("RING", "NEST"):
            raise ArgumentError(f"{name} must be 'RING' or 'NESTED', got {value!r}")
        return v
    return None


@accept_ma
def reorder(map_in, inp=None, out=None, r2n=None, n2r=None):
    """healpy.reorder: map(s) in the other pixel ordering.

    Parameters
    ----------
    map_in : array (npix,) or (ncomp, npix) (masked arrays accepted)
        Map(s).
    inp, out : str, optional
        'RING' or 'NESTED' (or 'NEST').
    r2n, n2r : bool, optional
        RING to NEST, NEST to RING (when inp/out are not given).

    Returns
    -------
    numpy.ndarray
        The reordered map(s) (the input itself when inp == out).

    Raises
    ------
    ValueError
        For an unknown scheme, no direction given, or a size that is not 12*nside**2.
    """
    src = _scheme("inp", inp)
    dst = _scheme("out", out)
    if src is None or dst is None:
        if r2n:
            src, dst = "RING", "NEST"
        elif n2r:
            src, dst = "NEST", "RING"
        else:
            raise ArgumentError("give inp and out, or r2n=True, or n2r=True")
    maps = np.asarray(map_in)
    if src == dst:
        return map_in
    npix = maps.shape[-1]
    nside = npix2nside(npix)
    idx = np.arange(npix)
    # out[j] = in[k] where k is pixel j's index in the input ordering.
    take = nest2ring(nside, idx) if dst == "NEST" else ring2nest(nside, idx)
    return maps[..., take]


def _ud_grade_one(m, nside_out, pess, power, dtype):
    npix_in = m.size
    nside_in = npix2nside(npix_in)
    out_type = dtype if dtype else m.dtype
    ratio = (float(nside_out) / float(nside_in)) ** float(power) if power else 1.0
    npix_out = 12 * nside_out * nside_out
    if nside_out > nside_in:
        k = npix_out // npix_in
        return np.repeat(m * np.asarray(ratio, dtype=m.dtype), k).astype(out_type)
    if nside_out == nside_in:
        return m.astype(out_type)
    k = npix_in // npix_out
    blocks = m.reshape(npix_out, k)
    with np.errstate(invalid="ignore"):
        good = np.isfinite(blocks) & ~np.isclose(blocks, UNSEEN, rtol=1e-5, atol=1e-8)
    nhit = good.sum(axis=1)
    total = np.where(good, blocks, 0).sum(axis=1).astype(out_type)
    hit = nhit != 0
    res = np.zeros(npix_out, dtype=out_type)
    res[hit] = total[hit] / (nhit[hit] / ratio)
    bad = nhit != k if pess else ~hit
    res[bad] = UNSEEN
    return res


@accept_ma
def ud_grade(
    map_in, nside_out, pess=False, order_in="RING", order_out=None, power=None, dtype=None
):
    """healpy.ud_grade: map(s) at another resolution.

    Parameters
    ----------
    map_in : array (npix,) or (ncomp, npix) (masked arrays accepted)
        Map(s), any unit.
    nside_out : int
        Output resolution (a power of 2).
    pess : bool
        A degraded pixel is UNSEEN when any child is missing (default: only when all are).
    order_in, order_out : str
        'RING' or 'NESTED' (order_out defaults to order_in).
    power : float, optional
        Scale values by (nside_out / nside_in)**power.
    dtype : numpy dtype, optional
        Output dtype (default the input's).

    Returns
    -------
    numpy.ndarray
        A degraded pixel is the mean of its valid children (UNSEEN and non-finite ones left out;
        healpy lets a NaN child make the parent NaN); an upgraded pixel repeats its parent.
    """
    nside_out = _hpx._nside(nside_out, True)
    maps = np.asarray(map_in)
    if maps.ndim not in (1, 2):
        raise ArgumentTypeError("Invalid map")
    order_out = order_in if order_out is None else order_out
    ring_in = str(order_in).upper()[:4] == "RING"
    ring_out = str(order_out).upper()[:4] == "RING"
    out = []
    for m in np.atleast_2d(maps):
        if ring_in:
            m = reorder(m, r2n=True)
        g = _ud_grade_one(np.asarray(m), nside_out, pess, power, dtype)
        out.append(reorder(g, n2r=True) if ring_out else g)
    return out[0] if maps.ndim == 1 else np.array(out)


def query_disc(
    nside, vec, radius, inclusive=False, fact=4, nest=False, buff=None, return_ranges=False
):
    """healpy.query_disc: pixels whose centres lie within ``radius`` of ``vec``.

    Parameters
    ----------
    nside : int
        Resolution.
    vec : array (3,)
        Direction of the disc centre (any length > 0).
    radius : float
        Radius in radians.
    inclusive, fact, return_ranges
        ``inclusive=True`` (pixels overlapping the disc) and ``return_ranges`` are handed to
        healpy.
    nest : bool
        NEST indices (sorted) instead of RING.
    buff : ignored

    Returns
    -------
    numpy.ndarray
        int64 pixel indices, sorted.

    Notes
    -----
    numpy code, one step per ring with exact tests only at the ends of each ring's arc: equal
    to healpy, but 10x to 100x slower than healpy's C++ for discs of 10^5 pixels and more.

    Raises
    ------
    ValueError
        For an invalid nside.
    NotImplementedError
        For the handed-over options without healpy installed.
    """
    if inclusive or return_ranges or _vector_nside(nside):
        return _handover(
            "query_disc",
            "inclusive=True or return_ranges=True",
            nside,
            vec,
            radius,
            inclusive=inclusive,
            fact=fact,
            nest=nest,
            buff=buff,
            return_ranges=return_ranges,
        )
    n = _hpx._nside(nside, bool(nest))
    v = np.asarray(vec, dtype=np.float64).ravel()
    v = v / np.linalg.norm(v)
    z0 = v[2]
    theta0 = np.arccos(np.clip(z0, -1.0, 1.0))
    phi0 = np.arctan2(v[1], v[0])
    radius = float(radius)
    info = _hpx.ring_info(n)
    cosr = np.cos(radius)
    sel = np.abs(info["theta"] - theta0) <= radius
    parts = []
    s0 = np.sqrt(max(0.0, 1.0 - z0 * z0))
    for r in np.flatnonzero(sel):
        z, s = info["z"][r], info["sin_theta"][r]
        nphi, first, p0 = int(info["nphi"][r]), int(info["first_pixel"][r]), info["phi0"][r]
        arc, edge = _disc_candidates(z, s, z0, s0, cosr, phi0 - p0, nphi)
        phis = p0 + 2.0 * np.pi / nphi * (edge % nphi)
        ok = z * z0 + s * s0 * np.cos(phis - phi0) >= cosr
        if arc is None:  # every candidate was tested (a short arc may wrap past φ = 0)
            parts.append(first + np.sort(edge[ok]))
            continue
        lo, hi = arc
        ok_lo, ok_hi = edge[:4][ok[:4]], edge[4:][ok[4:]]
        # The disc meets a ring in one arc: from the first accepted pixel of the lower edge to
        # the last of the upper edge, interior included.
        a = ok_lo[0] if ok_lo.size else lo + 4
        b = ok_hi[-1] if ok_hi.size else hi - 4
        if b < a:
            continue
        ks = np.arange(a, b + 1)
        if a < 0 or b >= nphi:  # wraps past φ = 0: keep the ring's pixels in ascending order
            ks = np.sort(ks % nphi)
        parts.append(first + ks)
    pix = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    pix = pix.astype(np.int64)  # rings come in order, each ring ascending
    if nest:
        pix = np.sort(ring2nest(n, pix))
    return pix


def _disc_candidates(z, s, z0, s0, cosr, dphi_c, nphi):
    """Where a ring (centres at phi0 + 2πk/nphi) meets the disc: ``(arc, edge)``.

    The disc covers |Δφ| <= arccos((cos r - z z0) / (s s0)) of the ring. For an arc (lo, hi)
    (k unreduced, lo < hi - 7), ``edge`` is the four pixels at each end (lo..lo+3, hi-3..hi),
    which the caller tests exactly; the pixels between are inside. Otherwise ``arc`` is None
    and ``edge`` holds every pixel to test."""
    every = np.arange(nphi)
    if s * s0 == 0.0:
        return None, every
    c = (cosr - z * z0) / (s * s0)
    if c <= -1.0 - 1e-9 and nphi >= 8:  # the whole ring is well inside: test its ends only
        return (0, nphi - 1), np.concatenate([np.arange(4), np.arange(nphi - 4, nphi)])
    if c <= -1.0:
        return None, every
    half = np.arccos(min(c, 1.0))
    step = 2.0 * np.pi / nphi
    lo = int(np.floor((dphi_c - half) / step)) - 1
    hi = int(np.ceil((dphi_c + half) / step)) + 1
    if hi - lo + 1 >= nphi:
        return None, every
    if hi - lo < 8:
        return None, np.arange(lo, hi + 1) % nphi
    return (lo, hi), np.concatenate([np.arange(lo, lo + 4), np.arange(hi - 3, hi + 1)])
