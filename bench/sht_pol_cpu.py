"""CPU SHT (spin 0, or T, E, B with spin 2) against ducc0, interleaved repeats (issue 22).

    python -m bench.sht_pol_cpu --nside 256 512 --threads 1 2 [--spin 0 2] [--repeats 3]
        [--out FILE.json]

Per call: wall clock, and CPU time split into user and system (page faults and unmapping show
as system time), min over the repeats; skyconv and ducc0 alternate call by call, so load
changes hit both. ``--spin 2`` (the default) is the polarised T, E, B transform (spin 0 + spin
2), ``--spin 0`` one spin-0 component. The ratio printed is ducc0 / skyconv of the wall clock
(``--metric cpu``: of the CPU time, the fair one on a shared machine at one thread). Also
prints max |skyconv - ducc0| / max |ducc0| per direction.

On the 16-core GPU machine (CPU only, about 90 s):

    python -m bench.sht_pol_cpu --nside 1024 2048 --threads 16 --spin 0 2 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time

import numpy as np


def _timed(fn, *a):
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    out = fn(*a)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return (wall, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime), out


def run(nside: int, threads: int, repeats: int, spin: int, metric: str) -> dict:
    import ducc0

    import skyconv
    from bench.cases.sht import ducc_anal, ducc_synth

    skyconv.set_num_threads(threads)
    lmax = 2 * nside
    rng = np.random.default_rng(1)
    n = (lmax + 1) * (lmax + 2) // 2
    nc = 3 if spin == 2 else 1
    alm = rng.standard_normal((nc, n)) + 1j * rng.standard_normal((nc, n))
    ms = np.repeat(np.arange(lmax + 1), lmax + 1 - np.arange(lmax + 1))
    alm[:, ms == 0] = alm[:, ms == 0].real
    if spin == 2:
        alm[1:, :2] = 0  # l < 2 of E, B (index l for m = 0)
    else:
        alm = alm[0]
    pol = spin == 2
    maps = skyconv.alm2map(alm, nside, pol=pol, device="cpu")
    res = {"nside": nside, "lmax": lmax, "threads": threads, "spin": spin}
    res["ducc0"] = ducc0.__version__
    suffix = "_pol" if pol else ""
    for name, sc, du, arg, extra in (
        (
            "alm2map" + suffix,
            lambda a: skyconv.alm2map(a, nside, pol=pol, device="cpu"),
            ducc_synth,
            alm,
            nside,
        ),
        (
            "map2alm" + suffix,
            lambda m: skyconv.map2alm(m, lmax=lmax, iter=0, pol=pol, device="cpu"),
            ducc_anal,
            maps,
            lmax,
        ),
    ):
        ts, td = [], []
        for _ in range(repeats):
            t, a = _timed(sc, arg)
            ts.append(t)
            t, b = _timed(du, arg, extra)
            td.append(t)
        err = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
        k = 0 if metric == "wall" else None

        def best(rows, k=k):
            if k is None:
                return min(r[1] + r[2] for r in rows)
            return min(r[k] for r in rows)

        res[name] = {
            "skyconv_wall_s": [r[0] for r in ts],
            "skyconv_user_s": [r[1] for r in ts],
            "skyconv_sys_s": [r[2] for r in ts],
            "ducc0_wall_s": [r[0] for r in td],
            "ducc0_user_s": [r[1] for r in td],
            "ducc0_sys_s": [r[2] for r in td],
            # kept under the old key for the CPU-time metric (session 9's files)
            "skyconv_cpu_s": [r[1] + r[2] for r in ts],
            "ducc0_cpu_s": [r[1] + r[2] for r in td],
            "metric": metric,
            "ducc0_over_skyconv": best(td) / best(ts),
            "rel_err_vs_ducc0": err,
        }
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nside", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--spin", type=int, nargs="+", default=[2], choices=[0, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--metric", choices=["wall", "cpu"], default="wall")
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = []
    for th in a.threads:
        for spin in a.spin:
            for ns in a.nside:
                r = run(ns, th, a.repeats, spin, a.metric)
                r["loadavg"] = os.getloadavg()[0]
                rows.append(r)
                for k, v in r.items():
                    if not isinstance(v, dict):
                        continue
                    sw, sd = min(v["skyconv_wall_s"]), min(v["ducc0_wall_s"])
                    su, ss = min(v["skyconv_user_s"]), min(v["skyconv_sys_s"])
                    du, ds = min(v["ducc0_user_s"]), min(v["ducc0_sys_s"])
                    print(
                        f"nside {ns} threads {th} {k}: skyconv wall {sw * 1e3:.1f} ms"
                        f" (user {su * 1e3:.0f} sys {ss * 1e3:.0f}) ducc0 wall {sd * 1e3:.1f} ms"
                        f" (user {du * 1e3:.0f} sys {ds * 1e3:.0f}) ducc0/skyconv"
                        f" [{a.metric}] {v['ducc0_over_skyconv']:.2f}"
                        f" err {v['rel_err_vs_ducc0']:.1e} (load {r['loadavg']:.1f})",
                        flush=True,
                    )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
