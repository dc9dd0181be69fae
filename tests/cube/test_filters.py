"""skyconv.filters against scipy.ndimage: every function, mode, axis, dtype; CPU and GPU."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import scipy.ndimage as ndi

import skyconv
from skyconv import _core, filters

from _refs import rel_err

MODES = ["constant", "nearest", "reflect", "mirror", "wrap"]
TOL = {np.float32: 1e-6, np.float64: 1e-12}
SHAPES = [(37,), (5, 1), (1, 9), (6, 7, 8), (3, 40, 5), (17, 4, 33)]


def _cases(rng, n):
    """Random (shape, axis, mode, dtype) draws covering every mode and dtype."""
    out = []
    for i in range(n):
        shape = SHAPES[i % len(SHAPES)]
        out.append(
            (
                shape,
                int(rng.integers(-len(shape), len(shape))),
                MODES[i % len(MODES)],
                (np.float32, np.float64)[(i // len(MODES)) % 2],
            )
        )
    return out


def _data(rng, shape, dtype):
    return (rng.standard_normal(shape) * 3 + 1).astype(dtype)


def test_gaussian_matches_scipy(rng, device):
    for shape, axis, mode, dtype in _cases(rng, 40):
        a = _data(rng, shape, dtype)
        sigma = float(rng.uniform(0.3, 6.0))
        truncate = float(rng.choice([4.0, 2.5, 1.0]))
        ref = ndi.gaussian_filter1d(a, sigma, axis=axis, mode=mode, cval=0.7, truncate=truncate)
        got = filters.gaussian_filter1d(
            a, sigma, axis=axis, mode=mode, cval=0.7, truncate=truncate, device=device
        )
        assert got.dtype == a.dtype and got.shape == a.shape
        assert rel_err(got, ref) <= TOL[dtype], (shape, axis, mode, dtype, sigma)


def test_gaussian_radius_matches_scipy(rng, device):
    a = _data(rng, (30, 11), np.float64)
    for radius in (0, 1, 5, 40):
        ref = ndi.gaussian_filter1d(a, 2.0, axis=0, radius=radius)
        got = filters.gaussian_filter1d(a, 2.0, axis=0, radius=radius, device=device)
        assert rel_err(got, ref) <= 1e-12


def test_uniform_matches_scipy(rng, device):
    for shape, axis, mode, dtype in _cases(rng, 50):
        a = _data(rng, shape, dtype)
        size = int(rng.integers(1, 16))
        origin = int(rng.integers(-(size // 2), (size - 1) // 2 + 1))
        ref = ndi.uniform_filter1d(a, size, axis=axis, mode=mode, cval=-1.5, origin=origin)
        got = filters.uniform_filter1d(
            a, size, axis=axis, mode=mode, cval=-1.5, origin=origin, device=device
        )
        assert rel_err(got, ref) <= TOL[dtype], (shape, axis, mode, dtype, size, origin)


@pytest.mark.parametrize("func", ["correlate1d", "convolve1d"])
def test_correlate_convolve_match_scipy(rng, device, func):
    for shape, axis, mode, dtype in _cases(rng, 50):
        a = _data(rng, shape, dtype)
        w = rng.standard_normal(int(rng.integers(1, 12)))
        origin = int(rng.integers(-(len(w) // 2), (len(w) - 1) // 2 + 1))
        ref = getattr(ndi, func)(a, w, axis=axis, mode=mode, cval=2.0, origin=origin)
        got = getattr(filters, func)(
            a, w, axis=axis, mode=mode, cval=2.0, origin=origin, device=device
        )
        assert rel_err(got, ref) <= TOL[dtype], (func, shape, axis, mode, dtype, len(w), origin)


def test_kernel_longer_than_line(rng, device):
    """Extensions wider than the line repeat periodically, as scipy extends them."""
    for mode in MODES:
        for n in (1, 2, 3, 5):
            a = _data(rng, (4, n), np.float64)
            ref = ndi.correlate1d(a, np.arange(1.0, 18.0), axis=1, mode=mode, cval=0.5)
            got = filters.correlate1d(
                a, np.arange(1.0, 18.0), axis=1, mode=mode, cval=0.5, device=device
            )
            assert rel_err(got, ref) <= 1e-12, (mode, n)
            ref = ndi.uniform_filter1d(a, 13, axis=1, mode=mode, cval=0.5)
            got = filters.uniform_filter1d(a, 13, axis=1, mode=mode, cval=0.5, device=device)
            assert rel_err(got, ref) <= 1e-12, (mode, n)


def test_grid_mode_aliases(rng):
    a = _data(rng, (20,), np.float64)
    for alias in ("grid-constant", "grid-mirror", "grid-wrap"):
        ref = ndi.gaussian_filter1d(a, 3.0, mode=alias)
        assert rel_err(filters.gaussian_filter1d(a, 3.0, mode=alias, device="cpu"), ref) <= 1e-12


def test_big_endian_and_noncontiguous(rng):
    a = _data(rng, (12, 14, 9), np.float64)
    be = a.astype(">f8")
    view = a[:, ::2, 1:]
    ref = ndi.gaussian_filter1d(a, 1.3, axis=1)
    assert rel_err(filters.gaussian_filter1d(be, 1.3, axis=1, device="cpu"), ref) <= 1e-12
    ref = ndi.uniform_filter1d(view, 3, axis=2)
    assert rel_err(filters.uniform_filter1d(view, 3, axis=2, device="cpu"), ref) <= 1e-12


def test_nan_stays_local_in_boxcar():
    a = np.arange(20.0)
    a[5] = np.nan
    got = filters.uniform_filter1d(a, 3, device="cpu")
    assert np.isnan(got[4:7]).all()
    finite = np.isfinite(got)
    assert finite.sum() == 17
    ref = ndi.uniform_filter1d(np.where(np.isnan(a), 0, a), 3)
    clean = np.ones(20, bool)
    clean[4:7] = False
    np.testing.assert_allclose(got[clean], ref[clean], rtol=1e-12)


def test_sigma_zero_is_identity(rng):
    a = _data(rng, (5, 6), np.float32)
    np.testing.assert_array_equal(filters.gaussian_filter1d(a, 0.0, device="cpu"), a)


def test_thread_count_independent(rng):
    a = _data(rng, (9, 70, 300), np.float32)
    before = skyconv.get_num_threads()
    try:
        skyconv.set_num_threads(1)
        one = filters.gaussian_filter1d(a, 2.5, axis=0, device="cpu")
        skyconv.set_num_threads(2)
        two = filters.gaussian_filter1d(a, 2.5, axis=0, device="cpu")
    finally:
        skyconv.set_num_threads(before)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize(
    "bad",
    [np.arange(10), np.arange(10, dtype=np.int16), np.ones(4, complex), np.ones(4, np.float16)],
)
def test_non_float_input_is_type_error(bad):
    with pytest.raises(TypeError, match="input"):
        filters.gaussian_filter1d(bad, 1.0)


def test_argument_errors(rng):
    a = _data(rng, (4, 5), np.float64)
    with pytest.raises(ValueError, match="axis"):
        filters.gaussian_filter1d(a, 1.0, axis=2)
    with pytest.raises(ValueError, match="mode"):
        filters.gaussian_filter1d(a, 1.0, mode="bogus")
    with pytest.raises(ValueError, match="sigma"):
        filters.gaussian_filter1d(a, -1.0)
    with pytest.raises(ValueError, match="size"):
        filters.uniform_filter1d(a, 0)
    with pytest.raises(ValueError, match="origin"):
        filters.uniform_filter1d(a, 3, origin=2)
    with pytest.raises(ValueError, match="weights"):
        filters.correlate1d(a, [])
    with pytest.raises(ValueError, match="weights"):
        filters.correlate1d(a, [1.0, np.nan])
    with pytest.raises(skyconv.ShapeError):
        filters.gaussian_filter1d(np.float64(3.0), 1.0)
    with pytest.raises(ValueError, match="device"):
        filters.gaussian_filter1d(a, 1.0, device="tpu")


def test_empty_array():
    a = np.zeros((0, 5), np.float32)
    assert filters.gaussian_filter1d(a, 2.0, axis=0, device="cpu").shape == (0, 5)
    assert filters.uniform_filter1d(a, 3, axis=1, device="cpu").shape == (0, 5)


@pytest.mark.gpu
def test_gpu_large_cube_matches_cpu(rng):
    """Above the staging threshold, so pinned chunked transfers are exercised both ways."""
    a = rng.standard_normal((40, 300, 700)).astype(np.float32)
    for axis in range(3):
        cpu = filters.gaussian_filter1d(a, 2.55, axis=axis, mode="constant", device="cpu")
        gpu = filters.gaussian_filter1d(a, 2.55, axis=axis, mode="constant", device="cuda")
        assert rel_err(gpu, cpu) <= 1e-6
    prof = skyconv.last_profile()
    assert {"h2d", "kernel", "d2h", "total"} <= set(prof)
    assert all(v >= 0 for v in prof.values())


@pytest.mark.gpu
@pytest.mark.parametrize("limit", [300_000, 40_000, 3_000])
def test_gpu_chunked_equals_cpu(rng, monkeypatch, limit):
    """A small GPU memory budget forces slab and row chunking with halos; results unchanged."""
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", str(limit))
    for shape in [(20, 50, 60), (300,), (7, 300)]:
        a = _data(rng, shape, np.float64)
        for axis in range(len(shape)):
            for mode in MODES:
                cpu = filters.gaussian_filter1d(a, 3.0, axis=axis, mode=mode, device="cpu")
                gpu = filters.gaussian_filter1d(a, 3.0, axis=axis, mode=mode, device="cuda")
                assert rel_err(gpu, cpu) <= 1e-12, (shape, axis, mode, limit)
            cpu = filters.uniform_filter1d(a, 15, axis=axis, mode="reflect", device="cpu")
            gpu = filters.uniform_filter1d(a, 15, axis=axis, mode="reflect", device="cuda")
            assert rel_err(gpu, cpu) <= 1e-12, (shape, axis, limit)


# Shapes and filters that take each GPU tile of src/cube/filters/cuda.rs (`Tiled::plan`): lines
# of 1500 / 900 / 300 values (windows of 5, 3 and 1 outputs a thread), 70 / 40 / 20 / 9 rows of
# an inner axis (8, 4, 2, 1 outputs a thread), and filters too long for a tile (the per-tap
# kernel: sigma 30 along an inner axis, 400 along the last), and one line alone (launches cut
# along its windows).
TILE_CASES = [
    ((3, 1500), -1, 2.0),
    ((2, 900), -1, 2.0),
    ((4, 300), -1, 2.0),
    ((70, 3, 40), 0, 2.0),
    ((40, 33), 0, 2.0),
    ((20, 50), 0, 2.0),
    ((9, 70), 0, 1.0),
    ((130, 40), 0, 30.0),
    ((2, 4000), -1, 400.0),
    ((5000,), 0, 2.0),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape, axis, sigma", TILE_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_tiles_match_scipy(rng, shape, axis, sigma, dtype):
    a = _data(rng, shape, dtype)
    for mode in MODES:
        ref = ndi.gaussian_filter1d(a, sigma, axis=axis, mode=mode, cval=0.7)
        got = filters.gaussian_filter1d(a, sigma, axis=axis, mode=mode, cval=0.7, device="cuda")
        assert rel_err(got, ref) <= TOL[dtype], (shape, axis, sigma, mode)
        w = rng.standard_normal(7)
        ref = ndi.correlate1d(a, w, axis=axis, mode=mode, cval=-2.0, origin=1)
        got = filters.correlate1d(a, w, axis=axis, mode=mode, cval=-2.0, origin=1, device="cuda")
        assert rel_err(got, ref) <= TOL[dtype], (shape, axis, mode, "correlate1d")


@pytest.mark.gpu
def test_tile_plan_on_the_gpu_takes_its_shared_memory():
    """On a GPU whose SMs hold 228 KB of shared memory (compute capability 9.0: H100, H200),
    four blocks of 56 KB fit an SM, and a whole-axis tile may take that (opting in past 48 KB):
    à trous's z pass at step 32 then stages 32 columns (48 KB + weights), not 16; the other
    tiles stay within 48 KB."""
    plan = _core._filter_tile_plan
    cube = [256, 512, 512]
    cc = tuple(skyconv.backend_info()["cuda"]["compute_capability"])
    (got, b), fits = plan(cube, 0, 5, 32, "float32", gpu=0)
    assert plan(cube, 0, 5, 32, "float32")[0] == ("correlate_whole16_f32", 48 + 384 * 16 * 4)
    if cc == (9, 0):
        assert (got, b) == ("correlate_whole32_f32", 48 + 384 * 32 * 4)
    assert all(b <= 48 * 1024 for k, b in fits if "whole" not in k)
    assert all(b <= 56 * 1024 for _, b in fits)
    with pytest.raises(skyconv.DeviceError, match="cuda:99"):
        plan(cube, 0, 5, 32, "float32", gpu=99)


# Shapes that take the whole-axis tiles (`Tiled::whole`: 8, 16 or 32 columns of an inner axis,
# 1, 2 or 8 last-axis lines, a partial last block) and filters of ≤ 21 taps, which use them.
# (400, 2, 20) along z: 32 columns (16 in float64) in 48-56 KB, past what a launch gets without
# opting in, on GPUs that give a whole-axis tile more (`Gpu::shared_four`: H100, H200).
WHOLE_CASES = [
    ((400, 2, 20), 0),
    ((7, 33, 45), 0),
    ((7, 33, 45), 1),
    ((5, 700, 20), 1),
    ((40, 9, 8), 0),
    ((9, 300), 1),
    ((3, 2500), 1),
    ((2, 7000), 1),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape, axis", WHOLE_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_whole_axis_tiles_equal_phase_tiles(rng, monkeypatch, shape, axis, dtype):
    """The whole-axis tiles give the bits of the phase / window tiles (SKYCONV_FILTER_WHOLE=0),
    also with 5 taps (the whole-axis kernels' weights in registers: kernels/filters.cu Taps5)
    and 21 (their weights in shared memory; the longest filter that takes them)
    and with à trous's taps `step` apart (the whole-axis kernels' units of 5 outputs of one
    phase: steps a power of two or not, and longer than the axis), and in constant mode with a
    cval that float32 does not hold (0.7: the lines stage it as double in their halo, the inner
    axes take the phase tiles)."""
    a = _data(rng, shape, dtype)
    w = rng.standard_normal(7)
    w21 = rng.standard_normal(21)  # the longest filter that takes them (WHOLE_MAX_TAPS)
    for mode in MODES:
        for origin in (-1, 0, 2):
            kw = {"axis": axis, "mode": mode, "device": "cuda"}
            calls = [
                partial(filters.correlate1d, a, w, cval=-2.0, origin=origin, **kw),
                partial(filters.correlate1d, a, w21, cval=-2.0, origin=3 * origin, **kw),
                partial(filters.correlate1d, a, w[:5], cval=1.5, origin=origin // 2, **kw),
                partial(filters.uniform_filter1d, a, 4, cval=0.7, origin=origin // 2, **kw),
            ]
            step = (2, 3, 8, 64)[origin + 1]
            dilated = ("dilated", axis, mode, 0.5, [float(step), *w[:5]])
            calls.append(partial(_core._filter_chain, a, [dilated], device="cuda"))
            for call in calls:
                monkeypatch.setenv("SKYCONV_FILTER_WHOLE", "0")
                ref = call()
                monkeypatch.delenv("SKYCONV_FILTER_WHOLE")
                got = call()
                np.testing.assert_array_equal(got, ref, err_msg=f"{shape} {axis} {mode} {origin}")


def test_tile_plan_names_the_kernels_a_pass_runs():
    """`_filter_tile_plan` (what the GPU benchmarks launch) reports the library's tiles: à
    trous's passes over 256×512² take the whole-axis kernels, each within 48 KiB of shared
    memory (weights, then the staged values with the halo their taps read past either end:
    along y and z as T, so z at step 32 fits 16 columns, not 32; along x 8 lines as double,
    each 2 values longer for alignment); a filter too long for any
    tile takes the per-tap kernel, which cannot fuse the split."""
    plan = _core._filter_tile_plan
    cube = [256, 512, 512]
    weights = 48  # 5 taps, padded to 6 doubles
    for axis, step, kernel, smem in (
        (2, 1, "correlate_lines8_f32", 8 * (512 + 4 + 2) * 8),  # halo 2 + 2
        (2, 32, "correlate_lines8_f32", 8 * (512 + 128 + 2) * 8),
        (1, 1, "correlate_whole16_f32", (512 + 4) * 16 * 4),  # halo 2 + 2 rows
        (1, 32, "correlate_whole16_f32", (512 + 128) * 16 * 4),
        (0, 1, "correlate_whole32_f32", (256 + 4) * 32 * 4),
        (0, 32, "correlate_whole16_f32", (256 + 128) * 16 * 4),
    ):
        (got, b), fits = plan(cube, axis, 5, step, "float32")
        assert (got, b) == (kernel, weights + smem), (axis, step)
        assert (got, b) in fits
        assert all(b <= 48 * 1024 for _, b in fits)
    (got, _), _ = plan(cube, 2, 5, 1, "float32", split=True)
    assert got == "correlate_lines8_split_f32"
    (got, b), _ = plan(cube, 0, 5, 4, "float64")
    assert (got, b) == ("correlate_whole16_f64", weights + (256 + 16) * 16 * 8)
    (_, b), _ = plan(cube, 0, 3, 1, "float32", offset=-3)  # first tap 3 before: halo 3 + 0
    assert b == 32 + (256 + 3) * 32 * 4
    assert plan([20000], 0, 10001, 1, "float32") == (("correlate_f32", 0), [])
    assert plan([20000], 0, 10001, 1, "float32", split=True) is None
    with pytest.raises(ValueError, match="dtype"):
        plan(cube, 0, 5, 1, "float16")
    with pytest.raises(ValueError, match="axis"):
        plan(cube, 3, 5, 1, "float32")


@pytest.mark.gpu
def test_gpu_budget_too_small_is_gpu_memory_error(rng, monkeypatch):
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", "64")
    with pytest.raises(skyconv.GpuMemoryError):
        filters.gaussian_filter1d(_data(rng, (4, 300), np.float64), 3.0, axis=0, device="cuda")


def test_chain_equals_successive_calls(rng, device):
    for dtype in (np.float32, np.float64):
        a = _data(rng, (9, 31, 40), dtype)
        passes = [
            filters.Gaussian(2.55, axis=2, mode="constant"),
            filters.Gaussian(1.2, axis=1, mode="nearest", truncate=3.0),
            filters.Uniform(4, axis=0, mode="reflect", origin=-1),
            filters.Correlate((1.0, -2.0, 0.5), axis=-1, mode="wrap", origin=1),
        ]
        ref = ndi.gaussian_filter1d(a, 2.55, axis=2, mode="constant")
        ref = ndi.gaussian_filter1d(ref, 1.2, axis=1, mode="nearest", truncate=3.0)
        ref = ndi.uniform_filter1d(ref, 4, axis=0, mode="reflect", origin=-1)
        ref = ndi.correlate1d(ref, [1.0, -2.0, 0.5], axis=-1, mode="wrap", origin=1)
        for k in range(len(passes) + 1):
            got = filters.chain(a, passes[:k], device=device)
            assert got.dtype == a.dtype
        assert rel_err(filters.chain(a, passes, device=device), ref) <= TOL[dtype] * 10
        np.testing.assert_array_equal(filters.chain(a, [], device=device), a)


def test_chain_rejects_bad_passes(rng):
    a = _data(rng, (4, 5), np.float64)
    with pytest.raises(TypeError, match="passes"):
        filters.chain(a, [("gaussian", 1.0)])
    with pytest.raises(ValueError, match="axis"):
        filters.chain(a, [filters.Gaussian(1.0, axis=3)])
    with pytest.raises(ValueError, match="size"):
        filters.chain(a, [filters.Uniform(0)])


@pytest.mark.gpu
def test_gpu_chain_over_budget_equals_cpu(rng, monkeypatch):
    """A chain too large for the budget runs pass by pass, chunked; same result."""
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", "200000")
    a = _data(rng, (12, 40, 70), np.float64)
    for k in (2, 3):
        passes = [
            filters.Gaussian(2.0, axis=2),
            filters.Uniform(5, axis=0, mode="wrap"),
            filters.Gaussian(1.5, axis=1, mode="constant"),
        ][:k]
        cpu = filters.chain(a, passes, device="cpu")
        gpu = filters.chain(a, passes, device="cuda")
        assert rel_err(gpu, cpu) <= 1e-12
