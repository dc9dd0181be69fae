"""The real-space basis of the split kernel and its weighted least-squares fit (NumPy, float64).

The real-space part is a radial profile on [0, θcut] (θ in radians, values in sr⁻¹)

    K̂_θ(θ) = Σ_j c_j (1 − t)^p T_j(2t − 1),   t = (θ/θcut)²,

with T_j the Chebyshev polynomials. Why this basis: it is even in θ, so the profile is smooth at
its centre on the sphere; the factor (1 − t)^p makes it join zero at θcut with p − 1 continuous
derivatives, so the pixel sums of the ring engine see no edge; Chebyshev polynomials in t keep
the design matrix well conditioned; and a few tens of terms describe any profile the fit needs.

Its harmonic coefficients P[K̂_θ]_ℓ = 2π ∫₀^θcut K̂_θ(θ) P_ℓ(cos θ) sin θ dθ are linear in c: the
design matrix comes from Gauss–Legendre quadrature in θ (exact to rounding once the nodes
outnumber the oscillations of P_ℓ on [0, θcut]) and the three-term recurrence for P_ℓ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TWO_PI = 2.0 * np.pi

#: The taper exponent p: the profile and its first two derivatives vanish at θcut.
TAPER = 3

#: Singular values below this fraction of the largest are dropped (Sutter et al. 2012).
RCOND = 1e-6

#: Factor on the measured pixel-grid error: the measurement is an average over map
#: realisations, and one map's few dominant low-ℓ modes put the realised error up to ~1.4x
#: above it (seen on CMB-like maps at nside 512-1024).
DISC_SAFETY = 1.5

#: Relative error of HEALPix quadrature (map2alm with iter=0) for content near lmax ≈ 2 nside,
#: measured 3e-5 .. 1e-4 (of the aliased part's amplitude); see ``Problem``'s ``alias``.
QUADRATURE_ERROR = 1e-4


def legendre_table(lmax: int, x: np.ndarray) -> np.ndarray:
    """P_ℓ(x) for ℓ = 0..lmax at the points ``x`` (|x| ≤ 1), shape (lmax + 1, len(x)).

    The forward three-term recurrence (ℓ+1) P_ℓ₊₁ = (2ℓ+1) x P_ℓ − ℓ P_ℓ₋₁: for |x| ≤ 1 both of
    its solutions stay bounded, so rounding grows at most linearly in ℓ; |P_ℓ| ≤ 1 never
    under- or overflows. Vectorised over the points.
    """
    x = np.asarray(x, dtype=np.float64)
    out = np.empty((lmax + 1, x.size))
    out[0] = 1.0
    if lmax >= 1:
        out[1] = x
    for ell in range(1, lmax):
        out[ell + 1] = ((2 * ell + 1) * x * out[ell] - ell * out[ell - 1]) / (ell + 1)
    return out


def gauss_theta(theta_cut: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights for ∫₀^θcut dθ."""
    x, w = np.polynomial.legendre.leggauss(n)
    return 0.5 * theta_cut * (x + 1.0), 0.5 * theta_cut * w


@dataclass(frozen=True)
class Basis:
    """n profile functions on [0, theta_cut] (radians): see the module docstring."""

    theta_cut: float
    n: int
    p: int = TAPER

    def values(self, theta) -> np.ndarray:
        """Basis functions at ``theta`` (radians), shape (len(theta), n); 0 beyond θcut."""
        th = np.asarray(theta, dtype=np.float64).ravel()
        t = np.minimum((th / self.theta_cut) ** 2, 1.0)
        v = np.polynomial.chebyshev.chebvander(2.0 * t - 1.0, self.n - 1)
        v *= ((1.0 - t) ** self.p)[:, None]
        v[th > self.theta_cut] = 0.0
        return v

    def nodes(self, kmax: float) -> tuple[np.ndarray, np.ndarray]:
        """Quadrature on [0, θcut] exact enough for basis × (P_ℓ or J₀(kθ)) up to ℓ, k ≤ kmax:
        Gauss–Legendre with more nodes than the oscillations plus the polynomial degree."""
        return gauss_theta(self.theta_cut, int(kmax * self.theta_cut) + 2 * (self.n + self.p) + 48)

    def transform(self, lmax: int) -> np.ndarray:
        """Design matrix A[ℓ, j] = P[φ_j]_ℓ for ℓ = 0..lmax, shape (lmax + 1, n)."""
        return _transform(self, lmax)


