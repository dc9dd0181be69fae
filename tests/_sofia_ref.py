"""Straightforward NumPy/SciPy reference implementations of Smooth-and-Clip, used by
tests/cube/test_scfind.py and bench/cases/cube.py (one copy only).

``sofia1_scfind`` follows SoFiA 1.3.2's ``SCfinder_mem`` step by step (scipy.ndimage filters in
the cube's dtype, SoFiA 1's noise estimators including its histogram Gaussian fits).
``sofia2_scfind`` follows SoFiA 2's rules in float64 (sorted kernels, copysign replacement,
strict threshold, noise on every size//999983-th voxel) with true Gaussians, or SoFiA 2's
repeated boxcars when ``spatial="boxcar_approx"``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage, optimize

FWHM = 2.0 * math.sqrt(2.0 * math.log(2.0))
MAD_TO_STD = 1.482602218505602


def _gauss(x, a, s):
    return a * np.exp(-(x**2) / (2.0 * s**2))


# ------------------------------------------------------------------ SoFiA 1.3.2


def _gauss_fit(finite, lo, width, n_edges):
    """SoFiA 1's "gauss" fit to the histogram over the first ``n_edges`` of its arange edges."""
    edges = np.arange(lo, lo + 102 * width, width)[:n_edges]
    x = (edges[:-1] + edges[1:]) / 2.0
    h = np.histogram(finite, bins=edges)[0]
    mom2 = np.sqrt(np.sum(x * x * h) / np.sum(h))
    return abs(optimize.curve_fit(_gauss, x, h, p0=[h.max(), mom2])[0][1])


def gauss_edge_cliff(cube, flux_range="all"):
    """SoFiA 1's "gauss" histogram takes ``np.arange(lo, hi, (hi - lo) / 100)`` as its edges,
    100 or 101 of them as (hi - lo) / width rounds, so the count can turn on the last bits of
    the cube's extremes: two smoothings 1e-16 apart then fit σ up to ~0.3 % apart. Returns
    [σ with 100 edges, σ with 101] where moving the extreme by up to 8 ulp changes the count,
    else None."""
    lo0, hi0 = float(np.nanmin(cube)), float(np.nanmax(cube))

    def bounds(k):
        lo, hi = lo0 + k * np.spacing(lo0), hi0 + k * np.spacing(hi0)
        if flux_range == "negative":
            return lo, 0.0
        if flux_range == "positive":
            return 0.0, hi
        m = min(abs(lo), abs(hi))
        return -m, m

    counts = {len(np.arange(lo, hi, (hi - lo) / 100.0)) for lo, hi in map(bounds, range(-8, 9))}
    if len(counts) == 1:
        return None
    lo, hi = bounds(0)
    finite = cube[~np.isnan(cube)]
    return [_gauss_fit(finite, lo, (hi - lo) / 100.0, n) for n in (100, 101)]


