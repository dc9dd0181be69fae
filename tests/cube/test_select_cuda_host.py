"""The bracketed selection's device code (kernels/select.cu: rdx_sample, rdx_bracket,
rdx_bracket_settle, the digit passes over the kept keys), compiled for the host and run in the
SIMT emulator (tests/cuda_host/select_emu.cpp) in `select_bracketed`'s launch order, against
numpy's sort: the ranks' values exactly, or the miss the host answers by selecting over the
whole array."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from _cuda_host import build

SAMPLE, MARGIN = 4096, 320  # Bracket::plan's margin for this sample (5 sqrt(sample))
KINDS = [(2, np.float32, 0.0, 0), (0, np.float32, 0.25, 1), (1, np.float64, 0.25, 1)]


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    return build(tmp_path_factory.mktemp("select_emu"), "select_emu")


def run(exe, tmp_path, x, kind, k0, k1, center, absdev):
    n = len(x)
    cap = 1 << (3 * MARGIN * (n // SAMPLE + 1) - 1).bit_length()  # Bracket::plan's buffer
    x.tofile(tmp_path / "x.bin")
    args = np.array([kind, n, k0, k1, SAMPLE, MARGIN, cap, absdev, 0, 0], dtype=np.int64)
    args[9] = np.array([center]).view(np.int64)[0]
    args.tofile(tmp_path / "args.bin")
    subprocess.run([str(exe), str(tmp_path)], check=True, timeout=300)
    return np.fromfile(tmp_path / "out.bin")


@pytest.mark.parametrize("kind,dtype,center,absdev", KINDS)
def test_emulated_bracket_selects_exactly(emu, tmp_path, rng, kind, dtype, center, absdev):
    n = 100_003
    x = (rng.standard_normal(n) * 3).astype(dtype)
    x[rng.integers(0, n, n // 20)] = np.nan
    x[5:50] = 0.0
    v = x.astype(np.float64)
    v = v[np.isfinite(v)] - center
    ref = np.sort(np.abs(v) if absdev else v)
    m = len(ref)
    for k0, k1 in [((m - 1) // 2, m // 2), (m // 3, m // 3 + 5), (m - 2, m - 1)]:
        status, v0, v1, kept, below = run(emu, tmp_path, x, kind, k0, k1, center, absdev)
        assert status == 0, (k0, k1, kept, below)  # a median's bracket holds it
        assert (v0, v1) == (ref[k0], ref[k1]), (k0, k1)
        assert below <= k0 and k1 < below + kept
    # ranks far apart, or past the kept values: the bracket says it missed
    for k0, k1 in [(7, m // 3), (0, m)]:
        assert run(emu, tmp_path, x, kind, k0, k1, center, absdev)[0] == 2, (k0, k1)


def test_emulated_bracket_with_ties(emu, tmp_path, rng):
    """Quantised data: the median's key fills the bracket past its buffer (a miss), or, with
    fewer ties, is selected among them."""
    n = 100_003
    steps = np.round(rng.standard_normal(n)).astype(np.float32)
    m = n
    assert run(emu, tmp_path, steps, 2, (m - 1) // 2, m // 2, 0.0, 0)[0] == 2
    fine = np.round(rng.standard_normal(n) * 2000).astype(np.float32)
    ref = np.sort(fine.astype(np.float64))
    status, v0, v1, _, _ = run(emu, tmp_path, fine, 2, (m - 1) // 2, m // 2, 0.0, 0)
    assert status == 0 and (v0, v1) == (ref[(m - 1) // 2], ref[m // 2])
