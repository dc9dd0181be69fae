"""`skyconv grid` verb (python/skyconv/cli/grid.py), driven through argparse."""

from __future__ import annotations

import numpy as np
import pytest
from _grid_refs import field, header

import skyconv
from skyconv.cli import grid as grid_verb

from _refs import run_cli


def grid_cli(argv):
    return run_cli(grid_verb, ["grid", *argv])


def test_fits_table_to_fits_cube(tmp_path, rng):
    fits = pytest.importorskip("astropy.io.fits")
    from astropy.table import Table

    lon, lat = field(rng, 800)
    spec = rng.normal(size=(800, 3)).astype(np.float32)
    Table({"RA": lon, "DEC": lat, "SPECTRUM": spec}).write(tmp_path / "s.fits")
    hdr = fits.Header(header())
    hdr.totextfile(tmp_path / "t.hdr")
    argv = [str(tmp_path / "s.fits"), "--header", str(tmp_path / "t.hdr"), "--sigma", "0.2"]
    argv += ["--out", str(tmp_path / "c.fits")]
    assert grid_cli([*argv, "--device", "cpu"]) == 0
    with fits.open(tmp_path / "c.fits") as hdul:
        cube, weights = hdul[0].data, hdul["WEIGHTS"].data
        assert hdul[0].header["CTYPE1"].startswith("RA---")
    ref = skyconv.grid(lon, lat, spec, header(), kernel_params=0.2, device="cpu")
    assert np.array_equal(cube, ref.cube, equal_nan=True)
    assert np.array_equal(weights, ref.weights)
    with pytest.raises(ValueError, match="exists"):
        grid_cli(argv)


def test_npz_healpix_and_columns(tmp_path, rng):
    lon, lat = field(rng, 500, lon0=40, lat0=30)
    np.savez(
        tmp_path / "s.npz", glon=lon, glat=lat, tb=rng.normal(size=500), w=rng.uniform(1, 2, 500)
    )
    assert (
        grid_cli(
            [
                str(tmp_path / "s.npz"),
                "--nside",
                "32",
                "--nest",
                "--fwhm",
                "0.5",
                "--weights",
                "w",
                "--dtype",
                "float64",
                "--out",
                str(tmp_path / "m.npz"),
            ]
        )
        == 0
    )
    z = np.load(tmp_path / "m.npz")
    assert z["cube"].shape == (12 * 32**2,) and z["cube"].dtype == np.float64
    assert np.isfinite(z["cube"]).any()
    with pytest.raises(ValueError, match="column"):
        grid_cli(
            [
                str(tmp_path / "s.npz"),
                "--nside",
                "8",
                "--sigma",
                "1",
                "--data",
                "nope",
                "--out",
                str(tmp_path / "x.npz"),
            ]
        )
