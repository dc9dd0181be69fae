"""Stage profile of the GPU cube calls (issue 22): S+C on the bench's 2 GB and 256 MB cubes
(bench.cases.cube, the default 12 kernels), SoFiA 1's drop-in ``SCfinder_mem`` on the 256 MB
cube with the bench's mad noise and with SoFiA 1's default (the fit to the negative
histogram; ``compat``), and à trous 3-D on 256x512² (bench.cases.atrous), end to end from
NumPy and ``skyconv.last_profile()`` per stage, median of --repeats calls after one warm-up;
the mask (and à trous output) checksum, so that two wheels can be compared. Run it once per
wheel (PYTHONPATH picks the wheel) on the same machine.

Usage: python3 bench/gpu/cube_profile.py [--repeats 3] [--only scfind_2gb,scfind,compat,atrous]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.cases import atrous as atrous_case  # noqa: E402
from bench.cases import cube as cube_case  # noqa: E402


def scfind(cube):
    import skyconv

    return skyconv.smooth_and_clip(
        cube,
        kernels_xy=cube_case.KXY,
        kernels_z=cube_case.KZ,
        threshold=cube_case.THRESHOLD,
        replacement=2.0,
        statistic="mad",
        flux_range="negative",
        device="cuda",
    )


def compat_negative(cube):
    """The drop-in with SoFiA 1's default noise (Gaussian fit to the negative histogram)."""
    from skyconv.compat import sofia

    mask = np.zeros(cube.shape, np.uint8)
    sofia.SCfinder_mem(
        cube, mask, {}, 0, kernels=cube_case.KERNELS, threshold=cube_case.THRESHOLD,
        maskScaleXY=2.0, rmsMode="negative", device="cuda",
    )  # fmt: skip
    return mask


def atrous(cube):
    import skyconv

    return skyconv.atrous_denoise(cube, dim=3, snr_recon=atrous_case.SNR, device="cuda").data


def profile(name, fn, x, repeats):
    import skyconv

    out = fn(x)  # warm-up (kernels compiled, pools filled)
    digest = hashlib.sha1(np.ascontiguousarray(out).tobytes()).hexdigest()[:12]
    e2e, stages = [], {}
    for _ in range(repeats):
        t = time.perf_counter()
        fn(x)
        e2e.append((time.perf_counter() - t) * 1e3)
        for k, v in skyconv.last_profile().items():
            stages.setdefault(k, []).append(v)
    dev = [
        sum(v[i] for k, v in stages.items() if k not in ("h2d", "d2h", "total"))
        for i in range(repeats)
    ]
    med = statistics.median
    parts = "  ".join(f"{k} {med(v):.2f}" for k, v in stages.items())
    print(
        f"{name}: e2e {med(e2e):.1f} ms (min {min(e2e):.1f})  device {med(dev):.1f} ms  "
        f"out {digest} (sum {int(np.asarray(out, np.float64).sum())})\n  stages ms: {parts}",
        flush=True,
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", default="scfind_2gb,scfind,compat,atrous")
    a = p.parse_args()
    import skyconv

    print("skyconv from", Path(skyconv.__file__).parent, flush=True)
    only = a.only.split(",")
    if "scfind_2gb" in only:
        profile("scfind_2gb", scfind, cube_case.make_cube(cube_case.SHAPE_2G), a.repeats)
    if "scfind" in only:
        profile("scfind_256mb", scfind, cube_case.make_cube(cube_case.SHAPE), a.repeats)
    if "compat" in only:
        cube = cube_case.make_cube(cube_case.SHAPE)
        profile("scfind_compat_256mb", cube_case.skyconv_compat("cuda"), cube, a.repeats)
        profile("scfind_compat_negative_256mb", compat_negative, cube, a.repeats)
    if "atrous" in only:
        profile("atrous_recon3d", atrous, atrous_case.make_cube((256, 512, 512)), a.repeats)


if __name__ == "__main__":
    main()
