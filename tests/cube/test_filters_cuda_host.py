"""kernels/filters.cu's tiled kernels tested without a GPU: along an inner axis
``correlate_whole<C>`` (C = 8, 16, 32 columns of the whole axis a block) and
``correlate_cols<R>`` (R = 1, 2, 4, 8 outputs of one phase a thread), along the last one
``correlate_lines<L>`` (L = 1, 2, 8 whole lines a block) and ``correlate_line<R>`` (windows of
256·R outputs, R = 1, 3, 5), compiled for the host and run in the SIMT emulator
(tests/cuda_host/filters_emu.cpp), plain and with the à trous split fused into their stores,
give the bits of the per-tap kernel ``correlate_axis`` (then the split): every boundary mode,
3-7 taps 1-64 apart, first taps before, around and after the output (halo on one side only),
partial last blocks, rows that stage in 16-byte words and rows that do not, NaN inputs and
blanks. The per-tap kernel itself equals ``scipy.ndimage.correlate1d``.

The GPU contracts the per-tap kernel's ``acc += w·x`` into fused multiply-adds, which the
whole-axis kernels write as ``fma``: the emulator is compiled with ``-mfma
-ffp-contract=fast`` to match, so these tests need an x86-64 CPU with FMA (else skipped).
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _cuda_host import build

from skyconv import _core

ndi = pytest.importorskip("scipy.ndimage")

MODES = ["constant", "nearest", "reflect", "mirror", "wrap"]  # Rust `Mode::code` order
# (taps, step, offset of the first tap): centred, shifted, every tap before the output (no
# halo after), every tap at or after it (none before), steps that are not powers of two, and
# steps longer than the axis.
PASSES = [(3, 1, -1), (5, 1, -2), (3, 1, 0), (5, 2, -3), (3, 4, -12), (5, 3, -6), (7, 8, -25),
          (5, 64, -128)]  # fmt: skip
LAYOUTS = {  # (outer, n, inner)
    "last axis, unaligned rows, a partial group of 8 lines": (11, 37, 1),
    "last axis, 16-byte rows, two windows of 256": (5, 300, 1),
    "inner axis, unaligned rows, a partial block of 32": (3, 37, 45),
    "inner axis, 16-byte rows": (2, 30, 64),
}


def _has_fma() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        return " fma " in Path("/proc/cpuinfo").read_text().replace("\n", " ")
    except OSError:
        return False


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    if not _has_fma():
        pytest.skip("no x86-64 FMA: the GPU's contracted sums cannot be matched on this CPU")
    flags = ("-mfma", "-ffp-contract=fast")
    return build(tmp_path_factory.mktemp("filters_emu"), "filters_emu", flags)


def _inputs(rng, shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    x.reshape(-1)[rng.random(x.size) < 0.02] = np.nan
    c = (0.5 * rng.standard_normal(shape)).astype(dtype)
    data = x.copy()
    data.reshape(-1)[rng.random(x.size) < 0.05] = np.inf  # blanks of the split
    return x, c, data


def _run(emu, tmp_path, x, c, data, w, offset, step, mode, cval, scale):
    for name, a in (("in", x), ("c", c), ("data", data)):
        a.tofile(tmp_path / f"{name}.bin")
    np.asarray(w, dtype=np.float64).tofile(tmp_path / "w.bin")
    outer, n, inner = x.shape
    ty = "f32" if x.dtype == np.float32 else "f64"
    # every tile the library lets this pass take (within a block's shared memory)
    _, fits = _core._filter_tile_plan(list(x.shape), 1, len(w), step, x.dtype.name,
                                      offset=offset)  # fmt: skip
    tiles = [name.removeprefix("correlate_").removesuffix(f"_{ty}") for name, _ in fits]
    nums = (outer, n, inner, len(w), offset, step, MODES.index(mode))
    args = [str(emu), str(tmp_path), ty, *map(str, nums), repr(cval), repr(scale), *tiles]
    run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr

    def read(name):
        return np.fromfile(tmp_path / f"{name}.bin", dtype=x.dtype).reshape(x.shape)

    return read, tiles


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_emulated_tiled_kernels_equal_the_per_tap_kernel(emu, tmp_path, rng, layout, dtype):
    shape = LAYOUTS[layout]
    x, c, data = _inputs(rng, shape, dtype)
    # the whole inner axes stage cval as T: one T holds exactly (filters/cuda.rs `halo_rows`);
    # every other tile stages it as double, so any
    cval = 0.7 if shape[2] == 1 or dtype == np.float64 else 1.5
    tiles = set()
    for taps, step, offset in PASSES:
        w = rng.standard_normal(taps)
        for mode in MODES:
            read, ran = _run(emu, tmp_path, x, c, data, w, offset, step, mode, cval, 0.75)
            tiles.update(ran)
            for out in ("", "_split_w", "_split_c"):
                want = read("axis" + out)
                for tile in ran:
                    np.testing.assert_array_equal(
                        read(tile + out), want, err_msg=f"{tile}{out} {taps} {step} {offset} {mode}"
                    )
    if shape[2] == 1:
        assert tiles == {"lines1", "lines2", "lines8", "line1", "line3", "line5"}
    else:
        assert tiles == {"whole8", "whole16", "whole32", "cols1", "cols2", "cols4", "cols8"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(4, 23, 1), (3, 23, 9)])
def test_emulated_per_tap_kernel_equals_scipy(emu, tmp_path, rng, shape, mode):
    """The reference of the test above is scipy's filter: centred and shifted (origin ±1)."""
    x, c, data = _inputs(rng, shape, np.float64)
    axis = 2 if shape[2] == 1 else 1
    view = x.reshape(shape[:2]) if shape[2] == 1 else x
    for taps, origin in ((3, 0), (5, 1), (5, -1)):
        w = rng.standard_normal(taps)
        read, _ = _run(emu, tmp_path, x, c, data, w, -(taps // 2) - origin, 1, mode, 0.7, 0.75)
        want = 0.75 * ndi.correlate1d(view, w, axis=axis - (shape[2] == 1), mode=mode,
                                      cval=0.7, origin=origin)  # fmt: skip
        np.testing.assert_allclose(read("axis").reshape(want.shape), want, rtol=1e-12,
                                   atol=1e-12, err_msg=f"{taps} {origin} {mode}")  # fmt: skip
