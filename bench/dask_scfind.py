"""Smooth + Clip through Dask on a zarr cube vs the single call on the same data in memory.

    python bench/dask_scfind.py --workers 16 --size 8GB            # the 16-core GPU machine
    python bench/dask_scfind.py --workers 2 --size 0.05GB          # a smoke test on 2 cores
    python bench/dask_scfind.py --shape 500,1024,1024 --workers 16 [--chunks 50,512,512]
        [--kernels-xy 0,3,6 --kernels-z 0,3,7,15 --memory-limit 4GB --dir /tmp/dask_bench
         --repeats 1 --json out.json]

Writes a random float32 cube with sources (``--size``: ``--planes`` channels of a square map; or
``--shape``) to ``DIR/cube.zarr`` (kept between runs of the same shape and chunks; chunks
written in parallel, uncompressed; bench/dask_cube.py), times the single call (``device="cpu"``,
all cores) on the cube in memory, then the Dask run on a LocalCluster of N one-thread worker
processes (skyconv's CPU threads per worker: cores // N) reading the zarr cube and writing the
mask to zarr, and prints both times, their ratio (Dask / single; the issue's target is <= 1.2 on
16 cores for an 8 GB cube), whether the masks are equal, and the peak RSS of each worker: the
kernel's (ru_maxrss of the worker process) and Distributed's (the largest process memory in each
worker's SystemMonitor history), and the cluster's total (MemorySampler, every 0.1 s).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dask_cube import parse_size, shape_for, write_cube  # noqa: E402


def numbers(text, cast=int):
    return [cast(v) for v in text.replace(" ", "").split(",") if v]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--shape", type=numbers, default=None, help="z,y,x (default: from --size)")
    p.add_argument("--size", default="16MB", help="cube size when --shape is not given, e.g. 8GB")
    p.add_argument("--planes", type=int, default=512, help="channels of a --size cube")
    p.add_argument("--chunks", type=numbers, default=None)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--memory-limit", default="auto")
    p.add_argument("--kernels-xy", type=lambda t: numbers(t, float), default=[0, 3, 6])
    p.add_argument("--kernels-z", type=lambda t: numbers(t, float), default=[0, 3, 7, 15])
    p.add_argument("--dir", default="/tmp/skyconv_dask_bench")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)

    import dask.array as da
    import distributed
    import zarr
    from distributed.diagnostics import MemorySampler

    import skyconv
    from skyconv._dask import device as ddev

    shape = tuple(a.shape) if a.shape else shape_for(parse_size(a.size), a.planes)
    chunks = tuple(a.chunks) if a.chunks else (max(1, shape[0] // (2 * a.workers)), *shape[1:])
    os.makedirs(a.dir, exist_ok=True)
    src = os.path.join(a.dir, "cube.zarr")
    wt = write_cube(src, shape, chunks)
    made = f"written in {wt:.1f} s" if wt else "kept"
    print(f"cube {shape} float32 ({np.prod(shape) * 4 / 1e9:.2f} GB) chunks {chunks}: {made}")
    # both on the CPU engine (a GPU machine's workers would otherwise take its GPU: "auto")
    kw = {"kernels_xy": a.kernels_xy, "kernels_z": a.kernels_z, "device": "cpu"}

    cube = zarr.open_array(src, mode="r")[...]
    single = []
    for _ in range(a.repeats):
        t = time.perf_counter()
        want = skyconv.smooth_and_clip(cube, **kw)
        single.append(time.perf_counter() - t)
    del cube
    print(f"single call (in memory, {os.cpu_count()} cores): {min(single):.2f} s", flush=True)

    threads = max(1, (os.cpu_count() or 1) // a.workers)
    out = os.path.join(a.dir, "mask.zarr")
    dask_t = []
    with (
        distributed.LocalCluster(
            n_workers=a.workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=a.memory_limit,
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.run(skyconv.set_num_threads, threads)
        ddev.reset(client)
        ms = MemorySampler()
        for i in range(a.repeats):
            with ms.sample(f"run{i}", measure="process", interval=0.1):
                t = time.perf_counter()
                skyconv.smooth_and_clip(da.from_zarr(src), **kw).to_zarr(out, overwrite=True)
                dask_t.append(time.perf_counter() - t)
        rss = client.run(_peak_rss)
        print("devices of the Dask stages: " + ddev.summary(client).replace("\n", "; "))
        monitored = client.run(_monitor_peak)
    got = zarr.open_array(out, mode="r")[...]
    same = bool(np.array_equal(got, want))
    ratio = min(dask_t) / min(single)
    cluster_peak = max(max(v for _, v in s) for s in ms.samples.values()) / 2**20
    print(f"Dask ({a.workers} workers x 1 thread, {threads} skyconv threads each, zarr in "
          f"and out): {min(dask_t):.2f} s; ratio {ratio:.2f}; masks equal: {same}")  # fmt: skip
    print(f"peak RSS per worker (MiB): {sorted(round(v) for v in rss.values())} (ru_maxrss); "
          f"{sorted(round(v) for v in monitored.values())} (Distributed's monitor); "
          f"cluster total peak {cluster_peak:.0f} MiB")  # fmt: skip
    result = {
        "shape": shape,
        "chunks": chunks,
        "workers": a.workers,
        "threads_per_worker": threads,
        "single_s": single,
        "dask_s": dask_t,
        "ratio": ratio,
        "masks_equal": same,
        "peak_rss_mib": sorted(rss.values()),
        "monitor_peak_mib": sorted(monitored.values()),
        "cluster_peak_mib": cluster_peak,
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if same else 1


def _peak_rss():
    """This process's peak resident set size in MiB (Linux ru_maxrss is in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _monitor_peak(dask_worker):
    """The largest process memory (MiB) in this worker's SystemMonitor history (Distributed's
    worker memory metric, sampled every ~0.5 s)."""
    mem = dask_worker.monitor.quantities.get("memory") or [0]
    return max(mem) / 2**20


if __name__ == "__main__":
    sys.exit(main())
