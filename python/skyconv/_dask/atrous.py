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

  What a round trip costs is kept small (bench/NOTES.md, session 9): the smoothing chain of an
  iteration does not depend on the thresholds, so scale s + 1 is submitted (persisted, not
  waited for) before the client selects scale s's centre; each scale's first selection pass
  (the top 16 key bits, ``select.top_counts``) runs in the graph that makes the coefficients,
  and so does the residual's with the output; the selection's block passes are one core scan
  each (``_core._key_counts`` / ``_key_values``) and carry a high Dask priority; the threshold
  additions are submitted without waiting; the element-wise steps are one NumPy task per block
  (under names of their own, see ``_blocks``). The input is read once (persisted) with its
  finite count and first pass.
- One unit of at most :data:`SINGLE_TASK_BYTES`, in one chunk, or of at most
  :data:`SINGLE_TASK_MEMORY_FRACTION` of the smallest worker's memory limit: the single call in
  one task on a worker (its progress reports replayed on the client).

The work is done when the call returns (the iteration count depends on the data): the
reconstruction is a dask array held by the cluster (persisted), the scalars are plain Python
values (NumPy arrays of them for per-unit results), as from the NumPy call.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
import warnings
from collections import defaultdict

import numpy as np

from .. import _core
from .._utils.device import resolve
from .._utils.lazy import dask_array
from ..exceptions import ArgumentError, ArgumentTypeError, DeviceError
from . import select
from .device import check as check_device
from .device import stage
from .halo import check_known_chunks, overlap_map

#: A one-unit array of at most this many bytes (or in one chunk) runs the single call in one
#: task on a worker: below it the loop's round trips cost more than the work they spread.
SINGLE_TASK_BYTES = 16 * 2**20
#: So does one of at most this fraction of the smallest worker's ``memory_limit`` (the single
#: call holds ~5 arrays of the input's size, the task its input and result): on one worker's
#: threads (its GPU on a GPU worker) the single call is faster than the staged loop spread
#: over a few workers (bench/NOTES.md, session 9). 0 turns this rule off.
SINGLE_TASK_MEMORY_FRACTION = 1 / 8
#: Cap on the convergence loop, as in the core.
MAX_ITERATIONS = 100
#: DUCHAMP's MADFM -> sigma conversion.
MADFM_TO_SIGMA = 0.6744888
#: DUCHAMP's 2-D reconstruction stops on this fixed tolerance.
DUCHAMP_2D_TOLERANCE = 0.005
#: Wall seconds, calls and scheduler round trips of the one-unit loop's steps on the client,
#: by step name (bench/dask_atrous_profile.py reads it; cleared by the caller).
PROFILE: dict = defaultdict(lambda: {"seconds": 0.0, "calls": 0, "trips": 0})
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


@contextlib.contextmanager
def _step(name):
    """Time one step of the loop into ``PROFILE`` (round trips: ``select.TRIPS``' growth)."""
    t, n = time.perf_counter(), select.TRIPS[0]
    try:
        yield
    finally:
        rec = PROFILE[name]
        rec["seconds"] += time.perf_counter() - t
        rec["calls"] += 1
        rec["trips"] += select.TRIPS[0] - n


def _persist(*xs, wait=True):
    """``dask.persist`` of ``xs`` in one graph (shared steps computed once); waited for unless
    ``wait`` is False (then the work goes on on the cluster while the client continues)."""
    import dask

    out = dask.persist(*xs)
    if wait:
        select.TRIPS[0] += 1
        try:
            from distributed import futures_of
            from distributed import wait as wait_for
        except ImportError:
            futures_of = None
        if futures_of is not None:
            fut = futures_of(list(out))
            if fut:
                wait_for(fut)
    return out if len(out) > 1 else out[0]


def _fetch(d):
    """The value of a (persisted) ``dask.delayed``."""
    select.TRIPS[0] += 1
    return d.compute()


