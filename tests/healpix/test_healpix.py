"""skyconv.healpix against healpy: same pixels, same pixel-centre bits, same ring geometry."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skyconv
from skyconv import healpix as sh

hp = pytest.importorskip("healpy")

POW2 = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def same_bits(a, b) -> bool:
    """Equal arrays, float values compared bit for bit (so 0.0 != -0.0, NaN == NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a.view(np.int64), b.view(np.int64))
    return np.array_equal(a, b)


def sphere_points(rng, n):
    """Uniform on the sphere: θ = arccos(u), φ in [0, 2π)."""
    return np.arccos(rng.uniform(-1.0, 1.0, n)), rng.uniform(0.0, 2.0 * np.pi, n)


# --- every pixel ------------------------------------------------------------------------------


@pytest.mark.parametrize("nest", [False, True], ids=["ring", "nest"])
@pytest.mark.parametrize("nside", POW2)
def test_every_pixel_matches_healpy(nside, nest):
    pix = np.arange(12 * nside * nside)
    theta, phi = sh.pix2ang(nside, pix, nest=nest)
    ref_theta, ref_phi = hp.pix2ang(nside, pix, nest=nest)
    assert same_bits(theta, ref_theta)
    assert same_bits(phi, ref_phi)
    # Centres map back to their own pixel, as in healpy.
    back = sh.ang2pix(nside, ref_theta, ref_phi, nest=nest)
    assert same_bits(back, hp.ang2pix(nside, ref_theta, ref_phi, nest=nest))
    assert np.array_equal(back, pix)
    convert, ref_convert = (sh.nest2ring, hp.nest2ring) if nest else (sh.ring2nest, hp.ring2nest)
    assert same_bits(convert(nside, pix), ref_convert(nside, pix))


@pytest.mark.parametrize("nside", [3, 5, 6, 7, 100])
def test_every_pixel_ring_any_nside(nside):
    # RING works for any nside (healpy's core too); NEST needs a power of two.
    pix = np.arange(12 * nside * nside)
    theta, phi = sh.pix2ang(nside, pix)
    ref_theta, ref_phi = hp.pix2ang(nside, pix)
    assert same_bits(theta, ref_theta) and same_bits(phi, ref_phi)
    assert np.array_equal(sh.ang2pix(nside, ref_theta, ref_phi), pix)


@pytest.mark.parametrize("nest", [False, True], ids=["ring", "nest"])
@pytest.mark.parametrize("nside", [8192, 2**29])
def test_pix2ang_large_nside(nside, nest, rng):
    npix = 12 * nside * nside
    pix = np.concatenate(
        [rng.integers(0, npix, 200_000), np.arange(20_000), npix - 1 - np.arange(20_000)]
    )
    theta, phi = sh.pix2ang(nside, pix, nest=nest)
    ref_theta, ref_phi = hp.pix2ang(nside, pix, nest=nest)
    assert same_bits(theta, ref_theta) and same_bits(phi, ref_phi)
    convert, ref_convert = (sh.nest2ring, hp.nest2ring) if nest else (sh.ring2nest, hp.ring2nest)
    assert same_bits(convert(nside, pix), ref_convert(nside, pix))


# --- random points ----------------------------------------------------------------------------


@pytest.mark.parametrize("nest", [False, True], ids=["ring", "nest"])
def test_random_points_nside_8192(nest, rng):
    theta, phi = sphere_points(rng, 1_000_000)
    got = sh.ang2pix(8192, theta, phi, nest=nest)
    assert same_bits(got, hp.ang2pix(8192, theta, phi, nest=nest))


@pytest.mark.parametrize("nest", [False, True], ids=["ring", "nest"])
@pytest.mark.parametrize("nside", [8192, 2**20, 2**29])
def test_points_near_poles_and_wrapped_phi(nside, nest, rng):
    # θ within 0.02 rad of a pole exercises the separate sin θ branch (θ < 0.01) and the
    # cos-only branch just outside it; φ far outside [0, 2π) exercises the modulo.
    n = 100_000
    theta = np.concatenate([rng.uniform(0, 0.02, n), np.pi - rng.uniform(0, 0.02, n)])
    phi = rng.uniform(-50.0, 50.0, 2 * n)
    got = sh.ang2pix(nside, theta, phi, nest=nest)
    assert same_bits(got, hp.ang2pix(nside, theta, phi, nest=nest))


