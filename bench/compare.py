"""``python -m bench --compare FILE``: rerun a committed result's cases and print new/old.

The old file (``bench/results/<machine>.json``) names the cases and, per case, the engines
that were measured and whether the run was ``--quick``. They are measured again here with the
same settings; then, per case, engine and implementation (skyconv and the anchor), the ratio
``new / old`` of the median end-to-end time (and of the device time on GPU rows) is printed.

A ratio above ``1 + tolerance`` on skyconv's end-to-end time is marked ``REGRESSION``; below
``1 / (1 + tolerance)`` ``faster``. The anchor's own ratio is shown beside it: when the anchor
got slower by as much, the machine (load, clocks, another GPU) moved, not skyconv, and the row
says ``(anchor too)``. Timings from another machine compare hardware, not code: the header
says when the machine names differ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .report import fmt_ms

DEFAULT_TOLERANCE = 0.10


@dataclass(frozen=True)
class Plan:
    """What to rerun: case names (in the old file's order), engines, and the size setting."""

    cases: list[str]
    engines: set[str]
    quick: bool
    machine: str | None


@dataclass(frozen=True)
class Row:
    """One implementation of one case on one engine, old against new (milliseconds)."""

    case: str
    engine: str
    who: str  # "skyconv" or "anchor"
    label: str
    old_ms: float | None
    new_ms: float | None
    old_dev_ms: float | None
    new_dev_ms: float | None
    verdict: str  # "REGRESSION", "faster", "same", "new", "gone", "skipped", "error"

    @property
    def ratio(self) -> float | None:
        return _ratio(self.new_ms, self.old_ms)

    @property
    def dev_ratio(self) -> float | None:
        return _ratio(self.new_dev_ms, self.old_dev_ms)


def _ratio(new: float | None, old: float | None) -> float | None:
    if new is None or old is None or old <= 0:
        return None
    return new / old


def load(path: Path) -> dict[str, Any]:
    """The result document at ``path``; raises SystemExit with the reason when unusable."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise SystemExit(f"--compare: cannot read {path}: {e}") from e
    except ValueError as e:
        raise SystemExit(f"--compare: {path} is not JSON: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        raise SystemExit(f"--compare: {path} is not a bench result (no 'cases' list)")
    return doc


def _median(rec: dict[str, Any] | None, key: str) -> float | None:
    if not rec or rec.get("status") != "ok" or not rec.get(key):
        return None
    return float(rec[key]["median"])


def plan(doc: dict[str, Any]) -> Plan:
    """The cases, engines and size setting of an old result document.

    Only cases with at least one measured (``ok``) comparison are rerun. ``quick`` must be the
    same for all of them (a file mixes runs only through merges; compare one setting at once).
    """
    names: list[str] = []
    engines: set[str] = set()
    quick: set[bool] = set()
    for case in doc["cases"]:
        measured = [
            c["engine"]
            for c in case.get("comparisons", [])
            if any((c.get(w) or {}).get("status") == "ok" for w in ("skyconv", "anchor"))
        ]
        if not measured:
            continue
        names.append(case["name"])
        engines.update(measured)
        quick.add(bool((case.get("run") or {}).get("quick", False)))
    if not names:
        raise SystemExit("--compare: the file has no measured case to rerun")
    if len(quick) > 1:
        raise SystemExit(
            "--compare: the file mixes --quick and full-size cases; select one kind with --cases"
        )
    return Plan(names, engines, quick.pop(), doc.get("machine"))


def _index(doc: dict[str, Any], only: set[str] | None = None) -> dict[tuple[str, str], Any]:
    return {
        (case["name"], comp["engine"]): comp
        for case in doc.get("cases", [])
        if only is None or case["name"] in only
        for comp in case.get("comparisons", [])
    }


def _verdict(old: dict[str, Any], new: dict[str, Any], tolerance: float) -> str:
    if new.get("status") == "error":
        return "error"
    if new.get("status") != "ok" or old.get("status") != "ok":
        if old.get("status") == "ok":
            return "gone"
        return "new" if new.get("status") == "ok" else "skipped"
    r = _ratio(_median(new, "e2e_ms"), _median(old, "e2e_ms"))
    if r is None:
        return "skipped"
    if r > 1.0 + tolerance:
        return "REGRESSION"
    if r < 1.0 / (1.0 + tolerance):
        return "faster"
    return "same"


def compare(
    old_doc: dict[str, Any], new_doc: dict[str, Any], tolerance: float = DEFAULT_TOLERANCE
) -> list[Row]:
    """Rows for every (case, engine) measured in ``new_doc``'s last run.

    ``tolerance``: relative change of the end-to-end median below which a row is ``same``.
    Cases that ``new_doc`` only kept from an earlier run (a merged file) are left out.
    """
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")
    ran = (new_doc.get("last_run") or {}).get("cases")
    old_idx, rows = _index(old_doc), []
    for (name, engine), new_comp in _index(new_doc, set(ran) if ran else None).items():
        old_comp = old_idx.get((name, engine), {})
        for who in ("skyconv", "anchor"):
            new = new_comp.get(who) or {}
            old = old_comp.get(who) or {}
            rows.append(
                Row(
                    case=name,
                    engine=engine,
                    who=who,
                    label=str(new.get("label") or old.get("label") or ""),
                    old_ms=_median(old, "e2e_ms"),
                    new_ms=_median(new, "e2e_ms"),
                    old_dev_ms=_median(old, "device_ms"),
                    new_dev_ms=_median(new, "device_ms"),
                    verdict=_verdict(old, new, tolerance),
                )
            )
    return rows


def regressions(rows: list[Row]) -> list[Row]:
    """skyconv rows marked ``REGRESSION`` whose anchor did not slow down by as much."""
    anchors = {(r.case, r.engine): r for r in rows if r.who == "anchor"}
    out = []
    for r in rows:
        if r.who != "skyconv" or r.verdict != "REGRESSION":
            continue
        a = anchors.get((r.case, r.engine))
        if a is not None and a.ratio is not None and r.ratio is not None and a.ratio >= r.ratio:
            continue  # the machine moved as much as skyconv did
        out.append(r)
    return out


def _fmt_ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def table(rows: list[Row], old_machine: str | None = None, new_machine: str | None = None) -> str:
    """The comparison as text: one line per case and engine, skyconv then the anchor."""
    lines = []
    if old_machine and new_machine and old_machine != new_machine:
        lines.append(
            f"note: old results are from machine {old_machine!r}, new from {new_machine!r}: "
            "ratios compare machines as well as code"
        )
    head = (
        f"{'case':<28} {'eng':<4} {'sky old':>9} {'sky new':>9} {'new/old':>7} "
        f"{'dev n/o':>7} {'anc n/o':>7}  verdict"
    )
    lines += [head, "-" * len(head)]
    anchors = {(r.case, r.engine): r for r in rows if r.who == "anchor"}
    flagged = {(r.case, r.engine) for r in regressions(rows)}
    for r in rows:
        if r.who != "skyconv":
            continue
        a = anchors.get((r.case, r.engine))
        verdict = r.verdict
        if verdict == "REGRESSION" and (r.case, r.engine) not in flagged:
            verdict = "slower (anchor too)"
        elif verdict == "REGRESSION":
            verdict = "<<< REGRESSION"
        lines.append(
            f"{r.case:<28} {r.engine:<4} {fmt_ms(r.old_ms):>9} {fmt_ms(r.new_ms):>9} "
            f"{_fmt_ratio(r.ratio):>7} {_fmt_ratio(r.dev_ratio):>7} "
            f"{_fmt_ratio(a.ratio if a else None):>7}  {verdict}"
        )
    n = len(flagged)
    lines.append(
        f"{n} regression(s) beyond the tolerance" if n else "no regression beyond the tolerance"
    )
    return "\n".join(lines)
