"""Smooth + Clip through Dask on a zarr cube vs the single call on the same data in memory.

    python bench/dask_scfind.py --workers 16 --cores 16 --size 8.39GB --planes 2000  # issue 19
    python bench/dask_scfind.py --workers 16 --size 8GB            # the 16-core GPU machine
    python bench/dask_scfind.py --workers 1 --dask-threads 16 --size 8GB   # one 16-thread worker
    python bench/dask_scfind.py --workers 2 --size 2MB --planes 32  # a smoke test on 2 cores
    python bench/dask_scfind.py --shape 500,1024,1024 --workers 16 [--chunks 50,512,512]
        [--kernels-xy 0,3,6 --kernels-z 0,3,7,15 --memory-limit 4GB --dir /tmp/dask_bench
         --scratch DIR --repeats 1 --json out.json]
    python bench/dask_scfind.py --small [--shape 18,30,28 --chunks 6,12,10 --workers 2]

Out of core at the issue's scale (a 1 GB cube, 2 workers x 400 MB, the default 12 kernels;
the cube is >= 30 % of the cluster's memory, so the kernels exchange planes and columns
through a scratch zarr store in --scratch, default DIR):

    python bench/dask_scfind.py --shape 250,1024,1024 --chunks 4,1024,1024 --workers 2 \
        --memory-limit 400MB

``--small``: the overhead on a tiny cube (in memory, no zarr): the single call, the staged
Dask graph (every kernel's stages, rechunks and noise reductions as tasks: the behaviour
before the one-task path) and the default (a cube that is one chunk or at most
``skyconv._dask.cube.SINGLE_TASK_BYTES`` runs as the single call in one task).

Writes a random float32 cube with a few sources to ``DIR/cube.zarr`` (kept between runs of
the same shape and chunks), times the single call (``device="cpu"``, all cores, or the first
``--cores`` of them: the whole benchmark, workers included, runs on those) on the cube in
memory, then the Dask run on a LocalCluster of N worker processes of ``--dask-threads`` threads
each (default 1; skyconv's CPU threads per worker: cores // N) reading the zarr cube and
writing the mask to zarr, and
prints both times, their ratio (Dask / single; the issue's target is <= 1.2 on 16 cores for an
8 GB cube), whether the masks are equal, and the peak RSS of each worker (sampled every
0.1 s by Distributed's MemorySampler on the workers' processes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dask_cube import parse_size, shape_for, write_cube  # noqa: E402


def numbers(text, cast=int):
    return [cast(v) for v in text.replace(" ", "").split(",") if v]


def make_cube(path, shape, chunks, seed=1):
    import zarr

    if os.path.exists(path):
        z = zarr.open_array(path, mode="r")
        if tuple(z.shape) == tuple(shape) and tuple(z.chunks) == tuple(chunks):
            return
        shutil.rmtree(path)
    rng = np.random.default_rng(seed)
    z = zarr.open_array(path, mode="w", shape=shape, chunks=chunks, dtype=np.float32)
    nz, ny, nx = shape
    for z0 in range(0, nz, chunks[0]):
        blk = rng.standard_normal((min(chunks[0], nz - z0), ny, nx), dtype=np.float32)
        for k in range(8):  # a few extended sources
            y, x = (k * 97) % max(ny - 20, 1), (k * 211) % max(nx - 20, 1)
            blk[:, y : y + 12, x : x + 12] += 0.8
        z[z0 : z0 + blk.shape[0]] = blk


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--shape", type=numbers, default=[64, 256, 256])
    p.add_argument("--size", default=None, help="e.g. 8GB: --planes channels of a square map "
                   "(instead of --shape), written in parallel (bench/dask_cube.py)")  # fmt: skip
    p.add_argument("--planes", type=int, default=512, help="channels of a --size cube")
    p.add_argument("--chunks", type=numbers, default=None)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--cores", type=int, default=None,
                   help="run everything (the single call, scheduler, workers) on the first N "
                        "of this machine's CPUs (default: all)")  # fmt: skip
    p.add_argument("--dask-threads", type=int, default=1, help="Dask threads per worker")
    p.add_argument("--memory-limit", default="auto")
    p.add_argument("--kernels-xy", type=lambda t: numbers(t, float), default=[0, 3, 6])
    p.add_argument("--kernels-z", type=lambda t: numbers(t, float), default=[0, 3, 7, 15])
    p.add_argument("--dir", default="/tmp/skyconv_dask_bench")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--json", default=None)
    p.add_argument("--scratch", default=None, help="directory of the out-of-core store")
    p.add_argument("--small", action="store_true", help="the tiny-cube overhead case")
    p.add_argument("--groups", type=int, default=None,
                   help="row groups a slab in the slab pass (skyconv._dask.cube.SLAB_GROUPS; "
                   "default: from the cluster)")  # fmt: skip
    a = p.parse_args(argv)
    if a.small:
        return small(a)

    import dask.array as da
    import distributed
    import zarr
    from distributed.diagnostics import MemorySampler

    import skyconv
    from skyconv._dask import cube as dcube
    from skyconv._dask import device as ddev

    if a.groups is not None:
        dcube.SLAB_GROUPS = a.groups

    if a.cores:  # one machine of N cores: the workers (spawned later) inherit it
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: a.cores])
    cores = len(os.sched_getaffinity(0))
    skyconv.set_num_threads(cores)
    shape = tuple(a.shape) if a.size is None else shape_for(parse_size(a.size), a.planes)
    slots = a.workers * a.dask_threads  # two slabs a Dask thread
    default = (max(1, -(-shape[0] // (8 if a.size is None else 2 * slots))), *shape[1:])
    chunks = tuple(a.chunks) if a.chunks else default
    os.makedirs(a.dir, exist_ok=True)
    src = os.path.join(a.dir, "cube.zarr")
    t = time.perf_counter()
    if a.size is None:
        make_cube(src, shape, chunks)
    else:
        write_cube(src, shape, chunks)
    print(f"cube {shape} float32 ({np.prod(shape) * 4 / 1e9:.2f} GB) chunks {chunks}: "
          f"ready in {time.perf_counter() - t:.1f} s", flush=True)  # fmt: skip
    # both on the CPU engine (a GPU machine's workers would otherwise take its GPU: "auto")
    kw = {"kernels_xy": a.kernels_xy, "kernels_z": a.kernels_z, "device": "cpu"}

    cube = zarr.open_array(src, mode="r")[...]
    single = []
    for _ in range(a.repeats):
        t = time.perf_counter()
        want = skyconv.smooth_and_clip(cube, **kw)
        single.append(time.perf_counter() - t)
    del cube
    print(f"single call (in memory, {cores} cores): {min(single):.2f} s", flush=True)

    threads = max(1, cores // a.workers)
    out = os.path.join(a.dir, "mask.zarr")
    dask_t = []
    with (
        distributed.LocalCluster(
            n_workers=a.workers,
            threads_per_worker=a.dask_threads,
            processes=True,
            memory_limit=a.memory_limit,
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.run(skyconv.set_num_threads, threads)
        client.run(_start_rss_sampler)
        ddev.reset(client)
        ms = MemorySampler()
        for i in range(a.repeats):
            with ms.sample(f"run{i}", measure="process", interval=0.1):
                t = time.perf_counter()
                mask = skyconv.smooth_and_clip(da.from_zarr(src), scratch=a.scratch or a.dir, **kw)
                mask.to_zarr(out, overwrite=True)
                del mask
                dask_t.append(time.perf_counter() - t)
        rss = client.run(_peak_rss)
        print("devices of the Dask stages: " + ddev.summary(client).replace("\n", "; "))
    got = zarr.open_array(out, mode="r")[...]
    same = bool(np.array_equal(got, want))
    ratio = min(dask_t) / min(single)
    cluster_peak = max(max(v for _, v in s) for s in ms.samples.values()) / 2**20
    print(f"Dask ({a.workers} workers x {a.dask_threads} threads, {threads} skyconv threads each, "
          f"zarr in "
          f"and out): {min(dask_t):.2f} s; ratio {ratio:.2f}; masks equal: {same}")  # fmt: skip
    print(f"peak RSS per worker (MiB): {sorted(round(v) for v in rss.values())}; "
          f"cluster total peak {cluster_peak:.0f} MiB")  # fmt: skip
    result = {
        "shape": shape,
        "chunks": chunks,
        "workers": a.workers,
        "dask_threads_per_worker": a.dask_threads,
        "slab_groups": a.groups,
        "threads_per_worker": threads,
        "cores": cores,
        "single_s": single,
        "dask_s": dask_t,
        "ratio": ratio,
        "masks_equal": same,
        "peak_rss_mib": sorted(rss.values()),
        "cluster_peak_mib": cluster_peak,
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if same else 1


def small(a):
    """The overhead of the Dask path on a tiny in-memory cube, staged vs one task."""
    import dask.array as da
    import distributed

    import skyconv
    from skyconv._dask import cube as dcube

    shape = tuple(a.shape) if a.shape != [64, 256, 256] else (18, 30, 28)
    chunks = tuple(a.chunks) if a.chunks else (6, 12, 10)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    x[shape[0] // 3 : shape[0] // 2, 5:14, 7:12] += 2.5
    kw = {"kernels_xy": a.kernels_xy, "kernels_z": a.kernels_z, "threshold": 4.0}
    times = {}
    t = time.perf_counter()
    want = skyconv.smooth_and_clip(x, device="cpu", **kw)
    times["single"] = time.perf_counter() - t
    dx = da.from_array(x, chunks=chunks)
    with (
        distributed.LocalCluster(
            n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        same = True
        for label, limit in (("staged", 0), ("one_task", None)):
            saved = dcube.SINGLE_TASK_BYTES
            dcube.SINGLE_TASK_BYTES = saved if limit is None else limit
            try:
                best = np.inf
                for _ in range(max(1, a.repeats)):
                    t = time.perf_counter()
                    got = skyconv.smooth_and_clip(dx, **kw).compute()
                    best = min(best, time.perf_counter() - t)
                times[label] = best
                same &= bool(np.array_equal(got, want))
            finally:
                dcube.SINGLE_TASK_BYTES = saved
    print(f"tiny cube {shape} chunks {chunks}, {len(a.kernels_xy) * len(a.kernels_z)} kernels, "
          f"{a.workers} workers: single {times['single']:.3f} s, Dask staged "
          f"{times['staged']:.2f} s ({times['staged'] / times['single']:.0f}x), Dask one task "
          f"{times['one_task']:.2f} s ({times['one_task'] / times['single']:.0f}x); "
          f"masks equal: {same}")  # fmt: skip
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"shape": shape, "chunks": chunks, "seconds": times, "same": same}, f)
    return 0 if same else 1


def _start_rss_sampler(dask_worker):
    """Sample this worker's RSS every 10 ms in a thread. (ru_maxrss cannot be used: Linux
    carries the parent's peak, here the benchmark's in-memory cube, into a spawned child.)"""
    import threading

    import psutil

    proc = psutil.Process()
    dask_worker.skyconv_peak_rss = proc.memory_info().rss

    def loop():
        while True:
            rss = proc.memory_info().rss
            dask_worker.skyconv_peak_rss = max(dask_worker.skyconv_peak_rss, rss)
            time.sleep(0.01)

    threading.Thread(target=loop, daemon=True).start()


def _peak_rss(dask_worker):
    """The sampled peak resident set size of this worker in MiB."""
    return dask_worker.skyconv_peak_rss / 2**20


if __name__ == "__main__":
    sys.exit(main())
