"""The two halves of each spherical harmonic transform, on blocks of m and blocks of rings: the
building blocks of a distributed transform (the S2HAT scheme).

A synthesis ``alm2map`` is ``leg2map(alm2leg(alm))``: the Legendre stage turns the alm of a
set of m into the ring Fourier coefficients Δ_m(θ_r) = Σ_l a_lm λ_lm(θ_r) on a set of rings, and
the ring-FFT stage turns Δ_m, m = 0..mmax, on a set of rings into those rings' pixels. A
distributed transform gives each process a block of m for the first stage and a block of rings
for the second, with one all-to-all of Δ in between. The analysis runs backwards:
``map2leg`` (ring FFTs, no weights) then ``leg2alm`` (Legendre sums with the quadrature weight
4π/npix × ring weight), so that ``map2alm(m, iter=0)`` is the sum over ring blocks of
``leg2alm(map2leg(m_block))``.

Conventions (healpy's, as :func:`skyconv.alm2map`):

- ``alm`` of a block of m: complex128 ``(ncomp, nblk)``, the columns of the m in ``ms``
  (strictly increasing) one after the other, l = m..lmax in each: healpy's layout restricted to
  ``ms`` (:func:`alm_block` cuts one out of a full alm array).
- ``rings``: int64 ring indices 0..4·nside−2 of the RING scheme, north to south, distinct, in
  any order; the pixels of a ring block are the rings' pixels concatenated in that order
  (:func:`ring_pixels`).
- ``leg``: complex128 ``(ncomp, len(rings), number of m)``. Spin 2: ``alm`` holds (E, B) and
  ``leg`` the Fourier coefficients of the (Q, U) rings.

Each function also takes arrays without the leading component axis and then returns one
without it. Ring and pixel indices are int64 throughout (nside up to 2**29).
"""

from __future__ import annotations

import numpy as np

from . import _core
from ._utils.arrays import int_arg
from ._utils.device import resolve
from .exceptions import ArgumentError, ShapeError

__all__ = [
    "alm2leg",
    "leg2map",
    "map2leg",
    "leg2alm",
    "ring_pixels",
    "ring_lengths",
    "alm_block",
    "block_index",
    "m_blocks",
    "ring_blocks",
]


def _c(a, dtype) -> np.ndarray:
    """C-contiguous and aligned (arrays unpickled by Dask can be unaligned; the core needs both)."""
    return np.require(a, dtype=dtype, requirements=["C", "A"])


def _nside(nside) -> int:
    n = int_arg(nside, "nside")
    if n < 1 or n > 2**29:
        raise ArgumentError(f"nside must be in 1..2**29 (RING scheme: any integer), got {n}")
    return n


def _rings(rings, nside: int) -> np.ndarray:
    nr = 4 * nside - 1
    if rings is None:
        return np.arange(nr, dtype=np.int64)
    r = np.asarray(rings)
    if r.ndim != 1 or (r.size and r.dtype.kind not in "iu"):
        raise ArgumentError("rings must be a 1-D array of integer ring indices")
    r = _c(r, np.int64)
    if r.size and (r.min() < 0 or r.max() >= nr):
        raise ArgumentError(f"rings must lie in 0..4*nside-2 = {nr - 1}, got {r.min()}..{r.max()}")
    if np.unique(r).size != r.size:
        raise ArgumentError("rings must be distinct")
    return r


def _ms(ms, lmax: int) -> np.ndarray:
    m = np.asarray(ms)
    if m.ndim != 1 or (m.size and m.dtype.kind not in "iu"):
        raise ArgumentError("ms must be a 1-D array of integer m values")
    m = _c(m, np.int64)
    if m.size and (m[0] < 0 or m[-1] > lmax or np.any(np.diff(m) <= 0)):
        raise ArgumentError(f"ms must be strictly increasing integers in 0..lmax = {lmax}")
    return m


def _spin(spin) -> bool:
    s = int_arg(spin, "spin")
    if s not in (0, 2):
        raise ArgumentError(f"spin must be 0 or 2, got {s}")
    return s == 2


def _device(device) -> str:
    return resolve(device).core


