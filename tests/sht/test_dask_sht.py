"""Dask SHTs and smoothing (skyconv._dask.sht) on a 2-worker process cluster: equal to the
single-process calls to <= 1e-12 relative, split and stack modes, unequal and single blocks, a
worker lost mid-run."""

import os

import healpy as hp
import numpy as np
import pytest

import skyconv
from skyconv.exceptions import ArgumentError

da = pytest.importorskip("dask.array")
D = pytest.importorskip("skyconv._dask.sht")

REL = 1e-12
#: The Dask paths are compared with the single-process CPU engine, so they run on the CPU too
#: (device=None would put stack-mode tasks on a GPU where there is one).
CPU = "cpu"


def _alm(rng, ncomp, lmax, mmax):
    n = hp.Alm.getsize(lmax, mmax)
    a = rng.normal(size=(ncomp, n)) + 1j * rng.normal(size=(ncomp, n))
    a[:, : lmax + 1].imag = 0
    return a


def _rel(a, b):
    return np.abs(np.asarray(a) - b).max() / np.abs(b).max()


@pytest.mark.parametrize("nside,lmax,mmax", [(16, 40, 30), (32, 50, 50)])
@pytest.mark.parametrize("pol", [False, True])
def test_alm2map_split(dask_client, nside, lmax, mmax, pol):
    rng = np.random.default_rng(lmax + pol)
    alm = _alm(rng, 3 if pol else 1, lmax, mmax)
    ref = skyconv.alm2map(alm, nside, lmax=lmax, mmax=mmax, pol=pol, device="cpu")
    d = skyconv.alm2map(
        da.from_array(alm, chunks=(1, 97)), nside, lmax=lmax, mmax=mmax, pol=pol, device=CPU
    )
    assert isinstance(d, da.Array)
    # 2 workers: two m blocks a worker (the exchange overlaps the sums), one ring block each
    assert D.last_choice["mode"] == "split" and D.last_choice["m_blocks"] == 4
    # map chunks are ring blocks: contiguous pixel ranges that end on ring boundaries
    ends = np.cumsum(d.chunks[1])
    ring_ends = np.cumsum(hp.ringinfo(nside, np.arange(1, 4 * nside))[1])
    assert set(ends) <= set(ring_ends) and ends[-1] == 12 * nside**2
    assert _rel(d.compute(), ref) <= REL


@pytest.mark.parametrize("iter", [0, 3])
@pytest.mark.parametrize("pol", [False, True])
def test_map2alm_split(dask_client, iter, pol):
    nside, lmax, mmax = 16, 37, 20
    rng = np.random.default_rng(10 * iter + pol)
    maps = rng.normal(size=(3 if pol else 1, 12 * nside**2))
    maps[0, 7] = skyconv.sht.UNSEEN  # counts as 0 in both paths
    ref = skyconv.map2alm(maps, lmax=lmax, mmax=mmax, iter=iter, pol=pol, device="cpu")
    d = skyconv.map2alm(
        da.from_array(maps, chunks=(1, 1000)), lmax=lmax, mmax=mmax, iter=iter, pol=pol, device=CPU
    )
    assert isinstance(d, da.Array) and D.last_choice["mode"] == "split"
    # alm chunks are m blocks: contiguous healpy index ranges starting at a column start
    starts = np.concatenate(([0], np.cumsum(d.chunks[1])[:-1]))
    col_starts = [hp.Alm.getidx(lmax, m, m) for m in range(mmax + 1)]
    assert set(starts) <= set(col_starts)
    assert _rel(d.compute(), ref) <= REL


