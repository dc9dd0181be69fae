"""`skyconv demo` covers every public function and compat layer (issue 17) and says where a
reference library is missing."""

from __future__ import annotations

import sys

import pytest

from skyconv import _demo


def test_demo_lists_every_public_function_and_compat_layer():
    names = {d.__name__ for d in _demo.DEMOS}
    assert {
        "demo_filters",
        "demo_healpix",
        "demo_sht",
        "demo_smooth",
        "demo_grid",
        "demo_cube",
        "demo_compat_healpy",
        "demo_compat_sofia",
        "demo_compat_cygrid",
    } <= names


@pytest.mark.parametrize(
    "demo, tol, words",
    [
        (_demo.demo_smooth, 1e-5, ("smooth_map", "split_kernel")),
        (_demo.demo_compat_healpy, 1e-12, ("compat.healpy.map2alm", "compat.healpy.smoothing")),
        (_demo.demo_compat_sofia, 0.0, ("compat.sofia.SCfinder_mem",)),
        (_demo.demo_compat_cygrid, 1e-10, ("compat.cygrid.SlGrid",)),
    ],
)
def test_new_demos_agree_with_their_references(demo, tol, words):
    rows = list(demo(["cpu"]))
    text = " ".join(r.task for r in rows)
    assert all(w in text for w in words), text
    # healpy, scipy are installed here ([test]): every row has a number within tol.
    assert rows and all(r.rel_err is not None and r.rel_err <= tol for r in rows), rows


def test_missing_reference_is_named_with_the_install_hint(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "healpy", None)  # import healpy -> ImportError
    monkeypatch.setattr(_demo, "DEMOS", [_demo.demo_compat_healpy])
    rows = _demo.run(["cpu"])
    assert rows and all(r.rel_err is None for r in rows)
    out = capsys.readouterr().out
    assert out.count("reference not installed (pip install 'skyconv[test]')") == len(rows)
