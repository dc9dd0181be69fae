"""``skyconv.atrous_denoise`` on dask arrays, with the single call's answer.

Two cases:

- Independent units (``dim=1`` spectra or ``dim=2`` channel maps of a larger array): each
  block, made whole along the unit's axes (rechunked when it is not), is one NumPy call; the
  units never meet, so the result is the single call's exactly.
- One unit (``dim == data.ndim``: the whole cube for ``dim=3``, the whole image for ``dim=2``):
  the reconstruction loop runs here, on the cluster. Each scale's smoothing is block-wise with a
  halo of the dilated filter's reach along every axis (``halo.overlap_map``: the single call's
  mirror edges at the cube's true edges); the statistics the loop needs — σ0, each kept scale's
  median (or mean), the residual σ of every iteration — are exact global reductions over the
  whole cube (``select``: exact medians; sums for the mean and standard deviation), so the
  thresholds, the iteration count and the convergence test are the single call's. The filter
  passes are the core's own (``_filter_chain`` with its "dilated" pass), so only the order of
  the global sums differs from the single call.

The work is done when the call returns (the iteration count depends on the data): the
reconstruction is a dask array held by the cluster (persisted), the scalars are plain Python
values (NumPy arrays of them for per-unit results), as from the NumPy call.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from .. import _core
from .._utils.device import resolve
from .._utils.lazy import dask_array
from ..exceptions import ArgumentError, ArgumentTypeError, DeviceError
from . import select
from .device import check as check_device
from .device import stage
from .halo import check_known_chunks, overlap_map

#: Cap on the convergence loop, as in the core.
MAX_ITERATIONS = 100
#: DUCHAMP's MADFM -> sigma conversion.
MADFM_TO_SIGMA = 0.6744888
#: DUCHAMP's 2-D reconstruction stops on this fixed tolerance.
DUCHAMP_2D_TOLERANCE = 0.005
_WEIGHTS = {
    "b3spline": [0.0625, 0.25, 0.375, 0.25, 0.0625],
    "triangle": [0.25, 0.5, 0.25],
    "haar": [0.0, 0.5, 0.5],
}


def _unit_block(block, args, device):
    """The core's reconstruction of a block of whole units: (recon, iterations, noise,
    input_noise, scales, device), the per-unit values as lists."""
    block = np.require(block, requirements="CA")  # received blocks may be unaligned
    with stage("atrous.units", device) as dev:
        return _core._atrous_denoise(block, *args[:7], dev, None, *args[7:])


def _by_units(x, dim, args, device):
    """dim=1 (axis 0 whole) or dim=2 on a cube (last two axes whole): block-wise NumPy calls."""
    import dask

    da = dask_array()
    whole = (0,) if dim == 1 else (x.ndim - 2, x.ndim - 1)
    chunks = x.chunks
    x = x.rechunk({ax: -1 for ax in whole})
    blocks = x.to_delayed()
    index = list(np.ndindex(blocks.shape))
    calls = [dask.delayed(_unit_block, pure=True, nout=6)(blocks[ix], args, device) for ix in index]
    calls = dask.persist(*calls)  # the reconstructions stay on the workers
    small = dask.compute([[c[k] for k in range(1, 6)] for c in calls])[0]
    rec = np.empty(blocks.shape, dtype=object)
    for ix, c in zip(index, calls):
        shape = tuple(x.chunks[a][ix[a]] for a in range(x.ndim))
        rec[ix] = da.from_delayed(c[0], shape=shape, dtype=x.dtype)
    data = da.block(rec.tolist())
    data = data.rechunk(chunks) if data.chunks != chunks else data  # the input's chunks
    # Per-unit arrays: unit axes are the non-whole axes, in block order.
    unit_axes = [a for a in range(x.ndim) if a not in whole]
    ushape = tuple(x.shape[a] for a in unit_axes)
    uchunks = [x.chunks[a] for a in unit_axes]
    out = []
    for k in range(3):
        arr = np.empty(ushape, dtype=np.int64 if k == 0 else np.float64)
        for i, ix in enumerate(index):
            sl = tuple(
                slice(sum(uchunks[j][: ix[a]]), sum(uchunks[j][: ix[a] + 1]))
                for j, a in enumerate(unit_axes)
            )
            arr[sl] = np.asarray(small[i][k]).reshape(arr[sl].shape)
        out.append(arr)
    scales = small[0][3] if small else 0
    dev = small[0][4] if small else "cpu"
    return data, out[0], out[1], out[2], scales, dev


# --- one unit: the loop on the cluster --------------------------------------------------------


def _smooth(block, step, weights, axes, device):
    """One à trous scale's smoothing of a block: the dilated filter along ``axes`` (last
    first), mirror edges, the core's passes."""
    passes = [("dilated", ax, "mirror", 0.0, [float(step)] + weights) for ax in axes]
    block = np.require(block, requirements="CA")  # received blocks may be unaligned
    with stage("atrous.smooth", device) as dev:
        return _core._filter_chain(block, passes, dev)


def _absdev(block, center):
    return np.abs(np.asarray(block, dtype=np.float64) - center)


def _sigma(x, robust, count):
    """σ of the finite values of x over the whole array: MADFM/0.6744888 or the population
    standard deviation (the core's arithmetic: f64, centre first)."""
    da = dask_array()
    if robust:
        m = select.median(x, count=count)
        mad = select.median(x, fn=functools.partial(_absdev, center=m), count=count)
        return mad / MADFM_TO_SIGMA
    m = _mean(x, count)
    y = x.astype(np.float64)
    ss = float(da.nansum(da.where(da.isfinite(y), (y - m) ** 2, np.nan)).compute())
    return math.sqrt(ss / count)


