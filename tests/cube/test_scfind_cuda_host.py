"""kernels/scfind.cu's sofia2_boxcars (SoFiA-2's boxcar arithmetic on the GPU, several boxcars
of an axis fused into one sweep) tested without a GPU: compiled for the host and run in the SIMT
emulator (tests/cuda_host/scfind_boxcar_emu.cpp) in the order and launch groups
src/cube/scfind/cuda.rs uses, in one piece and in z-slabs that carry the spectral running mean;
the smoothed cube must equal the plain float32 reference (one boxcar after the other) bit for
bit, both through the generic kernels and through the register-ring ones
(sofia2_boxcar_{rows,lines}_fixed, chains of one radius: SoFiA-2's default). The values are
prepared first (NaN and blanks as 0, masked voxels replaced), by the
prepare pass or on the way in the first transpose, as the engine does. Skipped when no C++
compiler is found."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from _cuda_host import build
from _sofia2_exact_ref import boxcar_axis


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    return build(tmp_path_factory.mktemp("scfind_emu"), "scfind_boxcar_emu")


def slabs(nz, step, rz):
    """The engine's slabs for the exact spectral boxcar: halo rz below, rz + 1 above."""
    if step is None:
        return [(0, nz, 0, 0)]
    return [(z0, min(z0 + step, nz), rz, rz + 1) for z0 in range(0, nz, step)]


# the mask bits and replacement kinds of kernels/scfind.cu
MASKED, BLANK = 1, 0x80
NONE, SIGN, COPYSIGN = 0, 1, 2
F32, F64 = np.float32, np.float64


def prepared(cube, mask, kind, value):
    """What the smoothing sees: 0 for NaN and blank voxels, MASKED ones replaced."""
    v = cube.dtype.type(value)
    masked = (mask & MASKED) != 0
    out = cube.copy()
    if kind == SIGN:
        out = np.where(masked & (cube > 0), v, np.where(masked & (cube < 0), -v, out))
    elif kind == COPYSIGN:
        out = np.where(masked, np.copysign(v, cube), out)
    return np.where(np.isnan(cube) | ((mask & BLANK) != 0), cube.dtype.type(0), out)


@pytest.mark.parametrize(
    "shape,rx,ry,rz,step,kind,dtype",
    [
        ((9, 7, 11), [1] * 3, [1] * 3, 1, None, SIGN, F32),
        ((13, 6, 10), [2] * 6, [2] * 6, 3, None, NONE, F32),  # two launches an axis (4 + 2 fused)
        ((13, 6, 10), [2] * 6, [2] * 6, 3, 4, COPYSIGN, F32),
        ((5, 70, 45), [2] * 3, [2] * 3, 1, 2, SIGN, F32),  # 350 rows: 11 warps' tiles, 2 a row
        ((17, 5, 8), [], [], 7, 3, SIGN, F32),  # no x boxcars: the prepare pass of its own
        ((11, 8, 5), [3] * 5, [3] * 5, 2, 5, NONE, F32),  # y: the ring holds 2 radius-3 passes
        ((6, 4, 4), [1] * 4, [1] * 4, 10, 2, SIGN, F32),  # spectral window wider than the cube
        ((7, 40, 33), [1, 2, 3], [3, 1], 0, None, COPYSIGN, F32),  # mixed radii; short lines
        ((4, 9, 30), [9, 1, 1], [8, 2], 1, None, SIGN, F32),  # y: radius 8 is not ring-fed
        ((3, 6, 21), [4, 4, 4, 4, 4], [], 0, None, NONE, F32),  # x: 3 + 2 (rings of 9)
        ((5, 6, 7), [], [2, 2, 2], 1, None, COPYSIGN, F32),
        ((3, 11, 45), [16, 1], [1], 0, None, SIGN, F32),  # x: a ring of 33: on transposed planes
        ((2, 33, 100), [15], [1, 1], 2, None, COPYSIGN, F32),  # x: one ring of 31, lag 15
        # float64: rings of 16 (rows) and 8 (lines) slots, 2 warps a block of rows
        ((5, 70, 45), [2] * 3, [2] * 3, 1, 2, SIGN, F64),  # x 3, y 2 + 1 launches
        ((3, 11, 45), [8, 1], [3, 1], 0, None, COPYSIGN, F64),  # x: ring of 17: transposed
        ((4, 9, 30), [1, 1, 1, 1, 1], [1] * 4, 3, 2, NONE, F64),
        # long lines: the register-ring kernels' unchecked chunks (rows of 100: 32 + lag < 68)
        ((40, 80, 100), [2] * 3, [2] * 3, 7, None, SIGN, F32),  # SoFiA-2's default, size 6
        ((33, 71, 100), [1] * 3, [1] * 3, 3, None, COPYSIGN, F32),  # size 3, spectral 7
        ((30, 40, 97), [4] * 4, [3] * 6, 8, None, NONE, F32),  # 4 passes; 3 + 3; radius 8
        ((25, 37, 70), [2] * 6, [1, 1, 2, 2, 2], 5, None, SIGN, F64),
        ((20, 50, 64), [3] * 5, [4] * 7, 6, 7, COPYSIGN, F64),  # slabs: spectral carried
        # rows whose output 0 is the warm-up's (no tile after it), and whose first tile ends
        # exactly at the line's end (t0 = lag + 1, t0 + 31 = top: unchecked)
        ((5, 40, 1), [1] * 3, [2] * 3, 1, None, SIGN, F32),
        ((3, 33, 36), [1] * 3, [1] * 3, 0, None, NONE, F32),
    ],
)
@pytest.mark.parametrize("mode", ["generic", "fixed"])
def test_sofia2_boxcars_kernel_matches_reference(
    emu, tmp_path, rng, shape, rx, ry, rz, step, kind, dtype, mode
):
    cube = rng.normal(size=shape).astype(dtype)
    cube[1, 2, :] = np.nan
    cube[0, 1, min(3, shape[2] - 1)] = np.inf  # inf - inf = NaN inside a pass: read as 0 next
    cube[-1, 0, :2] = 0.0
    mask = np.where(rng.random(shape) < 0.2, MASKED, 0).astype(np.uint8)
    mask[-1, 0, :] |= MASKED
    mask[-1, -1, -1] = BLANK
    cube.tofile(tmp_path / "cube.bin")
    mask.tofile(tmp_path / "mask.bin")
    np.array([kind, 2.5, cube.itemsize], dtype=np.float64).tofile(tmp_path / "replace.bin")
    sl = slabs(shape[0], step, rz)
    params = [*shape, rz, len(sl), len(rx), *rx, len(ry), *ry] + [v for s in sl for v in s]
    np.array(params, dtype=np.int64).tofile(tmp_path / "params.bin")
    run = subprocess.run(
        [str(emu), str(tmp_path), mode], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    got = np.fromfile(tmp_path / "out.bin", dtype=dtype).reshape(shape)
    want = prepared(cube, mask, kind, 2.5)
    for r in rx:
        want = boxcar_axis(want, r, 2)
    for r in ry:
        want = boxcar_axis(want, r, 1)
    if rz:
        want = boxcar_axis(want, rz, 0)
    np.testing.assert_array_equal(got, want)
