"""One SHT split over several GPUs (``devices=[...]`` of alm2map / map2alm): equal to the
single-GPU transform to 1e-12 relative with devices=[0] (the device-resident pipeline on one
GPU), [0, 0] (the host-staged split driver: two blocks on one GPU) and [0, 1] (the pipeline with
GPU-to-GPU copies; skipped unless two GPUs); spin 0, pol, iter 0 and 3, lmax != 2 nside,
mmax < lmax, many pipeline rounds, empty m blocks; the reported transport; the memory refusal;
argument checks."""

import healpy as hp
import numpy as np
import pytest

import skyconv
from skyconv import _sht_multi
from skyconv.exceptions import ArgumentError, ArgumentTypeError, DeviceError

REL = 1e-12


def _gpus() -> int:
    info = skyconv.backend_info()["cuda"]
    return len(info.get("devices") or []) if info["available"] else 0


DEVICES = [
    pytest.param([0], marks=pytest.mark.gpu, id="0"),
    pytest.param([0, 0], marks=pytest.mark.gpu, id="0,0"),
    pytest.param(
        [0, 1],
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs"),
        ],
        id="0,1",
    ),
]


def _transport(devices):
    if len(set(devices)) < len(devices):
        return "host-staged"
    return "local" if len(devices) == 1 else ("peer", "driver-staged")


def _check_transport(devices):
    want = _transport(devices)
    got = _sht_multi.last_stats()["transport"]
    assert got == want if isinstance(want, str) else got in want


def _alm(rng, ncomp, lmax, mmax):
    n = hp.Alm.getsize(lmax, mmax)
    a = rng.normal(size=(ncomp, n)) + 1j * rng.normal(size=(ncomp, n))
    a[:, : lmax + 1].imag = 0
    return a


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize("devices", DEVICES)
@pytest.mark.parametrize("ncomp,pol", [(1, False), (3, True), (2, False)])
@pytest.mark.parametrize("nside,lmax,mmax", [(16, 40, 40), (32, 50, 31)])
def test_alm2map_equals_one_gpu(devices, ncomp, pol, nside, lmax, mmax, rng):
    alm = _alm(rng, ncomp, lmax, mmax)
    want = skyconv.alm2map(alm, nside, lmax, mmax, pol=pol, device="cuda")
    got = skyconv.alm2map(alm, nside, lmax, mmax, pol=pol, devices=devices)
    assert got.shape == want.shape
    assert _rel(got, want) <= REL
    st = _sht_multi.last_stats()
    _check_transport(devices)
    assert st["devices"] == devices
    assert st["m_blocks"][0][0] == 0 and st["m_blocks"][-1][1] == mmax + 1
    assert st["ring_blocks"][-1][1] == 4 * nside - 1
    assert all(b > 0 for b in st["peak_bytes"])
    if devices != [0, 0]:
        assert st["pair_blocks"][0][0] == 0 and st["pair_blocks"][-1][1] == 2 * nside
        assert st["rounds"] >= 1 and len(st["planned_bytes"]) == len(devices)


