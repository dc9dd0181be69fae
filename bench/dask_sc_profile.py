"""Where the Dask S+C graph spends its time, kernel by kernel (issue 19).

    python bench/dask_sc_profile.py --size 0.15GB --workers 2          # 2 × 1 thread, processes
    python bench/dask_sc_profile.py --size 0.15GB --workers 2 --json out.json
    python bench/dask_sc_profile.py --size 0.15GB --workers 2 --smooth-twice   # session 10's graph

Runs ``skyconv.smooth_and_clip`` (SoFiA-2's 12 kernels, CPU engine) on a float32 zarr cube
(bench/dask_cube.py, chunks of ``--chunk-planes`` planes) on a LocalCluster of ``--workers``
one-thread worker processes, and prints per kernel (between two ``progress`` calls): the wall
time, the thread-seconds of each task kind (Distributed's task stream, by task name), the
seconds spent in transfers between workers and the bytes they moved (the workers' own
counters; at the end, by the task that made them), and the client's blocking calls
(``dask.compute``). Also the single call on the same cube in memory.
``--smooth-twice``: the clip smooths its block again instead of reading the W its sample call
kept (the graph before session 11, and the GPU workers' graph). ``--columns``: W kept, but the
spectral kernels through whole-z columns (the graph before session 12's z-slabs with a carry).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dask_cube import parse_size, shape_for, write_cube  # noqa: E402


def _bytes_in(dask_worker):
    """Bytes this worker has received from other workers so far."""
    st = getattr(dask_worker, "state", None)
    for obj, name in ((dask_worker, "transfer_incoming_bytes_total"),
                      (st, "transfer_incoming_bytes_total")):  # fmt: skip
        if obj is not None and hasattr(obj, name):
            return int(getattr(obj, name))
    log = getattr(dask_worker, "transfer_incoming_log", None) or []
    return int(sum(e.get("total", 0) for e in log))


def _bytes_by_kind(dask_worker):
    """{task name: bytes this worker received of that task's outputs}."""
    from dask.utils import key_split

    out = defaultdict(int)
    for e in getattr(dask_worker, "transfer_incoming_log", ()):
        for key, n in e.get("keys", {}).items():
            out[key_split(key)] += int(n or 0)
    return dict(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--size", default="0.15GB")
    p.add_argument("--planes", type=int, default=256)
    p.add_argument("--chunk-planes", type=int, default=32)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--path", default="/tmp/skyconv-sc-profile/cube.zarr")
    p.add_argument("--json", default=None)
    p.add_argument("--smooth-twice", action="store_true", help="no W kept for the clip")
    p.add_argument("--columns", action="store_true",
                   help="spectral kernels through whole-z columns (before session 12)")  # fmt: skip
    a = p.parse_args(argv)

    import dask
    import dask.array as da
    import distributed
    import zarr
    from dask.utils import key_split

    import skyconv
    from skyconv._dask import cube as dcube
    from skyconv._dask import device as ddev

    if a.smooth_twice:
        dcube._on_cpu = lambda device: False
    if a.columns:
        dcube.Z_SLABS = False

    shape = shape_for(parse_size(a.size), a.planes)
    chunks = (a.chunk_planes, *shape[1:])
    write_cube(a.path, shape, chunks)
    gb = np.prod(shape) * 4 / 1e9
    cube = zarr.open_array(a.path, mode="r")[...]
    t = time.perf_counter()
    want = skyconv.smooth_and_clip(cube, device="cpu")
    single = time.perf_counter() - t
    del cube
    print(f"cube {shape} float32 ({gb:.3f} GB), chunks {chunks}; single call "
          f"({os.cpu_count()} threads): {single:.2f} s", flush=True)  # fmt: skip

    blocking = defaultdict(int)
    compute0 = dask.compute

    def counted(*args, **kw):
        blocking["compute"] += 1
        return compute0(*args, **kw)

    marks = []
    with (
        distributed.LocalCluster(
            n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,  # fmt: skip
        distributed.Client(cluster) as client,
    ):
        client.run(skyconv.set_num_threads, 1)
        ddev.reset(client)
        b0 = sum(client.run(_bytes_in).values())
        dask.compute = counted
        try:
            with distributed.get_task_stream(client) as ts:
                t0 = time.time()
                marks.append(("start", t0, b0))

                def progress(done, total, rms):
                    marks.append((f"kernel {done}", time.time(),
                                  sum(client.run(_bytes_in).values())))  # fmt: skip

                mask = skyconv.smooth_and_clip(da.from_zarr(a.path), device="cpu",
                                               progress=progress)  # fmt: skip
                got = mask.compute()
                marks.append(("mask out", time.time(), sum(client.run(_bytes_in).values())))
                by_kind = defaultdict(int)
                for part in client.run(_bytes_by_kind).values():
                    for k, v in part.items():
                        by_kind[k] += v
        finally:
            dask.compute = compute0
        stream = ts.data
    wall = marks[-1][1] - marks[0][1]
    rows = []
    for (_, t_a, b_a), (label, t_b, b_b) in zip(marks, marks[1:]):
        kinds = defaultdict(float)
        for rec in stream:
            for ss in rec.get("startstops", ()):
                mid = 0.5 * (ss["start"] + ss["stop"])
                if t_a <= mid < t_b:
                    name = key_split(rec["key"]) if ss["action"] == "compute" else ss["action"]
                    kinds[name] += ss["stop"] - ss["start"]
        busy = sum(kinds.values())
        rows.append({"step": label, "wall_s": t_b - t_a, "bytes_in": b_b - b_a,
                     "busy_thread_s": busy, "kinds": dict(kinds)})  # fmt: skip
        top = ", ".join(f"{k} {v:.2f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:6])
        print(f"{label:>10}: {t_b - t_a:6.2f} s wall, {busy:6.2f} thread-s busy of "
              f"{a.workers * (t_b - t_a):6.2f}; {(b_b - b_a) / 1e6:7.1f} MB between workers; "
              f"{top}")  # fmt: skip
    same = bool(np.array_equal(got, want))
    moved = marks[-1][2] - marks[0][2]
    kinds_moved = dict(sorted(by_kind.items(), key=lambda kv: -kv[1]))
    print("bytes between workers by the task that made them (MB): "
          + ", ".join(f"{k} {v / 1e6:.1f}" for k, v in list(kinds_moved.items())[:10]))  # fmt: skip
    print(f"Dask ({a.workers} workers x 1 thread): {wall:.2f} s (ratio {wall / single:.2f}); "
          f"{moved / 1e9:.2f} GB between workers ({moved / (gb * 1e9):.1f}x the cube); client "
          f"blocking computes {blocking['compute']}; masks equal: {same}")  # fmt: skip
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"shape": shape, "chunks": chunks, "single_s": single, "dask_s": wall,
                       "bytes_between_workers": moved, "blocking_computes": blocking["compute"],
                       "masks_equal": same, "steps": rows, "bytes_by_task": kinds_moved},
                      f, indent=1)  # fmt: skip
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
