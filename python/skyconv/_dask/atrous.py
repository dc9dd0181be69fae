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

  One core call per block and scale (``_core._atrous_block_scale``, session 10): the block's
  smooth array with its halo (from however many neighbour blocks it reaches: thin chunks are
  not merged; cut on the neighbour's worker when that is another, read in place on the same
  worker) is smoothed on the task's engine (CPU, or the worker's GPU: one upload, the
  passes, one download; the GPU is held for that alone), and in the same call, on the host,
  the coefficients w, the next smooth array, the previous kept scale's thresholded add into
  the output and the first selection pass over w (the top 16 key bits, its sum the finite
  count); one ``_atrous_block_finish`` per block ends an iteration with the residual (made
  once, persisted until its σ is known) and its first pass. The client then selects w's
  centre (1–2 more passes, ``select``) and submits the next scale, which adds this one. No
  look-ahead: the cluster holds the input, the output, the smooth array and the last kept
  scale's w (4 arrays of the cube's size, each released block by block as the next scale's
  tasks finish; the residual takes w's place at an iteration's end), plus the blocks in flight
  (bench/NOTES.md, session 10, dask-mem). The selection tasks carry a high Dask priority.
  The input is read once (persisted) with its finite count and first pass.
- One unit of at most :data:`SINGLE_TASK_BYTES`, in one chunk, or of at most
  :data:`SINGLE_TASK_MEMORY_FRACTION` of the smallest worker's memory limit: the single call in
  one task on a worker (its progress reports replayed on the client).

The work is done when the call returns (the iteration count depends on the data): the
reconstruction is a dask array held by the cluster (persisted), the scalars are plain Python
values (NumPy arrays of them for per-unit results), as from the NumPy call.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import warnings
from collections import defaultdict

import numpy as np

