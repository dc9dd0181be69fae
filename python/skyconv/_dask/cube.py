"""``skyconv.smooth_and_clip`` on a dask cube, with the single call's mask and noise values.

The single call runs each kernel as: replace the voxels already in the mask, smooth spatially
(whole (y, x) planes), smooth spectrally (whole z lines), measure the noise on SoFiA-2's
sample of the whole smoothed cube, clip. Here each kernel is the same steps on blocks, through
the engines' own code (``_core._scfind_spatial``, ``_scfind_block_sample``,
``_scfind_block_clip``, ``_scfind_noise``), so every value is the one the single call computes,
and every task that touches the cube is one core call (no NumPy pass over the cube):

1. the spatial stage on z-slabs (chunks (zc, NY, NX)), kernels with both parts only: a plane's
   smoothing needs only the plane; then one transposition (an all-to-all) to columns (chunks
   (NZ, yc, xc)): a z line's running mean (SoFiA-2's rounding runs from the end of the line)
   needs the whole line, so no halo can give its bits; columns do. A kernel with one part runs
   both stages in its block tasks (slabs for a spatial kernel, columns for a spectral one);
2. the noise: one core call per block smooths it (the spectral stage, or both) and hands in
   its voxels of the sample (flat indices size − c, size − 2c, … or 0, c, 2c, …: ≤ ~10⁶ values
   in all) and its (min, max); the client puts the sample in walk order and applies the core's
   noise rule (exact median, SoFiA-2's order of the MAD walk, the gauss histogram fit) — one
   global reduction per kernel (with the cube kept on CPU workers, below, a task on a worker
   does it and the clip tasks read its result, and the client sends kernel k + 1's graph
   before it reads kernel k's noise, :data:`KERNELS_AHEAD`: no round trip to the client
   between the sample and the clip, nor between two kernels);
3. the clip: one core call per block returns ``mask |= |W| > threshold · noise``; the mask
   (one byte per voxel, bit 7 = blank) is persisted between kernels (SoFiA-2's order
   dependency: kernel k smooths the cube with the voxels found by kernels < k replaced) and
   stays in the layout of the last clip until a kernel needs another.

With the cube in memory, a kernel whose spectral stage is SoFiA-2's running mean (precision
"sofia2") skips the transposition, on CPU and GPU workers alike (one graph; each core call runs on
its worker's device, whose values for this pass are the CPU engine's): its spectral pass runs on the
z-slabs themselves, from the top slab down, each slab handed the running mean at its top by the slab
above (one plane, the "carry") and its neighbours' spatial stage r planes below and r + 1 above
(:meth:`_Noise.slabs`; the single call's values bit for bit), every task of a slab on the worker
that holds it: only halos and carries cross between workers. The slabs are read in contiguous runs
over the workers (fewest slab edges between workers), and each slab's pass is split into groups of
rows, each group's carry from the same group above: independent chains, which run as a wavefront
down the workers instead of one slab pass at a time. The graph's per-task cost, not the data, bounds
this pass (bench/NOTES.md, sessions 13 and 14), so each (slab, group) is one task: it reads its
carry and halo from its neighbours' results (a halo, and with W kept a carry, a task of its own
only across an edge between workers), the clip and one sample task a slab read the kept results,
and the persisted blocks are the arrays' own keys (no wrapper tasks).
The chains are two a one-thread worker and four a worker of several threads, whatever their number
(:data:`GROUPS_PER_POOL`): a task's core call runs on its worker's whole thread pool (skyconv's
threads = the worker's Dask threads), so on one machine a few workers of many threads run each
kernel as a few large tasks a slab.

When the cube takes less than 30 % of the cluster's memory it is persisted as z-slabs (read
once); on CPU workers (and on any worker for the z-slab pass) the noise call of step 2 also
returns what the clip needs, which stays (persisted) on the worker that made it until the clip
reads it, so each kernel is smoothed once: the block's W, or in the z-slab pass on CPU workers
what the single CPU call keeps for its clip, the clip candidates (per column block of the
spectral pass, the ~1/128 of its voxels with the largest |W| above a floor; the clip decides a
block from its list when the level is above its floor and otherwise runs that block's
spectral pass again from the slab's spatial stage, halo and carry, as the single call does:
W is never written, and the clip reads a few per cent of the bytes). On GPU workers the
transposed smoothed cube of the other kernels is persisted instead and the clip smooths it
again on the device (cheaper than W's trip back over PCIe). Otherwise nothing of the size
of the cube but the one-byte mask is kept: the clip smooths its block again (step 1 and the
spectral stage twice per kernel). Every core call runs on the device each worker resolves
(:mod:`skyconv._dask.device`): a worker that sees a GPU runs it on the GPU engine (``device``
"auto"/None/"cuda": one upload of the block, every step on the device, the sample or the mask
down; the values of the single call on that engine), one without on the CPU engine (per
worker's thread pool).

Two other paths: a cube in one chunk, or of at most :data:`SINGLE_TASK_BYTES`, runs the
single call in one task (:func:`_one_task`); a cube that takes 30 % of the cluster's memory
or more runs out of core (:mod:`skyconv._dask.cube_ooc`: the plane/column exchange through a
temporary zarr store instead of in-memory rechunks).
"""

from __future__ import annotations

import operator
import os
from contextlib import contextmanager

import numpy as np

from .. import _core
from .._utils.lazy import dask_array
from ..exceptions import ArgumentTypeError, ShapeError
from . import cluster
from .device import check as check_device
from .device import copied, stage
from .filters import check_float
from .halo import check_known_chunks

#: Mask bit of the Rust engine for blank (NaN) voxels.
BLANK = 0x80


def _c(a):
    """C-contiguous and aligned (a block received over the network may be unaligned)."""
    return np.require(a, requirements=("C", "A"))


@contextmanager
def _stage(name, device):
    """The device of a task's core call (:func:`skyconv._dask.device.stage`); on the CPU
    engine, the worker's pool first takes its thread count (:func:`cluster.pool_of_worker`:
    a worker of T Dask threads runs each call on T engine threads). GPU workers' pools are
    left as they were."""
    with stage(name, device) as dev:
        if dev == "cpu":
            cluster.pool_of_worker()
        yield dev


def _spatial_block(cube, mask, spec, mode, rep, rms0, exact, device=None):
    with _stage("scfind.spatial", device) as dev:
        out = _core._scfind_spatial(_c(cube), _c(mask), spec, mode, rep, rms0, exact, dev)
    copied("scfind.spatial", dev, cube, mask, out)
    return out