@pytest.mark.parametrize("nest", [False, True], ids=["ring", "nest"])
@pytest.mark.parametrize("nside", [1, 2, 16, 8192])
def test_special_points(nside, nest):
    z_edges = [2 / 3, -2 / 3, 0.0, 0.99, -0.99]
    thetas = [0.0, np.pi, np.pi / 2, 0.01, np.pi - 0.01, 3.14159 - 0.01, np.pi + 1e-6]
    for t in [*np.arccos(z_edges), *thetas[:-1]]:
        thetas += [np.nextafter(t, -np.inf), np.nextafter(t, np.inf)]
    # Ring centres and the boundaries between rings.
    info = sh.ring_info(nside)
    z = info["z"]
    thetas += list(info["theta"]) + list(np.arccos((z[1:] + z[:-1]) / 2))
    two_pi = 2 * np.pi
    phis = [0.0, -0.0, two_pi, np.nextafter(two_pi, 0), np.nextafter(two_pi, 7), -two_pi, np.pi]
    phis += list(np.arange(-8, 9) * (np.pi / 4)) + list(np.arange(0, 8) * (np.pi / (4 * nside)))
    phis += [-1e-300, 1e-300, -1e12, 1e12]
    thetas = np.array([t for t in thetas if 0 <= t <= np.pi + 1e-5])
    t, p = np.meshgrid(thetas, np.array(phis))
    got = sh.ang2pix(nside, t, p, nest=nest)
    assert same_bits(got, hp.ang2pix(nside, t, p, nest=nest))


@settings(max_examples=200, deadline=None)
@given(
    order=st.integers(0, 29),
    nest=st.booleans(),
    theta=st.floats(0.0, np.pi),
    phi=st.floats(-1e6, 1e6, allow_nan=False),
)
def test_hypothesis_ang2pix(order, nest, theta, phi):
    nside = 1 << order
    assert sh.ang2pix(nside, theta, phi, nest=nest) == hp.ang2pix(nside, theta, phi, nest=nest)


@settings(max_examples=200, deadline=None)
@given(nside=st.integers(1, 2**29), frac=st.floats(0.0, 1.0, exclude_max=True))
def test_hypothesis_ring_any_nside(nside, frac):
    pix = int(frac * 12 * nside * nside)
    assert same_bits(np.array(sh.pix2ang(nside, pix)), np.array(hp.pix2ang(nside, pix)))


# --- lon/lat ----------------------------------------------------------------------------------


@pytest.mark.parametrize("nest", [False, True], ids=["ring", "nest"])
def test_lonlat(nest, rng):
    nside = 256
    pix = np.arange(12 * nside * nside)
    lon, lat = sh.pix2ang(nside, pix, nest=nest, lonlat=True)
    ref_lon, ref_lat = hp.pix2ang(nside, pix, nest=nest, lonlat=True)
    assert same_bits(lon, ref_lon) and same_bits(lat, ref_lat)
    lon = np.concatenate([rng.uniform(-360, 720, 100_000), [0, 360, -180, 180, 0, 0, 45]])
    lat = np.concatenate([rng.uniform(-90, 90, 100_000), [90, -90, 0, 0, 90.0, -90.0, 41.8]])
    got = sh.ang2pix(8192, lon, lat, nest=nest, lonlat=True)
    assert same_bits(got, hp.ang2pix(8192, lon, lat, nest=nest, lonlat=True))


# --- ring geometry ----------------------------------------------------------------------------


@pytest.mark.parametrize("nside", [*POW2, 8192])
def test_ring_info_matches_healpy(nside):
    info = sh.ring_info(nside)
    rings = np.arange(1, 4 * nside)
    start, npix_ring, cos_t, sin_t, shifted = hp.ringinfo(nside, rings)
    assert same_bits(info["first_pixel"], start)
    assert same_bits(info["nphi"], npix_ring)
    assert same_bits(info["z"], cos_t)
    assert same_bits(info["sin_theta"], sin_t)
    assert np.array_equal(info["phi0"] != 0, shifted)
    theta, phi = hp.pix2ang(nside, start)
    assert same_bits(info["theta"], theta)
    assert same_bits(info["phi0"], phi)