def test_ring_weights_and_1d(dask_client):
    nside, lmax = 8, 20
    rng = np.random.default_rng(3)
    m = rng.normal(size=12 * nside**2)
    w = 1 + 0.1 * rng.random(2 * nside)
    ref = skyconv.map2alm(m, lmax=lmax, iter=2, ring_weights=w, device="cpu")
    got = skyconv.map2alm(
        da.from_array(m, chunks=200), lmax=lmax, iter=2, ring_weights=w, device=CPU
    )
    assert got.ndim == 1 and _rel(got.compute(), ref) <= REL
    back = skyconv.alm2map(da.from_array(ref, chunks=50), nside, lmax=lmax, device=CPU)
    assert back.ndim == 1
    assert _rel(back.compute(), skyconv.alm2map(ref, nside, lmax=lmax, device="cpu")) <= REL


@pytest.mark.parametrize("nblocks", [(1, 1), (1, 5), (7, 1), (40, 40)])
def test_unequal_and_single_blocks(dask_client, nblocks):
    """One block, fewer m blocks than workers, more blocks than m (clamped)."""
    nside, lmax, mmax = 8, 19, 9
    rng = np.random.default_rng(sum(nblocks))
    alm = _alm(rng, 1, lmax, mmax)
    ref = skyconv.alm2map(alm, nside, lmax=lmax, mmax=mmax, device="cpu")
    d = D.alm2map(da.from_array(alm), nside, lmax=lmax, mmax=mmax, nblocks=nblocks, device=CPU)
    assert D.last_choice["m_blocks"] == min(nblocks[0], mmax + 1)
    assert _rel(d.compute(), ref) <= REL
    refa = skyconv.map2alm(ref, lmax=lmax, mmax=mmax, iter=1, device="cpu")
    a = D.map2alm(da.from_array(ref), lmax=lmax, mmax=mmax, iter=1, nblocks=nblocks, device=CPU)
    assert _rel(a.compute(), refa) <= REL


def test_stack_mode(dask_client):
    """As many independent transforms as workers: one whole transform per task."""
    nside, lmax = 16, 30
    rng = np.random.default_rng(4)
    maps = rng.normal(size=(4, 12 * nside**2))
    d = skyconv.map2alm(
        da.from_array(maps, chunks=(2, -1)), lmax=lmax, iter=1, pol=False, device=CPU
    )
    assert D.last_choice["mode"] == "stack" and d.chunks[0] == (1, 1, 1, 1)
    ref = skyconv.map2alm(maps, lmax=lmax, iter=1, pol=False, device="cpu")
    assert _rel(d.compute(), ref) <= REL
    m2 = skyconv.alm2map(d, nside, lmax=lmax, pol=False, device=CPU)
    assert D.last_choice["mode"] == "stack"
    assert _rel(m2.compute(), skyconv.alm2map(ref, nside, lmax=lmax, pol=False)) <= REL


def test_block_balance():
    assert [b.tolist() for b in skyconv.sht_halves.m_blocks(5, 0, 3)] == [[0]]
    assert len(skyconv.sht_halves.ring_blocks(1, 10)) == 3
    lmax = 4000
    blocks = skyconv.sht_halves.m_blocks(lmax, lmax, 8)
    assert np.array_equal(np.concatenate(blocks), np.arange(lmax + 1))
    cost = [np.sum(lmax + 1 - b) for b in blocks]
    assert max(cost) / min(cost) < 1.01
    assert len(blocks[0]) < len(blocks[-1])  # more of the cheap large m per block
    rb = skyconv.sht_halves.ring_blocks(256, 6)
    assert np.array_equal(np.concatenate(rb), np.arange(4 * 256 - 1))
    pix = [skyconv.sht_halves.ring_lengths(256, r).sum() for r in rb]
    assert max(pix) / min(pix) < 1.01


def _kill_once(marker):
    def f(block):
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker process dies; its nanny starts a new one
        return block

    return f


