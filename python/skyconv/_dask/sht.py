"""Dask paths of ``alm2map`` and ``map2alm`` (``smooth_map``'s is ``smooth.py``): one transform
split over workers with the SHT halves (S2HAT's scheme), or a stack of transforms as
independent tasks.

Split ("split" mode), synthesis: the alm are cut into blocks of m; one task per m block runs the
Legendre stage (:func:`skyconv.alm2leg`) on all rings and cuts Δ into one C-contiguous piece
per ring block (views for one component); one task per ring block takes its pieces (one from
each m block: the all-to-all, no rechunk) and runs the ring FFTs (:func:`skyconv.leg2map`) on
them as a list, read where they lie. The analysis runs backwards: ``map2leg`` per ring block
writes one piece per m block (no cut afterwards), ``leg2alm`` per m block reads its pieces of
all rings as a list (no joined copy). A Jacobi iteration is two task layers: ring tasks
compute the residual of the last iterate on their rings and its ``map2leg`` pieces, m tasks
add their ``leg2alm`` to the iterate and (but for the last) run the next synthesis Legendre
stage, so the graph has 2·(iter + 1) layers, blocks² pieces per exchange and no round trip
through the client. Pieces between two tasks of one worker stay in its memory; between
processes each pickles without a copy.

By default there is one ring block per worker process and two m blocks per worker where there
are several (one where there is one) (:func:`split_blocks`): a block's task runs on all the
worker's threads (each worker's skyconv pool takes its thread count on the first task, unless
``SKYCONV_NUM_THREADS`` is set), so a single worker with many threads does not exchange
anything; with two m tasks a worker, the first one's Legendre sums start while the second one's
pieces of Δ are still crossing (16 cores, nside 4096, 2 workers × 8 threads: map2alm 1.28× →
1.07× the single process, bench/NOTES.md, session 13). With a Distributed client, block b of
every layer (m task b, ring task b) runs on the b-th worker (sorted addresses, modulo their
count): a scheduler plugin (:class:`BlockPlacement`, registered once per client) restricts those
tasks when their graph arrives, loosely (another worker takes a block whose worker is gone).
Task annotations cannot carry this: dask.array's low-level fusion drops them; left to data
locality alone, the 2-worker run at nside 4096 put both ring blocks on one worker.

Blocks: m blocks are contiguous ranges of m, balanced by work, with the cost of m taken as
lmax − m + 1 (the length of its Legendre sum): a block of large m holds more m than one of
small m. Contiguous ranges keep each alm chunk a contiguous slice of healpy's layout, so the
alm come back chunked by m block without a permutation; balance comes from the unequal counts
(pairing large with small m, the other way to balance, would scatter every chunk). Ring blocks
are contiguous ranges of rings with about equal pixel counts, so each map chunk is a
contiguous slice of the RING map. The Legendre tasks always see all rings (each runs a north
ring with its southern mirror, as S2HAT), so ring blocks need not keep mirrors together.

Stack ("stack" mode): with at least as many independent transforms (spin-0 components, or
maps in a stack) as worker threads, and one transform's working set (map, alm and a copy of
each, plus the CPU engine's 256 MB chunk) within half a worker's memory limit, each task runs
one whole transform with the single-process engine, with no all-to-all. The choice is logged on the
``skyconv.dask`` logger and kept in :data:`last_choice`.
"""

from __future__ import annotations

import logging
import os
import re

import numpy as np

from .. import _core
from .._utils.lazy import dask_array
from ..exceptions import ArgumentError, ArgumentTypeError, ShapeError
from ..healpix import UNSEEN
from ..sht_halves import alm2leg, leg2alm, leg2map, m_blocks, map2leg, ring_blocks, ring_lengths
from . import cluster
from .device import check as check_device
from .device import on_worker

try:  # optional: the placement plugin needs Distributed
    from distributed.diagnostics.plugin import SchedulerPlugin as _SchedulerPlugin
except ImportError:  # pragma: no cover - dask without distributed
    _SchedulerPlugin = object

