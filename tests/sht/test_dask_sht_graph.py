"""The Dask SHT's graph (skyconv._dask.sht, issue 20): one task per block and one piece of Δ per
(m block, ring block) with no rechunk, Jacobi iterations fused into two task layers each,
one block per worker process, results bit-identical to the single process, and the edge cases
of the issue (more workers than m, one worker, UNSEEN given to the ring smoothing)."""

import re

import numpy as np
import pytest

import skyconv
from skyconv._dask import cluster

da = pytest.importorskip("dask.array")
D = pytest.importorskip("skyconv._dask.sht")


def _alm(rng, ncomp, lmax, mmax):
    n = skyconv.Alm.getsize(lmax, mmax)
    a = rng.normal(size=(ncomp, n)) + 1j * rng.normal(size=(ncomp, n))
    a[:, : lmax + 1].imag = 0
    return a


def _prefixes(x):
    """Task count per key prefix (the name without its token) of a dask array's graph."""
    out = {}
    for k in dict(x.__dask_graph__()):
        name = k[0] if isinstance(k, tuple) else k
        p = re.sub(r"-[0-9a-f]{32}", "", name)
        out[p] = out.get(p, 0) + 1
    return out


def test_synthesis_graph_pieces_no_rechunk():
    nside, lmax = 8, 16
    alm = da.from_array(_alm(np.random.default_rng(0), 1, lmax, lmax), chunks=(1, 200))
    d = D.alm2map(alm, nside, lmax=lmax, device="cpu", nblocks=(3, 4))
    p = _prefixes(d)
    assert p["skyconv-alm2leg"] == 3 and p["skyconv-leg2map"] == 4
    # the all-to-all: one piece per block pair, but for the pairs (j, j), where the ring task
    # takes the m task's whole output (so that Dask runs them on one worker)
    assert p["skyconv-alm2leg-piece"] == 3 * 4 - 3
    assert not any("rechunk" in k and "leg" in k for k in p)  # Δ is never rechunked


@pytest.mark.parametrize("iters", [0, 3])
def test_analysis_graph_two_layers_per_iteration(iters):
    nside, lmax = 8, 16
    m = da.from_array(np.zeros((1, 12 * nside**2)), chunks=(1, 300))
    d = D.map2alm(m, lmax=lmax, iter=iters, device="cpu", nblocks=(3, 4))
    p = _prefixes(d)
    ring_tasks = p["skyconv-map2leg"] + sum(p.get(f"skyconv-resid{i}", 0) for i in range(iters))
    m_tasks = p["skyconv-map2alm"] + sum(p.get(f"skyconv-leg2alm{i}", 0) for i in range(iters))
    assert ring_tasks == 4 * (iters + 1)
    assert m_tasks == 3 * (iters + 1)
    # the residual lives inside the ring tasks: no separate subtraction or addition layers
    assert not any(k.startswith(("sub", "add")) for k in p)


@pytest.mark.parametrize("pol", [False, True])
@pytest.mark.parametrize("iters", [0, 3])
def test_bit_identical_to_single_process(dask_client, pol, iters):
    nside, lmax, mmax = 16, 37, 20
    rng = np.random.default_rng(10 * iters + pol)
    maps = rng.normal(size=(3 if pol else 1, 12 * nside**2))
    ref = skyconv.map2alm(maps, lmax=lmax, mmax=mmax, iter=iters, pol=pol, device="cpu")
    for nb in [(2, 2), (3, 5)]:
        got = D.map2alm(
            da.from_array(maps, chunks=(1, 1000)),
            lmax=lmax,
            mmax=mmax,
            iter=iters,
            pol=pol,
            device="cpu",
            nblocks=nb,
        ).compute()
        assert np.array_equal(got, ref), (nb, np.abs(got - ref).max())
    back = skyconv.alm2map(ref, nside, lmax=lmax, mmax=mmax, pol=pol, device="cpu")
    got = D.alm2map(
        da.from_array(ref, chunks=(1, 100)), nside, lmax=lmax, mmax=mmax, pol=pol, device="cpu"
    ).compute()
    assert np.array_equal(got, back)


