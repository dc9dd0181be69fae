"""How far the ring engine's pixel sums are from the true convolution, for a radial profile.

The ring engine computes s(q) = Σ_p K(γ_pq) m(p) · 4π/npix, a quadrature of ∫ K(γ) m dΩ on
the HEALPix pixel centres. Inside the equatorial belt the centres form a regular lattice in
(z, φ), where this quadrature is exact up to aliasing; at the belt/cap boundary (|z| = 2/3), on
the polar face edges and around the poles the lattice has kinks and the error is algebraic. A
profile that reproduces a window to high ℓ can therefore be quite wrong on the pixel grid, so
the split fit measures this error instead of assuming it away.

The measurement: at sample centres q spread over the northern hemisphere (southern rings mirror
them), with the weight of the sky area each one stands for, and for plane waves
f(p) = cos(k·u + φ₀) in the azimuthal-equidistant coordinates u of p about q, the error is
Σ_p K(γ_pq) f(p) ΔΩ − 2π cos φ₀ ∫ K(θ) J₀(kθ) sin θ dθ (the exact integral, since f averages
to J₀ on every circle about q). A wave of wavenumber k stands for the multipoles ℓ + ½ ≈ k; the
wave's power is the map's, (2ℓ+1) C_ℓ / 4π summed over a band of ℓ. The error is linear in the
profile's coefficients, so the result is a matrix D with c·D·c = error variance.
"""

from __future__ import annotations

import numpy as np

from .. import healpix
from ._fit import Basis

TWO_PI = 2.0 * np.pi
#: Plane-wave directions in [0, π) (the error depends on the angle to the pixel lattice).
N_DIRECTIONS = 4
#: Bands of ℓ, each one wave. (8 bands x 4 directions gave the same error to 1% as 32 x 6 on
#: the cases tried, in a tenth of the time.)
N_BANDS = 12
#: Strata of the northern hemisphere: (rings, centres per ring) for polar cap around the pole,
#: cap interior, belt/cap boundary, belt interior (the lattice is regular in the belt, so few).
STRATA = ((8, 4), (6, 6), (12, 4), (6, 2))
_GOLDEN = 0.6180339887498949


def neighbours(info: dict, ring: int, j: int, theta_cut: float):
    """Angular distances γ and bearings (radians) of the pixel centres within θcut of the
    centre of pixel ``j`` of ring ``ring`` (0-based, north to south)."""
    th, z, st = info["theta"], info["z"], info["sin_theta"]
    nphi, phi0 = info["nphi"], info["phi0"]
    tq, zq, sq = th[ring], z[ring], st[ring]
    pq = phi0[ring] + j * TWO_PI / nphi[ring]
    lo = np.searchsorted(th, tq - theta_cut - 1e-12)
    hi = np.searchsorted(th, tq + theta_cut + 1e-12, side="right")
    ccut = np.cos(theta_cut)
    gam, bear = [], []
    for r in range(lo, hi):
        n = int(nphi[r])
        step = TWO_PI / n
        c = (ccut - zq * z[r]) / (sq * st[r])
        if c > 1.0:
            continue
        if c <= -1.0:
            jj = np.arange(n)
        else:
            half = np.arccos(c)
            j0 = int(np.ceil((pq - half - phi0[r]) / step))
            j1 = int(np.floor((pq + half - phi0[r]) / step))
            jj = np.arange(n) if j1 - j0 + 1 >= n else np.arange(j0, j1 + 1)
        dphi = phi0[r] + jj * step - pq
        # sin²(γ/2) = sin²(Δθ/2) + sin θq sin θr sin²(Δφ/2): well conditioned at small γ.
        s2 = np.sin(0.5 * (th[r] - tq)) ** 2 + sq * st[r] * np.sin(0.5 * dphi) ** 2
        g = 2.0 * np.arcsin(np.sqrt(np.minimum(s2, 1.0)))
        b = np.arctan2(np.sin(dphi) * st[r], sq * z[r] - zq * st[r] * np.cos(dphi))
        keep = g <= theta_cut
        gam.append(g[keep])
        bear.append(b[keep])
    return np.concatenate(gam), np.concatenate(bear)


