"""Resolved once (issue 15): a smoothing call builds its beam once and never fits the FWHM back
out of a window; a Gridder resolves its device and checks its kernel once, not per batch."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import skyconv
from skyconv._utils.device import Device
from skyconv.smooth import auto as smooth_auto
from skyconv.smooth import beam as beam_mod
from skyconv.smooth import cost as smooth_cost
from skyconv.smooth import split as smooth_split

grid_mod = importlib.import_module("skyconv.grid")  # skyconv.grid is the function


class Counting:
    """A stand-in for a module that counts calls to some of its functions."""

    def __init__(self, inner, names):
        self._inner = inner
        self.calls = dict.fromkeys(names, 0)

    def __getattr__(self, name):
        fn = getattr(self._inner, name)
        if name not in self.calls:
            return fn

        def counted(*args, **kwargs):
            self.calls[name] += 1
            return fn(*args, **kwargs)

        return counted


@pytest.fixture
def cheap_model(monkeypatch):
    model = smooth_cost.CostModel(
        [smooth_cost.DeviceCost("cpu", [1e-3, 2e-10, 1e-9, 1e-9], [1e-3, 1e-11, 0.0, 0.0])]
    )
    monkeypatch.setattr(smooth_cost, "model", lambda device=None: model)
    monkeypatch.setattr(smooth_split, "_CACHE", {})
    monkeypatch.setattr(smooth_auto, "_CHOICES", {})
    return model


@pytest.mark.parametrize("method", ["auto", "ring", "split", "harmonic"])
def test_smooth_map_checks_fwhm_once_and_never_fits_it_back(monkeypatch, cheap_model, method):
    calls = {"check_fwhm": 0}
    real = beam_mod.check_fwhm

    def check_fwhm(f):
        calls["check_fwhm"] += 1
        return real(f)

    def no_fit(window):
        raise AssertionError("the FWHM was fitted back out of a window")

    monkeypatch.setattr(beam_mod, "check_fwhm", check_fwhm)
    monkeypatch.setattr(beam_mod, "gaussian_fwhm", no_fit)
    nside, lmax = 32, 32
    rng = np.random.default_rng(3)
    ell, _ = skyconv.Alm.getlm(lmax)
    amp = 1.0 / (ell + 1.0)
    alm = amp * (rng.standard_normal((2, ell.size)) + 1j * rng.standard_normal((2, ell.size)))
    alm[:, : lmax + 1] = alm[:, : lmax + 1].real  # m = 0: real
    m = skyconv.alm2map(list(alm), nside, lmax=lmax, pol=False, device="cpu")
    fwhm = np.radians(10.0)
    out = skyconv.smooth_map(m, fwhm=fwhm, method=method, device="cpu")
    assert calls["check_fwhm"] == 1
    # the exact smoothing of a band-limited map; every method meets it to ~1e-4 here
    exact = skyconv.alm2map(
        [skyconv.almxfl(a, skyconv.smooth.gauss_window(fwhm, lmax)) for a in alm],
        nside, lmax=lmax, pol=False, device="cpu",
    )  # fmt: skip
    err = np.sqrt(np.mean((out - exact) ** 2) / np.mean(exact**2))
    assert err < 1e-3, (method, err)


def test_choose_method_with_a_window_finds_the_gaussian():
    """The window-only entry point (notebooks, bench) still gets the Gaussian's ring kernel."""
    lmax, fwhm = 95, np.radians(4.0)
    beam = beam_mod.Beam.from_window(skyconv.smooth.gauss_window(fwhm, lmax), lmax, 1e-5)
    assert beam.fwhm == pytest.approx(fwhm, rel=1e-9)
    direct = beam_mod.Beam.from_args(fwhm, None, lmax, 1e-5)
    t1, v1 = beam.profile
    t2, v2 = direct.profile
    assert np.allclose(t1, t2, rtol=1e-9) and np.allclose(v1, v2, rtol=1e-7, atol=0)


def test_gridder_resolves_device_and_kernel_once(monkeypatch):
    core = Counting(grid_mod._core, ["_grid_check_kernel", "_grid_accumulate"])
    monkeypatch.setattr(grid_mod, "_core", core)
    resolved = []
    real = grid_mod.resolve

    def resolve(device):
        resolved.append(device)
        return real(device)

    monkeypatch.setattr(grid_mod, "resolve", resolve)
    rng = np.random.default_rng(5)
    target = skyconv.Sightlines(rng.uniform(0, 2, 50), rng.uniform(-1, 1, 50))
    g = skyconv.Gridder(target, kernel_params=0.3, device="cpu")
    assert isinstance(g.plan.device, Device) and g.device == "cpu"
    batches = []
    for _ in range(4):
        lons, lats = rng.uniform(0, 2, 200), rng.uniform(-1, 1, 200)
        data = rng.standard_normal(200)
        batches.append((lons, lats, data))
        g.grid(lons, lats, data)
    assert resolved == ["cpu"]
    assert core.calls == {"_grid_check_kernel": 1, "_grid_accumulate": 4}  # no empty-array call
    lons, lats, data = (np.concatenate(x) for x in zip(*batches))
    once = skyconv.grid(lons, lats, data, target, kernel_params=0.3, dtype=np.float64)
    assert np.allclose(g.result().cube, once.cube, rtol=1e-6, equal_nan=True)


def test_grid_rejects_a_bad_kernel_before_any_sample(monkeypatch):
    with pytest.raises(ValueError, match="sphere_radius"):
        skyconv.Gridder(skyconv.Sightlines(np.zeros(1), np.zeros(1)), kernel_params=1.0,
                        sphere_radius=400.0)  # fmt: skip
    with pytest.raises(ValueError):
        skyconv.grid([0.0], [0.0], np.ones(1), (np.zeros(1), np.zeros(1)), kernel="box",
                     kernel_params=1.0, device="cpu")  # fmt: skip
    assert skyconv._core._grid_check_kernel("gauss1d", [1.0], None) == pytest.approx(3.0)


def test_cygrid_holds_one_plan():
    from skyconv.compat.cygrid import SlGrid

    g = SlGrid(np.zeros(3), np.linspace(-1, 1, 3), device="cpu")
    g.set_kernel("gauss1d", (0.5,), 2.0)
    plan = g._plan
    g.grid(np.zeros(5), np.linspace(-1, 1, 5), np.ones(5))
    g.grid(np.zeros(5), np.linspace(-1, 1, 5), np.ones(5))
    assert g._plan is plan and str(plan.device) == "cpu"
    assert np.allclose(g.get_datacube(), 1.0)


@pytest.mark.gpu
def test_auto_resolves_to_the_gpu_and_cuda_n_runs(rng):
    """On the GPU machine: "auto" is the GPU (marked auto), "cuda:0" reaches the core as
    "cuda:0" and gives the CPU's answer (needs the core's "cuda:N" support)."""
    from skyconv._utils.device import resolve

    assert resolve("auto") == Device("cuda", auto=True)
    assert resolve("cuda:0") == Device("cuda", 0)
    x = rng.standard_normal((4, 64, 64)).astype(np.float32)
    cpu = skyconv.filters.gaussian_filter1d(x, 2.0, axis=1, device="cpu")
    for dev in ("auto", "cuda", "cuda:0", resolve("cuda:0")):
        got = skyconv.filters.gaussian_filter1d(x, 2.0, axis=1, device=dev)
        assert np.allclose(got, cpu, rtol=0, atol=1e-5), dev
    g = skyconv.Gridder(skyconv.Sightlines(np.zeros(2), np.zeros(2)), kernel_params=1.0)
    assert g.plan.device.kind == "cuda"
