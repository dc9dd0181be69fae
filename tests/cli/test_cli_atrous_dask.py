"""`skyconv atrous` with --chunks / --workers / --scheduler (the CLI's one Dask helper, as for
scfind and grid): FITS, .npy, HDF5 and zarr in, zarr or FITS out; the reconstruction equals
the in-memory run's to 1e-6 relative (the Dask path's global sums run in another order)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask.array")
zarr = pytest.importorskip("zarr")
fits = pytest.importorskip("astropy.io.fits")

from skyconv import cli  # noqa: E402

OPTS = ["--snr", "3", "--scale-max", "3"]


@pytest.fixture
def files(tmp_path, rng):
    x = rng.standard_normal((12, 20, 18)).astype(np.float32)
    x[4:8, 6:11, 6:10] += 3.0
    x[9, 2:6, :] = np.nan
    fits.writeto(tmp_path / "cube.fits", x)  # big-endian on disk
    np.save(tmp_path / "cube.npy", x)
    refs = {}
    for dim in (2, 3):
        ref = tmp_path / f"ref{dim}.npy"
        argv = ["atrous", str(tmp_path / "cube.npy"), "--out", str(ref), "--dim", str(dim)]
        assert cli.main(argv + OPTS + ["-q"]) == 0
        refs[dim] = np.load(ref)
    return tmp_path, x, refs


def close(got, want):
    assert got.shape == want.shape and got.dtype.newbyteorder("=") == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    scale = np.nanmax(np.abs(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * scale)


def test_fits_to_zarr_one_unit_with_residual(files, capsys):
    d, x, refs = files
    out, resid = d / "recon.zarr", d / "resid.zarr"
    argv = ["atrous", str(d / "cube.fits"), "--chunks", "6,10,9", "--out", str(out)]
    assert cli.main(argv + ["--residual", str(resid), "--dim", "3"] + OPTS) == 0
    got = zarr.open_array(str(out), mode="r")
    assert got.chunks == (6, 10, 9) and "fits_header" in got.attrs
    close(got[...], refs[3])
    close(zarr.open_array(str(resid), mode="r")[...], (x - refs[3]).astype(np.float32))
    err = capsys.readouterr().err
    assert "iteration 1" in err and "Dask threads on cpu" in err


def test_npy_on_a_scheduler_per_channel(files, dask_client):
    d, _, refs = files
    out = d / "r.fits"
    argv = ["atrous", str(d / "cube.npy"), "--scheduler", dask_client.scheduler.address]
    assert (
        cli.main(argv + ["--out", str(out), "--dim", "2", "--chunks", "4,-1,-1", "-q"] + OPTS) == 0
    )
    close(fits.getdata(out), refs[2])


def test_hdf5_dataset_per_channel(files):
    h5py = pytest.importorskip("h5py")
    d, x, refs = files
    with h5py.File(d / "cube.h5", "w") as f:
        f.create_dataset("sky/data", data=x, chunks=(4, 10, 9))
    out = d / "r.zarr"
    argv = ["atrous", f"{d / 'cube.h5'}:sky/data", "--chunks", "auto", "--out", str(out)]
    assert cli.main(argv + ["--dim", "2", "-q"] + OPTS) == 0
    close(zarr.open_array(str(out), mode="r")[...], refs[2])


def test_bad_options(files, capsys):
    d, _, _ = files
    rc = cli.main(["atrous", str(d / "cube.fits"), "--chunks", "5,8", "--out", str(d / "o.zarr")])
    assert rc == 2 and "--chunks has 2 sizes" in capsys.readouterr().err
    rc = cli.main(["atrous", str(d / "cube.fits"), "--workers", "0", "--out", str(d / "o.zarr")])
    assert rc == 2 and "--workers must be >= 1" in capsys.readouterr().err
    (d / "exists.zarr").mkdir()
    rc = cli.main(
        ["atrous", str(d / "cube.fits"), "--chunks", "auto", "--out", str(d / "exists.zarr")]
    )
    assert rc == 2 and "exists" in capsys.readouterr().err