log = logging.getLogger("skyconv.dask")

#: The last choice of a Dask SHT call: {"mode": "split" | "stack", "m_blocks", "ring_blocks",
#: "workers", "transforms"} (read it after building the graph).
last_choice: dict = {}


def _cluster() -> tuple[int, int]:
    """(worker threads, smallest worker memory limit in bytes or 0 when unknown) of the current
    Dask client; without one, the CPU count and 0 (the local schedulers share this memory)."""
    return _cluster_info()[:2]


def _cluster_info() -> tuple[int, int, int]:
    """(worker threads, smallest memory limit or 0, worker processes) of the current client;
    without one, (CPU count, 0, 1)."""
    info = cluster.workers()
    if not info:
        return os.cpu_count() or 1, 0, 1
    mem = min(w.get("memory_limit") or 0 for w in info)
    return max(1, cluster.threads()), int(mem), len(info)


def split_blocks() -> tuple[int, int]:
    """Default (m blocks, ring blocks) of a split transform. One ring block per worker
    process: each block's task runs on all the worker's threads (skyconv's pool takes the
    worker's thread count), so a worker of T threads needs one block, not T. Two m blocks per
    worker where there are several workers, so that the exchange overlaps the Legendre sums
    (block b runs on worker b mod N); one with a single worker (no exchange at all)."""
    n = _cluster_info()[2]
    return (2 * n if n > 1 else 1), n


def workers() -> int:
    """Worker threads of the current Dask client, or the CPU count without one."""
    return _cluster()[0]


def _choose(ntrans: int, coupled: bool, nblocks, nside: int, lmax: int) -> tuple[str, int]:
    """ "stack" (one whole transform per task) when the transforms are independent, at least
    as many as the worker threads, and one transform's working set fits in half a worker's
    memory limit; else "split" (each transform over all workers)."""
    nw, mem = _cluster()
    # map + a copy, alm + a copy, the CPU engine's 256 MB ring-coefficient chunk
    need = 12 * nside * nside * 16 + (lmax + 1) * (lmax + 2) * 16 + (256 << 20)
    fits = mem <= 0 or need <= mem // 2
    stack = not coupled and ntrans >= nw and nblocks is None and fits
    return ("stack" if stack else "split"), nw


def _record(mode, nw, ntrans, nm, nr):
    last_choice.clear()
    last_choice.update(mode=mode, workers=nw, transforms=ntrans, m_blocks=nm, ring_blocks=nr)
    log.info(
        "skyconv dask SHT: %s mode (%d transform(s), %d worker thread(s), %s m block(s), "
        "%s ring block(s))",
        mode,
        ntrans,
        nw,
        nm,
        nr,
    )


# ----------------------------------------------------------------------------------------
# Task bodies (plain numpy functions of one block)


def _leg_task(blk, nside, lmax, ms, pol, device, rbounds):
    """Δ of the block's m on all rings, one C-contiguous piece per ring block (``rbounds``)."""
    if pol:  # each piece is T's and (Q, U)'s rows joined: one copy, no full-size join first
        dev = on_worker("sht.alm2leg", device)
        t = alm2leg(blk[:1], nside, lmax, ms, device=dev)
        eb = alm2leg(blk[1:], nside, lmax, ms, spin=2, device=dev)
        return tuple(np.concatenate([t[:, lo:hi], eb[:, lo:hi]]) for lo, hi in rbounds)
    lg = alm2leg(blk, nside, lmax, ms, device=on_worker("sht.alm2leg", device))
    return _cut(lg, 1, rbounds)


def _alm_task(lg, nside, lmax, ms, pol, w, device):
    """``lg``: Δ of the block's m on all rings, in pieces along the rings (a list)."""
    if pol:
        dev = on_worker("sht.leg2alm", device)
        t = leg2alm([p[:1] for p in lg], nside, lmax, ms, ring_weights=w, device=dev)
        eb = leg2alm([p[1:] for p in lg], nside, lmax, ms, spin=2, ring_weights=w, device=dev)
        return np.concatenate([t, eb])
    return leg2alm(lg, nside, lmax, ms, ring_weights=w, device=on_worker("sht.leg2alm", device))


