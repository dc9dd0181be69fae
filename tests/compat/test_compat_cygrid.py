"""skyconv.compat.cygrid: Cygrid 2.0.4's WcsGrid/SlGrid API on skyconv's engine."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _grid_refs import brute, field, header, wcs_centres

import skyconv
from skyconv.compat import cygrid

from _refs import rel_err


def gridder(hdr=None, **kw):
    g = cygrid.WcsGrid(hdr or header(), **kw)
    g.set_kernel("gauss1d", (0.2,), 0.6, 0.1)
    return g


def test_wcsgrid_matches_brute_force(rng):
    lon, lat = field(rng, 2000)
    data = rng.normal(size=(2000, 3))
    hdr = header()
    g = gridder(hdr, dtype=np.float64)
    g.grid(lon, lat, data)
    cube = g.get_datacube()
    assert cube.shape == (3, 24, 30) and cube.dtype == np.float64
    ref, wsum, usum = brute(lon, lat, data, *wcs_centres(hdr))
    assert rel_err(cube, ref.reshape(3, 24, 30)) <= 1e-12
    assert rel_err(g.get_weights(), wsum.reshape(3, 24, 30)) <= 1e-12
    assert rel_err(g.get_unweighted_datacube(), usum.reshape(3, 24, 30)) <= 1e-12
    assert g.get_header() is hdr
    assert g.get_wcs().naxis == 2


def test_default_dtype_and_1d_data(rng):
    lon, lat = field(rng, 500)
    g = gridder()
    g.grid(lon, lat, rng.normal(size=500))
    assert g.get_datacube().shape == (24, 30)
    assert g.get_datacube().dtype == np.float32


def test_accumulates_and_clears(rng):
    lon, lat = field(rng, 2000)
    data = rng.normal(size=2000)
    w = rng.uniform(0.5, 2, 2000)
    one = gridder(dtype=np.float64)
    one.grid(lon, lat, data, w)
    two = gridder(dtype=np.float64)
    two.grid(lon[:900], lat[:900], data[:900], w[:900])
    two.grid(lon[900:], lat[900:], data[900:], w[900:])
    assert rel_err(two.get_datacube(), one.get_datacube()) <= 1e-13
    two.clear_data_and_weights()
    assert (two.get_weights() == 0).all()
    two.clear_cache()


def test_sightlines_and_kernels(rng):
    lon, lat = field(rng, 1500)
    data = rng.normal(size=1500)
    tl, tb = field(rng, 100, size=3)
    for kernel, params in (
        ("gauss2d", (0.25, 0.12, 0.6)),
        ("tapered_sinc", (0.2, 2.52, 1.55)),
        ("gaussbessel", (0.2, 2.52, 1.55)),
    ):
        g = cygrid.SlGrid(tl, tb, dtype=np.float64)
        g.set_kernel(kernel, params, 0.75, 0.1)
        g.grid(lon, lat, data)
        ref, _, _ = brute(lon, lat, data, tl, tb, kernel, params, radius=0.75)
        assert g.get_datacube().shape == (100,)
        assert rel_err(g.get_datacube(), ref.ravel()) <= 1e-12


def test_errors(rng):
    lon, lat = field(rng, 100)
    g = cygrid.WcsGrid(header())
    with pytest.raises(RuntimeError):
        g.grid(lon, lat, np.ones(100))
    with pytest.raises(TypeError):
        g.set_kernel("box", (0.2,), 0.6, 0.1)
    with pytest.raises(ValueError):
        g.set_kernel("gauss2d", (0.2,), 0.6, 0.1)
    with pytest.raises(ValueError):
        g.set_kernel("tapered_sinc", (0.2,), 0.6, 0.1)  # Cygrid needs all three
    g.set_kernel("gauss1d", (0.2,), 0.6, 0.1)
    with pytest.raises(cygrid.ShapeError):
        g.grid(lon.reshape(10, 10), lat, np.ones(100))
    with pytest.raises(cygrid.ShapeError):
        g.grid(lon, lat[:-1], np.ones(100))
    g.grid(lon, lat, np.ones((100, 2)))
    with pytest.raises(cygrid.ShapeError):
        g.grid(lon, lat, np.ones((100, 3)))  # channel count changed
    with pytest.raises(cygrid.ShapeError):
        g.grid(lon, lat, np.ones((100, 2)), np.ones(100))  # weights must match data
    with pytest.raises(ValueError):  # ShapeError is a ValueError
        g.grid(lon, lat, np.ones((99, 2)))
    bad = cygrid.WcsGrid(header(), datacube=np.zeros((5, 5)))
    bad.set_kernel("gauss1d", (0.2,), 0.6, 0.1)
    with pytest.raises(cygrid.ShapeError):
        bad.grid(lon, lat, np.ones(100))


def test_warnings_and_numpy2(rng):
    lon, lat = field(rng, 300)
    data = rng.normal(size=300)
    g = gridder(dtype=np.float64)
    with pytest.warns(UserWarning, match="byteorder"):
        g.grid(lon, lat, data.astype(">f8"))
    ref = gridder(dtype=np.float64)
    ref.grid(lon, lat, data)
    assert np.array_equal(g.get_datacube(), ref.get_datacube(), equal_nan=True)
    cube = np.zeros((24, 30), np.float64)
    g = cygrid.WcsGrid(header(), datacube=cube, dtype=np.float32)
    g.set_kernel("gauss1d", (0.2,), 0.6, 0.1)
    with pytest.warns(UserWarning, match="different dtype"):
        g.grid(lon, lat, data)
    assert g.get_unweighted_datacube().base is cube or g.get_unweighted_datacube() is cube
    assert np.any(cube != 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        far = cygrid.SlGrid(np.array([200.0]), np.array([-50.0]))
        far.set_kernel("gauss1d", (0.2,), 0.6, 0.1)
        far.grid(lon, lat, data)
        assert np.isnan(far.get_datacube()).all()


def test_nan_drops_only_that_channel(rng):
    lon, lat = field(rng, 1000)
    data = rng.normal(size=(1000, 2))
    data[::3, 0] = np.nan
    g = gridder(dtype=np.float64)
    g.grid(lon, lat, data)
    clean = gridder(dtype=np.float64)
    clean.grid(lon, lat, data[:, 1:])
    assert np.array_equal(g.get_datacube()[1], clean.get_datacube()[0], equal_nan=True)
    assert np.isfinite(g.get_datacube()[0]).any()


def test_set_num_threads_is_global():
    before = skyconv.get_num_threads()
    try:
        gridder().set_num_threads(1)
        assert skyconv.get_num_threads() == 1
    finally:
        skyconv.set_num_threads(before)
