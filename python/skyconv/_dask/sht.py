"""Dask paths of ``alm2map`` and ``map2alm`` (``smooth_map``'s is ``smooth.py``): one transform
split over workers with the SHT halves (S2HAT's scheme), or a stack of transforms as
independent tasks.

Split ("split" mode), synthesis: the alm are cut into blocks of m; one task per m block runs the
Legendre stage (:func:`skyconv.alm2leg`) on all rings, giving Δ chunked (all rings, m block);
rechunking Δ to (ring block, all m) is the all-to-all (Dask moves each m block's share of each
ring block to the task that needs it); one task per ring block then runs the ring FFTs
(:func:`skyconv.leg2map`). The analysis runs backwards (``map2leg`` per ring block, the same
rechunk the other way, ``leg2alm`` per m block over all rings); each Jacobi iteration is a
distributed synthesis and analysis of the residual.

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

import numpy as np

from .. import _core
from .._utils.lazy import dask_array
from ..exceptions import ArgumentError, ArgumentTypeError, ShapeError
from ..healpix import UNSEEN
from ..sht_halves import alm2leg, leg2alm, leg2map, m_blocks, map2leg, ring_blocks, ring_lengths
from .device import check as check_device
from .device import on_worker

log = logging.getLogger("skyconv.dask")

#: The last choice of a Dask SHT call: {"mode": "split" | "stack", "m_blocks", "ring_blocks",
#: "workers", "transforms"} (read it after building the graph).
last_choice: dict = {}


def _cluster() -> tuple[int, int]:
    """(worker threads, smallest worker memory limit in bytes or 0 when unknown) of the current
    Dask client; without one, the CPU count and 0 (the local schedulers share this memory)."""
    try:
        from distributed import get_client

        info = get_client().scheduler_info().get("workers", {}).values()
        n = sum(w.get("nthreads", 1) for w in info)
        mem = min((w.get("memory_limit") or 0 for w in info), default=0)
        return max(1, n), int(mem)
    except (ImportError, ValueError):
        return os.cpu_count() or 1, 0


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


def _leg_task(blk, nside, lmax, ms, pol, device):
    if pol:
        dev = on_worker("sht.alm2leg", device)
        t = alm2leg(blk[:1], nside, lmax, ms, device=dev)
        eb = alm2leg(blk[1:], nside, lmax, ms, spin=2, device=dev)
        return np.concatenate([t, eb])
    return alm2leg(blk, nside, lmax, ms, device=on_worker("sht.alm2leg", device))


def _alm_task(lg, nside, lmax, ms, pol, w, device):
    if pol:
        dev = on_worker("sht.leg2alm", device)
        t = leg2alm(lg[:1], nside, lmax, ms, ring_weights=w, device=dev)
        eb = leg2alm(lg[1:], nside, lmax, ms, spin=2, ring_weights=w, device=dev)
        return np.concatenate([t, eb])
    return leg2alm(lg, nside, lmax, ms, ring_weights=w, device=on_worker("sht.leg2alm", device))


def _aligned(block):
    """Blocks unpickled by Dask can be unaligned; the core needs aligned C-contiguous arrays."""
    return np.require(block, requirements=["C", "A"])


def _clean(block):
    """float64 copy with UNSEEN pixels zeroed (as the single-process map2alm)."""
    b = np.array(block, dtype=np.float64)
    b[np.abs(b - UNSEEN) <= 1e-8 + 1e-5 * abs(UNSEEN)] = 0.0
    return b


# ----------------------------------------------------------------------------------------
# Distributed halves on dask arrays


def synthesis(alm, nside, lmax, mmax, pol, device, mb, rb):
    """Split synthesis: dask alm (ncomp, nalm) -> dask maps (ncomp, npix) chunked by `rb`."""
    da = dask_array()
    ncomp = alm.shape[0]
    sizes = tuple(int(np.sum(lmax + 1 - ms)) for ms in mb)
    alm = alm.rechunk(((ncomp,), sizes))
    nr = 4 * nside - 1

    def leg_of(blk, block_id=None):
        return _leg_task(blk, nside, lmax, mb[block_id[2]], pol, device)

    leg = da.map_blocks(
        leg_of,
        alm,
        chunks=((ncomp,), (nr,), tuple(len(ms) for ms in mb)),
        new_axis=1,
        dtype=np.complex128,
        meta=np.empty((0, 0), np.complex128),
        token="skyconv-alm2leg",
    )
    # the all-to-all: (all rings, m block) -> (ring block, all m)
    leg = leg.rechunk(((ncomp,), tuple(len(r) for r in rb), (mmax + 1,)))
    pix = tuple(int(ring_lengths(nside, r).sum()) for r in rb)

    def map_of(lg, block_id=None):
        return leg2map(lg, nside, rb[block_id[1]], device=on_worker("sht.leg2map", device))

    return da.map_blocks(
        map_of,
        leg,
        chunks=((ncomp,), pix),
        drop_axis=2,
        dtype=np.float64,
        meta=np.empty((0, 0), np.float64),
        token="skyconv-leg2map",
    )


def analysis(maps, nside, lmax, mmax, pol, w, device, mb, rb):
    """Split analysis (iter 0): dask maps (ncomp, npix), UNSEEN already zeroed, float64 ->
    dask alm (ncomp, nalm) chunked by `mb`."""
    da = dask_array()
    ncomp = maps.shape[0]
    pix = tuple(int(ring_lengths(nside, r).sum()) for r in rb)
    maps = maps.rechunk(((ncomp,), pix))

    def leg_of(mp, block_id=None):
        return map2leg(mp, nside, mmax, rb[block_id[1]], device=on_worker("sht.map2leg", device))

    leg = da.map_blocks(
        leg_of,
        maps,
        chunks=((ncomp,), tuple(len(r) for r in rb), (mmax + 1,)),
        new_axis=2,
        dtype=np.complex128,
        meta=np.empty((0, 0), np.complex128),
        token="skyconv-map2leg",
    )
    # the all-to-all: (ring block, all m) -> (all rings, m block)
    leg = leg.rechunk(((ncomp,), (4 * nside - 1,), tuple(len(ms) for ms in mb)))
    sizes = tuple(int(np.sum(lmax + 1 - ms)) for ms in mb)

    def alm_of(lg, block_id=None):
        return _alm_task(lg, nside, lmax, mb[block_id[1]], pol, w, device)

    return da.map_blocks(
        alm_of,
        leg,
        chunks=((ncomp,), sizes),
        drop_axis=1,
        dtype=np.complex128,
        meta=np.empty((0, 0), np.complex128),
        token="skyconv-leg2alm",
    )


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


def _blocks(n, nw, default_factor=1):
    return max(1, nw * default_factor) if n is None else int(n)


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
            core = on_worker("sht.alm2map", dev)
            return _core._alm2map([_aligned(b[0])], nside, lmax, mmax, False, core)

        _record(mode, nw, a.shape[0], None, None)
        out = a.rechunk((1, -1)).map_blocks(
            single,
            chunks=(1, npix),
            dtype=np.float64,
            meta=np.empty((0, 0), np.float64),
            token="skyconv-alm2map",
        )
    else:
        nm, nr = nblocks if nblocks is not None else (nw, nw)
        mb, rb = m_blocks(lmax, mmax, nm), ring_blocks(nside, nr)
        _record(mode, nw, 1 if p else a.shape[0], len(mb), len(rb))
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
            core = on_worker("sht.map2alm", dev)
            return _core._map2alm([_aligned(b[0])], nside, lmax, mmax, iter, False, w, core)

        _record(mode, nw, m.shape[0], None, None)
        out = m.rechunk((1, -1)).map_blocks(
            single,
            chunks=(1, _size(lmax, mmax)),
            dtype=np.complex128,
            meta=np.empty((0, 0), np.complex128),
            token="skyconv-map2alm",
        )
        return out[0] if lonely else out
    nm, nr = nblocks if nblocks is not None else (nw, nw)
    mb, rb = m_blocks(lmax, mmax, nm), ring_blocks(nside, nr)
    _record(mode, nw, 1 if p else m.shape[0], len(mb), len(rb))
    pix = tuple(int(ring_lengths(nside, r).sum()) for r in rb)
    clean = m.rechunk(((m.shape[0],), pix)).map_blocks(
        _clean, dtype=np.float64, meta=np.empty((0, 0), np.float64)
    )
    alm = analysis(clean, nside, lmax, mmax, p, w, device, mb, rb)
    for _ in range(iter):
        resid = clean - synthesis(alm, nside, lmax, mmax, p, device, mb, rb)
        alm = alm + analysis(resid, nside, lmax, mmax, p, w, device, mb, rb)
    return alm[0] if lonely else alm
