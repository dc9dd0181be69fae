"""atrous_denoise on dask arrays equals the NumPy call: result <= 1e-6 relative, the same
iteration count and noise values, on a 2-worker process cluster; chunkings with NaN blocks and
all-NaN planes across chunk edges; both variants; per-unit (dim < ndim) reconstructions; the
exact distributed median it relies on."""

from __future__ import annotations

import numpy as np
import pytest

import skyconv
from skyconv._dask import cluster
from skyconv.exceptions import ArgumentError, ShapeError

da = pytest.importorskip("dask.array")


@pytest.fixture(autouse=True)
def staged(monkeypatch):
    """The tests' small cubes go through the staged loop (halos, distributed medians), not the
    one-task path that small arrays take by default (tested on its own below)."""
    from skyconv._dask import atrous

    monkeypatch.setattr(atrous, "SINGLE_TASK_BYTES", 0)
    monkeypatch.setattr(atrous, "SINGLE_TASK_MEMORY_FRACTION", 0)


def _cube(rng, shape=(24, 36, 40), dtype=np.float64):
    """Noise, two sources (one across the chunk edges used below), a NaN block across chunk
    edges and an all-NaN plane."""
    x = rng.normal(0.0, 1.0, shape)
    z, y, xx = np.indices(shape)
    for c, amp in (((12, 18, 20), 6.0), ((5, 8, 30), 4.0)):
        r2 = (z - c[0]) ** 2 / 4.0 + ((y - c[1]) ** 2 + (xx - c[2]) ** 2) / 9.0
        x += amp * np.exp(-r2 / 2)
    x[10:14, 15:22, 17:23] = np.nan  # across the z, y and x chunk edges below
    x[7] = np.nan  # an all-NaN plane at a chunk edge
    return x.astype(dtype)


def _check(got, want, rtol=1e-6):
    assert got.iterations == want.iterations
    assert got.scales == want.scales
    np.testing.assert_allclose(got.noise, want.noise, rtol=1e-9)
    np.testing.assert_allclose(got.input_noise, want.input_noise, rtol=1e-12)
    assert isinstance(got.iterations, int) and isinstance(got.noise, float)
    g = np.asarray(got.data)
    w = np.asarray(want.data)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    scale = np.nanmax(np.abs(w))
    np.testing.assert_allclose(g, w, rtol=0, atol=rtol * scale, equal_nan=True)


@pytest.mark.parametrize("variant", ["duchamp", "corrected"])
def test_cube_equals_numpy(dask_client, rng, variant):
    x = _cube(rng)
    want = skyconv.atrous_denoise(x, dim=3, snr_recon=3.0, device="cpu", variant=variant)
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 18, 20)), dim=3, snr_recon=3.0,
                                 device="cpu", variant=variant)  # fmt: skip
    assert got.data.chunks == ((8, 8, 8), (18, 18), (20, 20))
    _check(got, want)


@pytest.mark.parametrize(
    ("filt", "robust", "chunks"),
    [
        ("triangle", False, (5, 12, 40)),
        ("haar", True, (24, 10, 13)),
        ("b3spline", True, (6, 30, 17)),
    ],
)
def test_cube_filters_statistics_chunkings(dask_client, rng, filt, robust, chunks):
    """Thin chunks (below the largest scale's reach: merged by the halo), other filters, mean
    and standard deviation statistics, float32."""
    x = _cube(rng, (20, 30, 34), np.float32)
    kw = dict(dim=3, filter=filt, robust=robust, scale_min=2, device="cpu")
    want = skyconv.atrous_denoise(x, **kw)
    got = skyconv.atrous_denoise(da.from_array(x, chunks=chunks), **kw)
    assert got.data.dtype == np.float32
    _check(got, want, rtol=1e-6)


def test_image_duchamp_2d(dask_client, rng):
    """dim=2 on an image (one unit): DUCHAMP's 2-D quirks (blank value, N-1 scales)."""
    x = rng.normal(size=(64, 70))
    x[25:40, 30:45] += 5.0
    x[20:30, 30:40] = np.nan  # across both chunk edges below
    want = skyconv.atrous_denoise(x, dim=2, device="cpu")
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(20, 35)), dim=2, device="cpu")
    _check(got, want)


