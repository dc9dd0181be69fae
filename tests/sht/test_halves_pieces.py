"""The SHT halves on Δ held as pieces (the Dask split transform's all-to-all, no joined copy):
map2leg writing one piece per m block, leg2map reading pieces along m, leg2alm reading pieces
along the rings. Each equals the whole-array call bit for bit and the single-process transform
to 1e-12 relative."""

import numpy as np
import pytest

import skyconv
from skyconv import sht_halves as H
from skyconv.exceptions import ArgumentError, ShapeError

REL = 1e-12


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def _alm(rng, ncomp, lmax, mmax):
    n = skyconv.Alm.getsize(lmax, mmax)
    a = rng.normal(size=(ncomp, n)) + 1j * rng.normal(size=(ncomp, n))
    a[:, : lmax + 1].imag = 0  # m = 0 coefficients are real
    return a


CASES = [  # nside, lmax, mmax, m blocks, ring blocks (shuffled rings: any order works)
    (8, 16, 16, 1, 1),
    (16, 40, 30, 3, 4),
    (12, 30, 20, 4, 5),  # nside not a power of 2 (RING)
]


def _blocks(nside, lmax, mmax, nm, nr, rng):
    mb = H.m_blocks(lmax, mmax, nm)
    rb = np.array_split(rng.permutation(4 * nside - 1), nr)
    return mb, rb


@pytest.mark.parametrize("nside,lmax,mmax,nm,nr", CASES)
@pytest.mark.parametrize("spin", [0, 2])
def test_analysis_from_pieces(nside, lmax, mmax, nm, nr, spin):
    rng = np.random.default_rng(nside + lmax + spin)
    maps = rng.normal(size=(3, 12 * nside**2))
    ref = skyconv.map2alm(maps, lmax=lmax, mmax=mmax, iter=0, pol=spin == 2)
    ref, maps = (ref[1:], maps[1:]) if spin == 2 else (ref, maps)
    mb, rb = _blocks(nside, lmax, mmax, nm, nr, rng)
    widths = [len(b) for b in mb]
    # ring block j -> its pieces, one per m block, written in place
    pieces = []
    for r in rb:
        mp = maps[:, H.ring_pixels(nside, r)]
        got = H.map2leg(mp, nside, mmax, r, widths=widths)
        whole = H.map2leg(mp, nside, mmax, r)
        assert [g.shape for g in got] == [(maps.shape[0], len(r), w) for w in widths]
        assert np.array_equal(np.concatenate(got, axis=2), whole)
        pieces.append(got)
    rings = np.concatenate(rb)
    alm = np.zeros_like(ref)
    for k, ms in enumerate(mb):
        mine = [p[k] for p in pieces]  # this m block's piece of every ring block
        part = H.leg2alm(mine, nside, lmax, ms, rings, spin=spin)
        joined = H.leg2alm(np.concatenate(mine, axis=1), nside, lmax, ms, rings, spin=spin)
        assert np.array_equal(part, joined)
        alm[:, H.block_index(lmax, ms)] = part
    assert _rel(alm, ref) <= REL


@pytest.mark.parametrize("nside,lmax,mmax,nm,nr", CASES)
@pytest.mark.parametrize("spin", [0, 2])
def test_synthesis_from_pieces(nside, lmax, mmax, nm, nr, spin):
    rng = np.random.default_rng(1 + nside + lmax + spin)
    alm = _alm(rng, 3, lmax, mmax)
    alm[1:, :2] = 0  # l < 2 of E and B carry nothing in a spin-2 field
    ref = skyconv.alm2map(alm, nside, lmax=lmax, mmax=mmax, pol=spin == 2)
    ref, alm = (ref[1:], alm[1:]) if spin == 2 else (ref, alm)
    mb, rb = _blocks(nside, lmax, mmax, nm, nr, rng)
    legs = [H.alm2leg(H.alm_block(alm, lmax, ms, mmax), nside, lmax, ms, spin=spin) for ms in mb]
    out = np.zeros_like(ref)
    for r in rb:
        mine = [np.ascontiguousarray(g[:, r]) for g in legs]  # every m block's piece of r
        got = H.leg2map(mine, nside, r)
        assert np.array_equal(got, H.leg2map(np.concatenate(mine, axis=2), nside, r))
        out[:, H.ring_pixels(nside, r)] = got
    assert _rel(out, ref) <= REL


def test_empty_piece_and_no_component_axis():
    nside, lmax = 4, 6
    rng = np.random.default_rng(3)
    mp = rng.normal(size=12 * nside**2)
    whole = H.map2leg(mp, nside, lmax)
    got = H.map2leg(mp, nside, lmax, widths=[3, 0, 4])
    assert [g.shape for g in got] == [(15, 3), (15, 0), (15, 4)]
    assert np.array_equal(np.concatenate(got, axis=1), whole)
    assert np.array_equal(H.leg2map(got, nside), H.leg2map(whole, nside))
    ms = np.arange(lmax + 1)
    parts = [whole[:6], whole[6:6], whole[6:]]
    assert np.array_equal(H.leg2alm(parts, nside, lmax, ms), H.leg2alm(whole, nside, lmax, ms))


def test_piece_errors():
    nside, lmax = 4, 6
    mp = np.zeros(12 * nside**2)
    with pytest.raises(ArgumentError, match="widths"):
        H.map2leg(mp, nside, lmax, widths=[3, 3])
    with pytest.raises(ArgumentError, match="widths"):
        H.map2leg(mp, nside, lmax, widths=[8, -1])
    leg = np.zeros((1, 4 * nside - 1, lmax + 1), complex)
    with pytest.raises(ShapeError, match="components"):
        H.leg2map([leg, np.zeros((2, 4 * nside - 1, 1), complex)], nside)
    with pytest.raises(ShapeError, match="components"):
        H.leg2map([leg[0], leg], nside)  # one piece with the component axis, one without
    with pytest.raises(ShapeError):
        H.leg2alm([leg[:, :5], leg[:, :5]], nside, lmax, np.arange(lmax + 1))  # 10 of 15 rings
    with pytest.raises(ShapeError):
        H.leg2map([leg[:, :5], leg], nside)  # pieces with different rings
    with pytest.raises(ShapeError, match="piece"):
        H.leg2alm([], nside, lmax, np.arange(lmax + 1))
