"""``skyconv.grid`` on dask arrays: per sample-chunk partial sums, a tree reduction, one division.

The samples (``lons``, ``lats``, ``data``, ``weights``) are chunked along the sample axis (and
``data`` optionally along its channels). For every sample chunk and channel block one task adds
that chunk's sums ``sum K w v`` and ``sum K w`` into accumulators that cover only the target
pixels the chunk can reach: the pixels within ``sphere_radius`` of the smallest cap around the
chunk's samples (a superset of the pixels the core's exact distance test keeps). The core does
the sums (``_grid_accumulate``, the same entry point ``Gridder`` uses), in float64. The partials
of one channel block are added by a tree (``split_every`` at a time, sparse pixel sets merged by
union), and the root divides once (``_grid_finish``). The results are dask arrays chunked by
the channel blocks of ``data`` (the whole target in each block).

The sums are the single call's sums in a different grouping, so the cube equals
``skyconv.grid`` on NumPy arrays to rounding (≈1e-15 relative in float64 where the weight sum
does not cancel).

The device is resolved in each task, on its worker: under dask-cuda's ``LocalCUDACluster``
every worker sees one GPU (``CUDA_VISIBLE_DEVICES``), and ``"cuda"`` there is that GPU.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _core
from .._utils.lazy import dask_array, is_dask_array
from ..exceptions import ArgumentError, ArgumentTypeError, ShapeError
from .device import check as check_device
from .device import on_worker

#: Partials added per node of the reduction tree.
SPLIT_EVERY = 8
#: Slack (radians) on the reach test, far above the rounding of the cap and distance formulae.
_MARGIN = 1e-9


def _unit(lon_deg: np.ndarray, lat_deg: np.ndarray) -> np.ndarray:
    """Unit vectors (n, 3) of positions in degrees (NaN rows for NaN positions)."""
    lon = np.radians(lon_deg)
    lat = np.radians(lat_deg)
    cb = np.cos(lat)
    return np.stack([cb * np.cos(lon), cb * np.sin(lon), np.sin(lat)], axis=-1)


def _c(x, dtype):
    """``x`` C-contiguous and aligned (arrays a worker receives may sit unaligned in the
    message buffer; the core takes only aligned C-contiguous arrays)."""
    return np.require(x, dtype=dtype, requirements="CA")


def _reached(slon, slat, tvec, radius_deg):
    """Indices (sorted int64) of the target pixels within ``radius_deg`` of some sample: every
    pixel within the sample cap's radius plus ``radius_deg`` of the cap's centre (a superset)."""
    ok = np.isfinite(slon) & np.isfinite(slat) & (np.abs(slat) <= 90.0)
    if not ok.any():
        return np.zeros(0, dtype=np.int64)
    v = _unit(slon[ok], slat[ok])
    c = v.sum(axis=0)
    norm = math.sqrt(float(c @ c))
    reach = math.pi  # a chunk spread over the sky reaches everything
    if norm > 1e-6 * v.shape[0]:
        c /= norm
        cap = math.acos(min(1.0, max(-1.0, float((v @ c).min()))))
        reach = cap + math.radians(radius_deg) + _MARGIN
    with np.errstate(invalid="ignore"):
        if reach >= math.pi:
            hit = np.isfinite(tvec[:, 0])
        else:
            hit = tvec @ c >= math.cos(reach)  # NaN targets compare False
    return np.flatnonzero(hit)


def _partial(slon, slat, data, weights, tlon, tlat, tvec, kernel, params, radius, radius_deg,
             device, nchan):  # fmt: skip
    """(pixel indices, unweighted sums, weight sums) of one sample chunk and channel block,
    float64, covering only the pixels the chunk reaches."""
    slon = _c(slon, np.float64)
    slat = _c(slat, np.float64)
    n = slon.size
    if slat.size != n or data.shape[0] != n or (weights is not None and weights.shape[0] != n):
        raise ShapeError(
            "lons, lats, data and weights chunks differ in length along the sample axis "
            f"({n}, {slat.size}, {data.shape[0]}"
            f"{'' if weights is None else ', ' + str(weights.shape[0])}); give them the same "
            "chunks (compute_chunk_sizes() on arrays of unknown chunk sizes)"
        )
    idx = _reached(slon, slat, tvec, radius_deg)
    u = np.zeros((nchan, idx.size))
    w = np.zeros_like(u)
    if idx.size and n:
        if weights is not None:
            common = np.result_type(data.dtype, weights.dtype)
            data = data.astype(common, copy=False)
            weights = _c(weights, common)
        _core._grid_accumulate(
            slon, slat, _c(data, data.dtype), weights, _c(tlon[idx], np.float64),
            _c(tlat[idx], np.float64),
            kernel, params, radius, u, w, on_worker("grid.partial", device),
        )  # fmt: skip
    return idx, u, w


def _combine(parts):
    """One node of the tree: add sparse partials (None: nothing reached) over the union of
    their pixel sets, each partial's sums added at its pixels."""
    parts = [p for p in parts if p is not None and p[0].size]
    if len(parts) <= 1:
        return parts[0] if parts else None
    idx = np.unique(np.concatenate([p[0] for p in parts]))
    u = np.zeros((parts[0][1].shape[0], idx.size))
    w = np.zeros_like(u)
    for pidx, pu, pw in parts:
        pos = np.searchsorted(idx, pidx)
        u[:, pos] += pu
        w[:, pos] += pw
    return idx, u, w


