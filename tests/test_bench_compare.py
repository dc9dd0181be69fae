"""``python -m bench --compare``: the comparison logic on fake result files (no timing asserted),
and one end-to-end rerun of a tiny quick case."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import compare  # noqa: E402


def _rec(ms, dev=None, status="ok", label="x"):
    if status != "ok":
        return {"status": status, "reason": "because", "label": label}
    r = {"status": "ok", "label": label, "e2e_ms": {"median": ms, "n": 3}}
    r["device_ms"] = {"median": dev, "n": 3} if dev is not None else None
    return r


def _doc(cases, machine="m1", quick=False):
    return {
        "schema": 1,
        "machine": machine,
        "last_run": {"cases": [c["name"] for c in cases]},
        "cases": [{**c, "run": {"quick": quick}} for c in cases],
    }


def _case(name, *comps):
    return {"name": name, "comparisons": list(comps)}


def _comp(engine, sky, anc):
    return {"engine": engine, "skyconv": sky, "anchor": anc}


OLD = _doc(
    [
        _case("f.a", _comp("cpu", _rec(100.0), _rec(1000.0))),
        _case(
            "f.b",
            _comp("cpu", _rec(100.0), _rec(1000.0)),
            _comp("gpu", _rec(10.0, 4.0), _rec(20.0)),
        ),
        _case("f.c", _comp("cpu", _rec(100.0), _rec(1000.0))),
        _case("f.d", _comp("cpu", _rec(100.0), _rec(1000.0))),
        _case("f.skip", _comp("gpu", _rec(0, status="skipped"), _rec(0, status="skipped"))),
    ]
)
NEW = _doc(
    [
        _case("f.a", _comp("cpu", _rec(125.0), _rec(1010.0))),  # skyconv 1.25x slower
        _case(
            "f.b", _comp("cpu", _rec(80.0), _rec(990.0)), _comp("gpu", _rec(10.5, 6.0), _rec(20.0))
        ),
        _case("f.c", _comp("cpu", _rec(130.0), _rec(1400.0))),  # both slower: the machine
        _case("f.d", _comp("cpu", _rec(0, status="error"), _rec(1000.0))),
    ],
    machine="m2",
)


def _rows_by(rows):
    return {(r.case, r.engine, r.who): r for r in rows}


def test_plan_takes_measured_cases_and_engines():
    p = compare.plan(OLD)
    assert p.cases == ["f.a", "f.b", "f.c", "f.d"]  # f.skip was never measured
    assert p.engines == {"cpu", "gpu"}
    assert p.quick is False and p.machine == "m1"


def test_plan_refuses_mixed_sizes_and_empty_files():
    mixed = _doc([_case("f.a", _comp("cpu", _rec(1.0), _rec(1.0)))])
    mixed["cases"].append(
        {**_case("f.b", _comp("cpu", _rec(1.0), _rec(1.0))), "run": {"quick": True}}
    )
    with pytest.raises(SystemExit, match="mixes"):
        compare.plan(mixed)
    with pytest.raises(SystemExit, match="no measured case"):
        compare.plan(_doc([]))


def test_ratios_and_verdicts():
    rows = _rows_by(compare.compare(OLD, NEW, tolerance=0.10))
    a = rows[("f.a", "cpu", "skyconv")]
    assert a.ratio == pytest.approx(1.25) and a.verdict == "REGRESSION"
    assert rows[("f.a", "cpu", "anchor")].ratio == pytest.approx(1.01)
    b = rows[("f.b", "cpu", "skyconv")]
    assert b.ratio == pytest.approx(0.8) and b.verdict == "faster"
    g = rows[("f.b", "gpu", "skyconv")]
    assert g.ratio == pytest.approx(1.05) and g.verdict == "same"
    assert g.dev_ratio == pytest.approx(1.5)  # device time is shown, the verdict is end to end
    assert rows[("f.d", "cpu", "skyconv")].verdict == "error"
    assert rows[("f.d", "cpu", "skyconv")].ratio is None
    # a wider tolerance turns f.a's 25% into "same"
    wide = _rows_by(compare.compare(OLD, NEW, tolerance=0.30))
    assert wide[("f.a", "cpu", "skyconv")].verdict == "same"


def test_regressions_discount_a_machine_that_slowed_down():
    rows = compare.compare(OLD, NEW)
    flagged = {(r.case, r.engine) for r in compare.regressions(rows)}
    # f.c: skyconv 1.30x but the anchor 1.40x -> not skyconv's doing
    assert flagged == {("f.a", "cpu")}


def test_table_marks_regressions_and_names_both_machines():
    text = compare.table(compare.compare(OLD, NEW), "m1", "m2")
    lines = {ln.split()[0] + " " + ln.split()[1]: ln for ln in text.splitlines()[3:-1]}
    assert "REGRESSION" in lines["f.a cpu"] and "1.25" in lines["f.a cpu"]
    assert "faster" in lines["f.b cpu"] and "0.80" in lines["f.b cpu"]
    assert "anchor too" in lines["f.c cpu"] and "REGRESSION" not in lines["f.c cpu"]
    assert "error" in lines["f.d cpu"]
    assert "'m1'" in text and "'m2'" in text
    assert text.splitlines()[-1] == "1 regression(s) beyond the tolerance"


def test_cases_only_kept_by_a_merge_are_not_compared():
    new = json.loads(json.dumps(NEW))
    new["last_run"]["cases"] = ["f.b"]
    assert {r.case for r in compare.compare(OLD, new)} == {"f.b"}


def test_bad_tolerance_and_bad_files(tmp_path):
    with pytest.raises(ValueError, match="tolerance"):
        compare.compare(OLD, NEW, tolerance=-0.1)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SystemExit, match="not JSON"):
        compare.load(tmp_path / "bad.json")
    (tmp_path / "nocases.json").write_text("{}")
    with pytest.raises(SystemExit, match="no 'cases'"):
        compare.load(tmp_path / "nocases.json")
    with pytest.raises(SystemExit, match="cannot read"):
        compare.load(tmp_path / "missing.json")


def test_compare_cli_reruns_the_files_cases(tmp_path):
    """A quick result with one fake-timed case: the CLI reruns exactly it and prints the table.

    The old timing is absurdly large so the verdict is "faster" on any machine.
    """
    old = _doc(
        [_case("filters.box_z", _comp("cpu", _rec(1e9, label="skyconv"), _rec(1e9)))],
        machine="fake",
        quick=True,
    )
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--compare", str(path), "--repeats", "1", "--strict"],
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "compared with" in proc.stdout
    out = proc.stdout.split("compared with")[1]
    row = [ln for ln in out.splitlines() if ln.startswith("filters.box_z") and " cpu " in ln]
    assert len(row) == 1 and row[0].rstrip().endswith("faster"), out[-3000:]
    assert "filters.gauss" not in out  # only the file's case
    assert not list((REPO / "bench" / "results").glob("fake*.json"))  # nothing committed