def _complex(a, name: str, ndim: int) -> tuple[np.ndarray, bool]:
    arr = np.asarray(a)
    if arr.ndim not in (ndim - 1, ndim):
        raise ShapeError(f"{name} must have {ndim - 1} or {ndim} dimensions, got shape {arr.shape}")
    squeeze = arr.ndim == ndim - 1
    if squeeze:
        arr = arr[None]
    return _c(arr, np.complex128), squeeze


def _pieces(leg, name: str) -> tuple[list[np.ndarray], bool]:
    """``leg`` as a list of (ncomp, a, b) C-contiguous complex128 pieces (one array: a list of
    it) and whether the component axis was absent (then on every piece)."""
    many = isinstance(leg, (list, tuple))
    got = [_complex(p, name, 3) for p in (leg if many else [leg])]
    if not got:
        raise ShapeError(f"{name} must hold at least one piece")
    if len({sq for _, sq in got}) != 1 or len({g.shape[0] for g, _ in got}) != 1:
        raise ShapeError(f"the pieces of {name} must have the same number of components")
    return [g for g, _ in got], got[0][1]


def ring_lengths(nside, rings=None) -> np.ndarray:
    """Number of pixels of each ring.

    Parameters
    ----------
    nside : int
        HEALPix resolution, 1..2**29 (any integer: RING scheme).
    rings : array of int, optional
        Ring indices 0..4·nside−2 (RING scheme, north to south); default all.

    Returns
    -------
    numpy.ndarray of int64
        nphi of each ring: 4·i for the i-th ring from either pole in the caps, 4·nside in the
        equatorial belt.

    Raises
    ------
    ArgumentError
        Bad nside or ring indices.

    Examples
    --------
    >>> from skyconv.sht_halves import ring_lengths
    >>> ring_lengths(2).tolist()
    [4, 8, 8, 8, 8, 8, 4]
    """
    nside = _nside(nside)
    r = _rings(rings, nside)
    i = np.minimum(r + 1, 4 * nside - 1 - r)  # ring number from the nearer pole, 1-based
    return np.where(i < nside, 4 * i, 4 * nside).astype(np.int64)


def ring_pixels(nside, rings=None) -> np.ndarray:
    """RING-scheme pixel indices of a block of rings, concatenated in the given ring order.

    Parameters
    ----------
    nside : int
        HEALPix resolution, 1..2**29 (any integer: RING scheme).
    rings : array of int, optional
        Ring indices 0..4·nside−2, distinct; default all (then the result is 0..npix−1).

    Returns
    -------
    numpy.ndarray of int64
        The pixel indices, ``sum(ring_lengths(nside, rings))`` of them.

    Raises
    ------
    ArgumentError
        Bad nside or ring indices.

    Examples
    --------
    >>> from skyconv.sht_halves import ring_pixels
    >>> ring_pixels(2, [6, 0]).tolist()
    [44, 45, 46, 47, 0, 1, 2, 3]
    """
    nside = _nside(nside)
    r = _rings(rings, nside)
    n = np.int64(nside)
    i = r + 1  # 1-based ring number from the north pole
    j = 4 * n - i  # from the south pole
    npix = 12 * n * n
    first = np.where(
        i < n,
        2 * i * (i - 1),
        np.where(i <= 3 * n, 2 * n * (n - 1) + (i - n) * 4 * n, npix - 2 * j * (j + 1)),
    )
    nphi = ring_lengths(nside, r)
    if r.size == 0:
        return np.zeros(0, np.int64)
    starts = np.repeat(first - np.concatenate(([0], np.cumsum(nphi)[:-1])), nphi)
    return starts + np.arange(nphi.sum(), dtype=np.int64)


def m_blocks(lmax, mmax, n) -> list[np.ndarray]:
    """Contiguous ranges of m = 0..mmax in at most ``n`` blocks of about equal Legendre work.

    The cost of m is taken as lmax − m + 1 (the length of its sum over l), so blocks of large m
    hold more m than blocks of small m. Contiguous ranges keep each block of alm a contiguous
    slice of healpy's layout. The rule is the core's, shared with ``devices=[...]`` of
    alm2map/map2alm: m joins a block while half its cost still fits that block's share.

    Parameters
    ----------
    lmax, mmax : int
        Band limit and highest m, 0 <= mmax <= lmax.
    n : int
        Number of blocks wanted (>= 1); fewer come back when there are fewer m.

    Returns
    -------
    list of numpy.ndarray of int64
        The m of each block, ascending; together 0..mmax.

    Raises
    ------
    ArgumentError
        Not 0 <= mmax <= lmax, or n < 1.

    Examples
    --------
    >>> from skyconv.sht_halves import m_blocks
    >>> [b.tolist() for b in m_blocks(7, 7, 2)]
    [[0, 1, 2], [3, 4, 5, 6, 7]]
    """
    lmax, mmax, n = int_arg(lmax, "lmax"), int_arg(mmax, "mmax"), int_arg(n, "n")
    if not 0 <= mmax <= lmax or n < 1:
        raise ArgumentError(f"need 0 <= mmax <= lmax and n >= 1, got {lmax=}, {mmax=}, {n=}")
    return _ranges(_core._m_blocks(lmax, mmax, min(n, mmax + 1)))


