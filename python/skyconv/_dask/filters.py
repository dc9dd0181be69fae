"""``skyconv.filters`` on dask arrays: each block filtered with a halo of the kernel's reach
(:func:`skyconv._dask.halo.overlap_map`), so the result equals the NumPy call on the whole
array, boundary modes included (``wrap`` reads its halo from the far side of the array).

The arguments are checked eagerly, by the NumPy function itself on a one-element array of the
input's dtype (so a bad ``mode`` or ``sigma`` fails at the call, not at ``compute``); the
``device`` string travels to the workers unresolved, so ``"auto"``/``None`` means each worker's
own GPU (one per worker under dask-cuda) or CPU.

``uniform_filter1d`` keeps a running sum along the line. For float32 data the float64 running
sum of float32 values is exact in practice and a halo gives the same bits; for float64 data its
rounding depends on where the line starts, so that axis is made one chunk (rechunked; the
result is rechunked back to the input's chunks).
"""

from __future__ import annotations

import numpy as np

from .._utils.arrays import normalize_axis
from ..exceptions import ArgumentTypeError
from .device import check as check_device
from .device import on_worker
from .halo import check_known_chunks, overlap_map

_WRAP = ("wrap", "grid-wrap")


def check_float(x, name: str = "input") -> None:
    """TypeError (the NumPy call's) unless dask array ``x`` is float32 or float64."""
    if x.dtype.kind != "f" or x.dtype.itemsize not in (4, 8):
        raise ArgumentTypeError(
            f"{name} must be a float32 or float64 array, got dtype {x.dtype} "
            f"(convert with {name}.astype(np.float32) or np.float64)"
        )


def _reach(length: int, origin: int) -> int:
    """Largest distance an output of a correlation with `length` taps and `origin` reads."""
    lo = -(length // 2) - origin
    hi = length - 1 - length // 2 - origin
    return max(-lo, hi, 0)


def reach(kind: str, params: dict) -> int:
    """The reach in elements of one filter pass, from its NumPy-call keywords.

    Parameters
    ----------
    kind : str
        ``"correlate"``, ``"convolve"``, ``"gaussian"`` or ``"uniform"``.
    params : dict
        The pass's keywords (``weights``/``origin``, ``sigma``/``truncate``/``radius`` or
        ``size``/``origin``).

    Returns
    -------
    int
        The halo width the pass needs along its axis.
    """
    if kind == "gaussian":
        radius = params.get("radius")
        if radius is None:
            radius = int(float(params.get("truncate", 4.0)) * float(params["sigma"]) + 0.5)
        return max(int(radius), 0)
    origin = int(params.get("origin", 0))
    if kind == "uniform":
        return _reach(int(params["size"]), origin)
    n = len(np.atleast_1d(params["weights"]))
    if kind == "convolve":  # scipy: reversed weights, origin -origin (-1 more for even n)
        origin = -origin - (0 if n % 2 else 1)
    return _reach(n, origin)


def _tiny(x) -> np.ndarray:
    return np.zeros((1,) * x.ndim, dtype=x.dtype.newbyteorder("="))


def filter1d(fn, kind: str, x, axis, mode, kwargs: dict, device):
    """One 1-D filter of ``skyconv.filters`` on dask array ``x``; lazy, ``x``'s chunks.

    Parameters
    ----------
    fn : callable
        The NumPy function (e.g. ``skyconv.filters.gaussian_filter1d``).
    kind : str
        Its kind for :func:`reach`.
    x : dask.array.Array
        float32 or float64, known chunk sizes.
    axis, mode : int, str
        As in ``fn``.
    kwargs : dict
        ``fn``'s other keywords.
    device : str or None
        Checked here, resolved on the workers (:mod:`skyconv._dask.device`).

    Returns
    -------
    dask.array.Array
        Native-endian, ``x``'s dtype, shape and chunks.
    """
    check_known_chunks(x)
    check_float(x)
    fn(_tiny(x), axis=axis, mode=mode, device="cpu", **kwargs)  # the NumPy call's checks
    dev = check_device(device)
    ax = normalize_axis(axis, x.ndim)
    whole = [ax] if kind == "uniform" and x.dtype.itemsize == 8 else []

    def block(b):
        return fn(b, axis=ax, mode=mode, device=on_worker(f"filters.{kind}", dev), **kwargs)

    return overlap_map(
        x,
        block,
        {ax: reach(kind, kwargs)},
        periodic=[ax] if mode in _WRAP else [],
        whole=whole,
        dtype=x.dtype.newbyteorder("="),
    )


def chain(fn, x, passes, device):
    """``skyconv.filters.chain`` on dask array ``x``: one halo per axis, the sum of the reaches
    of the passes along it; an axis with both ``wrap`` and other modes is made one chunk.

    Parameters
    ----------
    fn : callable
        ``skyconv.filters.chain``.
    x : dask.array.Array
        float32 or float64, known chunk sizes.
    passes : sequence
        ``Gaussian``/``Uniform``/``Correlate`` passes.
    device : str or None
        Checked here, resolved on the workers (:mod:`skyconv._dask.device`).

    Returns
    -------
    dask.array.Array
        ``x``'s dtype, shape and chunks.
    """
    check_known_chunks(x)
    check_float(x)
    passes = list(passes)
    fn(_tiny(x), passes, device="cpu")  # the NumPy call's checks
    dev = check_device(device)
    depth: dict[int, int] = {}
    modes: dict[int, set] = {}
    whole: set[int] = set()
    for p in passes:
        ax = normalize_axis(p.axis, x.ndim)
        if hasattr(p, "sigma"):  # filters.Gaussian (not imported: no import cycle)
            r = reach("gaussian", {"sigma": p.sigma, "truncate": p.truncate, "radius": p.radius})
        elif hasattr(p, "size"):  # filters.Uniform
            r = reach("uniform", {"size": p.size, "origin": p.origin})
            if x.dtype.itemsize == 8:
                whole.add(ax)
        else:
            r = reach("correlate", {"weights": p.weights, "origin": p.origin})
        depth[ax] = depth.get(ax, 0) + r
        modes.setdefault(ax, set()).add(p.mode in _WRAP)
    periodic = {ax for ax, m in modes.items() if m == {True}}
    whole |= {ax for ax, m in modes.items() if len(m) > 1}

    def block(b):
        return fn(b, passes, device=on_worker("filters.chain", dev))

    return overlap_map(
        x, block, depth, periodic=periodic, whole=whole, dtype=x.dtype.newbyteorder("=")
    )


__all__ = ["chain", "check_float", "filter1d", "reach"]
