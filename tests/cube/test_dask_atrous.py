"""atrous_denoise on dask arrays equals the NumPy call: result <= 1e-6 relative, the same
iteration count and noise values, on a 2-worker process cluster; chunkings with NaN blocks and
all-NaN planes across chunk edges; both variants; per-unit (dim < ndim) reconstructions; the
exact distributed median it relies on."""

from __future__ import annotations

import numpy as np
import pytest

import skyconv
from skyconv.exceptions import ArgumentError, ShapeError

da = pytest.importorskip("dask.array")


def _cube(rng, shape=(24, 36, 40), dtype=np.float64):
    """Noise, two sources (one across the chunk edges used below), a NaN block across chunk
    edges and an all-NaN plane."""
    x = rng.normal(0.0, 1.0, shape)
    z, y, xx = np.indices(shape)
    for c, amp in (((12, 18, 20), 6.0), ((5, 8, 30), 4.0)):
        r2 = (z - c[0]) ** 2 / 4.0 + ((y - c[1]) ** 2 + (xx - c[2]) ** 2) / 9.0
        x += amp * np.exp(-r2 / 2)
    x[10:14, 15:22, 17:23] = np.nan  # across the z, y and x chunk edges below
    x[7] = np.nan  # an all-NaN plane at a chunk edge
    return x.astype(dtype)


def _check(got, want, rtol=1e-6):
    assert got.iterations == want.iterations
    assert got.scales == want.scales
    np.testing.assert_allclose(got.noise, want.noise, rtol=1e-9)
    np.testing.assert_allclose(got.input_noise, want.input_noise, rtol=1e-12)
    assert isinstance(got.iterations, int) and isinstance(got.noise, float)
    g = np.asarray(got.data)
    w = np.asarray(want.data)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    scale = np.nanmax(np.abs(w))
    np.testing.assert_allclose(g, w, rtol=0, atol=rtol * scale, equal_nan=True)


@pytest.mark.parametrize("variant", ["duchamp", "corrected"])
def test_cube_equals_numpy(dask_client, rng, variant):
    x = _cube(rng)
    want = skyconv.atrous_denoise(x, dim=3, snr_recon=3.0, device="cpu", variant=variant)
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 18, 20)), dim=3, snr_recon=3.0,
                                 device="cpu", variant=variant)  # fmt: skip
    assert got.data.chunks == ((8, 8, 8), (18, 18), (20, 20))
    _check(got, want)


@pytest.mark.parametrize(
    ("filt", "robust", "chunks"),
    [
        ("triangle", False, (5, 12, 40)),
        ("haar", True, (24, 10, 13)),
        ("b3spline", True, (6, 30, 17)),
    ],
)
def test_cube_filters_statistics_chunkings(dask_client, rng, filt, robust, chunks):
    """Thin chunks (below the largest scale's reach: merged by the halo), other filters, mean
    and standard deviation statistics, float32."""
    x = _cube(rng, (20, 30, 34), np.float32)
    kw = dict(dim=3, filter=filt, robust=robust, scale_min=2, device="cpu")
    want = skyconv.atrous_denoise(x, **kw)
    got = skyconv.atrous_denoise(da.from_array(x, chunks=chunks), **kw)
    assert got.data.dtype == np.float32
    _check(got, want, rtol=1e-6)


def test_image_duchamp_2d(dask_client, rng):
    """dim=2 on an image (one unit): DUCHAMP's 2-D quirks (blank value, N-1 scales)."""
    x = rng.normal(size=(64, 70))
    x[25:40, 30:45] += 5.0
    x[20:30, 30:40] = np.nan  # across both chunk edges below
    want = skyconv.atrous_denoise(x, dim=2, device="cpu")
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(20, 35)), dim=2, device="cpu")
    _check(got, want)


@pytest.mark.parametrize("dim", [1, 2])
def test_per_unit(dask_client, rng, dim):
    """Spectra (dim=1) and channel maps (dim=2): the unit axes are made whole, units chunked."""
    x = _cube(rng, (16, 20, 22))
    want = skyconv.atrous_denoise(x, dim=dim, device="cpu")
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(4, 10, 11)), dim=dim, device="cpu")
    assert got.data.chunks == ((4,) * 4, (10, 10), (11, 11))
    np.testing.assert_array_equal(got.iterations, want.iterations)
    np.testing.assert_array_equal(got.noise, want.noise)
    np.testing.assert_array_equal(got.input_noise, want.input_noise)
    np.testing.assert_array_equal(np.asarray(got.data), want.data)


def test_all_blank_and_bad_input(dask_client):
    x = np.full((8, 10, 10), np.nan)
    with pytest.warns(RuntimeWarning, match="blank"):
        r = skyconv.atrous_denoise(da.from_array(x, chunks=4), device="cpu")
    assert r.iterations == 0 and np.isnan(r.noise)
    with pytest.raises(ShapeError):
        skyconv.atrous_denoise(da.zeros((4, 30, 30), chunks=2), dim=3, device="cpu")
    unknown = da.from_array(np.ones(40), chunks=10)
    unknown = unknown[unknown > 0]
    with pytest.raises(ArgumentError, match="compute_chunk_sizes"):
        skyconv.atrous_denoise(unknown, dim=1, device="cpu")


@pytest.mark.parametrize("gather", [4, 1 << 20])
def test_exact_median(dask_client, rng, gather, monkeypatch):
    """The distributed median equals np.median of the finite values, through the radix
    histograms (gather=4) and directly; duplicates, negatives, odd and even counts."""
    from skyconv._dask import select

    monkeypatch.setattr(select, "GATHER", gather)
    v = np.concatenate([rng.normal(size=501), np.zeros(40), -np.ones(7), [np.nan, np.inf]])
    rng.shuffle(v)
    for arr in (v, v[:-3]):
        x = da.from_array(arr, chunks=97)
        fin = arr[np.isfinite(arr)]
        assert select.median(x) == np.median(fin)
        k = [0, fin.size // 3, fin.size - 1]
        assert select.ranks(x, k) == list(np.sort(fin)[k])
    assert select.median(da.from_array(np.full(30, 2.5), chunks=7)) == 2.5


def test_worker_lost_mid_run(dask_client, rng):
    """A worker restarted while the loop runs (its persisted blocks lost): Dask recomputes them
    from their lineage and the result is the NumPy call's."""
    import threading
    import time

    x = _cube(rng, (16, 24, 24))
    want = skyconv.atrous_denoise(x, device="cpu")
    worker = list(dask_client.scheduler_info()["workers"])[0]

    def kill():
        time.sleep(1.5)
        dask_client.restart_workers([worker])

    t = threading.Thread(target=kill)
    t.start()
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 12, 12)), device="cpu")
    t.join()
    _check(got, want)


def test_unaligned_input_from_the_cluster(rng):
    """An array computed by the distributed scheduler can sit at an odd address in its message
    buffer: skyconv takes it (float_array aligns it) instead of refusing it."""
    buf = bytearray(8 * 12 * 16 * 16 + 1)
    x = np.frombuffer(buf, dtype=np.float64, offset=1).reshape(12, 16, 16)
    x[...] = rng.normal(size=x.shape)
    assert not x.flags.aligned
    want = skyconv.atrous_denoise(np.array(x), device="cpu")
    got = skyconv.atrous_denoise(x, device="cpu")
    np.testing.assert_array_equal(got.data, want.data)