@pytest.mark.parametrize("devices", DEVICES)
@pytest.mark.parametrize("iter", [0, 3])
@pytest.mark.parametrize("ncomp,pol", [(1, False), (3, True)])
def test_map2alm_equals_one_gpu(devices, iter, ncomp, pol, rng):
    nside, lmax, mmax = 16, 37, 29
    npix = 12 * nside**2
    maps = rng.normal(size=(ncomp, npix))
    # UNSEEN counts as 0 on both paths (healpy's tolerance: 1e-5 relative); in the northern
    # and southern rings of a pair (they go up as two ranges of one slot) and at the equator
    maps[0, 5] = skyconv.sht.UNSEEN
    maps[:, npix - 7] = skyconv.sht.UNSEEN * (1 + 3e-6)
    maps[-1, npix // 2] = skyconv.sht.UNSEEN
    w = 1 + 0.05 * rng.random(2 * nside)
    want = skyconv.map2alm(maps, lmax, mmax, iter=iter, pol=pol, ring_weights=w, device="cuda")
    got = skyconv.map2alm(maps, lmax, mmax, iter=iter, pol=pol, ring_weights=w, devices=devices)
    assert got.shape == want.shape
    assert _rel(got, want) <= REL


@pytest.mark.gpu
def test_float32_maps_and_one_component(rng):
    nside, lmax = 8, 20
    m = rng.normal(size=12 * nside**2).astype(np.float32)
    want = skyconv.map2alm(m, lmax, iter=1, device="cuda")
    got = skyconv.map2alm(m, lmax, iter=1, devices=[0, 0])
    assert got.shape == want.shape and _rel(got, want) <= REL


@pytest.mark.gpu
def test_more_devices_than_m(rng):
    """Blocks may be empty (mmax + 1 < number of devices)."""
    nside, lmax, mmax = 4, 6, 1
    alm = _alm(rng, 1, lmax, mmax)
    want = skyconv.alm2map(alm[0], nside, lmax, mmax, device="cuda")
    got = skyconv.alm2map(alm[0], nside, lmax, mmax, devices=[0, 0, 0])
    assert _rel(got, want) <= REL


PEER = [
    pytest.param([0], marks=pytest.mark.gpu, id="0"),
    pytest.param(
        [0, 1],
        marks=[pytest.mark.gpu, pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")],
        id="0,1",
    ),
]


@pytest.mark.parametrize("devices", PEER)
@pytest.mark.parametrize("pairs", [1, 3])
def test_pipeline_many_rounds(devices, pairs, rng, monkeypatch):
    """Chunks of 1 or 3 ring pairs: many rounds through both send/receive slots (pol, iter 2,
    lmax != 2 nside, mmax < lmax)."""
    nside, lmax, mmax = 16, 45, 30
    alm = _alm(rng, 3, lmax, mmax)
    want = skyconv.alm2map(alm, nside, lmax, mmax, pol=True, device="cuda")
    wa = skyconv.map2alm(want, lmax, mmax, iter=2, pol=True, device="cuda")
    monkeypatch.setenv("SKYCONV_SHT_CHUNK_PAIRS", str(pairs))
    got = skyconv.alm2map(alm, nside, lmax, mmax, pol=True, devices=devices)
    st = _sht_multi.last_stats()
    assert st["rounds"] >= (2 * nside) // (len(devices) * pairs)
    assert _rel(got, want) <= REL
    ga = skyconv.map2alm(want, lmax, mmax, iter=2, pol=True, devices=devices)
    assert _rel(ga, wa) <= REL
    # one pass zeroes UNSEEN on the devices, chunk by chunk
    bad = want.copy()
    bad[:, ::37] = skyconv.sht.UNSEEN
    w0 = skyconv.map2alm(bad, lmax, mmax, iter=0, pol=True, device="cuda")
    g0 = skyconv.map2alm(bad, lmax, mmax, iter=0, pol=True, devices=devices)
    assert _rel(g0, w0) <= REL
    _check_transport(devices)


@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("mmax", [0, 1])
def test_pipeline_empty_m_block(mmax, rng):
    """mmax = 0: the second GPU holds no m (it still owns rings); mmax = 1: one m each."""
    nside, lmax = 8, 12
    alm = _alm(rng, 1, lmax, mmax)[0]
    want = skyconv.alm2map(alm, nside, lmax, mmax, device="cuda")
    got = skyconv.alm2map(alm, nside, lmax, mmax, devices=[0, 1])
    assert _rel(got, want) <= REL
    wa = skyconv.map2alm(want, lmax, mmax, iter=1, device="cuda")
    ga = skyconv.map2alm(want, lmax, mmax, iter=1, devices=[0, 1])
    assert _rel(ga, wa) <= REL


@pytest.mark.parametrize("devices", PEER)
def test_pipeline_reports_host_walls(devices, rng):
    """wall_s_per_gpu: [set-up, rounds, final sync] host seconds per GPU, each >= 0 and
    together within the call's wall time."""
    import time

    alm = _alm(rng, 1, 40, 40)[0]
    skyconv.alm2map(alm, 16, 40, 40, devices=devices)
    for f in (
        lambda: skyconv.alm2map(alm, 16, 40, 40, devices=devices),
        lambda: skyconv.map2alm(np.ones(hp.nside2npix(16)), 40, 40, iter=0, devices=devices),
    ):
        t = time.perf_counter()
        f()
        wall = time.perf_counter() - t
        walls = _sht_multi.last_stats()["wall_s_per_gpu"]
        assert len(walls) == len(devices)
        for w in walls:
            assert len(w) == 3 and min(w) >= 0.0
            assert sum(w) <= wall


@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")
def test_peer_access_enabled_once(rng):
    """Peer access is set up the first time a pair of GPUs is used, not on every call: a later
    split call records no "peer access" set-up stage."""
    alm = _alm(rng, 1, 20, 20)[0]
    skyconv.alm2map(alm, 8, 20, 20, devices=[0, 1])
    skyconv.setup_trace(clear=True)
    skyconv.alm2map(alm, 8, 20, 20, devices=[0, 1])
    skyconv.map2alm(np.ones(hp.nside2npix(8)), 20, 20, devices=[1, 0])
    stages = [e["stage"] for e in skyconv.setup_trace()]
    assert "peer access" not in stages


@pytest.mark.gpu
def test_pipeline_refuses_what_cannot_fit(rng, monkeypatch):
    """A budget below one GPU's alm block plus one ring pair: GpuMemoryError naming bytes."""
    from skyconv.exceptions import GpuMemoryError

    alm = _alm(rng, 1, 40, 40)[0]
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", "1000")
    with pytest.raises(GpuMemoryError, match=r"needs at least .*bytes"):
        skyconv.alm2map(alm, 16, 40, 40, devices=[0])


def test_devices_argument_errors():
    alm = np.zeros(hp.Alm.getsize(4), complex)
    with pytest.raises(ArgumentError, match="devices"):
        skyconv.alm2map(alm, 2, devices=[])
    with pytest.raises(ArgumentError, match="devices"):
        skyconv.alm2map(alm, 2, devices=[-1])
    with pytest.raises(ArgumentTypeError, match="devices"):
        skyconv.alm2map(alm, 2, devices="0,1")
    with pytest.raises(TypeError, match="devices"):
        skyconv.alm2map(alm, 2, devices=[0.5])
    with pytest.raises(ArgumentError, match="device"):
        skyconv.map2alm(np.zeros(48), 4, devices=[0], device="cpu")


@pytest.mark.skipif(_gpus() > 0, reason="a GPU works here")
def test_devices_without_gpu_raise():
    with pytest.raises(DeviceError):
        skyconv.alm2map(np.zeros(hp.Alm.getsize(4), complex), 2, devices=[0])


@pytest.mark.gpu
def test_missing_device_is_refused():
    with pytest.raises(DeviceError, match="cuda:"):
        skyconv.alm2map(np.zeros(hp.Alm.getsize(4), complex), 2, devices=[0, 63])


def test_devices_with_dask_refused():
    da = pytest.importorskip("dask.array")
    alm = da.from_array(np.zeros(hp.Alm.getsize(4), complex))
    with pytest.raises(ArgumentError, match="devices"):
        skyconv.alm2map(alm, 2, devices=[0])
    with pytest.raises(ArgumentError, match="devices"):
        skyconv.map2alm(da.zeros(48), 4, devices=[0, 1])