@pytest.mark.parametrize("nside", [3, 5, 100])
def test_ring_info_any_nside(nside):
    # healpy.ringinfo needs a power of two; compare with pix2ang of the first pixels instead.
    info = sh.ring_info(nside)
    assert info["nphi"].sum() == 12 * nside * nside
    assert np.array_equal(np.cumsum(info["nphi"])[:-1], info["first_pixel"][1:])
    theta, phi = hp.pix2ang(nside, info["first_pixel"])
    assert same_bits(info["theta"], theta) and same_bits(info["phi0"], phi)
    assert np.allclose(info["z"], np.cos(theta), rtol=0, atol=3e-16)
    assert np.allclose(info["sin_theta"], np.sin(theta), rtol=0, atol=5e-16)


# --- shapes, dtypes, scalars ------------------------------------------------------------------


def test_scalars_in_scalars_out():
    t, p = sh.pix2ang(16, 1440)
    assert isinstance(t, np.float64) and isinstance(p, np.float64)
    assert (t, p) == hp.pix2ang(16, 1440)
    pix = sh.ang2pix(16, np.pi / 2, 0.0)
    assert isinstance(pix, np.int64) and pix == 1440
    assert isinstance(sh.ring2nest(16, 1504), np.int64) and sh.ring2nest(16, 1504) == 1130
    assert sh.nest2ring(16, 1130) == 1504
    assert sh.pix2ang(4, np.int32(3)) == hp.pix2ang(4, 3)
    assert sh.ang2pix(16, np.array(0.3), np.array(0.2)).shape == ()


def test_shapes_and_dtypes(rng):
    pix = rng.integers(0, 12 * 64 * 64, (3, 4, 5))
    ref = hp.pix2ang(64, pix, nest=True)
    for variant in (
        pix.astype(np.int32),
        pix.astype(">i8"),
        pix.astype(np.uint16),
        pix.astype(np.float64),
        np.asfortranarray(pix),
        pix[:, ::-1][:, ::-1],
    ):
        got = sh.pix2ang(64, variant, nest=True)
        assert same_bits(got[0], ref[0]) and same_bits(got[1], ref[1])
    theta, phi = sphere_points(rng, 60)
    theta, phi = theta.reshape(3, 4, 5), phi.reshape(3, 4, 5)
    ref = hp.ang2pix(64, theta, phi)
    for t, p in [(theta.astype(">f8"), phi), (theta[:, ::-1][:, ::-1], phi.T.T)]:
        assert same_bits(sh.ang2pix(64, t, p), ref)
    # Broadcasting (θ per row, φ per column) and lists.
    got = sh.ang2pix(8, theta[:, :1, 0], phi[0, 0])
    assert same_bits(got, hp.ang2pix(8, theta[:, :1, 0], phi[0, 0]))
    assert got.shape == (3, 5)
    assert sh.ang2pix(8, [0.5, 1.0], [[0.1], [0.2]]).shape == (2, 2)
    assert sh.pix2ang(8, [])[0].shape == (0,)
    assert sh.ang2pix(8, np.empty((0, 3)), 0.0).shape == (0, 3)


def test_float32_angles_are_converted_exactly(rng):
    theta, phi = sphere_points(rng, 10_000)
    t32, p32 = theta.astype(np.float32), phi.astype(np.float32)
    got = sh.ang2pix(2048, t32, p32)
    assert same_bits(got, hp.ang2pix(2048, t32.astype(np.float64), p32.astype(np.float64)))


