"""The SHT halves (skyconv.sht_halves): composed over blocks of m and of rings they give the full
transforms; alm2leg / leg2map / map2leg agree with ducc0's halves; argument checks."""

import healpy as hp
import numpy as np
import pytest

import skyconv
from skyconv import sht_halves as H
from skyconv.exceptions import ArgumentError, DeviceError, ShapeError

REL = 1e-12


def _alm(rng, ncomp, lmax, mmax):
    n = hp.Alm.getsize(lmax, mmax)
    a = rng.normal(size=(ncomp, n)) + 1j * rng.normal(size=(ncomp, n))
    a[:, : lmax + 1].imag = 0  # m = 0 coefficients are real
    return a


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def _m_blocks(mmax, kind):
    ms = np.arange(mmax + 1)
    if kind == "one":
        return [ms]
    if kind == "strided":  # balanced by work: every 3rd m
        return [ms[i::3] for i in range(3)]
    if kind == "singles":
        return [ms[i : i + 1] for i in range(mmax + 1)]
    return np.array_split(ms, 4)  # contiguous


def _ring_blocks(nside, kind, rng):
    r = np.arange(4 * nside - 1)
    if kind == "one":
        return [r]
    if kind == "shuffled":
        return np.array_split(rng.permutation(r), 5)
    if kind == "pairs":  # north ring with its southern mirror
        nr = r.size
        north = np.arange(2 * nside)
        return [np.unique(np.concatenate([b, nr - 1 - b])) for b in np.array_split(north, 3)]
    return np.array_split(r, 7)


def _synth(alm, nside, lmax, mmax, mkind, rkind, spin, rng):
    """alm2map through the halves: m blocks -> Δ -> ring blocks -> pixels."""
    nc = alm.shape[0]
    leg = np.zeros((nc, 4 * nside - 1, mmax + 1), complex)
    for ms in _m_blocks(mmax, mkind):
        blk = H.alm_block(alm, lmax, ms, mmax)
        leg[:, :, ms] = H.alm2leg(blk, nside, lmax, ms, spin=spin)
    out = np.zeros((nc, 12 * nside**2))
    for rings in _ring_blocks(nside, rkind, rng):
        out[:, H.ring_pixels(nside, rings)] = H.leg2map(leg[:, rings], nside, rings)
    return out


def _anal(maps, nside, lmax, mmax, mkind, rkind, spin, rng, ring_weights=None):
    """map2alm(iter=0) through the halves: ring blocks -> Δ -> m blocks -> alm, summed."""
    nc = maps.shape[0]
    alm = np.zeros((nc, hp.Alm.getsize(lmax, mmax)), complex)
    for rings in _ring_blocks(nside, rkind, rng):
        leg = H.map2leg(maps[:, H.ring_pixels(nside, rings)], nside, mmax, rings)
        for ms in _m_blocks(mmax, mkind):
            part = H.leg2alm(
                leg[:, :, ms], nside, lmax, ms, rings, spin=spin, ring_weights=ring_weights
            )
            alm[:, H.block_index(lmax, ms)] += part
    return alm


CASES = [  # nside, lmax, mmax, m split, ring split
    (8, 16, 16, "one", "one"),
    (16, 40, 30, "strided", "shuffled"),
    (16, 23, 23, "contiguous", "pairs"),
    (8, 30, 5, "singles", "contiguous"),
    (12, 30, 20, "strided", "shuffled"),  # nside not a power of 2 (RING)
]


@pytest.mark.parametrize("nside,lmax,mmax,mkind,rkind", CASES)
def test_synthesis_spin0_equals_alm2map(nside, lmax, mmax, mkind, rkind):
    rng = np.random.default_rng(nside + lmax)
    alm = _alm(rng, 2, lmax, mmax)
    ref = skyconv.alm2map(alm, nside, lmax=lmax, mmax=mmax, pol=False)
    got = _synth(alm, nside, lmax, mmax, mkind, rkind, 0, rng)
    assert _rel(got, ref) <= REL


@pytest.mark.parametrize("nside,lmax,mmax,mkind,rkind", CASES)
def test_synthesis_spin2_equals_alm2map(nside, lmax, mmax, mkind, rkind):
    rng = np.random.default_rng(1 + nside + lmax)
    alm = _alm(rng, 3, lmax, mmax)
    alm[1:, : 2 * 1] = 0  # l < 2 of E and B carry nothing in a spin-2 field
    ref = skyconv.alm2map(alm, nside, lmax=lmax, mmax=mmax, pol=True)[1:]
    got = _synth(alm[1:], nside, lmax, mmax, mkind, rkind, 2, rng)
    assert _rel(got, ref) <= REL


