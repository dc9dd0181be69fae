"""Masked and partial-sky smoothing (smooth_map's ``mask``, ``min_weight``, (ipix, values)).

The reference is a plain float64 normalised sum written here: s(q) = sum_p K(gamma_pq) w_p m_p
/ sum_p K(gamma_pq) w_p, K the ring method's tabulated kernel (a cubic spline through its
nodes). The unmasked reference is the same sum with w = 1 (times 4 pi / npix). Tolerances:
- masked ring vs the masked reference, fractional RMS over the defined pixels: <= 2x the
  unmasked ring's distance to the unmasked reference (the issue's bar). Measured (nside 32,
  64; 3 and 6 px; galactic cut, holes, patch): masked 2.0e-4 ... 8.2e-4, unmasked 8.6e-4 ...
  2.4e-3, both from the ring weights of the quadrature that the plain sum leaves out (they
  largely cancel in the masked ratio).
- a constant map with a mask stays that constant to 1e-12 where defined.
- no mask: bit-identical to the engine called directly; GPU vs CPU <= 1e-12 relative.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy import sparse
from scipy.interpolate import CubicSpline

import skyconv
from skyconv import ArgumentError, ShapeError, _core, healpix, smooth_map
from skyconv.smooth import kernel_profile

UNSEEN = -1.6375e30


def resol(nside):
    """The pixel size sqrt(4 pi / npix), radians."""
    return np.sqrt(4 * np.pi / (12 * nside**2))


def vectors(nside):
    th, ph = healpix.pix2ang(nside, np.arange(12 * nside**2))
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], axis=1)


@functools.lru_cache(maxsize=4)
def kernel_matrix(nside, fwhm, tol=1e-5):
    """K(gamma_pq) * 4 pi / npix for every pair within theta_cut, sparse (RING x RING)."""
    theta, values = kernel_profile(fwhm=fwhm, tol=tol)
    spline = CubicSpline(theta, values, bc_type=((1, 0.0), "not-a-knot"))
    v = vectors(nside)
    n = v.shape[0]
    rows, cols, vals = [], [], []
    ccut = np.cos(theta[-1])
    for a in range(0, n, 1024):
        dots = v[a : a + 1024] @ v.T
        r, c = np.nonzero(dots >= ccut - 1e-12)
        g = np.arccos(np.clip(dots[r, c], -1.0, 1.0))
        keep = g <= theta[-1]
        rows.append(r[keep] + a)
        cols.append(c[keep])
        vals.append(spline(g[keep]) * (4 * np.pi / n))
    return sparse.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
    )


def brute(m, w, nside, fwhm):
    """(sum K w m, sum K w) * 4 pi / npix at every output pixel (RING), plain float64."""
    k = kernel_matrix(nside, float(fwhm))
    return k @ (w * m), k @ w


def frac(got, ref):
    return float(np.sqrt(np.mean((got - ref) ** 2)) / np.sqrt(np.mean(ref**2)))


def sky(nside, rng):
    """A smooth-ish random map: white noise smoothed over ~2 px plus a dipole."""
    th, _ = healpix.pix2ang(nside, np.arange(12 * nside**2))
    noise = rng.standard_normal(12 * nside**2)
    base = smooth_map(noise, fwhm=2 * resol(nside), method="ring", device="cpu")
    return base / base.std() + 2 * np.cos(th)


def galactic(nside, deg=15.0):
    _, _, z = vectors(nside).T
    return (np.abs(z) > np.sin(np.radians(deg))).astype(float)


def holes(nside, rng, n=12, radius_px=2.5):
    v = vectors(nside)
    w = np.ones(v.shape[0])
    r = radius_px * resol(nside)
    for c in rng.standard_normal((n, 3)):
        c /= np.linalg.norm(c)
        w[v @ c > np.cos(r)] = 0.0
    return w


def patch(nside, deg=35.0):
    v = vectors(nside)
    c = np.array([0.3, 0.5, 0.81])
    return (v @ (c / np.linalg.norm(c)) > np.cos(np.radians(deg))).astype(float)


CASES = [(k, 32, px) for k in ("galactic", "holes", "patch") for px in (3, 6)]


@pytest.mark.parametrize("kind,nside,fwhm_px", [*CASES, ("galactic", 64, 3)])
def test_masked_ring_vs_brute_force(kind, nside, fwhm_px, rng):
    fwhm = fwhm_px * resol(nside)
    m = sky(nside, rng)
    w = {"galactic": galactic(nside), "holes": holes(nside, rng), "patch": patch(nside)}[kind]
    mw = 0.5
    got = smooth_map(m, fwhm=fwhm, method="ring", device="cpu", mask=w, min_weight=mw)
    num, den = brute(m, w, nside, fwhm)
    ok = den >= mw  # b_0 = 1
    assert np.array_equal(got != UNSEEN, ok)
    masked_dist = frac(got[ok], num[ok] / den[ok])
    plain = smooth_map(m, fwhm=fwhm, method="ring", device="cpu")
    unum, _ = brute(m, np.ones_like(m), nside, fwhm)
    plain_dist = frac(plain, unum)
    assert masked_dist <= 2 * plain_dist, (masked_dist, plain_dist)
    assert masked_dist < 2e-3


def test_partial_sky_input_nest_equals_full_masked_map(rng):
    """(ipix, values) in NEST == the full NEST map with mask; == the RING call reordered."""
    nside = 32
    fwhm = 4 * resol(nside)
    m = sky(nside, rng)
    w = patch(nside)
    ring = smooth_map(m, fwhm=fwhm, method="ring", device="cpu", mask=w)
    n2r = healpix.nest2ring(nside, np.arange(m.size))
    m_nest, w_nest = m[n2r], w[n2r]
    ipix = np.nonzero(w_nest)[0]
    part = smooth_map(
        (ipix, m_nest[ipix]), nside=nside, fwhm=fwhm, method="ring", nest=True, device="cpu"
    )
    full = smooth_map(m_nest, fwhm=fwhm, method="ring", nest=True, device="cpu", mask=w_nest)
    np.testing.assert_array_equal(part, full)
    np.testing.assert_array_equal(full, ring[n2r])
    # reference: the plain normalised sum
    num, den = brute(m, w, nside, fwhm)
    ok = den >= 0.5
    assert frac(ring[ok], num[ok] / den[ok]) < 2e-3


@pytest.mark.parametrize("method", ["ring", "harmonic", "split"])
def test_constant_map_stays_constant(method):
    nside = 32
    fwhm = 5 * resol(nside)
    w = galactic(nside) * holes(nside, np.random.default_rng(3))
    m = np.full(12 * nside**2, 3.25)
    m[w == 0] = 1e6  # masked values must not leak
    got = smooth_map(m, fwhm=fwhm, method=method, device="cpu", mask=w, tol=1e-4)
    ok = got != UNSEEN
    assert 0.5 < ok.mean() < 0.95
    np.testing.assert_allclose(got[ok], 3.25, rtol=0, atol=3.25e-12)


def test_unseen_pixels_count_as_masked_with_mask_true(rng):
    nside = 32
    fwhm = 4 * resol(nside)
    m = sky(nside, rng)
    w = holes(nside, rng)
    bad = m.copy()
    bad[w == 0] = UNSEEN
    bad[np.nonzero(w == 0)[0][::3]] = np.nan
    a = smooth_map(bad, fwhm=fwhm, method="ring", device="cpu", mask=True)
    b = smooth_map(m, fwhm=fwhm, method="ring", device="cpu", mask=w)
    np.testing.assert_array_equal(a, b)


def test_min_weight_sets_unseen():
    nside = 32
    fwhm = 4 * resol(nside)
    w = galactic(nside, 25.0)
    m = np.ones(12 * nside**2)
    lo = smooth_map(m, fwhm=fwhm, method="ring", device="cpu", mask=w, min_weight=0.05)
    hi = smooth_map(m, fwhm=fwhm, method="ring", device="cpu", mask=w, min_weight=0.9)
    assert (lo != UNSEEN).sum() > (hi != UNSEEN).sum() > (w > 0).sum() * 0.8
    _, den = brute(m, w, nside, fwhm)
    assert np.array_equal(hi != UNSEEN, den >= 0.9)


def test_no_mask_is_bit_identical_to_the_engine(rng):
    nside = 32
    fwhm = 3 * resol(nside)
    m = rng.standard_normal((2, 12 * nside**2))
    m[0, 5] = UNSEEN
    theta, values = kernel_profile(fwhm=fwhm)
    got = smooth_map(m, fwhm=fwhm, method="ring", device="cpu")
    for k in range(2):
        f = m[k].copy()
        f[f == UNSEEN] = 0
        ref = _core._smooth_ring(f, nside, theta, values, "cpu")
        ref[m[k] == UNSEEN] = UNSEEN
        np.testing.assert_array_equal(got[k], ref)


def test_engine_many_maps_equal_each_alone(rng):
    nside = 16
    theta, values = kernel_profile(fwhm=4 * resol(nside))
    m = rng.standard_normal((3, 12 * nside**2))
    both = _core._smooth_ring(m, nside, theta, values, "cpu")
    for k in range(3):
        np.testing.assert_array_equal(
            both[k], _core._smooth_ring(m[k], nside, theta, values, "cpu")
        )


def test_argument_errors():
    nside = 8
    m = np.ones(12 * nside**2)
    f = np.radians(10)
    with pytest.raises(ArgumentError, match="mask"):
        smooth_map(m, fwhm=f, mask=np.full(m.size, 2.0), device="cpu")
    with pytest.raises(ShapeError, match="mask"):
        smooth_map(m, fwhm=f, mask=np.ones(5), device="cpu")
    with pytest.raises(ArgumentError, match="min_weight"):
        smooth_map(m, fwhm=f, mask=True, min_weight=1.5, device="cpu")
    with pytest.raises(ArgumentError, match="nside"):
        smooth_map((np.arange(3), np.ones(3)), fwhm=f, device="cpu")
    with pytest.raises(ArgumentError, match="ipix"):
        smooth_map((np.array([0, 10**6]), np.ones(2)), nside=nside, fwhm=f, device="cpu")
    with pytest.raises(ArgumentError, match="b_0"):
        smooth_map(m, beam_window=[0.0, 1.0], mask=True, device="cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["ring", "split"])
def test_gpu_masked_equals_cpu(method, rng):
    nside = 64
    fwhm = 4 * resol(nside)
    m = sky(nside, rng)
    w = galactic(nside) * holes(nside, rng)
    kw = dict(fwhm=fwhm, method=method, mask=w, tol=1e-4)
    cpu = smooth_map(m, device="cpu", **kw)
    gpu = smooth_map(m, device="cuda", **kw)
    np.testing.assert_array_equal(cpu == UNSEEN, gpu == UNSEEN)
    ok = cpu != UNSEEN
    scale = np.abs(cpu[ok]).max()
    assert np.abs(gpu[ok] - cpu[ok]).max() <= 1e-12 * scale


@pytest.mark.gpu
def test_gpu_engine_many_maps_equal_each_alone(rng):
    nside = 64
    theta, values = kernel_profile(fwhm=4 * resol(nside))
    m = rng.standard_normal((2, 12 * nside**2))
    both = _core._smooth_ring(m, nside, theta, values, "cuda")
    for k in range(2):
        one = _core._smooth_ring(m[k], nside, theta, values, "cuda")
        np.testing.assert_array_equal(both[k], one)
    assert skyconv  # the package imported with its GPU engine