@pytest.mark.parametrize("dim", [1, 2])
def test_per_unit(dask_client, rng, dim):
    """Spectra (dim=1) and channel maps (dim=2): the unit axes are made whole, units chunked."""
    x = _cube(rng, (16, 20, 22))
    want = skyconv.atrous_denoise(x, dim=dim, device="cpu")
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(4, 10, 11)), dim=dim, device="cpu")
    assert got.data.chunks == ((4,) * 4, (10, 10), (11, 11))
    np.testing.assert_array_equal(got.iterations, want.iterations)
    np.testing.assert_array_equal(got.noise, want.noise)
    np.testing.assert_array_equal(got.input_noise, want.input_noise)
    np.testing.assert_array_equal(np.asarray(got.data), want.data)


def test_all_blank_and_bad_input(dask_client):
    x = np.full((8, 10, 10), np.nan)
    with pytest.warns(RuntimeWarning, match="blank"):
        r = skyconv.atrous_denoise(da.from_array(x, chunks=4), device="cpu")
    assert r.iterations == 0 and np.isnan(r.noise)
    with pytest.raises(ShapeError):
        skyconv.atrous_denoise(da.zeros((4, 30, 30), chunks=2), dim=3, device="cpu")
    unknown = da.from_array(np.ones(40), chunks=10)
    unknown = unknown[unknown > 0]
    with pytest.raises(ArgumentError, match="compute_chunk_sizes"):
        skyconv.atrous_denoise(unknown, dim=1, device="cpu")


