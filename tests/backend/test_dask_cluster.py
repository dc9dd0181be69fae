"""skyconv._dask.cluster: which client the Dask paths use."""

import numpy as np
import pytest

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

import skyconv  # noqa: E402
from skyconv._dask import cluster  # noqa: E402


def test_a_scheduler_set_in_dask_config_wins_over_a_live_client(dask_client, rng):
    """With a client alive, ``dask.config.set(scheduler="synchronous")`` runs the graphs in
    this process: the Dask paths must not persist through the client then (the local
    scheduler cannot read the client's futures: "Missing dependency", seen on the GPU suite)
    nor let Dask choose its P2P rechunk (it does whenever a client exists and the rechunk's
    graph passes ``array.rechunk.threshold``, set low here; P2P needs a worker), and the S+C
    result still equals the single call."""
    assert cluster.client() is dask_client
    with dask.config.set({"scheduler": "synchronous", "array.rechunk.threshold": 0.1}):
        assert cluster.client() is None
        assert cluster.workers() == []
        x = rng.standard_normal((24, 30, 28)).astype(np.float32)
        x[8:12, 10:20, 10:18] += 4.0
        want = skyconv.smooth_and_clip(x, device="cpu", threshold=4.0)
        got = skyconv.smooth_and_clip(
            da.from_array(x, chunks=(8, 16, 14)), device="cpu", threshold=4.0
        ).compute()
    np.testing.assert_array_equal(got, want)
    with dask.config.set(scheduler=dask_client):
        assert cluster.client() is dask_client
    assert cluster.client() is dask_client


def test_workers_are_asked_of_the_scheduler_not_the_clients_cache(dask_client, monkeypatch):
    """``Client.scheduler_info()`` returns the client's cached identity, which the client's
    periodic refresh (it fetches no workers) can overwrite just before that call returns: a
    test once read a cluster of no workers from it (CI, stop 42). ``cluster.workers`` asks the
    scheduler, so a cache that lists no workers does not reach it."""
    monkeypatch.setattr(type(dask_client), "scheduler_info", lambda self, *a, **k: {"workers": {}})
    got = cluster.workers(dask_client)
    assert [w["address"] for w in got] == sorted(dask_client.nthreads())
    assert len(got) == 2 and all(w["nthreads"] == 1 and w["memory_limit"] > 0 for w in got)
    assert cluster.workers() == got  # the current client's, by default
