"""Dask paths of ``alm2map``, ``map2alm`` and ``smooth_map``: one transform split over workers
with the SHT halves (S2HAT's scheme), or a stack of transforms as independent tasks.

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
maps in a stack) as workers, each task runs whole transforms of its share of the components
with the single-process engine, with no all-to-all. The choice is logged on the
``skyconv.dask`` logger and kept in :data:`last_choice`.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from .._utils.lazy import dask_array
from ..exceptions import ArgumentError, ShapeError
from ..sht_halves import alm2leg, leg2alm, leg2map, m_blocks, map2leg, ring_blocks, ring_lengths

log = logging.getLogger("skyconv.dask")

#: The last choice of a Dask SHT call: {"mode": "split" | "stack", "m_blocks", "ring_blocks",
#: "workers", "transforms"} (read it after building the graph).
last_choice: dict = {}

UNSEEN = -1.6375e30


def workers() -> int:
    """Worker threads of the current Dask client, or the CPU count without one."""
    try:
        from distributed import get_client

        info = get_client().scheduler_info()
        n = sum(w.get("nthreads", 1) for w in info.get("workers", {}).values())
        return max(1, n)
    except (ImportError, ValueError):
        return os.cpu_count() or 1


def _choose(ntrans: int, coupled: bool, nblocks) -> tuple[str, int]:
    nw = workers()
    mode = "stack" if (not coupled and ntrans >= nw and nblocks is None) else "split"
    return mode, nw


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
        t = alm2leg(blk[:1], nside, lmax, ms, device=device)
        eb = alm2leg(blk[1:], nside, lmax, ms, spin=2, device=device)
        return np.concatenate([t, eb])
    return alm2leg(blk, nside, lmax, ms, device=device)


def _alm_task(lg, nside, lmax, ms, pol, w, device):
    if pol:
        t = leg2alm(lg[:1], nside, lmax, ms, ring_weights=w, device=device)
        eb = leg2alm(lg[1:], nside, lmax, ms, spin=2, ring_weights=w, device=device)
        return np.concatenate([t, eb])
    return leg2alm(lg, nside, lmax, ms, ring_weights=w, device=device)


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
        return leg2map(lg, nside, rb[block_id[1]], device=device)

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
        return map2leg(mp, nside, mmax, rb[block_id[1]], device=device)

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


def _lmax_of(nalm: int, lmax, mmax):
    from ..sht import Alm

    if lmax is not None and int(lmax) < 0:
        lmax = None
    if mmax is not None and int(mmax) < 0:
        mmax = None
    if lmax is None:
        lmax = Alm.getlmax(nalm, mmax)
        if lmax < 0:
            raise ShapeError(f"alm has {nalm} coefficients, which is not a valid alm size")
    lmax = int(lmax)
    mmax = lmax if mmax is None else int(mmax)
    if mmax > lmax:
        raise ArgumentError(f"mmax ({mmax}) must not exceed lmax ({lmax})")
    if Alm.getsize(lmax, mmax) != nalm:
        raise ShapeError(
            f"alm has {nalm} coefficients but lmax={lmax}, mmax={mmax} needs "
            f"{Alm.getsize(lmax, mmax)}"
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
    mode, nw = _choose(a.shape[0], p, nblocks)
    npix = 12 * nside * nside
    if mode == "stack":
        from ..sht import alm2map as single

        _record(mode, nw, a.shape[0], None, None)
        out = a.rechunk((1, -1)).map_blocks(
            lambda b: single(_aligned(b), nside, lmax=lmax, mmax=mmax, pol=False, device=device),
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
        raise TypeError(f"maps must be real (float32 or float64), got dtype {m.dtype}")
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
    mode, nw = _choose(m.shape[0], p, nblocks)
    if mode == "stack":
        from ..sht import map2alm as single

        _record(mode, nw, m.shape[0], None, None)
        nalm = mmax * (2 * lmax + 1 - mmax) // 2 + lmax + 1
        out = m.rechunk((1, -1)).map_blocks(
            lambda b: single(
                _aligned(b),
                lmax=lmax,
                mmax=mmax,
                iter=iter,
                pol=False,
                ring_weights=w,
                device=device,
            ),
            chunks=(1, nalm),
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


def _missing(b):
    from ..smooth.methods import missing

    return missing(np.asarray(b, dtype=np.float64))


def smooth_map(m, fwhm, beam_window, lmax, nest, tol, method, iter, device, nblocks=None):
    """:func:`skyconv.smooth_map` of a dask array (npix,) or (nmaps, npix) (arguments as there).

    ``method`` "harmonic" or "auto": map2alm → × beam window → alm2map through the distributed
    transforms (each map of a stack on its own or split, as :func:`alm2map` chooses).
    "ring" and "split": each map is rechunked to one block and smoothed by one task with the
    single-process method. Missing pixels (UNSEEN, non-finite) count as 0 and keep their input
    value, as for numpy input. ``nest=True`` is refused (reorder to RING first).
    """
    da = dask_array()
    from .._utils.arrays import int_arg
    from ..healpix import npix2nside
    from ..smooth.beam import Beam

    if nest:
        raise ArgumentError(
            "nest=True is not supported for dask maps; reorder them to RING first "
            "or pass a numpy array"
        )
    if m.ndim not in (1, 2):
        raise ShapeError(f"m must be 1-D (npix,) or 2-D (nmaps, npix), got shape {m.shape}")
    if m.dtype.kind not in "fiu":
        raise TypeError(f"m must be a float array, got dtype {m.dtype}")
    lonely = m.ndim == 1
    x = (m[None] if lonely else m).astype(np.float64)
    nside = npix2nside(x.shape[1])
    iter = int_arg(iter, "iter")
    if iter < 0:
        raise ArgumentError(f"iter must be >= 0, got {iter}")
    if method in ("ring", "split"):
        from ..smooth.api import smooth_map as single

        def one(b):
            return single(
                b[0],
                fwhm=fwhm,
                beam_window=beam_window,
                lmax=lmax,
                tol=tol,
                method=method,
                iter=iter,
                device=device,
            )[None]

        out = x.rechunk((1, -1)).map_blocks(
            one, dtype=np.float64, meta=np.empty((0, 0), np.float64), token="skyconv-smooth"
        )
        _record("stack", workers(), x.shape[0], None, None)
        return out[0] if lonely else out
    lmax = 3 * nside - 1 if lmax is None else int_arg(lmax, "lmax")
    if lmax < 0:
        raise ArgumentError(f"lmax must be >= 0, got {lmax}")
    beam = Beam.from_args(fwhm, beam_window, lmax, tol)
    miss = x.map_blocks(_missing, dtype=bool, meta=np.empty((0, 0), bool))
    filled = da.where(miss, 0.0, x)
    alm = map2alm(
        filled, lmax=lmax, mmax=lmax, iter=iter, pol=False, device=device, nblocks=nblocks
    )
    window = np.zeros(lmax + 1)
    wl = np.asarray(beam.window, dtype=np.float64)[: lmax + 1]
    window[: wl.size] = wl
    ls = np.concatenate([np.arange(mm, lmax + 1) for mm in range(lmax + 1)])
    fl = da.from_array(window[ls], chunks=(alm.chunks[1],))
    alm = alm * fl[None, :]
    s = alm2map(alm, nside, lmax=lmax, mmax=lmax, pol=False, device=device, nblocks=nblocks)
    out = da.where(miss, x, s.rechunk(x.chunks))
    return out[0] if lonely else out