@pytest.mark.parametrize("gather", [4, 1 << 20])
def test_exact_median(dask_client, rng, gather, monkeypatch):
    """The distributed median equals np.median of the finite values, through the radix
    histograms (gather=4) and directly; duplicates, negatives, odd and even counts."""
    from skyconv._dask import select

    monkeypatch.setattr(select, "GATHER", gather)
    v = np.concatenate([rng.normal(size=501), np.zeros(40), -np.ones(7), [np.nan, np.inf]])
    rng.shuffle(v)
    for arr in (v, v[:-3], v.astype(np.float32)):
        x = da.from_array(arr, chunks=97)
        fin = arr[np.isfinite(arr)].astype(np.float64)
        assert select.median(x) == np.median(fin)
        k = [0, fin.size // 3, fin.size - 1]
        assert select.ranks(x, k) == list(np.sort(fin)[k])
        # the MADFM's distances |v - m| (float64), and the first pass given as computed
        m = float(np.median(fin))
        top = select.top_counts(x, center=m).compute()
        assert int(top.sum()) == fin.size == select.finite_count(x)
        assert select.median(x, center=m, top=top) == np.median(np.abs(fin - m))
        assert select.median(x, center=m) == np.median(np.abs(fin - m))
    assert select.median(da.from_array(np.full(30, 2.5), chunks=7)) == 2.5
    assert np.isnan(select.median(da.from_array(np.full(9, np.nan), chunks=4)))


def test_selection_keeps_no_reference_to_the_array(rng):
    """A median leaves no reference cycle holding its array: the array (and on a cluster its
    futures, the workers' memory) is freed when the caller drops it, without the garbage
    collector (a recursive closure in ``ranks`` held it until a collection)."""
    import gc
    import weakref

    import dask

    from skyconv._dask import select

    x = da.from_array(rng.normal(size=(40, 40)), chunks=20)
    ref = weakref.ref(x)
    gc.disable()
    try:
        with dask.config.set(scheduler="synchronous"):
            m = select.median(x)  # the first pass, then the gather
        del x
        assert ref() is None
    finally:
        gc.enable()
    assert np.isfinite(m)


def test_key_counts_against_numpy(rng):
    """The core's block pass of the selection: counts by 16 key bits under a prefix, and the
    values under a prefix, equal a NumPy computation of the same keys."""
    from skyconv import _core

    def keys(v):
        bits = v.view(np.uint64)
        return np.where(bits >> np.uint64(63) == 1, ~bits, bits | np.uint64(1 << 63))

    for dtype in (np.float32, np.float64):
        a = (rng.standard_normal(50_000) * 3).astype(dtype)
        a[::97] = np.nan
        a[5] = np.inf
        a[7:20] = -0.0
        for center in (None, 0.25):
            v = a.astype(np.float64)
            v = v[np.isfinite(v)]
            v = v if center is None else np.abs(v - center)
            k = keys(v)
            top = _core._key_counts(a, 0, 64, 16, center)
            np.testing.assert_array_equal(top, np.bincount((k >> np.uint64(48)).astype(np.intp),
                                                           minlength=1 << 16))  # fmt: skip
            prefix = int(np.argmax(top))
            sel = (k >> np.uint64(48)) == np.uint64(prefix)
            low = ((k[sel] >> np.uint64(32)) & np.uint64(0xFFFF)).astype(np.intp)
            np.testing.assert_array_equal(_core._key_counts(a, prefix, 48, 16, center),
                                          np.bincount(low, minlength=1 << 16))  # fmt: skip
            np.testing.assert_array_equal(_core._key_values(a, prefix, 48, center), v[sel])
    with pytest.raises(ArgumentError, match="bits"):
        _core._key_counts(np.zeros(4), 0, 64, 25)
    with pytest.raises(ArgumentError, match="shift"):
        _core._key_values(np.zeros(4), 0, 65)


def _dilated_smooth(c, step, weights):
    """The à trous scale's smoothing of the whole array in float64 (scipy: the dilated filter
    along every axis, mirror edges as DUCHAMP reflects: x < 0 -> -x)."""
    from scipy.ndimage import correlate1d

    reach = len(weights) // 2
    k = np.zeros(2 * reach * step + 1)
    k[::step] = weights
    out = np.asarray(c, dtype=np.float64)
    for ax in range(out.ndim)[::-1]:
        out = correlate1d(out, k, axis=ax, mode="mirror")
    return out


def _block_scale(c, x, out, w_prev, thr, chunks, ix, step, weights, device, start=None):
    """The staged loop's task for block ``ix`` of arrays cut into ``chunks`` (its halo cut from
    the neighbours as the loop does)."""
    from skyconv._dask import atrous

    plan = atrous._halo_plan(chunks, x.shape, {a: (len(weights) // 2) * step for a in range(3)})
    ext, lo, pieces = plan[ix]
    starts = [np.concatenate([[0], np.cumsum(ch)]) for ch in chunks]

    def blk(a, j):
        if a is None:
            return None
        return a[tuple(slice(starts[k][j[k]], starts[k][j[k] + 1]) for k in range(3))]

    if start is None:
        src = [blk(c, p[0]) for p in pieces]
    else:
        src = [(blk(x, p[0]), blk(out, p[0])) for p in pieces]
    passes = [("dilated", ax, "mirror", 0.0, [float(step)] + weights) for ax in (2, 1, 0)]
    res = atrous._scale_task(src, [(p[1], p[2]) for p in pieces], ext, lo, blk(x, ix),
                             blk(out, ix), blk(w_prev, ix), thr, passes, device, True, True,
                             0.0 if start is None else start)  # fmt: skip
    return res, (lambda a: blk(a, ix))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("step", [1, 4])
def test_block_scale_against_numpy(rng, dtype, step):
    """One block call (halo cut from the neighbours, here thinner than the halo at step 4)
    equals the whole array's float64 smoothing restricted to the block: w = c - smooth and
    c - w where x is finite (NaN and c at blanks), out + w_prev where |w_prev| > thr (float64
    compare), the key counts and sum of w; an iteration's first scale builds c = x - out
    (blank value at blanks) itself."""
    from skyconv._dask import select

    weights = [0.0625, 0.25, 0.375, 0.25, 0.0625]
    shape, chunks = (12, 10, 9), ((3, 3, 3, 3), (4, 6), (9,))
    c, out, wp = (rng.normal(size=shape).astype(dtype) for _ in range(3))
    x = rng.normal(size=shape).astype(dtype)
    x[4, 2:5] = np.nan
    x[5, 0, 0] = np.inf
    thr = 0.8
    sm = _dilated_smooth(c, step, weights)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for ix in [(0, 0, 0), (1, 1, 0), (3, 0, 0)]:
        (w, nc, no, counts, total), b = _block_scale(c, x, out, wp, thr, chunks, ix, step,
                                                     weights, "cpu")  # fmt: skip
        blank = ~np.isfinite(b(x))
        want_w = b(c).astype(np.float64) - b(sm)
        np.testing.assert_allclose(np.where(blank, 0, w), np.where(blank, 0, want_w), rtol=0,
                                   atol=tol * 4)  # fmt: skip
        assert np.isnan(w[blank]).all()
        np.testing.assert_array_equal(nc, np.where(blank, b(c), b(c) - w).astype(dtype))
        big = np.abs(b(wp).astype(np.float64)) > thr
        np.testing.assert_array_equal(no, np.where(big, b(out) + b(wp), b(out)).astype(dtype))
        np.testing.assert_array_equal(counts, select.block_counts(w))
        np.testing.assert_allclose(total, np.nansum(w.astype(np.float64)), rtol=1e-12)
        assert w.dtype == nc.dtype == no.dtype == dtype
    # An iteration's first scale: c = x - out, the blank value where x is not finite.
    blank_value = -8.0
    (w, nc, _, _, _), b = _block_scale(None, x, out, wp, thr, chunks, (1, 0, 0), step, weights,
                                       "cpu", start=blank_value)  # fmt: skip
    c0 = np.where(np.isfinite(x), x - out, blank_value).astype(dtype)
    sm0 = _dilated_smooth(c0, step, weights)
    blank = ~np.isfinite(b(x))
    want = np.where(blank, b(c0), b(sm0))
    np.testing.assert_allclose(nc, want, rtol=0, atol=tol * 4)


def test_block_finish_against_numpy(rng):
    """The end of an iteration on a block: out + w where |w| > thr, + c where x is finite; the
    residual's key counts (x - out at the finite voxels) and sum; None for out is zeros."""
    from skyconv import _core
    from skyconv._dask import select

    x, out, w, c = (rng.normal(size=(5, 6, 7)).astype(np.float32) for _ in range(4))
    x[2, 1:4] = np.nan
    got, counts, total = _core._atrous_block_finish(c, x, out, w, 0.7)
    fin = np.isfinite(x)
    want = np.where(np.abs(w.astype(np.float64)) > 0.7, out + w, out)
    want = np.where(fin, want + c, want).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    resid = np.where(fin, x - want, np.nan)
    np.testing.assert_array_equal(counts, select.block_counts(resid))
    np.testing.assert_allclose(total, np.nansum(resid.astype(np.float64)), rtol=1e-6)
    got, counts, _ = _core._atrous_block_finish(c, x, None, None, 0.0, counts=False)
    np.testing.assert_array_equal(got, np.where(fin, c, 0).astype(np.float32))
    assert counts is None
    with pytest.raises(TypeError):
        _core._atrous_block_finish(c, x.astype(np.float64), out, w, 0.7)
    with pytest.raises(ShapeError):
        _core._atrous_block_finish(c[:2], x, out, w, 0.7)


def test_small_cube_runs_as_one_task(dask_client, rng, monkeypatch):
    """A cube of at most SINGLE_TASK_BYTES runs the single call in one task: the staged loop
    is not entered, the result and the progress reports are the single call's."""
    from skyconv._dask import atrous
    from skyconv._dask import device as ddev

    monkeypatch.setattr(atrous, "SINGLE_TASK_BYTES", 16 * 2**20)
    x = _cube(rng)
    seen, want_seen = [], []
    want = skyconv.atrous_denoise(x, device="cpu", progress=lambda *a: want_seen.append(a))
    ddev.reset(dask_client)
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 18, 20)), device="cpu",
                                 progress=lambda *a: seen.append(a))  # fmt: skip
    assert got.data.chunks == ((8, 8, 8), (18, 18), (20, 20))
    np.testing.assert_array_equal(np.asarray(got.data), want.data)
    assert (got.iterations, got.noise, got.input_noise) == (
        want.iterations, want.noise, want.input_noise)  # fmt: skip
    assert seen == want_seen and len(seen) == want.iterations
    assert ddev.devices_used(dask_client) == {"atrous.single": {"cpu": 1}}


def test_cube_that_fits_a_worker_runs_as_one_task(dask_client, rng, monkeypatch):
    """Above SINGLE_TASK_BYTES, a cube of at most SINGLE_TASK_MEMORY_FRACTION of the smallest
    worker's memory limit runs as one task too; one above it takes the staged loop."""
    from skyconv._dask import atrous
    from skyconv._dask import device as ddev

    x = _cube(rng, dtype=np.float32)
    limit = min(w["memory_limit"] for w in cluster.workers(dask_client))
    want = skyconv.atrous_denoise(x, device="cpu")
    loop_stages = {"atrous.smooth", "atrous.finish"}
    for fraction, stages in ((x.nbytes / limit, {"atrous.single"}),
                             (0.5 * x.nbytes / limit, loop_stages)):  # fmt: skip
        monkeypatch.setattr(atrous, "SINGLE_TASK_MEMORY_FRACTION", fraction)
        ddev.reset(dask_client)
        got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 18, 20)), device="cpu")
        _check(got, want)
        assert set(ddev.devices_used(dask_client)) == stages


