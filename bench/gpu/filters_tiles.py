"""The 1-D filter kernels of kernels/filters.cu on the GPU through CuPy: the per-tap kernel
(``correlate_*``) against the tiled ones (``correlate_cols*`` / ``correlate_line*``), launched
with the tile choice of ``src/cube/filters/cuda.rs``. Checks that both give the same bits on
every mode, step and origin, then times the cube passes of bench/cases/filters.py and the à
trous B3 passes against the HBM floor (one read and one write of the array).

    python3 bench/gpu/filters_tiles.py [--repeats 20] [--hbm-gbs 3350]
"""

from __future__ import annotations

import argparse
import functools
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = {"constant": 0, "nearest": 1, "reflect": 2, "mirror": 3, "wrap": 4}
SMEM = 48 * 1024


def module(cp):
    """The module's two compiles (float32; float64 with FILTERS_F64), by element type."""
    src = open(os.path.join(ROOT, "kernels", "common.cuh")).read()
    src += open(os.path.join(ROOT, "kernels", "filters.cu")).read()
    src = src.replace("#pragma once", "")
    return {
        np.float32: cp.RawModule(code=src, options=("--std=c++17",)),
        np.float64: cp.RawModule(code=src, options=("--std=c++17", "-DFILTERS_F64")),
    }


def even(t):
    return (t + 1) & ~1


def smem_of(kind, r, taps, step):
    if kind == "line":
        return 8 * (even(taps) + 256 * r + (taps - 1) * step)
    return 8 * (even(taps) + (8 * r + taps - 1) * 32)


