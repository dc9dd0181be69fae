"""Exact order statistics of a dask array's finite values: the median (and so the MADFM) over
the whole array, equal to ``np.median`` of the gathered finite values, with no value leaving
its worker but those near the answer.

Each value (or its distance ``|v - center|`` from a centre) becomes an order-preserving 64-bit
key (its float64 bit pattern, the sign bit set for positives and all bits flipped for
negatives). Radix selection: one pass over the array counts the keys in 65536 bins of the next
16 key bits (block counts by the core's ``_key_counts``, one parallel scan of the block, added
by a tree), which fixes the bin of the wanted rank; when at most ``GATHER`` values share the
ranks' key prefix they are gathered (``_key_values``) and the rank read exactly
(``np.partition``). At most four passes (64 bits), usually two; each pass reads the array once.
The first pass over all values (:func:`top_counts`) can run in the same graph as the step that
makes the array (the à trous loop persists both at once); its sum is the finite count.

The count and gather tasks carry a high Dask priority, so that a selection's round trip does
not wait behind work queued on the workers meanwhile.
"""

from __future__ import annotations

import numpy as np

from .. import _core
from ..exceptions import InternalError

#: Values gathered to the client at most (8 MB of float64).
GATHER = 1 << 20
#: Dask priority of the selection's tasks (above the default 0 of the work around them).
PRIORITY = 100
_BITS = 16
_BINS = 1 << _BITS
#: Scheduler round trips made so far (``TRIPS[0]``; a profiling counter).
TRIPS = [0]


def _block(block):
    b = np.asarray(block)
    if b.dtype not in (np.float32, np.float64):
        b = b.astype(np.float64)
    return np.require(b, requirements="CA")  # received blocks may be unaligned


def block_counts(block, prefix=0, shift=64, center=None):
    """Counts (uint64, 65536) of the finite values of ``block`` (or ``|block - center|``) whose
    key starts with ``prefix`` (the key's top ``64 - shift`` bits), by the next 16 key bits."""
    return _core._key_counts(_block(block), prefix, shift, _BITS, center)


def _values(block, prefix, shift, center):
    return _core._key_values(_block(block), prefix, shift, center)


def _sum(parts):
    return sum(parts[1:], parts[0])


def _tree_sum(delayed, leaves, split_every=16):
    level = list(leaves)
    while len(level) > 1:
        level = [
            delayed(_sum, pure=True)(level[i : i + split_every])
            for i in range(0, len(level), split_every)
        ]
    return level[0]


def _annotated():
    import dask

    return dask.annotate(priority=PRIORITY)


def counts(x, prefix=0, shift=64, center=None):
    """The counts of :func:`block_counts` over the whole of ``x``, as one ``dask.delayed``
    (a tree of block counts)."""
    import dask

    with _annotated():
        parts = [
            dask.delayed(block_counts, pure=True)(b, prefix, shift, center)
            for b in x.to_delayed().ravel()
        ]
        return _tree_sum(dask.delayed, parts)


def top_counts(x, center=None):
    """The first pass of a selection over ``x`` (all values, top 16 key bits), lazy: compute
    it (or persist it with the step that makes ``x``) and pass it to :func:`ranks` as
    ``top``; its sum is the number of finite values."""
    return counts(x, 0, 64, center)


def finite_count(x) -> int:
    """Number of finite values of ``x``."""
    import dask

    TRIPS[0] += 1
    return int(dask.compute(top_counts(x))[0].sum())


def ranks(x, wanted, center=None, count=None, top=None) -> list[float]:
    """The values of 0-based ranks ``wanted`` among the finite values of ``x`` (or of
    ``|x - center|``) in ascending order.

    Parameters
    ----------
    x : dask.array.Array
        Any shape, float dtype.
    wanted : sequence of int
        Ranks in ``[0, count)``.
    center : float, optional
        Rank the distances ``|v - center|`` (float64) instead of the values.
    count : int, optional
        The number of finite values, if known.
    top : numpy.ndarray, optional
        The computed :func:`top_counts` of ``x`` (same ``center``): saves the first pass.

    Returns
    -------
    list of float
        One value per rank, exact (the float64 values of the array).

    Raises
    ------
    skyconv.InternalError
        A rank outside ``[0, count)``.
    """
    import dask

    blocks = x.to_delayed().ravel()
    if top is not None:
        count = int(np.sum(top))
    elif count is None:
        top = np.asarray(dask.compute(top_counts(x, center))[0])
        TRIPS[0] += 1
        count = int(top.sum())
    wanted = [int(k) for k in wanted]
    if any(k < 0 or k >= count for k in wanted):
        raise InternalError(f"ranks {wanted} out of range for {count} finite values")
    out = {}
    # A work list, not a recursive closure: a nested function that calls itself is a
    # reference cycle holding ``x`` (and so its futures: the array's memory on the workers)
    # until the garbage collector runs.
    # Each item: ranks whose keys start with ``prefix`` (the top 64 - shift bits), ``below``
    # values under that prefix, ``n`` sharing it, its counts by the next bits if known.
    todo = [(sorted(set(wanted)), 0, 64, 0, count, None if top is None else np.asarray(top))]
    while wanted and todo:
        group, prefix, shift, below, n, hist = todo.pop()
        if shift <= 0:  # 64 bits fixed: every value here is the same
            for k in group:
                out[k] = float(_key_value(prefix))
            continue
        if hist is None and n <= GATHER:
            with _annotated():
                parts = [dask.delayed(_values, pure=True)(b, prefix, shift, center) for b in blocks]
            TRIPS[0] += 1
            vals = np.concatenate(dask.compute(*parts)) if parts else np.zeros(0)
            local = sorted({k - below for k in group})
            part = np.partition(vals, local)
            for k in group:
                out[k] = float(part[k - below])
            continue
        if hist is None:
            TRIPS[0] += 1
            hist = np.asarray(dask.compute(counts(x, prefix, shift, center))[0])
        edges = np.concatenate([[0], np.cumsum(hist)]) + below
        bins: dict[int, list[int]] = {}
        for k in group:
            j = int(np.searchsorted(edges, k, side="right")) - 1
            bins.setdefault(j, []).append(k)
        for j, ks in bins.items():
            todo.append(
                (ks, (prefix << _BITS) | j, shift - _BITS, int(edges[j]), int(hist[j]), None)
            )
    return [out[k] for k in wanted]


def _key_value(key: int) -> float:
    """The float64 whose order-preserving key is ``key``."""
    bits = np.uint64(key)
    bits = bits ^ np.uint64(1 << 63) if bits >> np.uint64(63) else ~bits
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


def median(x, center=None, count=None, top=None) -> float:
    """The median of the finite values of ``x`` (or of ``|x - center|``; the mean of the two
    middle values for an even count; NaN for none), exact. ``top``: as for :func:`ranks`."""
    if top is not None:
        count = int(np.sum(top))
    elif count is None:
        import dask

        TRIPS[0] += 1
        top = np.asarray(dask.compute(top_counts(x, center))[0])
        count = int(top.sum())
    if count == 0:
        return float("nan")
    lo, hi = (count - 1) // 2, count // 2
    a, b = ranks(x, [lo, hi], center, count, top)
    return b if count % 2 else 0.5 * (a + b)


__all__ = ["GATHER", "block_counts", "counts", "finite_count", "median", "ranks", "top_counts"]
