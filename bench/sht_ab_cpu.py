"""A/B of two skyconv builds on the CPU SHT, in alternated processes (issue 22).

    python -m bench.sht_ab_cpu --a DIR_A --b DIR_B [--nside 512] [--threads 1]
        [--spin 2] [--procs 3] [--calls 4] [--env-b KEY=VALUE ...]

DIR_A and DIR_B each hold an importable ``skyconv`` package (e.g. a copy of ``python/`` with
another build's ``_core.abi3.so``). Each process imports one of them and times ``--calls``
calls of alm2map and of map2alm (T, E, B with ``--spin 2``); the processes alternate A, B, A,
B, ... so load changes hit both. Prints, per build and direction, the min over the processes
of the per-process min CPU time (user + system) and wall time, in ms, and the all-call lists.
``--env-b`` sets environment variables for B's processes only (one build, two settings).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
import skyconv
nside, threads, spin, calls = map(int, sys.argv[1:5])
skyconv.set_num_threads(threads)
lmax = 2 * nside
rng = np.random.default_rng(1)
n = (lmax + 1) * (lmax + 2) // 2
nc = 3 if spin == 2 else 1
alm = rng.standard_normal((nc, n)) + 1j * rng.standard_normal((nc, n))
ms = np.repeat(np.arange(lmax + 1), lmax + 1 - np.arange(lmax + 1))
alm[:, ms == 0] = alm[:, ms == 0].real
if spin == 2:
    alm[1:, :2] = 0
else:
    alm = alm[0]
pol = spin == 2
maps = skyconv.alm2map(alm, nside, pol=pol, device="cpu")
skyconv.map2alm(maps, lmax=lmax, iter=0, pol=pol, device="cpu")
out = {"file": skyconv.__file__}
for name, fn, arg in (
    ("alm2map", lambda a: skyconv.alm2map(a, nside, pol=pol, device="cpu"), alm),
    ("map2alm", lambda m: skyconv.map2alm(m, lmax=lmax, iter=0, pol=pol, device="cpu"), maps),
):
    cpu, wall = [], []
    for _ in range(calls):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        fn(arg)
        wall.append(1e3 * (time.perf_counter() - t0))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu.append(1e3 * (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime))
    out[name] = {"cpu": cpu, "wall": wall}
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--nside", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--spin", type=int, default=2, choices=(0, 2))
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--env-b", nargs="*", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for _ in range(args.procs):
        for tag, root in (("A", args.a), ("B", args.b)):
            env = dict(os.environ, PYTHONPATH=root)
            if tag == "B":
                env.update(kv.split("=", 1) for kv in args.env_b)
            argv = [str(v) for v in (args.nside, args.threads, args.spin, args.calls)]
            p = subprocess.run(
                [sys.executable, "-c", CHILD, *argv],
                env=env,
                check=True,
                capture_output=True,
                text=True,
                cwd="/",
            )
            runs[tag].append(json.loads(p.stdout.strip().splitlines()[-1]))
    print(f"nside {args.nside} threads {args.threads} spin {args.spin} load {os.getloadavg()}")
    for tag in ("A", "B"):
        print(f"{tag} = {runs[tag][0]['file']}" + (f" {args.env_b}" if tag == "B" else ""))
    for name in ("alm2map", "map2alm"):
        for tag in ("A", "B"):
            for key in ("cpu", "wall"):
                per = [min(r[name][key]) for r in runs[tag]]
                every = [round(v) for r in runs[tag] for v in r[name][key]]
                pp = [round(v, 1) for v in per]
                print(f"{tag} {name} {key} ms min {min(per):.1f} per-proc {pp} all {every}")


if __name__ == "__main__":
    main()
