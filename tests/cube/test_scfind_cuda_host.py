"""kernels/scfind.cu's sofia2_boxcar (SoFiA-2's boxcar arithmetic on the GPU) tested without a
GPU: compiled for the host and run in the SIMT emulator (tests/cuda_host/scfind_boxcar_emu.cpp)
in the order src/cube/scfind/cuda.rs launches it, in one piece and in z-slabs that carry the
spectral running mean; the smoothed cube must equal the plain float32 reference bit for bit.
Skipped when no C++ compiler is found."""

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


@pytest.mark.parametrize(
    "shape,rxy,passes,rz,step",
    [
        ((9, 7, 11), 1, 3, 1, None),
        ((13, 6, 10), 2, 6, 3, None),
        ((13, 6, 10), 2, 6, 3, 4),
        ((5, 70, 45), 2, 3, 1, 2),  # planes of several 32x32 tiles
        ((17, 5, 8), 0, 0, 7, 3),
        ((11, 8, 5), 3, 5, 2, 5),
        ((6, 4, 4), 1, 4, 10, 2),  # spectral window wider than the cube
    ],
)
def test_sofia2_boxcar_kernel_matches_reference(emu, tmp_path, rng, shape, rxy, passes, rz, step):
    cube = rng.normal(size=shape).astype(np.float32)
    cube[1, 2, :] = np.nan
    cube.tofile(tmp_path / "cube.bin")
    sl = slabs(shape[0], step, rz)
    params = [*shape, rxy, passes, rz, len(sl)] + [v for s in sl for v in s]
    np.array(params, dtype=np.int64).tofile(tmp_path / "params.bin")
    run = subprocess.run([str(emu), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    got = np.fromfile(tmp_path / "out.bin", dtype=np.float32).reshape(shape)
    want = np.where(np.isnan(cube), np.float32(0), cube)
    for _ in range(passes):
        want = boxcar_axis(want, rxy, 2)
    for _ in range(passes):
        want = boxcar_axis(want, rxy, 1)
    if rz:
        want = boxcar_axis(want, rz, 0)
    np.testing.assert_array_equal(got, want)
