"""Smooth + Clip through Dask on workers of several threads: the slab pass's row groups follow
the workers, not their threads (each core call runs on its worker's whole pool, which takes
the worker's thread count), with the single call's mask and noise."""

from __future__ import annotations

import os

import numpy as np
import pytest
from test_dask_scfind import check, make_cube

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import skyconv  # noqa: E402
from skyconv._dask import cluster  # noqa: E402
from skyconv._dask import cube as dcube  # noqa: E402


@pytest.mark.parametrize(
    "layout,groups",
    [
        ([1] * 16, 32),  # one-thread workers: two chains a thread, as before
        ([1, 1], 4),
        ([1], 1),  # a single Dask thread: one chain
        ([16], 4),  # a worker of several threads: four chains, whatever their number
        ([2], 4),
        ([8, 8], 8),
        ([4] * 4, 16),
        ([1, 8], 6),
    ],
)
def test_groups_follow_the_workers_not_their_threads(monkeypatch, layout, groups):
    """GROUPS_PER_THREAD chains a one-thread worker, GROUPS_PER_POOL a worker of several
    threads; none of fewer than MIN_GROUP_VOXELS voxels, at most one a row."""
    info = [{"address": f"w{i}", "nthreads": n} for i, n in enumerate(layout)]
    monkeypatch.setattr(cluster, "workers", lambda: info)
    slab = (63, 1024, 1024)  # a slab of the 8 GB cube: 31 groups of MIN_GROUP_VOXELS
    assert dcube._groups((2000, *slab[1:]), slab[0]) == min(groups, 31)
    monkeypatch.setattr(dcube, "MIN_GROUP_VOXELS", 2**24)
    assert dcube._groups((2000, *slab[1:]), slab[0]) == min(groups, 3)
    monkeypatch.setattr(dcube, "MIN_GROUP_VOXELS", 1)
    assert dcube._groups((2000, *slab[1:]), slab[0]) == groups
    assert dcube._groups((2000, 3, 1024), slab[0]) == min(groups, 3)


def test_one_worker_of_two_threads(monkeypatch, rng):
    """On one worker of two threads: SoFiA-2's 12 kernels give the single call's mask and
    noise bit for bit; one slab-pass kernel on B = 6 slabs runs B·J core calls with J = 4
    chains (GROUPS_PER_POOL) and, besides them, per slab its spatial stage, sample part and
    clip, and the noise and the clip's level (no edge between workers: no halo or carry
    task); the worker's pool, set to 1, takes its 2 threads in the first S+C task."""
    from dask.utils import key_split

    monkeypatch.setattr(dcube, "SINGLE_TASK_BYTES", 0)
    monkeypatch.setattr(dcube, "MIN_GROUP_VOXELS", 1)
    x = make_cube(rng)
    x[13] = np.nan  # a second NaN plane, at a slab edge
    one = {"threshold": 3.5, "kernels_xy": (3,), "kernels_z": (3,)}  # one kernel, both parts
    every = {"threshold": 3.5, "statistic": "mad", "flux_range": "negative"}
    with (
        distributed.LocalCluster(
            processes=True, n_workers=1, threads_per_worker=2, dashboard_address=None
        ) as lc,
        distributed.Client(lc) as client,
    ):
        client.run(skyconv.set_num_threads, 1)  # the first S+C task sets it to the worker's
        for kw, chunks in ((every, (6, 30, 28)), (one, (3, 30, 28))):
            want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
            with distributed.get_task_stream(client) as ts:
                lazy, ng = skyconv.smooth_and_clip(da.from_array(x, chunks=chunks),
                                                   return_noise=True, **kw)  # fmt: skip
                got = client.compute(lazy).result()
            check(got, ng, want, nw, 0)
        threads = list(client.run(skyconv.get_num_threads).values())
    ran = {}
    for rec in ts.data:  # the one-kernel run
        ran[key_split(rec["key"])] = ran.get(key_split(rec["key"]), 0) + 1
    b, j = 6, 4
    assert ran["slab_core"] == b * j
    assert ran["spatial_block"] == ran["sample_of"] == ran["clip_rows"] == b
    assert "getitem" not in ran
    assert ran["noise_rule"] == ran["mul"] == 1
    # the rest, a task a slab each: the input's blocks, the slabs persisted (blocks,
    # concatenate), the zero mask, its preparation, rms0's sample, the output's bit 0
    assert sum(ran.values()) == (b * j + 3 * b + 2) + 7 * b + 1
    if not os.environ.get("SKYCONV_NUM_THREADS"):
        assert threads == [2]
