"""Spherical harmonic transforms on HEALPix RING maps, with healpy's conventions.

``alm2map`` (synthesis) and ``map2alm`` (analysis) for spin-0 maps and, with ``pol=True`` and
three components, the (T, E, B) <-> (I, Q, U) transform with spin 2 for Q and U (healpy's sign
convention). alm use healpy's layout: m-major complex128, index(l, m) = m(2 lmax + 1 - m)/2 + l
(see :class:`Alm`). Maps are in the RING ordering, any unit (the transform is linear); alm carry
the map's unit. Everything is computed in float64: float32 maps are accepted, results are
float64 maps and complex128 alm.

``device``: "auto" (GPU if one works, else CPU), "cpu", "cuda" or "cuda:N"; None means the
``SKYCONV_DEVICE`` environment variable, else "auto".
"""

from __future__ import annotations

import numpy as np

from . import _core, _sht_multi
from ._utils.args import reals
from ._utils.arrays import float_array, int_arg
from ._utils.device import resolve
from ._utils.lazy import is_dask_array
from .exceptions import ArgumentError, ArgumentTypeError, ShapeError
from .healpix import UNSEEN, npix2nside


class Alm:
    """healpy's alm index helpers (m-major layout: index(l, m) = m (2 lmax + 1 - m) / 2 + l), as
    static methods.

    Examples
    --------
    >>> from skyconv import Alm
    >>> Alm.getsize(3), Alm.getlmax(10), Alm.getidx(3, 2, 1)
    (10, 3, 5)
    """

    @staticmethod
    def getsize(lmax, mmax=None):
        """Number of coefficients for ``lmax`` and ``mmax``.

        Parameters
        ----------
        lmax : int
            Band limit, >= 0.
        mmax : int, optional
            Highest m (default, or negative: lmax).

        Returns
        -------
        int

        Raises
        ------
        ValueError
            Not 0 <= mmax <= lmax.

        Examples
        --------
        >>> from skyconv import Alm
        >>> Alm.getsize(3), Alm.getsize(3, 1)
        (10, 7)
        """
        lmax = int_arg(lmax, "lmax")
        mmax = lmax if mmax is None or mmax < 0 else int_arg(mmax, "mmax")
        if lmax < 0 or mmax > lmax:
            raise ArgumentError(f"need 0 <= mmax <= lmax, got lmax={lmax}, mmax={mmax}")
        return mmax * (2 * lmax + 1 - mmax) // 2 + lmax + 1

    @staticmethod
    def getlmax(s, mmax=None):
        """lmax of an alm array of ``s`` coefficients, as healpy.

        Parameters
        ----------
        s : int
            Number of coefficients.
        mmax : int, optional
            Highest m (default: mmax = lmax).

        Returns
        -------
        int
            lmax, or -1 if no lmax fits.

        Examples
        --------
        >>> from skyconv import Alm
        >>> Alm.getlmax(10), Alm.getlmax(7, 1), Alm.getlmax(11)
        (3, 3, -1)
        """
        s = int_arg(s, "s")
        mmax = None if mmax is None else int_arg(mmax, "mmax")
        if mmax is not None and mmax >= 0:
            num = 2 * s + mmax * mmax - mmax - 2
            if num < 0 or num % (2 * mmax + 2):
                return -1
            lmax = num // (2 * mmax + 2)
            return lmax if lmax >= mmax else -1
        x = (-3 + np.sqrt(1 + 8 * s)) / 2
        if x != np.floor(x):
            return -1
        return int(x)

    @staticmethod
    def getidx(lmax, l, m):  # noqa: E741 (healpy's argument name)
        """Index of a_lm: m (2 lmax + 1 - m) / 2 + l.

        Parameters
        ----------
        lmax : int
            Band limit.
        l, m : int or int array
            Multipole and order, 0 <= m <= l <= lmax.

        Returns
        -------
        int or int array

        Examples
        --------
        >>> from skyconv import Alm
        >>> Alm.getidx(3, 0, 0), Alm.getidx(3, 3, 3)
        (0, 9)
        """
        return m * (2 * lmax + 1 - m) // 2 + l

    @staticmethod
    def getlm(lmax, i=None):
        """(l, m) of alm index ``i``.

        Parameters
        ----------
        lmax : int
            Band limit (mmax = lmax).
        i : int or int array, optional
            Indices (default: all).

        Returns
        -------
        (l, m) : int arrays

        Raises
        ------
        ValueError
            For an index outside [0, getsize(lmax)).

        Examples
        --------
        >>> from skyconv import Alm
        >>> ell, m = Alm.getlm(2)
        >>> ell.tolist(), m.tolist()
        ([0, 1, 2, 1, 2, 2], [0, 0, 0, 1, 1, 2])
        """
        size = Alm.getsize(lmax)
        if i is None:
            i = np.arange(size)
        i = np.asarray(i)
        if i.size and (np.min(i) < 0 or np.max(i) >= size):
            raise ArgumentError(f"alm index out of range [0, {size}) for lmax={lmax}")
        m = (np.ceil(((2 * lmax + 1) - np.sqrt((2 * lmax + 1) ** 2 - 8 * (i - lmax))) / 2)).astype(
            int
        )
        ell = i - m * (2 * lmax + 1 - m) // 2
        return (ell, m)


