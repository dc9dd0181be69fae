"""SoFiA-2 parameter files: skyconv._utils.sofia_par and the S+C run they drive."""

from __future__ import annotations

import numpy as np
import pytest

from skyconv._utils.sofia_par import DEFAULTS, ParError, parse_par, read_par

PAR = """
# SoFiA-2 parameter file (test)
pipeline.verbose        =  false
pipeline.threads        =  0

input.data              =  {data}
input.region            =  2, 40, 1, 33, 0, 19
input.invert            =  false

flag.region             =  5, 8, 5, 8, 3, 4,  30, 31, 10, 12, 0, 19
flag.auto               =  false

contsub.enable          =  false

scfind.enable           =  true
scfind.kernelsXY        =  0, 3, 8
scfind.kernelsZ         =  0, 3, 6
scfind.threshold        =  4.0
scfind.replacement      =  1.5
scfind.statistic        =  std
scfind.fluxRange        =  full

linker.enable           =  true
linker.radiusXY         =  1

output.directory        =  {out}
output.filename         =  run1
output.writeRawMask     =  true
output.overwrite        =  true
"""


def test_parse_keys_and_defaults(tmp_path):
    par = parse_par(PAR.format(data="cube.fits", out=str(tmp_path)), "t.par")
    assert par.data == "cube.fits"
    assert par.region == (2, 40, 1, 33, 0, 19)
    assert par.flag_regions == [(5, 8, 5, 8, 3, 4), (30, 31, 10, 12, 0, 19)]
    assert par.kwargs == {
        "kernels_xy": [0.0, 3.0, 8.0],
        "kernels_z": [0, 3, 6],
        "threshold": 4.0,
        "replacement": 1.5,
        "statistic": "std",
        "flux_range": "full",
    }
    assert par.write_raw_mask and par.overwrite and par.enabled and not par.invert
    assert par.raw_mask_path == str(tmp_path / "run1_mask-raw.fits")
    # set, unused keys are reported; false/empty ones are not
    assert par.ignored == ["linker.enable", "linker.radiusXY", "pipeline.threads"]
    assert par.warnings == []

    minimal = parse_par("input.data = /data/my.cube.fits\n")
    assert minimal.region is None and minimal.flag_regions == []
    assert minimal.kwargs["kernels_z"] == [0, 3, 7, 15, 31]
    assert minimal.kwargs["kernels_xy"] == [0.0, 3.0, 6.0]
    assert minimal.kwargs["statistic"] == "mad" and minimal.kwargs["flux_range"] == "negative"
    assert minimal.kwargs["threshold"] == 5.0 and minimal.kwargs["replacement"] == 2.0
    assert minimal.output_directory == "/data" and minimal.output_filename == "my.cube"
    assert not minimal.write_raw_mask
    assert set(DEFAULTS) >= {"scfind.kernelsXY", "output.writeRawMask"}


def test_settings_that_change_the_input_are_warned():
    par = parse_par("input.data = c.fits\nscaleNoise.enable = true\nflag.cube = f.fits\n")
    assert par.ignored == ["flag.cube", "scaleNoise.enable"]
    assert len(par.warnings) == 2 and all("differ" in w for w in par.warnings)


@pytest.mark.parametrize(
    "text,match",
    [
        ("scfind.threshold = 3\n", "input.data"),
        ("input.data = c.fits\nnonsense line\n", "t.par:2"),
        ("input.data = c.fits\nscfind.statistic = median\n", "statistic"),
        ("input.data = c.fits\nscfind.fluxRange = both\n", "fluxRange"),
        ("input.data = c.fits\ninput.region = 1, 2, 3\n", "six"),
        ("input.data = c.fits\nflag.region = 5, 1, 0, 1, 0, 1\n", "empty"),
        ("input.data = c.fits\nscfind.kernelsZ = 0, 2.5\n", "whole"),
        ("input.data = c.fits\noutput.overwrite = maybe\n", "true or false"),
        ("input.data = c.fits\nscfind.kernelsXY = 0, a\n", "numbers"),
    ],
)
def test_errors(text, match):
    with pytest.raises(ParError, match=match):
        parse_par(text, "t.par")