def plan(shape, axis, taps, step):
    """(kind, R, shared bytes) as filters/cuda.rs chooses them."""
    n = shape[axis]
    inner = int(np.prod(shape[axis + 1 :]))
    if inner == 1:
        want = 5 if n >= 1280 else 3 if n >= 512 else 1
        if 256 % step:
            want = 1
        for r in (want, 1):
            if smem_of("line", r, taps, step) <= SMEM:
                return "line", r, smem_of("line", r, taps, step)
        return "axis", 0, 0
    rows = -(-n // step)
    r = 8 if rows >= 64 else 4 if rows >= 32 else 2 if rows >= 16 else 1
    while r >= 1:
        if smem_of("cols", r, taps, step) <= SMEM:
            return "cols", r, smem_of("cols", r, taps, step)
        r //= 2
    return "axis", 0, 0


def run(cp, mod, x, axis, w, offset, step, mode, cval, kind=None, scale=1.0, force=None):
    sfx = "f32" if x.dtype == np.float32 else "f64"
    mod = mod[x.dtype.type]
    shape = x.shape
    outer = int(np.prod(shape[:axis]))
    n = shape[axis]
    inner = int(np.prod(shape[axis + 1 :]))
    out = cp.empty_like(x)
    taps = len(w)
    dw = w if isinstance(w, cp.ndarray) else cp.asarray(np.asarray(w, dtype=np.float64))
    i64 = np.int64
    k, r, smem = plan(shape, axis, taps, step) if kind is None else (kind, 0, 0)
    if force is not None:  # (kind, R): a tile other than the plan's, for the scan
        k, r = force
        smem = smem_of(k, r, taps, step)
    common = (i64(0), i64(0), i64(n))  # out_row0, in_row0, n_global
    tail = (dw, np.int32(taps), i64(offset), i64(step), np.float64(scale), np.int32(MODES[mode]),
            np.float64(cval))  # fmt: skip
    if k == "axis":
        f = mod.get_function(f"correlate_{sfx}")
        fdim, sdim = (n, outer) if inner == 1 else (inner, outer * n)
        grid = (-(-fdim // 256), min(sdim, 65535), 1)
        f(grid, (256, 1, 1), (x, out, i64(outer), i64(n), i64(inner), i64(n)) + common + tail
          + (i64(0), i64(sdim), i64(0), i64(fdim)))  # fmt: skip
    elif k == "cols":
        f = mod.get_function(f"correlate_cols{r}_{sfx}")
        rows = -(-n // step)
        qt = -(-rows // (8 * r))
        units = outer * step
        grid = (-(-inner // 32), min(qt, 65535), min(units, 65535))
        f(grid, (32, 8, 1), (x, out, i64(n), i64(inner), i64(n)) + common + tail
          + (i64(0), i64(units), i64(0), i64(qt)), shared_mem=smem)  # fmt: skip
    else:
        f = mod.get_function(f"correlate_line{r}_{sfx}")
        nw = -(-n // (256 * r))
        grid = (nw, min(outer, 65535), 1)
        f(grid, (256, 1, 1), (x, out, i64(n), i64(n)) + common + tail
          + (i64(0), i64(outer), i64(0), i64(nw)), shared_mem=smem)  # fmt: skip
    return out, k, r


def check(cp, mod):
    rng = np.random.default_rng(3)
    cases = 0
    for dtype in (np.float32, np.float64):
        for shape in ((7, 33, 45), (3, 5, 300), (2, 1000), (70, 3, 2), (1, 1, 1700)):
            x = cp.asarray(rng.standard_normal(shape).astype(dtype))
            for axis in range(len(shape)):
                for taps, step in ((1, 1), (3, 1), (5, 2), (5, 3), (21, 1), (7, 8), (5, 32)):
                    w = rng.standard_normal(taps)
                    for mode in MODES:
                        for origin in (0, 1):
                            off = -(taps // 2) * step - origin
                            a, _, _ = run(cp, mod, x, axis, w, off, step, mode, 1.5, "axis", 0.7)
                            b, k, r = run(cp, mod, x, axis, w, off, step, mode, 1.5, None, 0.7)
                            if not bool(cp.array_equal(a, b)):
                                d = float(cp.max(cp.abs(a - b)))
                                raise SystemExit(f"DIFFER {dtype.__name__} {shape} axis {axis} "
                                                 f"taps {taps} step {step} {mode} origin {origin}"
                                                 f" ({k}{r}): max |diff| {d:.3g}")  # fmt: skip
                            cases += 1
    print(f"bit-identical to the per-tap kernel: {cases} cases")


def timeit(cp, fn, repeats):
    fn()
    cp.cuda.Device().synchronize()
    ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(repeats)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    cp.cuda.Device().synchronize()
    t = sorted(cp.cuda.get_elapsed_time(a, b) for a, b in ev)
    return t[len(t) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--hbm-gbs", type=float, default=None,
                   help="HBM rate for the floor (default: a device-to-device copy's)")  # fmt: skip
    p.add_argument("--no-check", action="store_true")
    a = p.parse_args()
    import cupy as cp

    mod = module(cp)
    print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    if not a.no_check:
        check(cp, mod)
    rng = np.random.default_rng(1)
    small = cp.asarray(rng.standard_normal((128, 512, 512), dtype=np.float32))
    big = cp.asarray(rng.standard_normal((256, 512, 512), dtype=np.float32))
    dst = cp.empty_like(big)
    copy_ms = timeit(cp, lambda: dst.__setitem__(Ellipsis, big), a.repeats)
    gbs = a.hbm_gbs or 2 * big.nbytes / copy_ms / 1e6
    print(f"device copy {2 * big.nbytes / copy_ms / 1e6:.0f} GB/s (read + write); floor at "
          f"{gbs:.0f} GB/s")  # fmt: skip
    sigma = 2.55
    g = np.exp(-0.5 * (np.arange(-int(4 * sigma + 0.5), int(4 * sigma + 0.5) + 1) / sigma) ** 2)
    g /= g.sum()
    b3 = np.array([1, 4, 6, 4, 1]) / 16.0
    cases = [("gauss_y", small, 1, g, 1, "reflect"), ("gauss_x", small, 2, g, 1, "reflect"),
             ("box_z", small, 0, np.ones(7) / 7, 1, "reflect")]  # fmt: skip
    for s in range(6):
        for ax, name in ((0, "z"), (1, "y"), (2, "x")):
            cases.append((f"b3_{name}_step{2**s}", big, ax, b3, 2**s, "mirror"))
    tot = {"axis": 0.0, "tiled": 0.0, "floor": 0.0}
    print(f"{'case':16s} {'tile':6s} {'per-tap ms':>10s} {'tiled ms':>9s} {'floor ms':>9s} "
          f"{'x floor':>8s} {'speed-up':>8s}")  # fmt: skip
    for name, x, ax, w, step, mode in cases:
        off = -(len(w) // 2) * step
        call = functools.partial(run, cp, mod, x, ax, cp.asarray(w), off, step, mode, 0.0)
        old = timeit(cp, functools.partial(call, "axis"), a.repeats)
        new = timeit(cp, call, a.repeats)
        _, k, r = run(cp, mod, x, ax, w, off, step, mode, 0.0)
        floor = 2 * x.nbytes / gbs / 1e6
        inner = int(np.prod(x.shape[ax + 1 :]))
        kind = "line" if inner == 1 else "cols"
        rs = (1, 3, 5) if kind == "line" else (1, 2, 4, 8)
        if kind == "line" and 256 % step:
            rs = (1,)
        scan = []
        for rr in rs:
            if smem_of(kind, rr, len(w), step) <= SMEM:
                ms = timeit(cp, functools.partial(call, force=(kind, rr)), a.repeats)
                scan.append(f"{kind}{rr} {ms:.3f}")
        if name.startswith("b3"):
            tot["axis"] += old
            tot["tiled"] += new
            tot["floor"] += floor
        print(f"{name:16s} {k + str(r):6s} {old:10.3f} {new:9.3f} {floor:9.3f} "
              f"{new / floor:8.2f} {old / new:8.2f}   [{', '.join(scan)}]")  # fmt: skip
    print(f"à trous B3 passes of one iteration (6 scales x 3 axes): per-tap {tot['axis']:.2f} ms, "
          f"tiled {tot['tiled']:.2f} ms, floor {tot['floor']:.2f} ms "
          f"({tot['tiled'] / tot['floor']:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
