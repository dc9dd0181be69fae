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


def run_emulated_blocks(exe, tmp_path, m, nside, theta, values, cap, max_taps):
    """The blocked engine's launches (src/smooth/cuda/blocked.rs) per ring block: the block's
    packed input rings, its `first` table, forward DFTs of its inputs only, the phase over its
    tiles, its chunks' samples and products, inverse DFTs of its outputs; the outputs placed
    back into the map. Returns (output, number of blocks)."""
    t = _core._ring_cuda_tables(nside, theta, values, max_taps)
    starts = t["first"].astype(np.int64)
    nphi = t["nphi"].astype(np.int64)
    nr = nphi.size
    out = np.full(m.size, np.nan)
    blocks = _core._ring_cuda_blocks(nside, theta, values, cap, max_taps)
    for i, b in enumerate(blocks):
        d = tmp_path / f"block{i}"
        d.mkdir()
        for name, v in t.items():
            if isinstance(v, np.ndarray) and name not in ("first", "chunks"):
                v.tofile(d / f"{name}.bin")
        np.array([t["inv_h"], t["u2_cut"]]).tofile(d / "params.bin")
        b["first"].tofile(d / "first.bin")
        b["chunks"].tofile(d / "chunks.bin")
        np.array(b["phase_tiles"], dtype=np.int64).tofile(d / "phase.bin")
        ring_in, ring_out = np.zeros(nr, np.int32), np.zeros(nr, np.int32)
        packed = np.empty(b["pixels"])
        for a, z in b["ins"]:
            ring_in[a : z + 1] = 1
            s, e = starts[a], starts[z] + nphi[z]
            packed[b["first"][a] : b["first"][a] + e - s] = m[s:e]
        for a, z in b["outs"]:
            ring_out[a : z + 1] = 1
        ring_in.tofile(d / "ring_in.bin")
        ring_out.tofile(d / "ring_out.bin")
        packed.tofile(d / "map.bin")
        run = subprocess.run([str(exe), str(d)], capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        got = np.fromfile(d / "out.bin", dtype=np.float64)
        assert got.size == b["pixels"]
        for a, z in b["outs"]:
            s, e = starts[a], starts[z] + nphi[z]
            assert np.isnan(out[s:e]).all(), "each output ring from one block"
            out[s:e] = got[b["first"][a] : b["first"][a] + e - s]
    return out, len(blocks)


@pytest.mark.parametrize(
    "nside, px, cap, max_taps",
    [
        (2, 1.5, 1, 1 << 20),  # a block per pair
        (8, 2.0, 150, 1 << 20),
        (8, 40.0, 1, 1 << 20),  # kernels past the pole: every block is (almost) the map
        (16, 3.0, 400, 50),  # blocks and small chunks
        (16, 9.0, 1000, 1 << 20),
        (32, 4.0, 3000, 1 << 20),
    ],
)
def test_emulated_blocked_engine_equals_whole_map(emu, tmp_path, rng, nside, px, cap, max_taps):
    """Issue 21 (nside 16384 on one GPU): the ring blocks' packed tables drive the same kernels
    to the whole-map engine's result (≤ 1e-12 relative) and the CPU engine's."""
    fwhm = px * np.sqrt(4 * np.pi / (12 * nside**2))
    theta, values = sm.kernel_profile(fwhm=fwhm, tol=1e-5)
    m = rng.standard_normal(12 * nside**2)
    whole, _ = run_emulated(emu, tmp_path, m, nside, theta, values, max_taps)
    got, nblocks = run_emulated_blocks(emu, tmp_path, m, nside, theta, values, cap, max_taps)
    assert np.isfinite(got).all()
    scale = np.abs(whole).max()
    assert np.abs(got - whole).max() <= 1e-12 * scale
    want = sm._ring(m, nside, theta, values, "cpu")
    assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()
    if cap < 12 * nside**2 // 4 and px < 20:
        assert nblocks > 1