def sofia1_rms(cube, rms_mode="negative", flux_range="all", sample=1):
    """SoFiA 1's GetRMS with zoom 1 and no second pass."""
    c = cube[np.newaxis] if cube.ndim == 2 else cube
    sub = c[::sample, ::sample, ::sample]
    with np.errstate(invalid="ignore"):
        if flux_range == "negative":
            half = sub[sub < 0]
            if half.size == 0:
                raise ValueError("no negative fluxes")
        elif flux_range == "positive":
            half = sub[sub > 0]
            if half.size == 0:
                raise ValueError("no positive fluxes")
    finite = sub[~np.isnan(sub)]
    if rms_mode == "negative":
        nbins = max(100, math.ceil(float(c.size) / 1e5))
        lo = np.nanmin(c)
        if not lo < 0:
            raise ValueError("no negative fluxes")

        def hist(nb):
            edges = np.arange(lo, abs(lo) / nb - 1e-12, abs(lo) / nb)
            return (edges[:-1] + edges[1:]) / 2, np.histogram(finite, bins=edges)[0]

        x, h = hist(nbins)
        k = 0
        while h[-k - 1 :].sum() < 0.05 * h.sum():
            k += 1
        if k:
            x, h = hist(nbins / (k + 1))
        p0 = [h.max(), -x[h < h.max() / 2.0].max() * 2.0 / 2.355]
        return abs(optimize.curve_fit(_gauss, x, h, p0=p0)[0][1])
    if rms_mode == "gauss":
        lo, hi = float(np.nanmin(c)), float(np.nanmax(c))
        if flux_range == "negative":
            hi = 0.0
        elif flux_range == "positive":
            lo = 0.0
        else:
            m = min(abs(lo), abs(hi))
            lo, hi = -m, m
        width = (hi - lo) / 100.0
        return _gauss_fit(finite, lo, width, len(np.arange(lo, hi, width)))
    if rms_mode == "mad":
        if flux_range == "all":
            return 1.4826 * np.nanmedian(np.abs(sub))
        return 1.4826 * np.median(np.abs(half))
    if rms_mode == "std":
        y = finite if flux_range == "all" else half
        return np.sqrt(np.sum(y * y) / y.size)
    raise ValueError(rms_mode)


def sofia1_scfind(
    cube,
    mask,
    kernels,
    threshold=3.5,
    maskScaleXY=2.0,
    edgeMode="constant",
    rmsMode="negative",
    fluxRange="all",
    kernelUnit="pixel",
    header=None,
    keep=False,
):
    """SoFiA 1.3.2's SCfinder_mem on ``cube`` (any float dtype); ORs into ``mask``.

    Returns (rms0, [rms per kernel], kept): kept (with ``keep``) holds for each kernel the
    smoothed cube, its clip level and the lowest and highest level that the cube's last bits
    could give (they differ only on ``gauss_edge_cliff``)."""
    c = cube[np.newaxis] if cube.ndim == 2 else cube
    m = mask.reshape(c.shape)
    nan = np.isnan(c)
    stride = max(1, int((float(cube.size) / 1e6) ** (1.0 / min(3, cube.ndim))))
    rms = sofia1_rms(c, rmsMode, fluxRange, stride)
    noise, kept = [], []
    for kx, ky, kz, kt in kernels:
        if kernelUnit in ("world", "w"):
            kx = abs(float(kx) / header["CDELT1"])
            ky = abs(float(ky) / header["CDELT2"])
            kz = abs(float(kz) / header["CDELT3"])
        if kt == "b":
            kz = math.ceil(kz)
        s = c.copy()
        s[nan] = 0.0
        s[(s > 0) & (m > 0)] = maskScaleXY * rms
        s[(s < 0) & (m > 0)] = -maskScaleXY * rms
        if kx + ky:
            s = ndimage.gaussian_filter(s, [0, ky / FWHM, kx / FWHM], mode=edgeMode)
        if kz:
            if kt == "b":
                s = ndimage.uniform_filter1d(s, kz, axis=0, mode=edgeMode)
            elif kt == "g":
                s = ndimage.gaussian_filter1d(s, kz / FWHM, axis=0, mode=edgeMode)
        s[nan] = np.nan
        r = sofia1_rms(s, rmsMode, fluxRange, stride)
        noise.append(float(r))
        with np.errstate(invalid="ignore"):
            m |= (np.abs(s) >= threshold * r).astype(m.dtype)
        if keep:
            both = gauss_edge_cliff(s, fluxRange) if rmsMode == "gauss" else None
            levels = [threshold * x for x in both] if both else [threshold * r]
            kept.append((s, threshold * r, min(levels), max(levels)))
    return float(rms), noise, kept


# ------------------------------------------------------------------ SoFiA 2 rules


def sofia2_cadence(shape):
    size = int(np.prod(shape))
    c = size // 999983
    if c < 2:
        return 1
    return c - 1 if c % shape[-1] == 0 else c