from .. import _core
from .._utils.device import resolve
from .._utils.lazy import dask_array
from ..exceptions import ArgumentError, ArgumentTypeError, DeviceError
from . import cluster, select
from .device import check as check_device
from .device import stage
from .halo import check_known_chunks

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
    ``wait`` is False (then the work goes on on the cluster while the client continues).

    Unoptimised: Dask optimises arrays and delayed values apart, and fusing an array's chain
    (block task → item → array chunk) renames the block task, so a delayed value reading the
    same task (its first selection pass) ran it a second time (every finish did)."""
    import dask

    out = dask.persist(*xs, optimize_graph=False)
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
    limits = [w.get("memory_limit") or 0 for w in cluster.workers()]
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


# --- the staged loop's block calls ---------------------------------------------------------
# One task per block and scale (``_scale_task``: the core's ``_atrous_block_scale``) and one per
# block and iteration (``_finish_task``). A block's halo is cut from its neighbours' blocks of
# the smooth array (any number of them along each axis: no merging of thin chunks).


def _c(a):
    return np.require(a, requirements="CA")  # received blocks may be unaligned


def _start(x, out, b):
    """c = x − output (output None: zeros); the blank coefficient ``b`` at blanks."""
    c = np.array(x, copy=True) if out is None else np.subtract(x, out)
    c[~np.isfinite(x)] = b
    return c


def _halo_plan(chunks, shape, depth):
    """For each block index: (the halo box's shape, the block's offset in it, the pieces
    [(neighbour index, source slices, destination slices)])."""
    starts = [np.concatenate([[0], np.cumsum(c)]).astype(int) for c in chunks]
    plan = {}
    for ix in np.ndindex(*[len(c) for c in chunks]):
        ext, lo, per_axis = [], [], []
        for a, k in enumerate(ix):
            s0, s1 = starts[a][k], starts[a][k + 1]
            h = depth.get(a, 0) if len(chunks[a]) > 1 else 0
            e0, e1 = max(0, s0 - h), min(shape[a], s1 + h)
            ext.append(e1 - e0)
            lo.append(s0 - e0)
            pieces = []
            for j in range(len(chunks[a])):
                t0, t1 = starts[a][j], starts[a][j + 1]
                u0, u1 = max(e0, t0), min(e1, t1)
                if u0 < u1:
                    pieces.append((j, slice(u0 - t0, u1 - t0), slice(u0 - e0, u1 - e0)))
            per_axis.append(pieces)
        parts = [
            (tuple(p[0] for p in combo), tuple(p[1] for p in combo), tuple(p[2] for p in combo))
            for combo in itertools.product(*per_axis)
        ]
        plan[ix] = (tuple(ext), tuple(lo), parts)
    return plan


def _cut(a, b, box, pair):
    """A copy of ``a[box]`` (with ``b[box]`` as a pair when ``pair``: x and the output at an
    iteration's start)."""
    if pair:
        return (np.array(a[box]), None if b is None else np.array(b[box]))
    return np.array(a[box])


def _scale_task(pieces, boxes, ext, lo, x, out, w_prev, thr, passes, device, keep_w, counts,
                blank):  # fmt: skip
    """One scale of one block: its smooth array with the halo assembled from ``pieces`` (the
    neighbours' smooth arrays, or (x, output) pairs at an iteration's start, then c = x −
    output with ``blank`` at blanks), then the core's block call."""
    x = _c(x)
    c_ext = np.empty(ext, dtype=x.dtype)
    for piece, (src, dst) in zip(pieces, boxes):
        if isinstance(piece, tuple):  # an iteration's first scale
            xp, op = piece
            c_ext[dst] = _start(xp[src], None if op is None else op[src], blank)
        else:
            c_ext[dst] = piece[src]
    with stage("atrous.smooth", device) as dev:
        return _core._atrous_block_scale(
            c_ext, list(lo), x, None if out is None else _c(out),
            None if w_prev is None else _c(w_prev), float(thr), passes, dev, keep_w, counts,
        )  # fmt: skip


def _finish_task(c, x, out, w_prev, thr, counts):
    """The end of an iteration on one block: (output, the residual x − output with NaN at
    blanks, its key counts or None, its Σ). The residual is made once here, not again by each
    selection pass of its σ."""
    x = _c(x)
    with stage("atrous.finish", "cpu"):  # a host pass: counted in the devices log
        o, top, total = _core._atrous_block_finish(
            _c(c), x, None if out is None else _c(out),
            None if w_prev is None else _c(w_prev), float(thr), counts,
        )  # fmt: skip
        return o, _residual_block(x, o), top, total


def _owners(x):
    """The worker holding each block of the persisted ``x`` (by block index; empty without a
    Distributed client): the loop's tasks for block i are asked to run there, so every
    array's block i lives beside x's and no worker keeps replicas of other workers' blocks
    (Distributed keeps a replica as long as its key lives)."""
    return cluster.holders(x) or {}


def _on(owners, ix):
    """``dask.annotate`` that asks for block ``ix``'s worker (a no-op without one)."""
    import dask

    w = owners.get(tuple(ix))
    if w is None:
        return contextlib.nullcontext()
    return dask.annotate(workers=[w], allow_other_workers=True)


def _grid(arr):
    """The blocks of a dask array (None stays None) as an object array of Delayed."""
    return None if arr is None else arr.to_delayed()


def _assemble(parts, x, k):
    """The dask array of item ``k`` of each block task's tuple (``parts``: object array of
    Delayed tuples over ``x``'s block grid)."""
    da = dask_array()
    rec = np.empty(parts.shape, dtype=object)
    for ix in np.ndindex(*parts.shape):
        shape = tuple(x.chunks[a][ix[a]] for a in range(x.ndim))
        rec[ix] = da.from_delayed(parts[ix][k], shape=shape, dtype=x.dtype)
    return da.block(rec.tolist())


def _first_of(parts, robust):
    """The tree sum of the block tasks' first passes (counts, or Σ), lazy."""
    import dask

    k = -2 if robust else -1
    with dask.annotate(priority=select.PRIORITY):
        leaves = [parts[ix][k] for ix in np.ndindex(*parts.shape)]
        return select._tree_sum(dask.delayed, leaves)


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


def _one_unit(x, dim, snr, scale_min, scale_max, filt, conv, robust, device, progress, variant,
              blank):  # fmt: skip
    """The reconstruction of one unit spanning the whole array ``x`` (see the module docs)."""
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

    # The input, read once (from zarr, say), with the first pass of its statistics.
    with _step("input"):
        x, top, first = _persist(x, select.top_counts(x), _first(x, robust))
        top = _fetch(top)
    count = int(top.sum())
    if count == 0:
        return x.copy(), 0, math.nan, math.nan, n
    with _step("sigma0"):
        sigma0 = _sigma(x, robust, count, top if robust else _fetch(first))
    plans = {}  # halo plans by scale
    owners = _owners(x)
    out = None  # zeros until the first thresholded add
    old = math.inf
    iteration = 0
    sigma = math.nan
    while True:
        iteration += 1
        b = blank if duchamp_2d and (iteration == 1 or not thresholds) else 0.0
        c = None  # the iteration's first scale makes c = x − output in its tasks
        pending = None  # (w, threshold) of the last kept scale, added by the next call
        for s in range(1, loop_scales + 1):
            step = 1 << (s - 1)
            if s not in plans:
                plans[s] = _halo_plan(x.chunks, x.shape, {a: reach * step for a in axes})
            with _step("scales"):
                w, c, out, first = _scale(
                    x, c, out, pending, plans[s], step, weights, axes, device, kept(s), robust,
                    b, owners,
                )  # fmt: skip
            pending = None
            if kept(s):
                with _step("scale centre"):
                    center = _center(w, robust, count, _fetch(first))
                pending = (w, center + snr * sigma0 * float(factors[s]))
            del w, first
        with _step("finish"):
            out, resid, first = _finish(x, c, out, pending, robust, owners)
        del c, pending
        with _step("residual sigma"):
            sigma = _sigma(resid, robust, count, _fetch(first))
        del resid
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


def _scale(x, c, out, pending, plan, step, weights, axes, device, keep, robust, blank, owners):
    """One scale on every block, submitted (not waited for): (w or None, the next c, the
    output, w's first pass (lazy) or None). ``c`` None: the iteration's first scale (c from
    x and the output in the tasks)."""
    import dask

    passes = [("dilated", ax, "mirror", 0.0, [float(step)] + weights) for ax in axes]
    xg, og, cg = _grid(x), _grid(out), _grid(c)
    wg = None if pending is None else _grid(pending[0])
    thr = 0.0 if pending is None else pending[1]
    task = dask.delayed(_scale_task, pure=False, nout=5)
    parts = np.empty(xg.shape, dtype=object)
    cut = dask.delayed(_cut, pure=False)
    for ix, (ext, lo, pieces) in plan.items():
        # A neighbour on another worker gives its part of the halo as a cut made where it
        # lives (a task of its own): only the halo crosses between workers, and no worker
        # keeps a replica of a whole neighbour block (which Distributed would hold as long as
        # the block lives). A neighbour on the same worker is read in place (no copy).
        src, boxes = [], []
        for j, a, d in pieces:
            away = owners.get(tuple(j)) != owners.get(tuple(ix))
            if cg is None:
                nb = (xg[j], None if og is None else og[j])
                if away:
                    with _on(owners, j):
                        nb = cut(*nb, a, True)
            else:
                nb = cg[j]
                if away:
                    with _on(owners, j):
                        nb = cut(nb, None, a, False)
            src.append(nb)
            boxes.append((tuple(slice(None) for _ in a) if away else a, d))
        with _on(owners, ix):
            parts[ix] = task(
                src, boxes, ext, lo, xg[ix], None if og is None else og[ix],
                None if wg is None else wg[ix], thr, passes, device, keep, robust, blank,
            )  # fmt: skip
    w = _assemble(parts, x, 0) if keep else None
    c = _assemble(parts, x, 1)
    new_out = _assemble(parts, x, 2) if pending is not None else out
    first = _first_of(parts, robust) if keep else None
    todo = [a for a in (w, c) if a is not None] + ([new_out] if pending is not None else [])
    if first is not None:
        todo.append(first)
    done = list(_persist(*todo, wait=False)) if len(todo) > 1 else [_persist(*todo, wait=False)]
    w = done.pop(0) if keep else None
    c = done.pop(0)
    if pending is not None:
        new_out = done.pop(0)
    return w, c, new_out, (done.pop(0) if first is not None else None)


def _finish(x, c, out, pending, robust, owners):
    """The end of an iteration: (the output and the residual, persisted and waited for; the
    residual's first pass, computed with them)."""
    import dask

    task = dask.delayed(_finish_task, pure=False, nout=4)
    xg, og, cg = _grid(x), _grid(out), _grid(c)
    wg = None if pending is None else _grid(pending[0])
    thr = 0.0 if pending is None else pending[1]
    parts = np.empty(xg.shape, dtype=object)
    for ix in np.ndindex(*xg.shape):
        with _on(owners, ix):
            parts[ix] = task(
                cg[ix], xg[ix], None if og is None else og[ix], None if wg is None else wg[ix],
                thr, robust,
            )  # fmt: skip
    return _persist(_assemble(parts, x, 0), _assemble(parts, x, 1), _first_of(parts, robust))


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
