"""The printed table (one row per case and engine) and its legend."""

from __future__ import annotations

from typing import Any

COLUMNS = [
    ("case", "<"),
    ("eng", "<"),
    ("anchor", "<"),
    ("anchor ms", ">"),
    ("skyconv ms", ">"),
    ("ratio", ">"),
    ("anc dev", ">"),
    ("sky dev", ">"),
    ("dev ratio", ">"),
    ("floor", ">"),
    ("pcie", ">"),
    ("h2d %", ">"),
    ("vs cpu", ">"),
    ("rel err", ">"),
]

LEGEND = """\
anchor ms / skyconv ms: end to end from NumPy (median wall clock, warm-up excluded; GPU rows
  include the transfers). ratio = anchor / skyconv (> 1: skyconv is faster).
anc dev / sky dev: GPU time on the device alone (cupy: CUDA events on device-resident input;
  skyconv: last_profile() stages other than h2d/d2h). dev ratio = anc dev / sky dev.
floor: max(bytes / bandwidth, flops / float64 rate) for the engine (host memory and CPU
  rate on cpu rows, HBM and GPU rate on gpu rows). pcie: inputs up + outputs down at the
  pinned rate. h2d %: input bytes / end to end, as a share of the measured pinned H2D rate
  (and in the JSON of the pageable one, h2d_share). vs cpu: CPU anchor's time / skyconv GPU
  end to end.
rel err: max |skyconv - anchor| / max |anchor| (masks: fraction of voxels that differ)."""


def fmt_ms(v: float | None) -> str:
    """Milliseconds with about three significant digits, '-' for None."""
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    if v >= 0.01:
        return f"{v:.3f}"
    return f"{v:.2g}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def fmt_ratio(v: float | None) -> str:
    """e.g. '1.84x', '-' for None."""
    if v is None:
        return "-"
    return f"{v:.3g}x"


def _median(rec: dict[str, Any] | None, key: str) -> float | None:
    if not rec or rec.get("status") != "ok" or not rec.get(key):
        return None
    return rec[key]["median"]


def _short_status(rec: dict[str, Any] | None) -> str:
    if not rec:
        return "-"
    return {"skipped": "skip", "error": "ERROR"}.get(rec.get("status", ""), "-")


def rows(cases: list[dict[str, Any]]) -> list[list[str]]:
    """Table rows for the cases' comparisons."""
    out = []
    for case in cases:
        for comp in case["comparisons"]:
            sky, anc = comp["skyconv"], comp["anchor"]
            floor = comp.get("floor", {})
            anchor_ms = _median(anc, "e2e_ms")
            sky_ms = _median(sky, "e2e_ms")
            err = comp.get("rel_err")
            out.append(
                [
                    case["name"],
                    comp["engine"],
                    anc.get("label", "-") if anc else "-",
                    fmt_ms(anchor_ms) if anchor_ms is not None else _short_status(anc),
                    fmt_ms(sky_ms) if sky_ms is not None else _short_status(sky),
                    fmt_ratio(comp.get("ratio_e2e")),
                    fmt_ms(_median(anc, "device_ms")),
                    fmt_ms(_median(sky, "device_ms")),
                    fmt_ratio(comp.get("ratio_device")),
                    fmt_ms(floor.get("floor_ms")),
                    fmt_ms(floor.get("pcie_ms")),
                    _pct((comp.get("h2d_share") or {}).get("of_pinned")),
                    fmt_ratio(comp.get("speedup_vs_cpu_anchor")),
                    "-" if err is None else f"{err:.1e}",
                ]
            )
    return out


def table(cases: list[dict[str, Any]]) -> str:
    """The formatted table followed by the skip/error reasons."""
    body = rows(cases)
    head = [c for c, _ in COLUMNS]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(r):
        return "  ".join(f"{v:{al}{w}}" for v, (_, al), w in zip(r, COLUMNS, widths)).rstrip()

    lines = [line(head), line(["-" * w for w in widths])] + [line(r) for r in body]
    notes = []
    for case in cases:
        for comp in case["comparisons"]:
            for who in ("skyconv", "anchor"):
                rec = comp[who]
                if rec and rec.get("status") in ("skipped", "error"):
                    notes.append(
                        f"  {case['name']} [{comp['engine']}] {who} "
                        f"{rec.get('label', '')}: {rec['status']}: {rec.get('reason')}"
                    )
    if notes:
        lines += ["", "not measured:"] + sorted(set(notes))
    return "\n".join(lines)
