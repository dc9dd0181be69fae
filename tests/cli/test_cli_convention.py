"""The CLI's conventions: --out on every verb (the old positional form still works), outputs
checked before any work, one exit status per kind of error, messages that name the fix."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from test_cli_cases import VERBS, write_inputs

import skyconv
from skyconv import cli

hp = pytest.importorskip("healpy")
pytest.importorskip("astropy")


@pytest.fixture
def inputs(tmp_path, rng):
    return write_inputs(tmp_path, rng)


def _forbid(monkeypatch, name):
    def computed(*a, **k):
        raise AssertionError(f"skyconv.{name} ran although the command was refused")

    monkeypatch.setattr(skyconv, name, computed)


@pytest.mark.parametrize("verb", VERBS)
def test_existing_output_is_refused_before_any_work(verb, inputs, tmp_path, monkeypatch, capsys):
    argv, fn = inputs[verb]
    out = tmp_path / "out.fits"
    out.write_bytes(b"keep me")
    _forbid(monkeypatch, fn)
    assert cli.main([*argv, "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"skyconv {verb}: error: " in err and "exists" in err and "--overwrite" in err
    assert out.read_bytes() == b"keep me"


def test_existing_residual_is_refused_before_any_work(inputs, tmp_path, monkeypatch, capsys):
    argv, fn = inputs["atrous"]
    (tmp_path / "res.fits").write_bytes(b"keep me")
    _forbid(monkeypatch, fn)
    code = cli.main(
        [*argv, "--out", str(tmp_path / "r.fits"), "--residual", str(tmp_path / "res.fits")]
    )
    assert code == 2 and "--overwrite" in capsys.readouterr().err
    assert not (tmp_path / "r.fits").exists()


@pytest.mark.parametrize("verb", VERBS)
def test_out_writes_and_overwrite_replaces(verb, inputs, tmp_path):
    argv, _ = inputs[verb]
    out = tmp_path / "out.fits"
    assert cli.main([*argv, "--out", str(out), "--device", "cpu", "-q"]) == 0
    first = out.read_bytes()
    assert len(first) > 2880
    out.write_bytes(b"old")
    assert cli.main([*argv, "-o", str(out), "--overwrite", "--device", "cpu", "-q"]) == 0
    assert out.read_bytes()[:2880] == first[:2880]


@pytest.mark.parametrize("verb", ["smooth", "alm2map", "map2alm"])
def test_deprecated_positional_output_still_works(verb, inputs, tmp_path, capsys):
    argv, _ = inputs[verb]
    new, old = tmp_path / "new.fits", tmp_path / "old.fits"
    assert cli.main([*argv, "--out", str(new), "--device", "cpu", "-q"]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert cli.main([argv[0], argv[1], str(old), *argv[2:], "--device", "cpu", "-q"]) == 0
    assert "positional argument is deprecated" in capsys.readouterr().err
    if verb == "map2alm":
        np.testing.assert_array_equal(hp.read_alm(str(old)), hp.read_alm(str(new)))
    else:
        np.testing.assert_array_equal(hp.read_map(str(old)), hp.read_map(str(new)))
    # both forms at once, or neither: a usage error
    assert cli.main([argv[0], argv[1], str(old), *argv[2:], "--out", str(new), "--overwrite"]) == 2
    assert "not both" in capsys.readouterr().err
    assert cli.main(argv) == 2
    assert "--out PATH" in capsys.readouterr().err


def test_positional_output_note_through_run(inputs, tmp_path, capsys):
    from skyconv.cli import smooth

    from _refs import run_cli

    argv, _ = inputs["smooth"]
    assert run_cli(smooth, [argv[0], argv[1], str(tmp_path / "o.fits"), *argv[2:], "-q"]) == 0
    assert f"write --out {tmp_path / 'o.fits'}" in capsys.readouterr().err


def test_exit_status_two_for_a_wrong_command_line(inputs, tmp_path, monkeypatch, capsys):
    out = str(tmp_path / "o.fits")
    with pytest.raises(SystemExit) as e:  # argparse: a required option is missing
        cli.main(["smooth", inputs["smooth"][0][1], "--out", out])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:  # argparse: not a device
        cli.main([*inputs["grid"][0], "--out", out, "--device", "tpu"])
    assert e.value.code == 2 and "--device must be 'auto'" in capsys.readouterr().err
    # a missing input file
    assert cli.main(["smooth", str(tmp_path / "nope.fits"), "--fwhm", "1deg", "--out", out]) == 2
    assert "nope.fits: no such file" in capsys.readouterr().err
    # a value skyconv refuses (ValueError)
    assert cli.main([*inputs["atrous"][0], "--out", out, "--snr", "-1", "--device", "cpu"]) == 2
    assert "skyconv atrous: error: " in capsys.readouterr().err
    # a missing column
    assert (
        cli.main(
            [
                "grid",
                str(tmp_path / "s.npz"),
                "--nside",
                "4",
                "--sigma",
                "1deg",
                "--data",
                "nope",
                "--out",
                out,
            ]
        )
        == 2
    )
    assert "no column 'nope'" in capsys.readouterr().err
    # a bad SKYCONV_DEVICE names the variable
    monkeypatch.setenv("SKYCONV_DEVICE", "gpu0")
    assert cli.main([*inputs["map2alm"][0], "--out", out]) == 2
    err = capsys.readouterr().err
    assert "gpu0" in err and "SKYCONV_DEVICE" in err
    assert not (tmp_path / "o.fits").exists()


@pytest.mark.parametrize("verb", VERBS)
def test_exit_status_one_for_a_malformed_input(verb, inputs, tmp_path, monkeypatch, capsys):
    argv, fn = inputs[verb]
    bad = tmp_path / ("bad.npz" if verb == "grid" else "bad.fits")
    bad.write_bytes(b"this is not a data file at all" * 200)
    _forbid(monkeypatch, fn)
    assert cli.main([argv[0], str(bad), *argv[2:], "--out", str(tmp_path / "o.fits")]) == 1
    err = capsys.readouterr().err
    assert f"skyconv {verb}: error: " in err and str(bad) in err


@pytest.mark.parametrize(
    "exc, status",
    [
        (MemoryError("asked for 64 GB"), 1),
        (skyconv.InternalError("an invariant broke"), 1),
        (RuntimeError("kernel launch failed"), 1),
        (skyconv.ShapeError("bad shape"), 2),
        (KeyboardInterrupt(), 130),
    ],
)
def test_exit_status_of_errors_while_running(exc, status, inputs, tmp_path, monkeypatch, capsys):
    def fail(*a, **k):
        raise exc

    monkeypatch.setattr(skyconv, "smooth_map", fail)
    argv, _ = inputs["smooth"]
    assert cli.main([*argv, "--out", str(tmp_path / "o.fits"), "--device", "cpu"]) == status
    err = capsys.readouterr().err
    assert "skyconv smooth: " in err
    assert not (tmp_path / "o.fits").exists()


@pytest.mark.skipif(skyconv.backend_info()["cuda"]["available"], reason="a GPU works here")
def test_no_gpu_is_a_runtime_error(inputs, tmp_path, capsys):
    argv, _ = inputs["map2alm"]
    assert cli.main([*argv, "--out", str(tmp_path / "o.fits"), "--device", "cuda"]) == 1
    assert "DeviceError" not in capsys.readouterr().err  # a skyconv error: no type name


def test_legacy_atrous_run_still_returns_the_status(inputs, tmp_path):
    import argparse

    from skyconv import _cli_atrous

    parser = argparse.ArgumentParser(prog="skyconv")
    _cli_atrous.add_parser(parser.add_subparsers(dest="command"))
    argv, _ = inputs["atrous"]
    args = parser.parse_args([*argv, "--out", str(tmp_path / "o.fits"), "--snr", "-1"])
    assert _cli_atrous.run(args) == 2


def test_info_out_and_python_dash_m(tmp_path, monkeypatch):
    out = tmp_path / "info.json"
    from skyconv.cli import _io

    def no_data_format(fmt):
        raise AssertionError(f"a JSON file was checked as {fmt}")

    monkeypatch.setattr(_io, "_need", no_data_format)
    assert cli.main(["info", "--out", str(out)]) == 0
    monkeypatch.undo()
    assert json.loads(out.read_text())["version"] == skyconv.__version__
    assert cli.main(["info", "--out", str(out)]) == 2  # exists
    r = subprocess.run([sys.executable, "-m", "skyconv", "info"], capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)["version"] == skyconv.__version__
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "skyconv",
            "smooth",
            str(tmp_path / "no.fits"),
            "--fwhm",
            "1deg",
            "--out",
            str(tmp_path / "o.fits"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "no such file" in r.stderr
    r = subprocess.run([sys.executable, "-m", "skyconv", "frobnicate"], capture_output=True)
    assert r.returncode == 2


def test_console_script_is_declared():
    from pathlib import Path

    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    target = pyproject["project"]["scripts"]["skyconv"]
    module, func = target.split(":")
    assert getattr(__import__(module, fromlist=[func]), func) is cli.main


def test_bare_numbers_say_their_unit(inputs, tmp_path, capsys):
    argv, _ = inputs["smooth"]
    argv = [a if a != "10deg" else "600" for a in argv]
    assert cli.main([*argv, "--out", str(tmp_path / "a.fits"), "--device", "cpu"]) == 0
    assert "--fwhm 600 read as 600 arcmin" in capsys.readouterr().err
    argv, _ = inputs["grid"]
    argv = [a if a != "10deg" else "10" for a in argv]
    assert cli.main([*argv, "--out", str(tmp_path / "b.fits"), "--device", "cpu"]) == 0
    assert "--sigma 10 read as 10 deg" in capsys.readouterr().err
    assert cli.main([*argv, "--out", str(tmp_path / "c.fits"), "--device", "cpu", "-q"]) == 0
    assert capsys.readouterr().err == ""
    got = hp.read_map(str(tmp_path / "b.fits"))
    np.testing.assert_array_equal(got, hp.read_map(str(tmp_path / "c.fits")))


@pytest.mark.parametrize("verb", VERBS)
def test_the_input_is_never_the_output(verb, inputs, monkeypatch, capsys):
    argv, fn = inputs[verb]
    _forbid(monkeypatch, fn)
    before = open(argv[1], "rb").read()
    assert cli.main([*argv, "--out", argv[1], "--overwrite"]) == 2
    assert "is the input" in capsys.readouterr().err
    assert open(argv[1], "rb").read() == before


#: The verbs whose work is one skyconv call without progress of its own (scfind and atrous
#: report their stages through their progress callbacks).
STAGE_VERBS = ("smooth", "alm2map", "map2alm", "grid")


@pytest.mark.parametrize("verb", STAGE_VERBS)
def test_a_long_stage_says_it_is_still_running(verb, inputs, tmp_path, monkeypatch, capsys):
    import time

    from skyconv.cli import _common

    argv, fn = inputs[verb]
    real = getattr(skyconv, fn)

    def slow(*a, **k):
        time.sleep(0.35)  # the GIL is free, as in the compiled core
        return real(*a, **k)

    monkeypatch.setattr(skyconv, fn, slow)
    monkeypatch.setattr(_common, "TICK", 0.1)
    assert cli.main([*argv, "--out", str(tmp_path / "a.fits"), "--device", "cpu"]) == 0
    lines = capsys.readouterr().err.splitlines()
    running = [i for i, line in enumerate(lines) if "still running" in line]
    assert len(running) >= 2, lines
    assert all(lines[i].startswith(f"{verb}: ") for i in running), lines
    # The stage's last line says it is done: "<verb>: <what>: N.NN s".
    after = [line for line in lines[running[-1] + 1 :] if line.startswith(f"{verb}: ")]
    assert after and after[0].endswith(" s") and "still running" not in after[0], lines
    assert cli.main([*argv, "--out", str(tmp_path / "b.fits"), "--device", "cpu", "-q"]) == 0
    assert capsys.readouterr().err == ""
