"""Where the Dask S+C graph spends its time, kernel by kernel (issue 19).

    python bench/dask_sc_profile.py --size 0.15GB --workers 2          # 2 × 1 thread, processes
    python bench/dask_sc_profile.py --size 0.3GB --workers 1 --threads 2   # 1 × 2 threads
    python bench/dask_sc_profile.py --size 0.1GB --graphs chain,wave --repeats 3 --json out.json

Runs ``skyconv.smooth_and_clip`` (SoFiA-2's 12 kernels, CPU engine) on a float32 zarr cube
(bench/dask_cube.py, chunks of ``--chunk-planes`` planes) on a LocalCluster of ``--workers``
worker processes of ``--threads`` Dask threads each (skyconv's pool on a worker: the same count),
and prints per kernel (between two ``progress`` calls): the wall
time, the thread-seconds of each task kind (Distributed's task stream, by task name), the
seconds spent in transfers between workers and the bytes they moved (the workers' own
counters; at the end, by the task that made them), the client's blocking calls
(``dask.compute``), the graphs the client sent the scheduler (round trips) with their new tasks,
and the tasks that ran, by kind (the graph's per-task cost bounds the run: bench/NOTES.md,
session 13). Also the single call on the same cube in memory, once per repeat.
``--graphs`` (run alternately, ``--repeats`` times each, on the same cluster): ``wave`` (the
default graph: z-slabs in contiguous runs over the workers, the slab pass as a wavefront of
row-group chains), ``chain`` (session 12's: one chain of whole planes, the slabs where the
scheduler put them), ``contiguous`` (one chain, the slabs in contiguous runs), ``columns``
(W kept, the spectral kernels through whole-z columns: before session 12), ``twice`` (the
clip smooths its block again instead of reading the kept W: before session 11, and the GPU
workers' graph), ``wait`` (the client reads each kernel's noise before it builds the next:
before session 19), ``all`` (every kernel's graph sent before any noise is read), ``rebuild``
(the slab pass's spatial stage from the cube, every plane every kernel: before session 15's
dasks). Per step also the phases (each task kind's first start, last stop, thread-s) and the
seconds no task ran on any worker; per kernel's noise (its global barrier) the gaps to its
clip and to the next kernel's first task.
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


def _cpu_s(dask_worker):
    """CPU seconds (user + system) of this worker's process so far: every thread of it,
    skyconv's pool included (a task's stream time counts one Dask thread)."""
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system


def _worker_counters(dask_worker):
    return _bytes_in(dask_worker), _cpu_s(dask_worker)


def _counters(client):
    """(bytes the workers received from each other, their processes' CPU seconds) so far."""
    got = client.run(_worker_counters)
    return sum(b for b, _ in got.values()), sum(c for _, c in got.values())


def _bytes_by_kind(dask_worker):
    """{task name: bytes this worker received of that task's outputs}."""
    from dask.utils import key_split

    out = defaultdict(int)
    for e in getattr(dask_worker, "transfer_incoming_log", ()):
        for key, n in e.get("keys", {}).items():
            out[key_split(key)] += int(n or 0)
    return dict(out)


class GraphLog:
    """A scheduler plugin that logs each graph the client sends: (time, new tasks by kind)."""

    name = "skyconv-graph-log"

    def __init__(self):
        self.log = []

    def update_graph(self, scheduler, *, tasks=(), **kw):
        from dask.utils import key_split

        kinds = defaultdict(int)
        for key in tasks:
            kinds[key_split(key)] += 1
        self.log.append((time.time(), dict(kinds)))


def _graph_log(dask_scheduler, clear=False):
    plugin = dask_scheduler.plugins[GraphLog.name]
    out = list(plugin.log)
    if clear:
        plugin.log.clear()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--size", default="0.15GB")
    p.add_argument("--planes", type=int, default=256)
    p.add_argument("--chunk-planes", type=int, default=32)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1,
                   help="Dask threads a worker, and skyconv's threads on it")  # fmt: skip
    p.add_argument("--path", default="/tmp/skyconv-sc-profile/cube.zarr")
    p.add_argument("--json", default=None)
    p.add_argument("--graphs", default="wave",
                   help="comma list: wave, wait, all, chain, contiguous, columns, twice, "
                        "rebuild")  # fmt: skip
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--groups", type=int, default=None,
                   help="the wave's row groups (SLAB_GROUPS; default: the cluster's)")  # fmt: skip
    a = p.parse_args(argv)

    import dask
    import dask.array as da
    import distributed
    import zarr
    from dask.utils import key_split

    import skyconv
    from skyconv._dask import cube as dcube
    from skyconv._dask import device as ddev

    shape = shape_for(parse_size(a.size), a.planes)
    chunks = (a.chunk_planes, *shape[1:])
    write_cube(a.path, shape, chunks)
    gb = np.prod(shape) * 4 / 1e9
    cube = zarr.open_array(a.path, mode="r")[...]
    graphs = [g for g in a.graphs.split(",") if g]
    defaults = (dcube._on_cpu, dcube.Z_SLABS, dcube.SLAB_GROUPS, dcube._persist_slabs,
                dcube.SPATIAL_REUSE, getattr(dcube, "KERNELS_AHEAD", None))  # fmt: skip

    def scattered(base):  # session 12: the slabs where the scheduler puts them
        base = base.persist()
        return base, dcube._owners(base)

    def use(graph):
        (dcube._on_cpu, dcube.Z_SLABS, dcube.SLAB_GROUPS, dcube._persist_slabs,
         dcube.SPATIAL_REUSE, dcube.KERNELS_AHEAD) = defaults  # fmt: skip
        if graph == "wait":
            dcube.KERNELS_AHEAD = 0
        elif graph == "all":
            dcube.KERNELS_AHEAD = 1000
        elif graph == "twice":
            dcube._on_cpu = lambda device: False
        elif graph == "rebuild":
            dcube.SPATIAL_REUSE = False
        elif graph == "columns":
            dcube.Z_SLABS = False
        elif graph == "chain":
            dcube.SLAB_GROUPS, dcube._persist_slabs = 1, scattered
        elif graph == "contiguous":
            dcube.SLAB_GROUPS = 1
        elif graph not in ("wave", "wait", "all"):
            raise SystemExit(f"unknown graph {graph!r}")
        if graph in ("wave", "wait", "all") and a.groups:
            dcube.SLAB_GROUPS = a.groups

    blocking = defaultdict(int)
    compute0 = dask.compute

    def counted(*args, **kw):
        blocking["compute"] += 1
        return compute0(*args, **kw)

    runs = []
    with (
        distributed.LocalCluster(
            n_workers=a.workers,
            threads_per_worker=a.threads,
            processes=True,
            dashboard_address=None,
        ) as cluster,  # fmt: skip
        distributed.Client(cluster) as client,
    ):
        client.run(skyconv.set_num_threads, a.threads)
        client.register_plugin(_scheduler_plugin())
        ddev.reset(client)
        for rep in range(a.repeats):
            t = time.perf_counter()
            want = skyconv.smooth_and_clip(cube, device="cpu")
            single = time.perf_counter() - t
            print(f"cube {shape} float32 ({gb:.3f} GB), chunks {chunks}; single call "
                  f"({os.cpu_count()} threads): {single:.2f} s; load {os.getloadavg()[0]:.1f}",
                  flush=True)  # fmt: skip
            for graph in graphs:
                use(graph)
                blocking.clear()
                dask.compute = counted
                try:
                    run = profile(client, a, da, dcube, key_split, skyconv, progress_marks=[])
                finally:
                    dask.compute, _ = compute0, use("wave")
                run.update(graph=graph, repeat=rep, single_s=single,
                           blocking_computes=blocking["compute"])  # fmt: skip
                run["masks_equal"] = bool(np.array_equal(run.pop("mask"), want))
                run["ratio"] = run["dask_s"] / single
                runs.append(run)
                print(f"[{graph} {rep}] Dask ({a.workers} workers x {a.threads} threads): "
                      f"{run['dask_s']:.2f} s (ratio {run['ratio']:.2f}); "
                      f"{run['bytes_between_workers'] / 1e9:.3f} GB between workers "
                      f"({run['bytes_between_workers'] / (gb * 1e9):.1f}x the cube); core "
                      f"thread-s {run['core_thread_s']:.1f}; workers' CPU "
                      f"{run['worker_cpu_s']:.1f} s; client blocking computes "
                      f"{run['blocking_computes']}; {run['tasks_run']} tasks ran, "
                      f"{run['graphs_sent']} graphs sent; masks equal: {run['masks_equal']}",
                      flush=True)  # fmt: skip
    for graph in graphs:
        mine = [r for r in runs if r["graph"] == graph]
        keys = ("dask_s", "single_s", "ratio", "core_thread_s", "worker_cpu_s",
                "bytes_between_workers")  # fmt: skip
        med = {k: float(np.median([r[k] for r in mine])) for k in keys}
        print(f"median {graph} ({len(mine)} runs): Dask {med['dask_s']:.2f} s, single "
              f"{med['single_s']:.2f} s, ratio {med['ratio']:.2f}, core thread-s "
              f"{med['core_thread_s']:.1f}, workers' CPU {med['worker_cpu_s']:.1f} s, "
              f"{med['bytes_between_workers'] / 1e9:.3f} GB between "
              f"workers")  # fmt: skip
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"shape": shape, "chunks": chunks, "workers": a.workers,
                       "threads": a.threads, "runs": runs}, f,
                      indent=1)  # fmt: skip
    return 0 if all(r["masks_equal"] for r in runs) else 1


