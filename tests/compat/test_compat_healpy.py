"""skyconv.compat.healpy against healpy 1.20 (a grid of cases per function, tolerances stated)
and HEALPix's ring weights against their defining property."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from scipy.special import eval_legendre

from skyconv.compat import _healpy_orig, _ring_weights
from skyconv.compat import healpy as sc

hp = pytest.importorskip("healpy")

NSIDES = [1, 2, 4, 16, 32]


@pytest.fixture(autouse=True)
def cpu_engine(request, monkeypatch):
    """The equality tests run on the CPU engine; tests marked gpu choose their device."""
    if "gpu" not in request.keywords:
        monkeypatch.setenv("SKYCONV_DEVICE", "cpu")


def rel(a, b):
    """Largest difference relative to the largest reference value."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _healpy_weight_file(nside):
    path = os.path.join(os.path.dirname(hp.__file__), "data", f"weight_ring_n{nside:05d}.fits")
    return path if os.path.exists(path) else None


# --- ring weights -------------------------------------------------------------------------


@pytest.mark.parametrize("nside", [2, 4, 8, 16, 32, 64, 100])
def test_ring_weights_make_legendre_quadrature_exact(nside):
    """Σ_r (1 + w_r) n_r 4π/npix P_l(z_r) = 4π δ_l0 for even l <= lmax, over all rings, with
    P_l from scipy (independent of the module's recurrence); unit weights fail it."""
    w = sc.ring_weights(nside)
    lmax = _ring_weights.default_lmax(nside)
    info = sc._hpx.ring_info(nside)
    z, nphi = info["z"], info["nphi"]
    full = np.concatenate([w, w[-2::-1]])  # rings 1..4 nside - 1, mirrored
    npix = 12 * nside * nside
    ells = np.arange(0, lmax + 1, 2)
    p = np.array([eval_legendre(ell, z) for ell in ells])
    target = np.zeros(ells.size)
    target[0] = 4 * np.pi
    quad = p @ (full * nphi * 4 * np.pi / npix)
    assert np.max(np.abs(quad - target)) < 1e-12
    if nside > 2:
        assert np.max(np.abs(p @ (nphi * 4 * np.pi / npix) - target)) > 1e-6


