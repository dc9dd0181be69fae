"""kernels/smooth.cu tested without a GPU: the CUDA ring engine's tables (built by the Rust
host code, ``_core._ring_cuda_tables``) drive its kernels compiled for the host and run in the
SIMT emulator (tests/cuda_host/smooth_emu.cpp, plain DFTs in place of the GPU's ring FFTs), in
src/smooth/cuda/mod.rs's launch order; the result must equal the CPU engine's. Skipped when no
C++ compiler is found.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from _cuda_host import build

from skyconv import _core
from skyconv import smooth as sm


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    return build(tmp_path_factory.mktemp("smooth_emu"), "smooth_emu")


def run_emulated(exe, tmp_path, m, nside, theta, values, max_taps):
    t = _core._ring_cuda_tables(nside, theta, values, max_taps)
    for name, v in t.items():
        if isinstance(v, np.ndarray):
            v.tofile(tmp_path / f"{name}.bin")
    np.array([t["inv_h"], t["u2_cut"]]).tofile(tmp_path / "params.bin")
    np.ascontiguousarray(m, dtype=np.float64).tofile(tmp_path / "map.bin")
    run = subprocess.run([str(exe), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return np.fromfile(tmp_path / "out.bin", dtype=np.float64), t


@pytest.mark.parametrize(
    "nside, px, max_taps",
    [
        (1, 2.0, 1 << 20),
        (2, 1.5, 1 << 20),
        (8, 2.0, 1 << 20),
        (8, 40.0, 1 << 20),  # kernels reaching past the pole: whole-ring supports
        (32, 20.0, 1 << 20),  # long supports: the cosine recurrence restarts
        (16, 3.0, 50),  # one chunk per pair or so
        (16, 9.0, 1 << 20),
    ],
)
def test_emulated_gpu_engine_equals_cpu(emu, tmp_path, rng, nside, px, max_taps):
    fwhm = px * np.sqrt(4 * np.pi / (12 * nside**2))  # px pixels
    theta, values = sm.kernel_profile(fwhm=fwhm, tol=1e-5)
    m = rng.standard_normal(12 * nside**2)
    got, t = run_emulated(emu, tmp_path, m, nside, theta, values, max_taps)
    want = sm._ring(m, nside, theta, values, "cpu")
    scale = np.abs(want).max()
    err = np.abs(got - want).max() / scale
    print(f"nside {nside} fwhm {px} px: max |gpu - cpu| / max |cpu| = {err:.2e}")
    assert np.isfinite(got).all()
    assert err <= 1e-12
    if max_taps < 1 << 20:
        assert t["chunks"].size > 6  # several chunks were exercised
    if px >= 40:
        assert (t["flags"] & 2).any()  # whole rings
    if nside == 32:
        assert t["tap_n"].max() > 64  # the recurrence restarts