def test_worker_lost_mid_run(dask_client, tmp_path):
    """A worker dies between the distributed synthesis and analysis: Dask recomputes the lost
    pieces (Δ blocks, map blocks) and the result is unchanged."""
    nside, lmax = 16, 30
    rng = np.random.default_rng(6)
    alm = _alm(rng, 1, lmax, lmax)
    maps = skyconv.alm2map(da.from_array(alm), nside, lmax=lmax, device=CPU)
    # meta given: dask must not call the function to infer it (that would kill this process)
    maps = maps.map_blocks(
        _kill_once(str(tmp_path / "killed")), dtype=np.float64, meta=np.empty(0, np.float64)
    )
    back = skyconv.map2alm(maps, lmax=lmax, iter=1, device=CPU)
    got = dask_client.compute(back).result(timeout=120)
    assert (tmp_path / "killed").exists()
    dask_client.wait_for_workers(2, timeout=60)  # the nanny restarts it (later tests need 2)
    ref = skyconv.map2alm(
        skyconv.alm2map(alm, nside, lmax=lmax, device="cpu"), lmax=lmax, iter=1, device="cpu"
    )
    assert _rel(got, ref) <= REL


def test_smooth_map_harmonic_with_unseen(dask_client):
    nside = 16
    rng = np.random.default_rng(8)
    m = rng.normal(size=(2, 12 * nside**2))
    m[0, [3, 100]] = skyconv.sht.UNSEEN
    m[1, 50] = np.nan
    kw = dict(fwhm=np.radians(8), lmax=40, method="harmonic", iter=2)
    ref = skyconv.smooth_map(m, device="cpu", **kw)
    d = skyconv.smooth_map(da.from_array(m, chunks=(1, 700)), device=CPU, **kw)
    got = d.compute()
    ok = np.isfinite(ref)
    assert _rel(got[ok], ref[ok]) <= REL
    # missing pixels keep their input value (as for numpy input)
    assert got[0, 3] == skyconv.sht.UNSEEN and np.isnan(got[1, 50])
    # one map, method "auto" also goes through the distributed harmonic transforms
    one = skyconv.smooth_map(
        da.from_array(m[0], chunks=500), fwhm=np.radians(8), lmax=40, device=CPU
    )
    assert D.last_choice["mode"] == "split"
    ref1 = skyconv.smooth_map(m[0], device="cpu", fwhm=np.radians(8), lmax=40, method="harmonic")
    assert _rel(one.compute(), ref1) <= REL


def test_smooth_map_ring_one_block_and_nest_refused(dask_client):
    nside = 16
    rng = np.random.default_rng(9)
    m = rng.normal(size=12 * nside**2)
    ref = skyconv.smooth_map(m, fwhm=np.radians(5), method="ring", device="cpu")
    got = skyconv.smooth_map(
        da.from_array(m, chunks=500), fwhm=np.radians(5), method="ring", device=CPU
    )
    assert _rel(got.compute(), ref) <= REL
    with pytest.raises(ArgumentError, match="nest"):
        skyconv.smooth_map(da.from_array(m), fwhm=np.radians(5), nest=True)


def test_numpy_input_unchanged():
    nside, lmax = 8, 10
    alm = _alm(np.random.default_rng(1), 1, lmax, lmax)[0]
    out = skyconv.alm2map(alm, nside, lmax=lmax, device="cpu")
    assert isinstance(out, np.ndarray)


def test_mode_choice_by_count_and_size(monkeypatch):
    monkeypatch.setattr(D, "_cluster", lambda: (2, 0))
    assert D._choose(4, False, None, 16, 30)[0] == "stack"
    assert D._choose(1, False, None, 16, 30)[0] == "split"  # fewer transforms than workers
    assert D._choose(4, True, None, 16, 30)[0] == "split"  # T, E, B: one coupled transform
    assert D._choose(4, False, (2, 2), 16, 30)[0] == "split"  # blocks forced
    monkeypatch.setattr(D, "_cluster", lambda: (2, 4 << 30))  # 4 GB workers
    assert D._choose(4, False, None, 1024, 2047)[0] == "stack"  # ~0.5 GB a transform
    assert D._choose(4, False, None, 4096, 8191)[0] == "split"  # ~4.5 GB: does not fit
