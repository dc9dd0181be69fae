"""Brute-force gridding reference (plain float64 NumPy) and test fields for the grid tests."""

from __future__ import annotations

import numpy as np

KERNELS = {
    "gauss1d": (0.2,),
    "gauss2d": (0.25, 0.12, 0.6),
    "tapered_sinc": (0.2, 2.52, 1.55),
    "gaussbessel": (0.2, 2.52, 1.55),
}


def kernel_values(name, params, d, bearing):
    """Cygrid's kernels; d in degrees, bearing in radians."""
    if name == "gauss1d":
        return np.exp(-(d**2) / (2 * params[0] ** 2))
    if name == "gauss2d":
        a, b, pa = params
        ell = a**2 * np.sin(bearing - pa) ** 2 + b**2 * np.cos(bearing - pa) ** 2
        return np.exp(-((d / a / b) ** 2) / 2 * ell)
    sigma, a, b = params
    if name == "tapered_sinc":
        x = np.pi * d / sigma
        return np.sinc(x / b / np.pi) * np.exp(-((x / a) ** 2))
    from scipy.special import j1

    x = np.pi * d / sigma / b
    with np.errstate(invalid="ignore", divide="ignore"):
        bessel = np.where(x == 0, 0.5, j1(x) / x)
    return bessel * np.exp(-(d**2) / (2 * (sigma * a) ** 2))


def brute(
    lons, lats, data, tlons, tlats, kernel="gauss1d", params=(0.2,), radius=None, weights=None
):
    """(cube, weights, unweighted), each (nchan, ntargets), by summing over every pair."""
    if radius is None:
        radius = 3 * max(params[:2]) if kernel == "gauss2d" else 3 * params[0]
    data = np.asarray(data, np.float64).reshape(len(lons), -1)
    if weights is None:
        w = np.ones_like(data)
    else:
        w = np.broadcast_to(np.asarray(weights, np.float64).reshape(len(lons), -1), data.shape)
    good = np.isfinite(lons) & np.isfinite(lats)
    good_v = good[:, None] & ~np.isnan(data) & ~np.isnan(w)
    v = np.where(good_v, data, 0.0)
    w = np.where(good_v, w, 0.0)
    lon2 = np.radians(np.where(good, lons, 0))[None]
    lat2 = np.radians(np.where(good, lats, 0))[None]
    lon1, lat1 = np.radians(tlons)[:, None], np.radians(tlats)[:, None]
    hav = (
        np.sin((lat1 - lat2) / 2) ** 2
        + np.cos(lat1) * np.cos(lat2) * np.sin((lon1 - lon2) / 2) ** 2
    )
    d = np.degrees(2 * np.arcsin(np.sqrt(np.clip(hav, 0, 1))))
    bearing = np.arctan2(
        np.cos(lat2) * np.sin(lon2 - lon1),
        np.cos(lat1) * np.sin(lat2) - np.sin(lat1) * np.cos(lat2) * np.cos(lon2 - lon1),
    )
    k = np.where(d < radius, kernel_values(kernel, params, d, bearing), 0.0)
    k = np.where(np.isfinite(tlons)[:, None], k, 0.0)
    usum = (k @ (w * v)).T
    wsum = (k @ w).T
    with np.errstate(invalid="ignore", divide="ignore"):
        cube = np.where(wsum != 0, usum / wsum, np.nan)
    return cube, wsum, usum


def field(rng, n, lon0=12.0, lat0=0.0, size=4.0):
    lat = lat0 + rng.uniform(-size / 2, size / 2, n)
    lon = lon0 + rng.uniform(-size / 2, size / 2, n) / max(np.cos(np.radians(lat0)), 1e-3)
    return lon, lat


def header(lon0=12.0, lat0=0.0, nx=30, ny=24, cdelt=0.1, proj="SIN"):
    return {
        "NAXIS": 2,
        "NAXIS1": nx,
        "NAXIS2": ny,
        "CTYPE1": f"RA---{proj}",
        "CTYPE2": f"DEC--{proj}",
        "CRVAL1": lon0,
        "CRVAL2": lat0,
        "CRPIX1": nx / 2 + 0.5,
        "CRPIX2": ny / 2 + 0.5,
        "CDELT1": -cdelt,
        "CDELT2": cdelt,
        "CUNIT1": "deg",
        "CUNIT2": "deg",
    }


def wcs_centres(hdr):
    from astropy.wcs import WCS

    w = WCS(hdr).celestial
    yy, xx = np.indices((hdr["NAXIS2"], hdr["NAXIS1"]))
    lon, lat = w.wcs_pix2world(xx.ravel(), yy.ravel(), 0)
    return lon, lat