def ring_blocks(nside, n) -> list[np.ndarray]:
    """Contiguous ranges of rings 0..4·nside−2 in at most ``n`` blocks of about equal pixel
    counts (so each is a contiguous slice of the RING map). The rule is the core's, shared with
    ``devices=[...]`` of alm2map/map2alm: ring r joins a block while its middle pixel lies
    up to its middle pixel stays within that block's share of the pixels.

    Parameters
    ----------
    nside : int
        HEALPix resolution.
    n : int
        Number of blocks wanted (>= 1).

    Returns
    -------
    list of numpy.ndarray of int64
        The rings of each block, ascending; together all rings.

    Raises
    ------
    ArgumentError
        Bad nside, or n < 1.

    Examples
    --------
    >>> from skyconv.sht_halves import ring_blocks
    >>> [b.tolist() for b in ring_blocks(2, 2)]
    [[0, 1, 2, 3], [4, 5, 6]]
    """
    nside, n = _nside(nside), int_arg(n, "n")
    if n < 1:
        raise ArgumentError(f"n must be >= 1, got {n}")
    return _ranges(_core._ring_blocks(nside, min(n, 4 * nside - 1)))


def _ranges(blocks) -> list[np.ndarray]:
    """The non-empty [a, b) blocks of the core's rule (the multi-GPU SHT's) as index arrays."""
    return [np.arange(a, b, dtype=np.int64) for a, b in blocks if b > a]


def alm_block(alm, lmax, ms, mmax=None) -> np.ndarray:
    """Cut the columns of the m in ``ms`` out of alm in healpy's layout.

    Parameters
    ----------
    alm : array of complex, shape (..., nalm)
        alm in healpy's layout for ``lmax`` and ``mmax``.
    lmax : int
        Band limit.
    ms : array of int
        Strictly increasing m values, each <= mmax.
    mmax : int, optional
        Highest m of ``alm`` (default lmax).

    Returns
    -------
    numpy.ndarray of complex128, shape (..., nblk)
        The block, m by m, l = m..lmax each.

    Raises
    ------
    ArgumentError
        Bad ms.
    ShapeError
        alm has the wrong length.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv.sht_halves import alm_block
    >>> alm_block(np.arange(6) + 0j, 2, [0, 2]).real.tolist()  # lmax 2: m=0: l 0..2, m=2: l 2
    [0.0, 1.0, 2.0, 5.0]
    """
    lmax = int_arg(lmax, "lmax")
    mmax = lmax if mmax is None else int_arg(mmax, "mmax")
    m = _ms(ms, mmax)
    a = np.asarray(alm)
    nalm = (mmax + 1) * (lmax + 1) - mmax * (mmax + 1) // 2
    if a.shape[-1:] != (nalm,):
        raise ShapeError(
            f"alm must have {nalm} coefficients (lmax={lmax}, mmax={mmax}), got shape {a.shape}"
        )
    idx = block_index(lmax, m)
    return np.ascontiguousarray(a[..., idx], dtype=np.complex128)


def block_index(lmax, ms) -> np.ndarray:
    """Positions in a full healpy alm array of the block of ``ms`` (as :func:`alm_block` cuts
    it; the positions do not depend on mmax).

    Parameters
    ----------
    lmax : int
        Band limit.
    ms : array of int
        Strictly increasing m values in 0..lmax.

    Returns
    -------
    numpy.ndarray of int64
        index(l, m) for each m in ``ms``, l = m..lmax.

    Examples
    --------
    >>> from skyconv.sht_halves import block_index
    >>> block_index(2, [0, 2]).tolist()
    [0, 1, 2, 5]
    """
    ms = np.asarray(ms, dtype=np.int64)
    if ms.size == 0:
        return np.zeros(0, np.int64)
    starts = ms * (2 * lmax + 1 - ms) // 2 + ms
    lens = lmax + 1 - ms
    offs = np.concatenate(([0], np.cumsum(lens)[:-1]))
    return np.repeat(starts - offs, lens) + np.arange(lens.sum(), dtype=np.int64)