def test_ring_weights_disk_cache(tmp_path, monkeypatch):
    """Computed once, then read back from SKYCONV_CACHE_DIR; a corrupt entry is recomputed."""
    monkeypatch.setenv("SKYCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_ring_weights, "DISK_CACHE_MIN_NSIDE", 1)
    _ring_weights._weights.cache_clear()
    try:
        w = sc.ring_weights(8)
        path = tmp_path / "ring_weights_v1" / f"n8_l{_ring_weights.default_lmax(8)}.npy"
        assert np.array_equal(np.load(path), w)
        np.save(path, np.full(16, 7.0))  # a stand-in entry is what comes back
        _ring_weights._weights.cache_clear()
        assert np.all(sc.ring_weights(8) == 7.0)
        path.write_bytes(b"not numpy")
        _ring_weights._weights.cache_clear()
        assert np.array_equal(sc.ring_weights(8), w)
    finally:
        _ring_weights._weights.cache_clear()


@pytest.mark.parametrize("nside", [2, 4, 8, 16, 32, 64, 128, 256])
def test_ring_weights_equal_healpys_files(nside):
    """Computed weights equal healpy's bundled weight files (which store w, we return 1 + w)."""
    path = _healpy_weight_file(nside)
    if path is None:
        pytest.skip(f"healpy's weight_ring_n{nside:05d}.fits is not installed")
    from astropy.io import fits

    with fits.open(path) as f:
        w_file = np.asarray(f[1].data.field(0), dtype=np.float64).ravel()
    assert np.max(np.abs(sc.ring_weights(nside) - 1 - w_file)) < 5e-13


@pytest.mark.parametrize("nside", [2, 8, 32, 128, 256])
@pytest.mark.parametrize("pol", [False, True])
def test_map2alm_use_weights_equals_healpy(nside, pol, rng):
    if _healpy_weight_file(nside) is None:
        pytest.skip("healpy's ring weight file is not installed")
    m = rng.standard_normal((3, 12 * nside * nside)) if pol else rng.standard_normal(12 * nside**2)
    for it in (0, 3):
        ref = hp.map2alm(m, iter=it, pol=pol, use_weights=True)
        got = sc.map2alm(m, iter=it, pol=pol, use_weights=True)
        assert rel(got, ref) < 1e-12


def test_weighted_map2alm_reproduces_band_limited_alm(rng):
    """Azimuthally symmetric map with l <= lmax_w / 2: the weighted quadrature (iter=0) gives
    its a_l0 back to rounding; unweighted it does not."""
    nside = 16
    lmax = _ring_weights.default_lmax(nside) // 2
    alm = np.zeros(sc.Alm.getsize(lmax), dtype=np.complex128)
    alm[: lmax + 1] = rng.standard_normal(lmax + 1)  # m = 0 block
    m = sc.alm2map(alm, nside, lmax=lmax)
    got = sc.map2alm(m, lmax=lmax, iter=0, use_weights=True)[: lmax + 1]
    plain = sc.map2alm(m, lmax=lmax, iter=0)[: lmax + 1]
    assert rel(got, alm[: lmax + 1]) < 1e-13
    assert rel(plain, alm[: lmax + 1]) > 1e-5


# --- the seven healpy-suite failures ------------------------------------------------------


@pytest.mark.parametrize("gal_cut", [5, 20.5, 60])
def test_gal_cut_equals_healpy(gal_cut, rng):
    m = rng.standard_normal((3, 12 * 16**2))
    assert rel(sc.map2alm(m, gal_cut=gal_cut), hp.map2alm(m, gal_cut=gal_cut)) < 1e-12
    assert rel(sc.map2alm(m[0], gal_cut=gal_cut), hp.map2alm(m[0], gal_cut=gal_cut)) < 1e-12


def test_map2alm_shapes_follow_healpy(rng):
    m = rng.standard_normal((3, 12 * 4**2))
    for x in (m[0], m[:1], [m[0]], m, list(m)):
        for pol in (True, False):
            got, ref = sc.map2alm(x, pol=pol), hp.map2alm(x, pol=pol)
            assert np.shape(got) == np.shape(ref) and rel(got, ref) < 1e-12


def test_pixel_weights_without_healpy_warn_and_proceed(monkeypatch, caplog, rng):
    m = rng.standard_normal(12 * 8**2)
    monkeypatch.setitem(_healpy_orig._STATE, "tried", True)
    monkeypatch.setitem(_healpy_orig._STATE, "module", None)
    with caplog.at_level(logging.WARNING):
        alm = sc.map2alm(m, use_pixel_weights=True)
    assert "Proceeding without pixel weights" in caplog.text
    assert rel(alm, sc.map2alm(m)) == 0
    with pytest.raises(RuntimeError, match="Either use pixel or ring weights"):
        sc.map2alm(m, use_pixel_weights=True, use_weights=True)


def test_smoothing_list_of_masked_maps_equals_healpy(rng):
    npix = 12 * 16**2
    maps = [hp.ma(x) for x in rng.standard_normal((3, npix))]
    for x in maps:
        x.mask = rng.random(npix) < 0.2
    for pol in (True, False):
        got = sc.smoothing(maps, fwhm=np.radians(10), lmax=32, pol=pol)
        ref = hp.smoothing(maps, fwhm=np.radians(10), lmax=32, pol=pol)
        assert isinstance(got, np.ma.MaskedArray)
        assert np.array_equal(got.mask, ref.mask)
        assert rel(got.filled(), ref.filled()) < 1e-10


@pytest.mark.parametrize("nside", [4, 16])
def test_smoothing_use_weights_equals_healpy(nside, rng):
    m = rng.standard_normal((3, 12 * nside**2))
    got = sc.smoothing(m, fwhm=0.1, use_weights=True)
    assert rel(got, hp.smoothing(m, fwhm=0.1, use_weights=True)) < 1e-11


def test_getlm_out_of_range_raises():
    with pytest.raises(AssertionError):
        sc.Alm.getlm(500, 125751)
    with pytest.raises(AssertionError):
        sc.Alm.getlm(10, [3, -1])
    ell, m = sc.Alm.getlm(10)
    ref = hp.Alm.getlm(10)
    assert np.array_equal(ell, ref[0]) and np.array_equal(m, ref[1])


# --- provided names -----------------------------------------------------------------------


@pytest.mark.parametrize("nside", NSIDES)
@pytest.mark.parametrize("nest", [False, True])
def test_pixel_functions_equal_healpy(nside, nest, rng):
    npix = 12 * nside * nside
    ipix = np.concatenate([[0, npix - 1], rng.integers(0, npix, 300)])
    for lonlat in (False, True):
        got = sc.pix2ang(nside, ipix, nest=nest, lonlat=lonlat)
        assert np.array_equal(got, hp.pix2ang(nside, ipix, nest=nest, lonlat=lonlat))
    assert rel(sc.pix2vec(nside, ipix, nest=nest), hp.pix2vec(nside, ipix, nest=nest)) < 1e-15
    v = rng.standard_normal((3, 1000))
    assert np.array_equal(sc.vec2pix(nside, *v, nest=nest), hp.vec2pix(nside, *v, nest=nest))
    theta, phi = rng.uniform(0, np.pi, 1000), rng.uniform(-7, 7, 1000)
    assert np.array_equal(
        sc.ang2pix(nside, theta, phi, nest=nest), hp.ang2pix(nside, theta, phi, nest=nest)
    )
    lon, lat = rng.uniform(-400, 400, 500), rng.uniform(-179, 179, 500)
    for bounce in (True, False):
        kw = dict(nest=nest, lonlat=True, latauto=True, latbounce=bounce)
        assert np.array_equal(sc.ang2pix(nside, lon, lat, **kw), hp.ang2pix(nside, lon, lat, **kw))
    assert sc.ang2pix(nside, 1.0, 2.0, nest=nest) == hp.ang2pix(nside, 1.0, 2.0, nest=nest)
    assert sc.nside2npix(nside) == hp.nside2npix(nside) and sc.npix2nside(npix) == nside
    assert sc.nside2order(nside) == hp.nside2order(nside)
    assert sc.order2nside(sc.nside2order(nside)) == nside
    for flag in (False, True):
        assert sc.nside2resol(nside, flag) == pytest.approx(hp.nside2resol(nside, flag), 1e-15)
        assert sc.nside2pixarea(nside, flag) == pytest.approx(hp.nside2pixarea(nside, flag), 1e-15)
    assert np.array_equal(sc.ring2nest(nside, ipix), hp.ring2nest(nside, ipix))
    assert np.array_equal(sc.nest2ring(nside, ipix), hp.nest2ring(nside, ipix))


@pytest.mark.parametrize("nside", [1, 16, 1024, 2**29])
@pytest.mark.parametrize("nest", [False, True])
def test_vec2pix_equals_healpy_on_axes_and_poles(nside, nest, rng):
    """z is taken from the vector, as HEALPix does: a vector in the equatorial plane, on an
    axis or within 1e-12 rad of a pole gets healpy's pixel (through θ = arccos z it would not:
    (1, 0, 0) at nside 16 is pixel 1504, ang2pix(π/2, 0) gives 1440)."""
    axes = np.array(
        [[1, 0, 0], [0, 1, 0], [-1, 0, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1], [1, 1, 0],
         [1, 1, 1], [3, 4, 0], [1, -1e-17, 0], [1, 0, 1e-17], [1e-300, 0, 1]],
        dtype=float,
    ).T  # fmt: skip
    grid = rng.integers(-3, 4, (3, 2000)).astype(float)
    grid = grid[:, np.any(grid != 0, axis=0)]
    t = 10 ** rng.uniform(-12, -1, 5000)
    p = rng.uniform(0, 2 * np.pi, 5000)
    polar = np.array([np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)])
    polar[2, ::2] *= -1
    for v in (axes, grid, polar, rng.standard_normal((3, 20000))):
        assert np.array_equal(sc.vec2pix(nside, *v, nest=nest), hp.vec2pix(nside, *v, nest=nest))
    got = sc.vec2pix(nside, 1.0, 0.0, 0.0, nest=nest)
    assert np.ndim(got) == 0 and got == hp.vec2pix(nside, 1.0, 0.0, 0.0, nest=nest)
    with pytest.raises(ValueError, match="no direction"):
        sc.vec2pix(nside, [1.0, 0.0], [0.0, 0.0], [0.0, 0.0])