@pytest.mark.parametrize("nside,lmax,mmax,mkind,rkind", CASES)
@pytest.mark.parametrize("spin", [0, 2])
def test_analysis_equals_map2alm_iter0(nside, lmax, mmax, mkind, rkind, spin):
    rng = np.random.default_rng(2 + nside + lmax + spin)
    maps = rng.normal(size=(3, 12 * nside**2))
    ref = skyconv.map2alm(maps, lmax=lmax, mmax=mmax, iter=0, pol=spin == 2)
    ref = ref[1:] if spin == 2 else ref
    got = _anal(maps[1:] if spin == 2 else maps, nside, lmax, mmax, mkind, rkind, spin, rng)
    assert _rel(got, ref) <= REL


def test_analysis_ring_weights():
    nside, lmax = 8, 20
    rng = np.random.default_rng(5)
    maps = rng.normal(size=(1, 12 * nside**2))
    w = 1 + 0.1 * rng.random(2 * nside)
    ref = skyconv.map2alm(maps[0], lmax=lmax, iter=0, ring_weights=w)
    got = _anal(maps, nside, lmax, lmax, "strided", "shuffled", 0, rng, ring_weights=w)[0]
    assert _rel(got, ref) <= REL


def test_alm2leg_and_leg2map_match_ducc0():
    ducc0 = pytest.importorskip("ducc0")
    nside, lmax, mmax = 16, 37, 25
    rng = np.random.default_rng(7)
    alm = _alm(rng, 1, lmax, mmax)[0]
    ms = np.arange(3, mmax + 1, 2)
    rings = rng.permutation(4 * nside - 1)[:30]
    start, nphi, cth, sth, _ = (np.asarray(x) for x in hp.ringinfo(nside, rings + 1))
    theta = np.arctan2(sth, cth)
    mstart = np.array([hp.Alm.getidx(lmax, 0, m) for m in ms], dtype=np.uintp)
    ref = ducc0.sht.experimental.alm2leg(
        alm=alm[None], lmax=lmax, theta=theta, spin=0, mval=ms.astype(np.uintp), mstart=mstart
    )
    got = H.alm2leg(H.alm_block(alm, lmax, ms, mmax), nside, lmax, ms, rings)
    assert got.shape == (len(rings), len(ms))
    assert _rel(got, ref[0]) <= 1e-12

    leg = rng.normal(size=(1, len(rings), mmax + 1)) + 1j * rng.normal(
        size=(1, len(rings), mmax + 1)
    )
    leg[..., 0].imag = 0
    phi0 = np.array([hp.pix2ang(nside, int(s))[1] for s in start])
    ringstart = np.concatenate(([0], np.cumsum(nphi)[:-1])).astype(np.uintp)
    refmap = ducc0.sht.experimental.leg2map(
        leg=leg, nphi=nphi.astype(np.uintp), phi0=phi0, ringstart=ringstart
    )
    assert _rel(H.leg2map(leg, nside, rings), refmap) <= 1e-12
    refleg = ducc0.sht.experimental.map2leg(
        map=refmap, nphi=nphi.astype(np.uintp), phi0=phi0, ringstart=ringstart, mmax=mmax
    )
    assert _rel(H.map2leg(refmap, nside, mmax, rings), refleg) <= 1e-12


def test_leg2map_map2leg_adjoint():
    nside, mmax = 8, 20
    rng = np.random.default_rng(9)
    rings = np.array([0, 5, 16, 30])
    leg = rng.normal(size=(1, 4, mmax + 1)) + 1j * rng.normal(size=(1, 4, mmax + 1))
    x = rng.normal(size=(1, int(H.ring_lengths(nside, rings).sum())))
    lhs = np.vdot(x, H.leg2map(leg, nside, rings))
    fwd = H.map2leg(x, nside, mmax, rings)
    # <x, L leg> with L = Σ_m Δ e^{imφ} + c.c.: the m > 0 terms count twice (the real part)
    rhs = np.sum(fwd[..., 0].conj() * leg[..., 0]).real + 2 * np.sum(
        (fwd[..., 1:].conj() * leg[..., 1:]).real
    )
    assert abs(lhs - rhs) <= 1e-12 * abs(rhs)