def _aligned(block):
    """Blocks unpickled by Dask can be unaligned; the core needs aligned C-contiguous arrays."""
    return np.require(block, requirements=["C", "A"])


def _clean(block):
    """The block as aligned C-contiguous float64 with UNSEEN pixels (|x − UNSEEN| ≤ 1e-8 +
    1e-5·|UNSEEN|, healpy's test, as the single-process map2alm) zeroed: the block itself when
    it already is one and holds no such pixel (one comparison pass, no copy), else a copy."""
    b = np.require(block, dtype=np.float64, requirements=["C", "A"])
    tol = 1e-8 + 1e-5 * abs(UNSEEN)
    hit = b <= UNSEEN + tol
    if not hit.any():
        return b
    hit &= b >= UNSEEN - tol
    if b is block or np.shares_memory(b, block):
        b = b.copy()
    b[hit] = 0.0
    return b


# ----------------------------------------------------------------------------------------
# Distributed halves on dask arrays: one task per block, Δ moved as one contiguous piece per
# (m block, ring block) pair (the all-to-all), no rechunk


def _bounds(blocks) -> np.ndarray:
    """[lo, hi) of each block's rows in the blocks' concatenation, an (n, 2) int64 array (not a
    tuple, which a task spec could read as a key)."""
    ends = np.cumsum([len(b) for b in blocks])
    return np.stack([ends - [len(b) for b in blocks], ends], axis=1).astype(np.int64)


def _cut(a, axis, bounds):
    """One C-contiguous piece of ``a`` per [lo, hi) along ``axis`` (1: the rings). A piece that
    already is contiguous is a view (one component cut by rings), else a copy; either pickles
    without a further copy (pickle protocol 5 buffers)."""
    sl = (slice(None),) * axis
    return tuple(np.ascontiguousarray(a[sl + (slice(lo, hi),)]) for lo, hi in bounds)


def _own(pieces, own=None):
    """The pieces of Δ of one task as a list, each read where it lies (the halves take them
    as a list: no joined copy). ``own`` = [pos, i]: ``pieces[pos]`` is the whole tuple of the
    paired task (same block index), take its item i. Depending on that whole tuple makes the
    task's largest input sit on the paired task's worker, so Dask runs ring block j where m
    block j ran (and back): one block per worker, not several on the worker holding the
    largest piece."""
    pieces = list(pieces)
    if own is not None:
        pieces[own[0]] = pieces[own[0]][own[1]]
    return pieces


def _leg_pieces(blk, nside, lmax, ms, pol, device, rbounds):
    """m task of the synthesis: Δ of the block's m on all rings, cut by ring blocks."""
    cluster.pool_of_worker()
    return _leg_task(_aligned(blk), nside, lmax, ms, pol, device, rbounds)


def _map_of_pieces(pieces, nside, rings, device, own=None):
    """Ring task of the synthesis: the m blocks' pieces of Δ on these rings -> their pixels."""
    cluster.pool_of_worker()
    return leg2map(_own(pieces, own), nside, rings, device=on_worker("sht.leg2map", device))


def _pieces_of_map(mp, nside, mmax, rings, mbounds, device):
    """Ring task of the analysis: the rings' pixels -> their Fourier coefficients, written as
    one piece per m block (no cut afterwards)."""
    cluster.pool_of_worker()
    widths = (mbounds[:, 1] - mbounds[:, 0]).tolist()
    dev = on_worker("sht.map2leg", device)
    return tuple(map2leg(mp, nside, mmax, rings, device=dev, widths=widths))


def _resid_pieces(pieces, clean, nside, mmax, rings, mbounds, device, own=None):
    """Ring task of a Jacobi iteration: the residual clean − synthesis on these rings, then its
    analysis pieces (the residual never leaves the task)."""
    resid = clean - _map_of_pieces(pieces, nside, rings, device, own)
    return _pieces_of_map(resid, nside, mmax, rings, mbounds, device)


