"""Plain NumPy reference of SoFiA-2 2.5.1's Smooth + Clip, written from the rules stated in
../shared/REFERENCE.md ("SoFiA-2 2.5.1's exact rules") and skyconv's documentation of them,
not from SoFiA-2's code. Single-precision steps use float32 arrays, one operation at a time
(NumPy rounds each elementwise operation to the array's type and never fuses them).
"""

from __future__ import annotations

import math

import numpy as np

FWHM_CONST = 2.0 * math.sqrt(2.0 * math.log(2.0))
MAD_CONST = 1.482602218505602
SAMPLE_SIZE = 999983


def boxcar_rule(sigma):
    """(radius, passes): n boxcars of width 2r+1 have variance n((2r+1)^2 - 1)/12 = sigma^2,
    so r(n) = sqrt(3 sigma^2 / n + 1/4) - 1/2; the n in 3..6 whose r(n) is nearest a whole
    number (first on ties)."""
    if sigma <= 0:
        return 0, 0
    best = None
    for n in range(3, 7):
        r = math.sqrt(3.0 * sigma * sigma / n + 0.25) - 0.5
        off = abs(r - math.floor(r + 0.5))
        if best is None or off < best[2]:
            best = (int(math.floor(r + 0.5)), n, off)
    return best[0], best[1]


def cadence(shape):
    size = int(np.prod(shape))
    c = size // SAMPLE_SIZE
    if c < 2:
        return 1
    if c % shape[-1] == 0:
        c -= 1
    return c


def boxcar_axis(a, r, axis):
    """One running-mean boxcar of radius r along `axis`, in a's dtype, from the end of each
    line backwards, zero padding, NaN read as 0."""
    dt = a.dtype.type
    x = np.moveaxis(a, axis, -1)
    n = x.shape[-1]
    x = np.where(np.isnan(x), dt(0), x)
    pad = np.zeros(x.shape[:-1] + (n + 2 * r,), a.dtype)
    pad[..., r : r + n] = x
    w = 2 * r + 1
    inv = dt(1.0 / w)
    out = np.empty_like(x)
    acc = np.zeros(x.shape[:-1], a.dtype)
    for j in range(w - 1, -1, -1):
        acc = acc + pad[..., n - 1 + j]
    m = acc * inv
    out[..., n - 1] = m
    for i in range(n - 2, -1, -1):
        m = m + (pad[..., i] - pad[..., i + w]) * inv
        out[..., i] = m
    return np.moveaxis(out, -1, axis)


def _in_range(v, flux_range):
    if flux_range == "negative":
        return v < 0
    if flux_range == "positive":
        return v > 0
    return ~np.isnan(v)


def noise(cube, statistic, flux_range):
    """SoFiA-2's noise of `cube` (any NaN), with the cube's whole-array extremes for gauss."""
    flat = cube.ravel()
    size = flat.size
    c = cadence(cube.shape)
    if statistic == "mad":
        idx = np.arange(size - c, 0, -c)  # never element 0
        v = flat[idx]
        v = v[_in_range(v, flux_range)]
        if flux_range != "full":
            v = v[: size // (2 * c)]  # the walk's first ones: those nearest the end
        a = np.sort(np.abs(v))
        k = a.size
        if k % 2:
            med = a[k // 2]
        else:
            med = (a[k // 2 - 1] + a[k // 2]) * a.dtype.type(0.5)
        return MAD_CONST * float(med)
    idx = np.arange(size - c, -1, -c)
    v = flat[idx]
    v = v[_in_range(v, flux_range)]
    if statistic == "std":
        d = v.astype(np.float64)
        return math.sqrt(float(np.sum(d * d)) / d.size)
    finite = cube[np.isfinite(cube)]
    limit = max(abs(float(finite.min())), abs(float(finite.max())))
    return gauss_fit(v.astype(np.float64), limit, cube.dtype.type)


def _hist(v, limit):
    nb = 101
    width = 2.0 * limit / nb
    v = v[(v >= -limit) & (v <= limit)]
    b = np.minimum(np.floor((v + limit) / width).astype(np.int64), nb - 1)
    return np.bincount(b, minlength=nb)


def gauss_fit(v, limit, dt):
    nb = 101
    h = _hist(v, limit)
    centres = -limit + (np.arange(nb) + 0.5) * 2.0 * limit / nb
    s2 = 0.0
    for i in range(nb):
        s2 += float(h[i]) * float(centres[i]) * float(centres[i])
    m = math.sqrt(s2 / float(h.sum()))
    limit = 2.5 * m
    h = _hist(v, limit)
    cnt = sx = sy = sxx = sxy = dt(0)
    for i in range(1, nb - 1):
        if h[i] == 0:
            continue
        xc = dt(-limit + (i + 0.5) * 2.0 * limit / nb)
        x = dt(xc * xc)
        y = dt(math.log(h[i]))
        cnt = dt(cnt + dt(1))
        sx = dt(sx + x)
        sy = dt(sy + y)
        sxx = dt(sxx + dt(x * x))
        sxy = dt(sxy + dt(x * y))
    num = dt(dt(cnt * sxy) - dt(sx * sy))
    den = dt(dt(cnt * sxx) - dt(sx * sx))
    b = dt(num / den)
    return math.sqrt(-1.0 / (2.0 * float(b)))


def scfind(
    cube,
    kernels_xy=(0, 3, 6),
    kernels_z=(0, 3, 7, 15),
    threshold=5.0,
    replacement=2.0,
    statistic="mad",
    flux_range="negative",
    mask=None,
):
    """(mask uint8, rms0, [rms per kernel]) as SoFiA-2 2.5.1 computes them."""
    cube = np.asarray(cube)
    dt = cube.dtype.type
    nan = np.isnan(cube)
    rms0 = noise(cube, statistic, flux_range)
    m = np.zeros(cube.shape, bool) if mask is None else np.asarray(mask, bool).copy()
    zs = sorted({int(z) + 1 if int(z) % 2 == 0 and z > 0 else int(z) for z in kernels_z})
    out = []
    for kxy in sorted(set(float(k) for k in kernels_xy)):
        for kz in zs:
            if kxy == 0 and kz == 0:
                w, rms = cube, rms0
            else:
                w = cube.copy()
                if replacement >= 0:
                    w[m] = np.copysign(dt(replacement * rms0), w[m])
                w[nan] = 0
                r, n = boxcar_rule(kxy / FWHM_CONST)
                if r > 0:
                    for _ in range(n):
                        w = boxcar_axis(w, r, 2)
                    for _ in range(n):
                        w = boxcar_axis(w, r, 1)
                if kz > 0:
                    w = boxcar_axis(w, kz // 2, 0)
                w[nan] = np.nan
                rms = noise(w, statistic, flux_range)
            with np.errstate(invalid="ignore"):
                m |= np.abs(w.astype(np.float64)) > threshold * rms
            out.append(rms)
    return m.astype(np.uint8), rms0, out
