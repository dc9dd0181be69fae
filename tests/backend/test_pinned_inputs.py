"""Inputs in page-locked host memory that skyconv did not allocate (here cupy's pinned pool) are
DMA'd straight to the device (backend::cuda::transfer::page_locked) instead of going through
the staging buffers; the results equal those from ordinary (pageable) NumPy inputs."""

from __future__ import annotations

import numpy as np
import pytest
from _grid_refs import field, header

import skyconv
from skyconv import _core, alm2map, map2alm


def pinned_copy(a: np.ndarray) -> np.ndarray:
    cupyx = pytest.importorskip("cupyx")
    out = cupyx.empty_pinned(a.shape, a.dtype)
    out[...] = a
    return out


def direct(a: np.ndarray) -> bool:
    return _core._dma_direct(a.ctypes.data, a.nbytes)


@pytest.mark.gpu
def test_gpu_page_locked_inputs_equal_pageable(rng):
    # Spectral rows of 84 MB: pageable ones go up in packed channel blocks overlapping the
    # gathers, page-locked ones resident (by 2-D DMAs per block); the sums are the same.
    n, nchan = 41_000, 512
    lon, lat = field(rng, n)
    data = (rng.normal(size=(n, nchan)) + 1).astype(np.float32)
    data[::9, 200] = np.nan
    locked = pinned_copy(data)
    assert direct(locked) and direct(locked[1000:2000]) and not direct(data)
    hdr = header(nx=40, ny=40, cdelt=0.1)
    kw = {"kernel_params": 0.15, "device": "cuda"}
    a = skyconv.grid(lon, lat, data, hdr, **kw)
    b = skyconv.grid(lon, lat, locked, hdr, **kw)
    for name in ("cube", "weights", "unweighted"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    # Page-locked rows go up by 2-D DMAs a channel block at a time; a ragged last block and
    # page-locked per-value weights too.
    w = rng.uniform(0.5, 2.0, size=(n, 300)).astype(np.float32)
    a = skyconv.grid(lon, lat, data[:, :300].copy(), hdr, weights=w, **kw)
    b = skyconv.grid(lon, lat, pinned_copy(data[:, :300]), hdr, weights=pinned_copy(w), **kw)
    for name in ("cube", "weights", "unweighted"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    sub = slice(0, 4000)
    cpu = skyconv.grid(lon[sub], lat[sub], data[sub], hdr, kernel_params=0.15, device="cpu")
    gpu = skyconv.grid(lon[sub], lat[sub], locked[sub], hdr, **kw)
    ok = np.isfinite(cpu.cube)
    assert np.array_equal(ok, np.isfinite(gpu.cube))
    assert np.allclose(gpu.cube[ok], cpu.cube[ok], rtol=1e-5, atol=1e-6)

    # SHT inputs: alm (8 MB) and maps (6 MB), above the size that is always copied directly.
    lmax, nside = 999, 256
    size = (lmax + 1) * (lmax + 2) // 2
    alm = rng.standard_normal(size) + 1j * rng.standard_normal(size)
    alm[: lmax + 1] = alm[: lmax + 1].real
    alm_locked = pinned_copy(alm)
    assert direct(alm_locked)
    m = alm2map(alm, nside, lmax=lmax, device="cuda")
    assert np.array_equal(alm2map(alm_locked, nside, lmax=lmax, device="cuda"), m)
    maps = rng.standard_normal((3, 12 * nside**2))
    maps_locked = pinned_copy(maps)
    assert direct(maps_locked)
    want = map2alm(maps, lmax=lmax, iter=1, device="cuda")
    assert np.array_equal(map2alm(maps_locked, lmax=lmax, iter=1, device="cuda"), want)
