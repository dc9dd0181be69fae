"""The GPU ring method in ring blocks (issue 21: nside 16384 on one GPU; src/smooth/cuda/
blocked.rs): where the whole map does not fit the device, the output rings run in blocks
holding only the input rings they read. Blocked results equal the whole-map engine's (forced
small blocks at small nside, ``SKYCONV_RING_BLOCK_PIXELS``); the byte counts auto uses; the
block layout itself is unit-tested in Rust (src/smooth/cuda/blocks.rs)."""

from __future__ import annotations

import numpy as np
import pytest

from skyconv import _core, smooth_map
from skyconv.smooth import kernel_profile
from skyconv.smooth.memory import fits_gpu, smooth_memory

NSIDE = 16384
NPIX = 12 * NSIDE**2


def resol(nside):
    return np.sqrt(4 * np.pi / (12 * nside**2))


def max_rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_blocked_bytes_at_nside_16384():
    """The least the blocks run in: a fixed part (1 GiB of kernel samples, the polar rings'
    transform work, the belt's cuFFT plans) plus 40 bytes per pixel of npix / 16; far below
    the whole map's 147 GB and an H100's ~63 GB budget, above the harmonic method's zero."""
    low = _core._ring_gpu_bytes(NSIDE, blocked=True)
    whole = _core._ring_gpu_bytes(NSIDE)
    assert 146e9 < whole < 148e9
    assert 40 * NPIX // 16 + (1 << 30) < low < 40 * NPIX // 16 + 4e9
    r = smooth_memory(NSIDE, "ring", "cuda")
    assert r["device"] == whole and r["device_min"] == low
    assert fits_gpu("ring", NSIDE, int(63e9)) and not fits_gpu("ring", NSIDE, low - 1)
    # the masked ring method is not blocked; the harmonic method has no blocks
    rm = smooth_memory(NSIDE, "ring", "cuda", mask=True)
    assert rm["device_min"] == rm["device"] > 270e9
    h = smooth_memory(NSIDE, "harmonic", "cuda")
    assert h["device_min"] == h["device"]
    assert smooth_memory(NSIDE, "ring", "cpu")["device_min"] == 0
    # small nside: the whole map is the least
    assert smooth_memory(64, "ring", "cuda")["device_min"] == _core._ring_gpu_bytes(64)


CASES = [
    # nside, FWHM in pixels, block pixels: one pair per block, a few rings, the poles, wide
    (8, 2.0, 1),
    (16, 3.0, 200),
    (16, 9.0, 700),
    (32, 4.0, 1500),
    (32, 20.0, 5000),  # kernels over many rings: blocks of one pair larger than the cap
    (64, 3.0, 12000),
]


@pytest.mark.gpu
@pytest.mark.parametrize("nside, px, cap", CASES)
def test_gpu_blocked_equals_whole_map(rng, monkeypatch, nside, px, cap):
    """Forced ring blocks give the whole-map engine's result to 1e-12 (the same kernels and
    per-ring arithmetic; only the packing differs), and the CPU engine's to the usual 1e-9."""
    m = rng.standard_normal(12 * nside**2)
    theta, values = kernel_profile(fwhm=px * resol(nside))
    whole = _core._smooth_ring(m, nside, theta, values, "cuda")
    monkeypatch.setenv("SKYCONV_RING_BLOCK_PIXELS", str(cap))
    got = _core._smooth_ring(m, nside, theta, values, "cuda")
    assert max_rel(got, whole) <= 1e-12
    assert max_rel(got, _core._smooth_ring(m, nside, theta, values, "cpu")) <= 1e-9


@pytest.mark.gpu
def test_gpu_blocked_beams_and_maps(rng, monkeypatch):
    """A batch of beams and maps through the blocks: each output equals its whole-map one."""
    nside = 32
    m = rng.standard_normal((2, 12 * nside**2))
    profiles = [kernel_profile(fwhm=f * resol(nside)) for f in (2.5, 5.0, 11.0)]
    ts, vs = [p[0] for p in profiles], [p[1] for p in profiles]
    whole = _core._smooth_ring_beams(m, nside, ts, vs, "cuda")
    monkeypatch.setenv("SKYCONV_RING_BLOCK_PIXELS", "2000")
    got = _core._smooth_ring_beams(m, nside, ts, vs, "cuda")
    assert got.shape == whole.shape == (3, 2, m.shape[1])
    assert max_rel(got, whole) <= 1e-12
    fw = [f * resol(nside) for f in (2.5, 5.0)]
    batch = smooth_map(m[0], fwhm=fw, method="ring", device="cuda")
    for b, f in enumerate(fw):
        one = smooth_map(m[0], fwhm=f, method="ring", device="cuda")
        assert max_rel(batch[b], one) <= 1e-12


@pytest.mark.gpu
def test_gpu_blocks_where_the_whole_map_does_not_fit(rng, monkeypatch):
    """nside 4096 under a budget between the blocks' least and the whole map's bytes: the
    engine runs in blocks by itself (no variable forcing it), equal to the whole-map result;
    under the blocks' least it raises GpuMemoryError naming the bytes."""
    from skyconv import GpuMemoryError

    nside = 4096
    whole_bytes = _core._ring_gpu_bytes(nside)
    low = _core._ring_gpu_bytes(nside, blocked=True)
    assert low < whole_bytes
    m = rng.standard_normal(12 * nside**2)
    theta, values = kernel_profile(fwhm=3 * resol(nside))
    whole = _core._smooth_ring(m, nside, theta, values, "cuda")
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", str((low + whole_bytes) // 2))
    got = _core._smooth_ring(m, nside, theta, values, "cuda")
    assert max_rel(got, whole) <= 1e-12
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", str(low - 1))
    with pytest.raises(GpuMemoryError, match=r"needs at least \d+ bytes"):
        _core._smooth_ring(m, nside, theta, values, "cuda")


def test_block_variable_is_checked(monkeypatch):
    """A bad SKYCONV_RING_BLOCK_PIXELS is an ArgumentError naming it once a GPU device is
    resolved (skipped without a GPU: the variable is read by the GPU engine only)."""
    from skyconv import ArgumentError, DeviceError

    monkeypatch.setenv("SKYCONV_RING_BLOCK_PIXELS", "lots")
    m = np.zeros(12 * 4**2)
    try:
        smooth_map(m, fwhm=0.5, method="ring", device="cuda")
    except ArgumentError as e:
        assert "SKYCONV_RING_BLOCK_PIXELS" in str(e)
    except DeviceError:
        pytest.skip("no GPU")
    else:
        raise AssertionError("no error for SKYCONV_RING_BLOCK_PIXELS=lots")
