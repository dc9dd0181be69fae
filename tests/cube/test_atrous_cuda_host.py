"""kernels/atrous.cu and kernels/filters.cu tested without a GPU: the CUDA à trous engine's
device code, compiled for the host and run in the SIMT emulator (tests/cuda_host/atrous_emu.cpp,
which drives it in src/cube/atrous/cuda.rs's launch order), must equal the CPU engine for both
variants, including DUCHAMP's 2-D loop and its BLANK value in blank pixels. Skipped when no C++
compiler is found.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from _cuda_host import build

import skyconv
from skyconv.atrous import DUCHAMP_BLANK, atrous_scales

from _refs import rel_err

WEIGHTS = {
    "b3spline": [1 / 16, 4 / 16, 6 / 16, 4 / 16, 1 / 16],
    "triangle": [1 / 4, 2 / 4, 1 / 4],
    "haar": [0.0, 1 / 2, 1 / 2],
}


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    return build(tmp_path_factory.mktemp("atrous_emu"), "atrous_emu")


def layout(shape, dim):
    """(units, len, unit_stride, elem_stride, unit_div, pass views) as src/cube/atrous lays
    them out; a pass view is (outer, n, inner) of the filtered axis."""
    shape = tuple(shape)
    total = int(np.prod(shape))
    if dim == 1:
        units = total // shape[0]
        lay = (units, shape[0], 1, units, 1)
        axes = [0]
    else:
        length = int(np.prod(shape[-dim:]))
        lay = (total // length, length, length, 1, length)
        axes = [len(shape) - 1, len(shape) - 2] if dim == 2 else [2, 1, 0]
    views = [(int(np.prod(shape[:a])), shape[a], int(np.prod(shape[a + 1 :]))) for a in axes]
    return lay, views


def run_emulated(exe, tmp_path, x, dim, filt, variant, snr=4.0, scale_min=1, scale_max=0):
    n, f = atrous_scales(x.shape, dim=dim, filter=filt, variant=variant)
    duchamp_2d = variant == "duchamp" and dim == 2
    loop = n - 1 if duchamp_2d else n
    kept = [
        s >= scale_min and (duchamp_2d or scale_max == 0 or s <= scale_max)
        for s in range(1, loop + 1)
    ]
    conv = 0.005
    if duchamp_2d:
        blanks = (DUCHAMP_BLANK, 0.0 if any(kept) else DUCHAMP_BLANK)
    else:
        blanks = (0.0, 0.0)
    lay, views = layout(x.shape, dim)
    ints = [x.size, *lay, loop, len(WEIGHTS[filt]), len(views)]
    ints += [v for view in views for v in view] + [int(k) for k in kept]
    np.asarray(ints, dtype=np.int64).tofile(tmp_path / "i64.bin")
    reals = [snr, conv, *blanks, *WEIGHTS[filt], *f[: loop + 1]]
    np.asarray(reals, dtype=np.float64).tofile(tmp_path / "f64.bin")
    np.ascontiguousarray(x, dtype=np.float64).tofile(tmp_path / "x.bin")
    run = subprocess.run([str(exe), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    out = np.fromfile(tmp_path / "out.bin", dtype=np.float64).reshape(x.shape)
    iters = np.fromfile(tmp_path / "iters.bin", dtype=np.int64)
    return out, iters


def sample(rng, shape, dim):
    x = rng.normal(size=shape)
    grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    for _ in range(3):
        centre = [rng.uniform(0, n) for n in shape]
        x += 7.0 * np.exp(-sum((g - c) ** 2 for g, c in zip(grids, centre, strict=True)) / 6.5)
    x[rng.random(shape) < 0.04] = np.nan
    axes = [0] if dim == 1 else range(len(shape) - dim, len(shape))
    for a in axes:  # a NaN border two pixels wide on each reconstructed axis' low side
        sl = [slice(None)] * len(shape)
        sl[a] = slice(0, 2)
        x[tuple(sl)] = np.nan
    return x


@pytest.mark.parametrize("variant", ["duchamp", "corrected"])
@pytest.mark.parametrize(
    "shape,dim,filt",
    [
        ((2, 23, 29), 2, "b3spline"),
        ((27, 21), 2, "triangle"),
        ((25, 3, 2), 1, "haar"),
        ((13, 15, 17), 3, "b3spline"),
    ],
)
def test_emulated_gpu_engine_equals_cpu(emu, tmp_path, rng, shape, dim, filt, variant):
    x = sample(rng, shape, dim)
    got, iters = run_emulated(emu, tmp_path, x, dim, filt, variant)
    want = skyconv.atrous_denoise(x, dim=dim, filter=filt, device="cpu", variant=variant)
    err = rel_err(got, want.data)
    print(f"{shape} dim {dim} {filt} {variant}: max |emu - cpu| / max |cpu| = {err:.1e}")
    assert err <= 1e-12
    np.testing.assert_array_equal(iters, np.asarray(want.iterations).reshape(-1))


def test_emulated_duchamp_2d_differs_from_corrected(emu, tmp_path, rng):
    """The emulated engine does follow the variant it is given (so the test above can fail)."""
    x = sample(rng, (31, 27), 2)
    d, _ = run_emulated(emu, tmp_path, x, 2, "b3spline", "duchamp")
    c = skyconv.atrous_denoise(x, dim=2, device="cpu", variant="corrected")
    assert rel_err(d, c.data) > 1e-2
