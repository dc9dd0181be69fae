"""Where the time of a GPU gridding call goes, for the benchmark's cases (bench/cases/grid.py).

Per case: the end-to-end time of ``skyconv.grid`` (median of a few calls after a warm-up), the
host-side pieces before the core call (target pixel centres from astropy, sample checks), and
the device stages of the last call (``skyconv.last_profile()``: h2d, plan = device lookup,
kernel = gathers, finish = division and cast, d2h). Run once with the staging buffers and once
with ``SKYCONV_PIN_HOST=1`` (the caller's arrays page-locked instead). Input bytes / e2e is the
rate the spectral target is stated in (>= 50% of the 54 GB/s pinned host-to-device rate).

Usage (GPU machine): bash bench/gpu/run.sh cmd python3 bench/gpu/profile_grid.py [--cases
cont_1e7,spec] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import skyconv  # noqa: E402
from bench.cases import grid as g  # noqa: E402
from skyconv.grid import prepare_samples, resolve_target  # noqa: E402

CASES = {
    "cont_1e6": (10**6, 1),
    "cont_1e7": (10**7, 1),
    "cont_1e8": (10**8, 1),
    "spec": (2 * 10**5, 1024),
}


def timed(f, repeats):
    f()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out), min(out)


def grid_call(lons, lats, data, hdr, device):
    return skyconv.grid(
        lons, lats, data, hdr, kernel_params=g.SIGMA, sphere_radius=g.RADIUS, device=device
    )


def page_locked_row(lons, lats, data, hdr, in_bytes, repeats):
    """The same call with the data rows already in page-locked memory (cupyx.empty_pinned):
    they go up by one DMA, so this is the rate against the pinned host-to-device rate, which
    is measured here too. A pageable NumPy array can only be copied out at ~20 GB/s."""
    try:
        import cupy as cp
        import cupyx
    except ImportError:
        return
    rows = cupyx.empty_pinned(data.shape, dtype=data.dtype)
    rows[...] = data
    dev = cp.empty(data.shape, dtype=data.dtype)

    def h2d():
        dev.set(rows)
        cp.cuda.Device().synchronize()

    _, best = timed(h2d, repeats)
    rate = data.nbytes / best / 1e6
    med, _ = timed(lambda: grid_call(lons, lats, rows, hdr, "cuda"), repeats)
    got = in_bytes / med / 1e6
    print(
        f"  page-locked rows: e2e median {med:.1f} ms, input rate {got:.1f} GB/s = "
        f"{got / rate:.0%} of the pinned H2D rate ({rate:.1f} GB/s, cupy, same rows)"
    )


def profile(name, hdr, repeats):
    n, nchan = CASES[name]
    lons, lats, data = g.samples(n, nchan)
    in_bytes = lons.nbytes + lats.nbytes + data.nbytes
    print(f"\n== {name}: {n} samples x {nchan} channels, {in_bytes / 1e9:.3f} GB in")
    ms, _ = timed(lambda: resolve_target(hdr), repeats)
    print(f"  resolve_target (astropy pixel centres): {ms:.1f} ms")
    ms, _ = timed(lambda: prepare_samples(lons, lats, data, None), repeats)
    print(f"  prepare_samples: {ms:.2f} ms")
    for pin in ("0", "1"):
        os.environ["SKYCONV_PIN_HOST"] = pin
        med, best = timed(lambda: grid_call(lons, lats, data, hdr, "cuda"), repeats)
        prof = skyconv.last_profile()
        stages = ", ".join(f"{k} {v:.2f}" for k, v in prof.items())
        print(
            f"  SKYCONV_PIN_HOST={pin}: e2e median {med:.1f} ms (best {best:.1f}), "
            f"input rate {in_bytes / med / 1e6:.1f} GB/s"
        )
        print(f"    last_profile (ms): {stages}")
        res = grid_call(lons, lats, data, hdr, "cuda")
        kind = "one map" if res._weights.shape != res.cube.shape else "per channel"
        print(f"    weights came down as {kind} {res._weights.shape}")
    os.environ.pop("SKYCONV_PIN_HOST", None)
    page_locked_row(lons, lats, data, hdr, in_bytes, repeats)
    if n <= 10**7:
        cpu, _ = timed(lambda: grid_call(lons, lats, data, hdr, "cpu"), 1)
        a = grid_call(lons, lats, data, hdr, "cuda").cube
        b = grid_call(lons, lats, data, hdr, "cpu").cube
        diff = np.nanmax(np.abs(a.astype(np.float64) - b)) / np.nanmax(np.abs(b))
        print(
            f"  cpu e2e {cpu:.1f} ms; GPU vs CPU cube max |diff| / max |cpu| = {diff:.1e}, "
            f"NaN positions equal: {np.array_equal(np.isnan(a), np.isnan(b))}"
        )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="cont_1e6,cont_1e7,spec")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    print(skyconv.backend_info()["cuda"].get("device_name"), "threads", skyconv.get_num_threads())
    hdr = g.header()
    for name in args.cases.split(","):
        profile(name, hdr, args.repeats)


if __name__ == "__main__":
    main()
