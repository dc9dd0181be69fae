"""Exact order statistics of a dask array's finite values: the median (and so the MADFM) over
the whole array, equal to ``np.median`` of the gathered finite values, with no value leaving
its worker but those near the answer.

Each value becomes an order-preserving 64-bit key (its float64 bit pattern, the sign bit
flipped for positives and all bits for negatives). Radix selection: one pass over the array
counts the keys in 65536 bins of the next 16 key bits (block histograms added by a tree), which
fixes the bin of the wanted rank; when at most ``GATHER`` values share the ranks' key prefix
they are gathered and the rank read exactly (``np.partition``). At most four passes (64 bits),
usually one or two; each pass reads the array once.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import InternalError

#: Values gathered to the client at most (8 MB of float64).
GATHER = 1 << 20
_BITS = 16
_BINS = 1 << _BITS


def _keys(block, fn=None):
    """Order-preserving uint64 keys and float64 values of the finite values of
    ``fn(block)``."""
    v = np.asarray(block if fn is None else fn(block), dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    bits = v.view(np.uint64)
    neg = (bits >> np.uint64(63)).astype(bool)
    keys = np.where(neg, ~bits, bits | np.uint64(1 << 63))
    return keys, v


def _match(keys, prefix, shift):
    if shift >= 64:
        return np.ones(keys.size, dtype=bool)
    return (keys >> np.uint64(shift)) == np.uint64(prefix)


def _hist(block, fn, prefix, shift):
    keys, _ = _keys(block, fn)
    keys = keys[_match(keys, prefix, shift)]
    b = (keys >> np.uint64(shift - _BITS)) & np.uint64(_BINS - 1)
    return np.bincount(b.astype(np.intp), minlength=_BINS)


def _pick(block, fn, prefix, shift):
    keys, v = _keys(block, fn)
    return v[_match(keys, prefix, shift)]


def _count(block, fn):
    return _keys(block, fn)[0].size


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


def finite_count(x, fn=None) -> int:
    """Number of finite values of ``fn(x)`` (``fn`` applied block-wise, elementwise)."""
    import dask

    blocks = x.to_delayed().ravel()
    parts = [dask.delayed(_count, pure=True)(b, fn) for b in blocks]
    return int(dask.compute(_tree_sum(dask.delayed, parts))[0])


def ranks(x, wanted, fn=None, count=None) -> list[float]:
    """The values of 0-based ranks ``wanted`` among the finite values of ``fn(x)`` in ascending
    order (``fn``: an elementwise NumPy function applied to each block, e.g. ``|b - m|``).

    Parameters
    ----------
    x : dask.array.Array
        Any shape, float dtype.
    wanted : sequence of int
        Ranks in ``[0, count)``.
    fn : callable, optional
        Elementwise map applied to each block first.
    count : int, optional
        The number of finite values, if known.

    Returns
    -------
    list of float
        One value per rank, exact (the float64 values of the array).
    """
    import dask

    blocks = x.to_delayed().ravel()
    if count is None:
        count = finite_count(x, fn)
    out = {}

    def solve(group, prefix, shift, below, n):
        # ``group``: ranks whose keys start with ``prefix`` (the top 64 - shift bits), ``below``
        # values lie under that prefix, ``n`` share it.
        if shift <= 0:  # 64 bits fixed: every value here is the same
            bits = np.uint64(prefix)
            bits = bits ^ np.uint64(1 << 63) if bits >> np.uint64(63) else ~bits
            for k in group:
                out[k] = float(np.array([bits], dtype=np.uint64).view(np.float64)[0])
            return
        if n <= GATHER:
            parts = [dask.delayed(_pick, pure=True)(b, fn, prefix, shift) for b in blocks]
            vals = np.concatenate(dask.compute(*parts)) if parts else np.zeros(0)
            local = sorted({k - below for k in group})
            part = np.partition(vals, local)
            for k in group:
                out[k] = float(part[k - below])
            return
        parts = [dask.delayed(_hist, pure=True)(b, fn, prefix, shift) for b in blocks]
        hist = dask.compute(_tree_sum(dask.delayed, parts))[0]
        edges = np.concatenate([[0], np.cumsum(hist)]) + below
        bins: dict[int, list[int]] = {}
        for k in group:
            j = int(np.searchsorted(edges, k, side="right")) - 1
            bins.setdefault(j, []).append(k)
        for j, ks in bins.items():
            solve(ks, (prefix << _BITS) | j, shift - _BITS, int(edges[j]), int(hist[j]))

    wanted = [int(k) for k in wanted]
    if any(k < 0 or k >= count for k in wanted):
        raise InternalError(f"ranks {wanted} out of range for {count} finite values")
    if wanted:
        solve(sorted(set(wanted)), 0, 64, 0, count)
    return [out[k] for k in wanted]


def median(x, fn=None, count=None) -> float:
    """The median of the finite values of ``fn(x)`` (the mean of the two middle values for an
    even count; NaN for none), exact."""
    if count is None:
        count = finite_count(x, fn)
    if count == 0:
        return float("nan")
    lo, hi = (count - 1) // 2, count // 2
    a, b = ranks(x, [lo, hi], fn, count)
    return b if count % 2 else 0.5 * (a + b)


__all__ = ["GATHER", "finite_count", "median", "ranks"]