def _alm_step(prev, pieces, nside, lmax, ms, pol, w, device, rbounds, own=None):
    """m task of the analysis: the ring blocks' pieces (all rings, this block's m) -> alm block,
    added to ``prev`` (the last iterate, or None). With ``rbounds`` (another iteration follows)
    it returns (alm block, Δ pieces of the new alm block cut by ring blocks)."""
    cluster.pool_of_worker()
    alm = _alm_task(_own(pieces, own), nside, lmax, ms, pol, w, device)
    if prev is not None:
        alm = prev + alm
    if rbounds is None:
        return alm
    return (alm,) + _leg_task(alm, nside, lmax, ms, pol, device, rbounds)


def _spec(prefix, tok):
    return f"skyconv-{prefix}-{tok}"


# Names of the split transform's block layers (_spec): m tasks and ring tasks, keys (name, b)
# or (name, 0, b) with b the block; fusion may prefix a name ("_clean-skyconv-map2leg-...").
_BLOCK_NAME = re.compile(
    r"(?:^|-)skyconv-(?:alm2leg|leg2map|map2leg|map2alm|leg2alm\d+|resid\d+)-[0-9a-f]{32}$"
)


def block_of(key):
    """Block index of a split-transform block task's key, or None for any other key."""
    if not isinstance(key, tuple) or len(key) < 2 or not isinstance(key[0], str):
        return None
    b = key[-1]
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)):
        return None
    return int(b) if _BLOCK_NAME.search(key[0]) else None


class BlockPlacement(_SchedulerPlugin):
    """Scheduler plugin: block b of every layer of a split transform (m task b, ring task b)
    runs on the b-th worker (sorted addresses, modulo the worker count), so each worker holds
    one block of each layer and ring block b meets its own m block's piece of Δ. Restrictions
    are loose: when that worker is gone, any worker takes the block (Dask's retries still
    work). Only keys named by :func:`_spec` are touched."""

    name = "skyconv-sht-placement"
    idempotent = True

    def update_graph(self, scheduler, *, tasks=(), **kwargs):
        workers = sorted(scheduler.workers)
        if not workers:
            return
        for key in tasks:
            b = block_of(key)
            ts = scheduler.tasks.get(key) if b is not None else None
            if ts is None or ts.worker_restrictions or ts.state not in ("released", "waiting"):
                continue
            ts.worker_restrictions = {workers[b % len(workers)]}
            ts.loose_restrictions = True


#: Per client id: whether BlockPlacement is registered (tried once per client).
_PLACED: dict = {}


def place_blocks() -> bool:
    """Register :class:`BlockPlacement` with the current Distributed client's scheduler (tried
    once per client, a warning on the ``skyconv.dask`` logger when it fails); False without a
    client or when the scheduler could not load it (the blocks then go where the scheduler
    puts them)."""
    try:
        from distributed import get_client

        client = get_client()
    except (ImportError, ValueError):
        return False
    if client.id in _PLACED:
        return _PLACED[client.id]
    try:
        client.register_plugin(BlockPlacement())
        _PLACED[client.id] = True
    except Exception as e:  # e.g. a remote scheduler without skyconv installed
        log.warning("skyconv dask SHT: block placement plugin not registered (%s)", e)
        _PLACED[client.id] = False
    return _PLACED[client.id]


def _pieces(dsk, tasks, n, first=0, what="piece"):
    """Keys of items ``first..first+n-1`` of the tuples returned by ``tasks`` (keys (name, k)):
    ``out[k][j]`` = item first + j of task k (a getitem task each, run where the tuple is)."""
    import operator

    out = []
    for task in tasks:
        row = []
        for j in range(n):
            key = (f"{task[0]}-{what}", task[1], j)
            dsk[key] = (operator.getitem, task, first + j)
            row.append(key)
        out.append(row)
    return out