def test_nside2order_rejects_non_power_of_two():
    with pytest.raises(ValueError):
        sc.nside2order(12)


@pytest.mark.parametrize("nside", [1, 4, 16])
def test_reorder_equals_healpy(nside, rng):
    m = rng.standard_normal((2, 12 * nside * nside))
    for kw in (dict(r2n=True), dict(n2r=True), dict(inp="RING", out="NESTED")):
        assert np.array_equal(sc.reorder(m, **kw), hp.reorder(m, **kw))
        assert np.array_equal(sc.reorder(m[0], **kw), hp.reorder(m[0], **kw))
    mm = hp.ma(m[0])
    mm.mask = rng.random(m.shape[1]) < 0.3
    got, ref = sc.reorder(mm, r2n=True), hp.reorder(mm, r2n=True)
    assert np.array_equal(got.mask, ref.mask) and np.array_equal(got.filled(), ref.filled())


@pytest.mark.parametrize("nside_out", [1, 4, 8, 32])
@pytest.mark.parametrize("pess", [False, True])
def test_ud_grade_equals_healpy(nside_out, pess, rng):
    m = rng.standard_normal((3, 12 * 8 * 8))
    m[0, :40] = sc.UNSEEN
    m[1, 100:103] = sc.UNSEEN
    for kw in (dict(), dict(order_in="NESTED"), dict(power=-2), dict(order_out="NEST")):
        got = sc.ud_grade(m, nside_out, pess=pess, **kw)
        ref = hp.ud_grade(m, nside_out, pess=pess, **kw)
        assert np.allclose(got, ref, rtol=1e-14, atol=0)
    assert np.allclose(sc.ud_grade(m[2], nside_out), hp.ud_grade(m[2], nside_out), rtol=1e-14)


