"""The CLI's one reader/writer (skyconv.cli._io): files that healpy and astropy read back
without warnings, WCS keywords of dropped axes removed, zarr when installed, batched gridding."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
from test_cli_cases import write_inputs

import skyconv
from skyconv import cli
from skyconv.cli import _io

hp = pytest.importorskip("healpy")
fits = pytest.importorskip("astropy.io.fits")


def _samples(tmp_path, rng, n=3000, nchan=None):
    lon = rng.uniform(0, 360, n)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    data = rng.standard_normal(n if nchan is None else (n, nchan))
    np.savez(tmp_path / "s.npz", ra=lon, dec=lat, flux=data)
    return lon, lat, data


@pytest.mark.parametrize("nest", [False, True])
def test_grid_nside_writes_a_map_healpy_reads(tmp_path, rng, nest):
    lon, lat, data = _samples(tmp_path, rng)
    out = tmp_path / "m.fits"
    argv = ["grid", str(tmp_path / "s.npz"), "--nside", "16", "--fwhm", "6deg", "--out", str(out)]
    argv += ["--dtype", "float64", "--device", "cpu", "-q"] + (["--nest"] if nest else [])
    assert cli.main(argv) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = hp.read_map(str(out), nest=nest)
        wts = hp.read_map(str(out), hdu=2, nest=nest)
        hdr = dict(hp.read_map(str(out), h=True, nest=nest)[1])
    assert hdr["ORDERING"] == ("NESTED" if nest else "RING") and hdr["NSIDE"] == 16
    sigma = 6.0 / np.sqrt(8 * np.log(2))
    ref = skyconv.grid(
        lon,
        lat,
        data,
        skyconv.HealpixTarget(16, nest=nest),
        kernel_params=sigma,
        dtype=np.float64,
        device="cpu",
    )
    np.testing.assert_array_equal(got, ref.cube)
    np.testing.assert_array_equal(wts, ref.weights)
    # one pixel against a plain float64 sum: the kernel-weighted mean of the samples near it
    th, ph = hp.pix2ang(16, 100, nest=nest)
    v = hp.ang2vec(th, ph)
    d = np.degrees(np.arccos(np.clip(hp.ang2vec(np.radians(90 - lat), np.radians(lon)) @ v, -1, 1)))
    k = np.where(d < 3 * sigma, np.exp(-(d**2) / (2 * sigma**2)), 0.0)
    assert got[100] == pytest.approx(np.sum(k * data) / np.sum(k), rel=1e-9)


def test_grid_nside_channels_are_columns(tmp_path, rng):
    _, _, data = _samples(tmp_path, rng, nchan=3)
    out = tmp_path / "m.fits"
    argv = ["grid", str(tmp_path / "s.npz"), "--nside", "8", "--sigma", "4deg", "--out", str(out)]
    assert cli.main([*argv, "--device", "cpu", "-q"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = hp.read_map(str(out), field=None)
    assert got.shape == (3, 12 * 64) and got.dtype == np.float32


def test_grid_batches_show_progress_and_agree(tmp_path, rng, capsys):
    lon, lat, data = _samples(tmp_path, rng, n=1000)
    out = tmp_path / "m.npz"
    argv = ["grid", str(tmp_path / "s.npz"), "--nside", "8", "--sigma", "8deg", "--out", str(out)]
    assert cli.main([*argv, "--batch", "300", "--dtype", "float64", "--device", "cpu"]) == 0
    assert "4/4 batches (1000 of 1000 samples)" in capsys.readouterr().err
    ref = skyconv.grid(
        lon, lat, data, skyconv.HealpixTarget(8), kernel_params=8.0, dtype=np.float64, device="cpu"
    )
    z = np.load(out)
    np.testing.assert_allclose(z["cube"], ref.cube, rtol=1e-12, atol=0)
    np.testing.assert_allclose(z["weights"], ref.weights, rtol=1e-12, atol=0)


def test_smooth_output_reads_back_without_warnings(tmp_path, rng):
    inputs = write_inputs(tmp_path, rng)
    argv, _ = inputs["smooth"]
    out = tmp_path / "s.fits"
    assert cli.main([*argv, "--out", str(out), "--device", "cpu", "-q"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = hp.read_map(str(out))
        fits.getheader(out, 1)
    m = hp.read_map(argv[1])
    want = skyconv.smooth_map(m, fwhm=np.radians(10.0), device="cpu")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.max(np.abs(want)))


def _four_axis_header():
    h = fits.Header()
    for i, (ct, cu, cd) in enumerate(
        [
            ("RA---SIN", "deg", -0.01),
            ("DEC--SIN", "deg", 0.01),
            ("FREQ", "Hz", 1e5),
            ("STOKES", "", 1.0),
        ],
        start=1,
    ):
        h[f"CTYPE{i}"], h[f"CDELT{i}"], h[f"CRPIX{i}"] = ct, cd, 1.0
        h[f"CRVAL{i}"] = [10.0, -30.0, 1.4e9, 1.0][i - 1]
        if cu:
            h[f"CUNIT{i}"] = cu
    h["PC1_1"] = h["PC2_2"] = h["PC3_3"] = h["PC4_4"] = 1.0
    h["PC1_4"] = 0.0
    h["CTYPE4A"] = "STOKES"
    h["BUNIT"] = "Jy/beam"
    return h


def test_scfind_mask_of_a_stokes_cube_has_a_3d_wcs(tmp_path, rng):
    from astropy.wcs import WCS

    cube = rng.standard_normal((1, 10, 14, 14)).astype(np.float32)
    cube[0, 4:6, 5:8, 5:8] += 8
    fits.PrimaryHDU(cube, header=_four_axis_header()).writeto(tmp_path / "c.fits")
    out = tmp_path / "mask.fits"
    argv = ["scfind", str(tmp_path / "c.fits"), "--out", str(out), "--kernels-xy", "0,3"]
    assert cli.main([*argv, "--kernels-z", "0,3", "--device", "cpu", "-q"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fits.open(out) as hdul:
            h, mask = hdul[0].header, hdul[0].data
            w = WCS(h)
    assert mask.shape == (10, 14, 14) and h["NAXIS"] == 3 and w.naxis == 3
    for key in ("NAXIS4", "CTYPE4", "CRVAL4", "CDELT4", "CRPIX4", "PC4_4", "PC1_4", "CTYPE4A"):
        assert key not in h, key
    assert h["CTYPE3"] == "FREQ" and h["PC3_3"] == 1.0 and h["BUNIT"] == ""
    want = skyconv.smooth_and_clip(cube[0], kernels_xy=(0, 3), kernels_z=(0, 3), device="cpu")
    np.testing.assert_array_equal(mask, want)
    assert mask[4:6, 5:8, 5:8].all()


def test_drop_axes_keeps_the_lower_axes():
    h = _four_axis_header()
    h["WCSAXES"] = 4
    h["PV4_1"] = 0.0
    h["PV2_1"] = 0.5
    out = _io.drop_axes(h, 3)
    assert out["WCSAXES"] == 3 and out["PV2_1"] == 0.5 and "PV4_1" not in out
    assert all(f"CTYPE{i}" in out for i in (1, 2, 3)) and "CTYPE4" not in out
    assert "CTYPE4" in h  # a copy


def test_atrous_output_header_reads_back_without_warnings(tmp_path, rng):
    from astropy.wcs import WCS

    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    hdr = _four_axis_header()
    hdr["BSCALE"], hdr["BZERO"] = 1.0, 0.0
    fits.PrimaryHDU(x, header=hdr).writeto(tmp_path / "c.fits")
    out = tmp_path / "r.fits"
    assert (
        cli.main(["atrous", str(tmp_path / "c.fits"), "--out", str(out), "--device", "cpu", "-q"])
        == 0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = fits.getheader(out)
        assert WCS(h).naxis == 4
    got = fits.getdata(out)
    assert got.shape == x.shape and "BSCALE" not in h and h["BUNIT"] == "Jy/beam"
    want = skyconv.atrous_denoise(x[0], device="cpu").data
    np.testing.assert_array_equal(got[0], want)


def test_zarr_cube_and_table_round_trip(tmp_path, rng):
    pytest.importorskip("zarr")
    cube = rng.standard_normal((8, 12, 12)).astype(np.float32)
    fits.PrimaryHDU(cube, header=fits.Header({"CTYPE3": "VRAD"})).writeto(tmp_path / "c.fits")
    z1 = tmp_path / "mask.zarr"
    argv = ["scfind", str(tmp_path / "c.fits"), "--kernels-xy", "0", "--kernels-z", "0,3"]
    assert cli.main([*argv, "--out", str(z1), "--device", "cpu", "-q"]) == 0
    mask, header = _io.read_image(str(z1))
    want = skyconv.smooth_and_clip(cube, kernels_xy=(0,), kernels_z=(0, 3), device="cpu")
    np.testing.assert_array_equal(mask, want)
    assert header["CTYPE3"] == "VRAD"
    # the zarr mask is a valid scfind input, and the output convention holds for directories
    assert cli.main(["scfind", str(z1), "--out", str(z1), "-q"]) == 2
    lon, lat, data = _samples(tmp_path, rng, n=500)
    z2 = tmp_path / "g.zarr"
    argv = ["grid", str(tmp_path / "s.npz"), "--nside", "8", "--sigma", "8deg", "--out", str(z2)]
    assert cli.main([*argv, "--dtype", "float64", "--device", "cpu", "-q"]) == 0
    import zarr

    g = zarr.open_group(str(z2), mode="r")
    ref = skyconv.grid(
        lon, lat, data, skyconv.HealpixTarget(8), kernel_params=8.0, dtype=np.float64, device="cpu"
    )
    np.testing.assert_array_equal(g["cube"][...], ref.cube)


def test_zarr_missing_is_a_clear_error_before_work(tmp_path, rng, monkeypatch, capsys):
    inputs = write_inputs(tmp_path, rng)
    monkeypatch.setitem(sys.modules, "zarr", None)  # import zarr raises ImportError

    def computed(*a, **k):
        raise AssertionError("computed")

    monkeypatch.setattr(skyconv, "smooth_and_clip", computed)
    argv, _ = inputs["scfind"]
    assert cli.main([*argv, "--out", str(tmp_path / "m.zarr")]) == 1
    assert "pip install zarr" in capsys.readouterr().err


def test_healpix_reader_refuses_bad_files(tmp_path):
    m = np.arange(12 * 4**2, dtype=np.float64)
    hp.write_map(str(tmp_path / "cut.fits"), m, partial=False)
    maps, names, nested = _io.read_healpix(str(tmp_path / "cut.fits"))
    np.testing.assert_array_equal(maps[0], m)
    assert not nested
    cols = [
        fits.Column(name="PIXEL", format="J", array=np.arange(10)),
        fits.Column(name="SIGNAL", format="D", array=np.ones(10)),
    ]
    t = fits.BinTableHDU.from_columns(cols)
    t.header.update({"PIXTYPE": "HEALPIX", "NSIDE": 4, "INDXSCHM": "EXPLICIT"})
    fits.HDUList([fits.PrimaryHDU(), t]).writeto(tmp_path / "part.fits")
    with pytest.raises(cli._errors.InputFileError, match="EXPLICIT"):
        _io.read_healpix(str(tmp_path / "part.fits"))
    fits.HDUList([fits.PrimaryHDU(np.zeros(3))]).writeto(tmp_path / "img.fits")
    with pytest.raises(cli._errors.InputFileError, match="no binary table"):
        _io.read_healpix(str(tmp_path / "img.fits"))


def test_beam_window_from_text_or_fits(tmp_path, rng, capsys):
    nside = 8
    m = rng.standard_normal(12 * nside**2)
    hp.write_map(str(tmp_path / "in.fits"), m, dtype=np.float64)
    bw = hp.gauss_beam(np.radians(12.0), lmax=3 * nside - 1)
    np.savetxt(tmp_path / "bl.txt", bw)
    hp.write_cl(str(tmp_path / "bl.fits"), bw)
    base = ["smooth", str(tmp_path / "in.fits"), "--method", "harmonic", "--device", "cpu", "-q"]
    for name in ("bl.txt", "bl.fits"):
        out = str(tmp_path / f"out_{name}.fits")
        assert cli.main([*base, "--beam-window", str(tmp_path / name), "--out", out]) == 0
    a = hp.read_map(str(tmp_path / "out_bl.txt.fits"))
    b = hp.read_map(str(tmp_path / "out_bl.fits.fits"))
    np.testing.assert_array_equal(a, b)
    ref = hp.smoothing(m, beam_window=bw, iter=0)
    assert np.linalg.norm(a - ref) <= 1e-7 * np.linalg.norm(ref)
    (tmp_path / "junk.txt").write_text("one\ntwo\n")
    out = str(tmp_path / "x.fits")
    assert cli.main([*base, "--beam-window", str(tmp_path / "junk.txt"), "--out", out]) == 1
    assert "b_l values" in capsys.readouterr().err


@pytest.mark.parametrize("verb", ["atrous", "scfind"])
def test_cube_in_an_extension_is_found(verb, tmp_path, rng):
    x = rng.standard_normal((6, 10, 10)).astype(np.float32)
    h = fits.Header({"CTYPE3": "FREQ"})
    hdus = [fits.PrimaryHDU(), fits.ImageHDU(x, header=h, name="CUBE")]
    fits.HDUList(hdus).writeto(tmp_path / "ext.fits")
    out = tmp_path / "o.fits"
    assert (
        cli.main([verb, str(tmp_path / "ext.fits"), "--out", str(out), "--device", "cpu", "-q"])
        == 0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fits.open(out) as hdul:
            hdul.verify("exception")
            assert hdul[0].header["CTYPE3"] == "FREQ" and "XTENSION" not in hdul[0].header
            got = hdul[0].data
    if verb == "atrous":
        np.testing.assert_array_equal(got, skyconv.atrous_denoise(x, device="cpu").data)
    else:
        np.testing.assert_array_equal(got, skyconv.smooth_and_clip(x, device="cpu"))
    # the same with the HDU named
    out2 = tmp_path / "o2.fits"
    assert (
        cli.main(
            [
                verb,
                str(tmp_path / "ext.fits"),
                "--hdu",
                "CUBE",
                "--out",
                str(out2),
                "--device",
                "cpu",
                "-q",
            ]
        )
        == 0
    )
    np.testing.assert_array_equal(fits.getdata(out2), got)
    assert (
        cli.main(
            [
                verb,
                str(tmp_path / "ext.fits"),
                "--hdu",
                "NOPE",
                "--out",
                str(tmp_path / "o3.fits"),
                "-q",
            ]
        )
        == 1
    )