def _paired(dsk, pc, tasks, i, col, item=None):
    """The inputs of the consumer of block ``i``: ``pc[k][col]`` for every producer k, but for
    k = i (when producer i exists) the whole tuple ``tasks[i]`` instead of its piece (whose
    getitem task is dropped) and ``own`` = [i, item] telling the task which item to take."""
    got = [row[col] for row in pc]
    if i >= len(tasks):
        return got, None
    dsk.pop(got[i], None)
    got[i] = tasks[i]
    return got, np.array([i, i if item is None else item], dtype=np.int64)


def synthesis(alm, nside, lmax, mmax, pol, device, mb, rb):
    """Split synthesis: dask alm (ncomp, nalm) -> dask maps (ncomp, npix) chunked by ``rb``: one
    Legendre task per m block, one piece of Δ per (m block, ring block), one ring task per ring
    block taking its pieces."""
    da = dask_array()
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    ncomp = alm.shape[0]
    sizes = tuple(int(np.sum(lmax + 1 - ms)) for ms in mb)
    alm = alm.rechunk(((ncomp,), sizes))  # no-op when the chunks are the m blocks
    tok = tokenize(alm, nside, lmax, mmax, pol, device, [len(b) for b in mb], _bounds(rb))
    rbounds = _bounds(rb)
    dsk = {}
    leg = [(_spec("alm2leg", tok), k) for k in range(len(mb))]
    for k, ms in enumerate(mb):
        dsk[leg[k]] = (_leg_pieces, (alm.name, 0, k), nside, lmax, ms, pol, device, rbounds)
    pc = _pieces(dsk, leg, len(rb))
    out = _spec("leg2map", tok)
    for j, r in enumerate(rb):
        got, own = _paired(dsk, pc, leg, j, j)
        dsk[(out, 0, j)] = (_map_of_pieces, got, nside, r, device, own)
    pix = tuple(int(ring_lengths(nside, r).sum()) for r in rb)
    graph = HighLevelGraph.from_collections(out, dsk, dependencies=[alm])
    return da.Array(graph, out, chunks=((ncomp,), pix), meta=np.empty((0, 0), np.float64))


def analysis(clean, nside, lmax, mmax, pol, w, device, mb, rb, iters=0):
    """Split analysis with ``iters`` Jacobi iterations: dask maps (ncomp, npix), float64, UNSEEN
    zeroed, chunked by ``rb`` -> dask alm (ncomp, nalm) chunked by ``mb``. Layers alternate
    ring tasks (ring FFTs; after the first, the residual of the last iterate on their rings)
    and m tasks (Legendre sums added to the last iterate; but for the last layer, also the
    synthesis Legendre stage of the new iterate), so an iteration is two layers and one
    exchange each way, with no graph round trip through the client."""
    da = dask_array()
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    ncomp = clean.shape[0]
    tok = tokenize(clean, nside, lmax, mmax, pol, w, device, _bounds(mb), _bounds(rb), iters)
    mbounds, rbounds = _bounds(mb), _bounds(rb)
    nm, nr = len(mb), len(rb)
    out = _spec("map2alm", tok)
    dsk = {}
    rtask = [(_spec("map2leg", tok), j) for j in range(nr)]
    for j, r in enumerate(rb):
        dsk[rtask[j]] = (_pieces_of_map, (clean.name, 0, j), nside, mmax, r, mbounds, device)
    rpc = _pieces(dsk, rtask, nm)
    prev = [None] * nm
    for step in range(iters + 1):
        last = step == iters
        mtask = (
            [(out, 0, k) for k in range(nm)]
            if last
            else [(_spec(f"leg2alm{step}", tok), k) for k in range(nm)]
        )
        for k, ms in enumerate(mb):
            got, own = _paired(dsk, [[rpc[j][k]] for j in range(nr)], rtask, k, 0, item=k)
            dsk[mtask[k]] = (
                _alm_step,
                prev[k],
                got,
                nside,
                lmax,
                ms,
                pol,
                w,
                device,
                None if last else rbounds,
                own,
            )
        if last:
            break
        prev = [k[0] for k in _pieces(dsk, mtask, 1, what="alm")]
        mpc = _pieces(dsk, mtask, nr, first=1)
        rtask = [(_spec(f"resid{step}", tok), j) for j in range(nr)]
        for j, r in enumerate(rb):
            got, own = _paired(dsk, mpc, mtask, j, j, item=1 + j)
            dsk[rtask[j]] = (
                _resid_pieces,
                got,
                (clean.name, 0, j),
                nside,
                mmax,
                r,
                mbounds,
                device,
                own,
            )
        rpc = _pieces(dsk, rtask, nm)
    sizes = tuple(int(np.sum(lmax + 1 - ms)) for ms in mb)
    graph = HighLevelGraph.from_collections(out, dsk, dependencies=[clean])
    return da.Array(graph, out, chunks=((ncomp,), sizes), meta=np.empty((0, 0), np.complex128))


