"""Smooth + Clip through Dask, the z-slab pass's clip from the single call's clip candidates:
the slab call (`_scfind_slab_sample(..., candidates=True)`) keeps, instead of W, per column
block the voxels whose |W| is above the block's floor, and the clip (`_scfind_slab_clip`)
decides from them where the level is above the floor, elsewhere by the block's spectral pass
again from the slab call's own inputs. Checked against the clip of W itself (bit for bit, every
level from 0 to above the maximum), the lists against W, and on the 2-process cluster against
the single call's mask and noise where the fallback is forced (a low threshold) and with many
detections (blocks decided both ways), counting the clip calls of each kind on the workers."""

from __future__ import annotations

import numpy as np
import pytest
from test_dask_scfind import check, make_cube
from test_dask_scfind_slab import MODE, SAMPLING, slab_chain, spec

import skyconv
from skyconv import ShapeError, _core

da = pytest.importorskip("dask.array")

RAW = ("gaussian", 0.0, 0.0, "none", 0.0, False)
BLOCK = 1024  # columns of the engine's spectral pass (cpu.rs `BLOCK`)


def slab_cube(rng, dtype, shape=(21, 40, 70)):
    """A spatial stage (no NaN: blank voxels are 0 before smoothing) of 3 column blocks a
    plane (2800 columns), a bright patch in one block only (its list overflows far above the
    noise), blank voxels (W NaN there), a blank plane."""
    s = rng.standard_normal(shape).astype(dtype)
    s[4:15, 2:9, 10:60] += 6.0  # rows 2..8: columns 150..620, block 0 only
    mask = np.zeros(shape, np.uint8)
    mask[9] = 0x80
    mask[5, 30, 3:40] = 0x80
    return s, mask


def clip_of_w(w, mask, level):
    """The clip of W itself (`_scfind_block_clip`, input "raw"): the kept-W graph's."""
    return _core._scfind_block_clip(w, mask, RAW, MODE, ("none", 0.0), 0.0, "raw", level, True,
                                    "cpu")  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("zw", [3, 15])
