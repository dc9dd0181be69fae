"""Where the Dask SHT's time goes beyond the transform (issue 20): one process with W·T threads
vs a LocalCluster of W workers × T threads, per stage from Distributed's task stream.

    python bench/dask_sht_profile.py [--nside 512] [--workers 2] [--threads 1] [--iter 0,3]

Rows (JSON lines): the single-process transforms; the halves run in this process block by
block (the work the tasks do, without Dask); the Dask call end to end from NumPy
(``da.from_array`` → ``compute``) and with its input already on the workers and its output
left there (``persist``), the task count of the graph, and per task prefix the seconds of
compute and of transfers the workers report.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import numpy as np

import skyconv
from skyconv import sht_halves as H


def best(fn, repeats=2):
    ts, res = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), res


def stream_summary(stream):
    """Seconds of compute and transfer per task prefix, from client.get_task_stream()."""
    out = defaultdict(lambda: defaultdict(float))
    for t in stream:
        prefix = t["key"][0] if isinstance(t["key"], tuple) else str(t["key"])
        prefix = prefix.rsplit("-", 1)[0]
        for s in t["startstops"]:
            out[prefix][s["action"]] += s["stop"] - s["start"]
    return {k: {a: round(v, 3) for a, v in d.items()} for k, d in out.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nside", type=int, default=512)
    p.add_argument("--lmax", type=int, default=None, help="default 2*nside")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iter", default="0,3")
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, get_task_stream, wait

    from skyconv._dask import sht as dsht

    nside, (w, t) = a.nside, (a.workers, a.threads)
    lmax = 2 * nside if a.lmax is None else a.lmax
    iters = [int(i) for i in a.iter.split(",")]
    rng = np.random.default_rng(0)
    nalm = skyconv.Alm.getsize(lmax)
    alm = rng.standard_normal(nalm) + 1j * rng.standard_normal(nalm)
    alm[: lmax + 1].imag = 0
    kw = dict(lmax=lmax, device="cpu")

    def row(**kv):
        print(json.dumps(kv), flush=True)

    skyconv.set_num_threads(w * t)
    ts, ref_map = best(lambda: skyconv.alm2map(alm, nside, **kw), a.repeats)
    single = {"alm2map": ts}
    for it in iters:
        single[f"map2alm_iter{it}"] = best(
            lambda it=it: skyconv.map2alm(ref_map, iter=it, **kw), a.repeats
        )[0]
    row(
        what="single",
        threads=w * t,
        nside=nside,
        lmax=lmax,
        **{k: round(v, 3) for k, v in single.items()},
    )

    # the halves in this process, block by block, each with T threads (the tasks' work)
    nb = w * t
    mb, rb = H.m_blocks(lmax, lmax, nb), H.ring_blocks(nside, nb)
    skyconv.set_num_threads(t)
    t0 = time.perf_counter()
    legs = [H.alm2leg(H.alm_block(alm, lmax, ms), nside, lmax, ms) for ms in mb]
    t_leg = time.perf_counter() - t0
    t0 = time.perf_counter()
    full = np.concatenate(legs, axis=-1)
    t_cat = time.perf_counter() - t0
    t0 = time.perf_counter()
    pieces = [np.ascontiguousarray(full[r[0] : r[-1] + 1]) for r in rb]
    t_split = time.perf_counter() - t0
    t0 = time.perf_counter()
    maps = [H.leg2map(pc, nside, r) for pc, r in zip(pieces, rb)]
    t_map = time.perf_counter() - t0
    row(
        what="halves-in-process",
        blocks=nb,
        threads=t,
        alm2leg_s=round(t_leg, 3),
        concat_delta_s=round(t_cat, 3),
        split_delta_s=round(t_split, 3),
        leg2map_s=round(t_map, 3),
        delta_mb=round(full.nbytes / 1e6, 1),
        bitwise_equal=bool(np.array_equal(np.concatenate(maps), ref_map)),
        per_block_s_if_parallel=round((t_leg + t_map) / nb, 3),
    )

    with dask.config.set({"distributed.scheduler.work-stealing": True}):
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
            alm_d = da.from_array(alm, chunks=-1)
            map_d = da.from_array(ref_map, chunks=-1)

            def graph_tasks(x):
                return len(x.__dask_graph__())

            cases = {"alm2map": lambda x=alm_d: dsht.alm2map(x, nside, **kw)}
            for it in iters:
                cases[f"map2alm_iter{it}"] = lambda x=map_d, it=it: dsht.map2alm(x, iter=it, **kw)
            for name, build in cases.items():
                g = build()
                ntask = graph_tasks(g)
                t_e2e, _ = best(lambda build=build: build().compute(), a.repeats)
                # input already on the workers, output left there
                src = alm if name == "alm2map" else ref_map
                chunks = (
                    tuple(int(np.sum(lmax + 1 - ms)) for ms in mb)
                    if name == "alm2map"
                    else tuple(int(H.ring_lengths(nside, r).sum()) for r in rb)
                )
                x = da.from_array(src, chunks=(chunks,)).persist()
                wait(x)
                if name == "alm2map":
                    f = lambda x=x: dsht.alm2map(x, nside, **kw)  # noqa: E731
                else:
                    it = int(name.rsplit("iter", 1)[1])
                    f = lambda x=x, it=it: dsht.map2alm(x, iter=it, **kw)  # noqa: E731

                def on_cluster(f=f):
                    y = f().persist()
                    wait(y)
                    return y

                with get_task_stream(client) as ts_:
                    t_onc, _ = best(on_cluster, 1)
                row(
                    what="dask",
                    case=name,
                    config=f"{w}x{t}",
                    tasks=ntask,
                    end_to_end_s=round(t_e2e, 3),
                    on_cluster_s=round(t_onc, 3),
                    single_s=round(single[name], 3),
                    ratio_e2e=round(t_e2e / single[name], 3),
                    ratio_on_cluster=round(t_onc / single[name], 3),
                    stream=stream_summary(ts_.data),
                )
                del x


if __name__ == "__main__":
    main()
