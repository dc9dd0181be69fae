"""The benchmark harness runs end to end (quick sizes) and writes a well-formed JSON file.

Speed is not asserted: only that every measurement that ran has finite positive times, that
skipped ones say why, and that skyconv agrees with the anchor.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TOP_KEYS = {
    "schema",
    "machine",
    "host",
    "gpu",
    "backend_info",
    "versions",
    "rates",
    "last_run",
    "cases",
}
CASE_KEYS = {"name", "family", "description", "params", "inputs", "work", "comparisons", "run"}
COMP_KEYS = {"engine", "skyconv", "anchor", "ratio_e2e", "ratio_device", "rel_err", "floor"}
FILTER_CASES = {"filters.gauss_y", "filters.gauss_x", "filters.box_z", "filters.sc_kernel"}


def _pos(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _check_timing(stat: dict) -> None:
    assert stat["n"] >= 1 and len(stat["samples"]) == stat["n"]
    assert all(_pos(v) for v in stat["samples"])
    assert _pos(stat["median"]) and stat["min"] <= stat["median"] <= stat["max"]


def test_quick_filters_bench(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--cases",
            "filters",
            "--out",
            str(tmp_path),
            "--machine",
            "pytest",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "ratio" in proc.stdout  # the table was printed

    doc = json.loads((tmp_path / "pytest.json").read_text())
    assert TOP_KEYS <= doc.keys()
    assert doc["machine"] == "pytest"
    assert doc["host"]["cpu_count"] >= 1
    assert doc["versions"]["numpy"] and doc["versions"]["skyconv"]
    assert "cuda" in doc["backend_info"]
    assert _pos(doc["rates"]["host_bw"]["value"])
    assert {c["name"] for c in doc["cases"]} == FILTER_CASES

    for case in doc["cases"]:
        assert CASE_KEYS <= case.keys(), case.keys()
        assert _pos(case["work"]["bytes"]) and _pos(case["work"]["flops"])
        engines = {c["engine"] for c in case["comparisons"]}
        assert engines == {"cpu", "gpu"}
        for comp in case["comparisons"]:
            assert COMP_KEYS <= comp.keys(), comp.keys()
            for who in ("skyconv", "anchor"):
                rec = comp[who]
                assert rec["status"] in ("ok", "skipped"), rec
                if rec["status"] == "skipped":
                    assert rec["reason"]
                    continue
                _check_timing(rec["e2e_ms"])
                if comp["engine"] == "gpu":
                    _check_timing(rec["device_ms"])
            if comp["engine"] == "cpu":
                # scipy is a test dependency, so the CPU comparison always runs
                assert comp["skyconv"]["status"] == "ok" and comp["anchor"]["status"] == "ok"
                assert _pos(comp["ratio_e2e"])
                assert _pos(comp["floor"]["floor_ms"])
                assert comp["rel_err"] is not None and comp["rel_err"] < 1e-5
            else:
                assert "pcie_ms" in comp["floor"]
                if comp["skyconv"]["status"] == comp["anchor"]["status"] == "ok":
                    assert comp["rel_err"] is not None and comp["rel_err"] < 1e-5
