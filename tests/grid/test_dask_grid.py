"""skyconv.grid with dask sample arrays equals the NumPy call (float64, <= 1e-12 relative) on a
2-worker process cluster: WCS and HEALPix targets, every kernel, weights, NaN samples,
channel chunks, unknown chunk sizes, and a worker lost mid-run."""

from __future__ import annotations

import numpy as np
import pytest
from _grid_refs import KERNELS, brute

import skyconv
from skyconv._dask import cluster
from skyconv.exceptions import ArgumentError, ShapeError
from skyconv.grid import resolve_target

da = pytest.importorskip("dask.array")

HEADER = {
    "NAXIS": 2, "NAXIS1": 24, "NAXIS2": 20, "CTYPE1": "RA---SIN", "CTYPE2": "DEC--SIN",
    "CRVAL1": 150.0, "CRVAL2": 30.0, "CRPIX1": 12.5, "CRPIX2": 10.5,
    "CDELT1": -0.05, "CDELT2": 0.05,
}  # fmt: skip


def _samples(rng, n, nchan=None, spread=0.7, nan=True):
    """Samples over the HEADER map, sorted by longitude (as a scan would be), with NaN values."""
    lons = np.sort(150.0 + rng.uniform(-spread, spread, n) / np.cos(np.radians(30.0)))
    lats = 30.0 + rng.uniform(-spread, spread, n)
    shape = (n,) if nchan is None else (n, nchan)
    data = rng.normal(size=shape)
    if nan:
        data[rng.random(shape) < 0.02] = np.nan
        lons[rng.integers(0, n, 3)] = np.nan
    return lons, lats, data


def _assert_same(got, want, rtol=1e-12):
    """cube, weights and unweighted equal to ``rtol`` relative to each array's largest value:
    the sums of signed data (and the tapered_sinc and gaussbessel weight sums) cancel to ~0 at
    some pixels, where a different summation order moves the result by ~1e-16 of the terms."""
    for name in ("cube", "weights", "unweighted"):
        g = np.asarray(getattr(got, name))
        w = np.asarray(getattr(want, name))
        assert g.shape == w.shape, name
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=name)
        fin = np.isfinite(w)
        if name == "cube":  # relative to the pixel's weight: cube = u / w
            ok = fin & (np.abs(np.asarray(want.weights)) > 1e-6 * np.nanmax(np.abs(want.weights)))
            scale = np.max(np.abs(w[ok]))
            np.testing.assert_allclose(g[ok], w[ok], rtol=rtol, atol=rtol * scale, err_msg=name)
        else:
            scale = np.nanmax(np.abs(w)) if fin.any() else 1.0
            np.testing.assert_allclose(g[fin], w[fin], rtol=0, atol=rtol * scale, err_msg=name)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_wcs_every_kernel_equals_numpy(dask_client, rng, kernel):
    lons, lats, data = _samples(rng, 3000, nchan=5)
    weights = rng.uniform(0.5, 2.0, 3000)
    params = KERNELS[kernel]
    want = skyconv.grid(lons, lats, data, HEADER, kernel, params, weights=weights,
                        dtype=np.float64, device="cpu")  # fmt: skip
    got = skyconv.grid(da.from_array(lons, chunks=400), da.from_array(lats, chunks=400),
                       da.from_array(data, chunks=(400, 2)), HEADER, kernel, params,
                       weights=da.from_array(weights, chunks=400), dtype=np.float64,
                       device="cpu")  # fmt: skip
    assert got.cube.chunks == ((2, 2, 1), (20,), (24,))  # channel blocks, whole map each
    res = dask_client.compute([got.cube, got.weights, got.unweighted], sync=True)
    _assert_same(skyconv.GridResult(*res), want)


