"""One SHT over several GPUs of one host vs one GPU (run on nvidia-h100-x2).

    python bench/gpu/multi_gpu_sht.py [--sizes 1024:2048,8192:16384] [--big 16384:32768]
                                      [--devices 0,1] [--repeats 1] [--json FILE]

For each nside:lmax of ``--sizes``: alm2map and map2alm (iter=0) end to end from host memory on
one GPU (``device="cuda:0"``) and split over ``--devices`` (``devices=[0, 1]``), the ratio, and
the split's stages (Legendre, the all-to-all, rings), its transport and its peak memory per GPU.
Both run at least twice per size: ``first_call_s`` (with the set-up trace of that call: cuFFT
plans of new lengths, and the process's first split call creates the second GPU's context and
enables peer access) and ``seconds``, the best warm call.
``--big`` runs only the split (nside 16384, lmax 32768 does fit one H100, 50 GB; it is left out
of the one-GPU timing here to keep the run short: one H100 took 10.3 s / 12.5 s). Prints one JSON
line per measurement (and appends them to ``--json``). The default run (a small warm-up size,
then 8192:16384 and the big case) should stay inside about six minutes on two H100s; give
``--big=`` (none) for a quick check first.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import skyconv
from skyconv import _sht_multi


def _pair(s: str) -> tuple[int, int]:
    a, b = s.split(":")
    return int(a), int(b)


def _alm(lmax: int, rng) -> np.ndarray:
    n = skyconv.Alm.getsize(lmax)
    a = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    a[: lmax + 1] = a[: lmax + 1].real
    return a


def _time(f, repeats: int):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def _emit(rec: dict, path: str | None) -> None:
    line = json.dumps(rec)
    print(line, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def _stages(trace: list) -> dict:
    """Per set-up stage of a call's trace: [entries, seconds]."""
    stages: dict = {}
    for e in trace:
        n, t = stages.get(e["stage"], (0, 0.0))
        stages[e["stage"]] = (n + 1, round(t + e["seconds"], 4))
    return stages


def _one_record(base: dict, secs: float, first: float, trace: list) -> dict:
    """One-GPU row: the first call of the size (its set-up trace: cuFFT plans, pools) and the
    best warm call."""
    return dict(
        base,
        mode="one-gpu",
        seconds=round(secs, 4),
        first_call_s=round(first, 4),
        first_call_setup_trace=_stages(trace),
    )


def _split_record(base: dict, secs: float, first: float, trace: list) -> dict:
    st = _sht_multi.last_stats()
    rec = dict(base, seconds=round(secs, 4), transport=st["transport"])
    rec["first_call_s"] = round(first, 4)
    rec["first_call_setup_trace"] = _stages(trace)
    rec["stages_s"] = {k: round(st[k], 4) for k in ("legendre_s", "exchange_s", "ring_s")}
    rec["alltoall_share"] = round(st["exchange_s"] / secs, 4) if secs > 0 else None
    rec["peak_gib_per_gpu"] = [round(b / 2**30, 2) for b in st["peak_bytes"]]
    rec["planned_gib_per_gpu"] = [round(b / 2**30, 2) for b in st.get("planned_bytes", [])]
    rec["rounds"] = st.get("rounds")
    rec["stage_s_per_gpu"] = [[round(x, 4) for x in t] for t in st.get("stage_s_per_gpu", [])]
    rec["wall_s_per_gpu"] = [[round(x, 4) for x in t] for t in st.get("wall_s_per_gpu", [])]
    rec["m_blocks"] = st["m_blocks"]
    rec["pair_blocks"] = st.get("pair_blocks")
    return rec


def _split(f):
    """(first call's seconds, its set-up trace): the first call of a size pays the pools'
    growth and the cuFFT plans of lengths not seen before (and, the process's first split
    call, the second GPU's context and peer access); the warm calls follow (``_time``)."""
    skyconv.setup_trace(clear=True)
    t = time.perf_counter()
    f()
    first = time.perf_counter() - t
    trace = skyconv.setup_trace(clear=True)
    return first, trace


def run_size(nside, lmax, devices, repeats, single, path, rng):
    """Both one-GPU transforms first (the map2alm input is the one-GPU map), then the split:
    GPU 0 then holds the one-GPU pools while the split plans its chunks within what is left
    (the other order left too little for the one-GPU map2alm at nside 16384 on an H100)."""
    alm = _alm(lmax, rng)
    base = {"nside": nside, "lmax": lmax, "devices": devices}
    m1 = a1 = None
    if single:
        f1 = lambda: skyconv.alm2map(alm, nside, lmax, device="cuda:0")  # noqa: E731
        first, trace = _split(f1)
        t1m, m1 = _time(f1, repeats)
        _emit(_one_record(dict(base, transform="alm2map"), t1m, first, trace), path)
        f1 = lambda: skyconv.map2alm(m1, lmax, iter=0, device="cuda:0")  # noqa: E731
        first, trace = _split(f1)
        t1a, a1 = _time(f1, repeats)
        _emit(_one_record(dict(base, transform="map2alm"), t1a, first, trace), path)
    f2 = lambda: skyconv.alm2map(alm, nside, lmax, devices=devices)  # noqa: E731
    first, trace = _split(f2)
    t2, m2 = _time(f2, repeats)
    rec = _split_record(dict(base, transform="alm2map", mode="split"), t2, first, trace)
    if single:
        rec["speedup"] = round(t1m / t2, 3)
        rec["max_rel_diff"] = float(np.abs(m2 - m1).max() / np.abs(m1).max())
    _emit(rec, path)
    src = m1 if single else m2
    del m2
    f2 = lambda: skyconv.map2alm(src, lmax, iter=0, devices=devices)  # noqa: E731
    first, trace = _split(f2)
    t2, a2 = _time(f2, repeats)
    rec = _split_record(dict(base, transform="map2alm", mode="split"), t2, first, trace)
    if single:
        rec["speedup"] = round(t1a / t2, 3)
        rec["max_rel_diff"] = float(np.abs(a2 - a1).max() / np.abs(a1).max())
    _emit(rec, path)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1024:2048,8192:16384")
    ap.add_argument("--big", default="16384:32768", help="split only; '' for none")
    ap.add_argument("--devices", default="0,1")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    devices = [int(d) for d in a.devices.split(",")]
    rng = np.random.default_rng(1)
    info = skyconv.backend_info()["cuda"]
    _emit({"gpus": [d.get("name") for d in info.get("devices") or []]}, a.json)
    runs = [(s, a.repeats, True) for s in filter(None, a.sizes.split(","))]
    runs += [(s, 1, False) for s in filter(None, a.big.split(","))]
    for s, repeats, single in runs:
        nside, lmax = _pair(s)
        try:
            run_size(nside, lmax, devices, repeats, single, a.json, rng)
        except Exception as e:  # report what stopped it, keep the earlier lines
            _emit({"nside": nside, "lmax": lmax, "error": f"{type(e).__name__}: {e}"}, a.json)


if __name__ == "__main__":
    main()
