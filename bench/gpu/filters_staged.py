"""The whole-axis kernels of kernels/filters.cu (``correlate_lines<L>`` along x,
``correlate_whole<C>`` along y and z: à trous's passes) on the GPU through CuPy, from two
or more sources: checks that every such tile that fits gives the same bits (every mode, steps
1-64, tap counts 3, 5 and 7, float32 and float64) and times each pass of the à trous 256×512²
cube, with the tile the library picks, against its HBM floor (one read and one write of the
array, at a device-to-device copy's rate).

    python3 bench/gpu/filters_staged.py --base OLD.cu [--other NAME=FILE[,COMMON] ...]
        [--variant NAME=FROM=>TO ...] [--repeats 20]

``--base`` is the other source of filters.cu (e.g. ``git show main:kernels/filters.cu``), each
``--other`` one more (compiled after the source COMMON of kernels/common.cuh when given, e.g. a
branch's), and each ``--variant`` the working tree's source with FROM replaced by TO.
"""

from __future__ import annotations

import argparse
import functools
import os

import numpy as np
from filters_tiles import MODES, ROOT, launch, modules, tile_plan, timeit  # same folder

B3 = np.array([1, 4, 6, 4, 1]) / 16.0


def run(cp, mods, x, axis, w, step, mode, out=None, kernel=None):
    """One pass along `axis` of x, centred, with the tile the library picks (`kernel` None) or
    a named one that fits."""
    (chosen, smem), fits = tile_plan(x.shape, axis, len(w), step, x.dtype)
    if kernel is not None:
        chosen, smem = kernel, dict(fits)[kernel]
    off = -(len(w) // 2) * step
    return launch(cp, mods, x, axis, w, off, step, mode, 0.0, chosen, smem, out=out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--other", action="append", default=[])
    p.add_argument("--variant", action="append", default=[])
    p.add_argument("--repeats", type=int, default=20)
    a = p.parse_args()
    import cupy as cp

    new_src = open(os.path.join(ROOT, "kernels", "filters.cu")).read()
    srcs = {"base": open(a.base).read(), "new": new_src}
    commons = {}
    for o in a.other:
        name, paths = o.split("=", 1)
        path, _, common = paths.partition(",")
        srcs[name] = open(path).read()
        if common:
            commons[name] = open(common).read()
    for v in a.variant:
        name, rest = v.split("=", 1)
        frm, to = rest.split("=>", 1)
        assert frm in new_src, f"variant {name}: {frm!r} not in filters.cu"
        srcs[name] = new_src.replace(frm, to)
    mods = {k: modules(cp, s, commons.get(k)) for k, s in srcs.items()}
    print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode())

    rng = np.random.default_rng(1)
    checked = 0
    for dtype in (np.float32, np.float64):
        x = cp.asarray(rng.standard_normal((20, 70, 300)).astype(dtype))
        x[3, 5:9, 100:140] = cp.nan
        for axis in range(3):
            for w in (B3, np.array([0.25, 0.5, 0.25]), rng.standard_normal(7)):
                for step in (1, 2, 3, 4, 8, 16, 32, 64):
                    _, fits = tile_plan(x.shape, axis, len(w), step, dtype)
                    staged = [k for k, _ in fits if "whole" in k or "lines" in k]
                    for mode in MODES:
                        for kernel in staged:
                            ref = run(cp, mods["base"], x, axis, w, step, mode, kernel=kernel)
                            for k in mods:
                                got = run(cp, mods[k], x, axis, w, step, mode, kernel=kernel)
                                if not bool(cp.array_equal(ref, got, equal_nan=True)):
                                    raise SystemExit(f"DIFFER {k} {kernel} axis {axis} taps "
                                                     f"{len(w)} step {step} {mode}")  # fmt: skip
                                checked += 1
    print(f"bits: {checked} passes equal to base")

    big = cp.asarray(rng.standard_normal((256, 512, 512), dtype=np.float32))
    dst = cp.empty_like(big)
    copy_ms = timeit(cp, lambda: dst.__setitem__(Ellipsis, big), a.repeats)
    gbs = 2 * big.nbytes / copy_ms / 1e6
    floor = 2 * big.nbytes / gbs / 1e6
    print(f"device copy {gbs:.0f} GB/s; one pass floor {floor * 1e3:.0f} us")
    names = list(mods)
    print(f"{'pass':12s} " + " ".join(f"{k + ' us':>10s} {'x fl':>5s}" for k in names))
    tot = dict.fromkeys(names, 0.0)
    b3 = cp.asarray(B3)  # on the device once: no copy in the timed launches
    for axis, an in ((2, "x"), (1, "y"), (0, "z")):
        for s in range(6):
            row = []
            (kernel, smem), _ = tile_plan(big.shape, axis, len(B3), 2**s, big.dtype)
            off = -(len(B3) // 2) * 2**s
            for k in names:
                call = functools.partial(launch, cp, mods[k], big, axis, b3, off, 2**s, "mirror",
                                         0.0, kernel, smem, out=dst)  # fmt: skip
                ms = timeit(cp, call, a.repeats)
                tot[k] += ms
                row.append(f"{ms * 1e3:10.1f} {ms / floor:5.2f}")
            print(f"{an} step {2**s:<4d} " + " ".join(row))
    print(f"{'18 passes':12s} " + " ".join(f"{tot[k]:9.3f}m {tot[k] / 18 / floor:5.2f}"
                                         for k in names))  # fmt: skip


if __name__ == "__main__":
    main()
