"""The client's cost of building one slab-pass kernel's graph (``_Noise.slabs``) alone, with no
cluster and nothing computed: B z-slabs over N workers (contiguous runs, as ``_persist_slabs``
places them), J row groups, the clip candidates kept. ``dask.persist`` is replaced by a pass-
through, so the time is the graph's construction (then, separately, the merge and
materialisation of the collections the code asked ``dask.persist`` for, with its arguments).

    python bench/dask_sc_build.py --slabs 32 --groups 31 --workers 16
"""

import argparse
import time
from types import SimpleNamespace

import dask
import dask.array as da
import numpy as np

from skyconv._dask import cube


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slabs", type=int, default=32)
    p.add_argument("--groups", type=int, default=31)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--planes", type=int, default=4, help="planes a slab")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--zwidth", type=int, default=3, help="the spectral boxcar's width")
    p.add_argument(
        "--no-optimize",
        dest="optimize",
        action="store_false",
        help="the merge as dask.persist(..., optimize_graph=False) starts it (as the code's "
        "own call asks, if it does)",
    )
    a = p.parse_args()
    b, shape = a.slabs, (a.slabs * a.planes, 64, 64)
    m = da.zeros(shape, dtype=np.uint8, chunks=(a.planes, 64, 64))
    ss = [dask.delayed(np.zeros)((a.planes, 64, 64)) for _ in range(b)]
    owners = [f"tcp://127.0.0.1:{9000 + k * a.workers // b}" for k in range(b)]
    run = SimpleNamespace(sampling=("backward", 1), noise=("sofia2x:mad",), edge_mode="constant",
                          exact=False)  # fmt: skip
    spec = ("gaussian", 0.0, 0.0, "boxcar", float(a.zwidth), False)
    noise = cube._Noise(run, shape, False, None, "cpu")
    out = {}
    real = dask.persist
    asked = []

    def persist(*xs, **kw):  # the graph only: what dask.persist was asked
        asked.append((xs, kw))
        return xs

    for i in range(a.repeat):
        asked.clear()
        dask.persist = persist
        try:
            t0 = time.perf_counter()
            noise.slabs(ss, m, spec, owners, a.groups, candidates=True)
            t1 = time.perf_counter()
        finally:
            dask.persist = real
        # what dask.persist starts with: one graph of every persisted collection, materialised
        from dask.base import collections_to_expr

        xs, kw = asked[0]
        opt = kw.get("optimize_graph", True) and a.optimize
        expr = collections_to_expr(list(xs), optimize_graph=opt)
        n = len(dict(expr.__dask_graph__()))
        notes = expr.__dask_annotations__()
        t2 = time.perf_counter()
        out.setdefault("build", []).append(t1 - t0)
        out.setdefault("merge", []).append(t2 - t1)
        print(f"run {i}: build {t1 - t0:.3f} s, merge+materialise {t2 - t1:.3f} s, "
              f"{n} tasks in the graph, {len(notes.get('workers', {}))} pinned")  # fmt: skip
    print("median: " + ", ".join(f"{k} {np.median(v):.3f} s" for k, v in out.items()))


if __name__ == "__main__":
    main()