def _spatial_update(prev, pmask, w, cube, mask, spec, mode, rep, rms0, exact, device=None):
    """The spatial stage of slab ``cube`` with ``mask`` (:func:`_spatial_block`'s, bit for bit)
    from ``prev``, that of the same spatial kernel built with mask ``pmask``: a plane's stage
    reads only that plane of the cube and of the mask, so only the planes whose mask changed
    are smoothed again (the detections of the kernels in between; one core call a run of
    them). With
    ``w``, ``prev`` is W of a kernel of this spatial size with no spectral part, which equals
    its stage except at blank voxels (NaN in W): the planes with a blank voxel are smoothed
    again too."""
    mask = _c(mask)
    flat = mask.reshape(len(mask), -1)
    redo = (flat != pmask.reshape(flat.shape)).any(axis=1)
    if w:
        redo |= (flat & BLANK).any(axis=1)
    if not redo.any():  # nothing changed: ``prev`` itself (read only everywhere), no copy
        return prev
    # runs of planes alike: kept ones from ``prev`` (read only: it may still be read by
    # halos and clips), the others smoothed from views of the slab; one copy into the result
    edges = np.flatnonzero(np.diff(redo.astype(np.int8))) + 1
    edges = [0, *edges.tolist(), len(redo)]
    pieces = []
    for a, b in zip(edges[:-1], edges[1:]):
        if redo[a]:
            pieces.append(_spatial_block(cube[a:b], mask[a:b], spec, mode, rep, rms0, exact,
                                         device))  # fmt: skip
        else:
            pieces.append(prev[a:b])
    return np.concatenate(pieces) if len(pieces) > 1 else pieces[0]  # one run: all redone


def _sample_core(x, mask, spec, mode, rep, rms0, exact, kind, start, shape, sampling, ext,
                  device=None, keep=False):  # fmt: skip
    """One core call: W of the block (``kind`` "raw", "cube" or "smoothed") at its positions
    of the whole cube's sample → (slots, values, (min, max) or None, W or None). W (NaN where
    blank) only with ``keep``, for the clip (:func:`_clip_core` with kind "raw")."""
    with _stage("scfind.sample", device) as dev:
        out = _core._scfind_block_sample(
            _c(x), _c(mask), spec, mode, rep, rms0, kind, list(start), list(shape), sampling,
            ext, exact, dev, keep,
        )  # fmt: skip
    copied("scfind.sample", dev, x, mask, out)
    return out


def _slab_planes(stages, bounds, rows, ny):
    """The planes a slab call reads, as one array (planes z0 − below .. z1 + above, the slab's
    own spatial stage and its neighbours' halo): ``stages[i]``'s planes ``bounds[i]`` =
    (lo, hi), in z order, rows ``rows`` = (y0, y1) of ``ny`` (a copy when there are halos or
    row groups: the core takes one C-contiguous array)."""
    y0, y1 = rows
    ys = slice(None) if y1 - y0 == ny else slice(y0, y1)
    planes = [p[lo:hi, ys] for p, (lo, hi) in zip(stages, bounds)]
    return _c(planes[0] if len(planes) == 1 else np.concatenate(planes))


def _slab_core(mask, carry, bounds, spec, mode, below, z0, shape, sampling, ext, exact, device,
               keep, rows, *stages):  # fmt: skip
    """One core call on a z-slab (SoFiA-2's spectral running mean, on the worker's device):
    the slab's sample part from its spatial stage and its neighbours' halo: planes
    ``bounds[i]`` = (lo, hi) of ``stages[i]``, in z order (a neighbour on this worker comes
    whole and is cut here, not by a task of its own), and ``carry`` (the
    running mean over the slab, from the slab above; or that slab's result, when it is on
    this worker: its carry read here) → (slots, values, (min, max) or None, kept, the carry
    for the slab below, ``carry`` itself). kept: with ``keep`` "candidates" (CPU engine) the
    single call's clip candidates (:func:`_clip_group` decides from them; ``carry`` is
    returned for its spectral pass where they do not decide), else W. With ``rows`` =
    (y0, y1), only that group of rows of every plane (``carry`` holds its rows only; the
    pieces and ``mask`` hold all rows): one chain of the wavefront."""
    y0, y1 = (0, shape[1]) if rows is None else rows
    s = _slab_planes(stages, bounds, (y0, y1), shape[1])
    if isinstance(carry, tuple):
        carry = carry[4]
    carry = None if carry is None else _c(carry)
    mask = _c(mask[:, y0:y1])
    cands = keep == "candidates"
    with _stage("scfind.sample", device) as dev:
        out = _core._scfind_slab_sample(
            s, mask, spec, mode, below, carry, z0, list(shape), sampling, ext, exact, dev,
            not cands, y0, cands,
        )  # fmt: skip
    copied("scfind.sample", dev, s, mask, carry, out)
    return (*out, carry)


def _sample_of(*parts):
    """The sample part of core results ``parts`` (of :func:`_sample_core` or
    :func:`_slab_core`) on one worker, as one small object: (slots, values, (min, max) or None)
    — what the client's reduction reads, without the kept W (one task, not one a field)."""
    if len(parts) == 1:
        return parts[0][:3]
    ext = [p[2] for p in parts if p[2] is not None]
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        (min(e[0] for e in ext), max(e[1] for e in ext)) if ext else None,
    )


def _clip_core(x, mask, spec, mode, rep, rms0, exact, kind, level, device=None):
    """One core call: the block's W (as :func:`_sample_core`; kind "raw": ``x`` is W, as
    :func:`_sample_core` kept it) and ``mask |= |W| > level``."""
    with _stage("scfind.clip", device) as dev:
        out = _core._scfind_block_clip(
            _c(x), _c(mask), spec, mode, rep, rms0, kind, level, exact, dev
        )
    copied("scfind.clip", dev, x, mask, out)
    return out


def _clip_rows(mask, rows, level, spec, mode, rep, rms0, exact, device, read, n, *rest):
    """The clip of a z-slab whose slab pass (:func:`_slab_core`) kept its results in groups of
    rows: ``rest[:n]``, the core results of its groups, rows ``rows[j]..rows[j + 1]``
    (:meth:`_Noise.slabs`); one core call a group → the slab's mask (one task a slab: the
    mask stays in z-slabs). With ``read`` = (the cube's shape, z0, below, bounds), the
    results hold the single call's clip candidates (CPU engine): :func:`_clip_group` with
    the slab's planes ``rest[n:]``; with None, W (:func:`_clip_core`, kind "raw")."""
    parts, stages = rest[:n], rest[n:]
    out = []
    for p, y0, y1 in zip(parts, rows, rows[1:]):
        m = mask[:, y0:y1]
        if read is None:
            out.append(_clip_core(p[3], m, spec, mode, rep, rms0, exact, "raw", level, device))
        else:
            out.append(_clip_group(m, p, (y0, y1), level, spec, mode, exact, device, read, stages))
    return out[0] if len(out) == 1 else np.concatenate(out, axis=1)


