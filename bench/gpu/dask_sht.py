"""Dask SHT on the CPU cores of one host vs the single-process CPU transform (issue 20's target:
16 cores through Dask workers within 1.2x of the single-process transform at nside 4096).

    python bench/gpu/dask_sht.py [--nside 4096] [--lmax 8192] [--configs 1x16,2x8,4x4,16x1]
                                 [--iter 0] [--pol] [--out DIR]

For each workers x threads configuration a LocalCluster (processes) is started, each worker's
skyconv pool is set to its thread count, and alm2map and map2alm run end to end from NumPy in
the client to NumPy in the client (scatter, tasks, the all-to-all rechunk of Δ, gather); the
single-process rows use ``skyconv.set_num_threads(cores)``. Prints one line per row and, with
--out, writes ``dask_sht.json``. Needs dask and distributed (``pip install 'skyconv[dask]'``;
on the GPU machine ``bash bench/gpu/prepare.sh --dask``). Runs on the CPU only (device="cpu").
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

import skyconv


def best(fn, repeats):
    out, res = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = fn()
        out.append(time.perf_counter() - t0)
    return min(out), res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nside", type=int, default=4096)
    p.add_argument("--lmax", type=int, default=None, help="default 2*nside")
    p.add_argument("--configs", default="1x16,2x8,4x4,16x1", help="WORKERSxTHREADS,...")
    p.add_argument("--iter", type=int, default=0)
    p.add_argument("--pol", action="store_true")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", default=os.environ.get("OUT"))
    a = p.parse_args()
    import dask.array as da
    from distributed import Client, LocalCluster

    from skyconv._dask import sht as dsht

    nside = a.nside
    lmax = 2 * nside if a.lmax is None else a.lmax
    nc = 3 if a.pol else 1
    rng = np.random.default_rng(0)
    nalm = skyconv.Alm.getsize(lmax)
    alm = rng.standard_normal((nc, nalm)) + 1j * rng.standard_normal((nc, nalm))
    alm[:, : lmax + 1].imag = 0
    cores = max(int(c.split("x")[0]) * int(c.split("x")[1]) for c in a.configs.split(","))
    rows = []

    def row(**kw):
        rows.append(kw)
        print(json.dumps(kw), flush=True)

    skyconv.set_num_threads(cores)
    kw = dict(lmax=lmax, pol=a.pol, device="cpu")
    t_s, ref_map = best(lambda: skyconv.alm2map(alm, nside, **kw), a.repeats)
    t_a, ref_alm = best(lambda: skyconv.map2alm(ref_map, iter=a.iter, **kw), a.repeats)
    row(
        mode="single",
        workers=1,
        threads=cores,
        nside=nside,
        lmax=lmax,
        ncomp=nc,
        alm2map_s=round(t_s, 3),
        map2alm_s=round(t_a, 3),
        iter=a.iter,
    )
    delta_bytes = nc * (4 * nside - 1) * (lmax + 1) * 16
    for cfg in a.configs.split(","):
        w, t = (int(x) for x in cfg.split("x"))
        with (
            LocalCluster(
                n_workers=w,
                threads_per_worker=t,
                processes=True,
                dashboard_address=None,
                memory_limit=0,
            ) as cluster,
            Client(cluster) as client,
        ):
            client.run(skyconv.set_num_threads, t)
            # one transform split over the workers: m blocks and ring blocks, one per thread
            nb = (w * t, w * t)

            def synth(nb=nb):
                d = dsht.alm2map(
                    da.from_array(alm, chunks=(nc, -1)),
                    nside,
                    lmax=lmax,
                    pol=a.pol,
                    device="cpu",
                    nblocks=nb,
                )
                return d.compute()

            def anal(nb=nb):
                d = dsht.map2alm(
                    da.from_array(ref_map, chunks=(nc, -1)),
                    lmax=lmax,
                    iter=a.iter,
                    pol=a.pol,
                    device="cpu",
                    nblocks=nb,
                )
                return d.compute()

            ts, m = best(synth, a.repeats)
            ta, b = best(anal, a.repeats)
            e1 = float(np.abs(m - ref_map).max() / np.abs(ref_map).max())
            e2 = float(np.abs(b - ref_alm).max() / np.abs(ref_alm).max())
            row(
                mode="dask-split",
                workers=w,
                threads=t,
                nside=nside,
                lmax=lmax,
                ncomp=nc,
                alm2map_s=round(ts, 3),
                map2alm_s=round(ta, 3),
                iter=a.iter,
                vs_single_alm2map=round(ts / t_s, 3),
                vs_single_map2alm=round(ta / t_a, 3),
                delta_gb=round(delta_bytes / 1e9, 3),
                rel_err_map=e1,
                rel_err_alm=e2,
            )
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "dask_sht.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