# ----------------------------------------------------------------------------------------
# Public entry points (called from skyconv.sht and skyconv.smooth)


def _size(lmax: int, mmax: int) -> int:
    return mmax * (2 * lmax + 1 - mmax) // 2 + lmax + 1


def _lmax_of(nalm: int, lmax, mmax):
    if lmax is not None and int(lmax) < 0:
        lmax = None
    if mmax is not None and int(mmax) < 0:
        mmax = None
    if lmax is None:
        if mmax is None:  # nalm = (lmax + 1)(lmax + 2)/2
            lmax = int(round((np.sqrt(8 * nalm + 1) - 3) / 2))
        else:  # nalm = (mmax + 1)(lmax + 1) - mmax(mmax + 1)/2
            mm = int(mmax)
            lmax = (nalm + mm * (mm + 1) // 2) // (mm + 1) - 1
        mm = lmax if mmax is None else int(mmax)
        if lmax < 0 or lmax < mm or _size(lmax, mm) != nalm:
            raise ShapeError(f"alm has {nalm} coefficients, which is not a valid alm size")
    lmax = int(lmax)
    mmax = lmax if mmax is None else int(mmax)
    if mmax > lmax:
        raise ArgumentError(f"mmax ({mmax}) must not exceed lmax ({lmax})")
    if _size(lmax, mmax) != nalm:
        raise ShapeError(
            f"alm has {nalm} coefficients but lmax={lmax}, mmax={mmax} needs {_size(lmax, mmax)}"
        )
    return lmax, mmax


def _pol_of(ncomp, pol):
    if pol and ncomp not in (1, 3):
        raise ArgumentError(
            f"pol=True needs 1 or 3 components (T or T, E, B / I, Q, U), got {ncomp}; "
            "use pol=False for independent spin-0 transforms"
        )
    return bool(pol) and ncomp == 3


def alm2map(alms, nside, lmax=None, mmax=None, pol=True, device=None, nblocks=None):
    """:func:`skyconv.alm2map` of a dask array: (nalm,) or (ncomp, nalm) complex -> dask
    float64 maps (npix,) or (ncomp, npix), chunked by ring blocks (split mode) or by
    components (stack mode). ``nblocks``: (m blocks, ring blocks), forcing split mode."""
    from .._utils.arrays import int_arg
    from ..healpix import npix2nside

    nside = int_arg(nside, "nside")
    npix2nside(12 * nside * nside)  # checks nside
    lonely = alms.ndim == 1
    a = alms[None] if lonely else alms
    if a.ndim != 2:
        raise ShapeError(f"alms must be 1-D or 2-D, got shape {alms.shape}")
    a = a.astype(np.complex128)
    lmax, mmax = _lmax_of(a.shape[1], lmax, mmax)
    p = _pol_of(a.shape[0], pol)
    mode, nw = _choose(a.shape[0], p, nblocks, nside, lmax)
    npix = 12 * nside * nside
    if mode == "stack":
        dev = check_device(device)

        def single(b):
            cluster.pool_of_worker()
            core = on_worker("sht.alm2map", dev)
            return _core._alm2map([_aligned(b[0])], nside, lmax, mmax, False, core)

        _record(mode, nw, a.shape[0], None, None)
        out = a.rechunk((1, -1)).map_blocks(
            single,
            chunks=(1, npix),
            dtype=np.float64,
            meta=np.empty((0, 0), np.float64),
            token="skyconv-stack-alm2map",  # not a split block name (BlockPlacement)
        )
    else:
        nm, nr = nblocks if nblocks is not None else split_blocks()
        mb, rb = m_blocks(lmax, mmax, nm), ring_blocks(nside, nr)
        _record(mode, nw, 1 if p else a.shape[0], len(mb), len(rb))
        place_blocks()
        out = synthesis(a, nside, lmax, mmax, p, device, mb, rb)
    return out[0] if lonely else out


def map2alm(
    maps, lmax=None, mmax=None, iter=3, pol=True, ring_weights=None, device=None, nblocks=None
):
    """:func:`skyconv.map2alm` of a dask array: (npix,) or (ncomp, npix) float -> dask alm
    (nalm,) or (ncomp, nalm), chunked by m blocks (split) or by components (stack). UNSEEN
    pixels count as 0. Each Jacobi iteration is a distributed synthesis and analysis."""
    dask_array()  # DaskMissingError with the install hint when dask is absent
    from .._utils.arrays import int_arg
    from ..healpix import npix2nside

    lonely = maps.ndim == 1
    m = maps[None] if lonely else maps
    if m.ndim != 2:
        raise ShapeError(f"maps must be 1-D or 2-D, got shape {maps.shape}")
    if m.dtype.kind not in "fiu":
        raise ArgumentTypeError(f"maps must be real (float32 or float64), got dtype {m.dtype}")
    nside = npix2nside(m.shape[1])
    lmax = 3 * nside - 1 if lmax is None else int_arg(lmax, "lmax")
    if lmax < 0:
        raise ArgumentError(f"lmax must be >= 0, got {lmax}")
    mmax = lmax if mmax is None else int_arg(mmax, "mmax")
    if not 0 <= mmax <= lmax:
        raise ArgumentError(f"mmax must be in 0..lmax={lmax}, got {mmax}")
    iter = int_arg(iter, "iter")
    if iter < 0:
        raise ArgumentError(f"iter must be >= 0, got {iter}")
    w = None
    if ring_weights is not None:
        w = np.ascontiguousarray(ring_weights, dtype=np.float64)
        if w.ndim != 1 or w.size not in (4 * nside - 1, 2 * nside):
            raise ArgumentError(
                f"ring_weights must have 4*nside-1 = {4 * nside - 1} or 2*nside = "
                f"{2 * nside} values, got shape {w.shape}"
            )
    p = _pol_of(m.shape[0], pol)
    mode, nw = _choose(m.shape[0], p, nblocks, nside, lmax)
    if mode == "stack":
        dev = check_device(device)

        def single(b):  # the engine zeroes UNSEEN pixels
            cluster.pool_of_worker()
            core = on_worker("sht.map2alm", dev)
            return _core._map2alm([_aligned(b[0])], nside, lmax, mmax, iter, False, w, core)

        _record(mode, nw, m.shape[0], None, None)
        out = m.rechunk((1, -1)).map_blocks(
            single,
            chunks=(1, _size(lmax, mmax)),
            dtype=np.complex128,
            meta=np.empty((0, 0), np.complex128),
            token="skyconv-stack-map2alm",  # not a split block name (BlockPlacement)
        )
        return out[0] if lonely else out
    nm, nr = nblocks if nblocks is not None else split_blocks()
    mb, rb = m_blocks(lmax, mmax, nm), ring_blocks(nside, nr)
    _record(mode, nw, 1 if p else m.shape[0], len(mb), len(rb))
    place_blocks()
    pix = tuple(int(ring_lengths(nside, r).sum()) for r in rb)
    clean = m.rechunk(((m.shape[0],), pix)).map_blocks(
        _clean, dtype=np.float64, meta=np.empty((0, 0), np.float64)
    )
    alm = analysis(clean, nside, lmax, mmax, p, w, device, mb, rb, iters=iter)
    return alm[0] if lonely else alm