#: Task names of the core calls (in fused task names too), for the core thread-seconds.
CORE = ("spatial_block", "spatial_update", "sample_core", "slab_core", "clip_core", "prepare_mask")


def profile(client, a, da, dcube, key_split, skyconv, progress_marks):
    """One Dask run on the cluster: per-kernel rows, bytes, the mask (computed)."""
    import distributed

    marks = progress_marks
    client.run(_clear_log)
    client.run_on_scheduler(_graph_log, clear=True)
    b0, c0 = _counters(client)
    building = _ClientTime()
    with distributed.get_task_stream(client) as ts, building:
        t0 = time.time()
        marks.append(("start", t0, b0, c0))

        def progress(done, total, rms):
            marks.append((f"kernel {done}", time.time(), *_counters(client)))

        mask = skyconv.smooth_and_clip(da.from_zarr(a.path), device="cpu", progress=progress)
        got = mask.compute()
        marks.append(("mask out", time.time(), *_counters(client)))
        by_kind = defaultdict(int)
        for part in client.run(_bytes_by_kind).values():
            for k, v in part.items():
                by_kind[k] += v
    stream = ts.data
    graphs = client.run_on_scheduler(_graph_log)
    rows, core = [], 0.0
    for (_, t_a, b_a, c_a), (label, t_b, b_b, c_b) in zip(marks, marks[1:]):
        kinds, wave, ran = defaultdict(float), [], defaultdict(int)
        for rec in stream:
            for ss in rec.get("startstops", ()):
                mid = 0.5 * (ss["start"] + ss["stop"])
                if t_a <= mid < t_b:
                    name = key_split(rec["key"]) if ss["action"] == "compute" else ss["action"]
                    kinds[name] += ss["stop"] - ss["start"]
                    if ss["action"] == "compute":
                        ran[name] += 1
                    if "slab_core" in name:
                        wave.append((ss["start"], ss["stop"]))
        busy = sum(kinds.values())
        # the client building and sending graphs (workers idle unless work is queued)
        built = sum(b - a for a, b in building.spans if t_a <= 0.5 * (a + b) < t_b)
        # the slab pass (the carry chains): its span against its thread-seconds
        span = max(s[1] for s in wave) - min(s[0] for s in wave) if wave else 0.0
        core += sum(v for k, v in kinds.items() if any(c in k for c in CORE))
        sent = [g for t, g in graphs if t_a <= t < t_b]
        sent_tasks = defaultdict(int)
        for g in sent:
            for k, n in g.items():
                sent_tasks[k] += n
        rows.append({"step": label, "wall_s": t_b - t_a, "bytes_in": b_b - b_a,
                     "worker_cpu_s": c_b - c_a,
                     "busy_thread_s": busy, "kinds": dict(kinds), "slab_pass_span_s": span,
                     "client_build_s": built,
                     "slab_tasks": len(wave), "tasks_run": dict(ran),
                     "graphs_sent": len(sent), "graph_tasks": dict(sent_tasks)})  # fmt: skip
        top = ", ".join(f"{k} {v:.2f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:6])
        print(f"{label:>10}: {t_b - t_a:6.2f} s wall, {busy:6.2f} thread-s busy of "
              f"{a.workers * a.threads * (t_b - t_a):6.2f} (workers' CPU {c_b - c_a:6.2f} s); "
              f"{(b_b - b_a) / 1e6:7.1f} MB between workers; "
              f"client building graphs {built:5.2f} s; slab pass {span:5.2f} s over "
              f"{len(wave)} tasks; {top}")  # fmt: skip
        phases, idle = _phases(stream, t_a, t_b, key_split)
        rows[-1].update(phases=phases, all_idle_s=idle)
        print(f"{'':>10}  phases (s from the step's start: first start-last stop, thread-s): "
              + ", ".join(f"{k} {v[0]:.2f}-{v[1]:.2f} {v[2]:.2f}" for k, v in phases.items())
              + f"; no task running anywhere {idle:.2f} s")  # fmt: skip
        by_n = sorted(ran.items(), key=lambda kv: -kv[1])
        print(
            f"{'':>10}  {sum(ran.values())} tasks ran ("
            + ", ".join(f"{k} {n}" for k, n in by_n)
            + f"); {len(sent)} graphs sent, {sum(sent_tasks.values())} tasks in them"
        )
    gaps = _barriers(stream, key_split)
    for g in gaps:
        print(f"  barrier at {g['t'] - marks[0][1]:6.2f} s: last sample task -> noise done "
              f"{g['sample_to_noise']:.3f} s, noise done -> first clip {g['noise_to_clip']:.3f} s, "
              f"-> next kernel's first task {g['noise_to_next']:.3f} s")  # fmt: skip
    idle = sum(r["all_idle_s"] for r in rows)
    print(f"no task running anywhere: {idle:.2f} s of {marks[-1][1] - marks[0][1]:.2f}")
    kinds_moved = dict(sorted(by_kind.items(), key=lambda kv: -kv[1]))
    print("bytes between workers by the task that made them (MB): "
          + ", ".join(f"{k} {v / 1e6:.1f}" for k, v in list(kinds_moved.items())[:10]))  # fmt: skip
    ran = sum(sum(r["tasks_run"].values()) for r in rows)
    print(f"tasks ran in all: {ran}; graphs sent: {len(graphs)}")
    return {"dask_s": marks[-1][1] - marks[0][1], "bytes_between_workers": marks[-1][2] - b0,
            "worker_cpu_s": marks[-1][3] - c0,
            "core_thread_s": core, "tasks_run": ran, "graphs_sent": len(graphs), "steps": rows,
            "bytes_by_task": kinds_moved, "all_idle_s": idle, "barriers": gaps,
            "mask": got}  # fmt: skip


def _phases(stream, t_a, t_b, key_split):
    """Per task kind computed in [t_a, t_b) (by a task's middle): (first start, last stop)
    from t_a and its thread-s, in order of first start; and the seconds of [t_a, t_b) in which
    no task ran on any worker (the whole cluster idle: waits on the client, round trips)."""
    spans, kinds = [], {}
    for rec in stream:
        for ss in rec.get("startstops", ()):
            a, b = ss["start"], ss["stop"]
            if ss["action"] != "compute" or not t_a <= 0.5 * (a + b) < t_b:
                continue
            spans.append((a, b))
            k = key_split(rec["key"])
            lo, hi, busy = kinds.get(k, (np.inf, -np.inf, 0.0))
            kinds[k] = (min(lo, a - t_a), max(hi, b - t_a), busy + b - a)
    covered, end = 0.0, t_a
    for a, b in sorted(spans):
        a, b = max(a, end), min(b, t_b)
        if b > a:
            covered += b - a
            end = b
    return dict(sorted(kinds.items(), key=lambda kv: kv[1][0])), (t_b - t_a) - covered


#: Task kinds of a kernel's noise sample (before its noise rule) and of its next kernel's start.
SAMPLE = ("slab_core", "sample_core", "sample_of")
START = ("spatial_block", "spatial_update", "slab_core", "sample_core")


def _barriers(stream, key_split):
    """Per noise rule task (a kernel's global barrier), in time order: from the last sample
    task before it to its end, from its end to the first clip and to the first task of the
    next kernel (spatial stage or sample call) after it."""
    done = []
    for rec in stream:
        for ss in rec.get("startstops", ()):
            if ss["action"] == "compute":
                done.append((ss["start"], ss["stop"], key_split(rec["key"])))
    out = []
    for _, t, _ in sorted(d for d in done if d[2] == "_noise_rule" or d[2] == "noise_rule"):
        last = max((b for a, b, k in done if b <= t and any(s in k for s in SAMPLE)), default=t)
        clip = min((a for a, b, k in done if a >= t and "clip" in k), default=np.inf)
        nxt = min((a for a, b, k in done if a >= t and any(s in k for s in START)), default=np.inf)
        out.append({"t": t, "sample_to_noise": t - last, "noise_to_clip": clip - t,
                    "noise_to_next": nxt - t})  # fmt: skip
    return out


class _ClientTime:
    """While active, the spans (start, stop) the client spends making delayed tasks
    (``dask.delayed``'s ``call_function``) and persisting graphs (``dask.persist``: optimised,
    packed and sent; it does not wait for results), outermost calls only."""

    def __init__(self):
        self.spans, self.depth = [], 0

    def _timed(self, fn):
        def wrapper(*args, **kw):
            self.depth += 1
            t = time.time()
            try:
                return fn(*args, **kw)
            finally:
                self.depth -= 1
                if not self.depth:
                    self.spans.append((t, time.time()))

        return wrapper

    def __enter__(self):
        import dask
        import dask.delayed

        mod = sys.modules["dask.delayed"]
        self.saved = (mod.call_function, dask.persist)
        mod.call_function, dask.persist = (self._timed(f) for f in self.saved)
        return self

    def __exit__(self, *exc):
        import dask

        sys.modules["dask.delayed"].call_function, dask.persist = self.saved


def _scheduler_plugin():
    """A :class:`GraphLog` that is a Distributed ``SchedulerPlugin`` (imported here, not at
    module level: the module imports without Distributed)."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    return type("GraphLogPlugin", (GraphLog, SchedulerPlugin), {})()


def _clear_log(dask_worker):
    """Forget the transfers of earlier runs (``_bytes_by_kind`` reads the log)."""
    log = getattr(dask_worker, "transfer_incoming_log", None)
    if log is not None:
        log.clear()


if __name__ == "__main__":
    sys.exit(main())
