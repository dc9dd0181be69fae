"""The 1-D filter kernels of kernels/filters.cu on the GPU through CuPy: the per-tap kernel
(``correlate_*``) against the tiled ones, launched with the tile the library picks
(``skyconv._core._filter_tile_plan``, from ``src/cube/filters/cuda.rs``). Checks that every tile
that fits gives the per-tap kernel's bits on every mode, step and origin, then times the cube
passes of bench/cases/filters.py and the à trous B3 passes against the HBM floor (one read and
one write of the array), with each other tile that fits beside the plan's.

    python3 bench/gpu/filters_tiles.py [--repeats 20] [--hbm-gbs 3350]
"""

from __future__ import annotations

import argparse
import functools
import os
import re

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = {"constant": 0, "nearest": 1, "reflect": 2, "mirror": 3, "wrap": 4}


def module(cp):
    """The module's two compiles (float32; float64 with FILTERS_F64), by element type."""
    return modules(cp, open(os.path.join(ROOT, "kernels", "filters.cu")).read())


def modules(cp, filters_src, common_src=None):
    """float32 and float64 compiles of a filters.cu source, after kernels/common.cuh (or the
    source `common_src` of another)."""
    if common_src is None:
        common_src = open(os.path.join(ROOT, "kernels", "common.cuh")).read()
    src = common_src + filters_src
    src = src.replace("#pragma once", "")
    opts = ("--std=c++17",)
    return {
        np.float32: cp.RawModule(code=src, options=opts),
        np.float64: cp.RawModule(code=src, options=opts + ("-DFILTERS_F64",)),
    }


def tile_plan(shape, axis, taps, step, dtype, offset=None):
    """((kernel, shared bytes) the library runs on GPU 0, [(kernel, bytes) of every tile that
    fits]) for a pass whose first tap is `offset` from its output (None: centred)."""
    from skyconv import _core

    name = np.dtype(dtype).name
    return _core._filter_tile_plan(list(shape), axis, taps, step, name, offset=offset, gpu=0)