def test_ud_grade_leaves_out_nan_children(rng):
    """Deliberate difference: a NaN child is left out of the mean (healpy counts it out of the
    number of children but adds it to the sum, so the parent becomes NaN)."""
    m = rng.standard_normal(12 * 4 * 4)
    m[[0, 5]] = np.nan
    nested = hp.reorder(m, r2n=True)
    got = hp.reorder(sc.ud_grade(m, 2), r2n=True)
    for parent in range(48):
        kids = nested[4 * parent : 4 * parent + 4]
        assert got[parent] == pytest.approx(np.mean(kids[np.isfinite(kids)]), rel=1e-15)


@pytest.mark.parametrize("nside", [1, 4, 32])
@pytest.mark.parametrize("radius", [0.01, 0.2, 1.0, 3.0])
@pytest.mark.parametrize("nest", [False, True])
def test_query_disc_equals_healpy(nside, radius, nest, rng):
    for v in [*rng.standard_normal((5, 3)), np.array([0.0, 0.0, 1.0]), np.array([1.0, 0, 0])]:
        got = sc.query_disc(nside, v, radius, nest=nest)
        ring = hp.query_disc(nside, v, radius)
        assert np.array_equal(got, np.sort(hp.ring2nest(nside, ring)) if nest else ring)
        if radius < np.pi / 2:
            assert np.array_equal(got, hp.query_disc(nside, v, radius, nest=nest))


def test_query_disc_nest_large_radius_is_the_ring_answer():
    """Deliberate difference: healpy 1.20.1's NEST query_disc misses pixels for some discs
    wider than a hemisphere (16 of 192 at nside 4 around the x axis, radius 3); skyconv's NEST
    answer is the RING answer renumbered, in both schemes exactly the centres within radius."""
    v, radius, nside = np.array([1.0, 0.0, 0.0]), 3.0, 4
    got = sc.query_disc(nside, v, radius, nest=True)
    x, y, z = hp.pix2vec(nside, np.arange(12 * nside**2), nest=True)
    inside = np.flatnonzero(np.arccos(np.clip(x, -1, 1)) <= radius)
    assert np.array_equal(got, inside)
    assert len(hp.query_disc(nside, v, radius, nest=True)) < len(inside)


