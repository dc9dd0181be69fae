"""skyconv.filters on dask arrays equal the NumPy call on the whole array (bit for bit here;
the contract is <= 1 ulp), for every boundary mode, with chunkings thinner than the halo, NaN
blocks across chunk edges, and on the 2-worker process cluster (`dask_client`)."""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

from skyconv import ArgumentError, filters  # noqa: E402
from skyconv._dask.halo import merge_thin, overlap_map  # noqa: E402
from skyconv.filters import Correlate, Gaussian, Uniform  # noqa: E402

MODES = ["reflect", "nearest", "mirror", "constant", "wrap", "grid-wrap", "grid-mirror"]


def ulps(a, b):
    """Largest distance in units in the last place between two same-dtype arrays (NaN == NaN)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    it = np.int32 if a.dtype == np.float32 else np.int64
    same_nan = np.isnan(a) & np.isnan(b)
    d = np.abs(a.view(it).astype(np.int64) - b.view(it).astype(np.int64))
    d[same_nan] = 0
    return int(d.max()) if d.size else 0


def cube(rng, dtype, shape=(11, 12, 10)):
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    x[4:7, 3:9, 2:6] = np.nan  # a NaN block across chunk edges (chunks 3/4 below)
    x[8] = np.nan  # an all-NaN plane
    return x


def calls(dtype):
    return [
        (filters.gaussian_filter1d, {"sigma": 1.7}),
        (filters.gaussian_filter1d, {"sigma": 0.8, "radius": 5}),
        (filters.uniform_filter1d, {"size": 4, "origin": 1}),
        (filters.uniform_filter1d, {"size": 5}),
        (filters.correlate1d, {"weights": [1.0, -2.0, 0.5, 3.0], "origin": -1}),
        (filters.convolve1d, {"weights": [0.25, 0.5, 1.0, -1.0], "origin": 1}),
        (filters.convolve1d, {"weights": [1.0, 2.0, 1.0]}),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", MODES)
def test_each_filter_equals_numpy(rng, dtype, mode):
    x = cube(rng, dtype)
    dx = da.from_array(x, chunks=(2, 5, 7))  # chunks thinner than some halos
    cases = [(fn, kw, axis) for fn, kw in calls(dtype) for axis in (0, 1, -1)]
    wants, lazies = [], []
    for fn, kw, axis in cases:
        wants.append(fn(x, axis=axis, mode=mode, cval=0.75, device="cpu", **kw))
        lazies.append(fn(dx, axis=axis, mode=mode, cval=0.75, device="cpu", **kw))
        assert lazies[-1].chunks == dx.chunks
    gots = dask.compute(*lazies, scheduler="synchronous")
    for (fn, kw, axis), got, want in zip(cases, gots, wants, strict=True):
        assert got.dtype == want.dtype
        assert ulps(got, want) <= 1, (fn.__name__, kw, axis, mode)


def test_results_are_bit_identical_float32(rng):
    x = cube(rng, np.float32)
    dx = da.from_array(x, chunks=(5, 6, 4))
    for fn, kw in calls(np.float32):
        for mode in ("reflect", "constant", "wrap"):
            want = fn(x, axis=1, mode=mode, device="cpu", **kw)
            got = fn(dx, axis=1, mode=mode, device="cpu", **kw).compute(scheduler="sync")
            assert ulps(got, want) == 0, (fn.__name__, mode)


def test_halo_wider_than_the_axis_and_wrap_more_than_once(rng):
    x = rng.standard_normal((5, 40)).astype(np.float64)
    dx = da.from_array(x, chunks=(1, 9))
    for mode in ("wrap", "reflect", "mirror"):
        want = filters.gaussian_filter1d(x, 3.0, axis=0, mode=mode, device="cpu")
        got = filters.gaussian_filter1d(dx, 3.0, axis=0, mode=mode, device="cpu")
        assert got.chunks == dx.chunks
        assert ulps(got.compute(scheduler="sync"), want) <= 1, mode


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chain_equals_numpy(rng, dtype):
    x = cube(rng, dtype)
    dx = da.from_array(x, chunks=(4, 5, 3))
    chains = [
        [Gaussian(1.3, axis=2), Gaussian(1.3, axis=1), Uniform(3, axis=0)],
        [Gaussian(1.0, axis=0, mode="wrap"), Correlate((1.0, 2.0, -1.0), axis=0, mode="wrap")],
        # wrap and reflect on one axis: that axis is made one chunk
        [Uniform(4, axis=1, mode="wrap", origin=-1), Gaussian(0.9, axis=1, mode="nearest")],
        [Correlate((0.5, 0.5), axis=2, mode="constant", cval=2.0), Uniform(5, axis=2)],
    ]
    lazies = [filters.chain(dx, passes, device="cpu") for passes in chains]
    assert all(g.chunks == dx.chunks for g in lazies)
    for passes, got in zip(chains, dask.compute(*lazies, scheduler="sync"), strict=True):
        want = filters.chain(x, passes, device="cpu")
        if dtype == np.float64 and any(isinstance(p, Uniform) for p in passes):
            # The NumPy chain's float64 running sum itself differs by a few 1e-16 between a
            # line alone and the same line at the end of a row of lines (its vector tail), so
            # no chunking can match it to the ulp: compare to the rounding of the sums.
            scale = filters.chain(np.nan_to_num(np.abs(x)), passes, device="cpu").max()
            np.testing.assert_allclose(got, want, rtol=0, atol=64 * np.finfo(dtype).eps * scale)
        else:
            assert ulps(got, want) <= 1, passes


def test_on_the_process_cluster(dask_client, rng):
    x = cube(rng, np.float32, shape=(24, 30, 20))
    dx = da.from_array(x, chunks=(5, 8, 20))
    passes = [Gaussian(2.0, axis=2), Gaussian(2.0, axis=1), Uniform(7, axis=0, mode="wrap")]
    want = filters.chain(x, passes, device="cpu")
    got = dask_client.compute(filters.chain(dx, passes)).result()
    assert ulps(got, want) <= 1
    want = filters.gaussian_filter1d(x, 2.5, axis=0, mode="mirror", device="cpu")
    got = dask_client.compute(filters.gaussian_filter1d(dx, 2.5, axis=0, mode="mirror"))
    assert ulps(got.result(), want) <= 1


def test_errors_are_eager_and_named(rng):
    dx = da.from_array(rng.standard_normal((6, 8)), chunks=3)
    with pytest.raises(ValueError, match="mode"):
        filters.gaussian_filter1d(dx, 1.0, mode="bogus")
    with pytest.raises(ValueError, match="sigma"):
        filters.gaussian_filter1d(dx, -1.0)
    with pytest.raises(ValueError, match="axis"):
        filters.uniform_filter1d(dx, 3, axis=2)
    with pytest.raises(TypeError, match="float32 or float64"):
        filters.uniform_filter1d(da.ones((4, 4), dtype=np.int16, chunks=2), 3)
    unknown = dx[dx[:, 0] > 0]  # boolean indexing: unknown chunk sizes along axis 0
    with pytest.raises(ArgumentError, match="compute_chunk_sizes"):
        filters.gaussian_filter1d(unknown, 1.0, axis=1)


def test_merge_thin():
    assert merge_thin((2, 2, 2, 2, 1), 3) == (4, 5)
    assert merge_thin((5, 5), 3) == (5, 5)
    assert merge_thin((1, 1), 5) == (2,)
    assert sum(merge_thin((3, 1, 1, 7, 2), 4)) == 14


def test_overlap_map_is_the_whole_call(rng):
    """A fn that looks at its block's edges: only the true edges may show in the result."""
    x = rng.standard_normal(50)

    def fn(b):  # the reach-2 moving sum with zero padding beyond the ends
        p = np.concatenate([[0.0, 0.0], b, [0.0, 0.0]])
        return sum(p[k : k + b.size] for k in range(5))

    got = overlap_map(da.from_array(x, chunks=7), fn, {0: 2}).compute(scheduler="sync")
    np.testing.assert_array_equal(got, fn(x))


@pytest.mark.gpu
def test_device_passes_through_to_the_blocks(rng):
    """device="cuda" reaches every block's call: equal to the NumPy call on the GPU."""
    x = cube(rng, np.float32)
    dx = da.from_array(x, chunks=(4, 5, 7))
    passes = [Gaussian(1.5, axis=2), Gaussian(1.5, axis=1), Uniform(3, axis=0, mode="wrap")]
    want = filters.chain(x, passes, device="cuda")
    got = filters.chain(dx, passes, device="cuda").compute(scheduler="sync")
    assert ulps(got, want) <= 1
    want = filters.gaussian_filter1d(x, 2.0, axis=0, mode="nearest", device="cuda")
    got = filters.gaussian_filter1d(dx, 2.0, axis=0, mode="nearest", device="cuda")
    assert ulps(got.compute(scheduler="sync"), want) <= 1
