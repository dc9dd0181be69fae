"""The memory estimate of smoothing up to nside 16384, without allocating it: the byte counts
(exact integers from the formulas in skyconv.smooth.memory), and the GPU engine's own count
(_core._ring_gpu_bytes, what it checks against the free memory) matching them."""

from __future__ import annotations

import numpy as np
import pytest

from skyconv import ArgumentError, _core
from skyconv.smooth.memory import smooth_memory


@pytest.mark.parametrize("nside", [1024, 8192, 16384])
def test_ring_gpu_bytes_per_pixel(nside):
    npix = 12 * nside**2
    one = _core._ring_gpu_bytes(nside, 1)
    two = _core._ring_gpu_bytes(nside, 2)
    assert two - one == 32 * npix  # two spectra (complex128, npix) per further map
    belt_fft = 16 * (2 * nside + 1) ** 2
    assert 40 * npix + belt_fft < one <= 40 * npix + belt_fft + 2**29  # + the polar FFT work
    assert smooth_memory(nside, "ring", "cuda", nmaps=2)["device"] == two


def test_nside_16384_figures():
    npix = 12 * 16384**2
    assert npix == 3_221_225_472  # > 2**31: indices are 64-bit
    r = smooth_memory(16384, "ring", "cuda")
    assert 146e9 < r["device"] < 148e9  # 147 GB: more than one H200
    assert smooth_memory(16384, "ring", "cuda", nmaps=2)["device"] > 230e9
    assert smooth_memory(16384, "ring", "cpu")["host"] == 16 * npix  # 51.5 GB
    h = smooth_memory(16384, "harmonic", "cpu")
    lmax = 3 * 16384 - 1
    assert h["host"] == 16 * npix + 32 * ((lmax + 1) * (lmax + 2) // 2)
    assert smooth_memory(16384, "ring", "cpu", nmaps=2, n_beams=100)["host"] == 8 * npix * 2 * 101


def test_memory_errors():
    with pytest.raises(ArgumentError, match="method"):
        smooth_memory(16, "fast")
    with pytest.raises(ArgumentError, match="device"):
        smooth_memory(16, "ring", "tpu")
    with pytest.raises(ArgumentError, match="nmaps"):
        smooth_memory(16, nmaps=0)
    assert np.isfinite(smooth_memory(1, "harmonic")["host"])
