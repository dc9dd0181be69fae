"""The fused Dask S+C tasks: one core call per block for a kernel's noise sample
(``_scfind_block_sample``, which may keep the block's W) and one for its clip
(``_scfind_block_clip``: smoothing again, or reading the kept W as input "raw"), no NumPy pass.

Reference for the block calls: the single call's own stage functions on the whole cube
(``_scfind_spatial`` / ``_scfind_spectral``: W of every voxel) and the sample positions
written out in NumPy (SoFiA-2's backward walk, flat index size - (k+1)·c; the cadence rule,
k·c). Reference for the graph: the single call on the whole cube (mask voxel for voxel, noise
bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest

import skyconv
from skyconv import _core

BOX3 = 1.2739827004320285  # sigma of a 3-pixel boxcar, as skyconv.cube._setup gives it
SPECS = {
    "both": ("boxcar", BOX3, BOX3, "boxcar", 5.0, False),
    "spatial": ("boxcar", BOX3, BOX3, "none", 0.0, False),
    "spectral": ("boxcar", 0.0, 0.0, "boxcar", 7.0, False),
    "none": ("boxcar", 0.0, 0.0, "none", 0.0, True),
}
MODE, REP, RMS0 = "constant", ("copysign", 2.0), 0.9


def cube_and_mask(rng, shape=(21, 26, 23), dtype=np.float32):
    x = rng.standard_normal(shape).astype(dtype)
    x[5:9, 3:12, 4:10] += 3.0
    x[9:15, 14:22, 0:7] = np.nan  # a NaN block
    x[2] = np.nan  # an all-NaN plane
    m = np.zeros(shape, np.uint8)
    m[6:8, 4:9, 5:9] = 1  # voxels to replace
    m |= np.isnan(x).astype(np.uint8) << 7
    return x, m


def whole_w(x, m, spec, device="cpu"):
    """W of every voxel by the single call's stage functions (NaN where blank)."""
    s = _core._scfind_spatial(x, m, spec, MODE, REP, RMS0, True, device)
    return _core._scfind_spectral(s, m, spec, MODE, True, device), s