def test_load_cube_and_raw_mask(tmp_path, rng):
    fits = pytest.importorskip("astropy.io.fits")
    import skyconv
    from skyconv._utils.sofia_scfind import load_cube, write_raw_mask

    cube = rng.normal(size=(20, 36, 44)).astype(np.float32)
    cube[8:12, 10:20, 15:25] += 2.0
    hdr = fits.Header()
    hdr["CTYPE1"], hdr["CRPIX1"] = "RA---SIN", 10.0
    hdr["CTYPE2"], hdr["CRPIX2"] = "DEC--SIN", 12.0
    hdr["CTYPE3"], hdr["CRPIX3"] = "FREQ", 1.0
    hdr["BUNIT"] = "Jy/beam"
    fits.PrimaryHDU(cube.astype(">f4"), header=hdr).writeto(tmp_path / "cube.fits")
    (tmp_path / "s.par").write_text(PAR.format(data=tmp_path / "cube.fits", out=tmp_path))
    par = read_par(tmp_path / "s.par")
    got, header = load_cube(par)

    want_cube = cube.copy()
    want_cube[3:5, 5:9, 5:9] = np.nan  # flag.region, full-cube pixels, inclusive
    want_cube[0:20, 10:13, 30:32] = np.nan
    want_cube = want_cube[0:20, 1:34, 2:41]  # input.region
    np.testing.assert_array_equal(got, want_cube)
    assert got.dtype == np.float32 and got.dtype.isnative
    assert header["CRPIX1"] == 8.0 and header["CRPIX2"] == 11.0 and header["CRPIX3"] == 1.0

    mask = skyconv.smooth_and_clip(got, device="cpu", **par.kwargs)
    assert mask.sum() > 100
    write_raw_mask(par.raw_mask_path, mask, header, par.overwrite)
    with fits.open(par.raw_mask_path) as h:
        assert h[0].header["BITPIX"] == 8
        np.testing.assert_array_equal(h[0].data, mask)
        assert h[0].header["CRPIX1"] == 8.0 and h[0].header["CTYPE3"] == "FREQ"
        assert "BUNIT" not in h[0].header
    with pytest.raises(FileExistsError):
        write_raw_mask(par.raw_mask_path, mask, header, overwrite=False)
    par.invert = True
    np.testing.assert_array_equal(load_cube(par)[0], -want_cube)
    par.region = (0, 50, 0, 1, 0, 1)
    with pytest.raises(ValueError, match="outside"):
        load_cube(par)


def test_cli_scfind_par(tmp_path, rng, capsys):
    fits = pytest.importorskip("astropy.io.fits")
    import skyconv
    from skyconv import cli

    cube = rng.normal(size=(12, 30, 34)).astype(np.float32)
    cube[5:8, 10:16, 12:20] += 2.5
    fits.PrimaryHDU(cube).writeto(tmp_path / "c.fits")
    (tmp_path / "s.par").write_text(
        f"input.data = {tmp_path / 'c.fits'}\n"
        "scfind.kernelsXY = 0, 3\nscfind.kernelsZ = 0, 3\nscfind.threshold = 4\n"
        "output.writeRawMask = true\nlinker.enable = true\nscaleNoise.enable = true\n"
    )
    argv = ["scfind", "--par", str(tmp_path / "s.par"), "--device", "cpu"]
    assert cli.main(argv) == 0
    cap = capsys.readouterr()
    assert "ignored" in cap.err and "linker.enable" in cap.err and "scaleNoise.enable" in cap.err
    assert "c_mask-raw.fits" in cap.out
    want = skyconv.smooth_and_clip(
        cube, kernels_xy=(0, 3), kernels_z=(0, 3), threshold=4.0, device="cpu"
    )
    with fits.open(tmp_path / "c_mask-raw.fits") as h:
        assert h[0].header["BITPIX"] == 8
        np.testing.assert_array_equal(h[0].data, want)
    # also --out; output.overwrite defaults to true (SoFiA-2's default)
    out = tmp_path / "m.npy"
    assert cli.main([*argv, "--out", str(out), "-q"]) == 0
    np.testing.assert_array_equal(np.load(out), want)
    # usage errors (exit status 2): nothing to write, a cube besides --par, a bad file
    (tmp_path / "t.par").write_text(f"input.data = {tmp_path / 'c.fits'}\n")
    assert cli.main(["scfind", "--par", str(tmp_path / "t.par"), "-q"]) == 2
    assert cli.main(["scfind", str(tmp_path / "c.fits"), "--par", str(tmp_path / "s.par")]) == 2
    (tmp_path / "bad.par").write_text("input.data = c.fits\nscfind.statistic = median\n")
    assert cli.main(["scfind", "--par", str(tmp_path / "bad.par"), "-q"]) == 2
    assert cli.main(["scfind", str(tmp_path / "c.fits"), "-q"]) == 2  # no --out
    (tmp_path / "k.par").write_text(
        f"input.data = {tmp_path / 'c.fits'}\noutput.writeRawMask = true\n"
        "output.overwrite = false\n"
    )
    assert cli.main(["scfind", "--par", str(tmp_path / "k.par"), "-q"]) == 2  # raw mask exists
