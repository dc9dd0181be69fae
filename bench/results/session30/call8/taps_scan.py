"""Session 30 call 8 (issue 22): filters longer than WHOLE_MAX_TAPS (8), which take the phase
tiles today: every tile that fits timed along x and y (reflect, step 1) for 9-161 taps on
128×512² and 32×256×2048 float32, to see where the whole-axis tiles (x lines staged with their
halo since session 29; inner-axis whole tiles since session 28) now win.

    python3 bench/results/session30/call8/taps_scan.py
"""

import functools
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/../../../.."
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
from filters_tiles import module, run, tile_plan, timeit  # noqa: E402


def main():
    import cupy as cp

    mod = module(cp)
    rng = np.random.default_rng(1)
    for shape in ((128, 512, 512), (32, 256, 2048)):
        x = cp.asarray(rng.standard_normal(shape, dtype=np.float32))
        for ax in (2, 1):
            for taps in (9, 13, 21, 41, 81, 161):
                w = cp.asarray(rng.random(taps) / taps)
                off = -(taps // 2)
                call = functools.partial(run, cp, mod, x, ax, w, off, 1, "reflect", 0.0)
                (k, _), fits = tile_plan(shape, ax, taps, 1, np.float32)
                scan = []
                for kk, _ in fits:
                    ms = timeit(cp, functools.partial(call, kk), 10)
                    scan.append((ms, kk.removeprefix("correlate_")))
                best = min(scan)
                row = ", ".join(f"{n} {ms:.3f}" for ms, n in scan)
                print(
                    f"{shape} axis {ax} taps {taps:3d}: plan {k.removeprefix('correlate_')}"
                    f"; best {best[1]} {best[0]:.3f} | {row}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
