"""Results and steady-state times of the GPU engine under one CUDA toolkit, and their comparison
between two toolkits (CUDA 12's and 13's NVRTC/cuFFT).

    python bench/gpu/toolkit_compare.py save OUT.npz       # run the calls, save results+times
    python bench/gpu/toolkit_compare.py compare A.npz B.npz [--tol 1e-12]

``save`` runs, in float64 on the GPU, smooth_map (ring and auto), alm2map, map2alm, grid,
gaussian_filter1d, smooth_and_clip and atrous_denoise on fixed inputs, and stores each output
with its best-of-5 time and the toolkit the loader chose (backend_info). ``compare`` prints,
per call, the largest difference relative to the largest magnitude of A's output and the two
times; it exits 1 when a difference exceeds --tol. Select the toolkit with
SKYCONV_CUDA_VERSION=12|13 (bench/gpu/run.sh cuda12-save / cuda13-save do this).
"""

from __future__ import annotations

import sys
import time

import numpy as np


def calls(dev: str = "cuda"):
    import skyconv
    from skyconv import filters

    r = np.random.default_rng(20261126)
    nside, lmax = 512, 1024
    m = r.standard_normal(12 * nside**2)
    nalm = (lmax + 1) * (lmax + 2) // 2
    alm = r.standard_normal(nalm) + 1j * r.standard_normal(nalm)
    alm[: lmax + 1] = alm[: lmax + 1].real
    n = 200_000
    lon, lat = r.uniform(0, 360, n), np.degrees(np.arcsin(r.uniform(-1, 1, n)))
    v = r.standard_normal(n)
    cube = r.standard_normal((32, 64, 64))

    return {
        "smooth_ring": lambda: skyconv.smooth_map(
            m, fwhm=np.radians(1.0), method="ring", device=dev
        ),
        "smooth_auto": lambda: skyconv.smooth_map(m, fwhm=np.radians(0.3), device=dev),
        "alm2map": lambda: skyconv.alm2map(alm, nside, lmax=lmax, device=dev),
        "map2alm": lambda: skyconv.map2alm(m, lmax=lmax, device=dev),
        "grid": lambda: (
            skyconv.grid(
                lon,
                lat,
                v,
                skyconv.HealpixTarget(128),
                kernel_params=(0.3,),
                dtype="float64",
                device=dev,
            ).cube
        ),
        "gaussian_filter1d": lambda: filters.gaussian_filter1d(cube, 3.0, axis=0, device=dev),
        "smooth_and_clip": lambda: np.asarray(skyconv.smooth_and_clip(cube, device=dev)),
        "atrous_denoise": lambda: skyconv.atrous_denoise(cube, device=dev).data,
    }


def save(path: str) -> int:
    import skyconv

    info = skyconv.backend_info()["cuda"]
    out = {"toolkit": np.array(info["toolkit"] or 0), "nvrtc": np.array(info["nvrtc_version"])}
    for name, fn in calls().items():
        try:
            res = np.asarray(fn())
            times = []
            for _ in range(5):
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
        except Exception as e:  # report and go on: one failing call must not hide the rest
            print(f"{name}: {type(e).__name__}: {e}")
            continue
        out[name] = res
        out[name + ".time"] = np.array(min(times))
        print(f"{name:18s} {min(times) * 1e3:9.2f} ms")
    np.savez(path, **out)
    print(
        f"CUDA {info['toolkit']} (NVRTC {info['nvrtc_version']}, cuFFT "
        f"{(info['cufft'] or {}).get('version')}) -> {path}"
    )
    return 0


def compare(a_path: str, b_path: str, tol: float) -> int:
    a, b = np.load(a_path), np.load(b_path)
    print(f"A: CUDA {a['toolkit']} NVRTC {a['nvrtc']}   B: CUDA {b['toolkit']} NVRTC {b['nvrtc']}")
    bad = 0
    for name in sorted(
        k for k in a.files if not k.endswith(".time") and k not in ("toolkit", "nvrtc")
    ):
        if name not in b.files:
            print(f"{name:18s} missing in B")
            bad += 1
            continue
        x, y = a[name], b[name]
        if x.shape != y.shape:
            print(f"{name:18s} shapes differ {x.shape} {y.shape}")
            bad += 1
            continue
        if x.dtype == bool:
            rel = float(np.count_nonzero(x != y))
        elif not np.array_equal(np.isnan(x), np.isnan(y)):
            rel = float("inf")  # empty pixels (NaN) must be the same ones
        else:
            scale = float(np.nanmax(np.abs(x), initial=0.0)) or 1.0
            d = np.abs(x.astype(complex) - y.astype(complex))
            rel = float(np.nanmax(d, initial=0.0)) / scale
        ok = rel <= tol
        bad += not ok
        ta, tb = (float(x[name + ".time"]) * 1e3 for x in (a, b))
        print(
            f"{name:18s} max rel diff {rel:.2e} {'OK' if ok else 'FAIL'}   "
            f"A {ta:8.2f} ms   B {tb:8.2f} ms"
        )
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "save":
        return save(argv[1])
    if len(argv) >= 3 and argv[0] == "compare":
        tol = float(argv[argv.index("--tol") + 1]) if "--tol" in argv else 1e-12
        return compare(argv[1], argv[2], tol)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