def launch(cp, mod, x, axis, w, offset, step, mode, cval, kernel, smem, scale=1.0, out=None):
    """One pass of `kernel` (a name of ``tile_plan``, ``smem`` its shared bytes) along `axis`."""
    f = mod[x.dtype.type].get_function(kernel)
    if smem > 48 * 1024:  # past what a launch gets without opting in (`cuda::allow_shared`)
        f.max_dynamic_shared_size_bytes = smem
    kind, k = re.fullmatch(r"correlate_(?:(cols|lines|line|whole)(\d+)_)?f(32|64)",
                           kernel).groups()[:2]  # fmt: skip
    k = int(k) if k else 0
    shape = x.shape
    outer = int(np.prod(shape[:axis]))
    n = shape[axis]
    inner = int(np.prod(shape[axis + 1 :]))
    out = cp.empty_like(x) if out is None else out
    dw = w if isinstance(w, cp.ndarray) else cp.asarray(np.asarray(w, dtype=np.float64))
    i64 = np.int64
    rows = (i64(0), i64(0), i64(n))  # out_row0, in_row0, n_global
    tail = (dw, np.int32(len(w)), i64(offset), i64(step), np.float64(scale),
            np.int32(MODES[mode]), np.float64(cval))  # fmt: skip
    if kind is None:
        fdim, sdim = (n, outer) if inner == 1 else (inner, outer * n)
        grid = (-(-fdim // 256), min(sdim, 65535), 1)
        f(grid, (256, 1, 1), (x, out, i64(outer), i64(n), i64(inner), i64(n)) + rows + tail
          + (i64(0), i64(sdim), i64(0), i64(fdim)))  # fmt: skip
    elif kind == "cols":
        per_phase = -(-n // step)  # outputs of a phase
        qt = -(-per_phase // (8 * k))
        units = outer * step
        grid = (-(-inner // 32), min(qt, 65535), min(units, 65535))
        f(grid, (32, 8, 1), (x, out, i64(n), i64(inner), i64(n)) + rows + tail
          + (i64(0), i64(units), i64(0), i64(qt)), shared_mem=smem)  # fmt: skip
    elif kind == "line":
        nw = -(-n // (256 * k))
        f((nw, min(outer, 65535), 1), (256, 1, 1), (x, out, i64(n), i64(n)) + rows + tail
          + (i64(0), i64(outer), i64(0), i64(nw)), shared_mem=smem)  # fmt: skip
    elif kind == "whole":
        items = outer * -(-inner // k)
        f((items, 1, 1), (256, 1, 1), (x, out, i64(n), i64(inner)) + tail
          + (i64(0), i64(items)), shared_mem=smem)  # fmt: skip
    else:  # lines: k lines a block
        items = -(-outer // k)
        f((items, 1, 1), (256, 1, 1), (x, out, i64(outer), i64(n)) + tail
          + (i64(0), i64(items)), shared_mem=smem)  # fmt: skip
    return out


def run(cp, mod, x, axis, w, offset, step, mode, cval, kernel=None, scale=1.0):
    """One pass with the library's tile (`kernel` None), the per-tap kernel ("axis") or a named
    tile that fits; returns (output, kernel)."""
    (chosen, smem), fits = tile_plan(x.shape, axis, len(w), step, x.dtype, offset)
    sfx = "f32" if x.dtype == np.float32 else "f64"
    if kernel == "axis":
        chosen, smem = f"correlate_{sfx}", 0
    elif kernel is not None:
        chosen, smem = kernel, dict(fits)[kernel]
    out = launch(cp, mod, x, axis, w, offset, step, mode, cval, chosen, smem, scale)
    return out, chosen


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
                            _, fits = tile_plan(shape, axis, taps, step, dtype, off)
                            a, _ = run(cp, mod, x, axis, w, off, step, mode, 1.5, "axis", 0.7)
                            for kernel in [None] + [k for k, _ in fits]:
                                b, k = run(cp, mod, x, axis, w, off, step, mode, 1.5, kernel, 0.7)
                                if not bool(cp.array_equal(a, b)):
                                    d = float(cp.max(cp.abs(a - b)))
                                    raise SystemExit(f"DIFFER {dtype.__name__} {shape} axis "
                                                     f"{axis} taps {taps} step {step} {mode} "
                                                     f"origin {origin} ({k}): max |diff| "
                                                     f"{d:.3g}")  # fmt: skip
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
    print(f"{'case':16s} {'tile':14s} {'per-tap ms':>10s} {'tiled ms':>9s} {'floor ms':>9s} "
          f"{'x floor':>8s} {'speed-up':>8s}")  # fmt: skip
    for name, x, ax, w, step, mode in cases:
        off = -(len(w) // 2) * step
        call = functools.partial(run, cp, mod, x, ax, cp.asarray(w), off, step, mode, 0.0)
        old = timeit(cp, functools.partial(call, "axis"), a.repeats)
        new = timeit(cp, call, a.repeats)
        (k, _), fits = tile_plan(x.shape, ax, len(w), step, x.dtype)
        floor = 2 * x.nbytes / gbs / 1e6
        scan = []
        for kk, _ in fits:
            ms = timeit(cp, functools.partial(call, kk), a.repeats)
            scan.append(f"{kk.removeprefix('correlate_')} {ms:.3f}")
        if name.startswith("b3"):
            tot["axis"] += old
            tot["tiled"] += new
            tot["floor"] += floor
        tile = k.removeprefix("correlate_")
        print(f"{name:16s} {tile:14s} {old:10.3f} {new:9.3f} {floor:9.3f} "
              f"{new / floor:8.2f} {old / new:8.2f}   [{', '.join(scan)}]")  # fmt: skip
    print(f"à trous B3 passes of one iteration (6 scales x 3 axes): per-tap {tot['axis']:.2f} ms, "
          f"tiled {tot['tiled']:.2f} ms, floor {tot['floor']:.2f} ms "
          f"({tot['tiled'] / tot['floor']:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
