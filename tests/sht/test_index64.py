"""64-bit index maths of the SHT and HEALPix helpers at nside 16384 (npix > 2**31) and 2**29
(npix ~ 3.5e18), checked against healpy and closed formulas without building a full map."""

import healpy as hp
import numpy as np
import pytest

import skyconv
from skyconv import sht_halves as H


@pytest.mark.parametrize("nside", [2**14, 2**29])
def test_ring_pixels_and_lengths(nside):
    npix = 12 * nside * nside
    last = 4 * nside - 2
    # the south polar cap's last rings: the highest pixel indices
    px = H.ring_pixels(nside, [last, last - 1])
    assert px.dtype == np.int64
    assert px[:4].tolist() == [npix - 4, npix - 3, npix - 2, npix - 1]
    assert px[4:].tolist() == list(range(npix - 12, npix - 4))
    # first pixel of the equator ring (2 nside - 1): 2 nside (nside - 1) + nside 4 nside
    eq = 2 * nside - 1
    assert H.ring_lengths(nside, [eq, nside - 2, nside - 1]).tolist() == [
        4 * nside,
        4 * (nside - 1),
        4 * nside,
    ]
    assert int(H.ring_pixels(nside, [1])[0]) == 4


@pytest.mark.parametrize("nside", [2**14, 2**29])
def test_pix2ang_ang2pix_past_2_31(nside):
    npix = 12 * nside * nside
    pix = np.array([2**31 - 1, 2**31, 2**31 + 12345, npix // 2 + 7, npix - 1], dtype=np.int64)
    pix = pix[pix < npix]
    t, p = skyconv.healpix.pix2ang(nside, pix)
    tr, pr = hp.pix2ang(nside, pix)
    np.testing.assert_allclose(t, tr, rtol=0, atol=1e-12)
    np.testing.assert_allclose(p, pr, rtol=0, atol=1e-12)
    assert np.array_equal(skyconv.healpix.ang2pix(nside, tr, pr), hp.ang2pix(nside, tr, pr))


def test_alm_indices_past_2_31():
    lmax = 2**17  # nalm ~ 8.6e9
    ms = np.array([lmax - 3, lmax])
    idx = H.block_index(lmax, ms)
    want = [hp.Alm.getidx(lmax, ell, m) for m in ms for ell in range(m, lmax + 1)]
    assert idx.dtype == np.int64 and idx.tolist() == want
    assert idx[-1] == hp.Alm.getsize(lmax) - 1 > 2**31
    assert skyconv.Alm.getidx(lmax, lmax, lmax) == hp.Alm.getidx(lmax, lmax, lmax)