def _transform(basis, lmax: int) -> np.ndarray:
    th, w = basis.nodes(lmax)
    table = legendre_table(lmax, np.cos(th))
    return TWO_PI * (table * (w * np.sin(th))) @ basis.values(th)


def basis_size(theta_cut: float, lmax: int) -> int:
    """How many basis functions a profile of support θcut needs to follow a window to lmax.

    P_ℓ(cos θ) makes about ℓθcut/π oscillations on [0, θcut]; a polynomial in θ² follows one
    oscillation per term, and a dozen more describe the profile's shape. (Tried: 12 + ℓθcut/4
    loses up to 30% in ℓcut in some cases, more than ℓθcut/3 gains nothing.)
    """
    return int(np.clip(12 + lmax * theta_cut / 3, 12, 48))


@dataclass(frozen=True)
class Fit:
    """One least-squares solution: coefficients and its error terms (fractional RMS)."""

    lcut: int
    coef: np.ndarray
    fit_error: float  # sqrt(Σ w (K̃ − K)² / Σ w K²) over ℓcut < ℓ ≤ lmax, before α
    disc_error: float  # pixel-grid discretisation of the ring part (see _disc)
    alias_error: float  # iterated harmonic part: aliasing of the map above ℓcut
    alpha: float

    @property
    def error(self) -> float:
        """Predicted fractional RMS error: sqrt((α σ_fit)² + (1.5 σ_disc)² + σ_alias²)."""
        terms = (self.alpha * self.fit_error, DISC_SAFETY * self.disc_error, self.alias_error)
        return float(np.sqrt(sum(t * t for t in terms)))


class Problem:
    """The split of one window for one θcut: fit rows and discretisation rows.

    ``window``: K_ℓ, ℓ = 0..lmax; ``weights``: (2ℓ+1) C_ℓ / 4π (the map variance per ℓ);
    ``disc``: the n×n matrix D with c·D·c = variance of the ring part's pixel-grid error
    (from :func:`skyconv.smooth._disc.disc_matrix`, or None to leave it out); ``alpha``: the
    factor on the fit residual (5, found empirically by Sutter et al.).

    The least squares minimise α² Σ_{ℓ>ℓcut} w_ℓ (P[K̂_θ]_ℓ − K_ℓ)² + 1.5² c·D·c, i.e. the
    predicted error itself; K̂_ℓ = K_ℓ − P[K̂_θ]_ℓ for ℓ ≤ ℓcut is exact, so those ℓ carry no
    rows.

    ``alias``: with Jacobi iterations (iter > 0) the reference's alm are exact, but the harmonic
    part, iterated at lmax = ℓcut, keeps the quadrature's aliasing of the map's content above
    ℓcut; modelled as alias · sqrt(Σ_{ℓ>ℓcut} w_ℓ / Σ w K²) · max_{ℓ≤ℓcut} |K̂_ℓ| (give
    ``QUADRATURE_ERROR``; 0 for iter = 0, where both share the same quadrature).

    ``design``: the basis's transform to lmax when already computed (:meth:`with_disc`).
    """

    def __init__(
        self,
        basis: Basis,
        window,
        weights,
        disc=None,
        alpha: float = 5.0,
        alias: float = 0.0,
        design=None,
    ):
        self.basis = basis
        self.window = np.asarray(window, dtype=np.float64)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.lmax = self.window.size - 1
        self.alpha = float(alpha)
        self.design = basis.transform(self.lmax) if design is None else design
        self.signal = float(np.sum(self.weights * self.window**2))
        self.alias = float(alias)
        self._tail = np.append(np.cumsum(self.weights[::-1])[::-1], 0.0)  # Σ_{ℓ'≥ℓ} w
        n = basis.n
        self.disc = np.zeros((n, n)) if disc is None else np.asarray(disc, dtype=np.float64)
        lam, vec = np.linalg.eigh(0.5 * (self.disc + self.disc.T))
        self._disc_rows = DISC_SAFETY * np.sqrt(np.clip(lam, 0.0, None))[:, None] * vec.T
        self._cache: dict[int, Fit] = {}

    def with_disc(self, disc) -> Problem:
        """The same problem with the pixel-grid error matrix added (the design is reused). Its
        smallest ℓcut is never below this one's: the error only gains a term."""
        return Problem(
            self.basis, self.window, self.weights, disc, self.alpha, self.alias, self.design
        )

    def solve(self, lcut: int) -> Fit:
        """The fit with the harmonic part on ℓ ≤ lcut (−1: none; lmax: no ring part)."""
        lcut = int(min(max(lcut, -1), self.lmax))
        if lcut in self._cache:
            return self._cache[lcut]
        n = self.basis.n
        if lcut >= self.lmax:
            fit = Fit(lcut, np.zeros(n), 0.0, 0.0, 0.0, self.alpha)
        else:
            rows = slice(lcut + 1, None)
            sw = self.alpha * np.sqrt(self.weights[rows])
            mat = np.vstack([self.design[rows] * sw[:, None], self._disc_rows])
            rhs = np.concatenate([self.window[rows] * sw, np.zeros(len(self._disc_rows))])
            u, s, vt = np.linalg.svd(mat, full_matrices=False)
            keep = s > RCOND * s[0] if s.size and s[0] > 0 else np.zeros(s.size, bool)
            coef = vt[keep].T @ ((u[:, keep].T @ rhs) / s[keep])
            fit = Fit(lcut, coef, *self._errors(coef, lcut), self.alpha)
        self._cache[lcut] = fit
        return fit

    def _errors(self, coef: np.ndarray, lcut: int) -> tuple[float, float, float]:
        if self.signal <= 0:
            return 0.0, 0.0, 0.0
        ring = self.design @ coef
        resid = ring[lcut + 1 :] - self.window[lcut + 1 :]
        fit2 = float(np.sum(self.weights[lcut + 1 :] * resid**2))
        disc2 = max(float(coef @ self.disc @ coef), 0.0)
        alias = 0.0
        if self.alias > 0 and lcut >= 0:
            harm = float(np.max(np.abs(self.window[: lcut + 1] - ring[: lcut + 1])))
            alias = self.alias * np.sqrt(self._tail[lcut + 1] / self.signal) * harm
        return np.sqrt(fit2 / self.signal), np.sqrt(disc2 / self.signal), alias

    def smallest_lcut(self, tol: float, hi: int | None = None) -> Fit:
        """The fit with the smallest ℓcut whose predicted error is ≤ tol (binary search: the
        optimum can only improve as ℓcut grows, since rows are only removed). ``hi``: an ℓcut
        known to meet tol (default lmax, where the error is 0)."""
        if self.solve(-1).error <= tol:
            return self.solve(-1)
        lo, hi = -1, self.lmax if hi is None else hi  # error(lo) > tol ≥ error(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.solve(mid).error <= tol:
                hi = mid
            else:
                lo = mid
        return self.solve(hi)