@pytest.mark.parametrize("nside", [4, 16])
@pytest.mark.parametrize("lmax", [None, 20])
def test_anafast_and_alm2cl_equal_healpy(nside, lmax, rng):
    m = rng.standard_normal((3, 12 * nside * nside))
    for args in ((m[0],), (m,), (m, m[::-1])):
        for kw in (dict(), dict(nspec=4), dict(pol=False), dict(use_weights=True)):
            assert (
                rel(sc.anafast(*args, lmax=lmax, **kw), hp.anafast(*args, lmax=lmax, **kw)) < 1e-12
            )
    cl, alm = sc.anafast(m[0], alm=True, lmax=lmax)
    assert rel(alm, hp.map2alm(m[0], lmax=lmax)) < 1e-12
    a = hp.map2alm(m, lmax=12)
    for kw in (dict(), dict(lmax_out=8), dict(lmax_out=30)):
        assert rel(sc.alm2cl(a, **kw), hp.alm2cl(a, **kw)) < 1e-14
        assert rel(sc.alm2cl(a[0], a[1], **kw), hp.alm2cl(a[0], a[1], **kw)) < 1e-14
    a6 = hp.map2alm(m[0], lmax=12, mmax=6)
    assert rel(sc.alm2cl(a6, lmax=12, mmax=6), hp.alm2cl(a6, lmax=12, mmax=6)) < 1e-14


@pytest.mark.parametrize("lmax", [None, 10, 30])
def test_synalm_synfast_equal_healpy(lmax):
    """Same draws from numpy's global state (healpy 1.20.1's synalm with mmax < lmax corrupts
    memory, so mmax is left at lmax here)."""
    cl = 1.0 / (1.0 + np.arange(25.0)) ** 2
    for seed in (0, 12345):
        np.random.seed(seed)
        got = sc.synalm(cl, lmax=lmax)
        np.random.seed(seed)
        assert rel(got, hp.synalm(cl, lmax=lmax)) < 1e-15
    for nside in (4, 16):
        for fwhm in (0.0, 0.1):
            np.random.seed(1)
            m, a = sc.synfast(cl, nside, lmax=lmax, alm=True, fwhm=fwhm)
            np.random.seed(1)
            mr, ar = hp.synfast(cl, nside, lmax=lmax, alm=True, fwhm=fwhm)
            assert rel(m, mr) < 1e-12 and rel(a, ar) < 1e-15


def test_synalm_mmax_layout_and_power(rng):
    """mmax < lmax: the (lmax, mmax) layout, m = 0 real, and <|a_lm|^2> = C_l."""
    np.random.seed(7)
    lmax, mmax = 300, 150
    cl = np.full(lmax + 1, 2.0)
    a = sc.synalm(cl, lmax=lmax, mmax=mmax)
    assert a.size == sc.Alm.getsize(lmax, mmax)
    assert np.all(a[: lmax + 1].imag == 0)
    assert np.mean(np.abs(a[lmax + 1 :]) ** 2) == pytest.approx(2.0, rel=0.02)


@pytest.mark.parametrize("nside", [2, 8, 32])
@pytest.mark.parametrize("lmax", [4, 20])
def test_spin_transforms_equal_healpy(nside, lmax, rng):
    size = sc.Alm.getsize(lmax)
    alms = rng.standard_normal((2, size)) + 1j * rng.standard_normal((2, size))
    alms[:, : lmax + 1] = alms[:, : lmax + 1].real  # m = 0 real
    alms[:, :2] = 0  # l < 2 do not exist for spin 2
    alms[:, lmax + 1] = 0
    got = sc.alm2map_spin(alms, nside, 2, lmax)
    assert rel(got, hp.alm2map_spin(alms, nside, 2, lmax)) < 1e-12
    maps = rng.standard_normal((2, 12 * nside * nside))
    assert rel(sc.map2alm_spin(maps, 2, lmax=lmax), hp.map2alm_spin(maps, 2, lmax=lmax)) < 1e-12
    # Other spins go to healpy.
    assert rel(sc.alm2map_spin(alms, nside, 1, lmax), hp.alm2map_spin(alms, nside, 1, lmax)) == 0


@pytest.mark.parametrize("nside", [2, 8, 32])
@pytest.mark.parametrize("lmax", [1, 7, 40])
def test_alm2map_der1_equals_healpy(nside, lmax, rng):
    size = sc.Alm.getsize(lmax)
    alm = rng.standard_normal(size) + 1j * rng.standard_normal(size)
    alm[: lmax + 1] = alm[: lmax + 1].real
    got = sc.alm2map_der1(alm, nside, lmax=lmax)
    ref = hp.alm2map_der1(alm, nside, lmax=lmax)
    scale = np.max(np.abs(ref))
    assert got.shape == np.shape(ref)
    assert np.max(np.abs(got - ref)) < 1e-12 * scale


