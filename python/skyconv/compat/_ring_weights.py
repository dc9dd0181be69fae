"""HEALPix quadrature ring weights, computed (no weight files, no network).

A ring weight multiplies the uniform pixel weight 4π/npix of every pixel of a ring in
``map2alm``. HEALPix's ring weights make the quadrature exact for the azimuthally symmetric
part of band-limited maps: with the factor (1 + w_r) on ring r,

    Σ_r (1 + w_r) · n_r · (4π / npix) · P_l(z_r) = 4π δ_l0   for every even l ≤ lmax,

where the sum runs over all 4·nside − 1 rings, n_r is the number of pixels of ring r, z_r = cos θ_r
and P_l the Legendre polynomial (odd l vanish by the north-south symmetry, which the weights
share). There are 2·nside unknowns (north pole to equator) and lmax/2 + 1 equations; HEALPix's
program (``QUAD_RING`` 1.3.0, "computed by SVD") picks, among the exact solutions, the one of least
Euclidean norm in the per-ring totals t_r = m_r · n_r · w_r (m_r = 2 for a ring and its mirror, 1
for the equator). This module solves that same problem in float64 (least-norm solution from a
QR factorisation), which reproduces the weight files shipped with healpy
(``weight_ring_n{nside}.fits``) to 3e-13 up to nside 256, 1.3e-12 at 512, 2.9e-12 at 1024 and
1.9e-11 at 2048 (measured; the files carry their own rounding, which grows with nside); map2alm
with the computed weights equals healpy's ``use_weights=True`` to 1.5e-13 (nside 256) and
3.6e-13 (nside 2048, lmax 1000) of the largest coefficient.

The band limit follows the weight files (their ``MAX-LPOL``) for the nsides healpy ships (powers
of two from 2 to 8192); other nsides use lmax = 3·nside.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

from .._utils.args import env_dir
from ..exceptions import ArgumentError

# MAX-LPOL of healpy's weight_ring_n*.fits files: the band limit HEALPix solved for.
_FILE_LMAX = {
    2: 2,
    4: 8,
    8: 24,
    16: 48,
    32: 100,
    64: 226,
    128: 454,
    256: 768,
    512: 1700,
    1024: 3500,
    2048: 6144,
    4096: 12288,
    8192: 24576,
}


def default_lmax(nside: int) -> int:
    """Band limit of HEALPix's ring weights for ``nside`` (that of healpy's weight files)."""
    return _FILE_LMAX.get(int(nside), 3 * int(nside))


def _north_rings(nside: int):
    """z = cos θ and pixel count of rings 1..2·nside (north pole to equator)."""
    i = np.arange(1, 2 * nside + 1, dtype=np.float64)
    n = float(nside)
    z = np.where(i < n, 1.0 - i * i / (3.0 * n * n), 4.0 / 3.0 - 2.0 * i / (3.0 * n))
    nphi = np.where(i < n, 4.0 * i, 4.0 * n)
    return z, nphi


def _even_legendre(lmax: int, z: np.ndarray) -> np.ndarray:
    """P_l(z) for l = 0, 2, ..., lmax (rows), by Bonnet's recurrence in float64.

    Written as P_{l+1} = zP_l + l/(l+1) (zP_l - P_{l-1}), whose rounding error grows 5x slower
    with l than the textbook form ((2l+1) z P_l - l P_{l-1}) / (l+1).
    """
    rows = np.empty((lmax // 2 + 1, z.size))
    p_prev, p = np.ones_like(z), z.copy()
    rows[0] = p_prev
    for ell in range(1, lmax + 1):
        if ell % 2 == 0:
            rows[ell // 2] = p
        zp = z * p
        p_prev, p = p, zp + (ell / (ell + 1.0)) * (zp - p_prev)
    return rows


# Weights of at least this nside are kept on disk once computed (1 s and more to compute).
DISK_CACHE_MIN_NSIDE = 512


def _cache_dir() -> Path:
    """``SKYCONV_CACHE_DIR``, else ``$XDG_CACHE_HOME/skyconv`` (``~/.cache/skyconv``)."""
    base = env_dir("SKYCONV_CACHE_DIR")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "skyconv"


@functools.lru_cache(maxsize=8)
def _weights(nside: int, lmax: int) -> np.ndarray:
    if nside < DISK_CACHE_MIN_NSIDE:
        w = _solve(nside, lmax)
    else:
        path = _cache_dir() / "ring_weights_v1" / f"n{nside}_l{lmax}.npy"
        try:
            w = np.load(path)
            if w.shape != (2 * nside,) or w.dtype != np.float64 or not np.all(np.isfinite(w)):
                raise ValueError("bad cache entry")
        except (OSError, ValueError):
            w = _solve(nside, lmax)
            try:  # the cache is optional: a read-only home just recomputes next time
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
                np.save(tmp, w)
                os.replace(tmp, path)
            except OSError:
                pass
    w.setflags(write=False)
    return w


def _solve(nside: int, lmax: int) -> np.ndarray:
    z, nphi = _north_rings(nside)
    mult = np.full(2 * nside, 2.0)
    mult[-1] = 1.0  # the equator has no mirror ring
    total = mult * nphi  # pixels sharing each unknown weight
    npix = 12.0 * nside * nside
    p = _even_legendre(lmax, z)
    # Unknowns t_r = total_r * w_r; the quadrature of P_l with weights 1 + w_r must be 4π δ_l0:
    # p t = npix δ_l0 - p total (both sides divided by 4π/npix). Least-norm t = p^T (p p^T)^-1 b,
    # taken stably from the QR factors of p^T (p^T = q r, so t = q r^-T b).
    rhs = -(p @ total)
    rhs[0] += npix
    q, r = np.linalg.qr(p.T)
    t = q @ np.linalg.solve(r.T, rhs)
    return 1.0 + t / total


def ring_weights(nside, lmax=None):
    """HEALPix ring weights for ``nside``, as factors for ``skyconv.map2alm(ring_weights=...)``.

    Parameters
    ----------
    nside : int
        HEALPix resolution (>= 1).
    lmax : int, optional
        Band limit up to which the quadrature of azimuthally symmetric maps is exact (even l).
        Default: that of healpy's weight file for this nside (see :func:`default_lmax`).

    Returns
    -------
    numpy.ndarray
        float64 (2·nside,), dimensionless factors 1 + w for rings 1..2·nside (north pole to
        equator; the southern rings mirror them). healpy's weight files store w.

    Raises
    ------
    ValueError
        If nside < 1 or lmax < 0.

    Notes
    -----
    Cost: a QR factorisation of a 2·nside × (lmax/2 + 1) matrix, growing as nside³: 0.2 s at
    nside 128, 3 s at 512, 22 s at 1024, 78 s at 2048 on two busy cores (by that scaling ~10 min and
    0.4 GB at 4096; impractical at 8192). Results are cached in memory per (nside, lmax), and
    from nside 512 on disk in ``SKYCONV_CACHE_DIR`` (default ``~/.cache/skyconv``).
    """
    nside = int(nside)
    if nside < 1:
        raise ArgumentError(f"nside must be >= 1, got {nside}")
    lmax = default_lmax(nside) if lmax is None else int(lmax)
    if lmax < 0:
        raise ArgumentError(f"lmax must be >= 0, got {lmax}")
    return _weights(nside, lmax).copy()
