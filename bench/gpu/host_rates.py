"""Host-side rates that bound end-to-end GPU calls from NumPy (run on the GPU machine).

    python bench/gpu/host_rates.py [--mib 400]

Prints the transparent-huge-page mode, the time to fault in a fresh array of that size, a
single-threaded NumPy copy into an already faulted array, and pinned/pageable host<->device
copies through CuPy when it is installed. These are the floors under the staging copies of
`backend::cuda::transfer`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def best(fn, repeats=5):
    """Fastest of `repeats` calls (s)."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=400)
    n = ap.parse_args().mib << 20
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    print("THP:", thp.read_text().strip() if thp.exists() else "n/a")
    gb = n / 1e9
    t = best(lambda: np.ones(n // 8))
    print(f"fresh array + fill ({gb:.2f} GB): {t * 1e3:.1f} ms ({gb / t:.1f} GB/s)")
    src, dst = np.ones(n // 8), np.zeros(n // 8)
    t = best(lambda: np.copyto(dst, src))
    print(f"np.copyto, faulted: {t * 1e3:.1f} ms ({gb / t:.1f} GB/s)")
    try:
        import cupy as cp
    except ImportError:
        return
    d = cp.empty(n // 8)
    pinned = cp.cuda.alloc_pinned_memory(n)
    ph = np.frombuffer(pinned, dtype=np.float64, count=n // 8)
    ph[:] = 1.0

    def timed(fn):
        def run():
            fn()
            cp.cuda.Device().synchronize()

        return best(run)

    for name, fn in [
        ("h2d pageable", lambda: d.set(src)),
        ("h2d pinned", lambda: d.set(ph)),
        ("d2h pageable", lambda: d.get(out=dst)),
        ("d2h pinned", lambda: d.get(out=ph)),
    ]:
        t = timed(fn)
        print(f"{name}: {t * 1e3:.1f} ms ({gb / t:.1f} GB/s)")


if __name__ == "__main__":
    main()
