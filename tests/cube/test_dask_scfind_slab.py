"""Smooth + Clip through Dask on z-slabs only (CPU workers, precision="sofia2"): SoFiA-2's
spectral running mean split along z with a carry (`_scfind_slab_sample`) equals the whole-cube
spectral pass bit for bit, and the graph built on it (no transposition to columns) gives the
single call's mask voxel for voxel and its noise values, for kernel sets, statistics, NaN
planes and sources across slab edges and slabs thinner than the halo."""

from __future__ import annotations

import numpy as np
import pytest
from test_dask_scfind import check, make_cube

import skyconv
from skyconv import ShapeError, _core
from skyconv._dask import cluster

MODE = "constant"
SAMPLING = ("backward", 7)


def spec(zw, sigma=0.0):
    return ("boxcar", sigma, sigma, "boxcar", float(zw), False)


def slab_chain(s, mask, kernel, edges, keep=True, rows=None):
    """The slabs' sample parts, from the top slab down, each with the carry of the slab above;
    with ``rows`` = (y0, y1), of that group of rows only (one chain of the wavefront)."""
    nz, r = s.shape[0], int(kernel[4]) // 2
    y0, y1 = (0, s.shape[1]) if rows is None else rows
    carry, parts = None, {}
    for k in reversed(range(len(edges) - 1)):
        z0, z1 = edges[k], edges[k + 1]
        below, above = min(r, z0), min(r + 1, nz - z1)
        parts[k] = _core._scfind_slab_sample(
            np.ascontiguousarray(s[z0 - below : z1 + above, y0:y1]),
            np.ascontiguousarray(mask[z0:z1, y0:y1]), kernel, MODE, below, carry, z0,
            list(s.shape), SAMPLING, True, True, "cpu", keep, y0,
        )  # fmt: skip
        carry = parts[k][4]
        assert carry.shape == (y1 - y0, s.shape[2]) and carry.dtype == s.dtype
    return [parts[k] for k in range(len(edges) - 1)]


def group_chains(s, mask, kernel, edges, yedges):
    """The chains of every row group (as the Dask graph runs them, in any order): per slab,
    (W of the whole slab, the slots, values and extremes of its groups in slot order)."""
    chains = [slab_chain(s, mask, kernel, edges, rows=g) for g in zip(yedges[:-1], yedges[1:])]
    out = []
    for k in range(len(edges) - 1):
        parts = [c[k] for c in chains]
        order = np.argsort(np.concatenate([p[0] for p in parts]), kind="stable")
        ext = [p[2] for p in parts if p[2] is not None]
        out.append((
            np.concatenate([p[3] for p in parts], axis=1),
            np.concatenate([p[0] for p in parts])[order],
            np.concatenate([p[1] for p in parts])[order],
            (min(e[0] for e in ext), max(e[1] for e in ext)) if ext else None,
        ))  # fmt: skip
    return out


