"""Fitted kernel splits kept on disk (issue 18's warm first call): a stored split comes back
identical, a fresh process reuses it without fitting and smooths bit for bit as the fit did,
and anything that changes the fit (the problem, the cost constants) or a damaged file means a
new fit."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

from skyconv.smooth import _split_store
from skyconv.smooth import cost as _smooth_cost
from skyconv.smooth import split as split_mod
from skyconv.smooth.methods import gauss_window

NSIDE, LMAX, TOL = 64, 128, 1e-3


def _cost(ring=(1e-4, 1e-12, 0.0, 0.0)):
    # a ring engine cheap enough that the split has both parts (the fit's arrays are stored)
    return _smooth_cost.CostModel(
        [_smooth_cost.DeviceCost("cpu", [1e-3, 2e-10, 1e-9, 1e-9], list(ring))]
    )


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("SKYCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SKYCONV_RECALIBRATE", raising=False)
    model = _cost()
    monkeypatch.setattr(_smooth_cost, "model", lambda device=None: model)
    monkeypatch.setattr(split_mod, "_CACHE", {})
    return tmp_path / _split_store.FOLDER


def _window():
    return gauss_window(np.radians(4.0), LMAX)


def _same(a, b):
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert x is not None and y is not None, f.name
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), f.name
        elif f.name == "candidates":
            assert len(x) == len(y)
            for c, d in zip(x, y, strict=True):
                assert c.keys() == d.keys()
                for k in c:
                    assert c[k] == d[k] or (np.isnan(c[k]) and np.isnan(d[k])), (k, c, d)
        else:
            assert x == y, (f.name, x, y)


def test_stored_split_comes_back_identical(store, monkeypatch):
    ks = split_mod.cached_split(_window(), NSIDE, LMAX, TOL, 0, "cpu")
    assert ks.has_ring and ks.has_harmonic, ks.summary()  # both parts' arrays are exercised
    files = list(store.glob("*.npz"))
    assert len(files) == 1
    # a new process's memory: nothing cached but the file; fitting would fail
    monkeypatch.setattr(split_mod, "_CACHE", {})
    monkeypatch.setattr(split_mod, "_split", lambda *a, **k: pytest.fail("fitted again"))
    again = split_mod.cached_split(_window(), NSIDE, LMAX, TOL, 0, "cpu")
    _same(ks, again)
    theta = np.linspace(0, 1.2 * ks.theta_cut, 50)
    assert np.array_equal(ks.profile_at(theta), again.profile_at(theta))
    assert np.array_equal(ks.window(), again.window())


def test_plain_harmonic_split_round_trips(store, monkeypatch):
    model = _cost(ring=(10.0, 1.0, 1.0, 1.0))  # a ring part never pays: no basis, no coef
    monkeypatch.setattr(_smooth_cost, "model", lambda device=None: model)
    ks = split_mod.cached_split(_window(), NSIDE, LMAX, TOL, 0, "cpu")
    assert not ks.has_ring
    monkeypatch.setattr(split_mod, "_CACHE", {})
    monkeypatch.setattr(split_mod, "_split", lambda *a, **k: pytest.fail("fitted again"))
    _same(ks, split_mod.cached_split(_window(), NSIDE, LMAX, TOL, 0, "cpu"))


def test_key_follows_problem_and_cost_constants(store, monkeypatch):
    w = _window()
    base = _split_store.key(w, NSIDE, LMAX, TOL, 0, "cpu")
    assert base == _split_store.key(w.copy(), NSIDE, LMAX, TOL, 0, "cpu")
    others = {
        _split_store.key(w * (1 + 1e-15), NSIDE, LMAX, TOL, 0, "cpu"),
        _split_store.key(w, 2 * NSIDE, LMAX, TOL, 0, "cpu"),
        _split_store.key(w, NSIDE, LMAX - 1, TOL, 0, "cpu"),
        _split_store.key(w, NSIDE, LMAX, TOL * 1.0000001, 0, "cpu"),
        _split_store.key(w, NSIDE, LMAX, TOL, 1, "cpu"),
    }
    remeasured = _cost(ring=(1e-4, 1.1e-12, 0.0, 0.0))
    monkeypatch.setattr(_smooth_cost, "model", lambda device=None: remeasured)
    others.add(_split_store.key(w, NSIDE, LMAX, TOL, 0, "cpu"))
    assert base not in others and len(others) == 6


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_file_means_a_new_fit(store, monkeypatch, damage):
    ks = split_mod.cached_split(_window(), NSIDE, LMAX, TOL, 0, "cpu")
    (path,) = store.glob("*.npz")
    raw = path.read_bytes()
    path.write_bytes(b"not an npz" if damage == "garbage" else raw[: len(raw) // 2])
    monkeypatch.setattr(split_mod, "_CACHE", {})
    calls = []
    real = split_mod._split
    monkeypatch.setattr(split_mod, "_split", lambda *a: calls.append(1) or real(*a))
    again = split_mod.cached_split(_window(), NSIDE, LMAX, TOL, 0, "cpu")
    assert calls == [1]
    _same(ks, again)
    assert _split_store.load(path.stem, split_mod.KernelSplit) is not None  # rewritten


def test_file_under_another_name_is_not_used(store):
    split_mod.cached_split(_window(), NSIDE, LMAX, TOL, 0, "cpu")
    (path,) = store.glob("*.npz")
    other = _split_store.key(_window(), NSIDE, LMAX, TOL, 1, "cpu")
    (store / f"{other}.npz").write_bytes(path.read_bytes())
    assert _split_store.load(path.stem, split_mod.KernelSplit) is not None
    assert _split_store.load(other, split_mod.KernelSplit) is None


def test_recalibrate_neither_reads_nor_writes(store, monkeypatch):
    monkeypatch.setenv("SKYCONV_RECALIBRATE", "1")
    split_mod.cached_split(_window(), NSIDE, LMAX, TOL, 0, "cpu")
    assert not store.exists()


def test_clear_cache_removes_the_splits(store):
    split_mod.cached_split(_window(), NSIDE, LMAX, TOL, 0, "cpu")
    assert any(store.glob("*.npz"))
    _smooth_cost.clear_cache()
    assert not store.exists() and split_mod._CACHE == {}


CHILD = """
import sys, time, numpy as np, skyconv
from skyconv.smooth import split as s
if sys.argv[1] == "load":
    s._split = lambda *a: sys.exit("fitted again")
