"""Where a Dask à trous run (dim=3, one unit) spends its time, step by step.

    python bench/dask_atrous_profile.py --shape 64,192,192 --chunks 16,192,192 --workers 2

Also samples the cluster's memory (Distributed's ``MemorySampler``, every 50 ms): the peak of
Dask's managed memory (the arrays held) in cube sizes, and of the workers' summed RSS.

Runs ``skyconv.atrous_denoise`` on a dask array (in memory, the bench cube of
``bench/dask_cube.py``) on a LocalCluster of ``--workers`` processes × ``--threads`` threads,
with the one-unit loop's steps timed on the client (the staged loop unless ``--one-task``:
``skyconv._dask.atrous`` wraps each step in ``_step``: the wall seconds of each step and the
number of scheduler round trips it made) and
the workers' thread-seconds per task name from Distributed's task stream. Prints the single
call's time on the same cube (this process, ``SKYCONV_NUM_THREADS`` threads) beside the Dask
time, the result's largest difference, and writes everything to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def cube(shape, seed=3):
    """The bench cube (noise and sources every ~64 pixels), float32, in memory."""
    import numpy as np
    from dask_cube import _chunk

    _, blk = _chunk(shape, shape, (0, 0, 0), seed)
    return np.ascontiguousarray(blk, dtype=np.float32)


def _start_held_sampler(dask_worker):
    """Every 20 ms: the bytes of the distinct NumPy buffers the worker holds as Dask data (a
    tuple result and the items taken from it share buffers: counted once), of the arrays of 2
    or more axes (the cube's blocks: not the 512 KiB key counts of each block's first
    selection pass, which match a block's size on a test cube); keeps the peak."""
    import threading

    import numpy as np

    dask_worker._skyconv_held_peak = 0

    def bases(v, seen):
        if isinstance(v, np.ndarray) and v.ndim >= 2:
            while isinstance(v.base, np.ndarray):
                v = v.base
            seen[id(v)] = v.nbytes
        elif isinstance(v, (tuple, list)):
            for e in v:
                bases(e, seen)

    def loop():
        while not getattr(dask_worker, "_skyconv_held_stop", False):
            seen: dict = {}
            try:
                for v in list(dask_worker.data.values()):
                    bases(v, seen)
            except Exception:  # the dict changed under us: take the next sample
                pass
            peak = max(dask_worker._skyconv_held_peak, sum(seen.values()))
            dask_worker._skyconv_held_peak = peak
            time.sleep(0.02)

    threading.Thread(target=loop, daemon=True).start()


def _held_peak(dask_worker):
    dask_worker._skyconv_held_stop = True
    return dask_worker._skyconv_held_peak


def task_seconds(stream) -> dict:
    from dask.utils import key_split

    out: dict = defaultdict(float)
    for rec in stream:
        name = key_split(rec["key"])
        for ss in rec.get("startstops", ()):
            kind = ss.get("action")
            label = name if kind == "compute" else f"<{kind}>"
            out[label] += ss["stop"] - ss["start"]
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="64,192,192")
    p.add_argument("--chunks", default="16,192,192")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--one-task", action="store_true",
                   help="let a small cube run as one task (default: the staged loop)")  # fmt: skip
    p.add_argument("--memory-limit", default="auto",
                   help="each worker's memory_limit (e.g. 60MB)")  # fmt: skip
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    shape = tuple(int(v) for v in a.shape.split(","))
    chunks = tuple(int(v) for v in a.chunks.split(","))

    import dask.array as da
    import distributed
    import numpy as np

    import skyconv
    from skyconv._dask import atrous
    from skyconv._dask import device as ddev

    if not a.one_task:
        atrous.SINGLE_TASK_BYTES = 0
        atrous.SINGLE_TASK_MEMORY_FRACTION = 0
    x = cube(shape)
    t = time.perf_counter()
    want = skyconv.atrous_denoise(x, dim=3, device=a.device)
    single = time.perf_counter() - t
    print(f"cube {shape} float32 ({x.nbytes / 1e6:.1f} MB), chunks {chunks}; single call "
          f"{single:.2f} s, {want.iterations} iterations, {want.scales} scales",
          flush=True)  # fmt: skip
    with (
        distributed.LocalCluster(n_workers=a.workers, threads_per_worker=a.threads,
                                 processes=True, dashboard_address=None,
                                 memory_limit=a.memory_limit) as cl,
        distributed.Client(cl) as client,
    ):  # fmt: skip
        dx = da.from_array(x, chunks=chunks).persist()
        distributed.wait(dx)
        getattr(atrous, "PROFILE", {}).clear()  # (an older skyconv has no PROFILE)
        ddev.reset(client)
        from distributed.diagnostics import MemorySampler

        ms = MemorySampler()
        client.run(_start_held_sampler)
        with (
            distributed.get_task_stream(client) as ts,
            ms.sample("managed", measure="managed", interval=0.05),
            ms.sample("process", measure="process", interval=0.05),
        ):
            t = time.perf_counter()
            got = skyconv.atrous_denoise(dx, dim=3, device=a.device)
            dt = time.perf_counter() - t
        # Peak bytes the cluster held: managed (Dask's data: the arrays and blocks kept) and
        # process (the workers' RSS summed); the input (persisted before) is in both.
        peaks = {k: float(max(v for _, v in ms.samples[k])) for k in ("managed", "process")}
        held = client.run(_held_peak)
        peaks["held_per_worker"] = sorted(held.values())
        peaks["held"] = float(sum(held.values()))
        steps = {k: dict(v) for k, v in getattr(atrous, "PROFILE", {}).items()}
        core = ddev.seconds_used(client)
        calls = ddev.devices_used(client)
        tasks = task_seconds(ts.data)
        diff = np.nanmax(np.abs(np.asarray(got.data) - want.data)) / np.nanmax(np.abs(want.data))
        diff = float(diff)
    print(f"dask: {dt:.2f} s ({dt / single:.1f}x the single call), {got.iterations} iterations, "
          f"max |dask - single| / max|single| = {diff:.2e}")  # fmt: skip
    print(
        f"peak distinct bytes held as Dask data, summed over the workers' peaks: "
        f"{peaks['held'] / 1e6:.1f} MB = {peaks['held'] / x.nbytes:.2f} cube sizes "
        f"(per worker {[round(v / 1e6, 1) for v in peaks['held_per_worker']]} MB)"
    )
    print(f"peak cluster memory: managed {peaks['managed'] / 1e6:.1f} MB = "
          f"{peaks['managed'] / x.nbytes:.2f} cube sizes; workers' RSS summed "
          f"{peaks['process'] / 1e6:.1f} MB")  # fmt: skip
    print("client-side steps (wall s, round trips):")
    for k, v in sorted(steps.items(), key=lambda kv: -kv[1]["seconds"]):
        print(f"  {k:28s} {v['seconds']:7.2f} s  {v['calls']:4d} calls  {v['trips']:4d} trips")
    print("skyconv core calls in the tasks (thread-s): "
          + ", ".join(f"{k} {v:.2f}" for k, v in core.items()) + f"; calls {calls}")  # fmt: skip
    print("worker thread-s by task name:")
    for k, v in list(tasks.items())[:16]:
        print(f"  {k:40s} {v:7.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"shape": shape, "chunks": chunks, "workers": a.workers,
                       "threads": a.threads, "single_s": single, "dask_s": dt,
                       "iterations": got.iterations, "max_rel_diff": diff, "steps": steps,
                       "core_s": core, "tasks": tasks, "peak_bytes": peaks,
                       "cube_bytes": x.nbytes, "memory_limit": a.memory_limit},
                      f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
