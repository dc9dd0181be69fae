"""``skyconv atrous --par duchamp.par``: DUCHAMP's parameter file drives the reconstruction."""

from __future__ import annotations

import numpy as np
import pytest

import skyconv
from skyconv.atrous import DUCHAMP_BLANK
from skyconv.cli import main

fits = pytest.importorskip("astropy.io.fits")


def cube(rng, shape):
    x = rng.normal(size=shape).astype(np.float32)
    x[..., 10:14, 12:16] += 8.0
    x[..., :2, :] = np.nan  # a blank border
    return x


def test_par_file_drives_the_reconstruction(tmp_path, rng, capsys):
    x = cube(rng, (3, 33, 37))
    src = tmp_path / "cube.fits"
    fits.PrimaryHDU(x).writeto(src)
    par = tmp_path / "duchamp.par"
    par.write_text(
        f"# reconstruction\nimageFile {src}\nflagAtrous true\nRECONDIM 2\nsnrRecon 3.5\n"
        "scaleMin 2\nfilterCode 2\nflagOutputResid 1\nsnrCut 5\nflagGrowth 1\n"
    )
    assert main(["atrous", "--par", str(par), "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "ignored" in err and "snrCut" in err and "flagGrowth" in err
    out = tmp_path / "cube.RECON-2-2-3.5-2-0-0.005.fits"
    resid = tmp_path / "cube.RESID-2-2-3.5-2-0-0.005.fits"
    want = skyconv.atrous_denoise(
        x, dim=2, snr_recon=3.5, scale_min=2, filter="triangle", device="cpu"
    ).data
    got = fits.getdata(out)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(fits.getdata(resid), x - want, equal_nan=True)
    # a command-line option overrides the file; --out and --variant as without --par
    other = tmp_path / "r.fits"
    argv = ["atrous", "--par", str(par), "--out", str(other), "--snr", "5", "--device", "cpu"]
    assert main([*argv, "--variant", "corrected", "--overwrite", "-q"]) == 0
    want = skyconv.atrous_denoise(
        x, dim=2, snr_recon=5.0, scale_min=2, filter="triangle", device="cpu", variant="corrected"
    ).data
    np.testing.assert_array_equal(fits.getdata(other), want)


def test_blank_value_from_the_header(tmp_path, rng):
    """Integer data with BLANK: DUCHAMP's blank pixels hold BLANK*BSCALE+BZERO."""
    from skyconv._utils.duchamp_par import header_blank_value

    hdr = fits.Header()
    assert header_blank_value(hdr) == DUCHAMP_BLANK
    hdr["BLANK"] = -32768
    assert header_blank_value(hdr) == -32768.0
    hdr["BSCALE"] = 0.01
    hdr["BZERO"] = 5.0
    assert header_blank_value(hdr) == pytest.approx(-327.68 + 5.0)
    x = np.round(cube(rng, (29, 31)) * 100)
    raw = np.where(np.isnan(x), -32768, x).astype(np.int16)
    hdu = fits.PrimaryHDU(raw)
    hdu.header["BLANK"] = -32768
    src, out = tmp_path / "img.fits", tmp_path / "out.fits"
    hdu.writeto(src)
    data = fits.getdata(src).astype(np.float32)
    assert np.isnan(data).sum() == np.isnan(x).sum()
    assert main(["atrous", str(src), "--out", str(out), "--dim", "2", "--device", "cpu"]) == 0
    want = skyconv.atrous_denoise(data, dim=2, device="cpu", blank_value=-32768.0).data
    np.testing.assert_array_equal(fits.getdata(out), want)
    other = skyconv.atrous_denoise(data, dim=2, device="cpu", blank_value=DUCHAMP_BLANK).data
    assert np.nanmax(np.abs(other - want)) > 1.0


def test_par_refusals(tmp_path, capsys):
    par = tmp_path / "off.par"
    par.write_text("imageFile x.fits\nflagATrous false\n")
    assert main(["atrous", "--par", str(par)]) == 2
    assert "flagATrous" in capsys.readouterr().err
    par.write_text("imageFile x.fits\nflagATrous 1\nflagSubsection 1\nsubsection [1:5,*,*]\n")
    assert main(["atrous", "--par", str(par)]) == 2
    assert "subsection" in capsys.readouterr().err
    assert main(["atrous"]) == 2


def test_recon_dim_lowered_as_duchamp_does(tmp_path, rng, capsys):
    x = cube(rng, (1, 29, 31))
    src = tmp_path / "img.fits"
    fits.PrimaryHDU(x).writeto(src)
    par = tmp_path / "d.par"
    par.write_text(f"imageFile {src}\nflagATrous 1\nreconDim 3\nflaggedChannels 3-5\n")
    assert main(["atrous", "--par", str(par), "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "lowered to 2" in err and "ignored" in err
    got = fits.getdata(tmp_path / "img.RECON-3-1-4-1-0-0.005.fits")
    want = skyconv.atrous_denoise(x[0], dim=2, device="cpu").data
    np.testing.assert_array_equal(got[0], want)