def test_staged_progress_and_round_trips(dask_client, rng):
    """The staged loop reports each iteration as the single call does (noise to 1e-9), and
    keeps its scheduler round trips per iteration bounded: per kept scale one fetch of the
    first selection pass (made with the scale) and at most 3 selection passes; per iteration
    the finish, its fetch and the residual's median and MADFM passes."""
    from skyconv._dask import atrous

    x = _cube(rng).astype(np.float32)
    want_seen, seen = [], []
    want = skyconv.atrous_denoise(x, device="cpu", progress=lambda *a: want_seen.append(a))
    atrous.PROFILE.clear()
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 18, 20)), device="cpu",
                                 progress=lambda *a: seen.append(a))  # fmt: skip
    _check(got, want)
    assert [s[:3] for s in seen] == [s[:3] for s in want_seen]
    np.testing.assert_allclose([s[3] for s in seen], [s[3] for s in want_seen], rtol=1e-9)
    prof = dict(atrous.PROFILE)
    iters, scales = got.iterations, got.scales
    assert prof["scale centre"]["calls"] == iters * scales
    assert prof["scale centre"]["trips"] <= iters * scales * 4
    assert prof["residual sigma"]["trips"] <= iters * 7
    total = sum(v["trips"] for v in prof.values())
    assert total <= 8 + iters * (scales * 4 + 9), prof


