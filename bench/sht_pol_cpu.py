"""CPU spin-2 (T, E, B) SHT against ducc0 in CPU time, interleaved repeats (issue 22).

    python -m bench.sht_pol_cpu --nside 256 512 --threads 1 2 --repeats 3 [--out FILE.json]

CPU time (user + system of the process, so page faults count) per call, min over the repeats;
skyconv and ducc0 alternate call by call, so load changes hit both. Also prints
max |skyconv - ducc0| / max |ducc0| per direction.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def _cpu(fn, *a):
    t0 = time.process_time()
    out = fn(*a)
    return time.process_time() - t0, out


def run(nside: int, threads: int, repeats: int) -> dict:
    import ducc0

    import skyconv
    from bench.cases.sht import ducc_anal, ducc_synth

    skyconv.set_num_threads(threads)
    lmax = 2 * nside
    rng = np.random.default_rng(1)
    n = (lmax + 1) * (lmax + 2) // 2
    alm = rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))
    ms = np.repeat(np.arange(lmax + 1), lmax + 1 - np.arange(lmax + 1))
    alm[:, ms == 0] = alm[:, ms == 0].real
    alm[1:, :2] = 0  # l < 2 of E, B (index l for m = 0)
    maps = skyconv.alm2map(alm, nside, pol=True, device="cpu")
    res = {"nside": nside, "lmax": lmax, "threads": threads, "ducc0": ducc0.__version__}
    for name, sc, du, arg, extra in (
        (
            "alm2map_pol",
            lambda a: skyconv.alm2map(a, nside, pol=True, device="cpu"),
            ducc_synth,
            alm,
            nside,
        ),
        (
            "map2alm_pol",
            lambda m: skyconv.map2alm(m, lmax=lmax, iter=0, pol=True, device="cpu"),
            ducc_anal,
            maps,
            lmax,
        ),
    ):
        ts, td = [], []
        for _ in range(repeats):
            t, a = _cpu(sc, arg)
            ts.append(t)
            t, b = _cpu(du, arg, extra)
            td.append(t)
        err = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
        res[name] = {
            "skyconv_cpu_s": ts,
            "ducc0_cpu_s": td,
            "ducc0_over_skyconv": min(td) / min(ts),
            "rel_err_vs_ducc0": err,
        }
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nside", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = []
    for th in a.threads:
        for ns in a.nside:
            r = run(ns, th, a.repeats)
            r["loadavg"] = os.getloadavg()[0]
            rows.append(r)
            for k in ("alm2map_pol", "map2alm_pol"):
                v = r[k]
                print(
                    f"nside {ns} threads {th} {k}: skyconv {min(v['skyconv_cpu_s']) * 1e3:.1f} ms"
                    f" ducc0 {min(v['ducc0_cpu_s']) * 1e3:.1f} ms ratio ducc0/skyconv"
                    f" {v['ducc0_over_skyconv']:.2f} err {v['rel_err_vs_ducc0']:.1e}"
                    f" (load {r['loadavg']:.1f})",
                    flush=True,
                )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
