"""Chunk overlaps (halos) for block-wise filters on dask arrays, with the single-machine answer.

:func:`overlap_map` runs ``fn`` (a NumPy → NumPy function of the same shape, e.g. one
``skyconv.filters`` call) on every block of a dask array, each block extended by ``depth``
elements of its neighbours along the filtered axes, and trims the result back. The rules that
make the result equal the single call on the whole array:

- ``depth[axis]`` is the kernel's true reach along that axis (the largest distance an output
  looks away from its own position, summed over the passes along the axis). Interior block
  edges then never reach the trimmed result.
- At the array's true edges the halo is empty (dask ``boundary="none"``), so each edge block's
  own call applies the single-machine boundary rule (reflect, nearest, mirror, constant+cval)
  exactly where the whole array ends, not at a chunk edge.
- Axes in ``periodic`` (mode ``wrap``) take their halo from the far side of the array (dask
  ``boundary="periodic"``) — what ``wrap`` reads there. If the reach exceeds the axis length
  (a wrap that wraps more than once) the axis is made one chunk instead.
- Axes in ``whole`` (an algorithm that must see the whole line, e.g. a running sum whose
  rounding depends on where the line starts) are made one chunk.
- Blocks thinner than the halo are merged with their neighbours first (a halo can only come
  from the adjacent block), and the result is rechunked back: it has the input's chunks.
- An axis that is a single chunk needs no halo (``fn`` sees the whole line).

Dask arrays with unknown chunk sizes (NaN, e.g. after boolean indexing) are refused with
:class:`skyconv.ArgumentError` (``x.compute_chunk_sizes()`` fixes them).
"""

from __future__ import annotations

import math

import numpy as np

from .._utils.lazy import dask_array
from ..exceptions import ArgumentError


def check_known_chunks(x, name: str = "input") -> None:
    """Raise :class:`skyconv.ArgumentError` if a chunk size of dask array ``x`` is unknown.

    Parameters
    ----------
    x : dask.array.Array
        The array to check.
    name : str
        The argument's name, for the message.

    Raises
    ------
    skyconv.ArgumentError
        Some chunk size is NaN (unknown until computed).
    """
    if any(math.isnan(c) for cs in x.chunks for c in cs):
        raise ArgumentError(
            f"{name} is a dask array with unknown chunk sizes (shape {x.shape}); call "
            f"{name}.compute_chunk_sizes() first"
        )


def merge_thin(chunks: tuple[int, ...], depth: int) -> tuple[int, ...]:
    """Chunk sizes along one axis with every chunk >= ``depth`` (neighbours merged, in order).

    Parameters
    ----------
    chunks : tuple of int
        The chunk sizes along the axis.
    depth : int
        The halo width in elements.

    Returns
    -------
    tuple of int
        The same total, chunks merged left to right until each holds at least ``depth``
        elements (a short last chunk joins the one before it); unchanged if already so.
    """
    if len(chunks) <= 1 or min(chunks) >= depth:
        return tuple(chunks)
    out: list[int] = []
    acc = 0
    for c in chunks:
        acc += c
        if acc >= depth:
            out.append(acc)
            acc = 0
    if acc:
        if out:
            out[-1] += acc
        else:
            out.append(acc)
    return tuple(out)


def overlap_map(x, fn, depth, *, periodic=(), whole=(), dtype=None):
    """Apply ``fn`` block by block with halos, equal to ``fn`` on the whole array.

    Parameters
    ----------
    x : dask.array.Array
        The input, known chunk sizes.
    fn : callable
        ``fn(block: numpy.ndarray) -> numpy.ndarray`` of the block's shape. It must apply the
        single-machine boundary rule itself (it does at the array's true edges, which are the
        only block edges it sees unpadded).
    depth : dict of int to int
        Halo width per axis in elements: the kernel's reach along that axis (0 or missing:
        no halo).
    periodic : iterable of int
        Axes whose boundary is ``wrap``: the halo at the true edges comes from the far side.
    whole : iterable of int
        Axes that ``fn`` must see whole (made one chunk).
    dtype : numpy dtype, optional
        The output's dtype (default: ``x.dtype``).

    Returns
    -------
    dask.array.Array
        Lazy, of ``x``'s shape and chunks.

    Raises
    ------
    skyconv.ArgumentError
        ``x`` has unknown chunk sizes, or a negative depth.
    """
    da = dask_array()
    check_known_chunks(x)
    ndim = x.ndim
    dtype = np.dtype(x.dtype if dtype is None else dtype)
    periodic = {int(a) % ndim for a in periodic}
    whole = {int(a) % ndim for a in whole}
    d: dict[int, int] = {}
    for ax, v in dict(depth).items():
        v = int(v)
        if v < 0:
            raise ArgumentError(f"depth must be >= 0, got {v} for axis {ax}")
        if v:
            d[int(ax) % ndim] = v
    chunks = list(x.chunks)
    for ax in range(ndim):
        n = x.shape[ax]
        if ax in whole or (ax in periodic and d.get(ax, 0) > n):
            chunks[ax] = (n,) if n else x.chunks[ax]
        elif ax in d:
            chunks[ax] = merge_thin(x.chunks[ax], d[ax])
    chunks = tuple(chunks)
    y = x.rechunk(chunks) if chunks != x.chunks else x
    # A single-chunk axis needs no halo: fn sees the whole line with its true edges.
    d = {ax: v for ax, v in d.items() if len(y.chunks[ax]) > 1}
    meta = np.empty((0,) * ndim, dtype=dtype)
    if not d:
        out = y.map_blocks(fn, dtype=dtype, meta=meta)
    else:
        boundary = {ax: ("periodic" if ax in periodic else "none") for ax in d}
        out = da.map_overlap(
            fn,
            y,
            depth=d,
            boundary=boundary,
            trim=True,
            dtype=dtype,
            meta=meta,
            allow_rechunk=False,
        )
    if out.chunks != x.chunks:
        out = out.rechunk(x.chunks)
    return out


__all__ = ["check_known_chunks", "merge_thin", "overlap_map"]
