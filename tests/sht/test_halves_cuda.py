"""The SHT halves on the GPU (src/sht/cuda/halves.rs): equal to the CPU halves to 1e-12 relative
on subsets of m and rings (spin 0, several components, spin 2, lmax != 2 nside, mmax < lmax),
with blocks forced small (the budget split), composed they equal the GPU alm2map /
map2alm(iter=0), and a ring subset near the equator at nside 16384 (pixel indices past 2**31)
without a full map. All marked ``gpu``."""

import healpy as hp
import numpy as np
import pytest

import skyconv
from skyconv import sht_halves as H

pytestmark = pytest.mark.gpu

REL = 1e-12


def _alm(rng, ncomp, lmax, mmax):
    n = hp.Alm.getsize(lmax, mmax)
    a = rng.normal(size=(ncomp, n)) + 1j * rng.normal(size=(ncomp, n))
    a[:, : lmax + 1].imag = 0
    return a


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


CASES = [  # (nside, lmax, mmax, ncomp, spin)
    (8, 13, 13, 1, 0),
    (8, 21, 17, 4, 0),  # a group of 3 and one of 1; mmax < lmax
    (16, 40, 33, 2, 2),
    (4, 5, 3, 3, 0),
]


@pytest.fixture(params=[None, "small"], ids=["budget", "forced-blocks"])
def blocks(request, monkeypatch):
    """Run once with the budget's blocks and once with tiny forced ones."""
    if request.param == "small":
        monkeypatch.setenv("SKYCONV_SHT_CHUNK_PAIRS", "3")
        monkeypatch.setenv("SKYCONV_SHT_CHUNK_MS", "4")
    return request.param


def _subsets(rng, nside, mmax):
    ms = np.arange(mmax + 1)[1::2]  # every other m
    rings = rng.permutation(4 * nside - 1)[: 3 * nside]  # shuffled, rings without their mirror
    if 2 * nside - 1 not in rings:
        rings = np.concatenate([rings, [2 * nside - 1]])  # and the equator
    return ms, rings


@pytest.mark.parametrize("nside,lmax,mmax,ncomp,spin", CASES)
def test_alm2leg_leg2alm_equal_cpu(nside, lmax, mmax, ncomp, spin, blocks, rng):
    ms, rings = _subsets(rng, nside, mmax)
    alm = H.alm_block(_alm(rng, ncomp, lmax, mmax), lmax, ms, mmax)
    cpu = H.alm2leg(alm, nside, lmax, ms, rings, spin=spin, device="cpu")
    gpu = H.alm2leg(alm, nside, lmax, ms, rings, spin=spin, device="cuda")
    assert gpu.shape == cpu.shape == (ncomp, rings.size, ms.size)
    assert _rel(gpu, cpu) <= REL
    leg = rng.normal(size=cpu.shape) + 1j * rng.normal(size=cpu.shape)
    w = 1 + 0.1 * rng.random(2 * nside)
    cpu = H.leg2alm(leg, nside, lmax, ms, rings, spin=spin, ring_weights=w, device="cpu")
    gpu = H.leg2alm(leg, nside, lmax, ms, rings, spin=spin, ring_weights=w, device="cuda")
    assert gpu.shape == cpu.shape
    assert _rel(gpu, cpu) <= REL


@pytest.mark.parametrize("nside,mmax,ncomp", [(8, 13, 1), (8, 30, 4), (16, 40, 2), (4, 2, 3)])
def test_leg2map_map2leg_equal_cpu(nside, mmax, ncomp, blocks, rng):
    _, rings = _subsets(rng, nside, mmax)
    leg = rng.normal(size=(ncomp, rings.size, mmax + 1)) * (1 + 1j)
    leg[..., 0] = leg[..., 0].real
    cpu = H.leg2map(leg, nside, rings, device="cpu")
    gpu = H.leg2map(leg, nside, rings, device="cuda")
    assert gpu.shape == cpu.shape == (ncomp, H.ring_lengths(nside, rings).sum())
    assert _rel(gpu, cpu) <= REL
    pix = rng.normal(size=cpu.shape)
    cpu = H.map2leg(pix, nside, mmax, rings, device="cpu")
    gpu = H.map2leg(pix, nside, mmax, rings, device="cuda")
    assert _rel(gpu, cpu) <= REL


