"""Smooth + Clip through Dask, the slab pass's spatial stage: each kernel's stage is the last
one of its spatial size with only the planes whose mask changed since smoothed again (a plane's
stage reads only that plane of the cube and of the mask). Counts the planes the workers' core
smooths against the count the single call's own masks before each kernel give, with the
single call's final mask and noise; sources and a NaN block across slab edges, all-NaN planes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_dask_scfind import check, make_cube

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

import skyconv  # noqa: E402
from skyconv._dask import cube as dcube  # noqa: E402
from skyconv.cube import _setup  # noqa: E402


def count_planes(dask_worker):
    """On a worker: count the planes every ``_core._scfind_spatial`` call smooths."""
    from skyconv import _core

    n = dask_worker.skyconv_planes = [0]
    core = dask_worker.skyconv_spatial = _core._scfind_spatial

    def counted(cube, *a, **k):
        n[0] += cube.shape[0]
        return core(cube, *a, **k)

    _core._scfind_spatial = counted


def planes_counted(dask_worker):
    """On a worker: the planes counted, the core's function restored."""
    from skyconv import _core

    _core._scfind_spatial = dask_worker.skyconv_spatial
    return dask_worker.skyconv_planes[0]


def masks_before(x, run):
    """The single call's mask (bit 0) before each kernel: the kernels before it, run alone."""
    out = [np.zeros(x.shape, np.uint8)]
    for k in range(1, len(run.specs)):
        m, _, _ = dcube._single_call(
            x, out[0], dataclasses.replace(run, specs=run.specs[:k]), "cpu"
        )
        out.append(m)
    return out


def planes_to_smooth(x, run):
    """The planes the spatial stages of the slab pass (the kernels with a spectral part) need
    smoothed: those whose mask differs from the mask of the previous kernel of the same
    spatial size; where that kernel had no spectral part (its W is NaN where blank, the
    stage is not), also those with a blank voxel; every plane for the first kernel of a size
    and for size 0 (a copy with the replacement: built whole)."""
    masks, blank = masks_before(x, run), np.isnan(x).any(axis=(1, 2))
    total = 0
    for k, spec in enumerate(run.specs):
        if spec[3] == "none":
            continue
        same = [j for j in range(k) if run.specs[j][:3] == spec[:3]]
        if not same or spec[1] == 0:
            total += x.shape[0]
            continue
        changed = (masks[k] != masks[same[-1]]).any(axis=(1, 2))
        if run.specs[same[-1]][3] == "none":
            changed |= blank
        total += int(changed.sum())
    return total


CASES = [
    # SoFiA-2's 12 default kernels, slabs of 6 planes (sources and NaN block across edges)
    ({}, 6),
    # no z = 0 kernel: size 3's first stage is built whole; slabs of 1 to 9 planes
    ({"kernels_xy": (0, 3), "kernels_z": (3, 7), "replacement": -1}, (1, 2, 1, 2, 3, 9)),
]


@pytest.mark.parametrize("kw,zc", CASES)
def test_slab_pass_smooths_only_the_changed_planes(dask_client, monkeypatch, rng, kw, zc):
    monkeypatch.setattr(dcube, "SINGLE_TASK_BYTES", 0)
    x = make_cube(rng)  # an all-NaN plane at z = 4
    x[13] = np.nan  # a second one, at a slab edge
    kw = {"threshold": 3.5, **kw}
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    args = {"kernels_xy": (0, 3, 6), "kernels_z": (0, 3, 7, 15), "replacement": 2.0, **kw}
    run = _setup(3, x.shape, args["kernels_xy"], args["kernels_z"], 3.5, args["replacement"],
                 "mad", "negative", "boxcar", "boxcar", "constant", "sofia2")  # fmt: skip
    expected = planes_to_smooth(x, run)
    dask_client.run(count_planes)
    try:
        lazy, ng = skyconv.smooth_and_clip(
            da.from_array(x, chunks=(zc, 30, 28)), return_noise=True, **kw
        )
        got = lazy.compute()
    finally:
        planes = sum(dask_client.run(planes_counted).values())
    check(got, ng, want, nw, 0)
    full = sum(s[3] != "none" for s in run.specs) * x.shape[0]  # every plane every kernel
    assert 0 < expected < full
    assert planes == expected


def test_spatial_update_equals_the_whole_stage(rng):
    """The update from a kept stage (or W) equals the stage of the whole slab bit for bit,
    blank planes included."""
    x = make_cube(rng)
    m0 = (np.isnan(x).astype(np.uint8) << 7) | (rng.random(x.shape) < 0.001)
    m1 = m0 | (np.abs(x) > 3.0)
    args = ("constant", ("copysign", 2.0), 0.7, True, "cpu")
    for sigma in (0.0, 3.0):
        spec = ("boxcar", sigma, sigma, "boxcar", 3.0, False)
        want = dcube._spatial_block(x, m1, spec, *args)
        s0 = dcube._spatial_block(x, m0, spec, *args)
        got = dcube._spatial_update(s0, m0, False, x, m1, spec, *args)
        assert got.tobytes() == want.tobytes()
        xy_only = spec[:3] + ("none", 0.0, False)
        w = dcube._sample_core(x, m0, xy_only, *args[:4], "cube", (0, 0, 0), x.shape,
                               ("backward", 7), False, "cpu", True)[3]  # fmt: skip
        got = dcube._spatial_update(w, m0, True, x, m1, spec, *args)
        assert got.tobytes() == want.tobytes()
