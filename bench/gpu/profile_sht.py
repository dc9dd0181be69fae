"""Stage profile and peak GPU memory of skyconv's CUDA SHTs (run on the GPU machine).

    python bench/gpu/profile_sht.py [--nside 2048] [--lmax 4096] [--repeats 3] [--once]

Prints, per transform, the end-to-end time and ``skyconv.last_profile()`` stages (ms), and the
peak device memory seen by polling nvidia-smi while the call runs. ``--once`` runs each
transform a single time (for ncu, which replays every kernel).
"""

from __future__ import annotations

import argparse
import subprocess
import threading
import time

import numpy as np

import skyconv


def used_mib():
    """Device memory in use (MiB), as nvidia-smi reports it."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    return int(out[0]) if out else 0


#: memory in use before this process touched the GPU
BASE = used_mib()


class PeakMemory:
    """Polls nvidia-smi's used memory (MiB) in a thread while a call runs."""

    def __init__(self, period=0.02):
        self.period, self.peak, self._stop = period, 0, threading.Event()

    def __enter__(self):
        self._t = threading.Thread(target=self._poll, daemon=True)
        self._t.start()
        return self

    def _poll(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, used_mib())
            time.sleep(self.period)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def run(label, fn, repeats):
    times = []
    with PeakMemory() as mem:
        fn()  # warm-up: NVRTC, cuFFT plans
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    prof = {k: round(v, 2) for k, v in skyconv.last_profile().items()}
    print(
        f"{label}: e2e median {np.median(times):.1f} ms (min {min(times):.1f}); "
        f"peak GPU memory {mem.peak - BASE} MiB over the {BASE} MiB in use before "
        "(includes the CUDA context and skyconv's cached work buffers)"
    )
    print(f"    stages: {prof}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nside", type=int, default=2048)
    ap.add_argument("--lmax", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--once", action="store_true")
    ap.add_argument("--pol", action="store_true")
    a = ap.parse_args()
    nside, lmax = a.nside, a.lmax or 2 * a.nside
    rng = np.random.default_rng(1)
    nalm = skyconv.Alm.getsize(lmax)
    ncomp = 3 if a.pol else 1
    alm = rng.standard_normal((ncomp, nalm)) + 1j * rng.standard_normal((ncomp, nalm))
    alm[:, : lmax + 1] = alm[:, : lmax + 1].real
    alm = alm if a.pol else alm[0]
    if a.once:
        m = skyconv.alm2map(alm, nside, lmax=lmax, pol=a.pol, device="cuda")
        skyconv.map2alm(m, lmax=lmax, iter=0, pol=a.pol, device="cuda")
        return
    m = skyconv.alm2map(alm, nside, lmax=lmax, pol=a.pol, device="cuda")
    tag = f"nside {nside} lmax {lmax}{' pol' if a.pol else ''}"
    run(
        f"alm2map {tag}",
        lambda: skyconv.alm2map(alm, nside, lmax=lmax, pol=a.pol, device="cuda"),
        a.repeats,
    )
    run(
        f"map2alm iter=0 {tag}",
        lambda: skyconv.map2alm(m, lmax=lmax, iter=0, pol=a.pol, device="cuda"),
        a.repeats,
    )


if __name__ == "__main__":
    main()
