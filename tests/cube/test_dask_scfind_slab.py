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

MODE = "constant"
SAMPLING = ("backward", 7)


def spec(zw, sigma=0.0):
    return ("boxcar", sigma, sigma, "boxcar", float(zw), False)


def slab_chain(s, mask, kernel, edges, keep=True):
    """The slabs' sample parts, from the top slab down, each with the carry of the slab above."""
    nz, r = s.shape[0], int(kernel[4]) // 2
    carry, parts = None, {}
    for k in reversed(range(len(edges) - 1)):
        z0, z1 = edges[k], edges[k + 1]
        below, above = min(r, z0), min(r + 1, nz - z1)
        parts[k] = _core._scfind_slab_sample(
            s[z0 - below : z1 + above], mask[z0:z1], kernel, MODE, below, carry, z0,
            list(s.shape), SAMPLING, True, True, "cpu", keep,
        )  # fmt: skip
        carry = parts[k][4]
        assert carry.shape == s.shape[1:] and carry.dtype == s.dtype
    return [parts[k] for k in range(len(edges) - 1)]


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
    seen = {"slabs": 0, "rechunks": []}
    slabs, rechunk = cube._Noise.slabs, cube._rechunk

    def slabs_spy(self, *a, **k):
        seen["slabs"] += 1
        return slabs(self, *a, **k)

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


@pytest.mark.parametrize("kw,zc,n_slab", GRAPHS)
def test_slab_graph_equals_the_single_call(dask_client, spy, rng, kw, zc, n_slab):
    """The Dask graph on CPU workers: masks identical and noise bit-identical to the single
    call, every exact spectral kernel through the slab pass, no rechunk to whole-z columns."""
    x = make_cube(rng)  # sources and NaN block across slab edges, an all-NaN plane (z = 4)
    x[13] = np.nan  # a second NaN plane, at a slab edge for zc = 1, 2
    kw = {"threshold": 3.5, **kw}
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    chunks = (zc, 30, 28)
    lazy, ng = skyconv.smooth_and_clip(da.from_array(x, chunks=chunks), return_noise=True, **kw)
    check(dask_client.compute(lazy).result(), ng, want, nw, 0)
    assert spy["slabs"] == n_slab
    assert all(c[0] != -1 for c in spy["rechunks"])  # never whole-z columns