def sample_centres(nside: int, theta_cut: float, info: dict) -> list[tuple[int, int, float]]:
    """(ring, pixel in ring, weight) for the sample centres; the weights are the fractions of
    the hemisphere's area each stands for (they sum to 1). Deterministic."""
    th, nphi = info["theta"], info["nphi"]
    north = 2 * nside  # rings 0..2nside-1: the northern hemisphere and the equator
    boundary = np.arccos(2.0 / 3.0)
    margin = theta_cut + 2.0 * np.sqrt(4 * np.pi / (12 * nside**2))
    edges = (0.0, margin, boundary - margin, boundary + margin, np.pi / 2 + 1e-9)
    out = []
    for s, (nring, per_ring) in enumerate(STRATA):
        a, b = edges[s], edges[s + 1]
        rings = np.nonzero((th[:north] >= a) & (th[:north] < b))[0]
        if b <= a or rings.size == 0:
            continue
        area = np.cos(a) - np.cos(min(b, np.pi / 2))
        pick = np.unique(np.linspace(0, rings.size - 1, nring).round().astype(int))
        centres = [
            (int(r), int(((i + _GOLDEN * (k + 1)) % 1.0) * nphi[r]))
            for k, r in enumerate(rings[pick])
            for i in range(per_ring)
        ]
        out += [(r, j, area / len(centres)) for r, j in centres]
    return out


def bands(weights: np.ndarray, n: int = N_BANDS) -> tuple[np.ndarray, np.ndarray]:
    """Wavenumbers (the power-weighted mean ℓ + ½ of each band) and band powers."""
    lmax = weights.size - 1
    edges = np.unique(np.linspace(0, lmax + 1, min(n, lmax + 1) + 1).round().astype(int))
    ell = np.arange(lmax + 1) + 0.5
    ks, ws = [], []
    for a, b in zip(edges[:-1], edges[1:]):
        w = weights[a:b]
        tot = float(w.sum())
        if tot > 0:
            ks.append(float(np.sum(w * ell[a:b]) / tot))
            ws.append(tot)
    return np.array(ks), np.array(ws)


def _exact(basis: Basis, ks: np.ndarray) -> np.ndarray:
    """2π ∫₀^θcut φ_j(θ) J₀(kθ) sin θ dθ, shape (n, len(ks)); J₀(x) = (1/π)∫₀^π cos(x cos t)dt by
    the midpoint rule (exponentially accurate for this periodic integrand), in chunks of nodes
    to bound memory."""
    kmax = float(ks.max()) if ks.size else 0.0
    th, w = basis.nodes(kmax)
    nt = int(kmax * basis.theta_cut / 2) + 32
    cos_t = np.cos((np.arange(nt) + 0.5) * np.pi / nt)
    j0 = np.empty((th.size, ks.size))
    step = max(1, 2**22 // (ks.size * nt))
    for a in range(0, th.size, step):
        x = np.multiply.outer(th[a : a + step], ks)
        j0[a : a + step] = np.cos(np.multiply.outer(x, cos_t)).mean(axis=-1)
    return TWO_PI * (basis.values(th) * (w * np.sin(th))[:, None]).T @ j0


def disc_matrix(nside: int, basis: Basis, weights: np.ndarray) -> np.ndarray:
    """The n×n matrix D: c·D·c is the variance (map units², as Σ(2ℓ+1)C_ℓ/4π) of the ring
    engine's pixel-grid error for the profile Σ c_j φ_j on a map whose variance per ℓ is
    ``weights`` = (2ℓ+1) C_ℓ / 4π."""
    ks, wk = bands(np.asarray(weights, dtype=np.float64))
    n = basis.n
    out = np.zeros((n, n))
    if ks.size == 0:
        return out
    info = healpix.ring_info(nside)
    area = 4 * np.pi / (12 * nside**2)
    exact = _exact(basis, ks)[:, None, :]  # (n, 1, nk)
    psi = np.arange(N_DIRECTIONS) * np.pi / N_DIRECTIONS
    for ring, j, wq in sample_centres(nside, basis.theta_cut, info):
        g, b = neighbours(info, ring, j, basis.theta_cut)
        vals = basis.values(g) * area  # (npix, n)
        proj = g[:, None] * np.cos(b[:, None] - psi[None, :])  # (npix, ndir)
        waves = np.exp(1j * proj[:, :, None] * ks[None, None, :])  # (npix, ndir, nk)
        # Real and imaginary parts side by side: one real matrix product for both.
        sums = (vals.T @ waves.reshape(g.size, -1).view(np.float64)).reshape(n, -1, 2)
        scale = np.sqrt(wq * wk / N_DIRECTIONS)
        # A unit-variance wave √2 cos(k·u + φ₀) has error variance e_cos² + e_sin² over φ₀.
        e_cos = (sums[..., 0].reshape(n, N_DIRECTIONS, -1) - exact) * scale
        e_sin = sums[..., 1].reshape(n, N_DIRECTIONS, -1) * scale
        for e in (e_cos.reshape(n, -1), e_sin.reshape(n, -1)):
            out += e @ e.T
    return out