def almxfl(alm, fl, mmax=None, inplace=False):
    """Multiply alm by a function of l: a_lm fl[l] (0 where l >= len(fl)), as healpy.

    Parameters
    ----------
    alm : 1-D complex array
        healpy-layout alm (with ``mmax``, default lmax).
    fl : 1-D array
        The factor per l (e.g. a beam window), from l = 0.
    mmax : int, optional
        Highest m of the layout (default lmax).
    inplace : bool
        Multiply ``alm`` itself (which must then be complex128) and return it.

    Returns
    -------
    complex array
        A new array unless ``inplace``.

    Raises
    ------
    skyconv.ShapeError
        ``alm`` or ``fl`` not 1-D, or not a valid alm size.
    TypeError
        ``inplace`` with an alm that is not complex128.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import almxfl
    >>> almxfl(np.ones(6, dtype=complex), [1.0, 0.5]).real.tolist()
    [1.0, 0.5, 0.0, 0.5, 0.0, 0.0]
    """
    a = np.asarray(alm)
    if a.dtype.kind not in "fciu":
        raise ArgumentTypeError(f"alm must be a complex array, got dtype {a.dtype}")
    if a.ndim != 1:
        raise ShapeError(f"alm must be 1-D, got shape {a.shape}")
    if inplace and a.dtype != np.complex128:
        raise ArgumentTypeError("inplace=True needs a complex128 alm array")
    lmax = Alm.getlmax(a.size, mmax)
    if lmax < 0:
        raise ShapeError(
            f"alm has {a.size} coefficients, not a valid alm size"
            + (f" for mmax={mmax}" if mmax is not None else "")
        )
    mm = lmax if mmax is None or mmax < 0 else int(mmax)
    f = np.asarray(fl)
    if f.dtype.kind not in "fciu":
        raise ArgumentTypeError(f"fl must be a 1-D array of numbers, got dtype {f.dtype}")
    if f.ndim != 1:
        raise ShapeError(f"fl must be 1-D, got shape {f.shape}")
    full = np.zeros(lmax + 1, dtype=np.result_type(f.dtype, np.float64))
    n = min(lmax + 1, f.size)
    full[:n] = f[:n]
    out = a if inplace else np.array(a, dtype=np.result_type(a.dtype, np.complex128), copy=True)
    # One slice per m (a_lm for l = m..lmax are contiguous): no per-coefficient index array,
    # which cost more than the multiply at lmax ~ 6000.
    start = 0
    for m in range(mm + 1):
        n_m = lmax + 1 - m
        out[start : start + n_m] *= full[m:]
        start += n_m
    return out


def _components(x, name: str, kind: str):
    """A list of 1-D arrays from one array, a 2-D array or a sequence; and whether it was one."""
    if isinstance(x, np.ndarray) and x.ndim == 1:
        return [x], True
    if isinstance(x, np.ndarray) and x.ndim == 2:
        return list(x), False
    if isinstance(x, (list, tuple)):
        if len(x) == 0:
            raise ShapeError(f"{name} is empty")
        if all(np.ndim(c) == 0 for c in x):
            return [np.asarray(x)], True
        comps = [np.asarray(c) for c in x]
        for c in comps:
            if c.ndim != 1:
                raise ShapeError(f"each {kind} in {name} must be 1-D, got shape {c.shape}")
        return comps, False
    arr = np.asarray(x)
    if arr.dtype.kind not in "fciu":
        raise ArgumentTypeError(
            f"{name} must be a numeric array or a sequence of arrays, got {type(x).__name__} "
            f"of dtype {arr.dtype}"
        )
    if arr.ndim == 1:
        return [arr], True
    if arr.ndim == 2:
        return list(arr), False
    raise ShapeError(
        f"{name} must be a 1-D array or a sequence of 1-D arrays, got shape {arr.shape}"
    )


