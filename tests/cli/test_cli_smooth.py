"""``skyconv smooth``: FITS files interchangeable with healpy's, units on --fwhm."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from skyconv.cli import smooth as smooth_verb

from _refs import rel_l2, run_cli

hp = pytest.importorskip("healpy")
pytest.importorskip("astropy")


def cli(argv):
    return run_cli(smooth_verb, argv)


@pytest.mark.parametrize("fwhm", ["300arcmin", "5deg", "0.08726646rad", "300"])
def test_smooth_cli_harmonic_matches_healpy(tmp_path, rng, fwhm):
    nside = 16
    m = rng.standard_normal(12 * nside**2)
    hp.write_map(str(tmp_path / "in.fits"), m, dtype=np.float64)
    out = tmp_path / "out.fits"
    assert (
        cli(
            [
                "smooth",
                str(tmp_path / "in.fits"),
                str(out),
                "--fwhm",
                fwhm,
                "--method",
                "harmonic",
                "--iter",
                "3",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    got = hp.read_map(str(out))
    assert rel_l2(got, hp.smoothing(m, fwhm=np.radians(5.0), iter=3)) <= 1e-7


def test_smooth_cli_ring_nest_and_beam_window(tmp_path, rng):
    nside = 16
    m = rng.standard_normal((2, 12 * nside**2))
    m[0, 10] = hp.UNSEEN
    hp.write_map(str(tmp_path / "in.fits"), m, nest=True, dtype=np.float64)
    bw = hp.gauss_beam(np.radians(8.0), lmax=47)
    np.savetxt(tmp_path / "bl.txt", bw)
    out = tmp_path / "out.fits"
    assert (
        cli(
            [
                "smooth",
                str(tmp_path / "in.fits"),
                str(out),
                "--beam-window",
                str(tmp_path / "bl.txt"),
                "--method",
                "ring",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    got = hp.read_map(str(out), field=(0, 1), nest=True)
    from skyconv import smooth_map

    want = smooth_map(m, beam_window=bw, nest=True, method="ring", device="cpu")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert got[0, 10] == hp.UNSEEN
    from astropy.io import fits

    assert fits.getheader(str(out), 1)["ORDERING"] == "NESTED"
    with pytest.raises(OSError):  # refuses to overwrite without --overwrite
        cli(["smooth", str(tmp_path / "in.fits"), str(out), "--fwhm", "5deg"])


def test_parse_angle():
    assert smooth_verb.parse_angle("60arcmin") == pytest.approx(np.radians(1.0))
    assert smooth_verb.parse_angle("1 deg") == pytest.approx(np.radians(1.0))
    assert smooth_verb.parse_angle("3600arcsec") == pytest.approx(np.radians(1.0))
    with pytest.raises(argparse.ArgumentTypeError):
        smooth_verb.parse_angle("5 parsec")
