"""CPU ring method at FWHM 4.69 px (1' at nside 16384) for nside 1024..4096 on this machine:
time per pixel, to extrapolate nside 16384 (session 10, smooth16k). Run:
.venv/bin/python bench/results/session10/smooth16k_cpu_scaling.py"""

import json
import sys
import time

import numpy as np

from skyconv import _core
from skyconv.smooth import kernel_profile

PX = (1 / 60) / np.degrees(np.sqrt(4 * np.pi / (12 * 16384**2)))  # 1' in pixels at 16384
rows = []
for nside in [int(x) for x in sys.argv[1:]] or (1024, 2048, 4096):
    npix = 12 * nside**2
    m = np.random.default_rng(1).standard_normal(npix)
    fwhm = PX * np.sqrt(4 * np.pi / npix)
    theta, values = kernel_profile(fwhm=fwhm)
    _core._smooth_ring(m[: 12 * 64**2], 64, theta, values, "cpu")
    ts = []
    for _ in range(2):
        t0 = time.perf_counter()
        _core._smooth_ring(m, nside, theta, values, "cpu")
        ts.append(time.perf_counter() - t0)
    r = {"nside": nside, "fwhm_px": PX, "best_s": min(ts), "ns_per_pixel": 1e9 * min(ts) / npix}
    rows.append(r)
    print(json.dumps(r), flush=True)
