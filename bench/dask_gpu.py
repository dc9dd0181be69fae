"""S+C and à trous on a zarr cube through Dask: 1 GPU worker vs 2 (one per GPU), throughput.

    python bench/dask_gpu.py --size-gb 32 --path /tmp/cube.zarr            # nvidia-h100-x2
    python bench/dask_gpu.py --size-gb 0.5 --gpus 1 --device cpu           # a smoke test

Writes (once; kept when it exists with the same shape) a float32 zarr cube of ``--size-gb``
(noise plus Gaussian sources; ``--planes`` channels of a square map, chunks of
``--chunk-planes`` channels × the whole map) on local disk, then for 1 and for ``--gpus``
workers: a cluster of that many worker processes, each started with
``CUDA_VISIBLE_DEVICES=i`` — what dask-cuda's ``LocalCUDACluster`` does; it is used when
installed, unless ``--no-dask-cuda`` — runs ``skyconv.smooth_and_clip`` (SoFiA-2 defaults)
and ``skyconv.atrous_denoise`` (dim=3) from the zarr store with ``device=--device`` in each
task, and prints the time, GB/s of cube processed and the 2-vs-1 speed-up of each, and each
worker's peak RSS. S+C's mask goes to a zarr store; à trous's result is persisted on the
workers and then dropped. ``--only sc`` or ``--only atrous`` runs one of them.

What bounds it: the cube is read from disk once per S+C kernel stage and once for à trous's
start (page cache helps when it fits in RAM); each à trous scale moves the halo of its reach
between workers; every exact global median is one or two passes over the persisted arrays.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def make_cube(path: str, size_gb: float, planes: int, chunk_planes: int):
    """A float32 zarr cube of about ``size_gb`` (noise, and sources every ~64 pixels)."""
    import dask.array as da

    side = int(np.sqrt(size_gb * 1e9 / 4 / planes))
    shape = (planes, side, side)
    chunks = (chunk_planes, side, side)
    if os.path.exists(path):
        x = da.from_zarr(path)
        if x.shape == shape:
            return x
    rng = da.random.default_rng(3)
    noise = rng.standard_normal(shape, chunks=chunks, dtype=np.float32)

    def sources(block, block_info=None):
        (z0, _), (y0, _), (x0, _) = block_info[0]["array-location"]
        z, y, x = np.ogrid[z0 : z0 + block.shape[0], y0 : y0 + block.shape[1],
                           x0 : x0 + block.shape[2]]  # fmt: skip
        s = np.exp(-((z % 96 - 48) ** 2) / 50.0 - ((y % 64 - 32) ** 2 + (x % 64 - 32) ** 2) / 18.0)
        return block + (3.0 * s).astype(np.float32)

    cube = noise.map_blocks(sources, dtype=np.float32)
    cube.to_zarr(path, overwrite=True)
    return da.from_zarr(path)


def cluster(n: int, threads: int, use_dask_cuda: bool):
    """A cluster of ``n`` GPU workers (one GPU each) and its client."""
    import distributed

    if use_dask_cuda:
        try:
            from dask_cuda import LocalCUDACluster

            c = LocalCUDACluster(n_workers=n, CUDA_VISIBLE_DEVICES=list(range(n)),
                                 threads_per_worker=threads, dashboard_address=None)  # fmt: skip
            return c, distributed.Client(c), "dask_cuda.LocalCUDACluster"
        except ImportError:
            pass
    workers = {
        i: {
            "cls": distributed.Nanny,
            "options": {"nthreads": threads, "env": {"CUDA_VISIBLE_DEVICES": str(i)}},
        }
        for i in range(n)
    }
    scheduler = {"cls": distributed.Scheduler, "options": {"dashboard_address": None}}
    c = distributed.SpecCluster(scheduler=scheduler, workers=workers)
    return c, distributed.Client(c), "SpecCluster + CUDA_VISIBLE_DEVICES"


def _peak_rss():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _gpu_of_worker():
    import skyconv

    c = skyconv.backend_info()["cuda"]
    return os.environ.get("CUDA_VISIBLE_DEVICES"), c["device_name"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-gb", type=float, default=32.0)
    p.add_argument("--planes", type=int, default=512)
    p.add_argument("--chunk-planes", type=int, default=32)
    p.add_argument("--path", default="/tmp/skyconv-bench-cube.zarr")
    p.add_argument("--gpus", type=int, default=2, help="workers of the second run")
    p.add_argument("--threads", type=int, default=4, help="threads per worker")
    p.add_argument("--device", default="cuda")
    p.add_argument("--only", choices=["sc", "atrous"])
    p.add_argument("--no-dask-cuda", action="store_true")
    a = p.parse_args(argv)

    import skyconv

    t = time.perf_counter()
    cube = make_cube(a.path, a.size_gb, a.planes, a.chunk_planes)
    gb = cube.nbytes / 1e9
    print(f"cube {cube.shape} float32 = {gb:.2f} GB at {a.path}, chunks {cube.chunksize} "
          f"(ready in {time.perf_counter() - t:.1f} s)")  # fmt: skip
    rates: dict[str, dict[int, float]] = {"sc": {}, "atrous": {}}
    for n in sorted({1, a.gpus}):
        c, client, kind = cluster(n, a.threads, not a.no_dask_cuda)
        with c, client:
            print(f"== {n} worker(s) ({kind}): {sorted(client.run(_gpu_of_worker).values())}")
            if a.only in (None, "sc"):
                t = time.perf_counter()
                mask = skyconv.smooth_and_clip(cube, device=a.device)
                mask.to_zarr(a.path + f".mask{n}.zarr", overwrite=True)
                dt = time.perf_counter() - t
                rates["sc"][n] = gb / dt
                print(f"S+C: {dt:.1f} s, {gb / dt:.2f} GB/s")
            if a.only in (None, "atrous"):
                t = time.perf_counter()
                r = skyconv.atrous_denoise(cube, dim=3, device=a.device)
                dt = time.perf_counter() - t
                rates["atrous"][n] = gb / dt
                print(f"à trous: {dt:.1f} s, {gb / dt:.2f} GB/s, {r.iterations} iterations, "
                      f"noise {r.noise:.4g}")  # fmt: skip
                del r
            rss = client.run(_peak_rss)
            print("peak RSS per worker (GB):", ", ".join(f"{v / 1e9:.2f}" for v in rss.values()))
    if a.gpus != 1:
        for name, r in rates.items():
            if 1 in r and a.gpus in r:
                print(f"{name}: {a.gpus} workers / 1 worker throughput = {r[a.gpus] / r[1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