def _finish(part, nchan, npix, dtype):
    """The root: dense (cube, weights, unweighted) of one channel block, cast to ``dtype``."""
    u = np.zeros((nchan, npix))
    w = np.zeros_like(u)
    if part is not None:
        idx, pu, pw = part
        u[:, idx] = pu
        w[:, idx] = pw
    cube = _core._grid_finish(u, w).astype(dtype, copy=False)
    return cube, w.astype(dtype, copy=False), u.astype(dtype, copy=False)


def _tree(delayed, leaves, split_every):
    """Reduce a list of delayed partials by groups of ``split_every`` until one is left."""
    level = list(leaves)
    while len(level) > 1:
        level = [
            delayed(_combine, pure=True)(level[i : i + split_every])
            for i in range(0, len(level), split_every)
        ]
    return level[0] if level else None


def _as_dask(da, x, name, chunks0):
    """``x`` as a dask array with sample-axis chunks ``chunks0`` (NumPy input wrapped)."""
    if x is None:
        return None
    if not is_dask_array(x):
        x = np.asarray(x)
        if any(math.isnan(c) for c in chunks0):
            raise ArgumentError(
                f"{name} is a NumPy array but the other samples are dask arrays of unknown "
                "chunk sizes: call compute_chunk_sizes() on them first"
            )
        if x.ndim < 1 or x.shape[0] != sum(chunks0):
            raise ShapeError(
                f"{name} has shape {x.shape}, the samples' dask arrays have {sum(chunks0)} samples"
            )
        return da.from_array(x, chunks=(chunks0,) + x.shape[1:])
    if x.dtype.kind not in "fiu":
        raise ArgumentTypeError(f"{name} must be a real-valued array, got dtype {x.dtype}")
    if x.chunks[0] == chunks0:
        return x
    if any(math.isnan(c) for c in x.chunks[0] + chunks0):
        if x.numblocks[0] != len(chunks0):
            raise ArgumentError(
                f"{name} has {x.numblocks[0]} chunks along the sample axis, lons has "
                f"{len(chunks0)}, and their sizes are unknown: call compute_chunk_sizes() first"
            )
        return x  # same block count: lengths are checked in each task
    return x.rechunk({0: chunks0})


