"""Times Cygrid in its own interpreter (Cygrid 2.0.4 needs numpy<2), for bench/cases/grid.py.

Usage: python _cygrid_worker.py INPUT.npz OUTPUT.npy THREADS WARMUP REPEATS MIN_TIME BUDGET
INPUT.npz holds lons, lats, data, header_json, sigma, radius. Prints one JSON line:
{"e2e": [ms, ...], "cygrid": version, "numpy": version}. The cube of the first call goes to
OUTPUT.npy. A call is WcsGrid + set_kernel + grid + get_datacube, timed with perf_counter.
"""

import json
import sys
import time

import numpy as np


def main():
    src, out, threads, warmup, repeats, min_time, budget = sys.argv[1:8]
    threads, warmup, repeats = int(threads), int(warmup), int(repeats)
    min_time, budget = float(min_time), float(budget)
    import cygrid

    z = np.load(src)
    lons, lats, data = z["lons"], z["lats"], z["data"]
    header = json.loads(str(z["header_json"]))
    sigma, radius = float(z["sigma"]), float(z["radius"])

    def call():
        g = cygrid.WcsGrid(header)
        g.set_num_threads(threads)
        g.set_kernel("gauss1d", (sigma,), radius, sigma / 2)
        g.grid(lons, lats, data)
        with np.errstate(invalid="ignore", divide="ignore"):
            return g.get_datacube()

    samples = []
    first = None
    t_start = time.perf_counter()
    for _ in range(max(1, warmup)):
        t0 = time.perf_counter()
        cube = call()
        dt = time.perf_counter() - t0
        if first is None:
            first = cube
        if dt > budget / 2:  # too slow to repeat: the warm-up call is the sample
            samples.append(dt * 1e3)
            break
    t0 = time.perf_counter()
    while not samples or len(samples) < repeats or time.perf_counter() - t0 < min_time:
        if samples and time.perf_counter() - t_start > budget:
            break
        t1 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t1) * 1e3)
    np.save(out, np.asarray(first))
    print(json.dumps({"e2e": samples, "cygrid": cygrid.__version__, "numpy": np.__version__}))


if __name__ == "__main__":
    main()