def test_nside_helpers():
    values = [1, 2, 3, 4, 4.0, 4.5, 0, -4, 2**29, 2**29 + 1, 2**30, 1024]
    for nest in (False, True):
        assert list(sh.isnsideok(values, nest=nest)) == list(hp.isnsideok(values, nest=nest))
        for v in values:
            assert sh.isnsideok(v, nest=nest) == hp.isnsideok(v, nest=nest), (v, nest)
    assert sh.isnsideok("4") is False and sh.isnsideok(None) is False
    assert sh.isnsideok(True) is False
    assert sh.nside2npix(4) == 192 and sh.nside2npix(3) == 108
    assert list(sh.nside2npix([1, 2, 3])) == [12, 48, 108]
    assert sh.npix2nside(192) == 4 and sh.npix2nside(108) == 3
    assert sh.npix2nside(12 * 2**58) == 2**29
    assert sh.npix2nside(192.0) == 4
    assert sh.MAX_NSIDE == 2**29


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("nside", [0, -1, 2**30, 4.5])
def test_bad_nside_value(nside):
    with pytest.raises(ValueError, match="nside"):
        sh.pix2ang(nside, 0)
    with pytest.raises(ValueError, match="nside"):
        sh.ang2pix(nside, 0.0, 0.0)
    with pytest.raises(ValueError, match="nside"):
        sh.ring_info(nside)


def test_nest_needs_power_of_two():
    for call in (
        lambda: sh.pix2ang(3, 0, nest=True),
        lambda: sh.ang2pix(6, 1.0, 0.0, nest=True),
        lambda: sh.ring2nest(3, 0),
        lambda: sh.nest2ring(12, 0),
    ):
        with pytest.raises(ValueError, match="nside.*power of 2"):
            call()


def test_bad_nside_type():
    for nside in ("4", None, [4, 8], 1j, True):
        with pytest.raises(TypeError, match="nside"):
            sh.pix2ang(nside, 0)


@pytest.mark.parametrize("nest", [False, True])
def test_pixel_out_of_range(nest):
    for bad in (-1, 192, [0, 5, 192], np.array([[3], [-7]]), 2**70, np.uint64(2**64 - 1)):
        with pytest.raises(ValueError, match="ipix"):
            sh.pix2ang(4, bad, nest=nest)
        with pytest.raises(ValueError, match="ipix"):
            (sh.nest2ring if nest else sh.ring2nest)(4, bad)


def test_pixel_wrong_dtype():
    for bad in (1.5, [0.0, 2.5], np.nan, 1j, np.array([1 + 0j]), True, "3", [None]):
        with pytest.raises(TypeError, match="ipix"):
            sh.pix2ang(4, bad)
        with pytest.raises(TypeError, match="ipix"):
            sh.ring2nest(4, bad)
    # Whole-number floats are accepted.
    assert sh.pix2ang(4, 7.0) == hp.pix2ang(4, 7)


def test_bad_angles():
    with pytest.raises(ValueError, match=r"theta\[1\]"):
        sh.ang2pix(8, [0.5, np.nan], 0.0)
    for theta in (-1e-300, -0.1, np.pi + 2e-5, np.inf):
        with pytest.raises(ValueError, match="theta"):
            sh.ang2pix(8, theta, 0.0)
    for phi in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="phi"):
            sh.ang2pix(8, 1.0, phi, nest=True)
    with pytest.raises(ValueError, match="lat"):
        sh.ang2pix(8, 0.0, 90.001, lonlat=True)
    with pytest.raises(ValueError, match="lat"):
        sh.ang2pix(8, 0.0, np.nan, lonlat=True)
    with pytest.raises(ValueError, match="lon"):
        sh.ang2pix(8, np.inf, 0.0, lonlat=True)
    with pytest.raises(TypeError, match="theta"):
        sh.ang2pix(8, 1j, 0.0)
    with pytest.raises(TypeError, match="phi"):
        sh.ang2pix(8, 1.0, "0")
    with pytest.raises(skyconv.ShapeError):
        sh.ang2pix(8, [0.1, 0.2], [0.1, 0.2, 0.3])


def test_theta_slack_like_healpy():
    # healpy accepts θ up to π + 1e-5 and reflects it across the south pole.
    for nest in (False, True):
        for t in (np.pi + 1e-6, np.pi + 1e-5):
            assert sh.ang2pix(16, t, 0.3, nest=nest) == hp.ang2pix(16, t, 0.3, nest=nest)


def test_bad_npix():
    for bad in (0, 13, -12, 12 * (2**29 + 1) ** 2):
        with pytest.raises(ValueError, match="npix"):
            sh.npix2nside(bad)
    for bad in ("12", 12.5, None):
        with pytest.raises(TypeError, match="npix"):
            sh.npix2nside(bad)
