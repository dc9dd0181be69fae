"""Smooth + Clip through Dask with the cube kept on CPU workers: each kernel's noise is a task
whose result its clip tasks read on the workers, so the client queues kernel k + 1's graph
before it reads kernel k's noise (``KERNELS_AHEAD``): no round trip to the client between two
kernels, each noise rule run once, the single call's mask and noise bit for bit."""

from __future__ import annotations

import pytest
from test_dask_scfind import check, make_cube

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import skyconv  # noqa: E402
from skyconv._dask import cube as dcube  # noqa: E402

#: SoFiA-2's 12 kernels: (0, 0) clips at rms0; (3, 0) and (6, 0) spatial only (W kept, noise
#: from block samples); the other 9 the z-slab pass.
EVERY = {"threshold": 3.5, "statistic": "mad", "flux_range": "negative"}


@pytest.mark.parametrize("ahead", [1, 0, 12])
def test_next_kernel_queued_before_the_noise_is_read(monkeypatch, rng, dask_client, ahead):
    """When the client reads kernel k's noise (its only blocking call in the kernel loop),
    the clips of kernels ≤ k + ``ahead`` (at most 12) are already queued — a kernel's clip is
    the last of its graph; with 0, only kernel k's (the order before session 19). Every
    noise rule runs once (11: all but the rms0 kernel; one computed again would show here),
    the levels are tasks, ``progress`` sees kernels 1..12 in order with the noise returned,
    and mask and noise equal the single call's (``rel=0``)."""
    from dask.utils import key_split

    monkeypatch.setattr(dcube, "SINGLE_TASK_BYTES", 0)
    monkeypatch.setattr(dcube, "KERNELS_AHEAD", ahead)
    queued, reads = [], []  # clips queued; clips queued at each read of a noise
    pinned, compute = dcube._pinned_blocks, dcube._compute

    def pinned_blocks(fn, *args, **kw):
        if fn in (dcube._clip_rows, dcube._clip_core):
            queued.append(fn.__name__)
        return pinned(fn, *args, **kw)

    def counted(parts):
        reads.append(len(queued))
        return compute(parts)

    monkeypatch.setattr(dcube, "_pinned_blocks", pinned_blocks)
    monkeypatch.setattr(dcube, "_compute", counted)
    x = make_cube(rng)
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **EVERY)
    seen = []
    with distributed.get_task_stream(dask_client) as ts:
        lazy, ng = skyconv.smooth_and_clip(
            da.from_array(x, chunks=(3, 30, 28)), return_noise=True,
            progress=lambda *a: seen.append(a), **EVERY,
        )  # fmt: skip
        got = dask_client.compute(lazy).result()
    check(got, ng, want, nw, 0)
    assert queued == (["_clip_core"] + ["_clip_rows"] * 3) * 3  # (0, z), (3, z), (6, z)
    # rms0 (no clip queued yet), then the noise of kernels 2..12 (kernel 1 clips at rms0)
    assert reads == [0] + [min(k + ahead, 12) for k in range(2, 13)]
    assert [s[:2] for s in seen] == [(k, 12) for k in range(1, 13)]
    assert [float(s[2]) for s in seen] == ng.rms
    ran = {}
    for rec in ts.data:
        ran[key_split(rec["key"])] = ran.get(key_split(rec["key"]), 0) + 1
    assert ran["noise_rule"] == ran["mul"] == 11
    # 6 slabs, one chain (MIN_GROUP_VOXELS): a core call a slab and kernel, run once
    assert ran["slab_core"] == ran["clip_rows"] == 9 * 6 and ran["clip_core"] == 3 * 6
