"""First-call latency of the GPU engine in a fresh process, with a cold and a warm kernel cache.

    python bench/gpu/first_call.py [--repeats 3] [--json out.json]

For each call (smooth_map at nside 1024 with a 30' beam and at nside 2048 with 5', where
``method="auto"`` measures grid errors and the ring weights are solved; alm2map at nside 1024 /
lmax 2048; grid of 10^6 samples to nside 256; atrous_denoise of a 64^3 float64 cube;
gaussian_filter1d of a 64×256² float32 cube; smooth_and_clip of a 64×128² float32 cube with
SoFiA-2's default kernels), starts a new
interpreter that imports skyconv and times the first call on the GPU, then the second (steady
state), with SKYCONV_CACHE_DIR pointing at an empty folder (cold: NVRTC compiles the modules
the call needs, smoothing measures its cost model) and again at the filled folder (warm: the
CUBINs, the cost model, the fitted splits and the ring weights come from the cache). The issue's
target: warm first call <= steady state + 0.2 s. Prints one line a case and, with --json,
writes every number. Also reports which toolkit (CUDA 12 or 13) the loader chose.

Where the time goes: each child reads ``skyconv.setup_trace()`` (the core's set-up log: CUDA
library search and loads, driver init, context creation, kernel modules from the cache or
NVRTC, cuFFT plans, page-locked blocks, ring weights, and the smoothing layer's cost model,
split, ring error and grid errors), and the best warm run of each case is printed stage by
stage under its line, with what the stages leave unexplained (first - steady - stages: the
call's own first-touch costs, e.g. device memory pools and page faults). The "context" case
is the floor: import, then ``skyconv.warmup(modules=[], fft=False)`` (cuInit + the primary
context and nothing else).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CASES = {
    "smooth_map": (
        "m = np.random.default_rng(1).standard_normal(12 * 1024**2)\n"
        "call = lambda: skyconv.smooth_map(m, fwhm=np.radians(0.5), device='cuda')\n"
    ),
    "smooth_2048_5arcmin": (  # auto picks the ring method after measuring grid errors
        "m = np.random.default_rng(1).standard_normal(12 * 2048**2)\n"
        "call = lambda: skyconv.smooth_map(m, fwhm=np.radians(5 / 60), device='cuda')\n"
    ),
    "alm2map": (
        "lmax = 2048\n"
        "nalm = (lmax + 1) * (lmax + 2) // 2\n"
        "r = np.random.default_rng(1)\n"
        "a = r.standard_normal(nalm) + 1j * r.standard_normal(nalm)\n"
        "a[: lmax + 1] = a[: lmax + 1].real\n"
        "call = lambda: skyconv.alm2map(a, 1024, lmax=lmax, device='cuda')\n"
    ),
    "grid": (
        "r = np.random.default_rng(1)\n"
        "n = 10**6\n"
        "lon, lat = r.uniform(0, 360, n), np.degrees(np.arcsin(r.uniform(-1, 1, n)))\n"
        "v = r.standard_normal(n)\n"
        "call = lambda: skyconv.grid(lon, lat, v, skyconv.HealpixTarget(256), "
        "kernel_params=(0.1,), device='cuda')\n"
    ),
    "atrous_denoise": (
        "c = np.random.default_rng(1).standard_normal((64, 64, 64))\n"
        "call = lambda: skyconv.atrous_denoise(c, device='cuda')\n"
    ),
    "gaussian_filter1d": (  # a float32 cube: compiles the filters module's float32 half
        "c = np.random.default_rng(1).standard_normal((64, 256, 256)).astype(np.float32)\n"
        "call = lambda: skyconv.filters.gaussian_filter1d(c, 2.5, axis=1, device='cuda')\n"
    ),
    "smooth_and_clip": (  # SoFiA-2's 12 default kernels: compiles their register-ring boxcars
        "c = np.random.default_rng(1).standard_normal((64, 128, 128)).astype(np.float32)\n"
        "call = lambda: skyconv.smooth_and_clip(c, device='cuda')\n"
    ),
    "context": ("call = lambda: skyconv.warmup('cuda', modules=[], fft=False)\n"),
}

#: Stages that contain others (not added up: their parts are).
NESTED = {"smooth choice", "cuda libraries"}

CHILD = """
import json, time
t0 = time.perf_counter()
import numpy as np, skyconv
t_import = time.perf_counter() - t0
import_stages = skyconv.setup_trace(clear=True)
{setup}
skyconv.setup_trace(clear=True)
t = time.perf_counter(); call(); first = time.perf_counter() - t
stages = skyconv.setup_trace(clear=True)
steady = []
for _ in range(3):
    t = time.perf_counter(); call(); steady.append(time.perf_counter() - t)
