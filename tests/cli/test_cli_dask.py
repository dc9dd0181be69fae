"""`skyconv scfind` with --chunks / --workers / --scheduler: FITS, .npy, HDF5 and zarr in,
zarr or FITS out, the same mask as the in-memory run."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask.array")
zarr = pytest.importorskip("zarr")
fits = pytest.importorskip("astropy.io.fits")

from skyconv import cli  # noqa: E402

FAST = ["--kernels-xy", "0,3", "--kernels-z", "0,3", "--threshold", "3.5"]


@pytest.fixture
def files(tmp_path, rng):
    x = rng.standard_normal((12, 20, 18)).astype(np.float32)
    x[4:8, 6:11, 6:10] += 2.5
    x[9, 2:6, :] = np.nan
    fits.writeto(tmp_path / "cube.fits", x)  # big-endian on disk
    np.save(tmp_path / "cube.npy", x)
    ref = tmp_path / "ref.npy"
    assert cli.main(["scfind", str(tmp_path / "cube.npy"), "--out", str(ref), "-q"] + FAST) == 0
    return tmp_path, np.load(ref)


def test_fits_to_zarr_local_scheduler(files, capsys):
    d, want = files
    out = d / "mask.zarr"
    argv = ["scfind", str(d / "cube.fits"), "--chunks", "5,8,7", "--out", str(out)]
    assert cli.main(argv + FAST) == 0
    got = zarr.open_array(str(out), mode="r")
    np.testing.assert_array_equal(got[...], want)
    assert "fits_header" in got.attrs
    text = capsys.readouterr()
    assert "voxels in the mask" in text.out and "Completed" in text.err  # Dask's progress


def test_npy_on_a_scheduler(files, dask_client):
    d, want = files
    out = d / "m1.fits"
    argv = ["scfind", str(d / "cube.npy"), "--scheduler", dask_client.scheduler.address]
    assert cli.main(argv + ["--out", str(out), "-q", "--chunks", "auto"] + FAST) == 0
    np.testing.assert_array_equal(fits.getdata(out), want)


def test_hdf5_dataset(files):
    h5py = pytest.importorskip("h5py")
    d, want = files
    with h5py.File(d / "cube.h5", "w") as f:
        f.create_dataset("sky/data", data=np.load(d / "cube.npy"), chunks=(4, 10, 9))
    out = d / "m2.zarr"
    argv = ["scfind", f"{d / 'cube.h5'}:sky/data", "--chunks", "auto", "--out", str(out), "-q"]
    assert cli.main(argv + FAST) == 0
    np.testing.assert_array_equal(zarr.open_array(str(out), mode="r")[...], want)


def test_workers_starts_a_local_cluster(files):
    d, want = files
    out = d / "m.zarr"
    argv = ["scfind", str(d / "cube.fits"), "--workers", "1", "--out", str(out), "-q"] + FAST
    assert cli.main(argv) == 0
    np.testing.assert_array_equal(zarr.open_array(str(out), mode="r")[...], want)


def test_bad_options(files, capsys):
    d, _ = files
    with pytest.raises(SystemExit):
        cli.main(["scfind", str(d / "cube.fits"), "--chunks", "5,x", "--out", str(d / "o.zarr")])
    with pytest.raises(SystemExit):
        cli.main(["scfind", str(d / "cube.fits"), "--workers", "2", "--scheduler", "tcp://x:1"])
    rc = cli.main(["scfind", str(d / "cube.fits"), "--chunks", "5,8", "--out", str(d / "o.zarr")])
    assert rc == 2 and "--chunks has 2 sizes" in capsys.readouterr().err
