"""The ring method's HEALPix ring weights are kept on disk from nside 512 on (issue 18's warm
first call: their CG solve is 0.1-0.9 s per process at nside 1024-2048): a second fresh process
reads the file and smooths bit for bit as the first, and a damaged file is solved again (to
the same bits: the solve's sums are grouped the same way whatever the threads). Each test has
its own cache folder (SKYCONV_CACHE_DIR in tmp_path)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

CHILD = """
import sys, numpy as np, skyconv
m = np.random.default_rng(5).standard_normal(12 * 512**2)
out = skyconv.smooth_map(m, fwhm=np.radians(0.5), method="ring", device="cpu")
np.save(sys.argv[1], out)
"""


def _run(tmp_path, name):
    env = {**os.environ, "SKYCONV_CACHE_DIR": str(tmp_path / "cache"), "SKYCONV_NUM_THREADS": "2"}
    out = tmp_path / f"{name}.npy"
    subprocess.run([sys.executable, "-c", CHILD, str(out)], env=env, check=True, timeout=600)
    return np.load(out)


def test_ring_weights_file_is_reused_bit_for_bit(tmp_path):
    first = _run(tmp_path, "first")
    files = list((tmp_path / "cache" / "ring_weights").glob("*nside512.f64"))
    assert len(files) == 1
    assert files[0].stat().st_size == 36 + 8 * 2 * 512  # header + one value per north ring
    stamp = files[0].stat().st_mtime_ns
    second = _run(tmp_path, "second")
    assert np.array_equal(first, second)
    assert files[0].stat().st_mtime_ns == stamp  # read, not rewritten
    raw = bytearray(files[0].read_bytes())
    raw[-3] ^= 0xFF  # a damaged value: refused (checksum), solved again, file rewritten
    files[0].write_bytes(bytes(raw))
    third = _run(tmp_path, "third")
    assert np.array_equal(first, third)
    assert files[0].read_bytes() != bytes(raw)