def alm2leg(alm, nside, lmax, ms, rings=None, spin=0, device=None) -> np.ndarray:
    """Legendre stage of the synthesis: alm of a block of m → ring coefficients Δ_m(θ_r).

    Parameters
    ----------
    alm : array of complex, shape (ncomp, nblk) or (nblk,)
        The alm of the m in ``ms``, m by m, l = m..lmax each (see :func:`alm_block`). Spin 0:
        any ncomp (independent transforms); spin 2: ncomp = 2 (E, B).
    nside : int
        HEALPix resolution of the map.
    lmax : int
        Band limit.
    ms : array of int
        The block's m values, strictly increasing, in 0..lmax.
    rings : array of int, optional
        Ring indices 0..4·nside−2, distinct; default all rings north to south.
    spin : {0, 2}
        0: Δ_m = Σ_l a_lm λ_lm(θ); 2: (E, B) → the Fourier coefficients of the (Q, U) rings
        with healpy's sign convention.
    device : str, optional
        "cpu" (or "auto"/None, which run on the CPU in this build).

    Returns
    -------
    numpy.ndarray of complex128, shape (ncomp, len(rings), len(ms))
        Δ_m on each ring (without the component axis when ``alm`` had none).

    Raises
    ------
    ArgumentError
        Bad nside, lmax, ms, rings or spin.
    ShapeError
        ``alm`` does not hold the block of ``ms``, or spin 2 without 2 components.
    DeviceError
        A GPU was requested.

    Examples
    --------
    The halves of a synthesis, the m split in two blocks, equal ``alm2map``:

    >>> import numpy as np
    >>> import skyconv
    >>> from skyconv.sht_halves import alm2leg, alm_block, leg2map
    >>> nside, lmax = 4, 8
    >>> alm = np.random.default_rng(0).standard_normal(skyconv.Alm.getsize(lmax)) + 0j
    >>> leg = np.concatenate(
    ...     [alm2leg(alm_block(alm, lmax, ms), nside, lmax, ms) for ms in ([0, 1, 2], range(3, 9))],
    ...     axis=-1)
    >>> leg.shape
    (15, 9)
    >>> ref = skyconv.alm2map(alm, nside, lmax=lmax, device="cpu")
    >>> bool(np.allclose(leg2map(leg, nside), ref, rtol=0, atol=1e-12))
    True
    """
    nside = _nside(nside)
    lmax = int_arg(lmax, "lmax")
    if lmax < 0:
        raise ArgumentError(f"lmax must be >= 0, got {lmax}")
    m = _ms(ms, lmax)
    r = _rings(rings, nside)
    s2 = _spin(spin)
    a, squeeze = _complex(alm, "alm", 2)
    nblk = int(np.sum(lmax + 1 - m))
    if a.shape[1] != nblk:
        raise ShapeError(
            f"alm must have {nblk} coefficients per component for lmax={lmax} and these ms, "
            f"got {a.shape[1]}"
        )
    if s2 and a.shape[0] != 2:
        raise ShapeError(f"spin=2 needs alm with 2 components (E, B), got {a.shape[0]}")
    out = _core._alm2leg(a, nside, lmax, m, r, s2, _device(device))
    return out[0] if squeeze else out


