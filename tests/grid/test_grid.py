"""skyconv.grid against a brute-force float64 haversine sum written plainly in NumPy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _grid_refs import KERNELS, brute, field, header, wcs_centres

import skyconv
from skyconv import Gridder, HealpixTarget, ShapeError, Sightlines

from _refs import rel_err


def grid64(lon, lat, data, target, kernel, **kw):
    """skyconv.grid in float64 on the CPU with ``kernel`` at its KERNELS parameters."""
    return skyconv.grid(
        lon, lat, data, target, kernel=kernel, kernel_params=KERNELS[kernel],
        dtype=np.float64, device="cpu", **kw,
    )  # fmt: skip


def check(res, ref, tol, shape):
    cube, wsum, usum = ref
    assert res.cube.shape == shape
    assert rel_err(res.cube, cube.reshape(shape)) <= tol
    assert rel_err(res.weights, wsum.reshape(shape)) <= tol
    assert rel_err(res.unweighted, usum.reshape(shape)) <= tol


# ---------------------------------------------------------------- accuracy, every kernel/target


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_wcs_target_float64(rng, kernel):
    lon, lat = field(rng, 3000)
    data = rng.normal(size=3000) + 3
    hdr = header()
    res = grid64(lon, lat, data, hdr, kernel)
    tl, tb = wcs_centres(hdr)
    ref = brute(lon, lat, data, tl, tb, kernel, KERNELS[kernel])
    check(res, ref, 1e-12, (24, 30))
    assert np.isfinite(res.cube).sum() > 600


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_sightlines_spectral_float64(rng, kernel):
    lon, lat = field(rng, 1500)
    data = rng.normal(size=(1500, 3))
    weights = rng.uniform(0.5, 2, 1500)
    tl, tb = field(rng, 300, size=3.5)
    res = grid64(lon, lat, data, (tl, tb), kernel, weights=weights)
    ref = brute(lon, lat, data, tl, tb, kernel, KERNELS[kernel], weights=weights)
    check(res, ref, 1e-12, (3, 300))


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("nest", [False, True])
def test_healpix_target_float64(rng, kernel, nest):
    hp = pytest.importorskip("healpy")
    nside = 64
    lon, lat = field(rng, 2000, lon0=40, lat0=30)
    data = rng.normal(size=2000)
    vec = hp.ang2vec(40, 30, lonlat=True)
    pix = hp.query_disc(nside, vec, np.radians(2.5), nest=nest)
    res = grid64(lon, lat, data, HealpixTarget(nside, nest=nest, pixels=pix), kernel)
    tl, tb = hp.pix2ang(nside, pix, nest=nest, lonlat=True)
    ref = brute(lon, lat, data, tl, tb, kernel, KERNELS[kernel])
    check(res, ref, 1e-12, (pix.size,))


def test_healpix_full_sky_and_centres(rng):
    hp = pytest.importorskip("healpy")
    nside = 16
    for nest in (False, True):
        lons, lats = skyconv._core._healpix_centres(nside, nest, None)
        tl, tb = hp.pix2ang(nside, np.arange(hp.nside2npix(nside)), nest=nest, lonlat=True)
        assert np.allclose(lons, tl, rtol=0, atol=1e-12)
        assert np.allclose(lats, tb, rtol=0, atol=1e-12)
    lon = rng.uniform(0, 360, 4000)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, 4000)))
    data = rng.normal(size=4000)
    res = skyconv.grid(
        lon, lat, data, HealpixTarget(nside), kernel_params=4.0, dtype=np.float64, device="cpu"
    )
    tl, tb = hp.pix2ang(nside, np.arange(hp.nside2npix(nside)), lonlat=True)
    check(res, brute(lon, lat, data, tl, tb, params=(4.0,)), 1e-12, (12 * nside**2,))


@pytest.mark.parametrize("kernel", ["gauss1d", "gauss2d"])
def test_float32(rng, kernel):
    lon, lat = field(rng, 2000)
    data = (rng.normal(size=(2000, 2)) + 5).astype(np.float32)
    hdr = header()
    res = skyconv.grid(
        lon, lat, data, hdr, kernel=kernel, kernel_params=KERNELS[kernel], device="cpu"
    )
    assert res.cube.dtype == np.float32 and res.weights.dtype == np.float32
    tl, tb = wcs_centres(hdr)
    check(res, brute(lon, lat, data, tl, tb, kernel, KERNELS[kernel]), 1e-6, (2, 24, 30))


# ---------------------------------------------------------------- geometry edge cases


@pytest.mark.parametrize("pole", [90.0, -90.0])
def test_poles(rng, pole):
    n = 3000
    lon = rng.uniform(0, 360, n)
    lat = np.sign(pole) * (90 - rng.uniform(0, 3, n))
    data = np.cos(np.radians(lon)) + rng.normal(size=n) * 0.1
    tl = np.concatenate([[0.0, 123.0], rng.uniform(0, 360, 200)])
    tb = np.concatenate([[pole, pole], np.sign(pole) * (90 - rng.uniform(0, 2.5, 200))])
    for kernel in ("gauss1d", "gauss2d"):
        res = grid64(lon, lat, data, (tl, tb), kernel)
        check(res, brute(lon, lat, data, tl, tb, kernel, KERNELS[kernel]), 1e-12, (202,))
    hdr = header(lon0=30, lat0=pole, proj="TAN", nx=40, ny=40)
    res = skyconv.grid(lon, lat, data, hdr, kernel_params=0.2, dtype=np.float64, device="cpu")
    tl, tb = wcs_centres(hdr)
    check(res, brute(lon, lat, data, tl, tb), 1e-12, (40, 40))
    assert np.isfinite(res.cube).all()


def test_ra_wrap(rng):
    n = 3000
    lon = rng.uniform(-2, 2, n) % 360.0
    lat = rng.uniform(-2, 2, n)
    data = np.where(lon > 180, 1.0, 2.0) + rng.normal(size=n) * 0.1
    hdr = header(lon0=0.0, lat0=0.0)
    res = skyconv.grid(lon, lat, data, hdr, kernel_params=0.2, dtype=np.float64, device="cpu")
    tl, tb = wcs_centres(hdr)
    check(res, brute(lon, lat, data, tl, tb), 1e-12, (24, 30))
    # The same samples given with longitudes in (-180, 180] and > 360 grid identically.
    for shifted in (np.where(lon > 180, lon - 360, lon), lon + 360):
        other = skyconv.grid(
            shifted, lat, data, hdr, kernel_params=0.2, dtype=np.float64, device="cpu"
        )
        assert rel_err(other.cube, res.cube) <= 1e-12


def test_small_cos_dec(rng):
    # A field at dec 88.5: 1 degree of latitude spans tens of degrees of longitude.
    n = 4000
    lon = rng.uniform(0, 360, n)
    lat = rng.uniform(87.0, 89.9, n)
    data = np.sin(np.radians(lon)) + lat
    hdr = header(lon0=200.0, lat0=88.5, proj="TAN", nx=30, ny=30, cdelt=0.05)
    res = skyconv.grid(lon, lat, data, hdr, kernel_params=0.1, dtype=np.float64, device="cpu")
    tl, tb = wcs_centres(hdr)
    check(res, brute(lon, lat, data, tl, tb, params=(0.1,)), 1e-12, (30, 30))
    for kernel in ("gauss2d", "tapered_sinc"):
        res = grid64(lon, lat, data, (tl, tb), kernel)
        check(res, brute(lon, lat, data, tl, tb, kernel, KERNELS[kernel]), 1e-12, (900,))


def test_sample_at_pixel_centre():
    hdr = header()
    tl, tb = wcs_centres(hdr)
    k = 10 * 30 + 7
    res = skyconv.grid(
        [tl[k]], [tb[k]], [4.25], hdr, kernel_params=0.05, dtype=np.float64, device="cpu"
    )
    assert res.weights.ravel()[k] == 1.0
    assert res.cube.ravel()[k] == 4.25
    gb = skyconv.grid(
        [tl[k]],
        [tb[k]],
        [4.25],
        hdr,
        kernel="gaussbessel",
        kernel_params=0.05,
        dtype=np.float64,
        device="cpu",
    )
    assert gb.weights.ravel()[k] == 0.5 and gb.cube.ravel()[k] == 4.25


def test_single_sample(rng):
    hdr = header()
    res = skyconv.grid(
        [12.03], [0.07], [2.0], hdr, kernel_params=0.1, dtype=np.float64, device="cpu"
    )
    tl, tb = wcs_centres(hdr)
    check(
        res,
        brute(np.array([12.03]), np.array([0.07]), np.array([2.0]), tl, tb, params=(0.1,)),
        1e-12,
        (24, 30),
    )
    finite = np.isfinite(res.cube)
    assert finite.sum() > 10 and np.all(res.cube[finite] == 2.0)


def test_empty_targets_and_empty_output(rng):
    lon, lat = field(rng, 100)
    data = rng.normal(size=(100, 2))
    res = skyconv.grid(lon, lat, data, (np.zeros(0), np.zeros(0)), kernel_params=0.2)
    assert res.cube.shape == (2, 0)
    res = skyconv.grid(
        lon, lat, data[:, 0], HealpixTarget(4, pixels=np.zeros(0, np.int64)), kernel_params=0.2
    )
    assert res.cube.shape == (0,)
    # Targets far from every sample: NaN cube, zero weights, no NumPy warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = skyconv.grid(lon, lat, data, ([100.0, 200.0], [50.0, -60.0]), kernel_params=0.2)
    assert np.isnan(res.cube).all() and (res.weights == 0).all()
    # No samples at all.
    res = skyconv.grid(np.zeros(0), np.zeros(0), np.zeros((0, 3)), header(), kernel_params=0.2)
    assert res.cube.shape == (3, 24, 30) and np.isnan(res.cube).all()


def test_pixels_outside_projection_are_nan(rng):
    # An all-sky Mollweide map: the corners lie outside the projection.
    hdr = header(lon0=0, lat0=0, proj="MOL", nx=36, ny=18, cdelt=10.0)
    lon = rng.uniform(0, 360, 2000)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, 2000)))
    res = skyconv.grid(lon, lat, np.ones(2000), hdr, kernel_params=5.0, device="cpu")
    tl, _ = wcs_centres(hdr)
    assert np.isnan(res.cube.ravel()[~np.isfinite(tl)]).all()
    assert np.isfinite(res.cube.ravel()[np.isfinite(tl)]).any()


# ---------------------------------------------------------------- shapes, dtypes, NaN


def test_shape_rules(rng):
    lon, lat = field(rng, 50)
    hdr = header()
    with pytest.raises(ShapeError):
        skyconv.grid(lon, lat[:-1], np.ones(50), hdr, kernel_params=0.2)
    with pytest.raises(ShapeError):
        skyconv.grid(lon, lat, np.ones(49), hdr, kernel_params=0.2)
    with pytest.raises(ShapeError):
        skyconv.grid(lon, lat, np.ones((50, 3)), hdr, kernel_params=0.2, weights=np.ones(3))
    with pytest.raises(ValueError):  # ShapeError is a ValueError
        skyconv.grid(lon.reshape(5, 10), lat, np.ones(50), hdr, kernel_params=0.2)
    with pytest.raises(ShapeError):
        skyconv.grid(lon, lat, np.ones(50), ([1.0, 2.0], [1.0]), kernel_params=0.2)
    res = skyconv.grid(lon, lat, np.ones((50, 2, 3)), hdr, kernel_params=0.2)
    assert res.cube.shape == (2, 3, 24, 30)
    w = rng.uniform(size=(50, 2, 3))
    res = skyconv.grid(lon, lat, np.ones((50, 2, 3)), (lon, lat), kernel_params=0.2, weights=w)
    assert res.cube.shape == (2, 3, 50)


def test_dtype_rules(rng):
    lon, lat = field(rng, 50)
    hdr = header()
    with pytest.raises(TypeError):
        skyconv.grid(lon, lat, np.ones(50, dtype=np.int32), hdr, kernel_params=0.2)
    with pytest.raises(TypeError):
        skyconv.grid(lon, lat, np.ones(50), hdr, kernel_params=0.2, dtype=np.int32)
    for dt in (np.float32, np.float64):
        res = skyconv.grid(lon, lat, np.ones(50, np.float32), hdr, kernel_params=0.2, dtype=dt)
        assert res.cube.dtype == dt and res.weights.dtype == dt and res.unweighted.dtype == dt
    big = (rng.normal(size=50) + 2).astype(">f8")
    a = skyconv.grid(lon, lat, big, hdr, kernel_params=0.2, dtype=np.float64)
    b = skyconv.grid(lon, lat, big.astype("<f8"), hdr, kernel_params=0.2, dtype=np.float64)
    assert np.array_equal(a.cube, b.cube, equal_nan=True)


def test_kernel_argument_errors(rng):
    lon, lat = field(rng, 10)
    hdr = header()
    with pytest.raises(ValueError):
        skyconv.grid(lon, lat, np.ones(10), hdr)  # kernel_params missing
    with pytest.raises(ValueError):
        skyconv.grid(lon, lat, np.ones(10), hdr, kernel="box", kernel_params=0.2)
    with pytest.raises(ValueError):
        skyconv.grid(lon, lat, np.ones(10), hdr, kernel="gauss2d", kernel_params=0.2)
    with pytest.raises(ValueError):
        skyconv.grid(lon, lat, np.ones(10), hdr, kernel_params=-1.0)
    with pytest.raises(ValueError):
        skyconv.grid(lon, lat, np.ones(10), hdr, kernel_params=0.2, sphere_radius=0.0)
    with pytest.raises(ValueError):
        skyconv.grid(lon, lat, np.ones(10), hdr, kernel_params=0.2, device="tpu")


def test_default_and_explicit_sphere_radius(rng):
    lon, lat = field(rng, 2000)
    data = rng.normal(size=2000)
    tl, tb = field(rng, 100, size=3)
    a = skyconv.grid(lon, lat, data, (tl, tb), kernel_params=0.2, dtype=np.float64)
    b = skyconv.grid(
        lon, lat, data, (tl, tb), kernel_params=0.2, sphere_radius=0.6, dtype=np.float64
    )
    assert np.array_equal(a.cube, b.cube, equal_nan=True)
    c = skyconv.grid(
        lon, lat, data, (tl, tb), kernel_params=0.2, sphere_radius=0.25, dtype=np.float64
    )
    check(c, brute(lon, lat, data, tl, tb, radius=0.25), 1e-12, (100,))


def test_nan_policy(rng):
    n = 2000
    lon, lat = field(rng, n)
    data = rng.normal(size=(n, 3))
    weights = rng.uniform(0.5, 2.0, (n, 3))
    tl, tb = field(rng, 150, size=3)
    data[::7, 1] = np.nan  # drops those samples for channel 1 only
    weights[::11, 2] = np.nan  # drops those samples for channel 2 only
    lon = lon.copy()
    lon[::13] = np.nan  # drops those samples entirely
    res = skyconv.grid(
        lon, lat, data, (tl, tb), kernel_params=0.2, weights=weights, dtype=np.float64
    )
    check(res, brute(lon, lat, data, tl, tb, weights=weights), 1e-12, (3, 150))
    assert np.isfinite(res.cube).any()
    # Shared weights: a NaN value drops the sample in its channel, a NaN weight everywhere.
    w1 = rng.uniform(0.5, 2.0, n)
    w1[::17] = np.nan
    res = skyconv.grid(lon, lat, data, (tl, tb), kernel_params=0.2, weights=w1, dtype=np.float64)
    check(res, brute(lon, lat, data, tl, tb, weights=np.repeat(w1[:, None], 3, 1)), 1e-12, (3, 150))
    # One channel: a NaN value drops the sample.
    res = skyconv.grid(lon, lat, data[:, 1], (tl, tb), kernel_params=0.2, dtype=np.float64)
    check(res, brute(lon, lat, data[:, 1], tl, tb), 1e-12, (150,))


def test_thread_count_does_not_change_results(rng):
    lon, lat = field(rng, 20000)
    data = rng.normal(size=(20000, 4))
    data[::5, 2] = np.nan
    hdr = header(nx=40, ny=40, cdelt=0.08)
    before = skyconv.get_num_threads()
    try:
        out = []
        for nt in (1, 2):
            skyconv.set_num_threads(nt)
            out.append(
                skyconv.grid(
                    lon, lat, data, hdr, kernel_params=0.15, dtype=np.float64, device="cpu"
                )
            )
    finally:
        skyconv.set_num_threads(before)
    for name in ("cube", "weights", "unweighted"):
        assert np.array_equal(getattr(out[0], name), getattr(out[1], name), equal_nan=True)


# ---------------------------------------------------------------- Gridder


def test_gridder_accumulates(rng):
    lon, lat = field(rng, 3000)
    data = rng.normal(size=(3000, 2))
    hdr = header()
    g = Gridder(hdr, kernel_params=0.2, dtype=np.float64, device="cpu")
    for s in range(0, 3000, 1000):
        g.grid(lon[s : s + 1000], lat[s : s + 1000], data[s : s + 1000])
    res = g.result()
    one = skyconv.grid(lon, lat, data, hdr, kernel_params=0.2, dtype=np.float64, device="cpu")
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(res, name), getattr(one, name)) <= 1e-13
    assert g.target_shape == (24, 30)
    with pytest.raises(ShapeError):
        g.grid(lon, lat, data[:, :1])
    g.clear()
    assert (g.result().weights == 0).all()
    with pytest.raises(RuntimeError):
        Gridder(hdr, kernel_params=0.2).result()


def test_target_forms(rng):
    from astropy.io import fits
    from astropy.wcs import WCS

    lon, lat = field(rng, 500)
    data = rng.normal(size=500)
    hdr = header()
    ref = skyconv.grid(lon, lat, data, hdr, kernel_params=0.2).cube
    w = WCS(hdr)
    for target in (fits.Header(hdr), (w, (24, 30))):
        assert np.array_equal(
            skyconv.grid(lon, lat, data, target, kernel_params=0.2).cube, ref, equal_nan=True
        )
    w.pixel_shape = (30, 24)
    assert np.array_equal(
        skyconv.grid(lon, lat, data, w, kernel_params=0.2).cube, ref, equal_nan=True
    )
    tl, tb = wcs_centres(hdr)
    sl = skyconv.grid(lon, lat, data, Sightlines(tl, tb), kernel_params=0.2).cube
    assert np.array_equal(sl, ref.ravel(), equal_nan=True)
    with pytest.raises(TypeError):
        skyconv.grid(lon, lat, data, "map.fits", kernel_params=0.2)


# ---------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_matches_cpu(rng, kernel, dtype):
    lon, lat = field(rng, 20000)
    data = rng.normal(size=20000).astype(dtype) + 3
    hdr = header(nx=60, ny=50, cdelt=0.06)
    tol = 1e-12 if dtype == np.float64 else 1e-6
    kw = {"kernel": kernel, "kernel_params": KERNELS[kernel], "dtype": dtype}
    cpu = skyconv.grid(lon, lat, data, hdr, device="cpu", **kw)
    gpu = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(gpu, name), getattr(cpu, name)) <= tol


@pytest.mark.gpu
@pytest.mark.parametrize("weights", ["none", "shared", "full"])
def test_gpu_spectral_nan_matches_cpu(rng, weights):
    n, nchan = 5000, 300  # more channels than one GPU chunk
    lon, lat = field(rng, n)
    data = rng.normal(size=(n, nchan))
    data[::9, 5] = np.nan
    data[::4, 200] = np.nan
    w = {"none": None, "shared": rng.uniform(0.5, 2, n), "full": rng.uniform(0.5, 2, (n, nchan))}[
        weights
    ]
    if w is not None:
        w[::13] = np.nan
    hdr = header(nx=30, ny=30, cdelt=0.1)
    cpu = skyconv.grid(
        lon, lat, data, hdr, kernel_params=0.15, weights=w, dtype=np.float64, device="cpu"
    )
    gpu = skyconv.grid(
        lon, lat, data, hdr, kernel_params=0.15, weights=w, dtype=np.float64, device="cuda"
    )
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(gpu, name), getattr(cpu, name)) <= 1e-12
    ref = brute(lon, lat, data, *wcs_centres(hdr), params=(0.15,), weights=w)
    check(gpu, ref, 1e-12, (nchan, 30, 30))


@pytest.mark.gpu
def test_gpu_poles_wrap_and_healpix(rng):
    n = 20000
    lon = rng.uniform(0, 360, n)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    data = rng.normal(size=n)
    for target in (
        HealpixTarget(32),
        HealpixTarget(32, nest=True),
        ([0.0, 359.99, 0.01, 180.0], [90.0, 0.0, -89.99, -90.0]),
    ):
        cpu = skyconv.grid(
            lon, lat, data, target, kernel_params=3.0, dtype=np.float64, device="cpu"
        )
        gpu = skyconv.grid(
            lon, lat, data, target, kernel_params=3.0, dtype=np.float64, device="cuda"
        )
        assert rel_err(gpu.cube, cpu.cube) <= 1e-12
        assert rel_err(gpu.weights, cpu.weights) <= 1e-12


@pytest.mark.gpu
def test_gpu_gridder_and_empty(rng):
    lon, lat = field(rng, 3000)
    data = rng.normal(size=(3000, 2)).astype(np.float32)
    g = Gridder(header(), kernel_params=0.2, device="cuda")
    g.grid(lon[:1500], lat[:1500], data[:1500])
    g.grid(lon[1500:], lat[1500:], data[1500:])
    one = skyconv.grid(lon, lat, data, header(), kernel_params=0.2, device="cpu")
    assert rel_err(g.result().cube, one.cube) <= 1e-6
    res = skyconv.grid(lon, lat, data, ([100.0], [50.0]), kernel_params=0.2, device="cuda")
    assert np.isnan(res.cube).all()
    res = skyconv.grid(
        np.zeros(0), np.zeros(0), np.zeros(0), header(), kernel_params=0.2, device="cuda"
    )
    assert np.isnan(res.cube).all()


# ---------------------------------------------------------------- GPU engine: memory plan


def _plan(n, nt, nchan, weights="none", budget=1 << 50, sz_t=8, sz_o=8, finish=True, radius=0.45):
    return skyconv._core._grid_memory_plan(
        n, nt, nchan, sz_t, sz_o, weights, finish, radius, budget
    )


#: channels per spectral launch of the CUDA engine (SPEC_THREADS in src/grid/cuda/args.rs)
SPEC_BLOCK = 256


def test_gpu_memory_plan():
    # The planner runs on the host: which path the CUDA engine takes for a budget.
    n, nt, nchan = 200_000, 90_000, 1024
    m, layout, cb, need = _plan(n, nt, nchan, sz_t=4, sz_o=4)
    assert (m, layout, cb) == (n, "resident", SPEC_BLOCK)
    m, layout, cb, got = _plan(n, nt, nchan, sz_t=4, sz_o=4, budget=need - 1)
    assert (m, layout) == (n, "packed") and got <= need - 1 and cb <= SPEC_BLOCK
    m, layout, cb, got = _plan(n, nt, nchan, sz_t=4, sz_o=4, budget=300 << 20)
    assert (m, layout) == (n, "packed") and cb < SPEC_BLOCK and got <= 300 << 20
    m, layout, cb, got = _plan(n, nt, nchan, sz_t=4, sz_o=4, budget=30 << 20)
    assert m < n and layout == "packed" and got <= 30 << 20
    with pytest.raises(skyconv.GpuMemoryError):
        _plan(n, nt, nchan, budget=1 << 20)
    m, layout, cb, got = _plan(10**7, 90_000, 1, budget=200 << 20)
    assert m < 10**7 and cb == 1 and got <= 200 << 20
    m, layout, cb, _ = _plan(10**7, 90_000, 1)
    assert (m, layout, cb) == (10**7, "resident", 1)


def _forced_limit(n, nt, nchan, want, weights="none", sz_t=8, sz_o=8, finish=True, radius=0.45):
    """A SKYCONV_GPU_MEMORY_LIMIT that makes the CUDA engine take path `want`: "resident",
    "packed" (all samples at once, several channel blocks per SPEC_BLOCK) or "chunks" (2 to 8 sample
    chunks)."""
    args = (n, nt, nchan, weights)
    kw = {"sz_t": sz_t, "sz_o": sz_o, "finish": finish, "radius": radius}
    budget = _plan(*args, **kw)[3]
    if want == "resident":
        return budget
    while budget > 1 << 16:
        budget = int(budget * 0.93)
        try:
            m, layout, cb, _ = _plan(*args, budget=budget, **kw)
        except skyconv.GpuMemoryError:
            break
        if want == "packed" and m == n and layout == "packed" and cb < min(nchan, SPEC_BLOCK):
            return budget
        if want == "chunks" and 2 <= -(-n // m) <= 8:
            return budget
    raise AssertionError(f"no budget gives path {want}")


# ---------------------------------------------------------------- GPU engine: device lookup


@pytest.mark.gpu
@pytest.mark.parametrize(
    "dtype,out",
    [
        (np.float64, np.float64),
        (np.float32, np.float32),
        (np.float32, np.float64),
        (np.float64, np.float32),
    ],
)
def test_gpu_dtypes_and_determinism(rng, dtype, out):
    n = 50_000  # 13 radix tiles
    lon, lat = field(rng, n)
    data = (rng.normal(size=n) + 3).astype(dtype)
    hdr = header(nx=60, ny=50, cdelt=0.06)
    kw = {"kernel_params": 0.1, "dtype": out}
    cpu = skyconv.grid(lon, lat, data, hdr, device="cpu", **kw)
    a = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    prof = skyconv.last_profile()
    b = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    tol = 1e-12 if out == np.float64 else 1e-6
    for name in ("cube", "weights", "unweighted"):
        assert getattr(a, name).dtype == out
        assert rel_err(getattr(a, name), getattr(cpu, name)) <= tol, name
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    assert "plan" in prof and "kernel" in prof and "finish" in prof


@pytest.mark.gpu
def test_gpu_many_samples_match_cpu(rng):
    # 2e6 samples: hundreds of radix tiles, several digit passes, fine bucketing.
    n = 2_000_000
    lon, lat = field(rng, n, lon0=200.0, lat0=-35.0, size=4.0)
    data = rng.normal(size=n) + 1
    hdr = header(lon0=200.0, lat0=-35.0, nx=180, ny=180, cdelt=0.02)
    kw = {"kernel_params": 0.03, "dtype": np.float64}
    cpu = skyconv.grid(lon, lat, data, hdr, device="cpu", **kw)
    gpu = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(gpu, name), getattr(cpu, name)) <= 1e-12, name
    assert np.isfinite(gpu.cube).sum() > 0.9 * gpu.cube.size


@pytest.mark.gpu
def test_gpu_scalar_nan_policy_matches_brute(rng):
    n = 4000
    lon, lat = field(rng, n)
    data = rng.normal(size=n) + 2
    w = rng.uniform(0.5, 2.0, n)
    lon = lon.copy()
    lat = lat.copy()
    lon[::13] = np.nan  # drops the sample
    lat[5::29] = np.inf  # drops the sample
    lat[7] = 91.0  # out of range: dropped
    data[3::11] = np.nan  # one channel: drops the sample
    w[4::17] = np.nan  # drops the sample
    tl, tb = field(rng, 200, size=3.5)
    tl[::50] = np.nan  # NaN targets receive nothing
    for weights in (None, w):
        kw = {"kernel_params": 0.2, "weights": weights, "dtype": np.float64}
        gpu = skyconv.grid(lon, lat, data, (tl, tb), device="cuda", **kw)
        cpu = skyconv.grid(lon, lat, data, (tl, tb), device="cpu", **kw)
        good_lat = np.where(np.abs(lat) <= 90, lat, np.nan)
        ref = brute(lon, good_lat, data, tl, tb, weights=weights)
        check(gpu, ref, 1e-12, (200,))
        for name in ("cube", "weights", "unweighted"):
            assert rel_err(getattr(gpu, name), getattr(cpu, name)) <= 1e-12
        assert np.isnan(gpu.cube[::50]).all()


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_gpu_spectral_every_kernel(rng, kernel):
    n, nchan = 3000, 5
    lon, lat = field(rng, n)
    data = rng.normal(size=(n, nchan)) + 3
    tl, tb = field(rng, 250, size=3.5)
    kw = {"kernel": kernel, "kernel_params": KERNELS[kernel], "dtype": np.float64}
    gpu = skyconv.grid(lon, lat, data, (tl, tb), device="cuda", **kw)
    check(gpu, brute(lon, lat, data, tl, tb, kernel, KERNELS[kernel]), 1e-12, (nchan, 250))


@pytest.mark.gpu
def test_gpu_single_sample_empty_bins_and_nothing_kept(rng):
    hdr = header()
    tl, tb = wcs_centres(hdr)
    k = 10 * 30 + 7
    for data in ([4.25], [[4.25, -1.5, 0.0]]):
        res = skyconv.grid(
            [tl[k]], [tb[k]], data, hdr, kernel_params=0.05, dtype=np.float64, device="cuda"
        )
        cpu = skyconv.grid(
            [tl[k]], [tb[k]], data, hdr, kernel_params=0.05, dtype=np.float64, device="cpu"
        )
        assert res.cube.reshape(-1, 24 * 30)[0, k] == 4.25
        assert res.weights.reshape(-1, 24 * 30)[0, k] == 1.0
        for name in ("cube", "weights", "unweighted"):
            assert rel_err(getattr(res, name), getattr(cpu, name)) <= 1e-12
    lon, lat = field(rng, 500)
    for data in (rng.normal(size=500), rng.normal(size=(500, 3)).astype(np.float32)):
        # Targets no sample reaches: NaN cube, zero sums, no warning.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res = skyconv.grid(
                lon,
                lat,
                data,
                ([100.0, 200.0, np.nan], [50.0, -60.0, 0.0]),
                kernel_params=0.2,
                device="cuda",
            )
        assert np.isnan(res.cube).all() and (res.weights == 0).all()
        assert (res.unweighted == 0).all()
        # Every sample dropped (NaN coordinates).
        res = skyconv.grid(np.full(500, np.nan), lat, data, hdr, kernel_params=0.2, device="cuda")
        assert np.isnan(res.cube).all() and (res.weights == 0).all()
    res = skyconv.grid(
        np.zeros(0), np.zeros(0), np.zeros((0, 2)), hdr, kernel_params=0.2, device="cuda"
    )
    assert res.cube.shape == (2, 24, 30) and np.isnan(res.cube).all()


# ---------------------------------------------------------------- GPU engine: spectral paths


def _spectral_case(rng, weights, n=20_000, nchan=300):
    lon, lat = field(rng, n)
    data = rng.normal(size=(n, nchan))
    data[::9, 5] = np.nan
    data[::4, 200] = np.nan
    data[::7, 299] = np.nan
    w = {"none": None, "shared": rng.uniform(0.5, 2, n), "full": rng.uniform(0.5, 2, (n, nchan))}[
        weights
    ]
    if w is not None:
        w[::13] = np.nan
        if w.ndim == 2:
            w[1::10, 17] = np.nan
    return lon, lat, data, w


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["resident", "packed", "chunks"])
@pytest.mark.parametrize("weights", ["none", "shared", "full"])
def test_gpu_spectral_paths_match_cpu(rng, monkeypatch, path, weights):
    """Rows resident on the device, packed channel blocks (over the budget) and sample chunks
    (far over it) all give the CPU's sums, deterministically; also through Gridder (adding
    into f64 accumulators)."""
    lon, lat, data, w = _spectral_case(rng, weights)
    n, nchan = data.shape
    hdr = header(nx=30, ny=30, cdelt=0.1)
    nt = 900
    limit = _forced_limit(n, nt, nchan, path, weights=weights)
    m, layout, cb, _ = _plan(n, nt, nchan, weights, budget=limit)
    assert (m == n) == (path != "chunks")
    assert layout == ("resident" if path == "resident" else "packed")
    kw = {"kernel_params": 0.15, "weights": w, "dtype": np.float64}
    cpu = skyconv.grid(lon, lat, data, hdr, device="cpu", **kw)
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", str(limit))
    a = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    b = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(a, name), getattr(cpu, name)) <= 1e-12, name
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    # Gridder: two batches added on the device path (Sink::Add), f64 accumulators.
    add_limit = _forced_limit(n // 2, nt, nchan, path, weights=weights, finish=False)
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", str(add_limit))
    g = Gridder(hdr, kernel_params=0.15, dtype=np.float64, device="cuda")
    half = n // 2
    g.grid(lon[:half], lat[:half], data[:half], weights=None if w is None else w[:half])
    g.grid(lon[half:], lat[half:], data[half:], weights=None if w is None else w[half:])
    res = g.result()
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(res, name), getattr(cpu, name)) <= 1e-12, name


@pytest.mark.gpu
def test_gpu_spectral_float32_packed_blocks(rng, monkeypatch):
    # float32 rows packed in blocks (4-byte elements through the staging buffers), f32 output.
    n, nchan = 30_000, 150
    lon, lat = field(rng, n)
    data = (rng.normal(size=(n, nchan)) + 1).astype(np.float32)
    data[::5, 149] = np.nan
    hdr = header(nx=30, ny=30, cdelt=0.1)
    cpu = skyconv.grid(lon, lat, data, hdr, kernel_params=0.15, device="cpu")
    limit = _forced_limit(n, 900, nchan, "packed", sz_t=4, sz_o=4)
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", str(limit))
    gpu = skyconv.grid(lon, lat, data, hdr, kernel_params=0.15, device="cuda")
    for name in ("cube", "weights", "unweighted"):
        assert getattr(gpu, name).dtype == np.float32
        assert rel_err(getattr(gpu, name), getattr(cpu, name)) <= 1e-6, name


@pytest.mark.gpu
def test_gpu_scalar_chunks_match_cpu(rng, monkeypatch):
    n = 300_000
    lon, lat = field(rng, n)
    data = rng.normal(size=n) + 2
    data[::101] = np.nan
    hdr = header(nx=60, ny=50, cdelt=0.06)
    kw = {"kernel_params": 0.1, "dtype": np.float64}
    cpu = skyconv.grid(lon, lat, data, hdr, device="cpu", **kw)
    limit = _forced_limit(n, 3000, 1, "chunks", radius=0.3)
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", str(limit))
    gpu = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(gpu, name), getattr(cpu, name)) <= 1e-12, name
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", "1000")
    with pytest.raises(skyconv.GpuMemoryError):
        skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)


@pytest.mark.gpu
def test_gpu_pinned_host_copies_match_staged(rng, monkeypatch):
    # SKYCONV_PIN_HOST=1 page-locks arrays of 64 MiB or more for their copies instead of staging
    # them: the input rows (70 MB) and each block's outputs (69 MB) here.
    n, nchan = 70_000, 128
    lon, lat = field(rng, n, size=3.9)
    data = rng.normal(size=(n, nchan))
    data[::7, 3] = np.nan
    hdr = header(nx=260, ny=260, cdelt=0.015)
    kw = {"kernel_params": 0.02, "dtype": np.float64}
    staged = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    monkeypatch.setenv("SKYCONV_PIN_HOST", "1")
    pinned = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    readonly = data.copy()
    readonly.flags.writeable = False
    pinned_ro = skyconv.grid(lon, lat, readonly, hdr, device="cuda", **kw)
    for name in ("cube", "weights", "unweighted"):
        assert np.array_equal(getattr(pinned, name), getattr(staged, name), equal_nan=True)
        assert np.array_equal(getattr(pinned_ro, name), getattr(staged, name), equal_nan=True)
    cpu = skyconv.grid(lon[:5000], lat[:5000], data[:5000], hdr, device="cpu", **kw)
    gpu = skyconv.grid(lon[:5000], lat[:5000], data[:5000], hdr, device="cuda", **kw)
    assert rel_err(gpu.cube, cpu.cube) <= 1e-12


# ---------------------------------------------------------------- GPU engine: weight map


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["resident", "packed"])
@pytest.mark.parametrize("weights", ["none", "shared"])
def test_gpu_spectral_weight_map(rng, monkeypatch, path, weights):
    """Weights None or per sample and no NaN value: one weight map comes down (weights is a
    broadcast view of it) and unweighted is derived lazily; both equal the CPU's full arrays."""
    n, nchan = 20_000, 300
    lon, lat = field(rng, n)
    data = rng.normal(size=(n, nchan)) + 1
    w = rng.uniform(0.5, 2, n) if weights == "shared" else None
    hdr = header(nx=30, ny=30, cdelt=0.1)
    kw = {"kernel_params": 0.15, "weights": w, "dtype": np.float64}
    cpu = skyconv.grid(lon, lat, data, hdr, device="cpu", **kw)
    limit = _forced_limit(n, 900, nchan, path, weights=weights)
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", str(limit))
    gpu = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    assert gpu._weights.shape == (30, 30) and gpu._unweighted is None
    assert gpu.weights.shape == cpu.weights.shape == (nchan, 30, 30)
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(gpu, name), getattr(cpu, name)) <= 1e-12, name
    # One map for every channel (a broadcast view); the lazy unweighted is cube * weights.
    assert gpu.weights.strides[0] == 0
    assert np.array_equal(gpu.unweighted, np.where(gpu.weights != 0, gpu.cube * gpu.weights, 0))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_spectral_nan_in_one_channel_gives_per_channel_weights(rng, dtype):
    n, nchan = 20_000, 300
    lon, lat = field(rng, n)
    data = (rng.normal(size=(n, nchan)) + 1).astype(dtype)
    data[::11, 250] = np.nan  # one channel, in the last channel block only
    hdr = header(nx=30, ny=30, cdelt=0.1)
    kw = {"kernel_params": 0.15, "dtype": dtype}
    tol = 1e-12 if dtype == np.float64 else 1e-6
    cpu = skyconv.grid(lon, lat, data, hdr, device="cpu", **kw)
    gpu = skyconv.grid(lon, lat, data, hdr, device="cuda", **kw)
    assert gpu._weights.shape == (nchan, 30, 30)
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(gpu, name), getattr(cpu, name)) <= tol, name
    assert not np.array_equal(gpu.weights[250], gpu.weights[0])
    assert np.array_equal(gpu.weights[0], gpu.weights[249])


@pytest.mark.gpu
def test_gpu_spectral_full_weights_and_bench_shape(rng):
    """Full-shape weights come down per channel; a float32 map-row case like the benchmark's
    (WCS rows of 60 pixels, 1 arcmin) matches the CPU to float32 precision."""
    n, nchan = 40_000, 200
    lon, lat = field(rng, n, size=1.2)
    data = rng.normal(size=(n, nchan)).astype(np.float32)
    w = rng.uniform(0.5, 2, (n, nchan)).astype(np.float32)
    hdr = header(nx=60, ny=60, cdelt=1 / 60)
    kw = {"kernel_params": 150 / 3600 / 2.3548}
    for weights in (w, None):
        cpu = skyconv.grid(lon, lat, data, hdr, weights=weights, device="cpu", **kw)
        gpu = skyconv.grid(lon, lat, data, hdr, weights=weights, device="cuda", **kw)
        assert gpu._weights.shape == ((nchan, 60, 60) if weights is not None else (60, 60))
        for name in ("cube", "weights", "unweighted"):
            assert rel_err(getattr(gpu, name), getattr(cpu, name)) <= 1e-6, name
