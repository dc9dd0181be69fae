"""bench/gpu/first_call.py's per-stage breakdown, run on the CPU engine (the GPU run uses the
same child code and report): a fresh interpreter's first call lists its set-up stages, and the
report adds up the stages that do not contain others."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu" / "first_call.py"


def _module():
    spec = importlib.util.spec_from_file_location("first_call", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_child_reports_the_first_calls_stages(tmp_path):
    fc = _module()
    setup = (
        "m = np.ones(12 * 16**2)\n"
        "call = lambda: skyconv.smooth_map(m, fwhm=0.2, method='ring', device='cpu')\n"
    )
    run = fc.run_child("", str(tmp_path), setup=setup)
    assert "error" not in run, run
    assert run["first_s"] > 0 and run["steady_s"] > 0
    weights = [s for s in run["stages"] if s["stage"] == "ring weights"]
    assert [s["detail"] for s in weights] == ["nside 16 (solved)"]
    assert run["later_stages"] == []  # steady calls pay no set-up again
    lines = fc.breakdown(run)
    assert any("ring weights" in x for x in lines)
    assert "first - steady - stages" in lines[-3] or "first - steady - stages" in lines[-2]


def test_nested_stages_are_not_added_twice():
    fc = _module()
    stages = [
        {"stage": "library open", "detail": "NVRTC /x (first search)", "seconds": 0.04},
        {"stage": "cuda libraries", "detail": "search", "seconds": 0.05},
        {"stage": "library open", "detail": "cuFFT /y (remembered choice)", "seconds": 0.07},
        {"stage": "smooth split", "detail": "nside 8", "seconds": 0.01},
        {"stage": "smooth choice", "detail": "total", "seconds": 0.02},
        {"stage": "context", "detail": "cuda:0", "seconds": 0.2},
    ]
    top = fc.top_level(stages)
    assert [s["stage"] for s in top] == ["library open", "smooth split", "context"]
    run = {"first_s": 0.5, "steady_s": 0.1, "stages": stages, "later_stages": []}
    summary = fc.breakdown(run)[len(stages)]
    assert "280.0 ms" in summary and "= 120.0 ms" in summary