def leg2map(leg, nside, rings=None, device=None) -> np.ndarray:
    """Ring-FFT stage of the synthesis: Δ_m, m = 0..mmax, on a block of rings → their pixels.

    Parameters
    ----------
    leg : array of complex, or a list of them
        Shape (ncomp, len(rings), mmax + 1) or (len(rings), mmax + 1): Δ_m for every
        m = 0..mmax on each ring. A list holds it in pieces along m (the m
        blocks of :func:`alm2leg`, one after the other: piece k's last axis holds the m after
        those of pieces 0..k−1), read where they lie instead of joined into one copy.
    nside : int
        HEALPix resolution.
    rings : array of int, optional
        Ring indices, distinct; default all rings north to south.
    device : str, optional
        "cpu" (or "auto"/None, which run on the CPU in this build).

    Returns
    -------
    numpy.ndarray of float64, shape (ncomp, npix_block)
        The rings' pixels p_j = Σ_m Δ_m e^{i m φ_j} + c.c. (m > 0), concatenated in the order
        of ``rings`` (:func:`ring_pixels` gives their indices).

    Raises
    ------
    ArgumentError
        Bad nside or rings.
    ShapeError
        ``leg`` does not have one row per ring, or no m.
    DeviceError
        A GPU was requested.

    Examples
    --------
    Δ_0 = 1 on ring 0 (4 pixels) and Δ_1 = 1/2 on ring 1 (8 pixels, cos(φ) there):

    >>> import numpy as np
    >>> from skyconv.sht_halves import leg2map
    >>> leg = np.array([[1, 0], [0, 0.5]], dtype=complex)
    >>> np.round(leg2map(leg, 2, [0, 1]), 3).tolist()[:4]
    [1.0, 1.0, 1.0, 1.0]
    """
    nside = _nside(nside)
    r = _rings(rings, nside)
    gs, squeeze = _pieces(leg, "leg")
    if any(g.shape[1] != r.size for g in gs) or sum(g.shape[2] for g in gs) < 1:
        shapes = [g.shape for g in gs]
        raise ShapeError(f"leg must have shape (ncomp, {r.size}, mmax+1 >= 1), got {shapes}")
    out = _core._leg2map(gs, nside, r, _device(device))
    return out[0] if squeeze else out


def map2leg(maps, nside, mmax, rings=None, device=None, widths=None):
    """Ring-FFT stage of the analysis: a block of rings' pixels → their Fourier coefficients.

    Parameters
    ----------
    maps : array of float, shape (ncomp, npix_block) or (npix_block,)
        The pixels of ``rings``, concatenated in that order (UNSEEN is not special here: zero
        such pixels first, as :func:`skyconv.map2alm` does).
    nside : int
        HEALPix resolution.
    mmax : int
        Highest m to keep.
    rings : array of int, optional
        Ring indices, distinct; default all rings north to south.
    device : str, optional
        "cpu" (or "auto"/None, which run on the CPU in this build).
    widths : sequence of int, optional
        Cut the result along m into pieces of these many m (summing to mmax + 1), written in
        place (the m blocks of a distributed analysis, with no copy to cut them).

    Returns
    -------
    numpy.ndarray of complex128, shape (ncomp, len(rings), mmax + 1), or a list of them
        Σ_j p_j e^{−i m φ_j} per ring (no quadrature weight; :func:`leg2alm` applies it).
        With ``widths``: a list, piece k of shape (ncomp, len(rings), widths[k]).

    Raises
    ------
    ArgumentError
        Bad nside, mmax or rings.
    ShapeError
        ``maps`` does not hold the rings' pixels.
    DeviceError
        A GPU was requested.

    Examples
    --------
    A constant ring of 4 pixels: Σ_j p_j = 4 at m = 0, nothing at m = 1:

    >>> import numpy as np
    >>> from skyconv.sht_halves import map2leg
    >>> np.abs(map2leg(np.ones(4), 2, 1, [0])).round(12).tolist()
    [[4.0, 0.0]]
    """
    nside = _nside(nside)
    mmax = int_arg(mmax, "mmax")
    if mmax < 0:
        raise ArgumentError(f"mmax must be >= 0, got {mmax}")
    r = _rings(rings, nside)
    arr = np.asarray(maps)
    if arr.ndim not in (1, 2):
        raise ShapeError(f"maps must have 1 or 2 dimensions, got shape {arr.shape}")
    squeeze = arr.ndim == 1
    arr = _c(arr[None] if squeeze else arr, np.float64)
    npix = int(ring_lengths(nside, r).sum())
    if arr.shape[1] != npix:
        raise ShapeError(
            f"maps must have the rings' {npix} pixels per component, got {arr.shape[1]}"
        )
    w = [mmax + 1] if widths is None else [int_arg(x, "widths") for x in widths]
    if min(w, default=-1) < 0 or sum(w) != mmax + 1:
        raise ArgumentError(f"widths must be >= 0 and sum to mmax + 1 = {mmax + 1}, got {w}")
    out = _core._map2leg(arr, nside, w, r, _device(device))
    out = [o[0] if squeeze else o for o in out]
    return out[0] if widths is None else out