later = skyconv.setup_trace(clear=True)
info = skyconv.backend_info()["cuda"]
print(json.dumps({{"import_s": t_import, "first_s": first, "steady_s": min(steady),
                  "toolkit": info["toolkit"], "nvrtc": info["nvrtc_version"],
                  "nvrtc_loaded": info.get("nvrtc_loaded"),
                  "cufft_loaded": info.get("cufft_loaded"),
                  "libraries_remembered": info.get("libraries_remembered"),
                  "import_stages": import_stages, "stages": stages, "later_stages": later}}))
"""


def top_level(stages: list[dict]) -> list[dict]:
    """The stages that add up (not the totals of nested ones; a library opened inside the
    library search is part of it)."""
    return [
        s
        for s in stages
        if s["stage"] not in NESTED
        and not (s["stage"] == "library open" and "remembered" not in s["detail"])
    ]


def breakdown(run: dict) -> list[str]:
    """Lines: each set-up stage of the first call (ms), then what is left unexplained."""
    lines = []
    for s in run.get("stages", []):
        mark = "" if s in top_level([s]) else "  (total of the stages it contains)"
        lines.append(f"    {s['stage']:18s} {s['seconds'] * 1e3:8.1f} ms  {s['detail']}{mark}")
    setup = sum(s["seconds"] for s in top_level(run.get("stages", [])))
    over = run["first_s"] - run["steady_s"]
    lines.append(
        f"    {'= set-up stages':18s} {setup * 1e3:8.1f} ms; first - steady - stages = "
        f"{(over - setup) * 1e3:.1f} ms (first touches not traced)"
    )
    if run.get("later_stages"):
        names = sorted({s["stage"] for s in run["later_stages"]})
        lines.append(f"    (steady calls still paid set-up stages: {', '.join(names)})")
    lines.append(
        f"    libraries: remembered {run.get('libraries_remembered')}, NVRTC loaded "
        f"{run.get('nvrtc_loaded')}, cuFFT loaded {run.get('cufft_loaded')}"
    )
    return lines


def run_child(case: str, cache: str, setup: str | None = None) -> dict:
    """One fresh interpreter running ``case`` (or the ``setup`` code given) with the cache
    folder ``cache``: its numbers and set-up stages."""
    env = dict(os.environ, SKYCONV_CACHE_DIR=cache)
    env.pop("SKYCONV_KERNEL_CACHE", None)
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(setup=setup or CASES[case])],
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def cost_constants(cache: str) -> dict:
    """The smoothing cost model's constants the cold run measured (``smooth_cost.json`` in the
    cache folder), by device key; {} when the case measured none."""
    try:
        with open(os.path.join(cache, "smooth_cost.json")) as f:
            return json.load(f).get("entries", {})
    except (OSError, ValueError):
        return {}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per warm case")
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated subset")
    p.add_argument("--json", help="write the numbers here")
    p.add_argument(
        "--device", default="cuda", help="device of every case (cpu: a dry run of the script)"
    )
    args = p.parse_args()
    results = {}
    for case in args.cases.split(","):
        with tempfile.TemporaryDirectory(prefix="skyconv-cache-") as cache:
            setup = CASES[case].replace("'cuda'", repr(args.device))
            cold = run_child(case, cache, setup)
            warm = [run_child(case, cache, setup) for _ in range(args.repeats)]
            constants = cost_constants(cache)
        results[case] = {"cold": cold, "warm": warm, "cost_constants": constants}
        if "error" in cold or any("error" in w for w in warm):
            print(f"{case:20s} failed: {cold.get('error') or warm}")
            continue
        w = min(warm, key=lambda r: r["first_s"])
        over = w["first_s"] - w["steady_s"]
        print(
            f"{case:20s} CUDA {cold['toolkit']} (NVRTC {cold['nvrtc']}): import "
            f"{w['import_s']:.2f} s; first call cold cache {cold['first_s']:.3f} s, "
            f"warm cache {w['first_s']:.3f} s; steady {w['steady_s'] * 1e3:.1f} ms; "
            f"warm - steady {over:.3f} s {'OK' if over <= 0.2 else 'OVER 0.2 s'}"
        )
        for line in breakdown(w):
            print(line)
        for key, entry in constants.items():  # to ship as defaults (no calibration at all)
            print(f"    cost model {key}: harmonic {entry['harmonic']}, ring {entry['ring']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