class TabulatedProfile:
    """A profile given by values at ascending nodes (θ[0] = 0 … θ[-1] = θcut), as one basis
    function: the same interface as :class:`Basis` (n = 1), for measuring another method's
    profile (e.g. the ring method's truncated kernel). Cubic (4-point Lagrange) interpolation
    between nodes; 0 beyond θcut."""

    p = 0
    n = 1

    def __init__(self, theta, values):
        self.theta = np.asarray(theta, dtype=np.float64)
        self.vals = np.asarray(values, dtype=np.float64)
        self.theta_cut = float(self.theta[-1])

    def values(self, theta) -> np.ndarray:
        th = np.asarray(theta, dtype=np.float64).ravel()
        x, y = self.theta, self.vals
        i = np.clip(np.searchsorted(x, th) - 2, 0, max(x.size - 4, 0))
        idx = i[:, None] + np.arange(min(4, x.size))[None, :]
        xs, ys = x[idx], y[idx]
        out = np.zeros(th.size)
        for a in range(xs.shape[1]):
            term = ys[:, a].copy()
            for b in range(xs.shape[1]):
                if a != b:
                    term *= (th - xs[:, b]) / (xs[:, a] - xs[:, b])
            out += term
        out[th > self.theta_cut] = 0.0
        return out[:, None]

    def nodes(self, kmax: float) -> tuple[np.ndarray, np.ndarray]:
        """Gauss–Legendre per node interval (the interpolant is a cubic on each), with enough
        points for the oscillations of P_ℓ or J₀(kθ), k ≤ kmax, across an interval."""
        h = float(np.max(np.diff(self.theta)))
        x, w = np.polynomial.legendre.leggauss(4 + int(kmax * h))
        a, b = self.theta[:-1, None], self.theta[1:, None]
        return (0.5 * (a + b) + 0.5 * (b - a) * x).ravel(), (0.5 * (b - a) * w).ravel()

    def transform(self, lmax: int) -> np.ndarray:
        """P[K]_ℓ for ℓ = 0..lmax, shape (lmax + 1, 1)."""
        return _transform(self, lmax)