def leg2alm(leg, nside, lmax, ms, rings=None, spin=0, ring_weights=None, device=None) -> np.ndarray:
    """Legendre stage of the analysis (adjoint of :func:`alm2leg` with the quadrature weights).

    Parameters
    ----------
    leg : array of complex, or a list of them
        Shape (ncomp, len(rings), len(ms)) or (len(rings), len(ms)): the rings' Fourier
        coefficients of the m in ``ms`` (from :func:`map2leg`, unweighted).
        Spin 2: the (Q, U) components. A list holds it in pieces along the rings (piece k: the
        rings of ``rings`` after those of pieces 0..k−1, e.g. one piece per ring block), read
        where they lie instead of joined into one copy.
    nside : int
        HEALPix resolution.
    lmax : int
        Band limit.
    ms : array of int
        The block's m values, strictly increasing, in 0..lmax.
    rings : array of int, optional
        Ring indices, distinct; default all rings north to south.
    spin : {0, 2}
        As :func:`alm2leg` (spin 2: (Q, U) → (E, B)).
    ring_weights : array of float, optional
        Factor per ring (4·nside−1 values, or 2·nside for the northern half and equator) on
        the quadrature weight 4π/npix, as :func:`skyconv.map2alm`; default 1.
    device : str, optional
        "cpu" (or "auto"/None, which run on the CPU in this build).

    Returns
    -------
    numpy.ndarray of complex128, shape (ncomp, nblk)
        a_lm = Σ_r w_r Δ_m(θ_r) λ_lm(θ_r) for the m in ``ms`` (layout of :func:`alm_block`):
        the rings' share of map2alm with iter=0. Sum over a partition of the rings gives it.

    Raises
    ------
    ArgumentError
        Bad nside, lmax, ms, rings, spin or ring_weights.
    ShapeError
        ``leg`` does not match rings and ms, or spin 2 without 2 components.
    DeviceError
        A GPU was requested.

    Examples
    --------
    The halves of map2alm(iter=0), the rings split in two blocks and the results summed:

    >>> import numpy as np
    >>> import skyconv
    >>> from skyconv.sht_halves import leg2alm, map2leg, ring_pixels
    >>> nside, lmax = 4, 8
    >>> m = np.random.default_rng(1).standard_normal(12 * nside**2)
    >>> ms = np.arange(lmax + 1)
    >>> alm = sum(
    ...     leg2alm(map2leg(m[ring_pixels(nside, r)], nside, lmax, r), nside, lmax, ms, r)
    ...     for r in (np.arange(7), np.arange(7, 15)))
    >>> ref = skyconv.map2alm(m, lmax=lmax, iter=0, device="cpu")
    >>> bool(np.allclose(alm, ref, rtol=0, atol=1e-14))
    True
    """
    nside = _nside(nside)
    lmax = int_arg(lmax, "lmax")
    if lmax < 0:
        raise ArgumentError(f"lmax must be >= 0, got {lmax}")
    m = _ms(ms, lmax)
    r = _rings(rings, nside)
    s2 = _spin(spin)
    gs, squeeze = _pieces(leg, "leg")
    if any(g.shape[2] != m.size for g in gs) or sum(g.shape[1] for g in gs) != r.size:
        shapes = [g.shape for g in gs]
        raise ShapeError(f"leg must have shape (ncomp, {r.size}, {m.size}), got {shapes}")
    if s2 and gs[0].shape[0] != 2:
        raise ShapeError(f"spin=2 needs leg with 2 components (Q, U), got {gs[0].shape[0]}")
    w = None
    if ring_weights is not None:
        w = _c(ring_weights, np.float64)
        if w.ndim != 1 or w.size not in (4 * nside - 1, 2 * nside):
            raise ArgumentError(
                f"ring_weights must have 4*nside-1 = {4 * nside - 1} or 2*nside = {2 * nside} "
                f"values, got shape {w.shape}"
            )
        if not np.all(np.isfinite(w)):
            raise ArgumentError("ring_weights must be finite")
    out = _core._leg2alm(gs, nside, lmax, m, r, s2, w, _device(device))
    return out[0] if squeeze else out