def test_matches_brute_force(dask_client, rng):
    """The partial-sum path against the float64 brute force directly (not only the core)."""
    lons, lats, data = _samples(rng, 800, nchan=2, nan=False)
    tgt = resolve_target(HEADER)
    got = skyconv.grid(da.from_array(lons, chunks=100), lats, data, HEADER, "gauss1d", (0.1,),
                       dtype=np.float64, device="cpu")  # fmt: skip
    cube = got.cube.compute().reshape(2, -1)
    ref, _, _ = brute(lons, lats, data, tgt.lons, tgt.lats, "gauss1d", (0.1,))
    np.testing.assert_allclose(cube, ref, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("nest", [False, True])
def test_healpix_per_channel_weights(dask_client, rng, nest):
    n, nchan = 4000, 3
    lons = rng.uniform(0, 360, n)
    lats = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    order = np.argsort(lats)  # chunks are latitude bands
    lons, lats = lons[order], lats[order]
    data = rng.normal(size=(n, nchan))
    weights = rng.uniform(0.1, 1.0, (n, nchan))
    weights[rng.random((n, nchan)) < 0.05] = np.nan
    target = skyconv.HealpixTarget(8, nest=nest)
    args = ("gauss2d", (4.0, 2.5, 0.3))
    want = skyconv.grid(lons, lats, data, target, *args, weights=weights, dtype=np.float64,
                        device="cpu")  # fmt: skip
    got = skyconv.grid(da.from_array(lons, chunks=500), da.from_array(lats, chunks=500),
                       da.from_array(data, chunks=(500, 1)), target, *args,
                       weights=da.from_array(weights, chunks=(700, 3)), dtype=np.float64,
                       device="cpu")  # fmt: skip
    assert got.cube.shape == (nchan, 768)
    _assert_same(got, want)


def test_single_channel_float32(dask_client, rng):
    lons, lats, data = _samples(rng, 2000)
    data = data.astype(np.float32)
    want = skyconv.grid(lons, lats, data, HEADER, kernel_params=0.08, device="cpu")
    got = skyconv.grid(da.from_array(lons, chunks=300), lats, da.from_array(data, chunks=300),
                       HEADER, kernel_params=0.08, device="cpu")  # fmt: skip
    assert got.cube.dtype == np.float32 and got.cube.shape == (20, 24)
    cube = got.cube.compute()
    np.testing.assert_array_equal(np.isnan(cube), np.isnan(want.cube))
    np.testing.assert_allclose(cube, want.cube, rtol=2e-6, atol=1e-6)


def test_partials_cover_only_reached_pixels(rng):
    """A chunk's partial holds the pixels within reach of its samples, not the whole map, and
    never misses one the core would fill."""
    from skyconv._dask import grid as dgrid

    tgt = resolve_target(HEADER)
    tvec = dgrid._unit(tgt.lons, tgt.lats)
    lons = 149.8 + rng.uniform(0, 0.05, 50)
    lats = 29.8 + rng.uniform(0, 0.05, 50)
    idx, u, w = dgrid._partial(lons, lats, np.ones(50), None, tgt.lons, tgt.lats, tvec,
                               "gauss1d", [0.05], None, 0.15, "cpu", 1)  # fmt: skip
    assert 0 < idx.size < tgt.size / 4
    full = skyconv.grid(lons, lats, np.ones(50), HEADER, kernel_params=0.05, device="cpu")
    reached = np.flatnonzero(np.asarray(full.weights).ravel() > 0)
    assert np.isin(reached, idx).all()
    np.testing.assert_allclose(w[0], np.asarray(full.weights, dtype=np.float64).ravel()[idx],
                               rtol=1e-6)  # fmt: skip


def test_unknown_chunk_sizes(dask_client, rng):
    """Samples filtered by a mask (unknown chunk sizes): gridded without a size pass when the
    arrays have the same blocks; a clear error when a NumPy array must be matched to them."""
    lons, lats, data = _samples(rng, 3000, nchan=2, nan=False)
    keep = lats > 30.0
    want = skyconv.grid(lons[keep], lats[keep], data[keep], HEADER, kernel_params=0.1,
                        dtype=np.float64, device="cpu")  # fmt: skip
    dk = da.from_array(keep, chunks=500)
    dl, db = da.from_array(lons, chunks=500)[dk], da.from_array(lats, chunks=500)[dk]
    dd = da.from_array(data, chunks=(500, 2))[dk]
    assert np.isnan(dl.shape[0])
    got = skyconv.grid(dl, db, dd, HEADER, kernel_params=0.1, dtype=np.float64, device="cpu")
    _assert_same(got, want)
    with pytest.raises(ArgumentError, match="compute_chunk_sizes"):
        skyconv.grid(dl, lats[keep], dd, HEADER, kernel_params=0.1, device="cpu")
    with pytest.raises(ArgumentError, match="compute_chunk_sizes"):
        other = da.from_array(lats, chunks=1000)[da.from_array(keep, chunks=1000)]
        skyconv.grid(dl, other, dd, HEADER, kernel_params=0.1, device="cpu")


def test_bad_inputs(rng):
    lons, lats, data = _samples(rng, 100, nan=False)
    dl = da.from_array(lons, chunks=50)
    with pytest.raises(ShapeError):
        skyconv.grid(dl, lats[:90], data, HEADER, kernel_params=0.1, device="cpu")
    with pytest.raises(ValueError, match="device"):
        skyconv.grid(dl, lats, data, HEADER, kernel_params=0.1, device="tpu")
    with pytest.raises(ValueError, match="kernel_params"):
        skyconv.grid(dl, lats, data, HEADER, device="cpu")


def test_worker_lost_mid_run(dask_client, rng):
    """A worker killed while the partials run: Dask reruns its tasks elsewhere and the cube is
    the NumPy call's."""
    import time

    from distributed import wait

    lons, lats, data = _samples(rng, 6000, nchan=2)
    want = skyconv.grid(lons, lats, data, HEADER, kernel_params=0.1, dtype=np.float64,
                        device="cpu")  # fmt: skip
    slow = da.from_array(data, chunks=(300, 2)).map_blocks(_slow_copy, dtype=data.dtype)
    got = skyconv.grid(da.from_array(lons, chunks=300), da.from_array(lats, chunks=300), slow,
                       HEADER, kernel_params=0.1, dtype=np.float64, device="cpu")  # fmt: skip
    fut = dask_client.compute(got.cube)
    time.sleep(0.5)  # some partials done, most not
    workers = [w["address"] for w in cluster.workers(dask_client)]
    dask_client.restart_workers([workers[0]])
    wait(fut, timeout=120)
    cube = fut.result()
    ok = np.isfinite(want.cube)
    np.testing.assert_array_equal(np.isfinite(cube), ok)
    np.testing.assert_allclose(cube[ok], want.cube[ok], rtol=1e-12)


def _slow_copy(block):
    import time

    time.sleep(0.05)
    return block.copy()


def test_gridder_and_cygrid_take_dask_batches(dask_client, rng):
    """Gridder.grid and compat.cygrid's grid() with dask batches: the cluster's sums added to
    the accumulators, equal to NumPy batches."""
    from skyconv.compat import cygrid

    lons, lats, data = _samples(rng, 2000, nchan=3)
    weights = rng.uniform(0.5, 1.5, (2000, 3))
    halves = (slice(0, 1200), slice(1200, None))
    ref = skyconv.Gridder(HEADER, kernel_params=0.1, dtype=np.float64, device="cpu")
    got = skyconv.Gridder(HEADER, kernel_params=0.1, dtype=np.float64, device="cpu")
    for h in halves:
        ref.grid(lons[h], lats[h], data[h], weights[h])
        d = [da.from_array(a[h], chunks=300) for a in (lons, lats, data, weights)]
        got.grid(*d)
    _assert_same(got.result(), ref.result())

    def cyg(wrap):
        g = cygrid.WcsGrid(HEADER, dtype=np.float64)
        g.set_kernel("gauss1d", (0.1,), 0.3, 0.05)
        for h in halves:
            g.grid(wrap(lons[h]), wrap(lats[h]), wrap(data[h]), wrap(weights[h]))
        return g

    want, have = cyg(np.asarray), cyg(lambda a: da.from_array(a, chunks=500))
    np.testing.assert_allclose(have.get_weights(), want.get_weights(), rtol=1e-12, atol=1e-12)
    cw, ch = want.get_datacube(), have.get_datacube()
    np.testing.assert_array_equal(np.isnan(ch), np.isnan(cw))
    np.testing.assert_allclose(ch, cw, rtol=1e-12, atol=1e-12 * np.nanmax(np.abs(cw)))
