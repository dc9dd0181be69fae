"""The Dask benches run end to end on a CPU machine at a tiny size (their smoke tests):
bench/dask_gpu.py (1 vs 2 workers, --device cpu) and bench/dask_scfind.py (Dask vs the single
call), and the cube helper they share (bench/dask_cube.py) writes, keeps and reads its cube."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import dask_cube  # noqa: E402


def _run(args, tmp_path, timeout=600):
    r = subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True,
                       timeout=timeout)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


@pytest.mark.parametrize(
    "text, want",
    [("32GB", 32e9), ("0.2GB", 2e8), ("0.2 gb", 2e8), ("512MiB", 512 * 2**20), ("1e6", 1e6)],
)
def test_parse_size(text, want):
    assert dask_cube.parse_size(text) == int(want)


@pytest.mark.parametrize("text", ["", "GB", "3 parsecs", "-1GB"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError, match="size must be like"):
        dask_cube.parse_size(text)


def test_cube_written_once_in_parallel_and_read_back(tmp_path):
    shape, chunks = (10, 40, 36), (4, 40, 36)
    path = str(tmp_path / "c.zarr")
    assert dask_cube.write_cube(path, shape, chunks, threads=3) > 0
    z = zarr.open_array(path, mode="r")
    assert z.shape == shape and z.chunks == chunks and z.dtype == np.float32
    x = z[...]
    # the same bits from a serial write of the same chunks (deterministic per chunk)
    for i in range(3):
        sl, blk = dask_cube._chunk(shape, chunks, (i, 0, 0), 3)
        np.testing.assert_array_equal(x[sl], blk)
    assert 0.9 < x[:, :, :].std() < 1.5  # unit noise plus sources
    assert dask_cube.write_cube(path, shape, chunks) == 0.0  # kept
    r = dask_cube.read_rate(path)
    files = dask_cube.chunk_files(path)
    assert len(files) == 3  # the edge chunk is stored whole (zarr pads it)
    assert r["bytes"] == sum(Path(f).stat().st_size for f in files) == 12 * 40 * 36 * 4
    assert r["gb_s"] > 0


def test_dask_gpu_bench_smoke(tmp_path):
    """--device cpu at a tiny size: S+C and à trous with 1 and 2 workers, devices reported,
    the ratio printed, the JSON well formed."""
    out = tmp_path / "r.json"
    text = _run([str(REPO / "bench" / "dask_gpu.py"), "--device", "cpu", "--size", "2MB",
                 "--planes", "32", "--chunk-planes", "8", "--threads", "1",
                 "--kernels-xy", "0,3", "--kernels-z", "0,3", "--read-gb", "0.01",
                 "--path", str(tmp_path / "cube.zarr"), "--json", str(out)],
                tmp_path)  # fmt: skip
    res = json.loads(out.read_text())
    assert [(r["algo"], r["workers"]) for r in res["runs"]] == [
        ("sc", 1),
        ("sc", 2),
        ("atrous", 1),
        ("atrous", 2),
    ]
    for r in res["runs"]:
        assert math.isfinite(r["gb_s"]) and r["gb_s"] > 0
        assert len(r["peak_rss"]) == r["workers"]
        assert r["bound"]
        # a cube this small runs S+C's single call in one task (skyconv._dask.cube)
        stages = ("scfind.single",) if r["algo"] == "sc" else ("atrous.smooth",)
        for s in stages:
            assert set(r["devices"][s]) == {"cpu"}, r["devices"]
            assert r["core_seconds"][s] > 0
        assert r["breakdown"]["kinds"]["skyconv core calls"] > 0
    assert res["sc_ratio"] > 0 and res["atrous_ratio"] > 0
    assert "sc: 2 workers / 1 worker throughput" in text
    assert "disk read:" in text
    m1 = zarr.open_array(str(tmp_path / "cube.zarr.mask1.zarr"), mode="r")[...]
    m2 = zarr.open_array(str(tmp_path / "cube.zarr.mask2.zarr"), mode="r")[...]
    np.testing.assert_array_equal(m1, m2)
    assert m1.sum() > 0


def test_dask_scfind_bench_smoke(tmp_path):
    out = tmp_path / "r.json"
    text = _run([str(REPO / "bench" / "dask_scfind.py"), "--workers", "2", "--size", "2MB",
                 "--planes", "32", "--kernels-xy", "0,3", "--kernels-z", "0,3", "--dir",
                 str(tmp_path), "--json", str(out)], tmp_path)  # fmt: skip
    res = json.loads(out.read_text())
    assert res["masks_equal"] is True
    assert res["ratio"] > 0 and res["workers"] == 2
    assert len(res["peak_rss_mib"]) == 2 and all(v > 0 for v in res["peak_rss_mib"])
    assert "peak RSS per worker" in text
