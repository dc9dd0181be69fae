"""Reference helpers shared by the tests (import as `from _refs import rel_err`)."""

from __future__ import annotations

import numpy as np


def rel_err(got, ref) -> float:
    """max |got - ref| / max |ref| (NaNs must match exactly)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), "NaN positions differ"
    g, r = np.nan_to_num(got), np.nan_to_num(ref)
    scale = np.max(np.abs(r)) if r.size else 0.0
    diff = float(np.max(np.abs(g - r), initial=0))
    return diff / scale if scale > 0 else diff
