"""Shared pytest setup: GPU tests (marked ``gpu``) run only where a CUDA GPU works."""

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


@pytest.fixture
def rng():
    """A fresh, seeded generator per test (fresh inputs, reproducible failures)."""
    return np.random.default_rng(20261122)


def rel_err(got, ref) -> float:
    """max |got - ref| / max |ref| (NaNs must match exactly)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), "NaN positions differ"
    g, r = np.nan_to_num(got), np.nan_to_num(ref)
    scale = np.max(np.abs(r)) if r.size else 0.0
    return float(np.max(np.abs(g - r)) / scale) if scale > 0 else float(np.max(np.abs(g - r), initial=0))
