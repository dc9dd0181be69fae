"""The exact k-th value selection behind every median/MAD, against numpy (CPU and GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from skyconv import _core


def _reference(a, center, absdev, rng_name):
    v = a.astype(np.float64)
    v = v[np.isfinite(v)] - center
    if rng_name == "negative":
        v = v[v < 0]
    elif rng_name == "positive":
        v = v[v > 0]
    return np.sort(np.abs(v) if absdev else v)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_select_matches_sort(rng, device, dtype):
    for n in (1, 2, 17, 1000, 300_001):
        a = (rng.standard_normal(n) * 5).astype(dtype)
        if n > 10:
            a[rng.integers(0, n, n // 10)] = np.nan
            a[:3] = np.inf
            a[5:9] = 1.25
        for center, absdev, rng_name in [
            (0.0, False, "all"),
            (0.3, True, "all"),
            (0.0, True, "negative"),
            (0.0, False, "positive"),
        ]:
            ref = _reference(a, center, absdev, rng_name)
            for k in sorted({0, len(ref) // 2, max(len(ref) - 1, 0)}):
                got = _core._select_kth(a, k, center, absdev, rng_name, device)
                if len(ref) == 0:
                    assert got is None
                else:
                    assert got == ref[k], (n, center, absdev, rng_name, k)
            assert _core._select_kth(a, len(ref), center, absdev, rng_name, device) is None


def test_select_heavy_ties(rng, device):
    """Half the cube exactly zero (replaced blanks): the refinement must not blow up."""
    a = rng.standard_normal(400_000).astype(np.float32)
    a[::2] = 0.0
    ref = np.sort(np.abs(a.astype(np.float64)))
    for k in (0, 100_000, 199_999, 200_000, 399_999):
        assert _core._select_kth(a, k, 0.0, True, "all", device) == ref[k]


def test_select_bad_range():
    with pytest.raises(ValueError, match="range"):
        _core._select_kth(np.ones(3), 0, 0.0, False, "middle", "cpu")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_select_pair_matches_sort(rng, device, dtype):
    """Two ranks in one selection (a median's middle values): equal, adjacent, far apart, on
    either side of zero and of a digit boundary, and past the end."""
    n = 200_001
    a = (rng.standard_normal(n) * 3).astype(dtype)
    a[rng.integers(0, n, n // 20)] = np.nan
    a[10:20] = -0.0
    a[20:30] = 0.0
    for center, absdev, rng_name in [(0.0, False, "all"), (0.7, True, "all")]:
        ref = _reference(a, center, absdev, rng_name)
        m = len(ref)
        zero = max(int(np.searchsorted(ref, 0.0)), 1)
        for k0, k1 in [(m // 2 - 1, m // 2), (5, 5), (0, m - 1), (zero - 1, zero), (m - 2, m - 1)]:
            got = _core._select_pair(a, k0, k1, center, absdev, rng_name, device)
            assert got == (ref[k0], ref[k1]), (center, absdev, k0, k1)
        assert _core._select_pair(a, 0, m, center, absdev, rng_name, device) is None


def test_select_pair_float32_keys(device):
    """float32 values selected from their own 35 key bits: neighbours one ulp apart, the
    extremes of the type, subnormals and both zeros."""
    f = np.finfo(np.float32)
    one = np.float32(1.0)
    a = np.array(
        [
            one,
            np.nextafter(one, np.float32(2)),
            np.nextafter(one, np.float32(0)),
            -one,
            np.nextafter(-one, np.float32(0)),
            f.max,
            -f.max,
            f.tiny,
            f.smallest_subnormal,
            -f.smallest_subnormal,
            0.0,
            -0.0,
            np.nan,
            np.inf,
            -np.inf,
        ],
        dtype=np.float32,
    )
    # total order: -0 before +0, as the keys (and the CPU refinement) have it
    ref = sorted(a[np.isfinite(a)].astype(np.float64), key=lambda v: (v, not np.signbit(v)))
    for k in range(len(ref)):
        got = _core._select_pair(a, k, len(ref) - 1 - k, device=device)
        assert got is not None
        assert got[0] == ref[k] and got[1] == ref[len(ref) - 1 - k], k
        assert np.signbit(got[0]) == np.signbit(ref[k]), k


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_select_over_gathered_keys(rng, dtype):
    """Above 4 Mi values the device selection counts its last four 64-bit digits over the keys
    it kept after two (`GATHER_MIN` in src/cube/stats/cuda.rs): MADs, ranks straddling the
    prefix, past the end; and quantised data, whose ties overflow the buffer and select over
    the whole array again."""
    n = 5_000_001
    smooth = (rng.standard_normal(n) * 3).astype(dtype)
    smooth[rng.integers(0, n, n // 50)] = np.nan
    steps = np.round(rng.standard_normal(n)).astype(dtype)  # ~9 values: ties past the buffer
    for a in (smooth, steps):
        for center, absdev, rng_name in [(0.25, True, "all"), (0.0, False, "all")]:
            ref = _reference(a, center, absdev, rng_name)
            m = len(ref)
            for k0, k1 in [(m // 2 - 1, m // 2), (7, m // 3), (0, m - 1)]:
                got = _core._select_pair(a, k0, k1, center, absdev, rng_name, "cuda")
                assert got == (ref[k0], ref[k1]), (dtype, center, absdev, k0, k1)
            assert _core._select_pair(a, 0, m, center, absdev, rng_name, "cuda") is None
