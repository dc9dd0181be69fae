"""Ctrl-C latency over the whole of one long call (issue 17): SIGINT is sent at many moments of
the call, from its first milliseconds to well into its main loop, and each time the seconds
until ``KeyboardInterrupt`` reaches the caller are measured. The largest of them bounds the
longest stretch the call runs without a cancel poll (in the Python layer or the core), which
the one-moment test (tests/backend/test_interrupt.py, SIGINT after 1 s) may miss.

Run: ``python -m bench.cancel_latency grid --device cpu --until 2.0 --step 0.02``
(prints one line per moment and a summary; ``--json PATH`` writes them).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time

import numpy as np


def grid_call(device: str, n: int, nside: int, nchan: int, sigma: float):
    """The grid call of tests/backend/_long_calls.py (4e6 samples in a 40 x 40 deg field,
    16 channels, onto HEALPix nside 1024, sigma 1 deg) with its sizes as parameters."""
    import skyconv

    rng = np.random.default_rng(0)
    lon = rng.uniform(0, 40, n)
    lat = rng.uniform(-20, 20, n)
    d = rng.standard_normal((n, nchan)).astype(np.float32)
    tgt = skyconv.HealpixTarget(nside)
    # One small call first: the moments then fall in steady calls, not in one-time set-up.
    skyconv.grid(lon[:100], lat[:100], d[:100], skyconv.HealpixTarget(4), kernel_params=sigma,
                 device=device)  # fmt: skip
    return lambda: skyconv.grid(lon, lat, d, tgt, kernel_params=sigma, device=device)


CALLS = {"grid": grid_call}


def latency(call, delay: float) -> tuple[float, float] | None:
    """(seconds from SIGINT to KeyboardInterrupt, seconds into the call when it was sent), or
    None when the call ended first."""
    sent: list[float] = []
    start = time.monotonic()

    def fire():
        time.sleep(max(0.0, start + delay - time.monotonic()))
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Thread(target=fire, daemon=True)
    timer.start()
    try:
        call()
        timer.join()
        time.sleep(0.05)  # the signal may still come in: let it land here
    except KeyboardInterrupt:
        got = time.monotonic()
        timer.join()
        return got - sent[0], sent[0] - start
    except BaseException:
        timer.join()
        raise
    return None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("call", choices=sorted(CALLS))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--until", type=float, default=2.0, help="last moment (s into the call)")
    ap.add_argument("--step", type=float, default=0.02, help="seconds between moments")
    ap.add_argument("--n", type=int, default=4_000_000)
    ap.add_argument("--nside", type=int, default=1024)
    ap.add_argument("--nchan", type=int, default=16)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    # Python's Ctrl-C handler even when started in the background by a shell without job
    # control (SIGINT then arrives ignored, and the signals sent here would be lost).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    call = CALLS[a.call](a.device, a.n, a.nside, a.nchan, a.sigma)
    rows = []
    for delay in np.arange(0.0, a.until + 1e-9, a.step):
        r = latency(call, float(delay))
        if r is None:
            print(f"at {delay:.3f} s: the call ended first")
            continue
        lat, at = r
        rows.append({"at_s": round(at, 4), "latency_s": round(lat, 4)})
        print(f"SIGINT {at:.3f} s into the call: KeyboardInterrupt after {lat:.3f} s", flush=True)
    worst = max(rows, key=lambda r: r["latency_s"])
    lats = np.array([r["latency_s"] for r in rows])
    print(
        f"{a.call} on {a.device}: {len(rows)} moments, latency median {np.median(lats):.3f} s, "
        f"max {worst['latency_s']:.3f} s (SIGINT {worst['at_s']:.3f} s into the call)"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"call": a.call, "device": a.device, "args": vars(a), "rows": rows}, f)


if __name__ == "__main__":
    main()
