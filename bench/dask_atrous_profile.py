"""Where a Dask à trous run (dim=3, one unit) spends its time, step by step.

    python bench/dask_atrous_profile.py --shape 64,192,192 --chunks 16,192,192 --workers 2

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
                                 processes=True, dashboard_address=None) as cl,
        distributed.Client(cl) as client,
    ):  # fmt: skip
        dx = da.from_array(x, chunks=chunks).persist()
        distributed.wait(dx)
        getattr(atrous, "PROFILE", {}).clear()  # (an older skyconv has no PROFILE)
        ddev.reset(client)
        with distributed.get_task_stream(client) as ts:
            t = time.perf_counter()
            got = skyconv.atrous_denoise(dx, dim=3, device=a.device)
            dt = time.perf_counter() - t
        steps = {k: dict(v) for k, v in getattr(atrous, "PROFILE", {}).items()}
        core = ddev.seconds_used(client)
        calls = ddev.devices_used(client)
        tasks = task_seconds(ts.data)
        diff = np.nanmax(np.abs(np.asarray(got.data) - want.data)) / np.nanmax(np.abs(want.data))
        diff = float(diff)
    print(f"dask: {dt:.2f} s ({dt / single:.1f}x the single call), {got.iterations} iterations, "
          f"max |dask - single| / max|single| = {diff:.2e}")  # fmt: skip
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
                       "core_s": core, "tasks": tasks}, f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