def test_each_block_call_runs_once(dask_client, rng):
    """One smoothing call per block, scale and iteration and one finish per block and
    iteration (Dask's separate optimisation of arrays and delayed values ran every finish
    twice), and the result is the single call's."""
    from skyconv._dask import device as ddev

    x = _cube(rng).astype(np.float32)
    want = skyconv.atrous_denoise(x, device="cpu")
    ddev.reset(dask_client)
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 18, 20)), device="cpu")
    _check(got, want)
    used = ddev.devices_used(dask_client)
    blocks = 3 * 2 * 2
    assert used["atrous.finish"] == {"cpu": got.iterations * blocks}
    assert used["atrous.smooth"] == {"cpu": got.iterations * got.scales * blocks}


def test_halos_read_in_place_on_one_worker(dask_client, rng, monkeypatch):
    """Neighbours on the same worker give their halo in place (no cut task): with every block
    taken as one worker's, no cut runs, and the result is the single call's."""
    from dask.utils import key_split
    from distributed import get_task_stream

    from skyconv._dask import atrous

    monkeypatch.setattr(atrous, "_owners", lambda x: {})
    x = _cube(rng)
    want = skyconv.atrous_denoise(x, device="cpu")
    with get_task_stream(dask_client) as ts:
        got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 18, 20)), device="cpu")
    _check(got, want)
    names = {key_split(t["key"]).strip("_") for t in ts.data}
    assert "scale_task" in names and "cut" not in names, names


