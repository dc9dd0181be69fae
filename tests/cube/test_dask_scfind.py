"""smooth_and_clip on dask cubes: the same mask voxel for voxel and the same noise values
(1e-12 relative; bit-identical for precision="sofia2") as the NumPy call, on the 2-worker
process cluster, with sources, NaN blocks and an all-NaN plane across chunk edges; out of core
from zarr with workers whose memory limit is below the cube's size; a worker killed mid-run."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import skyconv  # noqa: E402
from skyconv import ArgumentError, ArgumentTypeError, ShapeError  # noqa: E402


@pytest.fixture(autouse=True)
def staged(monkeypatch):
    """These tests check the staged graph (blocks, chunk edges): no one-task shortcut for
    small cubes unless a test restores it."""
    from skyconv._dask import cube

    monkeypatch.setattr(cube, "SINGLE_TASK_BYTES", 0)


def make_cube(rng, shape=(18, 30, 28), dtype=np.float32):
    x = rng.standard_normal(shape).astype(dtype)
    x[6:11, 5:14, 7:12] += 2.5  # a source across chunk edges (chunks (6, 12, 10) below)
    x[2:4, 20:27, 15:22] -= 3.0  # a negative one
    x[12:16, 14:19, 17:19] += 4.0
    x[8:14, 0:9, 20:28] = np.nan  # a NaN block across chunk edges
    x[4] = np.nan  # an all-NaN plane
    return x


def check(got, noise_got, want, noise_want, rtol):
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)
    assert want.sum() > 0
    assert noise_got.kernels == noise_want.kernels
    for a, b in zip([noise_got.rms0] + noise_got.rms, [noise_want.rms0] + noise_want.rms):
        assert isinstance(a, float)
        assert a == pytest.approx(b, rel=rtol, abs=0)


CONFIGS = [
    # SoFiA-2's defaults (boxcar spatial, precision sofia2), every statistic and flux range
    ({"statistic": "mad", "flux_range": "negative"}, 0),
    ({"statistic": "std", "flux_range": "full", "kernels_xy": (0, 4), "kernels_z": (0, 5)}, 0),
    ({"statistic": "gauss", "flux_range": "positive", "kernels_xy": (3, 6), "kernels_z": (3,)}, 0),
    ({"statistic": "mad", "flux_range": "full", "replacement": -1, "kernels_z": (0, 7)}, 0),
    # the other options: true Gaussians, float64 arithmetic, another edge mode
    (
        {
            "spatial": "gaussian",
            "spectral": "gaussian",
            "precision": "float64",
            "edge_mode": "reflect",
            "statistic": "std",
            "kernels_xy": (0, 3),
            "kernels_z": (0, 4),
        },
        1e-12,
    ),
]


@pytest.mark.parametrize("kw,rtol", CONFIGS)
def test_equals_numpy_on_the_cluster(dask_client, rng, kw, rtol):
    x = make_cube(rng, dtype=np.float64 if rtol else np.float32)
    kw = {"threshold": 4.0, **kw}
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    dx = da.from_array(x, chunks=(6, 12, 10))
    lazy, ng = skyconv.smooth_and_clip(dx, return_noise=True, **kw)
    assert isinstance(lazy, da.Array) and lazy.chunks == dx.chunks
    check(dask_client.compute(lazy).result(), ng, want, nw, rtol)


def test_float32_precision_float64_noise(rng):
    """precision="float64" on float32: the single call updates its working cube in place
    between kernels of one spatial size (rounded stamps) where the Dask path smooths afresh,
    so values may differ by a float32 rounding: noise to 1e-6, masks equal here."""
    x = make_cube(rng)
    kw = {"precision": "float64", "kernels_xy": (0, 3), "kernels_z": (0, 3), "threshold": 4.0}
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    got, ng = skyconv.smooth_and_clip(da.from_array(x, chunks=(6, 12, 10)), return_noise=True, **kw)
    np.testing.assert_array_equal(got.compute(), want)
    np.testing.assert_allclose(ng.rms, nw.rms, rtol=1e-6)


def test_mask_in_2d_and_chunkings(rng):
    x = make_cube(rng, shape=(10, 16, 14))
    m0 = np.zeros(x.shape, dtype=bool)
    m0[0:3, 0:6, 0:6] = True
    want = skyconv.smooth_and_clip(x, mask=m0, kernels_xy=(0, 3), kernels_z=(0, 3), device="cpu")
    # thin chunks along every axis the stages must see whole: rechunked, then back
    dx = da.from_array(x, chunks=(1, 16, 7))
    got = skyconv.smooth_and_clip(
        dx, mask=da.from_array(m0, chunks=4), kernels_xy=(0, 3), kernels_z=(0, 3)
    )
    assert got.chunks == dx.chunks
    np.testing.assert_array_equal(got.compute(), want)
    plane = x[6]
    want2 = skyconv.smooth_and_clip(plane, threshold=3.0, device="cpu")
    got2 = skyconv.smooth_and_clip(da.from_array(plane, chunks=7), threshold=3.0)
    assert got2.shape == plane.shape
    np.testing.assert_array_equal(got2.compute(), want2)


def test_bad_inputs(rng):
    x = da.from_array(make_cube(rng), chunks=(6, 12, 10))
    unknown = x[x[:, 0, 0] > -10]  # boolean indexing: unknown chunk sizes along z
    with pytest.raises(ArgumentError, match="compute_chunk_sizes"):
        skyconv.smooth_and_clip(unknown)
    with pytest.raises(TypeError, match="float32 or float64"):
        skyconv.smooth_and_clip(x.astype(np.int32))
    with pytest.raises(ShapeError, match="mask has shape"):
        skyconv.smooth_and_clip(x, mask=da.zeros((3, 3, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="statistic"):
        skyconv.smooth_and_clip(x, statistic="median")
    with pytest.raises(ShapeError):
        skyconv.smooth_and_clip(x[0, 0])
    with pytest.raises(ArgumentTypeError, match="scratch must be a directory path"):
        skyconv.smooth_and_clip(x, scratch=3)


def _pids(client):
    return sorted(client.run(os.getpid).values())


def test_worker_killed_mid_run(rng):
    """A worker SIGKILLed after the first kernels (its persisted mask blocks are lost, and
    the nanny restarts it): Dask recomputes them and the mask is still the single call's."""
    x = make_cube(rng)
    kw = {"kernels_xy": (0, 3), "kernels_z": (0, 3), "threshold": 4.0}
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    with (
        distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        before = _pids(client)
        killed = []

        def progress(done, total, noise):
            if done == 2 and not killed:
                killed.append(before[0])
                os.kill(before[0], signal.SIGKILL)

        lazy, ng = skyconv.smooth_and_clip(
            da.from_array(x, chunks=(6, 12, 10)), return_noise=True, progress=progress, **kw
        )
        got = client.compute(lazy).result()
        assert killed
        client.wait_for_workers(2, timeout=60)
        assert _pids(client) != before  # the nanny started a new process
    check(got, ng, want, nw, 0)


def test_out_of_core_zarr(tmp_path, rng):
    """A zarr cube bigger than each worker's memory limit (2 workers x 250 MB, cube 258 MB,
    zarr chunks whole along z): completes with no worker restarted and the single call's
    mask, written to zarr. (Kernels with both spatial and spectral smoothing transpose the
    cube between z-slabs and z-columns, which holds the smoothed cube in flight across the
    cluster: that case needs the cube to fit in the cluster's memory; see bench/NOTES.md.)"""
    zarr = pytest.importorskip("zarr")
    shape = (30, 1024, 2100)
    x = rng.standard_normal(shape, dtype=np.float32)
    x[10:14, 100:120, 300:330] += 3.0
    x[20, 500:900, 1000:1010] = np.nan
    src = str(tmp_path / "cube.zarr")
    z = zarr.open_array(src, mode="w", shape=shape, chunks=(30, 256, 300), dtype=np.float32)
    z[...] = x
    kw = {"kernels_xy": (0,), "kernels_z": (0, 3), "threshold": 4.0}
    want = skyconv.smooth_and_clip(x, device="cpu", **kw)
    del x, z
    limit = 250e6
    assert np.prod(shape) * 4 > limit
    with (
        distributed.LocalCluster(
            processes=True,
            n_workers=2,
            threads_per_worker=1,
            memory_limit=int(limit),
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        before = _pids(client)
        out = str(tmp_path / "mask.zarr")
        skyconv.smooth_and_clip(da.from_zarr(src), **kw).to_zarr(out)
        assert _pids(client) == before  # no worker killed or restarted
    np.testing.assert_array_equal(zarr.open_array(out, mode="r")[...], want)


def _start_rss_sampler(dask_worker):
    """Sample this worker's RSS every 10 ms in a thread (ru_maxrss cannot be used: Linux
    carries the parent's peak into a spawned child)."""
    import threading
    import time

    import psutil

    proc = psutil.Process()
    dask_worker.skyconv_peak_rss = proc.memory_info().rss

    def loop():
        while True:
            rss = proc.memory_info().rss
            dask_worker.skyconv_peak_rss = max(dask_worker.skyconv_peak_rss, rss)
            time.sleep(0.01)

    threading.Thread(target=loop, daemon=True).start()


def _peak_rss(dask_worker):
    return dask_worker.skyconv_peak_rss


def test_out_of_core_spatial_and_spectral_kernels(tmp_path, rng):
    """Kernels with spatial and spectral parts on a zarr cube bigger than the two workers'
    memory limits together (2 × 170 MB with spilling and pausing off, cube 352 MB in z-slab
    chunks): the planes ↔ columns exchange goes through the scratch store, no worker is
    restarted, each worker's peak RSS stays under its limit, the mask is the single call's and
    the noise bit-identical; the scratch directory is gone once the mask is dropped. (The
    in-memory rechunk holds the whole smoothed cube in flight: its workers die here.)"""
    import gc

    import dask

    zarr = pytest.importorskip("zarr")
    shape = (84, 1024, 1024)
    x = rng.standard_normal(shape, dtype=np.float32)
    x[30:36, 100:130, 300:330] += 1.5
    x[50, 500:900, 1000:1010] = np.nan
    src = str(tmp_path / "cube.zarr")
    z = zarr.open_array(src, mode="w", shape=shape, chunks=(2, 512, 1024), dtype=np.float32)
    z[...] = x
    kw = {"kernels_xy": (0, 3), "kernels_z": (3,), "threshold": 4.0}
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    del x, z
    limit = 170e6
    assert np.prod(shape) * 4 > 2 * limit
    scratch = tmp_path / "scratch"
    off = {f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause")}
    with (
        dask.config.set(off),
        distributed.LocalCluster(
            processes=True,
            n_workers=2,
            threads_per_worker=1,
            memory_limit=int(limit),
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        before = _pids(client)
        client.run(_start_rss_sampler)
        out = str(tmp_path / "mask.zarr")
        lazy, ng = skyconv.smooth_and_clip(
            da.from_zarr(src), return_noise=True, scratch=str(scratch), **kw
        )
        assert len(os.listdir(scratch)) == 1  # the store, while the mask is alive
        lazy.to_zarr(out)
        assert _pids(client) == before  # no worker killed or restarted
        peaks = client.run(_peak_rss)
        assert max(peaks.values()) < limit, peaks
        del lazy
        gc.collect()
        assert os.listdir(scratch) == []
    got = zarr.open_array(out, mode="r")[...]
    np.testing.assert_array_equal(got, want)
    assert want.sum() > 100
    assert ng.rms0 == nw.rms0 and ng.rms == nw.rms


@pytest.mark.parametrize("chunks", [(6, 12, 10), (18, 30, 28)])
def test_small_cube_runs_as_one_task(dask_client, rng, monkeypatch, chunks):
    """A cube under SINGLE_TASK_BYTES (or in one chunk) is the single call in one task: the
    staged path is never entered, the mask, noise and progress are the single call's, and the
    mask keeps the input's chunks."""
    from skyconv._dask import cube

    monkeypatch.setattr(cube, "SINGLE_TASK_BYTES", 0 if chunks == (18, 30, 28) else 1 << 24)

    def no_stages(*a, **k):
        raise AssertionError("the staged path ran")

    monkeypatch.setattr(cube, "_Noise", no_stages)
    x = make_cube(rng)
    m0 = np.zeros(x.shape, dtype=bool)
    m0[0:3, 0:6, 0:6] = True
    kw = {"threshold": 4.0, "kernels_xy": (0, 3), "kernels_z": (0, 3), "mask": m0}
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    seen = []
    lazy, ng = skyconv.smooth_and_clip(
        da.from_array(x, chunks=chunks), return_noise=True,
        progress=lambda d, t, r: seen.append((d, t, r)), **kw,
    )  # fmt: skip
    assert lazy.chunks == da.from_array(x, chunks=chunks).chunks
    check(dask_client.compute(lazy).result(), ng, want, nw, 0)
    assert seen == [(i + 1, 4, r) for i, r in enumerate(nw.rms)]


def test_compat_sofia_refuses_dask_with_a_pointer(rng):
    from skyconv.compat import sofia
    from skyconv.exceptions import ArgumentTypeError

    x = da.from_array(make_cube(rng), chunks=(6, 12, 10))
    with pytest.raises(ArgumentTypeError, match="smooth_and_clip"):
        sofia.SCfinder_mem(x, np.zeros(x.shape, np.int32), {})


@pytest.mark.gpu
def test_dask_stages_equal_the_gpu_single_call(rng):
    """The Dask stages run on the GPU engine of this process's workers (the stage functions on
    "cuda"); the single call on the GPU must give the same mask and noise."""
    x = make_cube(rng)
    want, nw = skyconv.smooth_and_clip(x, device="cuda", return_noise=True, threshold=4.0)
    got, ng = skyconv.smooth_and_clip(
        da.from_array(x, chunks=(6, 12, 10)), device="cuda", return_noise=True, threshold=4.0
    )
    check(got.compute(), ng, want, nw, 0)


@pytest.mark.gpu
def test_one_task_path_on_the_gpu(rng, monkeypatch):
    """The one-task path runs the single call with the device the worker resolves: on a GPU
    machine the GPU engine, with the CPU single call's mask and noise (bit-identical for
    precision="sofia2")."""
    from skyconv._dask import cube

    monkeypatch.setattr(cube, "SINGLE_TASK_BYTES", 1 << 24)
    x = make_cube(rng)
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, threshold=4.0)
    got, ng = skyconv.smooth_and_clip(
        da.from_array(x, chunks=(6, 12, 10)), device="cuda", return_noise=True, threshold=4.0
    )
    check(got.compute(), ng, want, nw, 0)