EDGES = {
    "even": [0, 8, 16, 23],
    "thin": [0, 1, 2, 5, 6, 23],  # slabs of 1 and 3 planes: thinner than r for zw >= 7
    "planes": list(range(24)),  # every plane its own slab
    "top": [0, 22, 23],
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("zw", [3, 7, 15])
@pytest.mark.parametrize("edges", list(EDGES))
def test_slab_chain_equals_the_whole_spectral_pass(rng, dtype, zw, edges):
    """W, sample and extremes of the slab chain equal the whole cube's spectral pass (the
    single call's values, `_scfind_spectral` / `_scfind_block_sample`) bit for bit."""
    shape = (23, 9, 70)
    s = rng.standard_normal(shape).astype(dtype)
    s[3] *= 1e4  # a loud plane: a running mean whose rounding carries its history
    mask = np.zeros(shape, np.uint8)
    mask[11] = 0x80  # a blank plane
    mask[5, 2, 3:40] = 0x80
    kernel = spec(zw)
    want_w = _core._scfind_spectral(s, mask, kernel, MODE, True, "cpu")
    want = _core._scfind_block_sample(
        s, mask, kernel, MODE, ("none", 0.0), 0.0, "smoothed", [0, 0, 0], list(shape),
        SAMPLING, True, True, "cpu", False,
    )  # fmt: skip
    parts = slab_chain(s, mask, kernel, EDGES[edges])
    w = np.concatenate([p[3] for p in parts])
    np.testing.assert_array_equal(w, want_w)  # NaN where blank, bit for bit elsewhere
    assert np.isnan(w[11]).all() and np.isfinite(w[10]).all()
    slots = np.concatenate([p[0] for p in parts])
    vals = np.concatenate([p[1] for p in parts])
    np.testing.assert_array_equal(slots, want[0])
    np.testing.assert_array_equal(vals, want[1])
    ext = [p[2] for p in parts if p[2] is not None]  # None: an all-blank slab (plane 11)
    lo, hi = min(e[0] for e in ext), max(e[1] for e in ext)
    assert (lo, hi) == want[2]


#: Row groups of the 9 rows: unequal heights, every row its own group, one group.
YEDGES = {"unequal": [0, 2, 3, 7, 9], "rows": list(range(10)), "one": [0, 9]}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("zw", [3, 15])
@pytest.mark.parametrize("edges", ["even", "thin"])
@pytest.mark.parametrize("yedges", list(YEDGES))
def test_row_group_chains_equal_the_whole_slab_pass(rng, dtype, zw, edges, yedges):
    """The wavefront's chains (each slab split into groups of rows, each group's carry from
    the same group of the slab above) give each slab's W, sample slots, values and extremes
    of the one-chain pass (whole planes) bit for bit, and so the whole cube's pass."""
    shape = (23, 9, 70)
    s = rng.standard_normal(shape).astype(dtype)
    s[3] *= 1e4  # a loud plane
    s[17, 4] *= 1e5  # a loud row in one group
    mask = np.zeros(shape, np.uint8)
    mask[11] = 0x80  # a blank plane
    mask[5, 2, 3:40] = 0x80
    mask[6:9, 3] = 0x80  # a group (of "unequal") blank in three planes
    kernel = spec(zw)
    whole = slab_chain(s, mask, kernel, EDGES[edges])
    groups = group_chains(s, mask, kernel, EDGES[edges], YEDGES[yedges])
    for (w, slots, vals, ext), want in zip(groups, whole):
        np.testing.assert_array_equal(w, want[3])
        order = np.argsort(want[0], kind="stable")  # slot order (backward: they fall)
        np.testing.assert_array_equal(slots, want[0][order])
        np.testing.assert_array_equal(vals, want[1][order])
        assert ext == want[2]
    want_w = _core._scfind_spectral(s, mask, kernel, MODE, True, "cpu")
    np.testing.assert_array_equal(np.concatenate([g[0] for g in groups]), want_w)


def test_slab_pass_is_not_a_fresh_start(rng):
    """A pass started afresh above plane 20 (every window below it has its data: only the
    running mean's rounding history differs) differs from the whole cube's pass in float32;
    the slabs with the carry do not."""
    s = rng.standard_normal((40, 4, 64)).astype(np.float32) * 1e3
    mask = np.zeros(s.shape, np.uint8)
    kernel = spec(7)
    whole = _core._scfind_spectral(s, mask, kernel, MODE, True, "cpu")
    fresh = _core._scfind_spectral(s[:24], mask[:24], kernel, MODE, True, "cpu")
    assert not np.array_equal(fresh[:20], whole[:20])
    chain = np.concatenate([p[3] for p in slab_chain(s, mask, kernel, [0, 20, 40])])
    np.testing.assert_array_equal(chain, whole)


def test_slab_pass_refuses_wrong_halos_and_kernels(rng):
    s = rng.standard_normal((10, 3, 4)).astype(np.float32)
    mask = np.zeros(s.shape, np.uint8)
    kernel = spec(5)  # r = 2: planes 4..7 need 2 below and 3 above
    carry = np.zeros((3, 4), np.float32)
    args = (MODE,)
    ok = _core._scfind_slab_sample(s[2:10], mask[4:7], kernel, *args, 2, carry, 4, [10, 3, 4],
                                   SAMPLING, False)  # fmt: skip
    assert ok[4].shape == (3, 4)
    with pytest.raises(ShapeError, match="2 planes below and 3 above"):
        _core._scfind_slab_sample(s[2:9], mask[4:7], kernel, *args, 2, carry, 4, [10, 3, 4],
                                  SAMPLING, False)  # fmt: skip
    with pytest.raises(ShapeError, match="carry"):
        _core._scfind_slab_sample(s[2:10], mask[4:7], kernel, *args, 2, None, 4, [10, 3, 4],
                                  SAMPLING, False)  # fmt: skip
    with pytest.raises(ShapeError, match="row 2 does not fit"):  # rows 2..5 of 3
        _core._scfind_slab_sample(s[2:10], mask[4:7], kernel, *args, 2, carry, 4, [10, 3, 4],
                                  SAMPLING, False, y0=2)  # fmt: skip
    with pytest.raises(ShapeError, match="carry"):  # a group's carry holds its rows only
        _core._scfind_slab_sample(s[2:10, 1:].copy(), mask[4:7, 1:].copy(), kernel, *args, 2,
                                  carry, 4, [10, 3, 4], SAMPLING, False, y0=1)  # fmt: skip
    with pytest.raises(ValueError, match="running mean"):
        _core._scfind_slab_sample(s[2:10], mask[4:7], kernel, *args, 2, carry, 4, [10, 3, 4],
                                  SAMPLING, False, False)  # fmt: skip


da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")


@pytest.fixture
def spy(monkeypatch):
    """Counts the slab passes and records every rechunk's target (the client builds the
    graph, so patching here sees it)."""
    from skyconv._dask import cube

    monkeypatch.setattr(cube, "SINGLE_TASK_BYTES", 0)
    seen = {"slabs": 0, "rechunks": [], "groups": []}
    slabs, rechunk = cube._Noise.slabs, cube._rechunk

    def slabs_spy(self, *a, **k):
        seen["slabs"] += 1
        rms, w = slabs(self, *a, **k)
        seen["groups"].append(tuple(int(n) for n in np.diff(w[1])))
        return rms, w

    def rechunk_spy(a, chunks):
        seen["rechunks"].append(chunks)
        return rechunk(a, chunks)

    monkeypatch.setattr(cube._Noise, "slabs", slabs_spy)
    monkeypatch.setattr(cube, "_rechunk", rechunk_spy)
    return seen


GRAPHS = [
    # SoFiA-2's 12 default kernels, slabs of 6 planes (reach 7 for z = 15: thinner than r)
    ({"statistic": "mad", "flux_range": "negative"}, 6, 9),
    ({"statistic": "std", "flux_range": "full", "kernels_xy": (0, 3), "kernels_z": (3, 7)}, 5, 4),
    ({"statistic": "gauss", "kernels_xy": (0, 6), "kernels_z": (0, 15), "replacement": -1}, 4, 2),
    # slabs of 1 and 2 planes: every halo spans several slabs
    ({"statistic": "mad", "kernels_xy": (3,), "kernels_z": (3, 7)}, (1, 2, 1, 2, 3, 9), 2),
]


def same_as_single(client, spy, x, kw, chunks, n_slab):
    """The Dask call on ``x`` in ``chunks`` against the single call: masks identical, noise
    bit-identical, ``n_slab`` kernels through the slab pass."""
    kw = {"threshold": 3.5, **kw}
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    lazy, ng = skyconv.smooth_and_clip(da.from_array(x, chunks=chunks), return_noise=True, **kw)
    check(client.compute(lazy).result(), ng, want, nw, 0)
    assert spy["slabs"] == n_slab


@pytest.mark.parametrize("kw,zc,n_slab", GRAPHS)
def test_slab_graph_equals_the_single_call(dask_client, spy, rng, kw, zc, n_slab):
    """The Dask graph on CPU workers: masks identical and noise bit-identical to the single
    call, every exact spectral kernel through the slab pass, no rechunk to whole-z columns."""
    x = make_cube(rng)  # sources and NaN block across slab edges, an all-NaN plane (z = 4)
    x[13] = np.nan  # a second NaN plane, at a slab edge for zc = 1, 2
    same_as_single(dask_client, spy, x, kw, (zc, 30, 28), n_slab)
    assert all(c[0] != -1 for c in spy["rechunks"])  # never whole-z columns


@pytest.mark.parametrize("kw,zc,n_slab", [GRAPHS[0], GRAPHS[3]])
def test_gpu_workers_take_the_slab_graph(dask_client, spy, monkeypatch, rng, kw, zc, n_slab):
    """The graph GPU workers take (`_on_cpu` False: the other kernels keep the smoothed cube,
    not W, and clip by smoothing again), run here on CPU workers: the exact spectral kernels
    still go through the slab pass (one graph, whatever the device), never whole-z columns
    for them, and the mask and noise stay the single call's."""
    from skyconv._dask import cube

    monkeypatch.setattr(cube, "_on_cpu", lambda device: False)
    monkeypatch.setattr(cube, "Z_SLABS_GPU", True)
    same_as_single(dask_client, spy, make_cube(rng), kw, (zc, 30, 28), n_slab)
    assert all(c[0] != -1 for c in spy["rechunks"])


@pytest.mark.parametrize("groups", [3, 7, 1000])  # rows 30: groups of 10, of 4 and 5, of 1
@pytest.mark.parametrize("kw,zc,n_slab", [GRAPHS[0], GRAPHS[2], GRAPHS[3]])
def test_wavefront_graph_equals_the_single_call(dask_client, spy, monkeypatch, rng, groups, kw,
                                                zc, n_slab):  # fmt: skip
    """The slab pass as a wavefront of row-group chains (any number of them, more than the
    rows included): masks identical and noise bit-identical to the single call."""
    from skyconv._dask import cube

    monkeypatch.setattr(cube, "SLAB_GROUPS", groups)
    same_as_single(dask_client, spy, make_cube(rng), kw, (zc, 30, 28), n_slab)
    heights = np.diff(np.linspace(0, 30, min(groups, 30) + 1).round()).astype(int)
    assert spy["groups"] == [tuple(heights)] * n_slab


def test_slabs_are_contiguous_and_groups_fit_the_cluster(dask_client, monkeypatch, rng):
    """The persisted slabs lie in contiguous runs over the workers (slab k on the k·N // B-th);
    the wavefront has two chains a Dask thread (2 workers × 1: 4), at most one a row, none
    of fewer than MIN_GROUP_VOXELS voxels."""
    from skyconv._dask import cube

    x = da.from_array(make_cube(rng), chunks=(3, 30, 28))
    base, owners = cube._persist_slabs(x)
    workers = [w["address"] for w in cluster.workers(dask_client)]
    assert owners == [workers[k * 2 // 6] for k in range(6)]
    np.testing.assert_array_equal(base.compute(), x.compute())
    assert cube._groups((18, 30, 28), 3) == 1  # 2520 voxels a slab: one group
    monkeypatch.setattr(cube, "MIN_GROUP_VOXELS", 1000)
    assert cube._groups((18, 30, 28), 3) == 2
    monkeypatch.setattr(cube, "MIN_GROUP_VOXELS", 1)
    assert cube._groups((18, 30, 28), 3) == 4 and cube._groups((18, 3, 28), 3) == 3


def test_slab_kernel_makes_one_task_a_slab_and_group(dask_client, spy, monkeypatch, rng):
    """One slab-pass kernel on B = 6 slabs (3 a worker: c = 1 slab edge between the two
    workers) by J = 3 row groups runs B·J core calls and, besides them, only per slab its
    spatial stage, its sample part and its clip, and per edge between workers the halo piece
    each way as its own task, and the noise and the clip's level as one task each:
    B·J + 3·B + 2·c + 2 = 18 + 18 + 2 + 2. A group below the edge reads its carry from the
    whole result above (the clip candidates on CPU workers, not W): no c·J carry getitems
    (session 20; before, 2·c + c·J getitems). The graph before session 16 made ~9 tasks a core
    call (a getitem for each of the sample's 3 fields, W, the carry, W's and the mask's array
    wrappers). Masks and noise stay the single call's."""
    from dask.utils import key_split
    from distributed import get_task_stream

    from skyconv._dask import cube

    monkeypatch.setattr(cube, "SLAB_GROUPS", 3)
    graphs, graph = [], cube._Layer.graph

    def spy_graph(self, name, dependencies):
        graphs.append((graph(self, name, dependencies), name))
        return graphs[-1][0]

    monkeypatch.setattr(cube._Layer, "graph", spy_graph)
    x = make_cube(rng)
    kw = {"threshold": 3.5, "kernels_xy": (3,), "kernels_z": (3,)}  # one kernel, both parts
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    with get_task_stream(dask_client) as ts:
        lazy, ng = skyconv.smooth_and_clip(da.from_array(x, chunks=(3, 30, 28)),
                                           return_noise=True, **kw)  # fmt: skip
        got = dask_client.compute(lazy).result()
    check(got, ng, want, nw, 0)
    assert spy["slabs"] == 1
    ran = {}
    for rec in ts.data:
        ran[key_split(rec["key"])] = ran.get(key_split(rec["key"]), 0) + 1
    b, j, c = 6, 3, 1
    assert ran["slab_core"] == b * j
    assert ran["spatial_block"] == ran["sample_of"] == ran["clip_rows"] == b
    assert ran.get("getitem", 0) == 2 * c  # the halo pieces only: no carry cut at the edge
    assert ran["noise_rule"] == ran["mul"] == 1  # the noise and the clip's level, on a worker
    # the rest of the run, a task a slab each: the input's blocks, the slabs persisted (blocks,
    # concatenate), the zero mask, its preparation, rms0's sample, the output's bit 0; and the
    # result: no wrapper task a block (the kept results and masks are the arrays' own keys)
    assert sum(ran.values()) == (b * j + 3 * b + 2 * c + 2) + 7 * b + 1
    # the pass's tasks are one layer of the graph (built as a dict), each pinned by per-key
    # annotations to the worker that holds its slab (3 a worker, by address), chain j's core
    # calls at priority −j
    (layer,) = [g.layers[name] for g, name in graphs]
    notes = layer.annotations
    workers = [w["address"] for w in cluster.workers(dask_client)]
    assert {key_split(key) for key in layer} == {"slab_core", "getitem", "sample_of"}
    for key in layer:
        k = key[1]  # a core call's and a sample part's slab; a halo piece's source slab
        assert notes["workers"](key) == [workers[k * 2 // b]]
        assert notes["allow_other_workers"](key) is True
        want_priority = -key[2] if key_split(key) == "slab_core" and key[2] else None
        assert notes["priority"](key) == want_priority


# ------------------------------------------------------------------ GPU (run on the H100s)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("zw", [3, 7, 15])
@pytest.mark.parametrize("edges", list(EDGES))
@pytest.mark.parametrize("yedges", ["unequal", "one"])
def test_gpu_slab_pass_equals_the_cpu_one(rng, dtype, zw, edges, yedges):
    """precision "sofia2": the GPU engine's spectral running mean is the CPU's bit for bit (as
    for `_scfind_block_sample`), so every slab call on the GPU (top, middle and bottom slabs,
    slabs thinner than the halo, row groups, a blank plane, a loud plane) handed the CPU
    chain's carry gives the CPU call's slots, values, extremes, W and next carry exactly."""
    shape = (23, 9, 70)
    s = rng.standard_normal(shape).astype(dtype)
    s[3] *= 1e4  # a loud plane: a running mean whose rounding carries its history
    s[17, 4] *= 1e5  # a loud row in one group
    mask = np.zeros(shape, np.uint8)
    mask[11] = 0x80  # a blank plane
    mask[5, 2, 3:40] = 0x80
    mask[6:9, 3] = 0x80
    kernel, r, nz = spec(zw), zw // 2, shape[0]
    edge, yedge = EDGES[edges], YEDGES[yedges]
    for y0, y1 in zip(yedge[:-1], yedge[1:]):
        carry = None
        for k in reversed(range(len(edge) - 1)):
            z0, z1 = edge[k], edge[k + 1]
            below, above = min(r, z0), min(r + 1, nz - z1)
            args = (np.ascontiguousarray(s[z0 - below : z1 + above, y0:y1]),
                    np.ascontiguousarray(mask[z0:z1, y0:y1]), kernel, MODE, below, carry, z0,
                    list(shape), SAMPLING, True, True)  # fmt: skip
            a = _core._scfind_slab_sample(*args, "cpu", True, y0)
            b = _core._scfind_slab_sample(*args, "cuda", True, y0)
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])
            assert a[2] == b[2]
            np.testing.assert_array_equal(a[3], b[3])  # W: NaN where blank
            np.testing.assert_array_equal(a[4], b[4])  # the carry for the slab below
            assert b[4].dtype == dtype and b[4].shape == (y1 - y0, shape[2])
            c = _core._scfind_slab_sample(*args[:9], False, True, "cuda", False, y0)
            assert c[2] is None and c[3] is None
            np.testing.assert_array_equal(c[1], a[1])
            np.testing.assert_array_equal(c[4], a[4])
            carry = a[4]


@pytest.mark.gpu
@pytest.mark.parametrize("kw,zc,n_slab", [GRAPHS[0], GRAPHS[3]])
def test_gpu_slab_graph_equals_the_single_call(dask_client, spy, monkeypatch, rng, kw, zc,
                                               n_slab):  # fmt: skip
    """The Dask graph on GPU workers (every core call on "cuda") takes the slab pass for the
    exact spectral kernels and gives the single call's mask voxel for voxel and its noise
    bit for bit (the CPU's and the GPU's single calls agree for precision "sofia2")."""
    from skyconv._dask import cube
    from skyconv._dask import device as ddev

    assert not cube._on_cpu("cuda")
    monkeypatch.setattr(cube, "Z_SLABS_GPU", True)
    ddev.reset(dask_client)
    x = make_cube(rng)
    kw = {"threshold": 3.5, **kw}
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    gw, gnw = skyconv.smooth_and_clip(x, device="cuda", return_noise=True, **kw)
    check(gw, gnw, want, nw, 0)
    lazy, ng = skyconv.smooth_and_clip(da.from_array(x, chunks=(zc, 30, 28)), device="cuda",
                                       return_noise=True, **kw)  # fmt: skip
    check(dask_client.compute(lazy).result(), ng, want, nw, 0)
    assert spy["slabs"] == n_slab
    used = ddev.devices_used(dask_client)
    assert all(d.startswith("cuda") for d in used["scfind.sample"])