def grid(lons, lats, data, tgt, kernel, params, radius, weights, dt, device,
         split_every=SPLIT_EVERY):  # fmt: skip
    """``skyconv.grid`` for samples given as dask arrays (any of ``lons``, ``lats``, ``data``,
    ``weights``), the target resolved (``grid._Target``), the kernel checked
    (``grid.kernel_args``) and ``dt`` the output dtype. Returns (cube, weights, unweighted),
    dask arrays chunked by the channel blocks of ``data``."""
    import dask

    da = dask_array()
    radius_deg = _core._grid_check_kernel(kernel, params, radius)
    dev = check_device(device)

    ref = next(x for x in (lons, data, lats, weights) if is_dask_array(x))
    chunks0 = ref.chunks[0]
    lons = _as_dask(da, lons, "lons", chunks0)
    lats = _as_dask(da, lats, "lats", chunks0)
    data = _as_dask(da, data, "data", chunks0)
    weights = _as_dask(da, weights, "weights", chunks0)
    for name, x in (("lons", lons), ("lats", lats)):
        if x.ndim != 1:
            raise ShapeError(f"{name} must be 1-D, got shape {x.shape}")
    if data.dtype not in (np.float32, np.float64):
        raise ArgumentTypeError(f"data must be float32 or float64, got dtype {data.dtype}")
    if data.ndim < 1:
        raise ShapeError("data must have a sample axis")
    chan_shape = data.shape[1:]
    if any(math.isnan(s) for s in chan_shape):
        raise ArgumentError("data's channel axes must have known sizes")
    nchan = int(np.prod(chan_shape, dtype=np.int64))
    n = lons.shape[0]
    known = not any(math.isnan(s) for s in (n, lats.shape[0], data.shape[0]))
    if known and not (lats.shape[0] == n == data.shape[0]):
        raise ShapeError(
            f"lons, lats and data differ in length ({n}, {lats.shape[0]}, {data.shape[0]})"
        )
    if data.ndim > 2:
        data = data.reshape((data.shape[0], nchan))
    if weights is not None:
        if weights.shape[1:] not in ((), chan_shape):
            raise ShapeError(
                f"weights must have shape (nsamples,) or data's shape, got {weights.shape}"
            )
        if weights.dtype.kind != "f":
            raise ArgumentTypeError(f"weights must be float32 or float64, got {weights.dtype}")
        if weights.ndim > 2:
            weights = weights.reshape((weights.shape[0], nchan))
    cchunks = data.chunks[1] if data.ndim == 2 else (1,)
    if weights is not None and weights.ndim == 2:
        weights = weights.rechunk({1: cchunks}) if weights.chunks[1] != cchunks else weights

    tlon = dask.delayed(tgt.lons, pure=True)
    tlat = dask.delayed(tgt.lats, pure=True)
    tvec = dask.delayed(_unit, pure=True)(tlon, tlat)
    lon_b = lons.to_delayed().ravel()
    lat_b = lats.to_delayed().ravel()
    data_b = data.to_delayed()
    w_b = None if weights is None else weights.to_delayed()
    npix = tgt.size
    cubes, wsums, usums = [], [], []
    for c, nc in enumerate(cchunks):
        leaves = []
        for i in range(len(lon_b)):
            d = data_b[i, c] if data.ndim == 2 else data_b[i]
            if w_b is None:
                wb = None
            else:
                wb = w_b[i, c] if weights.ndim == 2 else w_b[i]
            leaves.append(
                dask.delayed(_partial, pure=True)(
                    lon_b[i],
                    lat_b[i],
                    d,
                    wb,
                    tlon,
                    tlat,
                    tvec,
                    kernel,
                    params,
                    radius,
                    radius_deg,
                    dev,
                    nc,
                )  # fmt: skip
            )
        root = _tree(dask.delayed, leaves, split_every)
        fin = dask.delayed(_finish, pure=True, nout=3)(root, nc, npix, dt)
        for out, k in ((cubes, 0), (wsums, 1), (usums, 2)):
            out.append(da.from_delayed(fin[k], shape=(nc, npix), dtype=dt))
    shape = chan_shape + tgt.shape

    def assemble(blocks):
        arr = da.concatenate(blocks, axis=0) if len(blocks) > 1 else blocks[0]
        return arr.reshape(shape)

    return assemble(cubes), assemble(wsums), assemble(usums)


def accumulate(plan, lons, lats, data, weights, unweighted, weight_sums) -> None:
    """Add the sums of dask samples into in-memory ``(nchan, ntargets)`` accumulators (the
    Dask form of ``GridPlan.accumulate``, for ``Gridder.grid`` and ``compat.cygrid``): the
    float64 sums are reduced on the cluster, then added here."""
    import dask

    _, ws, us = grid(lons, lats, data, plan.target, plan.kernel, plan.params, plan.radius,
                     weights, np.dtype(np.float64), plan.device)  # fmt: skip
    u, w = dask.compute(us, ws)
    unweighted += u.reshape(unweighted.shape)
    weight_sums += w.reshape(weight_sums.shape)
