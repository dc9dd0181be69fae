"""Select cases, measure them, and merge the results into ``<out>/<machine>.json``."""

from __future__ import annotations

import fnmatch
import gc
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from . import machine
from .cases import load_all
from .harness import REGISTRY, Case, Context, Settings, measure_impl, rel_err

SCHEMA = 1


def select(patterns: str | None) -> list[Case]:
    """Cases whose name matches one of the comma-separated patterns (all when None).

    A pattern with ``*?[`` is a glob on the full name; otherwise it matches as a substring, so
    ``filters`` selects the family and ``gauss`` every Gaussian case.
    """
    load_all()
    cases = list(REGISTRY.values())
    if not patterns:
        return cases
    pats = [p.strip() for p in patterns.split(",") if p.strip()]

    def hit(name: str) -> bool:
        return any(
            fnmatch.fnmatchcase(name, p) if any(c in p for c in "*?[") else p in name for p in pats
        )

    return [c for c in cases if hit(c.name)]


def select_names(names: list[str]) -> list[Case]:
    """The cases named exactly, in that order; names no longer registered are left out."""
    load_all()
    return [REGISTRY[n] for n in names if n in REGISTRY]


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def _median(rec: dict[str, Any] | None, key: str) -> float | None:
    if not rec or rec.get("status") != "ok" or not rec.get(key):
        return None
    return rec[key]["median"]


def _describe_inputs(inputs: tuple) -> list[dict[str, Any]]:
    out = []
    for a in inputs:
        if isinstance(a, np.ndarray):
            out.append({"shape": list(a.shape), "dtype": str(a.dtype), "nbytes": a.nbytes})
        else:
            out.append({"value": repr(a)[:200]})
    return out


def _progress(case: str, engine: str, who: str, rec: dict[str, Any]) -> None:
    label = rec.get("label", "")
    if rec.get("status") == "ok":
        dev = _median(rec, "device_ms")
        msg = f"{_median(rec, 'e2e_ms'):.3f} ms" + (f" (device {dev:.3f} ms)" if dev else "")
        msg += f"  [n={rec['e2e_ms']['n']}]"
    else:
        msg = f"{rec.get('status')}: {rec.get('reason')}"
    print(f"  {case:<24} {engine:<4} {who:<8} {label:<22} {msg}", flush=True)


def run_case(
    case: Case, ctx: Context, settings: Settings, engines: set[str], rates: dict[str, Any]
) -> dict[str, Any]:
    """Measure every comparison of ``case`` on the selected engines; returns its record."""
    t0 = time.perf_counter()
    inputs = case.inputs(ctx)
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    work = case.work(inputs)
    rec: dict[str, Any] = {
        "name": case.name,
        "family": case.family,
        "description": case.description,
        "params": case.params,
        "inputs": _describe_inputs(inputs),
        "work": {
            "bytes": work.bytes,
            "flops": work.flops,
            "h2d_bytes": work.h2d_bytes,
            "d2h_bytes": work.d2h_bytes,
        },
        "comparisons": [],
    }
    cpu_anchor_ms = None
    for comp in case.comparisons:
        if comp.engine not in engines:
            continue
        anc_out, anc = measure_impl(comp.anchor, inputs, settings)
        _progress(case.name, comp.engine, "anchor", anc)
        sky_out, sky = measure_impl(comp.skyconv, inputs, settings)
        _progress(case.name, comp.engine, "skyconv", sky)
        err = rel_err(sky_out, anc_out) if sky_out is not None and anc_out is not None else None
        errs_ref = {}
        if case.reference is not None:
            ref_out = case.reference(inputs)
            for key, out in (("rel_err_ref", sky_out), ("anchor_rel_err_ref", anc_out)):
                errs_ref[key] = rel_err(out, ref_out) if out is not None else None
            del ref_out
        del sky_out, anc_out
        gc.collect()
        c = {
            "engine": comp.engine,
            "skyconv": sky,
            "anchor": anc,
            "ratio_e2e": _ratio(_median(anc, "e2e_ms"), _median(sky, "e2e_ms")),
            "ratio_device": _ratio(_median(anc, "device_ms"), _median(sky, "device_ms")),
            "rel_err": err,
            **errs_ref,
            "floor": machine.floors(work, comp.engine, rates),
        }
        if comp.engine == "cpu":
            cpu_anchor_ms = _median(anc, "e2e_ms")
        else:
            c["speedup_vs_cpu_anchor"] = _ratio(cpu_anchor_ms, _median(sky, "e2e_ms"))
            c["h2d_share"] = machine.h2d_share(work, _median(sky, "e2e_ms"), rates)
        rec["comparisons"].append(c)
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    rec["loadavg_1min"] = machine.loadavg()  # others' work on the machine skews the timings
    return rec