def _block_sum(block, center):
    """Σv over the finite values v of a block (float64), or Σ(v − center)²."""
    v = np.asarray(block, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    return float(np.sum(v if center is None else (v - center) ** 2))


def _sum(x, center=None):
    """Lazy tree sum of :func:`_block_sum` over the blocks of x (one ``dask.delayed``)."""
    import dask

    with dask.annotate(priority=select.PRIORITY):
        parts = [dask.delayed(_block_sum, pure=True)(b, center) for b in x.to_delayed().ravel()]
        return select._tree_sum(dask.delayed, parts)


def _first(x, robust):
    """The first pass of x's centre, lazy: the median's top key counts, or the sum."""
    return select.top_counts(x) if robust else _sum(x)


def _center(x, robust, count, first):
    """The median (or mean) of x's finite values, from its computed first pass."""
    if robust:
        return select.median(x, count=count, top=first)
    return float(first) / count


def _sigma(x, robust, count, first):
    """σ of the finite values of x over the whole array from its computed first pass
    (:func:`_first`): MADFM/0.6744888 or the population standard deviation (the core's
    arithmetic: f64, centre first)."""
    m = _center(x, robust, count, first)
    if robust:
        return select.median(x, center=m, count=count) / MADFM_TO_SIGMA
    return math.sqrt(_fetch(_sum(x, m)) / count)


def _relative_change(old: float, new: float) -> float:
    """|old - new| / new with IEEE semantics (inf for x/0, NaN for 0/0), as the core."""
    d = abs(old - new)
    if new == 0:
        return math.nan if d == 0 or math.isnan(d) else math.inf
    return d / new


def _single_call(block, args, device):
    """The single call on the whole array in one task: (recon, iterations, noise, input_noise,
    scales, device, the progress reports)."""
    reports = []
    block = np.require(block, requirements="CA")
    with stage("atrous.single", device) as dev:
        r = _core._atrous_denoise(block, *args[:7], dev, lambda *a: reports.append(a), *args[7:])
    return (*r, reports)


def _fits_one_worker(nbytes: int) -> bool:
    """Whether ``nbytes`` is at most ``SINGLE_TASK_MEMORY_FRACTION`` of the smallest worker's
    memory limit (False without a Distributed client or without limits)."""
    if SINGLE_TASK_MEMORY_FRACTION <= 0:
        return False
    try:
        from distributed import default_client

        workers = default_client().scheduler_info().get("workers", {}).values()
    except (ImportError, ValueError):
        return False
    limits = [w.get("memory_limit") or 0 for w in workers]
    return bool(limits) and min(limits) > 0 and nbytes <= SINGLE_TASK_MEMORY_FRACTION * min(limits)


def _one_task(x, args, device, progress):
    """One unit of a small array as one task on a worker: the single call (its result
    persisted on the cluster, the scalars gathered, the progress reports replayed here)."""
    import dask

    da = dask_array()
    xs = x.rechunk(-1)
    res = list(dask.delayed(_single_call, nout=7)(xs.to_delayed().ravel()[0], args, device))
    out = da.from_delayed(res[0], x.shape, dtype=x.dtype)
    # one run of the call: unoptimised, so the array's fused copy of the task is not a second run
    out, *small = dask.persist(out, *res[1:], optimize_graph=False)
    iters, noise, noise0, n, _, reports = dask.compute(*small)
    for rep in reports if progress is not None else ():
        progress(*rep)
    return out.rechunk(x.chunks), int(iters[0]), float(noise[0]), float(noise0[0]), n


# The loop's element-wise steps, one task per block each, in the data's dtype (a float32 sum
# or difference rounds as the core's f64 operation rounded to float32 does); ``x`` is the
# input, its non-finite voxels the blanks.


def _start(x, out, b):
    """c = x − output; the blank coefficient ``b`` at blanks."""
    c = np.subtract(x, out)
    c[~np.isfinite(x)] = b
    return c


def _c(a):
    return np.require(a, requirements="CA")  # received blocks may be unaligned


def _coefficients(c, sm, x):
    """w = c − smooth; NaN at blanks (one core pass, with the next c)."""
    return _core._atrous_split(_c(c), _c(sm), _c(x))[0]


def _smoother(c, w, x):
    """The next c = c − w; unchanged at blanks."""
    blank = ~np.isfinite(x)
    nc = np.subtract(c, w)
    nc[blank] = c[blank]
    return nc


def _add(out, w, thr):
    """output + w where |w| > thr (compared in float64, as the core does; one core pass)."""
    return _core._atrous_add_above(_c(out), _c(w), float(thr))


def _finish(out, c, x):
    """output + c, except at blanks."""
    fin = np.isfinite(x)
    o = np.array(out)
    o[fin] += c[fin]
    return o


def _residual_block(x, out):
    """x − output; NaN at blanks."""
    r = np.subtract(x, out)
    r[~np.isfinite(x)] = np.nan
    return r


def _result(out, x):
    """The reconstruction: output, the input at blanks."""
    blank = ~np.isfinite(x)
    o = np.array(out)
    o[blank] = x[blank]
    return o


def _blocks(fn, *arrays, **kw):
    """``fn`` on the blocks of ``arrays`` (same chunks), lazy, under a name of its own: the
    same expression of a persisted array would otherwise reuse the keys of the one built on
    its lazy version, with other dependencies (which Distributed warns may deadlock)."""
    import uuid

    da = dask_array()
    name = f"atrous-{fn.__name__.strip('_')}-{uuid.uuid4().hex}"
    return da.map_blocks(fn, *arrays, dtype=arrays[0].dtype, name=name, **kw)


def _residual(x, out):
    """x − output (NaN at blanks), lazy."""
    return _blocks(_residual_block, x, out)


def _one_unit(x, dim, snr, scale_min, scale_max, filt, conv, robust, device, progress, variant,
              blank):  # fmt: skip
    """The reconstruction of one unit spanning the whole array ``x`` (see the module docs)."""
    da = dask_array()
    check_known_chunks(x, "data")
    n, factors = _core._atrous_plan(list(x.shape), dim, filt, variant)
    if x.npartitions == 1 or x.nbytes <= SINGLE_TASK_BYTES or _fits_one_worker(x.nbytes):
        args = (dim, snr, scale_min, scale_max, filt, conv, robust, variant, blank)
        with _step("one task"):
            return _one_task(x, args, device, progress)
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

    def scale(c, s):
        """Scale s of smooth array c, lazy: (w, the next c, w's first statistic pass or None)."""
        step = 1 << (s - 1)
        fn = functools.partial(_smooth, step=step, weights=weights, axes=axes, device=device)
        sm = overlap_map(c, fn, {ax: reach * step for ax in axes}, dtype=dt)
        w = _blocks(_coefficients, c, sm, x)
        c = _blocks(_smoother, c, w, x)
        return w, c, (_first(w, robust) if kept(s) else None)

    # The input, read once (from zarr, say), with the first pass of its statistics.
    with _step("input"):
        x, top, first = _persist(x, select.top_counts(x), _first(x, robust))
        top = _fetch(top)
    count = int(top.sum())
    if count == 0:
        return x.copy(), 0, math.nan, math.nan, n
    with _step("sigma0"):
        sigma0 = _sigma(x, robust, count, top if robust else _fetch(first))
    out = da.zeros_like(x)
    old = math.inf
    iteration = 0
    sigma = math.nan
    while True:
        iteration += 1
        b = blank if duchamp_2d and (iteration == 1 or not thresholds) else 0.0
        c = _blocks(_start, x, out, b=b)
        # The smoothing chain does not depend on the thresholds: scale s + 1 is made on the
        # cluster while the client selects scale s's centre.
        with _step("scales"):
            nxt = _persist(*scale(c, 1), wait=False)
        for s in range(1, loop_scales + 1):
            w, c, first = nxt
            if s < loop_scales:
                with _step("scales"):
                    nxt = _persist(*scale(c, s + 1), wait=False)
            if kept(s):
                with _step("scale centre"):
                    center = _center(w, robust, count, _fetch(first))
                thr = center + snr * sigma0 * float(factors[s])
                with _step("threshold add"):
                    out = _persist(_blocks(_add, out, w, thr=thr), wait=False)
            del w
        out = _blocks(_finish, out, c, x)
        with _step("finish"):
            out, first = _persist(out, _first(_residual(x, out), robust))
        resid = _residual(x, out)  # from the persisted output
        with _step("residual sigma"):
            sigma = _sigma(resid, robust, count, _fetch(first))
        rel = _relative_change(old, sigma)
        old = sigma
        more = iteration == 1 or rel > tol
        stop = not more or iteration >= MAX_ITERATIONS
        if progress is not None:
            change = 0.0 if math.isnan(rel) else rel
            progress(iteration, 0 if stop else 1, 1, sigma, change)
        if stop:
            break
    with _step("result"):
        recon = _persist(_blocks(_result, out, x))
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