def _clip_group(mask, part, rows, level, spec, mode, exact, device, read, stages):
    """The clip of one group of rows of a z-slab (CPU engine) from the clip candidates its
    core call kept (``part``, :func:`_slab_core`'s result), as the single call decides it
    (``_core._scfind_slab_clip``): each column block whose candidates hold every voxel above
    ``level`` from them, the others by the spectral pass over that block again, from the
    planes the core call read (``stages`` cut by ``read`` = (the cube's shape, z0, below,
    bounds): the slab's spatial stage and its neighbours' halo) and its carry, so the same W
    bit for bit. A second core call, with those planes, only when a block needs them."""
    shape, z0, below, bounds = read
    args = (_c(mask), spec, mode, float(level), part[3], z0, list(shape), int(rows[0]))
    with _stage("scfind.clip", device) as dev:
        got = _core._scfind_slab_clip(*args, exact=exact, device=dev)
        if got is None:  # a block its candidates do not decide: its spectral pass again
            s = _slab_planes(stages, bounds, rows, shape[1])
            got = _core._scfind_slab_clip(*args, s=s, below=below, carry=part[5], exact=exact,
                                          device=dev)  # fmt: skip
    return got


def _prepare_mask(cube, mask):
    m = (mask != 0).astype(np.uint8)
    return m | (np.isnan(cube).astype(np.uint8) << 7)


#: The spec handed to the "raw" sample (the cube's own values: no kernel runs).
_RAW = ("gaussian", 0.0, 0.0, "none", 0.0, False)


def _needs_extremes(noise) -> bool:
    """Whether the core's noise rule ``noise`` uses the cube's (min, max) (SoFiA-2's Gaussian
    fit; SoFiA 1's "negative" and "gauss")."""
    return noise[0] in ("sofia2x:gauss", "sofia1:negative", "sofia1:gauss")


class _Noise:
    """The core's noise rule over the whole cube from block tasks: each task (one core call,
    :func:`_sample_core`) hands in its voxels of SoFiA-2's sample (≤ ~10⁶ values in all) and
    its (min, max); the client puts them in slot order and applies the rule (exact median,
    SoFiA-2's order of the MAD walk, the histogram fit) — one global reduction per kernel."""

    def __init__(self, run, shape, single, compute, device):
        kind, c = run.sampling
        self.run, self.shape, self.single = run, shape, single
        self.sampling = (kind, max(int(c), 1))
        self.compute, self.device = compute, device
        self.ext = _needs_extremes(run.noise)

    def __call__(self, src, m, spec, kind, rms0=0.0, keep=False, owners=None):
        """The noise of W = ``kind`` ("raw", "cube", "smoothed") of dask cube ``src`` with
        mask ``m`` (the same chunks) under kernel ``spec``; with ``keep`` also W (a dask
        array of ``src``'s chunks, persisted where its blocks were made): (noise, W). With
        ``owners`` (``src`` in z-slabs), slab k's task runs on ``owners[k]``."""
        import dask

        run = self.run
        starts = [np.cumsum((0,) + ch[:-1]) for ch in src.chunks]
        xs, ms = src.to_delayed(), m.to_delayed()
        task = dask.delayed(_sample_core)
        rep = tuple(run.replace)
        parts = np.empty(xs.shape, dtype=object)
        for idx in np.ndindex(xs.shape):
            start = tuple(int(starts[a][i]) for a, i in enumerate(idx))
            with _pin(owners, idx[0]):
                parts[idx] = task(
                    xs[idx], ms[idx], spec, run.edge_mode, rep, rms0, run.exact, kind, start,
                    self.shape, self.sampling, self.ext, self.device, keep,
                )  # fmt: skip
        return self._finish(parts, src, keep, owners)

    def slabs(self, ss, m, spec, owners, groups=1, candidates=False):
        """The noise of W = ``spec``'s both stages (its spectral stage SoFiA-2's running mean,
        a boxcar of radius r along z) of the z-slabs whose spatial stages are ``ss`` (delayed,
        one a slab, :func:`_spatial_block` or :func:`_spatial_update`) with mask ``m`` (z-slabs
        of the same planes), and what the clip reads, kept where its slabs were made: W, or
        with ``candidates`` (CPU workers) the single call's clip candidates. Returns (the noise
        as a persisted delayed value, computed on a worker: the clip reads it there, with no
        round trip to the client; (the persisted core results by slab and row group, W or the
        candidates at index 3; the groups' row edges; ``ss`` persisted, for the next kernel of
        this spatial size; with ``candidates``, by slab the planes its core calls read, for
        the clip's spectral pass where the candidates do not decide: (z0, below, bounds, the
        persisted stages), else None)). Per slab the
        spatial stage, then per group of rows
        (``groups`` of them, as even as the rows allow) one core call (:func:`_slab_core`)
        from the top slab down, each handed the running mean at its top by the same group of
        the slab above (its rows of one plane) and its neighbours' r planes below and r + 1
        above — no transposition. The groups' chains are independent: they run as a
        wavefront over the workers (a worker works on its slabs of one chain while the next
        worker down works on an earlier chain). Every task of slab k runs on ``owners[k]``
        (where ``base``'s slab is). Tasks a kernel (B slabs, J groups, c slab edges between
        workers): B spatial, B·J core calls, B sample parts; a halo piece crosses an edge
        between workers as its own task (2c); with ``candidates`` each group reads its carry from
        the whole result above, on its worker or across an edge, else the J carries cross an
        edge as their own tasks (c·J), and within a worker the consumer reads its neighbour's
        results."""
        import uuid

        import dask

        run, nz, ny = self.run, self.shape[0], self.shape[1]
        r = int(spec[4]) // 2
        edges = np.cumsum((0,) + tuple(m.chunks[0])).tolist()
        yedges = np.linspace(0, ny, min(max(int(groups), 1), ny) + 1).round().astype(int)
        yedges = yedges.tolist()
        ms = m.to_delayed().ravel()
        # the whole pass one layer of tasks named here (no token of the arguments): built in
        # time linear in its tasks, where a dask.delayed call a task merged the graphs of its
        # inputs (a carry's holds its chain: O(B²·J) a kernel; bench/NOTES.md, session 20)
        hexa = uuid.uuid4().hex
        name, cut, small_name = f"slab_core-{hexa}", f"getitem-{hexa}", f"sample_of-{hexa}"
        layer = _Layer(owners)
        keys = np.empty((len(ss), len(yedges) - 1), dtype=object)
        keep = "candidates" if candidates else True
        reads = [None] * len(ss)  # by slab: (z0, below, bounds, stage keys) its calls read
        cuts = []  # the halo pieces cut where made (kept too: the clip may read them again)
        for k in reversed(range(len(ss))):
            z0, z1 = edges[k], edges[k + 1]
            below, above = min(r, z0), min(r + 1, nz - z1)
            lo, hi = z0 - below, z1 + above
            stages, bounds = [], []  # the slab's own S and its neighbours' halo, in z order
            for i, (e0, e1) in enumerate(zip(edges[:-1], edges[1:])):
                a, b = max(lo, e0) - e0, min(hi, e1) - e0
                if a >= b:
                    continue
                if _same_worker(owners, i, k):
                    stages.append(ss[i].key)  # cut by the consumer
                    bounds.append((a, b))
                else:  # cut where made: crosses once for all J groups (and for every
                    key = (cut, i, a, b)  # slab that reads the same planes of it)
                    if key not in layer.tasks:
                        layer.add(key, i, operator.getitem, layer.ref(ss[i].key), slice(a, b))
                        cuts.append(key)
                    stages.append(key)
                    bounds.append((0, b - a))
            reads[k] = (z0, below, bounds, stages)
            for j, rows in enumerate(zip(yedges[:-1], yedges[1:])):
                carry = keys[k + 1, j] if k + 1 < len(ss) else None  # the group's above
                # across an edge between workers: with the candidates, the whole result (the
                # candidates and two carries, ~0.5-0.8 MB a group at the 8 GB graph's shape),
                # where a task of its own cutting the carry cost each chain a scheduler hop
                # and the kernel c·J tasks (bench/NOTES.md, session 20, dask11); with W, the
                # carry cut where made (W stays there)
                if carry is not None and not candidates and not _same_worker(owners, k + 1, k):
                    layer.add((cut, "carry", k + 1, j), k + 1, operator.getitem,
                              layer.ref(carry), 4)  # fmt: skip
                    carry = (cut, "carry", k + 1, j)
                # chain j first on a worker that holds several chains' tasks: the wavefront
                keys[k, j] = (name, k, j)
                layer.add(
                    keys[k, j], k, _slab_core, layer.ref(ms[k].key), layer.ref(carry), bounds,
                    spec, run.edge_mode, below, z0, self.shape, self.sampling, self.ext,
                    run.exact, self.device, keep, rows, *map(layer.ref, stages), priority=-j,
                )  # fmt: skip
        for k in range(len(ss)):
            layer.add((small_name, k), k, _sample_of, *map(layer.ref, keys[k]))
        graph = layer.graph(name, [*ss, *ms])
        # the core results as one collection, an array of B × J blocks (each a core call's
        # result tuple; never computed as an array): dask.persist merges (and optimises) each
        # collection's whole graph alone — ~1000 delayed values sharing this graph took
        # seconds a kernel (bench/NOTES.md, session 20, dask11)
        grid = dask_array().Array(graph, name, tuple((1,) * n for n in keys.shape),
                                  meta=np.empty((0, 0), dtype=object))  # fmt: skip
        cuts = [layer.delayed(key, graph, name) for key in cuts]
        small = [layer.delayed((small_name, k), graph, name) for k in range(len(ss))]
        rms = self._rule_of(small)
        # one graph: the core results and S stay on their workers (persisted), the noise is a
        # task; with candidates the halo pieces too (the clip's spectral pass may read them).
        # Not optimised: every task of it is needed (nothing to cull), and no fusing may
        # rename the keys the clip reads
        cuts = cuts if candidates else []
        kept = dask.persist(grid, *ss, *cuts, rms, optimize_graph=False)
        parts = kept[0].to_delayed(optimize_graph=False)
        stages = kept[1 : 1 + len(ss) + len(cuts)]
        if candidates:  # each slab's pieces, persisted: the same keys, held until its clip
            now = {d.key: p for d, p in zip([*ss, *cuts], stages)}
            reads = [(z0, below, bounds, [now[key] for key in st])
                     for z0, below, bounds, st in reads]  # fmt: skip
        else:
            reads = None
        return kept[-1], (parts, yedges, list(stages[: len(ss)]), reads)

    def _finish(self, parts, src, keep, owners=None):
        """The noise from the block tasks ``parts`` (in ``src``'s block layout) and, with
        ``keep``, W as a dask array of those chunks, persisted on the workers: then the noise
        is a persisted delayed value, computed on a worker (:meth:`slabs`'s): the clip reads it
        there, and the client queues the next kernel without waiting for it."""
        import dask

        if not keep:
            return self._noise(self.compute(list(parts.flat)))
        # W stays on the worker that made it (persisted); only the sample parts leave it
        kept = dask.persist(*parts.flat)
        small = []
        for j, idx in enumerate(np.ndindex(parts.shape)):
            with _pin(owners, idx[0]):
                small.append(dask.delayed(_sample_of)(kept[j]))
        calls = {idx: (kept[j], 3) for j, idx in enumerate(np.ndindex(parts.shape))}
        w = _pinned_blocks(operator.getitem, calls, src.chunks, owners, src.dtype)
        # persisted: the client holds the result until it reads it (never computed twice)
        return dask.persist(self._rule_of(small))[0], w

    def _rule_of(self, small):
        """The noise rule on the sample parts ``small`` (delayed, top-level arguments: see
        :meth:`slabs`) as a delayed task."""
        import dask

        run = self.run
        return dask.delayed(_noise_rule)(self.shape, self.sampling, run.noise, run.sampling,
                                         self.single, *small)  # fmt: skip

    def _noise(self, results):
        """The core's noise rule on the sample parts ``results``, here (:func:`_noise_rule`)."""
        run = self.run
        return _noise_rule(self.shape, self.sampling, run.noise, run.sampling, self.single,
                           *results)  # fmt: skip