def test_ring_pixels_match_healpy():
    for nside in (1, 2, 8, 32):
        nr = 4 * nside - 1
        start, nphi, _, _, _ = hp.ringinfo(nside, np.arange(1, nr + 1))
        assert np.array_equal(H.ring_lengths(nside), nphi)
        rings = np.array([nr - 1, 0, nr // 2])
        want = np.concatenate([np.arange(start[r], start[r] + nphi[r]) for r in rings])
        assert np.array_equal(H.ring_pixels(nside, rings), want)
        assert np.array_equal(H.ring_pixels(nside), np.arange(12 * nside**2))


@pytest.mark.parametrize("nside", [3, 12])
def test_ring_pixels_any_nside(nside):
    """RING works for any nside (healpy's ringinfo does not): the rings' pixels share θ."""
    assert np.array_equal(H.ring_pixels(nside), np.arange(12 * nside**2))
    nr = 4 * nside - 1
    theta = [np.unique(hp.pix2ang(nside, H.ring_pixels(nside, [r]))[0]) for r in range(nr)]
    assert all(t.size == 1 for t in theta)
    assert np.all(np.diff(np.concatenate(theta)) > 0)


def test_ring_pixels_int64_past_2_31():
    nside = 2**14  # npix = 3.2e9 > 2**31
    r = np.array([4 * nside - 2, 2 * nside])
    px = H.ring_pixels(nside, r[:1])
    assert px.dtype == np.int64
    assert px[-1] == 12 * nside**2 - 1 and px[0] == 12 * nside**2 - 4
    assert H.ring_lengths(nside, r).tolist() == [4, 4 * nside]


def test_equator_and_single_rings():
    """Blocks holding one ring of a pair (or the equator) give the same values as whole pairs."""
    nside, lmax = 4, 9
    rng = np.random.default_rng(11)
    alm = _alm(rng, 1, lmax, lmax)
    ms = np.arange(lmax + 1)
    full = H.alm2leg(alm, nside, lmax, ms)
    for r in (0, 2 * nside - 1, 4 * nside - 2, 5):
        one = H.alm2leg(alm, nside, lmax, ms, [r])
        np.testing.assert_allclose(one[:, 0], full[:, r], rtol=0, atol=1e-14 * abs(full).max())


def test_empty_blocks():
    nside, lmax = 4, 6
    alm = np.zeros((1, 0), complex)
    assert H.alm2leg(alm, nside, lmax, np.zeros(0, int)).shape == (1, 4 * nside - 1, 0)
    assert H.alm2leg(np.zeros((1, 7), complex), nside, lmax, [0], []).shape == (1, 0, 1)
    assert H.leg2map(np.zeros((1, 0, 3), complex), nside, []).shape == (1, 0)


def test_argument_errors():
    nside, lmax = 4, 6
    alm = np.zeros(7, complex)
    with pytest.raises(ArgumentError, match="ms"):
        H.alm2leg(np.zeros(13, complex), nside, lmax, [1, 0])
    with pytest.raises(ArgumentError, match="ms"):
        H.alm2leg(alm, nside, lmax, [7])
    with pytest.raises(ArgumentError, match="rings"):
        H.alm2leg(alm, nside, lmax, [0], [4 * nside - 1])
    with pytest.raises(ArgumentError, match="distinct"):
        H.alm2leg(alm, nside, lmax, [0], [2, 2])
    with pytest.raises(ArgumentError, match="spin"):
        H.alm2leg(alm, nside, lmax, [0], spin=1)
    with pytest.raises(ArgumentError, match="nside"):
        H.alm2leg(alm, 0, lmax, [0])
    with pytest.raises(ShapeError, match="7 coefficients"):
        H.alm2leg(np.zeros(8, complex), nside, lmax, [0])
    with pytest.raises(ShapeError, match="2 components"):
        H.alm2leg(np.zeros((3, 7), complex), nside, lmax, [0], spin=2)
    with pytest.raises(ShapeError):
        H.leg2map(np.zeros((1, 3, 2), complex), nside, [0, 1])
    with pytest.raises(ShapeError, match="pixels"):
        H.map2leg(np.zeros(5), nside, 3, [0])
    with pytest.raises(ArgumentError, match="ring_weights"):
        H.leg2alm(np.zeros((1, 1, 1), complex), nside, lmax, [0], [0], ring_weights=np.ones(3))


def test_explicit_gpu_is_refused():
    with pytest.raises(DeviceError):
        H.alm2leg(np.zeros(7, complex), 4, 6, [0], device="cuda")


def test_reexports():
    assert skyconv.alm2leg is H.alm2leg and skyconv.sht.leg2alm is H.leg2alm
    assert skyconv.leg2map is H.leg2map and skyconv.map2leg is H.map2leg
