"""S+C and à trous on a zarr cube through Dask: 1 GPU worker vs 2 (one per GPU), throughput.

    python bench/dask_gpu.py                                     # nvidia-h100-x2, 4 GB
    python bench/dask_gpu.py --size 32GB --only sc --budget-s 3000   # the issue's size (> 10 min)
    python bench/dask_gpu.py --device cpu --size 0.2GB --workers 1,2 --threads 1   # smoke test

Writes (once: kept when it exists with the same shape and chunks; chunks generated and written
in parallel, uncompressed) a float32 zarr cube of ``--size`` on local disk (``--path``), then
measures the disk's read rate of its chunk files alone (O_DIRECT: not the page cache), then
for each worker count of ``--workers``: a cluster of that many worker processes, worker i
started with ``CUDA_VISIBLE_DEVICES=i`` (dask-cuda's ``LocalCUDACluster`` when importable,
unless ``--no-dask-cuda``; else distributed's SpecCluster of Nannies, which is what
LocalCUDACluster does for skyconv), runs ``skyconv.smooth_and_clip`` (SoFiA-2's defaults, mask
written to zarr) and ``skyconv.atrous_denoise`` (dim=3, result persisted then dropped) from the
zarr store with ``device=--device`` resolved by each task on its worker, and prints: time and
GB/s of cube processed, the device each Dask stage ran on (``skyconv._dask.device``), per
GPU its calls' time and the bytes S+C's block calls moved over PCIe, how many S+C kernels ran
as the z-slab pass (no transposition: ``skyconv._dask.cube._Noise.slabs``), each worker's peak
RSS, and where the workers' time went (Distributed's task stream: thread-seconds
in skyconv's stage calls, in Dask's copies/rechunks, in zarr reads, in transfers between
workers), from which it names the bound. Last: the N-vs-1 throughput ratio of each algorithm.

Time: one device call is 10 minutes. ``--budget-s`` (default 560) skips a run that the time
of the previous run of the same algorithm says would not finish in it; every result is also
written to ``--json`` as it comes, so a killed run keeps what it measured. The default size is
4 GB, not the issue's 32 GB: on the CPU machine the Dask S+C spent ~900 thread-s per GB outside
skyconv's core calls (NumPy clip and sample steps, rechunks; SoFiA-2's 12 kernels) and à trous
more, so by that estimate even S+C alone at 32 GB with 16 threads per worker takes longer than
one call (bench/NOTES.md). Threads per worker default to the cores / the largest worker count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dask_cube import parse_size, read_rate, shape_for, write_cube  # noqa: E402

#: Task names (dask.utils.key_split) of the NumPy steps around skyconv's core calls (on the CPU
#: whatever the device); the core calls' own seconds come from skyconv._dask.device.
NUMPY_TASKS = {"prepare_mask", "mask_bit", "absdev", "pick", "count", "block_counts", "values",
               "block_sum"}  # fmt: skip
#: Task-name prefixes of the à trous loop's element-wise block steps (skyconv._dask.atrous).
NUMPY_PREFIXES = ("atrous-",)
#: Task-name prefixes of zarr reads and writes.
IO_TASKS = ("from-zarr", "original-array", "store-map", "to-zarr", "load-store")


def gpu_count() -> int:
    import skyconv

    return int(skyconv.backend_info()["cuda"].get("device_count") or 0)


def cluster(n: int, threads: int, device: str, use_dask_cuda: bool, memory_limit: int):
    """A cluster of ``n`` workers (one GPU each unless ``device`` is "cpu") and its client."""
    import distributed

    gpus = gpu_count() if device != "cpu" else 0
    if gpus and use_dask_cuda and n <= gpus:
        try:
            from dask_cuda import LocalCUDACluster

            c = LocalCUDACluster(n_workers=n, CUDA_VISIBLE_DEVICES=list(range(n)),
                                 threads_per_worker=threads, memory_limit=memory_limit,
                                 dashboard_address=None)  # fmt: skip
            return c, distributed.Client(c), "dask_cuda.LocalCUDACluster"
        except ImportError:
            pass
    workers = {}
    for i in range(n):
        opts = {"nthreads": threads, "memory_limit": memory_limit}
        if gpus:
            if n > gpus:
                print(f"warning: {n} workers on {gpus} GPU(s): worker {i} gets GPU {i % gpus}")
            opts["env"] = {"CUDA_VISIBLE_DEVICES": str(i % gpus)}
        workers[i] = {"cls": distributed.Nanny, "options": opts}
    scheduler = {"cls": distributed.Scheduler, "options": {"dashboard_address": None}}
    c = distributed.SpecCluster(scheduler=scheduler, workers=workers)
    kind = "SpecCluster of Nannies" + (" + CUDA_VISIBLE_DEVICES=i" if gpus else " (CPU)")
    return c, distributed.Client(c), kind


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _worker_view():
    import skyconv

    c = skyconv.backend_info()["cuda"]
    return os.environ.get("CUDA_VISIBLE_DEVICES"), c.get("device_count"), c.get("device_name")


def breakdown(stream, core_s: float, waited_s: float = 0.0) -> dict:
    """Thread-seconds of a task stream by kind: skyconv's core calls (``core_s``, measured in
    the tasks: Dask fuses them with other steps; of it, ``waited_s`` the calls' threads spent
    waiting for their GPU while another call of the worker had it), NumPy steps, zarr I/O, the
    rest of the compute (Dask's copies, rechunks, reductions), transfers between workers; and
    the top task names."""
    from dask.utils import key_split

    kinds: dict = defaultdict(float)
    prefixes: dict = defaultdict(float)
    rest = 0.0
    for rec in stream:
        name = key_split(rec["key"])
        for ss in rec.get("startstops", ()):
            dt = ss["stop"] - ss["start"]
            action = ss.get("action")
            if action == "compute":
                prefixes[name] += dt
                if name in NUMPY_TASKS or name.startswith(NUMPY_PREFIXES):
                    kinds["NumPy steps (clip, sample, medians)"] += dt
                elif name.startswith(IO_TASKS):
                    kinds["zarr read/write"] += dt
                else:
                    rest += dt
            elif action == "transfer":
                kinds["transfers between workers"] += dt
            elif action in ("disk-read", "disk-write"):
                kinds["spill to disk"] += dt
    kinds["skyconv core calls"] = core_s - waited_s
    kinds["waiting for the worker's GPU"] = waited_s
    kinds["Dask copies, rechunks, reductions"] = max(rest - core_s, 0.0)
    # À trous's smoothing is fused into its NumPy coefficient tasks: count it once, as core.
    numpy_key = "NumPy steps (clip, sample, medians)"
    if core_s > rest and numpy_key in kinds:
        kinds[numpy_key] = max(kinds[numpy_key] - (core_s - rest), 0.0)
    top = dict(sorted(prefixes.items(), key=lambda kv: -kv[1])[:8])
    return {"kinds": dict(kinds), "top": top}


def bound_of(b: dict, wall: float, slots: int, gb: float, disk: dict, device: str,
             gpus: dict | None = None) -> str:  # fmt: skip
    """One sentence naming what bounds a run, from its breakdown and its GPUs' admitted time
    (a GPU admitted to calls for most of the wall bounds it)."""
    kinds = {k: v for k, v in b["kinds"].items() if k != "waiting for the worker's GPU"}
    if not kinds:
        return "unknown (no task stream)"
    name, secs = max(kinds.items(), key=lambda kv: kv[1])
    busiest = max((g["admitted_s"] for g in (gpus or {}).values()), default=0.0)
    if busiest > 0.8 * wall:
        name, secs = "the GPU (admitted to calls most of the time)", busiest
    busy = sum(v for k, v in kinds.items() if k != "transfers between workers")
    disk_s = gb / disk["gb_s"] if disk.get("gb_s") else float("nan")
    engine = "GPU" if device != "cpu" else "CPU engine"
    gpu_part = (f"; busiest GPU admitted {busiest:.1f} s of {wall:.1f} s "
                f"({100 * busiest / wall:.0f} %)" if gpus else "")  # fmt: skip
    return (
        f"{name} ({secs:.1f} thread-s{gpu_part}; compute busy {busy:.1f} of {slots} threads x "
        f"{wall:.1f} s = {slots * wall:.1f}); skyconv's {engine} calls "
        f"{kinds.get('skyconv core calls', 0.0):.1f} thread-s; one read of the cube from disk "
        f"would take {disk_s:.1f} s at {disk.get('gb_s', float('nan')):.2f} GB/s"
    )


def one_run(algo: str, n: int, client, a, gb: float, disk: dict) -> dict:
    """One timed run of ``algo`` ("sc" or "atrous") on ``client``'s ``n`` workers."""
    import dask.array as da
    import distributed

    import skyconv
    from skyconv._dask import cube as dcube
    from skyconv._dask import device as ddev

    ddev.reset(client)
    cube = da.from_zarr(a.path)
    slab_runs: list = []  # the kernels the client built as the z-slab pass
    slabs = dcube._Noise.slabs

    def counted(self, *args, **kw):
        slab_runs.append(1)
        return slabs(self, *args, **kw)

    dcube._Noise.slabs = counted
    kw = {"kernels_xy": a.kernels_xy, "kernels_z": a.kernels_z} if a.kernels_xy else {}
    with distributed.get_task_stream(client) as ts:
        t = time.perf_counter()
        if algo == "sc":
            mask, noise = skyconv.smooth_and_clip(cube, device=a.device, return_noise=True, **kw)
            mask.to_zarr(a.path + f".mask{n}.zarr", overwrite=True)
            info = f"rms0 {noise.rms0:.4g}, {len(noise.rms)} kernels"
        else:
            from skyconv._dask import atrous

            if not a.atrous_one_task:  # the staged loop over the workers, whatever the size
                atrous.SINGLE_TASK_BYTES = 0
                atrous.SINGLE_TASK_MEMORY_FRACTION = 0
            r = skyconv.atrous_denoise(cube, dim=3, device=a.device)
            info = f"{r.iterations} iterations, noise {r.noise:.4g}"
            del r
        dt = time.perf_counter() - t
    dcube._Noise.slabs = slabs
    gpus = ddev.gpu_time(client)
    moved = ddev.bytes_used(client)
    waited = sum(g["waited_s"] for g in gpus.values())
    b = breakdown(ts.data, sum(ddev.seconds_used(client).values()), waited)
    rss = sorted(client.run(_peak_rss).values())
    why = bound_of(b, dt, n * a.threads, gb, disk, a.device, gpus)
    print(f"{algo}: {dt:.1f} s, {gb / dt:.3g} GB/s ({info})")
    print("  devices: " + ddev.summary(client).replace("\n", "\n           "))
    for name, g in gpus.items():
        print(f"  {name}: {g['calls']} calls, admitted {g['admitted_s']:.1f} s of {dt:.1f} s "
              f"({100 * g['admitted_s'] / dt:.0f} %), their threads waited "
              f"{g['waited_s']:.1f} thread-s for it")  # fmt: skip
    for name, nb in moved.items():
        print(f"  {name}: {nb / 1e9:.1f} GB over PCIe in the S+C block calls "
              f"({nb / 1e9 / gb:.1f}x the cube; {nb / 1e9 / max(dt, 1e-9):.2f} GB/s over the "
              f"run)")  # fmt: skip
    if algo == "sc":
        print(f"  z-slab pass: {len(slab_runs)} of the {len(noise.rms)} kernels (SoFiA-2's "
              f"spectral running mean, no transposition); the rest by blocks")  # fmt: skip
    print("  peak RSS per worker (GB): " + ", ".join(f"{v / 1e9:.2f}" for v in rss))
    print("  thread-s: " + ", ".join(f"{k} {v:.1f}" for k, v in b["kinds"].items()))
    print("  top tasks: " + ", ".join(f"{k} {v:.1f}" for k, v in b["top"].items()))
    print(f"  bound: {why}", flush=True)
    return {"algo": algo, "workers": n, "seconds": dt, "gb_s": gb / dt,
            "devices": ddev.devices_used(client), "core_seconds": ddev.seconds_used(client),
            "peak_rss": rss, "breakdown": b, "gpu_time": gpus, "pcie_bytes": moved,
            "slab_kernels": len(slab_runs),
            "bound": why}  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="4GB", help="cube size, e.g. 32GB, 0.2GB")
    p.add_argument("--planes", type=int, default=512)
    p.add_argument("--chunk-planes", type=int, default=32)
    p.add_argument("--path", default="/tmp/skyconv-dask-gpu/cube.zarr")
    p.add_argument("--workers", default="1,2", help="worker counts to compare, e.g. 1,2")
    p.add_argument("--threads", type=int, default=None,
                   help="threads per worker (default: cores / largest worker count)")  # fmt: skip
    p.add_argument("--device", default="cuda")
    p.add_argument("--only", default="sc,atrous", help="sc, atrous or both (sc,atrous)")
    floats = lambda t: [float(v) for v in t.split(",")]  # noqa: E731
    p.add_argument("--kernels-xy", type=floats, default=None,
                   help="S+C spatial kernels (default SoFiA-2's 0,3,6)")  # fmt: skip
    p.add_argument("--kernels-z", type=floats, default=[0, 3, 7, 15],
                   help="S+C spectral kernels (used with --kernels-xy)")  # fmt: skip
    p.add_argument("--read-gb", type=float, default=8.0, help="GB read for the disk rate")
    p.add_argument("--budget-s", type=float, default=560.0)
    p.add_argument("--no-dask-cuda", action="store_true")
    p.add_argument("--atrous-one-task", action="store_true",
                   help="let à trous run a cube that fits a worker as one task (the "
                        "single call on one worker); default: the staged loop")  # fmt: skip
    p.add_argument("--single", action="store_true",
                   help="first time the single call on the whole cube in this process")  # fmt: skip
    p.add_argument("--slab-groups", type=int, default=None,
                   help="row groups of the S+C z-slab pass (skyconv._dask.cube.SLAB_GROUPS; "
                        "default: the graph's own, two a Dask thread)")  # fmt: skip
    p.add_argument("--gpu-slabs", action="store_true",
                   help="GPU workers take the S+C z-slab pass (skyconv._dask.cube.Z_SLABS_GPU; "
                        "default off: the column graph)")  # fmt: skip
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    from skyconv._dask import cube as dcube

    # the client builds the graph: set here
    if a.slab_groups is not None:
        dcube.SLAB_GROUPS = a.slab_groups
    dcube.Z_SLABS_GPU = a.gpu_slabs
    t_start = time.perf_counter()

    import numpy as np
    import psutil
    import zarr

    algos = [s for s in a.only.split(",") if s]
    counts = sorted({int(v) for v in a.workers.split(",") if v})
    a.threads = a.threads or max(1, (os.cpu_count() or 1) // max(counts))
    nbytes = parse_size(a.size)
    shape = shape_for(nbytes, a.planes)
    chunks = (min(a.chunk_planes, shape[0]), shape[1], shape[2])
    os.makedirs(os.path.dirname(os.path.abspath(a.path)), exist_ok=True)
    wt = write_cube(a.path, shape, chunks)
    gb = 4 * shape[0] * shape[1] * shape[2] / 1e9
    result: dict = {"shape": shape, "chunks": chunks, "gb": gb, "device": a.device,
                    "write_s": wt, "slab_groups": a.slab_groups, "gpu_slabs": a.gpu_slabs,
                    "runs": []}  # fmt: skip

    def save():
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f, indent=1, default=str)

    made = f"written in {wt:.1f} s, {gb / wt:.2f} GB/s" if wt else "kept"
    print(f"cube {shape} float32 = {gb:.2f} GB at {a.path}, chunks {chunks} ({made})", flush=True)
    disk = read_rate(a.path, limit=int(a.read_gb * 1e9))
    result["disk"] = disk
    print(f"disk read: {disk['gb_s']:.2f} GB/s ({disk['bytes'] / 1e9:.2f} GB, "
          f"{'O_DIRECT' if disk['direct'] else 'page cache possible'})", flush=True)  # fmt: skip
    save()
    if a.single:
        import skyconv

        for algo in algos:
            cube = np.asarray(zarr.open_array(a.path, mode="r")[...])
            t = time.perf_counter()
            if algo == "sc":
                skyconv.smooth_and_clip(cube, device=a.device)
            else:
                skyconv.atrous_denoise(cube, dim=3, device=a.device)
            result[f"{algo}_single_s"] = dt = time.perf_counter() - t
            print(f"{algo}: single call here {dt:.1f} s ({gb / dt:.3g} GB/s)", flush=True)
            del cube
        save()
    mem = int(0.8 * psutil.virtual_memory().total)
    last: dict = {}
    rates: dict = defaultdict(dict)
    for algo in algos:
        for n in counts:
            elapsed = time.perf_counter() - t_start
            guess = last.get(algo, 0.0)
            if elapsed + guess > a.budget_s:
                print(f"{algo}, {n} worker(s): skipped ({elapsed:.0f} s spent + ~{guess:.0f} s "
                      f"> --budget-s {a.budget_s:.0f})", flush=True)  # fmt: skip
                continue
            c, client, kind = cluster(n, a.threads, a.device, not a.no_dask_cuda, mem // n)
            with c, client:
                views = sorted(client.run(_worker_view).values(), key=str)
                print(f"== {algo}, {n} worker(s) x {a.threads} threads ({kind}): {views}",
                      flush=True)  # fmt: skip
                run = one_run(algo, n, client, a, gb, disk)
            run["cluster"] = kind
            last[algo] = run["seconds"]
            rates[algo][n] = run["gb_s"]
            result["runs"].append(run)
            save()
    lo, hi = counts[0], counts[-1]
    for algo, r in rates.items():
        if lo in r and hi in r and hi != lo:
            ratio = r[hi] / r[lo]
            result[f"{algo}_ratio"] = ratio
            print(f"{algo}: {hi} workers / {lo} worker throughput = {ratio:.2f}")
    save()
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
