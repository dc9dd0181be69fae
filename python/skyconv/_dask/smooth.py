"""Dask path of ``smooth_map``: the harmonic method through the distributed transforms of
``skyconv._dask.sht``; the ring and split methods one map per task."""

from __future__ import annotations

import numpy as np

from .._utils.lazy import dask_array
from ..exceptions import ArgumentError, ArgumentTypeError, ShapeError
from .sht import _record, alm2map, map2alm, workers


def _missing(b):
    from ..smooth.methods import missing

    return missing(np.asarray(b, dtype=np.float64))


def smooth_map(m, fwhm, beam_window, lmax, nest, tol, method, iter, device, single, nblocks=None):
    """:func:`skyconv.smooth_map` of a dask array (npix,) or (nmaps, npix) (arguments as there).

    ``method`` "harmonic" or "auto": map2alm → × beam window → alm2map through the distributed
    transforms (each map of a stack on its own or split, as :func:`alm2map` chooses).
    "ring" and "split": each map is rechunked to one block and smoothed by one task with the
    single-process method. Missing pixels (UNSEEN, non-finite) count as 0 and keep their input
    value, as for numpy input. ``nest=True`` is refused (reorder to RING first).
    ``single``: the single-process :func:`skyconv.smooth_map` (passed in by it, so that this
    module does not import it back).
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
        raise ArgumentTypeError(f"m must be a float array, got dtype {m.dtype}")
    lonely = m.ndim == 1
    x = (m[None] if lonely else m).astype(np.float64)
    nside = npix2nside(x.shape[1])
    iter = int_arg(iter, "iter")
    if iter < 0:
        raise ArgumentError(f"iter must be >= 0, got {iter}")
    if method in ("ring", "split"):

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