def test_default_blocks_per_worker_process(dask_client, monkeypatch):
    nside, lmax = 8, 16
    src = _alm(np.random.default_rng(1), 1, lmax, lmax)
    alm = da.from_array(src)
    D.alm2map(alm, nside, lmax=lmax, device="cpu")
    # 2 workers: one ring block each, two m blocks each (the exchange overlaps the sums)
    assert D.last_choice["m_blocks"] == 4 and D.last_choice["ring_blocks"] == 2
    # one worker of 4 threads: one block, so Δ never leaves the process
    monkeypatch.setattr(D, "_cluster_info", lambda: (4, 0, 1))
    d = D.alm2map(alm, nside, lmax=lmax, device="cpu")
    assert D.last_choice["m_blocks"] == 1 and D.last_choice["ring_blocks"] == 1
    assert _prefixes(d).get("skyconv-alm2leg-piece", 0) == 0  # the ring task takes it whole
    ref = skyconv.alm2map(src, nside, lmax=lmax, device="cpu")
    assert np.array_equal(d.compute(), ref)


def test_worker_pool_takes_the_worker_threads(dask_client):
    """After a split transform each worker's skyconv pool has the worker's thread count (1),
    not all cores, unless SKYCONV_NUM_THREADS is set there."""
    alm = da.from_array(_alm(np.random.default_rng(2), 1, 8, 8))
    D.alm2map(alm, 4, lmax=8, device="cpu").compute()
    env = dask_client.run(lambda: __import__("os").environ.get("SKYCONV_NUM_THREADS"))
    threads = dask_client.run(skyconv.get_num_threads)
    for addr, n in threads.items():
        if not env[addr]:
            assert n == 1, threads


def test_more_workers_than_m(dask_client):
    """mmax = 0 on 2 workers: one m block (the other worker only runs ring tasks)."""
    nside, lmax = 8, 12
    alm = _alm(np.random.default_rng(3), 1, lmax, 0)
    d = D.alm2map(da.from_array(alm), nside, lmax=lmax, mmax=0, device="cpu")
    assert D.last_choice["m_blocks"] == 1 and D.last_choice["ring_blocks"] == 2
    assert np.array_equal(d.compute(), skyconv.alm2map(alm, nside, lmax=lmax, mmax=0))
    ref = skyconv.map2alm(d.compute(), lmax=lmax, mmax=0, iter=2, device="cpu")
    got = D.map2alm(d, lmax=lmax, mmax=0, iter=2, device="cpu")
    assert D.last_choice["m_blocks"] == 1
    assert np.array_equal(got.compute(), ref)


def test_ring_smoothing_with_unseen(dask_client):
    """UNSEEN pixels given to the ring smoothing through Dask: the same outcome as the NumPy
    call (they keep their value, the rest smoothed as the single call)."""
    nside = 16
    m = np.random.default_rng(4).normal(size=(2, 12 * nside**2))
    m[0, [5, 600]] = skyconv.sht.UNSEEN
    kw = dict(fwhm=np.radians(12), method="ring", device="cpu")
    ref = skyconv.smooth_map(m, **kw)
    got = skyconv.smooth_map(da.from_array(m, chunks=(1, 1000)), **kw).compute()
    assert got[0, 5] == skyconv.sht.UNSEEN and got[0, 600] == skyconv.sht.UNSEEN
    ok = ref != skyconv.sht.UNSEEN
    assert np.abs(got[ok] - ref[ok]).max() <= 1e-12 * np.abs(ref[ok]).max()


def test_clean_zeroes_unseen_as_healpy_and_copies_only_when_needed():
    """The map2alm input task: healpy's UNSEEN test |x − UNSEEN| ≤ 1e-8 + 1e-5·|UNSEEN| (float32
    UNSEEN included), NaN and −inf kept; a clean float64 block passes through without a copy,
    a block with UNSEEN is copied (the input is never modified)."""
    from skyconv.healpix import UNSEEN

    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 64))
    assert D._clean(x) is x
    y = x.copy()
    y[0, [1, 5]] = UNSEEN
    y[1, 2] = np.float32(UNSEEN)  # float32 UNSEEN read as float64: 1e23 away, still UNSEEN
    y[1, 3] = UNSEEN * (1 + 2e-5)  # outside the tolerance
    y[1, 4] = np.nan
    y[1, 6] = -np.inf
    keep = y.copy()
    got = D._clean(y)
    ref = y.copy()
    ref[np.abs(ref - UNSEEN) <= 1e-8 + 1e-5 * abs(UNSEEN)] = 0.0
    np.testing.assert_array_equal(got, ref)
    assert got[0, 1] == 0 and got[1, 2] == 0 and got[1, 3] == y[1, 3]
    np.testing.assert_array_equal(y, keep)
    f = y.astype(np.float32)
    np.testing.assert_array_equal(D._clean(f), D._clean(f.astype(np.float64)))
    assert D._clean(f).dtype == np.float64


