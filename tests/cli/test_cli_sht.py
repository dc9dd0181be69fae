"""``skyconv alm2map`` / ``skyconv map2alm``: FITS files interchangeable with healpy's."""

from __future__ import annotations

import numpy as np
import pytest

from skyconv.cli import alm2map as alm2map_verb
from skyconv.cli import map2alm as map2alm_verb

from _refs import rel_l2, run_cli

hp = pytest.importorskip("healpy")
pytest.importorskip("astropy")


def cli(argv):
    verb = {"alm2map": alm2map_verb, "map2alm": map2alm_verb}[argv[0]]
    return run_cli(verb, argv)


def test_alm2map_cli_reads_healpy_alm_and_writes_healpy_map(tmp_path, rng):
    lmax = 24
    n = hp.Alm.getsize(lmax)
    a = rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))
    a[:, : lmax + 1] = a[:, : lmax + 1].real
    a[1:, :2] = 0
    a[1:, lmax + 1] = 0
    hp.write_alm(str(tmp_path / "alm.fits"), list(a))
    assert (
        cli(
            [
                "alm2map",
                str(tmp_path / "alm.fits"),
                str(tmp_path / "map.fits"),
                "--nside",
                "8",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    got = hp.read_map(str(tmp_path / "map.fits"), field=(0, 1, 2))
    assert rel_l2(got, hp.alm2map(a, 8)) <= 1e-10


def test_map2alm_cli_reads_healpy_map_and_writes_healpy_alm(tmp_path, rng):
    m = rng.standard_normal(12 * 8**2)
    hp.write_map(str(tmp_path / "map.fits"), m, nest=True, dtype=np.float64)
    assert (
        cli(
            [
                "map2alm",
                str(tmp_path / "map.fits"),
                str(tmp_path / "alm.fits"),
                "--lmax",
                "16",
                "--iter",
                "1",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    got = hp.read_alm(str(tmp_path / "alm.fits"))
    ref = hp.map2alm(hp.reorder(m, n2r=True), lmax=16, iter=1)
    assert rel_l2(got, ref) <= 1e-10
    with pytest.raises(OSError):  # refuses to overwrite without --overwrite
        cli(["map2alm", str(tmp_path / "map.fits"), str(tmp_path / "alm.fits")])