def _mean(x, count):
    da = dask_array()
    y = x.astype(np.float64)
    return float(da.nansum(da.where(da.isfinite(y), y, np.nan)).compute()) / count


def _relative_change(old: float, new: float) -> float:
    """|old - new| / new with IEEE semantics (inf for x/0, NaN for 0/0), as the core."""
    d = abs(old - new)
    if new == 0:
        return math.nan if d == 0 or math.isnan(d) else math.inf
    return d / new


def _one_unit(x, dim, snr, scale_min, scale_max, filt, conv, robust, device, progress, variant,
              blank):  # fmt: skip
    """The reconstruction of one unit spanning the whole array ``x`` (see the module docs)."""
    import dask

    da = dask_array()
    check_known_chunks(x, "data")
    n, factors = _core._atrous_plan(list(x.shape), dim, filt, variant)
    duchamp_2d = variant == "duchamp" and dim == 2
    loop_scales = n - 1 if duchamp_2d else n

    def kept(s):
        return s >= scale_min and (duchamp_2d or scale_max == 0 or s <= scale_max)

    tol = DUCHAMP_2D_TOLERANCE if duchamp_2d else conv
    thresholds = any(kept(s) for s in range(1, loop_scales + 1))
    axes = list(range(x.ndim))[::-1]
    weights = _WEIGHTS[filt]
    reach = len(weights) // 2
    dt = x.dtype
    x = x.persist()  # read once (from zarr, say): every step below reads it again
    fin = da.isfinite(x)
    count = select.finite_count(x)
    if count == 0:
        return x.copy(), 0, math.nan, math.nan, n
    sigma0 = _sigma(x, robust, count)
    out = da.zeros_like(x)
    old = math.inf
    iteration = 0
    sigma = math.nan
    while True:
        iteration += 1
        b = blank if duchamp_2d and (iteration == 1 or not thresholds) else 0.0
        c = da.where(fin, x - out, dt.type(b)).astype(dt)
        c = c.persist()
        for s in range(1, loop_scales + 1):
            step = 1 << (s - 1)
            depth = {ax: reach * step for ax in axes}
            fn = functools.partial(_smooth, step=step, weights=weights, axes=axes, device=device)
            sm = overlap_map(c, fn, depth, dtype=dt)
            w = da.where(fin, c - sm, dt.type(np.nan)).astype(dt)
            c = da.where(fin, c - w, c).astype(dt)
            w, c = dask.persist(w, c)
            if kept(s):
                center = select.median(w, count=count) if robust else _mean(w, count)
                thr = center + snr * sigma0 * float(factors[s])
                big = abs(w.astype(np.float64)) > thr  # compared in float64, as the core does
                out = da.where(big, (out + w).astype(dt), out)
                out = out.persist()
        out = da.where(fin, (out + c).astype(dt), out).persist()
        resid = da.where(fin, (x - out).astype(dt), dt.type(np.nan))
        sigma = _sigma(resid, robust, count)
        rel = _relative_change(old, sigma)
        old = sigma
        more = iteration == 1 or rel > tol
        stop = not more or iteration >= MAX_ITERATIONS
        if progress is not None:
            change = 0.0 if math.isnan(rel) else rel
            progress(iteration, 0 if stop else 1, 1, sigma, change)
        if stop:
            break
    recon = da.where(fin, out, x).persist()
    return recon, iteration, sigma, sigma0, n


def atrous_denoise(x, dim, snr, scale_min, scale_max, filt, conv, robust, device, progress,
                   variant, blank):  # fmt: skip
    """``skyconv.atrous_denoise`` of a dask array (arguments checked by the caller): returns
    (recon, iterations, noise, input_noise, scales, device) as the NumPy call's result holds
    them, ``recon`` a persisted dask array."""
    check_known_chunks(x, "data")
    if x.dtype not in (np.float32, np.float64):
        raise ArgumentTypeError(f"data must be float32 or float64, got dtype {x.dtype}")
    _core._atrous_plan(list(x.shape), dim, filt, variant)  # ShapeError for a bad shape or dim
    dev = check_device(device)
    if dim == x.ndim:
        recon, iters, noise, noise0, scales = _one_unit(
            x, dim, snr, scale_min, scale_max, filt, conv, robust, dev, progress, variant, blank
        )
        if iters == 0:
            warnings.warn(
                "atrous_denoise: every voxel is blank (NaN/inf); returning the input",
                RuntimeWarning,
                stacklevel=3,
            )
        try:
            device_used = str(resolve(dev))
        except DeviceError:  # the client may see no GPU while its workers do
            device_used = dev
        return recon, int(iters), float(noise), float(noise0), scales, device_used
    if progress is not None:
        raise ArgumentError("progress is not supported for per-unit (dim < data.ndim) dask input")
    args = (dim, snr, scale_min, scale_max, filt, conv, robust, variant, blank)
    data, iters, noise, noise0, scales, dev_used = _by_units(x, dim, args, dev)
    if x.size and not np.any(iters):
        warnings.warn(
            "atrous_denoise: every voxel is blank (NaN/inf); returning the input",
            RuntimeWarning,
            stacklevel=3,
        )
    return data, iters, noise, noise0, scales, dev_used