def boxcar_approx(sigma):
    best = None
    for n in range(3, 7):
        w = math.sqrt(12.0 * sigma * sigma / n + 1.0)
        r = max(0, int(np.round((w - 1.0) / 2.0)))
        err = abs(math.sqrt(n * ((2 * r + 1) ** 2 - 1) / 12.0) - sigma)
        if best is None or err < best[2]:
            best = (r, n, err)
    return best[0], best[1]


def sofia2_noise(cube, statistic, flux_range, cadence):
    x = cube.ravel()[::cadence].astype(np.float64)
    x = x[np.isfinite(x)]
    if flux_range == "negative":
        x = x[x < 0]
    elif flux_range == "positive":
        x = x[x > 0]
    if statistic == "std":
        return float(np.sqrt(np.mean(x * x)))
    mad = float(np.median(np.abs(x)))
    if statistic == "mad":
        return MAD_TO_STD * mad
    s0 = MAD_TO_STD * mad
    lo, nb = {"full": (-5 * s0, 100), "negative": (-5 * s0, 50), "positive": (0.0, 50)}[flux_range]
    edges = lo + np.arange(nb + 1) * (0.1 * s0)
    h = np.histogram(x, bins=edges)[0].astype(np.float64)
    ctr = (edges[:-1] + edges[1:]) / 2
    p = optimize.curve_fit(_gauss, ctr, h, p0=[h.max(), s0], ftol=1e-15, xtol=1e-15)[0]
    return abs(float(p[1]))  # converged: skyconv fits to convergence too


def sofia2_scfind(
    cube,
    kernels_xy=(0, 3, 6),
    kernels_z=(0, 3, 7, 15),
    threshold=5.0,
    replacement=2.0,
    statistic="mad",
    flux_range="negative",
    spectral="boxcar",
    spatial="gaussian",
    edge_mode="constant",
    mask=None,
    keep=False,
):
    """SoFiA 2's S+C rules in float64. Returns (mask uint8, rms0, [rms], [smoothed if keep])."""
    c = np.asarray(cube, dtype=np.float64)
    c = c[np.newaxis] if c.ndim == 2 else c
    nan = np.isnan(c)
    m = np.zeros(c.shape, bool) if mask is None else (np.asarray(mask) != 0).reshape(c.shape)
    cad = sofia2_cadence(c.shape)
    rms0 = sofia2_noise(c, statistic, flux_range, cad)
    zs = sorted(set(kernels_z))
    if spectral == "boxcar":
        zs = sorted({z + 1 if z % 2 == 0 and z > 0 else z for z in zs})
    if np.asarray(cube).ndim == 2:
        zs = [0]
    noise, kept = [], []
    for kxy in sorted(set(kernels_xy)):
        for kz in zs:
            if kxy == 0 and kz == 0:
                s, r = c, rms0
            else:
                s = c.copy()
                if replacement >= 0:
                    s[m] = np.copysign(replacement * rms0, s[m])
                s[nan] = 0.0
                if kxy > 0:
                    sig = kxy / FWHM
                    for ax in (1, 2):
                        if spatial == "gaussian":
                            s = ndimage.gaussian_filter1d(s, sig, axis=ax, mode=edge_mode)
                        else:
                            rad, n = boxcar_approx(sig)
                            for _ in range(n if rad else 0):
                                s = ndimage.uniform_filter1d(
                                    s, 2 * rad + 1, axis=ax, mode=edge_mode
                                )
                if kz > 0:
                    if spectral == "boxcar":
                        s = ndimage.uniform_filter1d(s, kz, axis=0, mode=edge_mode)
                    else:
                        s = ndimage.gaussian_filter1d(s, kz / FWHM, axis=0, mode=edge_mode)
                s[nan] = np.nan
                r = sofia2_noise(s, statistic, flux_range, cad)
            noise.append(r)
            with np.errstate(invalid="ignore"):
                m |= np.abs(s) > threshold * r
            if keep:
                kept.append((s, threshold * r))
    return m.astype(np.uint8).reshape(np.shape(cube)), rms0, noise, kept
