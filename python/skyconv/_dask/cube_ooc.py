"""Smooth + Clip on a dask cube larger than the cluster's memory: the plane/column transpose
goes through a temporary zarr store instead of an in-memory rechunk.

A kernel with both spatial and spectral smoothing needs whole (y, x) planes for its spatial
pass and whole z lines for its spectral pass (SoFiA-2's float32 running sums need whole lines,
so halos cannot give their bits). An in-memory rechunk between the two holds the whole
smoothed cube in flight. Here every array the kernels exchange is a zarr array in one
temporary directory, chunked ``(zc, yc, xc)`` so that a z-slab ``(zc, NY, NX)`` and a z-column
``(NZ, yc, xc)`` each cover whole store chunks (aligned writes, reads with no waste):

0. ``X`` = the cube and ``M`` = the mask (bit 0 = in the mask, bit 7 = blank), written once;
   ``rms0`` from ``X``'s sample.
1. per kernel: the spatial stage on slabs of ``X`` and ``M`` → ``S`` (only for kernels with
   both parts; a kernel with one part runs both stages in one task on slabs or columns);
2. the noise: one core call per column block of ``S`` and ``M`` (the spectral stage, the
   block's voxels of the sample and its (min, max) in the core: no W array), gathered (one
   global reduction, as in :mod:`skyconv._dask.cube`);
3. the clip: one core call per column block again (the spectral stage and
   ``M |= |W| > level`` in the core), written back into ``M`` in place (the calls read only
   ``M``'s blank bit and the block's own columns, so a retried task writes the same bytes).

No task holds more than one slab or one column of the cube (``chunk_bytes``) with its mask
and outputs; the store takes the cube, one smoothed cube and the mask on disk. The mask that
is returned reads ``M`` lazily; the directory goes when that graph is dropped.
"""

from __future__ import annotations

import numpy as np

from .._utils.lazy import dask_array
from .scratch import Scratch

#: The spec of the "raw" sample (the cube's own values; as ``skyconv._dask.cube._RAW``).
_RAW = ("gaussian", 0.0, 0.0, "none", 0.0, False)


def _store_chunks(shape, itemsize, limit):
    """(zc, yc, xc): slabs of zc whole planes and columns of yc·xc whole lines, each at most
    ~``limit`` bytes (at least one plane / one line)."""
    nz, ny, nx = shape
    zc = max(1, min(nz, int(limit // max(ny * nx * itemsize, 1))))
    n = max(1, int(limit // max(nz * itemsize, 1)))
    yc = max(1, min(ny, int(np.sqrt(n))))
    xc = max(1, min(nx, n // yc))
    return zc, yc, xc


def _write_chunks(chunks, shape, store):
    """Chunks near the input's (one task per input block, give or take) made of whole store
    chunks, so each task writes whole zarr chunks (no two tasks share one)."""
    out = []
    for c, n, s in zip(chunks, shape, store):
        w = s * max(1, round(max(c) / s))
        out.append(min(w, n))
    return tuple(out)


def _mask_bit(m, scratch):
    del scratch  # an argument only to keep the store alive while a graph reads it
    return m & np.uint8(1)


def smooth_and_clip_ooc(
    x, m, run, noise, blocks, *, limit, scratch=None, progress=None, device=None
):
    """The kernels of Smooth + Clip through a temporary zarr store (see the module docs).

    Parameters
    ----------
    x : dask.array.Array
        The 3-D cube, native float32/float64.
    m : dask.array.Array
        uint8 of ``x``'s shape: nonzero = in the mask on entry.
    run : skyconv.cube._Run
        The checked settings.
    noise : callable
        ``noise(src, mask, spec, kind, rms0=0.0) -> float``: the core's noise rule over the
        whole cube, from one core call per block of ``src`` (``skyconv._dask.cube._Noise``).
    blocks : dict
        The block functions of :mod:`skyconv._dask.cube` (``spatial``, ``clip``,
        ``prepare_mask``), so both paths run the same core calls.
    limit : int
        Bytes of cube per task (one plane or one z line at least).
    scratch : str or None
        Directory for the temporary store (see :class:`skyconv._dask.scratch.Scratch`).
    progress : callable, optional
        ``progress(done, total, noise)`` after each kernel.
    device : str or None
        Checked by the caller; each stage task resolves it on its worker
        (:mod:`skyconv._dask.device`).

    Returns
    -------
    mask : dask.array.Array
        uint8 (1 = source), chunked like ``x``, read lazily from the store.
    rms0 : float
    rms : list of float
    """
    da = dask_array()
    shape = tuple(int(n) for n in x.shape)
    sc = Scratch(scratch, prefix="skyconv-scfind-")
    zc, yc, xc = _store_chunks(shape, x.dtype.itemsize, limit)
    store = (zc, yc, xc)
    slabs, cols = (zc, -1, -1), (-1, yc, xc)
    zx = sc.array("cube", shape, store, x.dtype)
    zm = sc.array("mask", shape, store, np.uint8)
    wchunks = _write_chunks(x.chunks, shape, store)
    xr = x.rechunk(wchunks)
    mr = da.map_blocks(blocks["prepare_mask"], xr, m.rechunk(wchunks), dtype=np.uint8)
    da.store([xr, mr], [zx, zm], lock=False)

    def read(z, chunks):
        return da.from_zarr(z, chunks=chunks)

    rms0 = noise(read(zx, slabs), read(zm, slabs), _RAW, "raw")
    rep, mode, exact = tuple(run.replace), run.edge_mode, run.exact
    zs = None
    rms_list = []
    for i, spec in enumerate(run.specs):
        _, sigma, _, zk, _, use_rms0 = spec
        has_xy, has_z = sigma > 0, zk != "none"
        if has_xy and has_z:
            if zs is None:
                zs = sc.array("smoothed", shape, store, x.dtype)
            s = da.map_blocks(
                blocks["spatial"], read(zx, slabs), read(zm, slabs), spec, mode, rep, rms0,
                exact, device, dtype=x.dtype,
            )  # fmt: skip
            da.store(s, zs, lock=False)
            src, chunks, kind = zs, cols, "smoothed"
        else:  # one task per block runs both stages (whole planes or whole lines)
            src, chunks, kind = zx, (slabs if has_xy else cols if has_z else store), "cube"
        mk, w = read(zm, chunks), read(src, chunks)
        rms = rms0 if use_rms0 else noise(w, mk, spec, kind, rms0)
        level = run.threshold * rms
        clip = da.map_blocks(blocks["clip"], w, mk, spec, mode, rep, rms0, exact, kind, level,
                             device, dtype=np.uint8)  # fmt: skip
        da.store(clip, zm, lock=False)
        rms_list.append(float(rms))
        if progress is not None:
            progress(i + 1, len(run.specs), rms)
    sc.remove("cube")
    sc.remove("smoothed")
    out = da.map_blocks(_mask_bit, read(zm, x.chunks), sc, dtype=np.uint8)
    return out, float(rms0), rms_list


__all__ = ["smooth_and_clip_ooc"]
