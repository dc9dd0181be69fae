"""``method="auto"`` on a GPU takes a method that fits the free memory (issue 21: nside 16384
on one GPU when it fits, on the CPU otherwise), and the byte counts it uses
(``skyconv.smooth.memory``): exact integers from the documented formulas."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from skyconv import SkyconvWarning, _core, smooth_map
from skyconv._utils.device import CPU, Device
from skyconv.smooth import auto as sm_auto
from skyconv.smooth import memory as sm_mem
from skyconv.smooth.beam import Beam
from skyconv.smooth.memory import smooth_memory

NSIDE = 16384
NPIX = 12 * NSIDE**2
LMAX = 3 * NSIDE - 1
NALM = (LMAX + 1) * (LMAX + 2) // 2


def test_nside_16384_gpu_bytes():
    h = smooth_memory(NSIDE, "harmonic", "cuda")["device"]
    assert h == int((8 * NPIX + 16 * NALM) * 1.1)
    assert 49e9 < h < 51e9  # 50 GB measured on an H100
    assert smooth_memory(NSIDE, "harmonic", "cuda", mask=True)["device"] == int(
        2 * (8 * NPIX + 16 * NALM) * 1.1
    )
    rm = smooth_memory(NSIDE, "ring", "cuda", mask=True)["device"]
    assert rm == _core._ring_gpu_bytes(NSIDE, 2) + 8 * NPIX
    r = smooth_memory(NSIDE, "ring", "cuda")["device"]
    assert smooth_memory(NSIDE, "split", "cuda")["device"] == r + h
    # 100 beams at nside 2048: the products go down in groups of BATCH_ALM_BYTES
    b = smooth_memory(2048, "harmonic", "cuda", n_beams=100)["device"]
    nalm = 6144 * 6145 // 2
    group = (4 << 30) // (16 * nalm)
    assert b == int((8 * 12 * 2048**2 + 16 * nalm) * group * 1.1)


def fake(monkeypatch, budget, calls):
    """choose() that prefers ring, then split, then harmonic (all meeting tol); a GPU with
    ``budget`` bytes."""

    def choose(beam, nside, iter, dev):
        calls.append(dev)
        info = {
            "times": {"harmonic": 10.0, "split": 5.0, "ring": 1.0},
            "errors": {"harmonic": 0.0, "split": 1e-6, "ring": 1e-6},
            "vs_exact": None,
        }
        return "ring", info

    monkeypatch.setattr(sm_auto, "choose", choose)
    monkeypatch.setattr(sm_auto, "resolve", lambda d: d)
    monkeypatch.setattr(_core, "_gpu_budget", lambda core: budget)


@pytest.mark.parametrize(
    "budget, mask, want",
    [
        (200e9, False, ("ring", "cuda")),  # 147 GB fits
        (146e9, False, ("ring", "cuda")),  # short of the whole map: ring blocks
        (64e9, False, ("ring", "cuda")),  # an H100: ring blocks (at least 10.7 GB)
        (11e9, False, ("ring", "cuda")),
        (10e9, False, ("ring", "cpu")),  # below the blocks' least: nothing fits, the CPU
        (64e9, True, ("ring", "cpu")),  # masked: harmonic needs 100 GB
        (120e9, True, ("harmonic", "cuda")),
    ],
)
def test_auto_keeps_to_what_fits(monkeypatch, budget, mask, want):
    calls = []
    fake(monkeypatch, int(budget), calls)
    beam = Beam.from_args(np.radians(1 / 60), None, LMAX, 1e-5)
    gpu = Device("cuda")
    method, dev, _ = sm_auto.choose_fitting(beam, NSIDE, 0, gpu, mask=mask)
    assert (method, dev.kind) == want
    assert calls[-1] == (CPU if want[1] == "cpu" else gpu)


def test_auto_on_cpu_is_choose(monkeypatch):
    calls = []
    fake(monkeypatch, 0, calls)
    beam = Beam.from_args(np.radians(1 / 60), None, LMAX, 1e-5)
    assert sm_auto.choose_fitting(beam, NSIDE, 0, CPU)[:2] == ("ring", CPU)
    assert calls == [CPU]


@pytest.mark.gpu
def test_gpu_auto_takes_harmonic_when_ring_does_not_fit(monkeypatch, rng):
    """A GPU 'too small' for the ring method (its budget patched to just the harmonic
    method's bytes): auto runs the harmonic method on the GPU (no DeviceError), equal to it;
    with no room at all it warns and runs on the CPU."""
    nside = 128
    fwhm = 6 * np.sqrt(4 * np.pi / (12 * nside**2))
    m = rng.standard_normal(12 * nside**2)
    harm_bytes = smooth_memory(nside, "harmonic", "cuda")["device"]
    assert harm_bytes < smooth_memory(nside, "ring", "cuda")["device"]
    monkeypatch.setattr(_core, "_gpu_budget", lambda core: harm_bytes)
    monkeypatch.setattr(sm_auto, "_CHOICES", {})
    beam = Beam.from_args(fwhm, None, 3 * nside - 1, 1e-3)
    assert sm_auto.choose_fitting(beam, nside, 0, "cuda")[:2] == ("harmonic", Device("cuda"))
    got = smooth_map(m, fwhm=fwhm, device="cuda", tol=1e-3)
    want = smooth_map(m, fwhm=fwhm, device="cuda", method="harmonic")
    assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()
    monkeypatch.setattr(_core, "_gpu_budget", lambda core: 1000)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cpu_run = smooth_map(m, fwhm=fwhm, device="cuda", tol=1e-3)
    assert any(issubclass(x.category, SkyconvWarning) and "CPU" in str(x.message) for x in w)
    cpu = smooth_map(m, fwhm=fwhm, device="cpu", tol=1e-3)
    np.testing.assert_array_equal(cpu_run, cpu)
    assert sm_mem.fits_gpu("harmonic", nside, harm_bytes)