def sample_index(shape, sampling):
    kind, c = sampling
    size = int(np.prod(shape))
    if kind == "backward":
        return size - (np.arange(size // c) + 1) * c
    return np.arange(0, size, c)


def in_block(idx, shape, start, bshape):
    zyx = np.unravel_index(idx, shape)
    ok = np.ones(idx.size, bool)
    for a in range(3):
        ok &= (zyx[a] >= start[a]) & (zyx[a] < start[a] + bshape[a])
    return ok


# (kernel, input, block as slices): the layouts the graph uses for each kind of kernel
BLOCKS = [
    ("both", "smoothed", (slice(None), slice(7, 19), slice(5, 17))),  # a column block
    ("spatial", "cube", (slice(8, 16), slice(None), slice(None))),  # a slab
    ("spectral", "cube", (slice(None), slice(0, 13), slice(11, 23))),  # a column block
    ("none", "cube", (slice(3, 10), slice(4, 20), slice(2, 9))),  # any block
    ("none", "raw", (slice(10, 21), slice(0, 26), slice(0, 12))),  # any block
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sampling", [("backward", 7), ("cadence", 5), ("backward", 1)])
@pytest.mark.parametrize("name,kind,sl", BLOCKS)
def test_block_calls_equal_the_whole_cube_stages(rng, dtype, sampling, name, kind, sl):
    x, m = cube_and_mask(rng, dtype=dtype)
    spec = SPECS[name]
    w, s = whole_w(x, m, spec)
    if kind == "raw":
        w = x
    src = s if kind == "smoothed" else x
    blk, mb = np.ascontiguousarray(src[sl]), np.ascontiguousarray(m[sl])
    start = [r.indices(n)[0] for r, n in zip(sl, x.shape)]
    args = (spec, MODE, REP, RMS0, kind)
    slots, vals, ext, none = _core._scfind_block_sample(
        blk, mb, *args, start, list(x.shape), sampling, True, True, "cpu"
    )
    assert none is None  # no W unless kept
    kept = _core._scfind_block_sample(
        blk, mb, *args, start, list(x.shape), sampling, True, True, "cpu", keep=True
    )
    for a, b in zip(kept[:2], (slots, vals)):
        np.testing.assert_array_equal(a, b)
    assert kept[2] == ext
    # the kept W is the whole cube's W in the block, bit for bit (NaN where blank)
    assert kept[3].dtype == blk.dtype and kept[3].shape == blk.shape
    np.testing.assert_array_equal(kept[3], x[sl] if kind == "raw" else w[sl])
    idx = sample_index(x.shape, sampling)
    want_slots = np.flatnonzero(in_block(idx, x.shape, start, blk.shape))
    np.testing.assert_array_equal(np.sort(slots), want_slots)
    assert want_slots.size > 0
    np.testing.assert_array_equal(vals, w.ravel()[idx[slots]].astype(np.float64))  # NaN == NaN
    wb = w[sl]
    fin = wb[np.isfinite(wb)]
    assert ext == (float(fin.min()), float(fin.max()))
    if kind == "raw":
        return
    level = float(np.nanpercentile(np.abs(wb), 97))  # ~3 % of the voxels above it
    got = _core._scfind_block_clip(blk, mb, *args, level, True, "cpu")
    hit = np.abs(wb.astype(np.float64)) > level  # NaN (blank) never
    np.testing.assert_array_equal(got, mb | hit.astype(np.uint8))
    assert hit.sum() > 0 and got.dtype == np.uint8 and got.shape == mb.shape
    # the clip of the kept W (input "raw": no kernel runs) is the same mask
    raw = _core._scfind_block_clip(kept[3], mb, SPECS["none"], MODE, REP, RMS0, "raw", level,
                                   True, "cpu")  # fmt: skip
    np.testing.assert_array_equal(raw, got)


@pytest.mark.parametrize("sampling", [("backward", 11), ("cadence", 4), ("stride", 3)])
def test_block_samples_partition_the_whole_sample(rng, sampling):
    """Blocks tiling the cube hand in every slot of the whole cube's sample exactly once, with
    the single call's sampled values (the "raw" sample is the cube's own values)."""
    x, m = cube_and_mask(rng, dtype=np.float64)
    nz, ny, nx = x.shape
    got = {}
    for z0, z1 in ((0, 8), (8, 21)):
        for y0, y1 in ((0, 10), (10, 17), (17, 26)):
            for x0, x1 in ((0, 23),):
                sl = (slice(z0, z1), slice(y0, y1), slice(x0, x1))
                slots, vals, _, _ = _core._scfind_block_sample(
                    np.ascontiguousarray(x[sl]), np.ascontiguousarray(m[sl]), SPECS["none"],
                    MODE, REP, RMS0, "raw", [z0, y0, x0], list(x.shape), sampling, False,
                )  # fmt: skip
                for k, v in zip(slots.tolist(), vals.tolist()):
                    assert k not in got
                    got[k] = v
    kind, c = sampling
    if kind == "stride":
        g = x[::c, ::c, ::c].ravel()
    else:
        g = x.ravel()[sample_index(x.shape, sampling)]
    assert sorted(got) == list(range(g.size))
    np.testing.assert_array_equal(np.array([got[k] for k in range(g.size)]), g)


def test_block_calls_refuse_bad_arguments(rng):
    x, m = cube_and_mask(rng)
    args = (SPECS["both"], MODE, REP, RMS0)
    with pytest.raises(ValueError, match="input must be"):
        _core._scfind_block_clip(x, m, *args, "wrong", 1.0)
    with pytest.raises(skyconv.ShapeError, match="does not fit"):
        _core._scfind_block_sample(x, m, *args, "cube", [1, 0, 0], list(x.shape),
                                   ("backward", 3), False)  # fmt: skip
    with pytest.raises(skyconv.ShapeError, match="mask"):
        _core._scfind_block_clip(x, m[:-1].copy(), *args, "cube", 1.0)


# ------------------------------------------------------------------ the graph on the cluster


@pytest.mark.parametrize(
    "chunks,keep,kw",
    [
        # slabs already (no rechunk of the cube), SoFiA-2's default kernels
        ((6, 26, 23), True, {}),
        # 3-D blocks (the cube rechunked to slabs and columns), kernels with one part each
        ((7, 10, 9), True, {"kernels_xy": (0, 3), "kernels_z": (0, 5), "statistic": "gauss"}),
        # without keeping the smoothed cubes: smoothed and transposed twice per kernel
        ((6, 13, 23), False, {"kernels_xy": (3,), "kernels_z": (3, 7), "flux_range": "full"}),
    ],
)
def test_fused_graph_equals_the_single_call(dask_client, rng, monkeypatch, chunks, keep, kw):
    """Every task of the staged graph that touches the cube is one core call: the spatial
    stage, the fused sample, the fused clip (and the mask's preparation); mask identical and
    noise bit-identical to the single call."""
    da = pytest.importorskip("dask.array")
    from skyconv._dask import cube as dcube
    from skyconv._dask import device as ddev

    monkeypatch.setattr(dcube, "SINGLE_TASK_BYTES", 0)
    # in memory (not the scratch store), keeping the smoothed cubes or not
    monkeypatch.setattr(dcube, "_fits_in_memory", lambda nbytes: keep)
    inner = dcube.smooth_and_clip
    monkeypatch.setattr(dcube, "smooth_and_clip",
                        lambda *a, **k: inner(*a, out_of_core=False, **k))  # fmt: skip
    x, _ = cube_and_mask(rng)
    m0 = np.zeros(x.shape, bool)
    m0[0:2, 0:5, 0:5] = True
    kw = {"threshold": 4.0, "mask": m0, **kw}
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    ddev.reset(dask_client)
    lazy, ng = skyconv.smooth_and_clip(
        da.from_array(x, chunks=chunks), device="cpu", return_noise=True, **kw
    )
    got = dask_client.compute(lazy).result()
    np.testing.assert_array_equal(got, want)
    assert want.sum() > 0
    assert [ng.rms0] + ng.rms == [nw.rms0] + nw.rms
    used = ddev.devices_used(dask_client)
    assert set(used) <= {"scfind.spatial", "scfind.sample", "scfind.clip"}, used
    assert {"scfind.sample", "scfind.clip"} <= set(used), used
    # one clip task per block per kernel (a retried task would add more: none here)
    nk = len(ng.rms)
    assert sum(used["scfind.clip"].values()) >= nk


def test_transposition_is_one_rechunk_step(monkeypatch):
    """Slabs → columns in one step (Dask's own plan takes an intermediate chunking here, which
    moves the cube between workers twice); beyond ONE_STEP_PIECES, Dask's plan."""
    da = pytest.importorskip("dask.array")
    from skyconv._dask import cube as dcube

    x = da.zeros((256, 312, 312), chunks=(32, 312, 312), dtype=np.float32)
    cols = (256, 110, 110)
    assert len(x.rechunk(cols).dask.layers) == 3  # Dask's plan: two steps
    y = dcube._rechunk(x, cols)
    assert len(y.dask.layers) == 2 and y.chunks == x.rechunk(cols).chunks
    np.testing.assert_array_equal(y[:, 100:120, 200:230].compute(), 0)
    assert dcube._rechunk(x, x.chunks) is x
    monkeypatch.setattr(dcube, "ONE_STEP_PIECES", 10)
    assert len(dcube._rechunk(x, cols).dask.layers) == 3


def test_w_is_kept_only_on_cpu_workers(dask_client):
    """The clip reads a kept W only where every worker runs the CPU engine; a GPU worker
    smooths again on the device (W's trip back over PCIe would cost more)."""
    from skyconv._dask import cube as dcube

    assert dcube._on_cpu("cpu")
    assert dcube._on_cpu(None) == (not skyconv.backend_info()["cuda"].get("device_count"))
    assert not dcube._on_cpu("cuda:7")  # no such GPU: not the CPU, whatever the workers have


# ------------------------------------------------------------------ GPU (run on the H100s)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kind,sl", BLOCKS)
def test_gpu_block_calls_equal_the_cpu_ones(rng, dtype, name, kind, sl):
    """precision "sofia2": the engines are bit-identical, so each fused block call on the GPU
    (one upload, every step on the device, the sample / the mask down once) equals the CPU's."""
    x, m = cube_and_mask(rng, dtype=dtype)
    spec = SPECS[name]
    _, s = whole_w(x, m, spec)
    src = s if kind == "smoothed" else x
    blk, mb = np.ascontiguousarray(src[sl]), np.ascontiguousarray(m[sl])
    start = [r.indices(n)[0] for r, n in zip(sl, x.shape)]
    args = (spec, MODE, REP, RMS0, kind)
    for sampling in (("backward", 7), ("cadence", 3)):
        a = _core._scfind_block_sample(blk, mb, *args, start, list(x.shape), sampling, True,
                                       True, "cpu")  # fmt: skip
        b = _core._scfind_block_sample(blk, mb, *args, start, list(x.shape), sampling, True,
                                       True, "cuda")  # fmt: skip
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        assert a[2] == b[2]
    # W kept on the GPU (downloaded, NaN where blank) equals the CPU's
    ka = _core._scfind_block_sample(blk, mb, *args, start, list(x.shape), ("backward", 7),
                                    False, True, "cpu", keep=True)  # fmt: skip
    kb = _core._scfind_block_sample(blk, mb, *args, start, list(x.shape), ("backward", 7),
                                    False, True, "cuda", keep=True)  # fmt: skip
    np.testing.assert_array_equal(ka[3], kb[3])
    if kind != "raw":
        w, _ = whole_w(x, m, spec)
        level = float(np.nanpercentile(np.abs(w[sl]), 97))
        a = _core._scfind_block_clip(blk, mb, *args, level, True, "cpu")
        b = _core._scfind_block_clip(blk, mb, *args, level, True, "cuda")
        np.testing.assert_array_equal(a, b)
        assert (a & 1).sum() > (mb & 1).sum()
        # the clip of the kept W on the GPU: the same mask
        raw = (SPECS["none"], MODE, REP, RMS0, "raw", level, True)
        np.testing.assert_array_equal(_core._scfind_block_clip(kb[3], mb, *raw, "cuda"), a)