def _alm_array(a, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind not in "fciu" or a.dtype.kind == "b":
        raise ArgumentTypeError(f"{name} must be a complex array, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.complex128)


def _check_pol(n: int, pol: bool) -> bool:
    if pol and n not in (1, 3):
        raise ArgumentError(
            f"pol=True needs 1 or 3 components (T or T, E, B / I, Q, U), got {n}; "
            "use pol=False for independent spin-0 transforms"
        )
    return bool(pol) and n == 3


def alm2map(alms, nside, lmax=None, mmax=None, pol=True, device=None, devices=None):
    """Synthesise a HEALPix RING map from alm (healpy's ``alm2map``).

    Parameters
    ----------
    alms : complex array (nalm,), or (ncomp, nalm) / sequence of arrays
        healpy-layout alm (unit: the map's unit). With ``pol=True`` and three components they
        are (T, E, B) and the result is (I, Q, U) with spin-2 Q, U. A dask array gives a dask
        array chunked by ring blocks (the transform split over the Dask workers, or one task per
        component when there are at least as many components as workers:
        ``skyconv._dask.sht``).
    nside : int
        Resolution of the output map (npix = 12 nside^2; any nside >= 1, as healpy's RING).
    lmax, mmax : int, optional
        Band limits; by default inferred from the array size assuming mmax = lmax (healpy). Give
        both when mmax < lmax.
    pol : bool
        Polarised (T, E, B) transform for three components; False: every component spin 0.
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto").
    devices : sequence of int, optional
        GPU numbers to split this one transform over (e.g. ``[0, 1]``): the alm by blocks of m,
        the map by blocks of rings, the Legendre sums moved between them through host memory
        (see ``skyconv._sht_multi.last_stats()``). A number may repeat (``[0, 0]`` runs both
        blocks on GPU 0). ``device`` must then be None or a GPU.

    Returns
    -------
    float64 array
        (npix,) for one component, (ncomp, npix) otherwise. NaN/inf in the alm propagate to
        the map.

    Raises
    ------
    skyconv.ShapeError
        alm of different lengths, or a length that fits no (lmax, mmax).
    ValueError
        An invalid ``nside``, ``mmax`` > ``lmax``, pol=True with 2 components, an unknown
        ``device``; an empty or negative ``devices``.
    skyconv.DeviceError
        ``device="cuda"`` or ``devices`` and no GPU works, or a listed GPU does not exist.

    Examples
    --------
    The monopole a_00 = sqrt(4 pi) is the map 1 everywhere:

    >>> import numpy as np
    >>> import skyconv
    >>> alm = np.zeros(skyconv.Alm.getsize(4), dtype=complex)
    >>> alm[0] = np.sqrt(4 * np.pi)
    >>> m = skyconv.alm2map(alm, 2, device="cpu")
    >>> m.shape, bool(np.allclose(m, 1.0))
    ((48,), True)
    """
    devs = _sht_multi.devices_arg(devices, device)
    if is_dask_array(alms):  # distributed transform: skyconv._dask.sht
        if devs is not None:
            raise ArgumentError(
                "devices= splits a numpy transform over GPUs; dask arrays are distributed "
                "by their scheduler (give devices=None)"
            )
        from ._dask import sht as _dsht

        return _dsht.alm2map(alms, nside, lmax, mmax, pol, device)
    comps, lonely = _components(alms, "alms", "alm")
    comps = [_alm_array(c, "alms") for c in comps]
    nside = int_arg(nside, "nside")
    if nside < 1 or nside > 2**29:
        raise ArgumentError(f"nside must be in 1..2**29, got {nside}")
    size = comps[0].size
    if any(c.size != size for c in comps):
        raise ShapeError("all alm arrays must have the same length")
    if mmax is not None:
        mmax = int_arg(mmax, "mmax")
        if mmax < 0:
            mmax = None
    if lmax is not None:
        lmax = int_arg(lmax, "lmax")
        if lmax < 0:
            lmax = None
    if lmax is None:
        lmax = Alm.getlmax(size, mmax)
        if lmax < 0:
            raise ShapeError(
                f"alm has {size} coefficients, which is not a valid alm size"
                + (
                    f" for mmax={mmax}"
                    if mmax is not None
                    else " (give lmax and mmax when mmax < lmax)"
                )
            )
    if mmax is None:
        mmax = lmax
    if mmax > lmax:
        raise ArgumentError(f"mmax ({mmax}) must not exceed lmax ({lmax})")
    want = Alm.getsize(lmax, mmax)
    if size != want:
        raise ShapeError(f"alm has {size} coefficients but lmax={lmax}, mmax={mmax} needs {want}")
    p = _check_pol(len(comps), pol)
    if devs is not None:
        out = _sht_multi.alm2map(comps, nside, lmax, mmax, p, devs)
    else:
        out = _core._alm2map(comps, nside, lmax, mmax, p, resolve(device).core)
    return out[0] if lonely else out


#: The old private name (compat.healpy uses it): the one rule is ``healpix.npix2nside``.
_npix2nside = npix2nside


def map2alm(
    maps, lmax=None, mmax=None, iter=3, pol=True, ring_weights=None, device=None, devices=None
):
    """alm of HEALPix RING maps by quadrature with Jacobi iterations (healpy's ``map2alm``).

    Parameters
    ----------
    maps : float32/float64 array (npix,), or (ncomp, npix) / sequence of arrays
        RING-ordered maps (any unit). With ``pol=True`` and three maps they are (I, Q, U) and
        the result is (T, E, B). UNSEEN pixels (-1.6375e30) are treated as 0 (on a copy).
        A dask array gives dask alm chunked by blocks of m (see ``alm2map``); each Jacobi
        iteration is then a distributed synthesis and analysis.
    lmax : int, optional
        Default 3*nside - 1.
    mmax : int, optional
        Default lmax.
    iter : int
        Jacobi iterations: alm = A(m); repeat iter times: alm += A(m - S(alm)), where A is the
        quadrature (weights 4 pi / npix per pixel) and S the synthesis. Default 3, as healpy.
    pol : bool
        Polarised transform for three maps; False: every map spin 0.
    ring_weights : float array, optional
        A factor per ring multiplying the pixel weight 4 pi / npix: 4*nside - 1 values (north
        to south) or 2*nside (north pole to equator, mirrored). For healpy's ring weight files
        (which store w - 1) pass ``1 + w``.
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto").
    devices : sequence of int, optional
        GPU numbers to split this one transform over, Jacobi iterations included (see
        :func:`alm2map`). ``device`` must then be None or a GPU.

    Returns
    -------
    complex128 array
        alm (nalm,) for one map, (ncomp, nalm) otherwise.

    Raises
    ------
    skyconv.ShapeError
        Maps of different lengths, or a length that is not 12 nside^2.
    TypeError
        Complex or non-float maps.
    ValueError
        A negative ``lmax``/``iter``, ``mmax`` outside 0..lmax, an unknown ``device``.
    skyconv.DeviceError
        ``device="cuda"`` and no GPU works.

    Examples
    --------
    Analysis undoes synthesis for a band-limited map:

    >>> import numpy as np
    >>> import skyconv
    >>> rng = np.random.default_rng(0)
    >>> lmax = 8
    >>> alm = rng.standard_normal(skyconv.Alm.getsize(lmax)) + 0j
    >>> m = skyconv.alm2map(alm, 8, lmax=lmax, device="cpu")
    >>> back = skyconv.map2alm(m, lmax=lmax, iter=3, device="cpu")
    >>> bool(np.allclose(back, alm, atol=1e-6))
    True
    """
    devs = _sht_multi.devices_arg(devices, device)
    if is_dask_array(maps):  # distributed transform: skyconv._dask.sht
        if devs is not None:
            raise ArgumentError(
                "devices= splits a numpy transform over GPUs; dask arrays are distributed "
                "by their scheduler (give devices=None)"
            )
        from ._dask import sht as _dsht

        return _dsht.map2alm(maps, lmax, mmax, iter, pol, ring_weights, device)
    comps, lonely = _components(maps, "maps", "map")
    arrs = []
    for c in comps:
        if np.iscomplexobj(c):
            raise ArgumentTypeError("maps must be real (float32 or float64), got a complex array")
        # No copy here: UNSEEN pixels are zeroed by the engine (on its own float64 copy).
        arrs.append(float_array(c, "maps"))
    if len({a.dtype for a in arrs}) > 1:
        arrs = [a.astype(np.float64) for a in arrs]
    npix = arrs[0].size
    if any(a.size != npix for a in arrs):
        raise ShapeError("all maps must have the same number of pixels")
    nside = npix2nside(npix)
    lmax = 3 * nside - 1 if lmax is None else int_arg(lmax, "lmax")
    if lmax < 0:
        raise ArgumentError(f"lmax must be >= 0, got {lmax}")
    mmax = lmax if mmax is None else int_arg(mmax, "mmax")
    if mmax < 0 or mmax > lmax:
        raise ArgumentError(f"mmax must be in 0..lmax={lmax}, got {mmax}")
    iter = int_arg(iter, "iter")
    if iter < 0:
        raise ArgumentError(f"iter must be >= 0, got {iter}")
    w = None
    if ring_weights is not None:
        w = np.ascontiguousarray(reals(ring_weights, "ring_weights"))
        if w.ndim != 1:
            raise ShapeError(f"ring_weights must be 1-D, got shape {w.shape}")
    p = _check_pol(len(arrs), pol)
    if devs is not None:
        out = _sht_multi.map2alm(arrs, nside, lmax, mmax, iter, p, w, devs)
    else:
        out = _core._map2alm(arrs, nside, lmax, mmax, iter, p, w, resolve(device).core)
    return out[0] if lonely else out


from .sht_halves import alm2leg, leg2alm, leg2map, map2leg  # noqa: E402 (re-export)

__all__ = [
    "UNSEEN",
    "Alm",
    "alm2map",
    "almxfl",
    "map2alm",
    "alm2leg",
    "leg2map",
    "map2leg",
    "leg2alm",
]
