"""One --device option for every verb: default None -> SKYCONV_DEVICE -> auto, checked once
before any work and passed down, as asked, to the skyconv function the verb computes with."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from test_cli_cases import VERBS, write_inputs

import skyconv
from skyconv import _core, cli
from skyconv._utils.device import Device

hp = pytest.importorskip("healpy")
pytest.importorskip("astropy")


@pytest.fixture
def inputs(tmp_path, rng):
    return write_inputs(tmp_path, rng)


def _verb_parsers():
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


@pytest.mark.parametrize("verb", [*VERBS, "demo"])
def test_every_computing_verb_has_the_same_options(verb):
    p = _verb_parsers()[verb]
    opts = {a.dest: a for a in p._actions}
    assert {"device", "threads", "quiet", "out", "overwrite"} <= set(opts)
    assert opts["device"].default is None
    assert opts["device"].metavar == "{auto,cpu,cuda,cuda:N}"
    assert "SKYCONV_DEVICE" in opts["device"].help
    for bad in ("tpu", "cuda:x", "cpu:0"):
        with pytest.raises(SystemExit):
            p.parse_args(["x", "--device", bad])
    assert opts["device"].type(" CUDA:1 ") == "cuda:1" and opts["device"].type("GPU") == "gpu"


def _record(monkeypatch, name):
    seen = []
    real = getattr(skyconv, name)

    def recorder(*a, **k):
        d = k.get("device", "<not passed>")
        seen.append((str(d), d.auto) if isinstance(d, Device) else d)
        return real(*a, **k)

    monkeypatch.setattr(skyconv, name, recorder)
    return seen


@pytest.mark.parametrize("verb", VERBS)
def test_the_device_is_passed_down_as_asked(verb, inputs, tmp_path, monkeypatch):
    argv, fn = inputs[verb]
    seen = _record(monkeypatch, fn)
    monkeypatch.delenv("SKYCONV_DEVICE", raising=False)
    assert cli.main([*argv, "--out", str(tmp_path / "a.fits"), "-q"]) == 0
    assert cli.main([*argv, "--out", str(tmp_path / "b.fits"), "-q", "--device", "Auto"]) == 0
    assert cli.main([*argv, "--out", str(tmp_path / "c.fits"), "-q", "--device", "cpu"]) == 0
    # resolved once by the one rule, and passed down as a Device ("auto" stays marked)
    auto = (_core.resolve_device("auto"), True)
    assert seen == [auto, auto, ("cpu", False)]


@pytest.mark.skipif(_core.resolve_device("auto") == "cuda", reason="a GPU works here")
@pytest.mark.parametrize("verb", VERBS)
def test_the_environment_is_the_default_and_the_flag_wins(
    verb, inputs, tmp_path, monkeypatch, capsys
):
    argv, fn = inputs[verb]
    seen = _record(monkeypatch, fn)
    monkeypatch.setenv("SKYCONV_DEVICE", "cuda")  # no GPU here: refused before any work
    assert cli.main([*argv, "--out", str(tmp_path / "a.fits"), "-q"]) == 1
    assert "cuda" in capsys.readouterr().err and seen == []
    assert cli.main([*argv, "--out", str(tmp_path / "b.fits"), "-q", "--device", "cpu"]) == 0
    monkeypatch.setenv("SKYCONV_DEVICE", "cpu")
    assert cli.main([*argv, "--out", str(tmp_path / "c.fits"), "-q"]) == 0
    assert seen == [("cpu", False), ("cpu", False)]


def test_threads_option_sets_the_pool(inputs, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(skyconv, "set_num_threads", calls.append)
    argv, _ = inputs["map2alm"]
    assert cli.main([*argv, "--out", str(tmp_path / "a.fits"), "--threads", "1", "-q"]) == 0
    assert calls == [1]
    with pytest.raises(SystemExit):
        cli.main([*argv, "--out", str(tmp_path / "b.fits"), "--threads", "0"])


def test_demo_devices():
    from skyconv.cli import demo

    assert demo.devices_for("cpu") == ["cpu"]
    assert demo.devices_for("cuda") == ["cpu", "cuda"]
    assert demo.devices_for("cuda:1") == ["cpu", "cuda:1"]
    p = _verb_parsers()["demo"]
    assert p.parse_args(["--device", "all"]).device == "auto"  # the old name


@pytest.mark.gpu
@pytest.mark.parametrize("verb", VERBS)
def test_cuda_from_the_environment_matches_the_cpu(verb, inputs, tmp_path, monkeypatch, capsys):
    argv, fn = inputs[verb]
    seen = _record(monkeypatch, fn)
    assert cli.main([*argv, "--out", str(tmp_path / "cpu.fits"), "-q", "--device", "cpu"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("SKYCONV_DEVICE", "cuda")
    assert cli.main([*argv, "--out", str(tmp_path / "gpu.fits")]) == 0
    said = capsys.readouterr()
    assert seen == [("cpu", False), ("cuda", False)]
    assert "on cuda" in said.out + said.err or "device cuda" in said.err
    # smooth's auto method may choose differently per device: each meets tol=1e-5 (of the map)
    tol = 1e-4 if verb == "smooth" else 1e-5
    from astropy.io import fits

    with fits.open(tmp_path / "cpu.fits") as a, fits.open(tmp_path / "gpu.fits") as b:
        for ha, hb in zip(a, b, strict=True):
            if ha.data is None:
                continue
            if isinstance(ha, fits.BinTableHDU):
                for name in ha.columns.names:
                    x, y = np.asarray(ha.data[name]), np.asarray(hb.data[name])
                    if np.iscomplexobj(x) or x.dtype.kind == "f":
                        np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
                        scale = np.nanmax(np.abs(x)) or 1.0
                        assert np.nanmax(np.abs(x - y)) <= tol * scale, name
                    else:
                        np.testing.assert_array_equal(x, y)
            elif verb == "scfind":  # as tests/test_scfind.py allows between the engines
                assert np.count_nonzero(ha.data != hb.data) <= 3
            else:
                x, y = ha.data.astype(np.float64), hb.data.astype(np.float64)
                np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
                scale = np.nanmax(np.abs(x)) or 1.0
                assert np.nanmax(np.abs(x - y)) <= tol * scale


@pytest.mark.skipif(_core.resolve_device("auto") == "cuda", reason="a GPU works here")
def test_demo_on_cuda_without_a_gpu_is_a_runtime_error(capsys, monkeypatch):
    import skyconv._demo as demo_mod

    monkeypatch.setattr(demo_mod, "run", lambda devices: pytest.fail("the demo ran"))
    assert cli.main(["demo", "--device", "cuda"]) == 1
    assert "skyconv demo: error: " in capsys.readouterr().err


@pytest.mark.gpu
def test_demo_on_cuda_runs_the_cpu_as_reference(capsys):
    assert cli.main(["demo", "--device", "cuda"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if " cuda " in ln]
    assert lines and all(" vs " in ln for ln in lines)  # each GPU row compared
