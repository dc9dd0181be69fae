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