m = np.random.default_rng(3).standard_normal(12 * 32**2)
out = skyconv.smooth_map(m, fwhm=np.radians(3.0), method="split", tol=1e-4, device="cpu")
np.save(sys.argv[2], out)
"""


def test_fresh_process_reuses_the_fit_bit_for_bit(tmp_path):
    """Two fresh processes on one cache folder: the second loads the split (fitting would
    exit) and its smoothed map is identical to the first's. The real cost model is measured
    once into the same folder (a few seconds at these sizes)."""
    env = {**os.environ, "SKYCONV_CACHE_DIR": str(tmp_path)}
    env.pop("SKYCONV_RECALIBRATE", None)
    outs = []
    for mode in ("fit", "load"):
        out = tmp_path / f"{mode}.npy"
        subprocess.run(
            [sys.executable, "-c", CHILD, mode, str(out)], env=env, check=True, timeout=600
        )
        outs.append(np.load(out))
    assert any((tmp_path / _split_store.FOLDER).glob("*.npz"))
    assert np.array_equal(outs[0], outs[1])


def test_grid_errors_are_measured_once_across_processes(store, monkeypatch):
    """auto's measured errors against the exact smoothing come back from the file, equal."""
    from skyconv.smooth import auto as smooth_auto

    w = _window()
    first = smooth_auto._stored_grid_errors(NSIDE, LMAX, w, TOL, 0, np.radians(4.0))
    assert {"ring", "harmonic", "nside"} <= first.keys() and first["ring"] > 0
    monkeypatch.setattr(smooth_auto, "grid_errors", lambda *a, **k: pytest.fail("measured"))
    again = smooth_auto._stored_grid_errors(NSIDE, LMAX, w, TOL, 0, np.radians(4.0))
    assert again == first
    # another beam is another problem
    calls = []
    monkeypatch.setattr(smooth_auto, "grid_errors", lambda *a, **k: calls.append(1) or first)
    smooth_auto._stored_grid_errors(NSIDE, LMAX, w, TOL, 0, np.radians(4.1))
    assert calls == [1]