def _noise_rule(shape, sampling, rule, run_sampling, single, *results):
    """The core's noise rule ``rule`` on the sample parts ``results`` ((slots, values,
    (min, max) or None) each; the whole cube's sample of ``sampling`` = (kind, step)), put in
    slot order: on the client, or as a task whose result the clip tasks read."""
    kind_s, c = sampling
    size = int(np.prod(shape))
    n = size // c if kind_s == "backward" else -(-size // c)
    samples = np.full(n, np.nan)
    lo, hi = np.inf, -np.inf
    for slots, vals, ext, *_ in results:
        samples[slots] = vals
        if ext is not None:
            lo, hi = min(lo, ext[0]), max(hi, ext[1])
    ext = (lo, hi) if lo <= hi else None
    return float(_core._scfind_noise(samples, ext, rule, run_sampling, list(shape), single))


class _Layer:
    """Tasks of one graph layer, built as a plain dict (:meth:`_Noise.slabs`): each task on
    the worker of its slab (``owners``, as :func:`_pin`) with an optional priority, as the
    layer's per-key annotations."""

    def __init__(self, owners):
        self.owners, self.tasks, self.where, self.priority = owners, {}, {}, {}

    @staticmethod
    def ref(key):
        """A task's input that is the result of task ``key`` (None stays None)."""
        from dask._task_spec import TaskRef

        return None if key is None else TaskRef(key)

    def add(self, key, k, fn, *args, priority=None):
        """Task ``key``: ``fn(*args)`` on slab k's worker."""
        from dask._task_spec import Task

        self.tasks[key] = Task(key, fn, *args)
        if self.owners and self.owners[k] is not None:
            self.where[key] = [self.owners[k]]
        if priority:
            self.priority[key] = priority

    def graph(self, name, dependencies):
        """The layer as graph ``name`` over the graphs of the collections ``dependencies``."""
        from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

        notes = {}
        if self.where:  # per key (dict.get: None where a task has no worker)
            notes["workers"] = self.where.get
            notes["allow_other_workers"] = dict.fromkeys(self.where, True).get
        if self.priority:
            notes["priority"] = self.priority.get
        layer = MaterializedLayer(self.tasks, annotations=notes or None)
        return HighLevelGraph.from_collections(name, layer, dependencies=dependencies)

    @staticmethod
    def delayed(key, graph, name):
        """Task ``key`` of ``graph``'s layer ``name`` as a delayed value."""
        from dask.delayed import Delayed

        return Delayed(key, graph, layer=name)


