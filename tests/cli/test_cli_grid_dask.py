"""`skyconv grid ... --chunks N --workers 2`: gridding through Dask from the CLI, on tiny data,
equal to the single call (FITS and zarr outputs, HEALPix and WCS targets)."""

from __future__ import annotations

import numpy as np
import pytest
from _grid_refs import field, header

import skyconv
from skyconv.cli import grid as grid_verb

from _refs import run_cli

pytest.importorskip("distributed")


def grid_cli(argv):
    return run_cli(grid_verb, ["grid", *argv])


def test_fits_cube_through_a_local_cluster(tmp_path, rng):
    fits = pytest.importorskip("astropy.io.fits")
    lon, lat = field(rng, 900)
    spec = rng.normal(size=(900, 3))
    np.savez(tmp_path / "s.npz", ra=lon, dec=lat, spectrum=spec)
    fits.Header(header()).totextfile(tmp_path / "t.hdr")
    out = tmp_path / "c.fits"
    argv = [str(tmp_path / "s.npz"), "--header", str(tmp_path / "t.hdr"), "--sigma", "0.2",
            "--dtype", "float64", "--device", "cpu", "--quiet"]  # fmt: skip
    assert grid_cli([*argv, "--out", str(out), "--chunks", "200,2", "--workers", "2"]) == 0
    ref = skyconv.grid(lon, lat, spec, header(), kernel_params=0.2, dtype=np.float64, device="cpu")
    with fits.open(out) as hdul:
        cube, weights = hdul[0].data, hdul["WEIGHTS"].data
    ok = np.isfinite(ref.cube)
    np.testing.assert_array_equal(np.isfinite(cube), ok)
    np.testing.assert_allclose(cube[ok], ref.cube[ok], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights, ref.weights, rtol=1e-12, atol=1e-12)


def test_zarr_healpix_threaded_scheduler(tmp_path, rng):
    """--chunks alone: Dask's local threaded scheduler; zarr output."""
    zarr = pytest.importorskip("zarr")
    lon, lat = field(rng, 700, size=20.0)
    tb = rng.normal(size=700)
    np.savez(tmp_path / "s.npz", glon=lon, glat=lat, tb=tb)
    out = tmp_path / "m.zarr"
    argv = [str(tmp_path / "s.npz"), "--nside", "16", "--fwhm", "2deg", "--dtype", "float64",
            "--device", "cpu", "--quiet", "--out", str(out), "--chunks", "150"]  # fmt: skip
    assert grid_cli(argv) == 0
    sigma = 2 / grid_verb.FWHM_PER_SIGMA
    hpx = skyconv.HealpixTarget(16)
    ref = skyconv.grid(lon, lat, tb, hpx, kernel_params=sigma, dtype=np.float64, device="cpu")
    g = zarr.open_group(str(out), mode="r")
    np.testing.assert_allclose(g["cube"][...], ref.cube, rtol=1e-12, atol=1e-12, equal_nan=True)
    with pytest.raises(ValueError, match="--chunks"):
        grid_cli([*argv[:-2], "--chunks", "150,2", "--overwrite"])
