"""Dask SHT on the CPU cores of one host vs the single-process CPU transform (issue 20's target:
16 cores through Dask workers within 1.2x of the single-process transform at nside 4096).

    python bench/gpu/dask_sht.py [--nside 4096] [--lmax 8192] [--configs 1x16,2x8,4x4,16x1]
                                 [--iter 0] [--pol] [--repeats 2] [--profile] [--out DIR]
                                 [--m-per-worker 1]

For each workers x threads configuration a LocalCluster (processes) is started and alm2map and
map2alm (split mode, one block per worker) run from NumPy in the client to NumPy in the client,
timed in three parts: ``in`` (the input's blocks scattered straight to the workers, one block
each), ``cluster`` (the transform's tasks and its all-to-all, output persisted on the workers)
and ``out`` (the output's blocks gathered straight from the workers into one array); ``e2e``
is their sum. The single-process rows use ``skyconv.set_num_threads(W*T)`` for each total core
count of the configurations, and each Dask row gives its ratio to the single process at the
same total (``ratio_e2e``, ``ratio_cluster``), the CPU seconds of client, scheduler and
workers over the single process's (``cpu_ratio``: the overhead in work, which a machine shared
with other jobs does not distort as it does wall times), the peak RSS of each worker process
and the largest relative difference to the single process. ``--profile`` adds, per transform
and configuration, the seconds per task prefix and action from Distributed's task stream and
the workers each layer's block tasks ran on (a layer with two blocks on one worker is listed
under ``unbalanced``); on a small machine, e.g. ``--nside 512 --configs 2x1 --profile``, it is
the overhead profile of the Dask path. Prints one JSON line per row and, with
--out, writes ``dask_sht.json``. Needs dask and distributed (``pip install 'skyconv[dask]'``;
on the GPU machine ``bash bench/gpu/prepare.sh --dask``). CPU only (device="cpu").
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

import skyconv
from skyconv._dask import cluster


def _peak_rss_mib():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def _cpu_s():
    """CPU seconds (user + system) of this process so far, all its threads."""
    import resource

    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def cluster_cpu_s(client):
    """CPU seconds so far of the client, the scheduler and every worker process."""
    return _cpu_s() + client.run_on_scheduler(_cpu_s) + sum(client.run(_cpu_s).values())


def scatter(client, arr, sizes):
    """A dask array of ``arr`` (ncomp, n) chunked by ``sizes`` along axis 1, block i sent
    straight from this process to worker i mod W (``direct=True``: not through the scheduler,
    which is Distributed's default and moves every byte twice)."""
    import dask.array as da
    from distributed import wait

    addrs = [w["address"] for w in cluster.workers(client)]
    ends = np.cumsum(sizes)
    parts = [np.ascontiguousarray(arr[:, e - s : e]) for s, e in zip(sizes, ends)]
    futs = [
        client.scatter(p, direct=True, workers=[addrs[i % len(addrs)]]) for i, p in enumerate(parts)
    ]
    blocks = [
        da.from_delayed(f, shape=p.shape, dtype=p.dtype, meta=np.empty((0, 0), p.dtype))
        for f, p in zip(futs, parts)
    ]
    x = da.concatenate(blocks, axis=1) if len(blocks) > 1 else blocks[0]
    x = x.persist()  # holds the blocks (the futures of `futs` end with this function)
    wait(x)
    return x


def gather(client, d):
    """A persisted dask array (ncomp, n) chunked along axis 1 -> one NumPy array, the blocks
    gathered straight from the workers (``direct=True``)."""
    from distributed import futures_of

    futs = {f.key: f for f in futures_of(d)}
    keys = [k for row in d.__dask_keys__() for k in row]
    parts = client.gather([futs[k] for k in keys], direct=True)
    out = np.empty(d.shape, d.dtype)
    at = 0
    for p in parts:
        out[:, at : at + p.shape[1]] = p
        at += p.shape[1]
    return out


def _prefix(key) -> str:
    """A task key's name without its token(s): skyconv-alm2leg, skyconv-alm2leg-piece, ..."""
    import re

    k = key[0] if isinstance(key, tuple) else str(key)
    return re.sub(r"-[0-9a-f]{32}", "", k)


def stream_summary(stream, addrs):
    """From a task stream (``get_task_stream``): seconds per task prefix and action (compute,
    transfer, disk-read, ...) and the placement of each layer's block tasks: prefix -> tasks per
    worker (index into the sorted worker addresses). A layer with more tasks on one worker than
    its share (one block a worker, or K with --m-per-worker K) ran unbalanced."""
    from collections import defaultdict

    secs = defaultdict(lambda: defaultdict(float))
    where = defaultdict(lambda: [0] * len(addrs))
    index = {a: i for i, a in enumerate(addrs)}
    for t in stream:
        pre = _prefix(t["key"])
        for st in t["startstops"]:
            secs[pre][st["action"]] += st["stop"] - st["start"]
        if "skyconv-" in pre and not pre.endswith(("-piece", "-alm")):
            w = index.get(t.get("worker"))
            if w is not None:
                where[pre][w] += 1
    return (
        {k: {a: round(v, 3) for a, v in d.items()} for k, d in secs.items()},
        {k: v for k, v in where.items()},
    )


def run_split(client, fn, src, sizes, repeats, profile=False):
    """Best of ``repeats`` (in, cluster, out) seconds, the CPU seconds of that run (client,
    scheduler and workers), the result of fn(dask input) and, with ``profile``, the task stream
    summary of the best run's cluster part (``stream_summary``)."""
    from distributed import get_task_stream, wait

    addrs = [w["address"] for w in cluster.workers(client)]
    best, res, cpu, prof = None, None, None, None
    for _ in range(repeats):
        c0 = cluster_cpu_s(client)
        t0 = time.perf_counter()
        x = scatter(client, src, sizes)
        t1 = time.perf_counter()
        with get_task_stream(client) as ts:
            y = fn(x).persist()
            wait(y)
        t2 = time.perf_counter()
        res = gather(client, y)
        t3 = time.perf_counter()
        c1 = cluster_cpu_s(client)
        del x, y
        t = (t1 - t0, t2 - t1, t3 - t2)
        if best is None or sum(t) < sum(best):
            best, cpu = t, c1 - c0
            prof = stream_summary(ts.data, addrs) if profile else None
    return best, cpu, res, prof


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nside", type=int, default=4096)
    p.add_argument("--lmax", type=int, default=None, help="default 2*nside")
    p.add_argument("--configs", default="1x16,2x8,4x4,16x1", help="WORKERSxTHREADS,...")
    p.add_argument("--iter", type=int, default=0)
    p.add_argument("--pol", action="store_true")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument(
        "--profile",
        action="store_true",
        help="per task prefix seconds (compute, transfer) and the workers each layer ran on",
    )
    p.add_argument(
        "--m-per-worker",
        type=int,
        default=1,
        help="m blocks per worker (nblocks=(K*W, W)): with K > 1 a worker's first m task can "
        "start while the pieces of its next move",
    )
    p.add_argument("--out", default=os.environ.get("OUT"))
    a = p.parse_args()
    from distributed import Client, LocalCluster

    from skyconv import sht_halves as H
    from skyconv._dask import sht as dsht

    nside = a.nside
    lmax = 2 * nside if a.lmax is None else a.lmax
    nc = 3 if a.pol else 1
    rng = np.random.default_rng(0)
    nalm = skyconv.Alm.getsize(lmax)
    alm = rng.standard_normal((nc, nalm)) + 1j * rng.standard_normal((nc, nalm))
    alm[:, : lmax + 1].imag = 0
    configs = [tuple(int(x) for x in c.split("x")) for c in a.configs.split(",")]
    rows = []

    def row(**kw):
        rows.append(kw)
        print(json.dumps(kw), flush=True)

    kw = dict(lmax=lmax, pol=a.pol, device="cpu")
    single, ref_map, ref_alm = {}, None, None
    for cores in sorted({w * t for w, t in configs}):
        skyconv.set_num_threads(cores)
        ts, ab = [], []
        for _ in range(a.repeats):
            c0, t0 = _cpu_s(), time.perf_counter()
            ref_map = skyconv.alm2map(alm, nside, **kw)
            c1, t1 = _cpu_s(), time.perf_counter()
            ref_alm = skyconv.map2alm(ref_map, iter=a.iter, **kw)
            ts.append((t1 - t0, c1 - c0))
            ab.append((time.perf_counter() - t1, _cpu_s() - c1))
        (ws, cs), (wa, ca) = min(ts), min(ab)
        single[cores] = (ws, wa, cs, ca)
        row(
            mode="single",
            cores=cores,
            nside=nside,
            lmax=lmax,
            ncomp=nc,
            iter=a.iter,
            alm2map_s=round(single[cores][0], 3),
            map2alm_s=round(single[cores][1], 3),
            alm2map_cpu_s=round(single[cores][2], 3),
            map2alm_cpu_s=round(single[cores][3], 3),
            peak_rss_mib=round(_peak_rss_mib()),
        )
    maps2 = ref_map if ref_map.ndim == 2 else ref_map[None]
    alms2 = ref_alm if ref_alm.ndim == 2 else ref_alm[None]
    delta_bytes = nc * (4 * nside - 1) * (lmax + 1) * 16
    for w, t in configs:
        with (
            LocalCluster(
                n_workers=w,
                threads_per_worker=t,
                processes=True,
                dashboard_address=":0",
                memory_limit=0,
            ) as cluster,
            Client(cluster) as client,
        ):
            client.run(skyconv.set_num_threads, t)
            nb = None if a.m_per_worker == 1 else (a.m_per_worker * w, w)
            mb, rb = H.m_blocks(lmax, lmax, nb[0] if nb else w), H.ring_blocks(nside, w)
            asz = [int(np.sum(lmax + 1 - ms)) for ms in mb]
            psz = [int(H.ring_lengths(nside, r).sum()) for r in rb]

            def synth(x, nb=nb):
                return dsht.alm2map(x, nside, lmax=lmax, pol=a.pol, device="cpu", nblocks=nb)

            def anal(x, nb=nb):
                return dsht.map2alm(x, lmax=lmax, iter=a.iter, pol=a.pol, device="cpu", nblocks=nb)

            ts, cs, m, ps = run_split(client, synth, alm, asz, a.repeats, a.profile)
            ta, ca, b, pa = run_split(client, anal, maps2, psz, a.repeats, a.profile)
            rss = sorted(client.run(_peak_rss_mib).values())
            s_single, a_single, cs_single, ca_single = single[w * t]
            row(
                mode="dask-split",
                workers=w,
                threads=t,
                nside=nside,
                lmax=lmax,
                ncomp=nc,
                iter=a.iter,
                blocks=dsht.last_choice.get("m_blocks"),
                ring_blocks=dsht.last_choice.get("ring_blocks"),
                alm2map_s={k: round(v, 3) for k, v in zip(("in", "cluster", "out"), ts)},
                map2alm_s={k: round(v, 3) for k, v in zip(("in", "cluster", "out"), ta)},
                alm2map_ratio_e2e=round(sum(ts) / s_single, 3),
                alm2map_ratio_cluster=round(ts[1] / s_single, 3),
                map2alm_ratio_e2e=round(sum(ta) / a_single, 3),
                map2alm_ratio_cluster=round(ta[1] / a_single, 3),
                # CPU seconds of client + scheduler + workers over the single process's: the
                # overhead in work, which a loaded machine does not distort as it does wall times
                alm2map_cpu_ratio=round(cs / cs_single, 3),
                map2alm_cpu_ratio=round(ca / ca_single, 3),
                worker_peak_rss_mib=[round(r) for r in rss],
                delta_gb=round(delta_bytes / 1e9, 3),
                rel_err_map=float(np.abs(m - maps2).max() / np.abs(maps2).max()),
                rel_err_alm=float(np.abs(b - alms2).max() / np.abs(alms2).max()),
            )
            if a.profile:
                for name, (secs, where) in (("alm2map", ps), ("map2alm", pa)):
                    row(
                        mode="profile",
                        transform=name,
                        workers=w,
                        threads=t,
                        seconds_by_prefix=secs,
                        tasks_per_worker=where,
                        # more tasks on a worker than its share (one, or K m tasks)
                        unbalanced=sorted(
                            k for k, v in where.items() if max(v) > -(-sum(v) // len(v))
                        ),
                    )
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "dask_sht.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
