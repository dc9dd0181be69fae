"""Shared pytest setup: GPU tests (marked ``gpu``) run only where a CUDA GPU works; the one
``device`` fixture that runs a test once per engine; the seeded ``rng``.

The test tree follows the families (``backend/ healpix/ sht/ smooth/ grid/ cube/ cli/ compat/``);
helpers shared by several folders (``_refs.py``, ``_grid_refs.py``, ``_sofia_ref.py``,
``_cuda_host.py``, ``cuda_host/``) stay here, where pytest's default (prepend) import mode puts
this folder on ``sys.path`` for every test below it. Test files have no ``__init__.py``, so
their basenames must stay unique across the folders.
"""

from __future__ import annotations

import numpy as np
import pytest

import skyconv


def gpu_available() -> bool:
    return bool(skyconv.backend_info()["cuda"]["available"])


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    reason = skyconv.backend_info()["cuda"]["reason"]
    skip = pytest.mark.skip(reason=f"no usable CUDA GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request) -> str:
    """The engine a test runs on: ``"cpu"``, and ``"cuda"`` marked ``gpu`` (so it is skipped,
    by the hook above, where no CUDA GPU works). A test that takes ``device`` runs once for each.
    """
    return request.param


@pytest.fixture
def rng():
    """A fresh, seeded generator per test (fresh inputs, reproducible failures)."""
    return np.random.default_rng(20261122)


@pytest.fixture(scope="session")
def dask_client():
    """One small process-based Dask cluster for the whole run (2 workers × 1 thread, as on CI);
    tests that take it check that a distributed result equals the single-machine call."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client
