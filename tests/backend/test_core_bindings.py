"""What every binding of the Rust core shares (src/py/): the float32/float64 dispatch written
once (py/arrays.rs, ``with_float!``) and skyconv's own exception classes, looked up once
(py/errors.rs)."""

from __future__ import annotations

import numpy as np
import pytest

import skyconv
from skyconv import _core, _errors


def _mismatched_ang2pix():
    # theta and phi of different shapes: a ShapeError from the core
    _core._healpix_ang2pix(4, np.zeros(2), np.zeros(3), False)


def test_core_raises_the_package_classes():
    with pytest.raises(skyconv.ShapeError, match="same shape") as e:
        _mismatched_ang2pix()
    assert type(e.value) is skyconv.ShapeError
    assert isinstance(e.value, ValueError)


def test_core_exception_classes_are_looked_up_once(monkeypatch):
    """After the first raise the class is cached: rebinding the name in skyconv._errors does
    not change what the core raises (a lookup on every raise would pick up the new class)."""
    with pytest.raises(skyconv.ShapeError):
        _mismatched_ang2pix()

    class Impostor(Exception):
        pass

    monkeypatch.setattr(_errors, "ShapeError", Impostor)
    with pytest.raises(skyconv.ShapeError) as e:
        _mismatched_ang2pix()
    assert type(e.value) is skyconv.ShapeError


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dispatch_select_kth_against_sort(dtype):
    rng = np.random.default_rng(5)
    data = rng.normal(size=1001).astype(dtype)
    ref = np.sort(data.astype(np.float64))
    for k in (0, 500, 1000):
        assert _core._select_kth(data, k, device="cpu") == ref[k]  # exact: a selection
    assert _core._select_kth(data, 1001, device="cpu") is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dispatch_histogram_against_numpy(dtype):
    rng = np.random.default_rng(6)
    data = rng.normal(size=(7, 9, 11)).astype(dtype)
    data[0, 0, :3] = np.nan  # not counted
    edges = [-3.0, -1.0, -0.25, 0.0, 0.5, 2.0, 3.0]
    finite = data[np.isfinite(data)].astype(np.float64)
    assert _core._histogram(data, edges) == np.histogram(finite, bins=edges)[0].tolist()


def test_dispatch_map2alm_wants_one_dtype():
    nside = 2
    m32 = np.zeros(12 * nside**2, np.float32)
    m64 = np.zeros(12 * nside**2, np.float64)
    with pytest.raises(TypeError, match="same dtype"):
        _core._map2alm([m32, m64], nside, 4, 4, 0, False)
    with pytest.raises(TypeError, match="same dtype"):
        _core._map2alm([], nside, 4, 4, 0, False)
    for m in (m32, m64):
        alm = _core._map2alm([m], nside, 4, 4, 0, False, device="cpu")
        assert alm.shape == (1, 15) and not alm.any()  # a zero map has zero alm