def test_worker_lost_mid_run(dask_client, rng):
    """A worker restarted while the loop runs (its persisted blocks lost): Dask recomputes them
    from their lineage and the result is the NumPy call's."""
    import threading
    import time

    x = _cube(rng, (16, 24, 24))
    want = skyconv.atrous_denoise(x, device="cpu")
    worker = cluster.workers(dask_client)[0]["address"]

    def kill():
        time.sleep(1.5)
        dask_client.restart_workers([worker])

    t = threading.Thread(target=kill)
    t.start()
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 12, 12)), device="cpu")
    t.join()
    _check(got, want)


def test_unaligned_input_from_the_cluster(rng):
    """An array computed by the distributed scheduler can sit at an odd address in its message
    buffer: skyconv takes it (float_array aligns it) instead of refusing it."""
    buf = bytearray(8 * 12 * 16 * 16 + 1)
    x = np.frombuffer(buf, dtype=np.float64, offset=1).reshape(12, 16, 16)
    x[...] = rng.normal(size=x.shape)
    assert not x.flags.aligned
    want = skyconv.atrous_denoise(np.array(x), device="cpu")
    got = skyconv.atrous_denoise(x, device="cpu")
    np.testing.assert_array_equal(got.data, want.data)


# ------------------------------------------------------------------ GPU (run on the H100s)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_staged_loop_on_gpu_workers(dask_client, rng, dtype):
    """The staged loop with its smoothing on the workers' GPU equals the GPU and the CPU single
    calls (<= 1e-6, same iterations); the smoothing ran on "cuda"."""
    from skyconv._dask import device as ddev

    x = _cube(rng, (40, 48, 52), dtype)
    ddev.reset(dask_client)
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(10, 24, 52)), device="cuda")
    assert ddev.devices_used(dask_client)["atrous.smooth"].keys() == {"cuda"}
    for dev in ("cuda", "cpu"):
        _check(got, skyconv.atrous_denoise(x, device=dev), rtol=1e-6)


@pytest.mark.gpu
def test_one_task_on_a_gpu_worker(dask_client, rng, monkeypatch):
    """A small cube's one task runs the GPU single call on the worker: the same result."""
    from skyconv._dask import atrous
    from skyconv._dask import device as ddev

    monkeypatch.setattr(atrous, "SINGLE_TASK_BYTES", 16 * 2**20)
    x = _cube(rng, dtype=np.float32)
    ddev.reset(dask_client)
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 18, 20)), device="cuda")
    assert ddev.devices_used(dask_client) == {"atrous.single": {"cuda": 1}}
    want = skyconv.atrous_denoise(x, device="cuda")
    np.testing.assert_array_equal(np.asarray(got.data), want.data)
    assert got.iterations == want.iterations


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_block_scale_on_the_gpu(rng, dtype):
    """The block call with its smoothing on the GPU equals the CPU's (the filter sums' rounding
    apart: w to 1e-6 / 1e-12 of the data's scale; the add and the blanks exactly), for a
    block inside the array and one at its edge, at a scale whose halo spans two neighbours."""
    weights = [0.0625, 0.25, 0.375, 0.25, 0.0625]
    shape, chunks = (12, 10, 9), ((3, 3, 3, 3), (4, 6), (9,))
    c, out, wp = (rng.normal(size=shape).astype(dtype) for _ in range(3))
    x = rng.normal(size=shape).astype(dtype)
    x[4, 2:5] = np.nan
    tol = 1e-6 if dtype == np.float32 else 1e-12
    for ix in [(1, 1, 0), (3, 0, 0)]:
        g, _ = _block_scale(c, x, out, wp, 0.8, chunks, ix, 4, weights, "cuda")
        want, _ = _block_scale(c, x, out, wp, 0.8, chunks, ix, 4, weights, "cpu")
        for k in (0, 1):
            np.testing.assert_allclose(g[k], want[k], rtol=0, atol=tol * 8, equal_nan=True)
        np.testing.assert_array_equal(g[2], want[2])
        assert abs(int(g[3].sum()) - int(want[3].sum())) == 0
        np.testing.assert_allclose(g[4], want[4], rtol=0, atol=tol * 8 * c.size)
