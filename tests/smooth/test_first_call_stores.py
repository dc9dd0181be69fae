"""Issue 18, the smoothing layer's first call: ``method="auto"``'s predicted ring error kept on
disk (a fresh process's choice skips the profile's Legendre transform and the pixel-grid
matrix), the choice identical with and without the store, and smooth_map's single-map paths
handing back the engine's output without staging copies, bit for bit as the general path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import skyconv
from skyconv._utils.device import CPU
from skyconv.smooth import _split_store, methods
from skyconv.smooth import auto as auto_mod
from skyconv.smooth import cost as _smooth_cost
from skyconv.smooth.beam import Beam

NSIDE, TOL = 64, 1e-5


def _beam(fwhm_deg=3.0, tol=TOL, lmax=3 * NSIDE - 1):
    return Beam.from_args(np.radians(fwhm_deg), None, lmax, tol)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("SKYCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SKYCONV_RECALIBRATE", raising=False)
    return tmp_path / _split_store.FOLDER


def _ring_files(folder):
    return sorted(folder.glob("ring-*.json")) if folder.is_dir() else []


def test_ring_error_stored_and_reused(store, monkeypatch):
    beam = _beam()
    want = auto_mod._ring_error(beam, NSIDE)
    assert want is not None and 0 < want < 1
    got = auto_mod._stored_ring_error(beam, NSIDE)
    assert got == want  # JSON keeps a float's repr: the same bits
    assert len(_ring_files(store)) == 1
    monkeypatch.setattr(auto_mod, "_ring_error", lambda *a: pytest.fail("computed again"))
    assert auto_mod._stored_ring_error(_beam(), NSIDE) == want


def test_ring_error_key_follows_the_problem(store):
    base = _split_store.ring_key(_beam().window, NSIDE, 3 * NSIDE - 1, TOL, _beam().fwhm)
    others = [
        _split_store.ring_key(_beam().window, 2 * NSIDE, 3 * NSIDE - 1, TOL, _beam().fwhm),
        _split_store.ring_key(_beam().window, NSIDE, 3 * NSIDE - 1, 1e-4, _beam().fwhm),
        _split_store.ring_key(_beam(4.0).window, NSIDE, 3 * NSIDE - 1, TOL, _beam(4.0).fwhm),
        _split_store.ring_key(_beam().window, NSIDE, 3 * NSIDE - 1, TOL, None),
    ]
    assert base.startswith("ring-") and len({base, *others}) == 5


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong key", "no error"])
def test_damaged_ring_error_is_computed_again(store, damage):
    beam = _beam()
    want = auto_mod._stored_ring_error(beam, NSIDE)
    (path,) = _ring_files(store)
    text = path.read_text()
    if damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        path.write_bytes(os.urandom(64))
    elif damage == "wrong key":
        doc = json.loads(text)
        doc["key"] = "ring-0"
        doc["value"]["error"] = 0.5
        path.write_text(json.dumps(doc))
    else:
        doc = json.loads(text)
        doc["value"] = {"err": 0.5}
        path.write_text(json.dumps(doc))
    assert auto_mod._stored_ring_error(beam, NSIDE) == want
    # and the file is sound again
    assert json.loads(path.read_text())["value"]["error"] == want


def test_concurrent_ring_error_writers(store, monkeypatch):
    beam = _beam()
    want = auto_mod._ring_error(beam, NSIDE)
    name = _split_store.ring_key(beam.window, NSIDE, beam.lmax, beam.tol, beam.fwhm)
    errors = []

    def write():
        try:
            for _ in range(20):
                _split_store.store_json(name, {"error": want})
                found = _split_store.load_json(name)
                # a reader sees either no file yet or a whole one, never half of one
                assert found is None or found == {"error": want}
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=write) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [p.name for p in store.iterdir()] == [f"{name}.json"]  # no temporary file left
    assert auto_mod._stored_ring_error(beam, NSIDE) == want


def test_recalibrate_neither_reads_nor_writes_ring_errors(store, monkeypatch):
    monkeypatch.setenv("SKYCONV_RECALIBRATE", "1")
    auto_mod._stored_ring_error(_beam(), NSIDE)
    assert _ring_files(store) == []


def test_choice_identical_with_and_without_the_store(store, monkeypatch):
    """The same method, times and errors from a cold store, a warm store and no store."""
    model = _smooth_cost.CostModel(
        [_smooth_cost.DeviceCost("cpu", [1e-3, 2e-10, 1e-9, 1e-9], [1e-4, 1e-12, 0.0, 0.0])]
    )
    monkeypatch.setattr(_smooth_cost, "model", lambda device=None: model)
    beam = _beam(2.0)

    def fresh_choice():
        monkeypatch.setattr(auto_mod, "_CHOICES", {})
        monkeypatch.setattr(auto_mod, "cached_split", _uncached_split)
        method, info = auto_mod._choose(beam, NSIDE, 0, CPU)
        return method, info["times"], info["errors"]

    cold = fresh_choice()
    assert "ring" in cold[1], cold
    warm = fresh_choice()
    monkeypatch.setenv("SKYCONV_RECALIBRATE", "1")
    off = fresh_choice()
    assert cold == warm == off


def _uncached_split(window, nside, lmax, tol, iter, device):
    from skyconv.smooth import split as split_mod

    return split_mod._split(
        np.asarray(window, dtype=np.float64),
        nside,
        lmax,
        tol,
        np.ones(lmax + 1),
        iter,
        device,
        None,
        None,
    )


def test_fresh_process_reuses_the_ring_error(tmp_path):
    """Two interpreters on one cache folder: the second reads the error the first computed
    (the set-up log says so) and chooses the same method."""
    code = (
        "import json, numpy as np, skyconv\n"
        "from skyconv.smooth import auto, cost\n"
        "from skyconv.smooth.beam import Beam\n"
        "m = cost.CostModel([cost.DeviceCost('cpu', [1e-3, 2e-10, 1e-9, 1e-9],"
        " [1e-4, 1e-12, 0.0, 0.0])])\n"
        "cost.model = lambda device=None: m\n"
        f"b = Beam.from_args(np.radians(2.0), None, {3 * NSIDE - 1}, {TOL})\n"
        f"method, info = auto.choose(b, {NSIDE}, 0, 'cpu')\n"
        "st = [e['detail'] for e in skyconv.setup_trace() if e['stage'] == 'smooth ring error']\n"
        "print(json.dumps([method, info['errors'], st]))\n"
    )
    env = dict(os.environ, SKYCONV_CACHE_DIR=str(tmp_path))
    env.pop("SKYCONV_RECALIBRATE", None)
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    (m1, e1, st1), (m2, e2, st2) = runs
    assert m1 == m2 and e1 == e2
    assert any("computed" in s for s in st1), st1
    assert st2 and all("read from the cache" in s for s in st2), st2


# ------------------------------------------------------------------ single-map paths, no copies


def _map(nside=32, k=None):
    r = np.random.default_rng(3)
    return r.standard_normal(12 * nside**2 if k is None else (k, 12 * nside**2))


def test_harmonic_batch_single_product_equals_the_general_path():
    m = _map()
    w = methods.gauss(np.radians(5.0), 3 * 32 - 1)
    one = methods.harmonic_batch(m[None], [w], 3 * 32 - 1, 0, "cpu")
    two = methods.harmonic_batch(m[None], [w, w], 3 * 32 - 1, 0, "cpu")
    assert one.shape == (1, 1, m.size)
    assert np.array_equal(one[0, 0], two[0, 0]) and np.array_equal(one[0, 0], two[1, 0])


@pytest.mark.parametrize("method", ["harmonic", "ring"])
def test_smooth_map_one_map_equals_the_stacked_path(method):
    m = _map()
    one = skyconv.smooth_map(m, fwhm=np.radians(4.0), method=method, device="cpu")
    two = skyconv.smooth_map(np.stack([m, m]), fwhm=np.radians(4.0), method=method, device="cpu")
    assert one.shape == m.shape and one.flags.c_contiguous
    assert np.array_equal(one, two[0]) and np.array_equal(one, two[1])
    # against healpy's smoothing at the harmonic method's accuracy (a real reference)
    if method == "harmonic":
        hp = pytest.importorskip("healpy")
        ref = hp.smoothing(m, fwhm=np.radians(4.0), iter=0)
        assert np.sqrt(np.mean((one - ref) ** 2) / np.mean(ref**2)) <= 1e-10
