"""The console script: info and demo run on a fresh machine and agree with the references."""

from __future__ import annotations

import json
import subprocess
import sys

from skyconv import cli


def test_info_prints_json(capsys):
    assert cli.main(["info"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert "cuda" in info and "cpu_threads" in info


def test_demo_runs_and_agrees(capsys):
    assert cli.main(["demo", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "vs scipy.ndimage" in out
    from skyconv import _demo

    rows = _demo.run(["cpu"])
    assert rows and all(r.rel_err is None or r.rel_err < 1e-5 for r in rows)


def test_console_script_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "skyconv.cli", "info"], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout)["version"]


def test_bad_device_is_reported(capsys):
    import pytest

    with pytest.raises(SystemExit):
        cli.main(["demo", "--device", "tpu"])


def test_every_family_has_a_subcommand():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = {"info", "demo", "alm2map", "map2alm", "smooth", "grid", "scfind", "atrous"}
    assert names <= set(sub.choices)