def _same_worker(owners, i, k):
    """Whether slabs i and k are on one worker (always, without a Distributed client: one
    process)."""
    return not owners or (owners[i] is not None and owners[i] == owners[k])


def _pin(owners, k):
    """Where slab k's tasks run: on ``owners[k]`` (a worker's address) when known, else
    wherever the scheduler puts them."""
    import contextlib

    import dask

    if not owners or owners[k] is None:
        return contextlib.nullcontext()
    return dask.annotate(workers=[owners[k]], allow_other_workers=True)


#: Chains of the wavefront (row groups of every slab, :meth:`_Noise.slabs`) a one-thread worker
#: brings: a worker whose slabs lie below another's starts once the first chain reaches it, so
#: with contiguous slabs the pass takes ~(J + N − 1)/J of its share (N workers).
GROUPS_PER_THREAD = 2

#: Chains a worker of several threads brings, whatever their number: each of its core calls
#: runs on its whole pool (skyconv's threads = its Dask threads, :func:`cluster.pool_of_worker`),
#: so its chains need not fill its Dask threads (fewer, larger tasks: ~1/8 of the scheduler's
#: and the client's work at 1 × 16); four, so that one chain's serial part (its rows' copy with
#: the halo, Python) overlaps three others' core calls. The 16-core host at 2 GB (bench/NOTES.md,
#: session 17, dask8): 1 × 16 with 4 chains as fast as with 7, 2 × 8 with 2 slower than with 7.
GROUPS_PER_POOL = 4

#: Fewest voxels of a group task: each costs Dask ~1 ms or more (far more on a loaded machine;
#: bench/NOTES.md, session 13), against ~10 ns a voxel of core work on one thread (~1 ms for
#: 2**21 voxels on a pool of 16).
MIN_GROUP_VOXELS = 2**21

#: The number of row groups (None: from the cluster and the slabs; 1: one chain, whole planes).
SLAB_GROUPS = None


def _groups(shape, planes):
    """How many row groups (chains) the slab pass splits each slab of ``planes`` planes of a
    cube of ``shape`` into: :data:`GROUPS_PER_THREAD` a one-thread worker of the cluster,
    :data:`GROUPS_PER_POOL` a worker of several threads, none of fewer than
    :data:`MIN_GROUP_VOXELS` voxels, at most one a row; one with a single Dask thread."""
    ny = shape[1]
    if SLAB_GROUPS is not None:
        return max(1, min(int(SLAB_GROUPS), ny))
    if cluster.threads() < 2:
        return 1
    big = planes * shape[1] * shape[2] // MIN_GROUP_VOXELS
    chains = sum(GROUPS_PER_THREAD if w.get("nthreads", 1) < 2 else GROUPS_PER_POOL
                 for w in cluster.workers())  # fmt: skip
    return max(1, min(ny, chains, big))