def test_alm2map_der1_lmax0_has_zero_derivatives():
    """healpy 1.20.1 aborts the process for lmax = 0 ("bad spin"); skyconv gives the constant
    map and zero derivatives."""
    got = sc.alm2map_der1(np.array([2.0 + 0j]), 4, lmax=0)
    assert np.allclose(got[0], 2.0 / np.sqrt(4 * np.pi), rtol=1e-15)
    assert np.all(got[1:] == 0)


def test_gauss_beam_equals_healpy():
    for fwhm in (0.0, 1e-3, 0.05):
        for pol in (False, True):
            got, ref = sc.gauss_beam(fwhm, 300, pol), hp.gauss_beam(fwhm, 300, pol)
            assert rel(got, ref) < 1e-14


# --- hand-over ----------------------------------------------------------------------------


def test_other_names_are_healpys():
    assert sc.read_map is hp.read_map
    assert sc.Rotator is hp.Rotator
    assert sc.__version__ == hp.__version__
    assert {"mollview", "map2alm", "ring_weights"} <= set(dir(sc))
    assert sc.map2alm is not hp.map2alm
    with pytest.raises(AttributeError, match="no_such_function"):
        sc.no_such_function  # noqa: B018


def test_other_names_without_healpy_name_the_function(monkeypatch):
    monkeypatch.setitem(_healpy_orig._STATE, "tried", True)
    monkeypatch.setitem(_healpy_orig._STATE, "module", None)
    with pytest.raises(AttributeError, match=r"'mollview'.*pip install healpy"):
        sc.mollview  # noqa: B018
    with pytest.raises(NotImplementedError, match="pip install healpy"):
        sc.alm2map(np.zeros(6, complex), 2, pixwin=True)
    with pytest.raises(NotImplementedError, match="spin 1"):
        sc.alm2map_spin(np.zeros((2, 6), complex), 2, 1, 2)


def test_synfast_several_spectra_with_none_go_to_healpy():
    """A list of spectra (one of them None) is handed to healpy: same draws, same maps."""
    cl = np.linspace(0, 1e-3, 40)
    cls = [cl, cl / 3, cl / 2, None]
    np.random.seed(3)
    got = sc.synfast(cls, 8)
    np.random.seed(3)
    assert rel(got, hp.synfast(cls, 8)) == 0


@pytest.mark.gpu
def test_gpu_compat_functions_equal_healpy(monkeypatch, rng):
    """compat.healpy on the GPU engine against healpy (1e-10 of the largest value)."""
    monkeypatch.setenv("SKYCONV_DEVICE", "cuda")
    nside = 32
    m = rng.standard_normal((3, 12 * nside * nside))
    assert rel(sc.map2alm(m, use_weights=True), hp.map2alm(m, use_weights=True)) < 1e-10
    assert rel(sc.map2alm(m, gal_cut=10), hp.map2alm(m, gal_cut=10)) < 1e-10
    assert rel(sc.anafast(m), hp.anafast(m)) < 1e-10
    maps = [hp.ma(x) for x in m]
    for x in maps:
        x.mask = rng.random(m.shape[1]) < 0.2
    got, ref = sc.smoothing(maps, fwhm=0.1), hp.smoothing(maps, fwhm=0.1)
    assert np.array_equal(got.mask, ref.mask) and rel(got.filled(), ref.filled()) < 1e-10
    alm = hp.map2alm(m, lmax=40)
    assert rel(sc.alm2map_der1(alm[0], nside), hp.alm2map_der1(alm[0], nside)) < 1e-10
    got = sc.alm2map_spin(alm[1:], nside, 2, 40)
    assert rel(got, hp.alm2map_spin(alm[1:], nside, 2, 40)) < 1e-10
    assert rel(sc.map2alm_spin(m[1:], 2, lmax=40), hp.map2alm_spin(m[1:], 2, lmax=40)) < 1e-10


def test_skyconv_alm_getlm_out_of_range_raises():
    """skyconv.Alm (not only the compat one) refuses indices outside the layout."""
    import skyconv

    for bad in (125751, -1, [0, 125751]):
        with pytest.raises(ValueError, match="out of range"):
            skyconv.Alm.getlm(500, bad)
    assert skyconv.Alm.getlm(500, 125750) == (500, 500)
