"""Devices under Dask: backend_info() counts the GPUs a process sees; a worker started with
CUDA_VISIBLE_DEVICES=i (as dask-cuda's LocalCUDACluster starts one per GPU) runs its tasks'
``device="cuda"`` on that GPU, and the answers equal the CPU's."""

from __future__ import annotations

import os

import numpy as np
import pytest

import skyconv


def test_backend_info_counts_devices(monkeypatch):
    info = skyconv.backend_info()["cuda"]
    assert info["device_count"] == len(info["devices"])
    if not info["available"]:
        assert info["device_count"] == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert skyconv.backend_info()["cuda"]["visible_devices"] == "1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert skyconv.backend_info()["cuda"]["visible_devices"] is None


def _worker_view():
    info = skyconv.backend_info()["cuda"]
    return os.environ.get("CUDA_VISIBLE_DEVICES"), info["device_count"], info["device_name"]


@pytest.mark.gpu
def test_one_worker_per_gpu(rng):
    """Two workers, each seeing one GPU (two on a 2-GPU machine, the same one otherwise):
    each reports one device, and gridding and à trous through them on "cuda" equal the CPU."""
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    n = skyconv.backend_info()["cuda"]["device_count"]
    gpus = [str(i % n) for i in range(2)]
    workers = {
        i: {
            "cls": distributed.Nanny,
            "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": g}},
        }
        for i, g in enumerate(gpus)
    }
    scheduler = {"cls": distributed.Scheduler, "options": {"dashboard_address": None}}
    with (
        distributed.SpecCluster(scheduler=scheduler, workers=workers) as cluster,
        distributed.Client(cluster) as client,
    ):
        views = sorted(client.run(_worker_view).values())
        assert [v[0] for v in views] == sorted(gpus)
        assert all(v[1] == 1 for v in views)
        lons = rng.uniform(-1, 1, 20000)
        lats = rng.uniform(-1, 1, 20000)
        data = rng.normal(size=(20000, 4))
        target = skyconv.Sightlines(*np.meshgrid(np.linspace(-1, 1, 40), np.linspace(-1, 1, 40)))
        target = skyconv.Sightlines(target.lons.ravel(), target.lats.ravel())
        want = skyconv.grid(lons, lats, data, target, kernel_params=0.05, dtype=np.float64,
                            device="cpu")  # fmt: skip
        got = skyconv.grid(da.from_array(lons, chunks=2500), da.from_array(lats, chunks=2500),
                           da.from_array(data, chunks=(2500, 2)), target, kernel_params=0.05,
                           dtype=np.float64, device="cuda")  # fmt: skip
        cube = got.cube.compute()
        ok = np.isfinite(want.cube)
        np.testing.assert_array_equal(np.isfinite(cube), ok)
        np.testing.assert_allclose(cube[ok], want.cube[ok], rtol=1e-9, atol=1e-12)
        x = rng.normal(size=(32, 48, 48))
        want = skyconv.atrous_denoise(x, device="cpu")
        got = skyconv.atrous_denoise(da.from_array(x, chunks=(16, 24, 24)), device="cuda")
        assert got.iterations == want.iterations
        np.testing.assert_allclose(np.asarray(got.data), want.data, rtol=0, atol=1e-6)