def _persist_slabs(base):
    """``base`` (z-slabs) persisted in contiguous runs, slab k read on the k·N // B-th of the N
    workers (sorted by address; B slabs): N − 1 slab edges between workers, each crossed by
    a halo and a carry per spectral kernel, instead of up to B − 1 → (base, the worker of
    each slab, or None without a Distributed client). One persist per slab: a layer's
    per-key worker annotations do not survive Dask's graph optimisation."""
    client = cluster.client()
    if client is None:
        return base.persist(), None
    workers = [w["address"] for w in cluster.workers()]
    da = dask_array()
    nb = base.numblocks[0]
    parts = [
        client.persist(
            base.blocks[k], workers=[workers[k * len(workers) // nb]], allow_other_workers=True
        )  # fmt: skip
        for k in range(nb)
    ]
    base = da.concatenate(parts).persist()
    return base, _owners(base)


def _owners(a):
    """The worker holding each block of the persisted z-slabs ``a`` (None where unknown, or
    without a Distributed client)."""
    who = cluster.holders(a, wait=True)
    if who is None:
        return None
    return [who.get((k,) + (0,) * (a.ndim - 1)) for k in range(a.numblocks[0])]


#: The block functions the out-of-core path (``cube_ooc``) runs, as this module's.
_BLOCKS = {
    "spatial": _spatial_block,
    "clip": _clip_core,
    "prepare_mask": _prepare_mask,
}

#: Cubes up to this many bytes run as one task (the single call on one worker): below it the
#: staged graph's per-kernel reductions and rechunks cost more than the whole call
#: (bench/dask_scfind.py --small; bench/NOTES.md).
SINGLE_TASK_BYTES = 16 * 2**20


def _single_call(x, m, run, device):
    """The single-machine call on one block: (mask bit 0 as uint8, rms0, [rms])."""
    m3 = np.array(m != 0, dtype=np.uint8)
    with _stage("scfind.single", device) as dev:
        rms0, rms = _core._scfind(
            _c(x), m3, run.specs, run.edge_mode, run.threshold, False, tuple(run.replace),
            run.noise, run.sampling, device=dev, exact=run.exact, detected=False,
        )  # fmt: skip
    return m3, float(rms0), [float(r) for r in rms]


def _one_task(x, m, run, device, progress):
    """Smooth + Clip of a small cube as one task; the mask stays on the cluster (persisted)."""
    import dask

    da = dask_array()
    xs, ms = x.rechunk(-1), m.rechunk(-1)
    res = dask.delayed(_single_call, nout=3)(xs.to_delayed().item(), ms.to_delayed().item(),
                                             run, device)  # fmt: skip
    out = da.from_delayed(res[0], x.shape, dtype=np.uint8)
    # one run of the call: unoptimised, so the array's fused copy of the task is not a second run
    out, r0, r = dask.persist(out, res[1], res[2], optimize_graph=False)
    rms0, rms = dask.compute(r0, r)
    for i, r in enumerate(rms):
        if progress is not None:
            progress(i + 1, len(rms), r)
    return out, float(rms0), list(rms)


def _compute(parts):
    import dask

    return dask.compute(*parts)


#: Most pieces (input blocks × output blocks) of a rechunk made in one step.
ONE_STEP_PIECES = 100_000


def _rechunk(a, chunks):
    """``a.rechunk(chunks)`` by Dask's task-based method unless ``array.rechunk.method`` is
    set (e.g. ``"p2p"``, Distributed's disk-backed shuffle): the per-kernel rechunks of small
    cubes are dominated by a shuffle's start-up costs. In one step (every piece goes from its
    input block's worker straight to its output block's) up to :data:`ONE_STEP_PIECES`: the
    slab ↔ column transposition otherwise passes Dask's graph-size threshold and takes an
    intermediate chunking, which moves the cube between workers twice (bench/NOTES.md,
    session 11)."""
    import dask

    method = dask.config.get("array.rechunk.method", None) or "tasks"
    target = a.rechunk(chunks, method=method, threshold=float("inf"))  # chunks normalised
    if target.chunks == a.chunks:
        return a
    if a.npartitions * target.npartitions <= ONE_STEP_PIECES:
        return target
    return a.rechunk(chunks, method=method)


#: Kernels queued ahead of the one whose noise the client reads (:func:`_kernels`): with the
#: cube kept in memory on CPU workers every kernel's noise is a task's result that its clip
#: tasks read on the workers, so the client builds and sends kernel k + 1's graph while kernel k
#: runs and reads kernel k's noise (for ``progress`` and the result) only then; the workers
#: no longer wait between kernels for the client's round trip and graph building
#: (bench/NOTES.md, session 19, dask10). 0: each kernel's noise read before the next is built.
KERNELS_AHEAD = 1

#: The slab pass builds each kernel's spatial stage from the last of its spatial size, kept on
#: the slabs' workers, smoothing again only the planes whose mask changed
#: (:func:`_spatial_stages`); False: from the cube, every plane every kernel (the earlier graph,
#: which bench/dask_sc_profile.py's ``rebuild`` measures against).
SPATIAL_REUSE = True

#: With the cube kept in memory, kernels with SoFiA-2's spectral running mean run on z-slabs
#: with a carry (:meth:`_Noise.slabs`), on CPU and GPU workers; False: through whole-z
#: columns (the earlier graph, which bench/dask_sc_profile.py --columns measures against).
Z_SLABS = True

#: GPU workers take the z-slab pass too (the CUDA twin of the slab call, bit for bit the CPU's).
#: Off: on 2 × H200 (session 15, 2 GB cube, 12 kernels) it moved 65× the cube over PCIe from
#: pageable memory in ~8600 small calls: 1 GPU worker 57.4 s, 2 workers 36.0 s (1.60×), where
#: the column graph took 26.3 s / 24.6 s (session 11). The slab pass's PCIe bytes a kernel
#: (S and W up and down per call) must fall first: bench/NOTES.md, session 15, gpuslab.
Z_SLABS_GPU = False


def _slab_pass(keep, exact, spec, device) -> bool:
    """Whether kernel ``spec`` runs as the z-slab pass (:meth:`_Noise.slabs`): the cube kept
    in memory (``keep``: the slabs persisted where they are read, W kept between the noise and
    the clip), SoFiA-2's arithmetic (``exact``), a boxcar along z, its own noise, and CPU
    workers unless :data:`Z_SLABS_GPU`. The slab call runs on either engine with the same
    values (on a GPU each (slab, group) call uploads its spatial stage and halo, runs the
    running mean there and downloads its sample part, W and carry)."""
    _, _, _, zk, _, use_rms0 = spec
    on = Z_SLABS and keep and exact and zk == "boxcar" and not use_rms0
    return on and (Z_SLABS_GPU or _on_cpu(device))


def _spatial_stages(base, m, spec, stage_args, owners, prev):
    """The spatial stage of ``spec`` (``stage_args`` = mode, replace, rms0, exact, device) of
    each z-slab of ``base`` with mask ``m`` (delayed, slab k's on ``owners[k]``): from
    ``prev`` = (spatial kernel, S by slab or W (z-slabs), the mask (z-slabs) it was built from,
    whether W), the last stage of this spatial size kept on the slabs' workers, only the
    planes whose mask changed are smoothed again (:func:`_spatial_update`; SoFiA-2's kernels
    run by spatial size, each kernel's mask a superset of the last); otherwise, and for
    spatial size 0 (a copy with the replacement, where an update's copy and compare measured
    slower: bench/NOTES.md, session 15, dasks), the whole slab (:func:`_spatial_block`)."""
    import dask

    xs, ms = base.to_delayed().ravel(), m.to_delayed().ravel()
    if not SPATIAL_REUSE or spec[1] == 0 or (prev is not None and prev[0] != spec[:3]):
        prev = None
    if prev is not None:
        old = prev[1].to_delayed().ravel() if hasattr(prev[1], "to_delayed") else prev[1]
        pms = prev[2].to_delayed().ravel()
    ss = []
    for k in range(len(xs)):
        with _pin(owners, k):
            if prev is None:
                ss.append(dask.delayed(_spatial_block)(xs[k], ms[k], spec, *stage_args))
            else:
                ss.append(dask.delayed(_spatial_update)(
                    old[k], pms[k], prev[3], xs[k], ms[k], spec, *stage_args
                ))  # fmt: skip
    return ss


def _slab_map(fn, args, owners):
    """``map_blocks(fn, *args)`` → uint8 for arrays ``args[:2]`` of the same chunks, whole
    planes along x: the tasks of slab k on ``owners[k]`` (run now, persisted)."""
    xa, xb = args[0].to_delayed(), args[1].to_delayed()
    calls = {idx: (xa[idx], xb[idx], *args[2:]) for idx in np.ndindex(xa.shape)}
    return _pinned_blocks(fn, calls, args[0].chunks, owners)


def _pinned_blocks(fn, calls, chunks, owners, dtype=np.uint8):
    """The dask array (``chunks``, ``dtype``) whose block idx is ``fn(*calls[idx])``, run on
    the worker of its slab (``owners[idx[0]]``) and persisted now. The blocks are those
    tasks' own keys: no wrapper task a block (``from_delayed``/``block`` make two), and no
    array layer over the pinned tasks, which Dask's graph optimisation would fuse with them,
    dropping their worker annotations (``_pin``)."""
    import uuid

    import dask

    name = f"{fn.__name__}-{uuid.uuid4().hex}"
    tasks = []
    for idx, args in calls.items():
        with _pin(owners, idx[0]):
            tasks.append(dask.delayed(fn)(*args, dask_key_name=(name, *idx)))
    graph = {}
    for done in dask.persist(*tasks):
        graph.update(done.__dask_graph__())
    meta = np.empty((0,) * len(chunks), dtype)
    return dask_array().Array(graph, name, chunks, meta=meta)


def _slab_clip(kept, m, spec, mode, rep, rms0, exact, level, device, shape, owners):
    """The clip of a slab pass's results, kept in z-slabs by row groups (``kept`` = (the core
    results by slab and group, the groups' row edges, S, the planes each slab's calls read or
    None) as :meth:`_Noise.slabs` returns them; ``m`` the mask in z-slabs; ``spec`` the
    kernel, of the cube of ``shape``): one task a slab (:func:`_clip_rows`) on the worker
    that holds the slab's results, ``owners[k]`` → the mask in z-slabs (persisted)."""
    parts, rows, _, reads = kept
    ms = m.to_delayed().ravel()
    calls = {}
    for k in range(len(ms)):
        n = len(parts[k])
        if reads is None:  # W: read as it is
            args = (_RAW, mode, rep, rms0, exact, device, None, n, *parts[k])
        else:  # the candidates, and the planes their spectral pass may read again
            z0, below, bounds, stages = reads[k]
            read = (shape, z0, below, bounds)
            args = (spec, mode, rep, rms0, exact, device, read, n, *parts[k], *stages)
        calls[(k, 0, 0)] = (ms[k], rows, level, *args)
    return _pinned_blocks(_clip_rows, calls, m.chunks, owners)


def _fits_in_memory(nbytes):
    """Whether a cube of `nbytes` takes < 30 % of the cluster's (or this machine's) memory."""
    info = cluster.workers()
    if info:
        total = sum(w.get("memory_limit") or 0 for w in info)
    else:
        try:
            import psutil
        except ImportError:
            return False
        total = psutil.virtual_memory().available
    return nbytes < 0.3 * total


def _on_cpu(device) -> bool:
    """Whether ``device`` resolves to the CPU engine on every worker (asked once: the workers of
    the default Distributed client, else this process). A GPU worker's clip of a kernel off
    the z-slab pass smooths its block again on the device rather than reading back a kept W
    (its PCIe traffic is the bound); the z-slab pass keeps the clip candidates on CPU workers
    and W on GPU workers (their engine keeps no candidates)."""
    from .._utils.device import resolve

    def core(device=device):
        return resolve(device).core

    if device == "cpu":
        return True
    client = cluster.client()
    if client is None:
        return core() == "cpu"
    try:
        return set(client.run(core).values()) == {"cpu"}
    except Exception:  # noqa: BLE001 (a worker that cannot resolve it: smooth twice, as before)
        return False


def _planes(x, limit):
    """z-slab chunks (whole planes) of at most ~`limit` bytes (one plane at least)."""
    plane = x.shape[1] * x.shape[2] * x.dtype.itemsize
    zc = max(1, min(x.shape[0], int(limit // max(plane, 1))))
    return (x.chunks[0] if max(x.chunks[0]) <= zc else zc, -1, -1)


def _columns(x, limit):
    """Whole-z column chunks of at most ~`limit` bytes (one column at least)."""
    col = x.shape[0] * x.dtype.itemsize
    n = max(1, int(limit // max(col, 1)))
    yc = max(1, min(x.shape[1], int(np.sqrt(n))))
    xc = max(1, min(x.shape[2], n // yc))
    return (-1, yc, xc)


def smooth_and_clip(
    cube, run, mask=None, device=None, *, progress=None, chunk_bytes=None, keep_smoothed=None,
    out_of_core=None, scratch=None, single_task_bytes=None,
):  # fmt: skip
    """``skyconv.smooth_and_clip`` for a dask cube (or mask), with the settings ``run`` that
    ``skyconv.cube._setup`` checked (the public function calls this in one line).

    Parameters
    ----------
    cube : dask.array.Array or array
        float32/float64, (z, y, x) or (y, x), known chunk sizes.
    run : skyconv.cube._Run
        The checked settings (kernels, threshold, replacement, noise rule, sampling).
    mask : array or dask.array.Array, optional
        Voxels in the mask on entry (nonzero).
    device : str or None
        Checked here (spelling), resolved by each task on its worker
        (:mod:`skyconv._dask.device`).
    progress : callable, optional
        ``progress(done, total, noise)`` after each kernel.
    chunk_bytes : int, optional
        Bytes per block of the working chunkings (default: the input's largest chunk); a
        block holds at least one whole plane (spatial stage) or one whole z line (spectral).
    keep_smoothed : bool, optional
        Keep the cube (as z-slabs, read once) and each kernel's W (the smoothed cube) in the
        cluster's memory between its noise and its clip (one smoothing and one transposition
        per kernel instead of two). Default: when the cube takes less than 30 % of the
        cluster's memory (the workers' memory limits; the machine's available memory without
        a Distributed client).
    out_of_core : bool, optional
        Exchange the kernels' smoothed cubes through a temporary zarr store
        (:mod:`skyconv._dask.cube_ooc`) instead of in-memory rechunks, so that no worker
        holds more than its blocks. Default: when the cube takes 30 % of the cluster's memory
        or more (as ``keep_smoothed``).
    scratch : str, optional
        Directory for that store (on storage every worker reaches; default: Dask's
        ``temporary-directory``, else the system's temporary directory).
    single_task_bytes : int, optional
        A cube of at most this many bytes (default :data:`SINGLE_TASK_BYTES`), or one that is a
        single chunk, runs as one task: the single-machine call on one worker.

    Returns
    -------
    mask : dask.array.Array
        uint8 (1 = source), lazy, the input's chunks (it reads the persisted mask of the last
        kernel).
    rms0 : float
        The noise of the original cube (data units).
    rms : list of float
        The noise of each smoothed cube, in kernel order.

    Raises
    ------
    TypeError
        The cube is not float32/float64, or the mask not boolean/integer.
    skyconv.ShapeError
        The mask's shape differs from the cube's.
    skyconv.ArgumentError
        Unknown chunk sizes.
    skyconv.ArgumentTypeError
        ``scratch`` is not a path.
    """
    da = dask_array()
    x = cube if hasattr(cube, "dask") else da.asarray(cube)
    check_known_chunks(x, "cube")
    check_float(x, "cube")
    dev = check_device(device)  # a bad name fails here; the workers resolve it
    if scratch is not None and not isinstance(scratch, (str, os.PathLike)):
        raise ArgumentTypeError(
            f"scratch must be a directory path (str or os.PathLike) or None, got "
            f"{type(scratch).__name__} {scratch!r}"
        )
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    in_chunks, ndim = x.chunks, x.ndim
    if mask is None:
        m = da.zeros(x.shape, dtype=np.uint8, chunks=x.chunks)
    else:
        m = mask if hasattr(mask, "dask") else da.asarray(mask)
        check_known_chunks(m, "mask")
        if m.dtype.kind not in "biu":
            raise ArgumentTypeError(f"mask must be a boolean or integer array, got dtype {m.dtype}")
        if m.shape != x.shape:
            raise ShapeError(f"mask has shape {m.shape}, the cube has {x.shape}")
        m = _rechunk(m, x.chunks)
    if ndim == 2:
        x, m = x[None], m[None]
    shape = tuple(int(n) for n in x.shape)
    single = x.dtype == np.float32
    limit = chunk_bytes or int(np.prod([max(c) for c in x.chunks])) * x.dtype.itemsize
    small = SINGLE_TASK_BYTES if single_task_bytes is None else int(single_task_bytes)
    if x.npartitions == 1 or x.nbytes <= small:
        out, rms0, rms_list = _one_task(x, m, run, dev, progress)
        return _rechunk(out[0] if ndim == 2 else out, in_chunks), rms0, rms_list
    ooc = not _fits_in_memory(x.nbytes) if out_of_core is None else bool(out_of_core)
    noise = _Noise(run, shape, single, _compute, dev)
    if ooc:
        from .cube_ooc import smooth_and_clip_ooc

        out, rms0, rms_list = smooth_and_clip_ooc(
            x, m, run, noise, _BLOCKS, limit=limit, scratch=scratch, progress=progress,
            device=dev,
        )  # fmt: skip
        return _rechunk(out[0] if ndim == 2 else out, in_chunks), rms0, rms_list
    keep = _fits_in_memory(x.nbytes) if keep_smoothed is None else bool(keep_smoothed)
    out, rms0, rms_list = _kernels(x, m, run, noise, limit, keep, dev, progress)
    if ndim == 2:
        out = out[0]
    return _rechunk(out, in_chunks), rms0, rms_list


def _kernels(x, m, run, noise, limit, keep, dev, progress):
    """The kernels in memory: per kernel one core call per block for the noise sample and one
    for the clip (:func:`_sample_core`, :func:`_clip_core`: smoothing, sample, extremes and
    clip in the core, on the worker's device), with the spatial stage on z-slabs first and one
    transposition to whole-z columns for kernels with both parts. With ``keep`` the cube is
    read once (persisted as z-slabs) and, on CPU workers, the sample call keeps each block's W
    on its worker for the clip (smoothed once a kernel; on GPU workers the smoothed cube is
    kept and the clip smooths it again on the device); without, the clip smooths again from
    the start. With ``keep`` the kernels with SoFiA-2's spectral running mean run on the
    z-slabs with a carry instead, the clip candidates kept on CPU workers, W on GPU workers
    (:meth:`_Noise.slabs`, :data:`Z_SLABS`, :func:`_slab_pass`). The mask
    stays in the layout of the last clip and is rechunked (1 byte a voxel) only when the next
    kernel's blocks differ. Where a kernel's noise is a task's result (CPU workers, ``keep``),
    the client reads it only after the next kernel's graph is sent (:data:`KERNELS_AHEAD`)."""
    import dask

    da = dask_array()
    rep, mode, exact = tuple(run.replace), run.edge_mode, run.exact
    planes, cols = _planes(x, limit), _columns(x, limit)
    base = _rechunk(x, planes)  # whole planes: every kernel's spatial stage reads these
    owners = None  # the workers of base's slabs: every task on a slab runs there
    if keep:
        base, owners = _persist_slabs(base)
    m = _slab_map(_prepare_mask, (base, _rechunk(m, base.chunks)), owners).persist()
    rms0 = noise(base, m, _RAW, "raw", owners=owners)
    specs = run.specs
    keep_w = keep and _on_cpu(dev)  # W kept on the workers for the clip (else S, if keep)
    groups = _groups(x.shape, max(base.chunks[0]))  # the wavefront's chains (row groups)
    xcols = None  # the cube in columns, while consecutive spectral-only kernels use it
    # the last spatial stage of this spatial size, kept by slab for the slab pass's next kernel
    # (:func:`_spatial_stages`): (spatial kernel, S by slab or W, the mask it was built from,
    # whether it is W). The persisted arrays themselves, not their blocks' delayed (which do
    # not hold the results: their tasks would run again once the arrays are dropped)
    prev = None
    rms_list, queued = [], []  # the noise read, and that of the kernels queued since (delayed)
    for i, spec in enumerate(specs):
        _, sigma, _, zk, _, use_rms0 = spec
        has_xy, has_z = sigma > 0, zk != "none"
        src = None
        if _slab_pass(keep, exact, spec, dev):
            # z-slabs only: the spatial stage per slab, then the spectral pass slab by slab
            # with the running mean carried down (no transposition, W kept, no mask rechunk)
            mk = _rechunk(m, base.chunks)
            stage_args = (mode, rep, rms0, exact, dev)
            ss = _spatial_stages(base, mk, spec, stage_args, owners, prev)
            rms, w = noise.slabs(ss, mk, spec, owners, groups, candidates=keep_w)
            prev = (spec[:3], w[2], mk, False) if sigma > 0 else None
        else:
            if has_xy and has_z:
                ms = _rechunk(m, base.chunks)
                s = da.map_blocks(_spatial_block, base, ms, spec, mode, rep, rms0, exact, dev,
                                  dtype=x.dtype, meta=np.empty((0, 0, 0), x.dtype))  # fmt: skip
                src, kind = _rechunk(s, cols), "smoothed"
                if keep and not keep_w and not use_rms0:
                    src = src.persist()  # smoothed once: sampled, then clipped
            elif has_z:
                if xcols is None:
                    xcols = _rechunk(base, cols)
                    if keep:
                        xcols = xcols.persist()
                src, kind = xcols, "cube"
            else:  # spatial only, or no smoothing: whole planes
                src, kind = base, "cube"
            mk = _rechunk(m, src.chunks)
            on = owners if src is base else None  # slab k's tasks where its slab is
            if use_rms0:
                rms, w = rms0, None
            elif keep_w:  # smoothed once: W kept on the workers between the noise and the clip
                rms, w = noise(src, mk, spec, kind, rms0, keep=True, owners=on)
                if not has_z:  # W in z-slabs: the start of this size's spatial stages
                    prev = (spec[:3], w, mk, True)
            else:
                rms, w = noise(src, mk, spec, kind, rms0, owners=on), None
        if dask.is_dask_collection(rms):  # a task's result on a worker: the clip reads it there
            level = dask.delayed(operator.mul)(run.threshold, rms)
        else:
            level = run.threshold * rms
        if w is None:
            cut = (src, mk, spec, mode, rep, rms0, exact, kind, level, dev)
        else:
            cut = (w, mk, _RAW, mode, rep, rms0, exact, "raw", level, dev)
        if src is None:  # z-slabs, results in row groups: each clip where its slab is
            m = _slab_clip(w, mk, spec, mode, rep, rms0, exact, level, dev, noise.shape, owners)
        elif src is base and owners:  # z-slabs: each clip where its slab is
            m = _slab_map(_clip_core, cut, owners)
        else:
            m = da.map_blocks(_clip_core, *cut, dtype=np.uint8,
                              meta=np.empty((0, 0, 0), np.uint8))  # fmt: skip
        m = m.persist()
        queued.append(rms)
        # the kernel's W and core results are now wanted only by its queued clips: released
        # as they finish, before the next kernel makes its own (one kernel's W held, not two)
        del src, mk, w, cut, level
        nxt = specs[i + 1] if i + 1 < len(specs) else None
        if nxt is None or nxt[1] > 0 or nxt[3] == "none":
            xcols = None
        if prev is not None and (nxt is None or nxt[:3] != prev[0] or not _slab_pass(
            keep, exact, nxt, dev
        )):  # fmt: skip
            prev = None  # kept only for the slab pass of a next kernel of this spatial size
        # the noise of kernel k is read once kernel k + KERNELS_AHEAD is queued: the workers go
        # from kernel k's clips to the next kernel's tasks without waiting for the client
        while queued and (len(queued) > KERNELS_AHEAD or nxt is None
                          or not dask.is_dask_collection(queued[0])):  # fmt: skip
            rms = queued.pop(0)
            if dask.is_dask_collection(rms):
                rms = noise.compute([rms])[0]
            rms_list.append(float(rms))
            if progress is not None:
                progress(len(rms_list), len(specs), rms)
    out = (m & np.uint8(1)).astype(np.uint8)
    return out, float(rms0), rms_list


__all__ = ["smooth_and_clip"]
