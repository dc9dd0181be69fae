"""The whole-axis kernels of kernels/filters.cu (``correlate_lines<L>`` along x,
``correlate_whole<C>`` along y and z: à trous's passes) on the GPU through CuPy, from two
sources: checks that they give the same bits (every mode, steps 1-32, tap counts 3, 5 and 7,
float32 and float64) and times each pass of the à trous 256×512² cube against its HBM floor
(one read and one write of the array, at a device-to-device copy's rate).

    python3 bench/gpu/filters_staged.py --base OLD.cu [--other NAME=FILE ...]
        [--variant NAME=FROM=>TO ...] [--repeats 20]

``--base`` is the other source of filters.cu (e.g. ``git show main:kernels/filters.cu``), each
``--other`` one more, and each ``--variant`` the working tree's source with FROM replaced by TO.
"""

from __future__ import annotations

import argparse
import functools
import os

import numpy as np
from filters_tiles import timeit  # same folder: the scripts run as files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = {"constant": 0, "nearest": 1, "reflect": 2, "mirror": 3, "wrap": 4}
B3 = np.array([1, 4, 6, 4, 1]) / 16.0


def modules(cp, filters_src):
    """float32 and float64 compiles of a filters.cu source."""
    src = open(os.path.join(ROOT, "kernels", "common.cuh")).read() + filters_src
    src = src.replace("#pragma once", "")
    opts = ("--std=c++17",)
    return {
        np.float32: cp.RawModule(code=src, options=opts),
        np.float64: cp.RawModule(code=src, options=opts + ("-DFILTERS_F64",)),
    }


def run(cp, mods, x, axis, w, step, mode, out=None):
    """One pass along `axis` of the 3-D array x: lines8 along the last axis, whole16 along
    y, whole32 along z (as filters/cuda.rs picks them for 256×512²)."""
    mod = mods[x.dtype.type]
    sfx = "f32" if x.dtype == np.float32 else "f64"
    nz, ny, nx = x.shape
    out = cp.empty_like(x) if out is None else out
    taps = len(w)
    dw = cp.asarray(np.asarray(w, dtype=np.float64))
    i64 = np.int64
    off = -(taps // 2) * step
    wbytes = 8 * ((taps + 1) & ~1)
    tail = (dw, np.int32(taps), i64(off), i64(step), np.float64(1.0), np.int32(MODES[mode]),
            np.float64(0.0))  # fmt: skip
    if axis == 2:
        L = 8
        items = -(-nz * ny // L)
        f = mod.get_function(f"correlate_lines{L}_{sfx}")
        smem = wbytes + L * nx * 8
        args = (x, out, i64(nz * ny), i64(nx)) + tail + (i64(0), i64(items))
    else:
        C = 16 if axis == 1 else 32
        outer, n, inner = (nz, ny, nx) if axis == 1 else (1, nz, ny * nx)
        items = outer * -(-inner // C)
        f = mod.get_function(f"correlate_whole{C}_{sfx}")
        smem = wbytes + n * C * x.dtype.itemsize
        args = (x, out, i64(n), i64(inner)) + tail + (i64(0), i64(items))
    f.max_dynamic_shared_size_bytes = smem
    f((items, 1, 1), (256, 1, 1), args, shared_mem=smem)
    return out


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
    for o in a.other:
        name, path = o.split("=", 1)
        srcs[name] = open(path).read()
    for v in a.variant:
        name, rest = v.split("=", 1)
        frm, to = rest.split("=>", 1)
        assert frm in new_src, f"variant {name}: {frm!r} not in filters.cu"
        srcs[name] = new_src.replace(frm, to)
    mods = {k: modules(cp, s) for k, s in srcs.items()}
    print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode())

    rng = np.random.default_rng(1)
    checked = 0
    for dtype in (np.float32, np.float64):
        x = cp.asarray(rng.standard_normal((20, 70, 300)).astype(dtype))
        x[3, 5:9, 100:140] = cp.nan
        for axis in range(3):
            for w in (B3, np.array([0.25, 0.5, 0.25]), rng.standard_normal(7)):
                for step in (1, 2, 4, 8, 16, 32):
                    for mode in MODES:
                        ref = run(cp, mods["base"], x, axis, w, step, mode)
                        for k in mods:
                            got = run(cp, mods[k], x, axis, w, step, mode)
                            if not bool(cp.array_equal(ref, got, equal_nan=True)):
                                raise SystemExit(f"DIFFER {k} {dtype.__name__} axis {axis} "
                                                 f"taps {len(w)} step {step} {mode}")  # fmt: skip
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
    for axis, an in ((2, "x"), (1, "y"), (0, "z")):
        for s in range(6):
            row = []
            for k in names:
                call = functools.partial(run, cp, mods[k], big, axis, B3, 2**s, "mirror", dst)
                ms = timeit(cp, call, a.repeats)
                tot[k] += ms
                row.append(f"{ms * 1e3:10.1f} {ms / floor:5.2f}")
            print(f"{an} step {2**s:<4d} " + " ".join(row))
    print(f"{'18 passes':12s} " + " ".join(f"{tot[k]:9.3f}m {tot[k] / 18 / floor:5.2f}"
                                         for k in names))  # fmt: skip


if __name__ == "__main__":
    main()
