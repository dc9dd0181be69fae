"""Session 11 (shtgpu) one-call comparison of Legendre kernel variants (profiling wheel only:
the variant is read from SKYCONV_SHT_SYNTH / SKYCONV_SHT_ANAL at each launch).

    python bench/gpu/sht_variants.py [--sizes 2048,4096] [--big 16384] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import skyconv
from skyconv import _sht_multi

SYN = ["", "n", "w", "f"]
ANA = ["", "r", "n", "n4", "w", "f"]


def alm_of(lmax, rng, ncomp=None):
    n = skyconv.Alm.getsize(lmax)
    shape = (n,) if ncomp is None else (ncomp, n)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    a[..., : lmax + 1] = a[..., : lmax + 1].real
    return a


def rel(a, b, step=1):
    a, b = a.reshape(-1)[::step], b.reshape(-1)[::step]
    return float(np.abs(a - b).max() / np.abs(b).max())


def timed(f, reps):
    out = f()
    ts, profs = [], []
    for _ in range(reps):
        t = time.perf_counter()
        out = f()
        ts.append((time.perf_counter() - t) * 1e3)
        profs.append(skyconv.last_profile())
    i = int(np.argsort(ts)[len(ts) // 2])
    return float(np.median(ts)), float(min(ts)), out, profs[i]


def emit(rec, path):
    line = json.dumps(rec)
    print(line, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def one_gpu(nside, reps, path, rng):
    lmax = 2 * nside
    alm = alm_of(lmax, rng)
    ref = None
    for v in SYN:
        os.environ["SKYCONV_SHT_SYNTH"] = v
        med, mn, m, prof = timed(lambda: skyconv.alm2map(alm, nside, lmax, device="cuda:0"), reps)
        ref = m if ref is None else ref
        emit(dict(nside=nside, t="alm2map", v=v, e2e_ms=round(med, 2), min_ms=round(mn, 2),
                  prof={k: round(x, 2) for k, x in prof.items()}, diff=rel(m, ref)), path)
    os.environ["SKYCONV_SHT_SYNTH"] = ""
    aref = None
    for v in ANA:
        os.environ["SKYCONV_SHT_ANAL"] = v
        med, mn, a, prof = timed(lambda: skyconv.map2alm(ref, lmax, iter=0, device="cuda:0"), reps)
        aref = a if aref is None else aref
        emit(dict(nside=nside, t="map2alm", v=v, e2e_ms=round(med, 2), min_ms=round(mn, 2),
                  prof={k: round(x, 2) for k, x in prof.items()}, diff=rel(a, aref)), path)
    os.environ["SKYCONV_SHT_ANAL"] = ""


def pol_check(path, rng):
    nside, lmax = 512, 1024
    alm = alm_of(lmax, rng, 3)
    out = {}
    for v in SYN:
        os.environ["SKYCONV_SHT_SYNTH"] = v
        out[v] = skyconv.alm2map(alm, nside, lmax, pol=True, device="cuda:0")
    os.environ["SKYCONV_SHT_SYNTH"] = ""
    emit(dict(check="pol alm2map", diff={v: rel(out[v], out[""]) for v in SYN}), path)
    m = out[""]
    res = {}
    for v in ANA:
        os.environ["SKYCONV_SHT_ANAL"] = v
        res[v] = skyconv.map2alm(m, lmax, iter=0, pol=True, device="cuda:0")
    os.environ["SKYCONV_SHT_ANAL"] = ""
    emit(dict(check="pol map2alm", diff={v: rel(res[v], res[""]) for v in ANA}), path)


def split(nside, path, rng, anas):
    lmax = 2 * nside
    alm = alm_of(lmax, rng)
    dev = [0, 1]
    ref = None
    for v in ["", "", "n", "f"]:
        os.environ["SKYCONV_SHT_SYNTH"] = v
        t = time.perf_counter()
        m = skyconv.alm2map(alm, nside, lmax, devices=dev)
        s = time.perf_counter() - t
        st = _sht_multi.last_stats()
        ref = m if ref is None else ref
        emit(dict(nside=nside, t="alm2map split", v=v, s=round(s, 3),
                  stage_s_per_gpu=[[round(x, 3) for x in r] for r in st["stage_s_per_gpu"]],
                  diff=rel(m, ref, 101)), path)
        del m
    os.environ["SKYCONV_SHT_SYNTH"] = ""
    del alm
    aref = None
    for v in ["", ""] + anas:
        os.environ["SKYCONV_SHT_ANAL"] = v
        t = time.perf_counter()
        a = skyconv.map2alm(ref, lmax, iter=0, devices=dev)
        s = time.perf_counter() - t
        st = _sht_multi.last_stats()
        aref = a if aref is None else aref
        emit(dict(nside=nside, t="map2alm split", v=v, s=round(s, 3),
                  stage_s_per_gpu=[[round(x, 3) for x in r] for r in st["stage_s_per_gpu"]],
                  diff=rel(a, aref, 7)), path)
        del a
    os.environ["SKYCONV_SHT_ANAL"] = ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2048,4096")
    ap.add_argument("--big", default="16384")
    ap.add_argument("--big-anal", default=",n,w,f")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rng = np.random.default_rng(7)
    pol_check(a.json, rng)
    for s in filter(None, a.sizes.split(",")):
        one_gpu(int(s), a.reps, a.json, rng)
    for s in filter(None, a.big.split(",")):
        split(int(s), a.json, rng, [v for v in a.big_anal.split(",") if v])


if __name__ == "__main__":
    main()