@pytest.mark.parametrize("spin", [0, 2])
def test_composed_equal_gpu_transforms(spin, blocks, rng):
    """m blocks -> Δ -> ring blocks on the GPU equal alm2map / map2alm(iter=0) on the GPU."""
    nside, lmax, mmax = 16, 37, 29
    nc = 2 if spin == 2 else 1
    alm = _alm(rng, 3, lmax, mmax)
    full_alm = alm if spin == 2 else alm[:1]
    want = skyconv.alm2map(alm if spin == 2 else alm[0], nside, lmax, mmax, device="cuda")
    want = want[1:] if spin == 2 else want[None]
    leg = np.zeros((nc, 4 * nside - 1, mmax + 1), complex)
    sub = full_alm[1:] if spin == 2 else full_alm
    for ms in np.array_split(np.arange(mmax + 1), 3):
        blk = H.alm_block(sub, lmax, ms, mmax)
        leg[:, :, ms] = H.alm2leg(blk, nside, lmax, ms, spin=spin, device="cuda")
    got = np.zeros((nc, 12 * nside**2))
    for rings in np.array_split(np.arange(4 * nside - 1), 4):
        got[:, H.ring_pixels(nside, rings)] = H.leg2map(leg[:, rings], nside, rings, device="cuda")
    assert _rel(got, want) <= REL  # spin 2: Q, U of the (I, Q, U) transform
    maps = rng.normal(size=(3, 12 * nside**2))
    want = skyconv.map2alm(maps if spin == 2 else maps[0], lmax, mmax, iter=0, device="cuda")
    want = want[1:] if spin == 2 else want[None]
    m_in = maps[1:] if spin == 2 else maps[:1]
    legs = np.zeros((nc, 4 * nside - 1, mmax + 1), complex)
    for rings in np.array_split(np.arange(4 * nside - 1), 3):
        legs[:, rings] = H.map2leg(
            m_in[:, H.ring_pixels(nside, rings)], nside, mmax, rings, device="cuda"
        )
    got = np.zeros_like(want)
    for ms in np.array_split(np.arange(mmax + 1), 2):
        blk = H.leg2alm(legs[:, :, ms], nside, lmax, ms, spin=spin, device="cuda")
        got[:, H.block_index(lmax, ms)] = blk
    assert _rel(got, want) <= REL


def test_ring_subset_at_nside_16384(rng):
    """Five rings of nside 16384's southern equatorial belt whose pixel indices pass 2**31
    (ring 41000 starts at pixel 2,150,137,856), no full map."""
    nside, lmax = 16384, 48
    rings = np.arange(41000, 41005)
    assert H.ring_pixels(nside, rings[:1])[0] > 2**31
    ms = np.arange(lmax + 1)
    alm = _alm(rng, 1, lmax, lmax)
    cpu = H.alm2leg(alm, nside, lmax, ms, rings, device="cpu")
    gpu = H.alm2leg(alm, nside, lmax, ms, rings, device="cuda")
    assert _rel(gpu, cpu) <= REL
    pc = H.leg2map(cpu, nside, rings, device="cpu")
    pg = H.leg2map(cpu, nside, rings, device="cuda")
    assert pg.shape == (1, 5 * 4 * nside)
    assert _rel(pg, pc) <= REL
    # a band-limited field sampled on those rings: healpy's value at a few of the pixels
    pix = H.ring_pixels(nside, rings)
    pick = rng.choice(pix.size, 8, replace=False)
    theta, phi = hp.pix2ang(nside, pix[pick])
    ref = np.array(
        [
            sum(
                (1 if m == 0 else 2)
                * (alm[0, hp.Alm.getidx(lmax, ell, m)] * _ylm(ell, m, t, p)).real
                for m in range(lmax + 1)
                for ell in range(m, lmax + 1)
            )
            for t, p in zip(theta, phi)
        ]
    )
    np.testing.assert_allclose(pg[0, pick], ref, rtol=0, atol=1e-10 * np.abs(ref).max())
    lc = H.map2leg(pc, nside, lmax, rings, device="cpu")
    lg = H.map2leg(pc, nside, lmax, rings, device="cuda")
    assert _rel(lg, lc) <= REL


def _ylm(ell, m, theta, phi):
    from scipy.special import sph_harm_y

    return sph_harm_y(ell, m, theta, phi)