def _clean(x: Any) -> Any:
    """JSON-safe: NaN/inf become None, tuples lists, NumPy scalars Python numbers."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def merge(path: Path, doc: dict[str, Any], fresh: bool) -> dict[str, Any]:
    """``doc`` with the cases of an existing ``path`` that this run did not measure kept."""
    if fresh or not path.is_file():
        return doc
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return doc
    if old.get("schema") != SCHEMA:
        return doc
    new_names = {c["name"] for c in doc["cases"]}
    kept = [c for c in old.get("cases", []) if c.get("name") not in new_names]
    doc["cases"] = kept + doc["cases"]
    return doc


def run(
    patterns: str | None,
    quick: bool,
    machine_name: str | None,
    out_dir: Path,
    settings: Settings,
    engines: set[str],
    fresh: bool = False,
    threads: int | None = None,
    names: list[str] | None = None,
) -> tuple[dict[str, Any], Path, int]:
    """Run the selected cases; write ``<out_dir>/<machine>.json``; returns (doc, path, errors).

    ``names``, when given, are exact case names (``--compare``); ``patterns`` then narrows them.
    """
    from . import report

    if threads:
        import skyconv

        skyconv.set_num_threads(threads)
    cases = select(patterns)
    if names is not None:
        selected = {c.name for c in cases}
        cases = [c for c in select_names(names) if c.name in selected]
    if not cases:
        raise SystemExit(f"no benchmark case matches {patterns!r}; known: {sorted(REGISTRY)}")
    info = machine.backend_info()
    gpu = machine.gpu_name(info)
    name = machine_name or machine.default_machine_name(gpu)
    print(
        f"machine {name}: {machine.cpu_model()}, {machine.cpu_count()} CPUs, GPU: {gpu}", flush=True
    )
    rates = machine.measure_rates(quick, gpu, want_gpu="gpu" in engines)
    for k, v in rates.items():
        val = v["value"]
        shown = "-" if val is None else (f"{val / 1e9:.1f} G" + ("B/s" if "bw" in k else "flop/s"))
        print(f"  rate {k:<22} {shown:>14}  ({v['source']})", flush=True)
    ctx = Context(quick)
    run_meta = {
        "date": machine.host_facts()["date"],
        "commit": machine.git_commit(),
        "skyconv": (info.get("version") if isinstance(info, dict) else None),
        "quick": quick,
        "settings": settings.__dict__,
    }
    results = []
    for case in cases:
        print(f"{case.name}: {case.description}", flush=True)
        rec = run_case(case, ctx, settings, engines, rates)
        rec["run"] = run_meta
        results.append(rec)
    doc = {
        "schema": SCHEMA,
        "machine": name,
        "host": machine.host_facts(),
        "gpu": gpu,
        "backend_info": info,
        "versions": machine.versions(),
        "env": {
            k: v
            for k, v in os.environ.items()
            if k.startswith("SKYCONV_") or k in ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")
        },
        "rates": rates,
        "last_run": {**run_meta, "cases": [c.name for c in cases], "engines": sorted(engines)},
        "cases": results,
    }
    print()
    print(report.table(results))
    print()
    print(report.LEGEND)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    doc = _clean(merge(path, doc, fresh))
    path.write_text(json.dumps(doc, indent=1) + "\n")
    errors = sum(
        1
        for c in results
        for comp in c["comparisons"]
        for who in ("skyconv", "anchor")
        if comp[who].get("status") == "error"
    )
    print(f"\nwrote {path}" + (f"  ({errors} measurement(s) failed)" if errors else ""))
    return doc, path, errors