def test_block_keys_and_only_them_are_placed():
    """BlockPlacement touches the split layers' block tasks only: m and ring tasks (any
    iteration, also under a fusion prefix), not the Δ pieces, the stack mode or other keys."""
    tok = "0123456789abcdef" * 2
    assert D.block_of((f"skyconv-alm2leg-{tok}", 3)) == 3
    assert D.block_of((f"skyconv-leg2map-{tok}", 0, 2)) == 2
    assert D.block_of((f"skyconv-map2alm-{tok}", 0, 1)) == 1
    assert D.block_of((f"skyconv-resid2-{tok}", 4)) == 4
    assert D.block_of((f"skyconv-leg2alm0-{tok}", np.int64(5))) == 5
    assert D.block_of((f"_clean-skyconv-map2leg-{tok}", 1)) == 1
    for key in (
        (f"skyconv-alm2leg-{tok}-piece", 0, 1),
        (f"skyconv-map2alm-{tok}-alm", 0, 0),
        (f"skyconv-stack-map2alm-{tok}", 1, 0),
        (f"skyconv-smooth-{tok}", 0, 0),
        (f"skyconv-alm2leg-{tok}", "x"),
        f"skyconv-alm2leg-{tok}",
    ):
        assert D.block_of(key) is None, key


def test_blocks_run_one_per_worker(dask_client):
    """On the 2-worker cluster every block layer of alm2map and of map2alm with iter = 2 runs
    its tasks spread over the workers (block b on worker b mod 2 by address: one ring task and
    two m tasks each), results bit-identical."""
    from distributed import get_task_stream

    nside, lmax = 16, 32
    src = _alm(np.random.default_rng(7), 1, lmax, lmax)
    ref = skyconv.alm2map(src, nside, lmax=lmax, device="cpu")
    back = skyconv.map2alm(ref, lmax=lmax, iter=2, device="cpu")
    addrs = [w["address"] for w in cluster.workers(dask_client)]
    for _ in range(3):  # placement left to the scheduler varied from run to run
        with get_task_stream(dask_client) as ts:
            m = D.alm2map(da.from_array(src), nside, lmax=lmax, device="cpu").compute()
            a = D.map2alm(da.from_array(ref, chunks=(1, 500)), lmax=lmax, iter=2, device="cpu")
            a = a.compute()
        assert D.last_choice["m_blocks"] == 4 and D.last_choice["ring_blocks"] == 2
        assert np.array_equal(m, ref) and np.array_equal(a, back)
        where: dict = {}
        for t in ts.data:
            k = t["key"]
            b = D.block_of(k)
            if b is not None:
                name = re.sub(r"-[0-9a-f]{32}", "", k[0])
                where.setdefault(name, {})[b] = t["worker"]
        assert {"skyconv-alm2leg", "skyconv-leg2map", "skyconv-map2alm"} <= set(where)
        for name, by_block in where.items():
            assert by_block == {b: addrs[b % len(addrs)] for b in by_block}, (name, by_block)


def test_placement_plugin_refused_is_tried_once(dask_client, monkeypatch, caplog):
    """A scheduler that cannot load the plugin: one warning, no retry per call, results still
    equal the single process (the blocks go where the scheduler puts them)."""
    calls = []

    def refuse(plugin, *a, **k):
        calls.append(plugin)
        raise RuntimeError("no skyconv on the scheduler")

    monkeypatch.setattr(D, "_PLACED", {})
    monkeypatch.setattr(dask_client, "register_plugin", refuse)
    src = _alm(np.random.default_rng(9), 1, 12, 12)
    ref = skyconv.alm2map(src, 8, lmax=12, device="cpu")
    with caplog.at_level("WARNING", logger="skyconv.dask"):
        for _ in range(2):
            got = D.alm2map(da.from_array(src), 8, lmax=12, device="cpu").compute()
            assert np.array_equal(got, ref)
    assert len(calls) == 1 and D.place_blocks() is False
    assert sum("placement plugin not registered" in r.message for r in caplog.records) == 1