@pytest.mark.parametrize("rows", [None, (9, 31)])
def test_clip_from_candidates_equals_the_clip_of_w(rng, dtype, zw, rows):
    """For each slab of a chain (top, middle, bottom; one thinner than the halo) and each level
    (0, the noise's bulk, just above and below a block's floor, above the maximum), the clip
    from the candidates equals the clip of the slab's W bit for bit; without the planes it
    answers None exactly when a block's floor is at or above the level; every list holds
    exactly the block's non-blank voxels with |W| above its floor, with W's values."""
    s, mask = slab_cube(rng, dtype)
    edges, kernel, r = [0, 2, 12, 21], spec(zw), zw // 2
    y0, y1 = (0, s.shape[1]) if rows is None else rows
    with_w = slab_chain(s, mask, kernel, edges, keep=True, rows=rows)
    carries = [with_w[k + 1][4] if k + 1 < len(edges) - 1 else None for k in range(3)]
    fallbacks = 0
    for k in range(len(edges) - 1):
        z0, z1 = edges[k], edges[k + 1]
        below, above = min(r, z0), min(r + 1, s.shape[0] - z1)
        planes = np.ascontiguousarray(s[z0 - below : z1 + above, y0:y1])
        m = np.ascontiguousarray(mask[z0:z1, y0:y1])
        w = with_w[k][3]
        got = _core._scfind_slab_sample(
            planes, m, kernel, MODE, below, carries[k], z0, list(s.shape), SAMPLING, True,
            True, "cpu", False, y0, True,
        )  # fmt: skip
        for j in (0, 1, 4):  # the sample and the carry are the W call's
            np.testing.assert_array_equal(got[j], with_w[k][j])
        assert got[2] == with_w[k][2]
        floor, ends, idx, val = cands = got[3]
        assert floor.dtype == val.dtype == np.float64 and idx.dtype == ends.dtype == np.uint64
        plane = (y1 - y0) * s.shape[2]
        assert len(floor) == len(ends) == -(-plane // BLOCK)
        flat, wf = m.reshape(-1), w.reshape(-1)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        for b, (a, e) in enumerate(zip(starts, ends.astype(np.int64))):
            cols = np.zeros(plane, bool)
            cols[b * BLOCK : (b + 1) * BLOCK] = True
            want = np.flatnonzero(np.tile(cols, z1 - z0) & (flat & 0x80 == 0)
                                  & (np.abs(wf) > floor[b]))  # fmt: skip
            got = np.sort(idx[a:e].astype(np.int64))
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(val[a:e], wf[idx[a:e].astype(np.int64)].astype(float))
        assert floor.max() > 0  # the bright block's list overflowed
        finite = np.abs(wf[np.isfinite(wf)]).astype(float)
        levels = [0.0, float(np.quantile(finite, 0.5)), float(finite.max()) * 1.01]
        levels += [float(np.nextafter(f, np.inf)) for f in floor] + [float(f) for f in floor]
        for level in levels:
            args = (m, kernel, MODE, level, cands, z0, list(s.shape), y0)
            quick = _core._scfind_slab_clip(*args)
            decided = bool((level > floor).all())
            assert (quick is not None) == decided
            got = _core._scfind_slab_clip(*args, s=planes, below=below, carry=carries[k])
            if quick is not None:
                np.testing.assert_array_equal(quick, got)
            fallbacks += not decided
            np.testing.assert_array_equal(got, clip_of_w(w, m, level))
    assert fallbacks > 0


def test_candidates_refusals(rng):
    """A slab call asked for W and the candidates; lists that are not the slab's (a block
    missing, a voxel in another block's columns, lengths that differ); a clip on the GPU
    engine's name with no GPU."""
    s, mask = slab_cube(rng, np.float32)
    kernel, shape = spec(3), list(s.shape)
    top = np.ascontiguousarray(s[19:])
    m = np.ascontiguousarray(mask[20:])
    with pytest.raises(ValueError, match="not both"):
        _core._scfind_slab_sample(top, m, kernel, MODE, 1, None, 20, shape, SAMPLING, True,
                                  True, "cpu", True, 0, True)  # fmt: skip
    cands = _core._scfind_slab_sample(top, m, kernel, MODE, 1, None, 20, shape, SAMPLING, True,
                                      True, "cpu", False, 0, True)[3]  # fmt: skip
    floor, ends, idx, val = cands
    clip = lambda c: _core._scfind_slab_clip(m, kernel, MODE, 1e9, c, 20, shape)  # noqa: E731
    assert clip(cands) is not None
    with pytest.raises(ShapeError, match="column blocks"):
        clip((floor[:-1], ends[:-1], idx, val))
    moved = idx.copy()
    moved[ends[0] - 1] = BLOCK + 1  # block 0's last voxel, in block 1's columns
    with pytest.raises(ShapeError, match="outside its column block"):
        clip((floor, ends, moved, val))
    with pytest.raises(ShapeError, match="lengths"):
        clip((floor, ends, idx, val[:-1]))


# ------------------------------------------------------------------ the graph, 2 processes


def count_clips(dask_worker):
    """On a worker: count the `_scfind_slab_clip` calls decided from the candidates alone and
    those handed the planes (the spectral pass again over some blocks)."""
    from skyconv import _core

    n = dask_worker.skyconv_clips = {"decided": 0, "again": 0}
    core = dask_worker.skyconv_slab_clip = _core._scfind_slab_clip

    def counted(*a, **k):
        out = core(*a, **k)
        n["again" if k.get("s") is not None else "decided"] += out is not None
        return out

    _core._scfind_slab_clip = counted


def clips_counted(dask_worker):
    """On a worker: the counts, the core's function restored."""
    from skyconv import _core

    _core._scfind_slab_clip = dask_worker.skyconv_slab_clip
    return dask_worker.skyconv_clips


def run_both(client, x, chunks, **kw):
    """The single call and the Dask graph on ``x`` (``chunks``), with the workers' clip counts."""
    want, nw = skyconv.smooth_and_clip(x, device="cpu", return_noise=True, **kw)
    client.run(count_clips)
    try:
        lazy, ng = skyconv.smooth_and_clip(da.from_array(x, chunks=chunks), return_noise=True,
                                           **kw)  # fmt: skip
        got = client.compute(lazy).result()
    finally:
        counts = client.run(clips_counted)
    check(got, ng, want, nw, 0)
    return want, {k: sum(c[k] for c in counts.values()) for k in ("decided", "again")}


@pytest.fixture
def slabs_only(monkeypatch):
    from skyconv._dask import cube

    monkeypatch.setattr(cube, "SINGLE_TASK_BYTES", 0)


def test_dask_clip_falls_back_where_the_candidates_do_not_decide(
    dask_client, slabs_only, monkeypatch, rng
):
    """threshold 1: a third of the voxels clear the level, far above every list's room, so
    every group's clip runs the spectral pass again over its blocks (slabs of 5 planes, 3 row
    groups, halos and carries across slab and worker edges): the single call's mask and noise
    bit for bit, and no clip decided from the candidates alone."""
    from skyconv._dask import cube

    monkeypatch.setattr(cube, "SLAB_GROUPS", 3)
    x = make_cube(rng, shape=(30, 48, 50))
    kw = {"threshold": 1.0, "kernels_xy": (0, 3), "kernels_z": (3, 7)}
    want, counts = run_both(dask_client, x, (5, 48, 50), **kw)
    assert want.mean() > 0.2
    assert counts["again"] > 0 and counts["decided"] == 0


def test_dask_clip_with_many_detections(dask_client, slabs_only, rng):
    """Bright sources packed into the upper half of the rows of the first half of the planes
    (a tenth of the cube and more detected), noise elsewhere: SoFiA-2's 12 kernels give the
    single call's mask and noise bit for bit; the clips of the quiet slabs are decided from
    their candidates alone, those of the bright ones pass their bright blocks again (and take
    their quiet blocks from the lists)."""
    x = rng.standard_normal((36, 64, 64)).astype(np.float32)
    z, y, xx = np.ogrid[:18, :32, :64]
    x[:18, :32] += (5.0 * np.sin(z / 4.0) ** 2 * ((y % 8) < 5) * ((xx % 8) < 5)).astype(x.dtype)
    x[10:14, 40:50, 5:9] = np.nan
    want, counts = run_both(dask_client, x, (6, 64, 64))
    assert want.mean() > 0.1
    assert counts["again"] > 0 and counts["decided"] > 0
