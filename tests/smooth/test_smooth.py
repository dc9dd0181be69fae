"""smooth_map: the ring method against a plain float64 direct sum and against healpy; the
harmonic method and compat.healpy.smoothing against healpy (CPU always; GPU marked ``gpu``).

Tolerances (fractional to the RMS of the smoothed map):
- ring vs the direct sum with the same (cut and tapered) kernel: <= 1e-6 (max) on belt rings
  whose support lies in the belt (measured ~1e-12), <= 1e-6 RMS over the rings checked
  (measured ~1e-7 at tol = 1e-5).
- ring vs healpy.smoothing(iter=3), CMB-like map: <= 1e-4 at FWHM 3 px (nside 128-512; 2e-4 at
  64) and <= 1e-4 ... 1e-5 at 5 px (measured with the ring weights: see skyconv.smooth's table);
  <= 1e-3 at FWHM 2 px (measured 6e-4). At 2 px healpy itself misses the exact smoothing by
  ~4e-4 in the polar caps; the ring method is at least as close to it (tested), so the issue's
  1e-4 against healpy at 2 px is not met.
- harmonic and compat vs healpy: <= 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest

import skyconv
from skyconv import DeviceError, GpuMemoryError, ShapeError, healpix, smooth_map
from skyconv import smooth as sm
from skyconv.compat import healpy as chp

hp = pytest.importorskip("healpy")

UNSEEN = -1.6375e30


def frac_rms(got, ref):
    return float(np.sqrt(np.mean((got - ref) ** 2)) / np.sqrt(np.mean(ref**2)))


def pix_of_ring(nside):
    ri = healpix.ring_info(nside)
    return ri, [np.arange(f, f + n) for f, n in zip(ri["first_pixel"], ri["nphi"], strict=True)]


# ----------------------------------------------------------------------------------------------
# The plain NumPy reference: s(q) = sum_p K(gamma_pq) m(p) 4 pi / npix


def taper(g, t0, t1):
    """1 - psi((g - t0)/(t1 - t0)), psi(x) = e^(-1/x) / (e^(-1/x) + e^(-1/(1-x)))."""
    x = np.clip((g - t0) / (t1 - t0), 0.0, 1.0)
    with np.errstate(divide="ignore", over="ignore"):
        a = np.where(x > 0, np.exp(-1 / x), 0.0)
        b = np.where(x < 1, np.exp(-1 / (1 - x)), 0.0)
    return 1 - a / (a + b)


def gauss_kernel_reference(fwhm, theta_cut, ngrid=200_001):
    """K(gamma) of the Gaussian by the Legendre sum of exp(-l(l+1) sigma^2/2) on a fine grid,
    tapered from theta_cut / 1.2 to zero at theta_cut (unless that is pi) and scaled to unit
    integral (skyconv's normalisation)."""
    sigma = fwhm / np.sqrt(8 * np.log(2))
    lmax = int(np.ceil(9.5 / sigma)) + 2
    ell = np.arange(lmax + 1)
    coef = (2 * ell + 1) / (4 * np.pi) * np.exp(-0.5 * ell * (ell + 1) * sigma**2)
    g = np.linspace(0.0, theta_cut, ngrid)
    k = np.polynomial.legendre.legval(np.cos(g), coef)
    if theta_cut < np.pi:
        k *= taper(g, theta_cut / 1.2, theta_cut)
    integrand = 2 * np.pi * k * np.sin(g)
    b0 = np.sum(0.5 * (integrand[1:] + integrand[:-1]) * np.diff(g))
    return g, k / b0


def ring_weights_reference(nside):
    """1 + w_j for every ring (RING order): the least sum_j nphi_j w_j^2 with
    sum_j nphi_j (1 + w_j) P_l(z_j) 4 pi / npix = 4 pi delta_l0 for even l <= 3 nside
    (minimum-norm least squares)."""
    ri = healpix.ring_info(nside)
    nr = 2 * nside  # north rings and the equator (the weights are N/S symmetric)
    z = ri["z"][:nr]
    c = ri["nphi"][:nr] * 4 * np.pi / (12 * nside**2) * np.where(np.arange(nr) < nr - 1, 2, 1)
    ell = np.arange(0, 3 * nside + 1, 2)
    p = np.array([np.polynomial.legendre.legval(z, np.eye(ell[-1] + 1)[k]) for k in ell])
    r = -(p @ c)
    r[0] += 4 * np.pi
    u = np.linalg.lstsq(p * np.sqrt(c), r, rcond=None)[0]
    w = u / np.sqrt(c)
    return 1 + np.concatenate([w, w[-2::-1]])


def direct_sum(m, nside, g, k, qpix):
    """s(q) = sum_p K(gamma_pq) (1 + w_ring(p)) m(p) 4 pi / npix."""
    npix = 12 * nside**2
    ri, rings = pix_of_ring(nside)
    fac = np.repeat(ring_weights_reference(nside), ri["nphi"])
    m = m * fac
    v = np.array(hp.pix2vec(nside, np.arange(npix)))
    out = np.empty(qpix.size)
    for s in range(0, qpix.size, 256):
        q = v[:, qpix[s : s + 256]]
        chord = np.sqrt(((v[:, :, None] - q[:, None, :]) ** 2).sum(0))
        gamma = 2 * np.arcsin(np.minimum(chord / 2, 1.0))
        kern = np.where(gamma <= g[-1], np.interp(gamma, g, k), 0.0)
        out[s : s + 256] = (kern * m[:, None]).sum(0) * 4 * np.pi / npix
    return out


@pytest.mark.parametrize("nside,fwhm_px", [(16, 2), (16, 3), (16, 40), (32, 5), (64, 2)])
def test_ring_matches_direct_sum(rng, nside, fwhm_px):
    fwhm = fwhm_px * hp.nside2resol(nside)
    theta, values = sm.kernel_profile(fwhm=fwhm, tol=1e-5)
    g, k = gauss_kernel_reference(fwhm, theta[-1])
    m = rng.standard_normal(12 * nside**2)
    got = sm._ring(m, nside, theta, values, "cpu")
    ri, rings = pix_of_ring(nside)
    # Every ring at nside 16; pole, cap, boundary, belt and equator rings above.
    sel = (
        range(2 * nside)
        if nside <= 16
        else sorted({*range(0, 2 * nside, nside // 4), nside - 2, nside - 1, nside, 2 * nside - 1})
    )
    qpix = np.concatenate([rings[r] for r in sel])
    ref = direct_sum(m, nside, g, k, qpix)
    rms = np.sqrt(np.mean(got**2))
    err = got[qpix] - ref
    assert np.sqrt(np.mean(err**2)) / rms <= 1e-6  # the issue asks 1e-5; measured ~1e-7
    # Belt rings whose support lies in the belt: exact circular convolutions.
    theta_r = ri["theta"]
    cap_edge = theta_r[nside - 1]
    off = 0
    nbelt = 0
    for r in sel:
        n = rings[r].size
        if theta_r[r] - theta[-1] > cap_edge:
            assert np.abs(err[off : off + n]).max() / rms <= 1e-6, f"ring {r}"
            nbelt += 1
        off += n
    if theta[-1] >= np.pi:
        # A kernel over the whole sphere has no truncation step: spectrally exact everywhere.
        assert np.abs(err).max() / rms <= 1e-10
    else:
        assert nbelt > 0


def test_profile_window_is_the_gaussian():
    fwhm = np.radians(2.0)
    theta, values = sm.kernel_profile(fwhm=fwhm, tol=1e-9)
    sigma = fwhm / np.sqrt(8 * np.log(2))
    ell = np.arange(300)
    b = sm.profile_window(theta, values, 299)
    assert np.abs(b - np.exp(-0.5 * ell * (ell + 1) * sigma**2)).max() <= 1e-8
    # The same kernel from its beam window.
    t2, v2 = sm.kernel_profile(beam_window=sm.gauss_window(fwhm, 2000), tol=1e-9)
    assert abs(t2[-1] - theta[-1]) <= 0.02 * theta[-1]
    assert np.abs(np.interp(theta, t2, v2) - values).max() <= 1e-6 * values[0]
    # Cut at tol of the peak (closed form: exactly), then tapered to 0 over 20% further.
    t3, v3 = sm.kernel_profile(fwhm=np.radians(0.1), tol=1e-5)
    assert v3[-1] == 0.0
    assert np.interp(t3[-1] / 1.2, t3, v3) / v3[0] == pytest.approx(1e-5, rel=1e-3)


def test_ring_is_thread_count_independent(rng):
    nside = 32
    m = rng.standard_normal(12 * nside**2)
    fwhm = 3 * hp.nside2resol(nside)
    n0 = skyconv.get_num_threads()
    try:
        skyconv.set_num_threads(1)
        a = smooth_map(m, fwhm=fwhm, method="ring", device="cpu")
        skyconv.set_num_threads(2)
        b = smooth_map(m, fwhm=fwhm, method="ring", device="cpu")
    finally:
        skyconv.set_num_threads(n0)
    assert np.array_equal(a, b)


# ----------------------------------------------------------------------------------------------
# Against healpy


def cmb_like(nside, seed=3):
    ell = np.arange(3 * nside)
    cl = 1.0 / (ell + 10.0) ** 2 * np.exp(-((ell / nside) ** 2))
    np.random.seed(seed)
    return hp.synfast(cl, nside)


@pytest.mark.parametrize("fwhm_px,limit", [(3, 1e-4), (2, 1e-3)])
def test_ring_matches_healpy_smoothing(fwhm_px, limit):
    nside = 512
    m = cmb_like(nside)
    fwhm = fwhm_px * hp.nside2resol(nside)
    ref = hp.smoothing(m, fwhm=fwhm, iter=3)
    got = smooth_map(m, fwhm=fwhm, method="ring", device="cpu")
    assert frac_rms(got, ref) <= limit


# Ring-weighted ring method vs healpy.smoothing(iter=3), measured (CMB-like map):
# nside    64      128     256     512
# 3 px     1.2e-4  6.4e-5  4.9e-5  4.4e-5
# 5 px     4.6e-5  8.3e-6  3.0e-6  2.4e-6
@pytest.mark.parametrize(
    "nside,limits",
    [(64, (2e-4, 1e-4)), (128, (1e-4, 2e-5)), (256, (1e-4, 1e-5)), (512, (1e-4, 1e-5))],
)
def test_ring_matches_healpy_over_nside(nside, limits):
    m = cmb_like(nside)
    for fwhm_px, limit in zip((3, 5), limits, strict=True):
        fwhm = fwhm_px * hp.nside2resol(nside)
        ref = hp.smoothing(m, fwhm=fwhm, iter=3)
        got = smooth_map(m, fwhm=fwhm, method="ring", device="cpu")
        assert frac_rms(got, ref) <= limit, fwhm_px


@pytest.mark.parametrize("nside", [128, 256, 512])
@pytest.mark.parametrize("fwhm_px", [2, 3])
def test_ring_is_as_close_to_the_exact_smoothing_as_healpy(nside, fwhm_px):
    """At 2-3 px healpy.smoothing(iter=3) itself misses the exact smoothing of the synthesised
    (band-limited, 3 nside - 1) map by 4e-4 (2 px) and 4e-5 (3 px) in the polar caps, where
    the samples do not determine the high-m a_lm: the ring method is at least as close."""
    ell = np.arange(3 * nside)
    cl = 1.0 / (ell + 10.0) ** 2 * np.exp(-((ell / nside) ** 2))
    np.random.seed(3)
    m, alm = hp.synfast(cl, nside, alm=True)
    fwhm = fwhm_px * hp.nside2resol(nside)
    exact = hp.alm2map(hp.almxfl(alm, hp.gauss_beam(fwhm, 3 * nside - 1)), nside)
    ref = hp.smoothing(m, fwhm=fwhm, iter=3)
    got = smooth_map(m, fwhm=fwhm, method="ring", device="cpu")
    assert frac_rms(got, exact) <= frac_rms(ref, exact)


@pytest.mark.parametrize("nside,iter", [(16, 0), (64, 3), (128, 1)])
def test_harmonic_matches_healpy(rng, nside, iter):
    m = rng.standard_normal(12 * nside**2)
    fwhm = 2.5 * hp.nside2resol(nside)
    ref = hp.smoothing(m, fwhm=fwhm, iter=iter)
    got = smooth_map(m, fwhm=fwhm, method="harmonic", iter=iter, device="cpu")
    assert got.dtype == np.float64
    assert frac_rms(got, ref) <= 1e-10
    # A beam window (zero past its end) and lmax.
    bw = hp.gauss_beam(fwhm, lmax=2 * nside) * np.cos(np.arange(2 * nside + 1) / (4 * nside))
    ref = hp.smoothing(m, beam_window=bw, iter=iter, lmax=2 * nside)
    got = smooth_map(m, beam_window=bw, lmax=2 * nside, method="harmonic", iter=iter)
    assert frac_rms(got, ref) <= 1e-10


def test_compat_smoothing_matches_healpy(rng):
    nside = 32
    npix = 12 * nside**2
    iqu = rng.standard_normal((3, npix))
    for kw in (
        {"fwhm": 0.08},
        {"sigma": 0.03},
        {"fwhm": 0.05, "pol": False},
        {"beam_window": hp.gauss_beam(0.05, lmax=60)},
        {"fwhm": 0.05, "lmax": 40, "mmax": 30, "iter": 1},
        {"fwhm": 0.0},
    ):
        ref = hp.smoothing(iqu, **kw)
        got = chp.smoothing(iqu, **kw)
        for i in range(3):
            assert frac_rms(got[i], ref[i]) <= 1e-10, kw
    one = iqu[0].copy()
    one[[5, 700]] = UNSEEN
    ref = hp.smoothing(one, fwhm=0.08)
    got = chp.smoothing(one, fwhm=0.08)
    assert np.array_equal(got == UNSEEN, ref == UNSEEN)
    ok = ref != UNSEEN
    assert frac_rms(got[ok], ref[ok]) <= 1e-10
    # nest=True: healpy restores UNSEEN at the wrong (RING) positions; compare elsewhere.
    nest = hp.reorder(iqu[0], r2n=True)
    got = chp.smoothing(nest, fwhm=0.08, nest=True)
    ref = hp.smoothing(nest, fwhm=0.08, nest=True)
    assert frac_rms(got, ref) <= 1e-10
    masked = np.ma.masked_array(iqu[0], mask=np.arange(npix) % 97 == 0)
    got = chp.smoothing(masked, fwhm=0.08)
    assert isinstance(got, np.ma.MaskedArray)
    assert np.array_equal(got.mask, masked.mask)


def test_compat_smoothing_signature_and_options():
    import inspect

    assert inspect.signature(chp.smoothing) == inspect.signature(hp.smoothing)
    m = np.random.default_rng(4).standard_normal(12 * 4**2)
    # Ring weights are computed by skyconv (tests/compat/test_compat_healpy.py has the rest);
    # datapath only matters to pixel weights, which are handed to healpy.
    got = chp.smoothing(m, fwhm=0.1, use_weights=True)
    assert frac_rms(got, hp.smoothing(m, fwhm=0.1, use_weights=True)) <= 1e-12
    assert np.array_equal(chp.smoothing(m, fwhm=0.1, datapath="/tmp"), chp.smoothing(m, fwhm=0.1))
    assert np.array_equal(chp.gauss_beam(0.1, 50), hp.gauss_beam(0.1, 50))


# ----------------------------------------------------------------------------------------------
# Orderings, missing pixels, dtypes


@pytest.mark.parametrize("method", ["ring", "harmonic"])
def test_nest_unseen_nan_float32(rng, method):
    nside = 32
    npix = 12 * nside**2
    fwhm = 3 * hp.nside2resol(nside)
    m = rng.standard_normal(npix)
    bad = rng.choice(npix, 40, replace=False)
    m[bad[:20]] = UNSEEN
    m[bad[20:30]] = np.nan
    m[bad[30:]] = np.inf
    ring = smooth_map(m, fwhm=fwhm, method=method, device="cpu")
    assert np.array_equal(ring[bad[:20]], np.full(20, UNSEEN))
    assert np.isnan(ring[bad[20:30]]).all() and np.isposinf(ring[bad[30:]]).all()
    good = np.ones(npix, bool)
    good[bad] = False
    assert np.isfinite(ring[good]).all()
    filled = np.where(good, m, 0.0)
    assert np.array_equal(ring[good], smooth_map(filled, fwhm=fwhm, method=method)[good])
    # NEST in -> NEST out equals the RING result reordered.
    nest_in = m[healpix.nest2ring(nside, np.arange(npix))]
    nest_out = smooth_map(nest_in, fwhm=fwhm, method=method, nest=True, device="cpu")
    np.testing.assert_array_equal(nest_out, ring[healpix.nest2ring(nside, np.arange(npix))])
    # float32 in: the float64 result of the float32 values.
    f32 = filled.astype(np.float32)
    got = smooth_map(f32, fwhm=fwhm, method=method)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, smooth_map(f32.astype(np.float64), fwhm=fwhm, method=method))
    # Several maps at once.
    two = smooth_map(np.stack([filled, 2 * filled]), fwhm=fwhm, method=method)
    np.testing.assert_allclose(two[1], 2 * two[0], rtol=0, atol=1e-12 * np.abs(two).max())


def test_point_sources_ring_has_no_ringing():
    """Beyond the kernel's support the ring result is 0 up to roundoff on the equatorial belt
    and up to the resampling error (~1e-7) elsewhere; the band-limited harmonic result rings
    at the percent level."""
    nside = 32
    npix = 12 * nside**2
    m = np.zeros(npix)
    src = [healpix.ang2pix(nside, t, p) for t, p in [(0.3, 1.0), (1.5708, 2.0), (2.6, 4.0)]]
    m[src] = 1.0
    fwhm = 2 * hp.nside2resol(nside)
    tol = 1e-5
    theta_cut = sm.kernel_profile(fwhm=fwhm, tol=tol)[0][-1]
    ring = smooth_map(m, fwhm=fwhm, method="ring", tol=tol, device="cpu")
    harm = smooth_map(m, fwhm=fwhm, method="harmonic", device="cpu")
    v = np.array(hp.pix2vec(nside, np.arange(npix)))
    dist = np.min([np.arccos(np.clip(v.T @ v[:, s], -1, 1)) for s in src], axis=0)
    far = dist > theta_cut * (1 + 1e-6)
    assert far.sum() > npix // 2
    peak = ring.max()
    ri, rings = pix_of_ring(nside)
    belt = np.concatenate(rings[nside - 1 : 3 * nside])
    in_belt = np.zeros(npix, bool)
    in_belt[belt] = True
    assert np.abs(ring[far & in_belt]).max() <= 1e-15 * peak
    assert np.abs(ring[far]).max() <= 0.1 * tol * peak
    assert np.abs(harm[far]).max() > 1e-3 * harm.max()  # band-limited: it rings


# ----------------------------------------------------------------------------------------------
# Bad input: each rejected argument raises the documented exception naming it


def test_bad_arguments():
    m = np.zeros(12 * 8**2)
    fw = 0.1
    cases = [
        (lambda: smooth_map(np.zeros(100), fwhm=fw), ShapeError, "pixels"),
        (lambda: smooth_map(np.zeros((2, 2, 768)), fwhm=fw), ShapeError, "m must"),
        (lambda: smooth_map(m.astype(int), fwhm=fw), TypeError, "m must"),
        (lambda: smooth_map(m, fwhm=0.0), ValueError, "fwhm"),
        (lambda: smooth_map(m, fwhm=-1.0, method="ring"), ValueError, "fwhm"),
        (lambda: smooth_map(m, fwhm=np.nan), ValueError, "fwhm"),
        (lambda: smooth_map(m), ValueError, "fwhm"),
        (lambda: smooth_map(m, fwhm=fw, beam_window=[1.0]), ValueError, "beam_window"),
        (lambda: smooth_map(m, beam_window=np.ones((2, 2, 3))), ShapeError, "beam_window"),
        (lambda: smooth_map(m, beam_window=[1.0, np.nan]), ValueError, "beam_window"),
        (lambda: smooth_map(m, fwhm=fw, tol=0.0), ValueError, "tol"),
        (lambda: smooth_map(m, fwhm=fw, tol=1.5), ValueError, "tol"),
        (lambda: smooth_map(m, fwhm=fw, method="fast"), ValueError, "method"),
        (lambda: smooth_map(m, fwhm=fw, iter=-1), ValueError, "iter"),
        (lambda: smooth_map(m, fwhm=fw, lmax=-2), ValueError, "lmax"),
        (lambda: smooth_map(m, fwhm=fw, device="tpu", method="ring"), ValueError, "device"),
        (lambda: smooth_map(np.zeros(12 * 3**2), fwhm=fw, nest=True), ValueError, "nside"),
        (lambda: sm.kernel_profile(fwhm=fw, tol=2.0), ValueError, "tol"),
        (lambda: sm.kernel_profile(beam_window=[np.inf]), ValueError, "beam_window"),
        (lambda: sm.kernel_profile(beam_window=[0.0, 0.0]), ValueError, "beam_window"),
        (lambda: sm._ring(m, 8, [0.1, 0.2], [1.0, 0.0], "cpu"), ValueError, "theta"),
        (lambda: sm._ring(m, 8, [0.0, 0.2], [1.0], "cpu"), ShapeError, "theta"),
        (lambda: sm._ring(m, 8, [0.0, 0.2, 0.1], [1, 1, 0.0], "cpu"), ValueError, "theta"),
        (lambda: sm._ring(m, 8, [0.0, 0.2], [1.0, np.nan], "cpu"), ValueError, "values"),
        (lambda: sm._ring(m, 9, [0.0, 0.2], [1.0, 0.0], "cpu"), ShapeError, "nside"),
    ]
    if not skyconv.backend_info()["cuda"]["available"]:
        cuda = lambda: smooth_map(m, fwhm=fw, device="cuda", method="ring")  # noqa: E731
        cases.append((cuda, DeviceError, "cuda"))
    for call, exc, word in cases:
        with pytest.raises(exc, match=word):
            call()


def test_internal_entry_points_keep_their_signatures():
    import inspect

    assert list(inspect.signature(sm._ring).parameters) == [
        "map_ring_f64_filled",
        "nside",
        "theta",
        "values",
        "device",
    ]
    assert list(inspect.signature(sm._harmonic).parameters) == [
        "map_ring_f64_filled",
        "window",
        "lmax",
        "iter",
        "device",
    ]


def test_plan_cost_counts():
    theta, values = sm.kernel_profile(fwhm=np.radians(5 / 60), tol=1e-5)
    info = skyconv._core._ring_plan_info(1024, theta, values)
    assert info["lengths"].size == 2 * 1024
    lens = info["lengths"]
    assert (lens[1023 + 16 :] == 4096).all()  # the belt off its edge: exact, L = 4 nside
    assert lens[1020:1030].max() > 4096  # near the cap edge: oversampled
    assert info["fft_flops"] > 0 and info["bytes"] == 32 * 12 * 1024**2
    assert info["kernel_ffts"] == int(info["inputs"].sum())


# ----------------------------------------------------------------------------------------------
# GPU


@pytest.mark.gpu
def test_gpu_harmonic_equals_cpu(rng):
    nside = 64
    m = rng.standard_normal(12 * nside**2)
    fwhm = 3 * hp.nside2resol(nside)
    a = smooth_map(m, fwhm=fwhm, method="harmonic", device="cpu")
    b = smooth_map(m, fwhm=fwhm, method="harmonic", device="cuda")
    assert frac_rms(b, a) <= 1e-12


def max_rel(got, ref):
    return float(np.abs(got - ref).max() / np.abs(ref).max())


@pytest.mark.gpu
@pytest.mark.parametrize("nside", [16, 32, 64, 128, 256])
@pytest.mark.parametrize("px", [1.5, 3.0, 10.0, 60.0])
def test_gpu_ring_equals_cpu(rng, nside, px):
    """The CUDA ring engine against the CPU engine: same plan, same sums (to rounding)."""
    m = rng.standard_normal(12 * nside**2)
    fwhm = px * hp.nside2resol(nside)
    a = smooth_map(m, fwhm=fwhm, method="ring", device="cpu")
    b = smooth_map(m, fwhm=fwhm, method="ring", device="cuda")
    assert max_rel(b, a) <= 1e-9


@pytest.mark.gpu
def test_gpu_ring_nest_float32_unseen_and_several_maps(rng):
    nside = 64
    fwhm = 4 * hp.nside2resol(nside)
    m = rng.standard_normal((2, 12 * nside**2)).astype(np.float32)
    m[0, rng.choice(m.shape[1], 300, replace=False)] = UNSEEN
    m[1, :50] = np.nan
    for nest in (False, True):
        a = smooth_map(m, fwhm=fwhm, method="ring", nest=nest, device="cpu")
        b = smooth_map(m, fwhm=fwhm, method="ring", nest=nest, device="cuda")
        assert b.dtype == np.float64 and b.shape == m.shape
        miss = np.isnan(m) | (m == np.float32(UNSEEN))
        np.testing.assert_array_equal(b[miss], a[miss])  # the input values, kept
        assert max_rel(b[~miss], a[~miss]) <= 1e-9


@pytest.mark.gpu
def test_gpu_ring_large_and_profiled(rng):
    """nside 1024 at 6 arcmin (1.75 px: above the ring method's 1.5 px floor): equal to the CPU,
    and last_profile() splits the call into its stages."""
    import skyconv

    nside = 1024
    m = rng.standard_normal(12 * nside**2)
    fwhm = np.radians(6 / 60)
    b = smooth_map(m, fwhm=fwhm, method="ring", device="cuda")
    prof = skyconv.last_profile()
    for stage in ("h2d", "setup", "fft", "kernel", "products", "d2h", "total"):
        assert stage in prof, prof
    a = smooth_map(m, fwhm=fwhm, method="ring", device="cpu")
    assert max_rel(b, a) <= 1e-9
    # "auto" runs the ring method on the GPU when there is one
    np.testing.assert_array_equal(smooth_map(m, fwhm=fwhm, method="ring", device="auto"), b)


@pytest.mark.gpu
def test_gpu_ring_refuses_what_does_not_fit(rng, monkeypatch):
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", "1000000")
    m = rng.standard_normal(12 * 256**2)
    with pytest.raises(GpuMemoryError, match="bytes"):
        smooth_map(m, fwhm=0.01, method="ring", device="cuda")
