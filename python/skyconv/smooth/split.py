"""Kernel splitting (Sutter et al. 2012): smooth with a harmonic part at low ℓ plus a compact
real-space part, each computed where it is cheap, and add.

A beam window K_ℓ (ℓ = 0..lmax) is written as

    K_ℓ ≈ K̂_ℓ (ℓ ≤ ℓcut, harmonic: map2alm → × K̂_ℓ → alm2map)
        + P[K̂_θ]_ℓ (real space: ring-FFT convolution with a profile K̂_θ that is 0 beyond θcut),

with P[K̂_θ]_ℓ = 2π ∫₀^θcut K̂_θ(θ) P_ℓ(cos θ) sin θ dθ. For each θcut the profile is fitted by
weighted least squares (weights (2ℓ+1)·C_ℓ, C_ℓ the input map's spectrum, flat by default;
SVD with singular values below 1e-6 of the largest dropped) to K_ℓ on ℓcut < ℓ ≤ lmax, and
K̂_ℓ = K_ℓ − P[K̂_θ]_ℓ on ℓ ≤ ℓcut makes the low multipoles exact.

Errors are fractional RMS of the smoothed map (the square root of the error's power over the
result's power, both weighted by (2ℓ+1)C_ℓ):

- fit: σ_fit² = Σ(2ℓ+1)C_ℓ(K̃_ℓ − K_ℓ)² / Σ(2ℓ+1)C_ℓK_ℓ², K̃ the split's window, multiplied
  by α = 5 as Sutter et al. found necessary;
- discretisation: the ring engine sums over pixel centres, not an integral; the error of those
  sums for this profile on this nside's grid is measured (``skyconv.smooth._disc``), counted
  1.5 times (one map's realised error was seen up to 1.4x the average), and the fit minimises
  α²σ_fit² + 1.5²σ_disc², the predicted error itself;
- with Jacobi iterations (iter > 0) only: the harmonic part, iterated at lmax = ℓcut, keeps
  the quadrature's aliasing of the map's content above ℓcut (σ_alias, see
  ``skyconv.smooth._fit.Problem``).

The errors are relative to the full-kernel harmonic method with the same ``iter``: with
iter = 0 both share the same quadrature alm below ℓcut (and its ~1e-4 error against the exact
convolution, which no method choice removes).

``split_kernel`` scans θcut (in steps of the pixel size) and for each finds the smallest ℓcut
meeting ``tol`` by bisection, then keeps the pair with the shortest predicted time from the cost
model measured on this machine (``skyconv.smooth.cost``). The harmonic part never goes past
``lmax_eff``, beyond which the window's power is below (0.1 tol)² of its total; when no split
beats the plain transform at ``lmax_eff``, the result is that transform (no ring part, ℓcut =
``lmax_eff``, θcut = 0), which for wide beams is much cheaper than one at ``lmax``.

On the 2-core development machine at tol = 1e-5 the CPU ring engine rarely beats the
transforms: most of the budget goes to the pixel-grid error, and ℓcut stays near lmax (see
notebooks/02_smoothing.ipynb and bench/cases/smooth.py).
"""

from __future__ import annotations

import concurrent.futures
import math
from dataclasses import dataclass, field

import numpy as np

from .. import _core
from .._utils.arrays import int_arg
from .._utils.device import resolve
from .._utils.trace import stage
from ..exceptions import ArgumentError, ShapeError
from . import _split_store, methods
from . import cost as _cost
from ._disc import disc_matrix
from ._fit import QUADRATURE_ERROR, Basis, Problem, basis_size

#: Factor on the fit residual in the error model (Sutter et al. 2012).
ALPHA = 5.0
#: θcut candidates, in units of the pixel size √(4π/npix).
THETA_STEPS = (1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
#: The harmonic part stops where the window's remaining power is below (TAIL·tol)² of it.
TAIL = 0.1
#: Nodes of the tabulated profile handed to the ring engine (its cubic spline is then exact to
#: ~1e-10 of the peak for the polynomial profiles used here).
PROFILE_NODES = 2049


@dataclass(frozen=True, eq=False)
class KernelSplit:
    """A beam window split into a harmonic part (ℓ ≤ ``lcut``) and a real-space part
    (θ ≤ ``theta_cut``), with the predicted error and time of each.

    Attributes
    ----------
    nside, lmax, tol : the problem (``tol``: fractional RMS error allowed).
    lcut : int
        Highest multipole of the harmonic part; −1 when there is none, ``lmax`` when there is
        no real-space part (the split then is the plain harmonic method).
    theta_cut : float
        Radius of the real-space part (radians); 0 when there is none.
    harmonic_window : float64 (lcut + 1,)
        K̂_ℓ, the window the harmonic part multiplies the alm with.
    theta, profile : float64 arrays
        The real-space part K̂_θ (sr⁻¹) tabulated at ascending nodes θ (radians) from 0 to
        θcut; 0 beyond. Empty when there is no real-space part.
    predicted_error : float
        sqrt((α σ_fit)² + (1.5 σ_disc)² + σ_alias²), fractional RMS (≤ tol).
    fit_error, disc_error, alias_error : float
        σ_fit (before α), σ_disc (before 1.5) and σ_alias, see the module docstring.
    time_harmonic, time_ring, predicted_time : float
        Predicted seconds of each part and of the split (both parts, run concurrently when
        they go to different devices), from the cost model; ``time_full_harmonic`` is the
        plain harmonic method's.
    devices : (str, str)
        Where the harmonic and the real-space part run ("cpu" or "cuda").
    lmax_eff : int
        Highest ℓ that matters: the window's power beyond it is below (0.1 tol)² of the total.
    candidates : tuple of dict
        The scan: one entry per θcut tried (theta_cut, lcut, error, time).

    Examples
    --------
    The window a split applies is the beam's, to about the predicted error:

    >>> import numpy as np
    >>> from skyconv import split_kernel
    >>> from skyconv.smooth import gauss_window
    >>> from skyconv.smooth.cost import CostModel, DeviceCost
    >>> cost = CostModel([DeviceCost("cpu", [1e-3, 1e-9, 1e-9, 1e-9], [1e-3, 1e-9, 0, 0])])
    >>> beam = gauss_window(np.radians(4.0), 128)
    >>> ks = split_kernel(beam, 64, 128, tol=1e-3, theta_cut=np.radians(8.0), cost=cost)
    >>> bool(np.sqrt(np.mean((ks.window() - beam) ** 2)) < 1e-3), ks.lcut < 128
    (True, True)
    """

    nside: int
    lmax: int
    tol: float
    lcut: int
    theta_cut: float
    harmonic_window: np.ndarray
    theta: np.ndarray
    profile: np.ndarray
    predicted_error: float
    fit_error: float
    disc_error: float
    alias_error: float
    time_harmonic: float
    time_ring: float
    predicted_time: float
    time_full_harmonic: float
    devices: tuple[str, str]
    lmax_eff: int
    candidates: tuple = ()
    _basis: Basis | None = field(default=None, repr=False)
    _coef: np.ndarray | None = field(default=None, repr=False)

    @property
    def has_ring(self) -> bool:
        """Whether there is a real-space part."""
        return self._basis is not None and self.theta_cut > 0

    @property
    def has_harmonic(self) -> bool:
        """Whether there is a harmonic part."""
        return self.lcut >= 0

    def profile_at(self, theta) -> np.ndarray:
        """The real-space part K̂_θ at ``theta``, from the fitted coefficients.

        Parameters
        ----------
        theta : float or array
            Angles, radians.

        Returns
        -------
        float64 array shaped like ``theta``
            sr⁻¹; 0 beyond θcut and everywhere when there is no real-space part.
        """
        th = np.asarray(theta, dtype=np.float64)
        if not self.has_ring:
            return np.zeros_like(th)
        return (self._basis.values(th) @ self._coef).reshape(th.shape)

    def ring_window(self, lmax: int | None = None) -> np.ndarray:
        """P[K̂_θ]_ℓ, the real-space part's window.

        Parameters
        ----------
        lmax : int, optional
            Highest ℓ (default ``self.lmax``).

        Returns
        -------
        float64 array (lmax + 1,)
        """
        lmax = self.lmax if lmax is None else int_arg(lmax, "lmax")
        if not self.has_ring:
            return np.zeros(lmax + 1)
        return self._basis.transform(lmax) @ self._coef

    def window(self, lmax: int | None = None) -> np.ndarray:
        """K̃_ℓ = K̂_ℓ (ℓ ≤ ℓcut) + P[K̂_θ]_ℓ: the window the split applies.

        Parameters
        ----------
        lmax : int, optional
            Highest ℓ (default ``self.lmax``).

        Returns
        -------
        float64 array (lmax + 1,)
        """
        out = self.ring_window(lmax)
        n = min(out.size, self.lcut + 1)
        out[:n] += self.harmonic_window[:n]
        return out

    def summary(self) -> str:
        """One line: the split and its predictions."""
        return (
            f"nside {self.nside}, lmax {self.lmax}: lcut {self.lcut}, theta_cut "
            f"{np.degrees(self.theta_cut) * 60:.2f} arcmin, predicted error "
            f"{self.predicted_error:.2e} (fit {self.fit_error:.1e} x {ALPHA:g}, disc "
            f"{self.disc_error:.1e} x 1.5, alias {self.alias_error:.1e}), time "
            f"{self.predicted_time:.3g} s (harmonic "
            f"{self.time_harmonic:.3g} s on {self.devices[0]}, ring {self.time_ring:.3g} s on "
            f"{self.devices[1]}; full harmonic {self.time_full_harmonic:.3g} s)"
        )

    def __repr__(self) -> str:
        return f"KernelSplit({self.summary()})"


def _window_array(beam_window, lmax: int) -> np.ndarray:
    """K_ℓ for ℓ = 0..lmax from a 1-D window (0 past its end, as healpy)."""
    w = np.asarray(beam_window, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise ShapeError(f"beam_window must be a non-empty 1-D array, got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ArgumentError("beam_window must be finite")
    out = np.zeros(lmax + 1)
    n = min(w.size, lmax + 1)
    out[:n] = w[:n]
    return out


def _spectrum(cl, lmax: int) -> np.ndarray:
    """C_ℓ for ℓ = 0..lmax (flat when None)."""
    if cl is None:
        return np.ones(lmax + 1)
    c = np.asarray(cl, dtype=np.float64)
    if c.ndim != 1 or c.size < lmax + 1:
        raise ShapeError(f"cl must be 1-D with at least lmax + 1 = {lmax + 1} values")
    c = c[: lmax + 1]
    if not np.all(np.isfinite(c)) or np.any(c < 0):
        raise ArgumentError("cl must be finite and non-negative")
    return c


def effective_lmax(weights: np.ndarray, window: np.ndarray, tol: float) -> int:
    """Smallest L with Σ_{ℓ>L} w K² ≤ (TAIL·tol)² Σ w K²."""
    power = weights * window**2
    total = float(power.sum())
    if total <= 0:
        return 0
    tail = np.cumsum(power[::-1])[::-1]  # tail[L] = Σ_{ℓ≥L}
    ok = np.nonzero(tail <= (TAIL * tol) ** 2 * total)[0]
    return int(ok[0] - 1) if ok.size else window.size - 1


def kernel_reach(window: np.ndarray, tol: float) -> float:
    """Radius (radians) beyond which a Gaussian with the window's half-power multipole is
    below tol of its peak: the widest real-space part worth trying."""
    k0 = window[0] if window[0] != 0 else np.max(np.abs(window))
    below = np.nonzero(np.abs(window) < 0.5 * abs(k0))[0]
    half = below[0] if below.size else window.size
    sigma = math.sqrt(2 * math.log(2) / max(half * (half + 1), 1))
    return sigma * math.sqrt(2 * math.log(1 / tol))


def _tabulate(basis: Basis, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    theta = np.linspace(0.0, basis.theta_cut, PROFILE_NODES)
    values = basis.values(theta) @ coef
    values[-1] = 0.0
    return theta, values


#: The largest nside :func:`split_kernel` plans for. Planning costs grow as nside²: the ring
#: engine's plan for the narrowest part tried (1.5 px) alone takes ~24 s at nside 8192 on 2
#: cores (0.5 s at 1024), so larger grids are refused up front instead of running for hours.
MAX_NSIDE = 8192
#: lmax is at most this many times nside: past ~3 nside the pixel grid holds no more
#: multipoles, and the fit's rows (and the window) grow with lmax.
MAX_LMAX_PER_NSIDE = 4


def _check_args(nside, lmax, tol):
    nside = int_arg(nside, "nside")
    if nside < 1 or nside > MAX_NSIDE:
        raise ArgumentError(
            f"nside must be in 1..{MAX_NSIDE} for split_kernel, got {nside} (planning time grows "
            f"as nside**2: ~24 s at {MAX_NSIDE}; use smooth_map(method='harmonic') beyond)"
        )
    lmax = 3 * nside - 1 if lmax is None else int_arg(lmax, "lmax")
    if lmax < 0 or lmax > MAX_LMAX_PER_NSIDE * nside:
        raise ArgumentError(
            f"lmax must be in 0..{MAX_LMAX_PER_NSIDE} * nside = {MAX_LMAX_PER_NSIDE * nside} "
            f"for split_kernel at nside {nside}, got {lmax}"
        )
    tol = float(tol)
    if not 0 < tol < 1:
        raise ArgumentError(f"tol must be in (0, 1), got {tol}")
    return nside, lmax, tol


def split_kernel(
    beam_window,
    nside,
    lmax=None,
    tol=1e-5,
    cl=None,
    *,
    iter=0,
    device=None,
    theta_cut=None,
    cost=None,
) -> KernelSplit:
    """Split a beam window into a harmonic and a real-space part (Sutter et al. 2012).

    Parameters
    ----------
    beam_window : 1-D float array
        K_ℓ from ℓ = 0 (e.g. ``skyconv.compat.healpy.gauss_beam``); 0 beyond its end.
    nside : int
        The maps' resolution: the real-space part is checked on this pixel grid.
    lmax : int, optional
        Highest ℓ of the smoothing (default 3·nside − 1, as healpy).
    tol : float
        Fractional RMS error allowed (see the module docstring), in (0, 1).
    cl : 1-D float array, optional
        The input maps' power spectrum C_ℓ (ℓ = 0..lmax at least); flat when None.
    iter : int
        Jacobi iterations of the harmonic parts (time predictions; with iter > 0 the error
        model adds the harmonic part's aliasing, see the module docstring).
    device : str or None
        Where the parts will run ("auto", "cpu", "cuda", "cuda:N"; None: SKYCONV_DEVICE, else
        "auto"):
        the cost model picks each part's device among those available.
    theta_cut : float, optional
        Fit at this radius (radians) only, whatever the predicted times, instead of scanning
        (to look at a split the cost model would not choose). The split is still the plain
        harmonic method when no ℓcut < lmax meets ``tol`` there.
    cost : optional
        A cost model (``skyconv.smooth.cost.CostModel``); default: the cached one for this
        machine, measured on first use (a few seconds).

    Returns
    -------
    KernelSplit

    Raises
    ------
    skyconv.ArgumentError
        ``nside`` outside 1..MAX_NSIDE (8192: planning time grows as nside², checked before
        any work), ``lmax`` outside 0..4·nside, ``tol`` or ``theta_cut`` out of range, a
        non-finite window or spectrum (a ValueError).
    skyconv.ShapeError
        ``beam_window`` not 1-D, ``cl`` too short.

    Examples
    --------
    A 4° beam at nside 64 with the real-space part fixed at 8° (and a stand-in cost model, so
    that nothing is measured):

    >>> import numpy as np
    >>> from skyconv import split_kernel
    >>> from skyconv.smooth import gauss_window
    >>> from skyconv.smooth.cost import CostModel, DeviceCost
    >>> cost = CostModel([DeviceCost("cpu", [1e-3, 1e-9, 1e-9, 1e-9], [1e-3, 1e-9, 0, 0])])
    >>> ks = split_kernel(gauss_window(np.radians(4.0), 128), 64, 128, tol=1e-3,
    ...                   theta_cut=np.radians(8.0), cost=cost)
    >>> ks.has_ring, ks.has_harmonic, bool(ks.predicted_error <= 1e-3)
    (True, True, True)
    """
    nside, lmax, tol = _check_args(nside, lmax, tol)
    window = _window_array(beam_window, lmax)
    spectrum = _spectrum(cl, lmax)
    iter = int_arg(iter, "iter")
    if theta_cut is not None:
        theta_cut = float(theta_cut)
        if not 0 < theta_cut <= math.pi / 2:
            raise ArgumentError(f"theta_cut must be in (0, pi/2] radians, got {theta_cut}")
    return _split(window, nside, lmax, tol, spectrum, iter, device, theta_cut, cost)


def _split(window, nside, lmax, tol, spectrum, iter, device, theta_cut, cost) -> KernelSplit:
    """:func:`split_kernel` on checked arguments (``window``: float64, lmax + 1 values)."""
    weights = (2 * np.arange(lmax + 1) + 1) * spectrum / (4 * np.pi)
    if cost is None:
        cost = _cost.model(device)
    leff = effective_lmax(weights, window, tol)
    t_full, dev_full = cost.harmonic_time(nside, leff, iter)

    best = dict(lcut=leff, theta_cut=0.0, fit=None, basis=None, time=t_full, t_h=t_full, t_r=0.0)
    best["devices"] = (dev_full, dev_full)
    pixel = math.sqrt(4 * math.pi / (12 * nside * nside))
    reach = kernel_reach(window, tol) + 2 * pixel
    forced = theta_cut is not None
    if forced:
        best["time"] = math.inf  # any split found is kept
    steps = [theta_cut / pixel] if forced else THETA_STEPS
    tried = []
    for step in steps:
        theta_cut = step * pixel
        if not forced and theta_cut > min(reach, math.pi / 2):
            break  # the kernel itself is below tol out here: a wider part gains nothing
        if cost.ring_time(nside, theta_cut)[0] >= best["time"]:
            break  # the ring part only grows with θcut
        basis = Basis(theta_cut, basis_size(theta_cut, lmax))
        # Rows up to lmax: past lmax_eff the ring part must stay as small as the window.
        alias = QUADRATURE_ERROR if iter > 0 else 0.0
        prob = Problem(basis, window, weights, None, ALPHA, alias)
        # Without the pixel-grid term the error is smaller (iter = 0; nearly so otherwise), so
        # this ℓcut is a lower bound: skip the costly measurement when even it cannot win.
        lower = prob.smallest_lcut(tol, hi=leff).lcut
        if lower >= leff or cost.split_time(nside, lower, theta_cut, iter)[0] >= best["time"]:
            tried.append(dict(theta_cut=theta_cut, lcut=lower, error=math.nan, time=math.nan))
            continue
        fit = prob.with_disc(disc_matrix(nside, basis, weights)).smallest_lcut(tol, hi=leff)
        if fit.lcut >= leff:
            tried.append(dict(theta_cut=theta_cut, lcut=leff, error=0.0, time=t_full))
            continue
        total, t_h, t_r, devs = cost.split_time(nside, fit.lcut, theta_cut, iter)
        tried.append(dict(theta_cut=theta_cut, lcut=fit.lcut, error=fit.error, time=total))
        if total < best["time"]:
            best = dict(lcut=fit.lcut, theta_cut=theta_cut, fit=fit, basis=basis, time=total)
            best.update(t_h=t_h, t_r=t_r, devices=devs)
        if fit.lcut < 0:
            break  # a ring part alone meets tol: a wider one only costs more

    fit, basis = best["fit"], best["basis"]
    if fit is None:  # the plain harmonic method (on the effective band)
        best.update(time=t_full, t_h=t_full, t_r=0.0, devices=(dev_full, dev_full))
        harm = window[: leff + 1].copy()
        theta = profile = np.zeros(0)
        coef, errs = None, (0.0, 0.0, 0.0, 0.0)
    else:
        coef = fit.coef
        harm = np.zeros(0)
        if fit.lcut >= 0:
            harm = window[: fit.lcut + 1] - basis.transform(fit.lcut) @ coef
        theta, profile = _tabulate(basis, coef)
        errs = (fit.error, fit.fit_error, fit.disc_error, fit.alias_error)
    return KernelSplit(
        nside=nside,
        lmax=lmax,
        tol=tol,
        lcut=int(best["lcut"]),
        theta_cut=best["theta_cut"],
        harmonic_window=harm,
        theta=theta,
        profile=profile,
        predicted_error=errs[0],
        fit_error=errs[1],
        disc_error=errs[2],
        alias_error=errs[3],
        time_harmonic=best["t_h"],
        time_ring=best["t_r"],
        predicted_time=best["time"],
        time_full_harmonic=t_full,
        devices=best["devices"],
        lmax_eff=leff,
        candidates=tuple(tried),
        _basis=basis,
        _coef=coef,
    )


def apply_split(ks: KernelSplit, m_filled: np.ndarray, iter: int = 0) -> np.ndarray:
    """Smooth a RING float64 map (no UNSEEN pixels) with a :class:`KernelSplit`: the harmonic
    and the ring part run concurrently (two threads; every binding releases the GIL) on
    ``ks.devices`` and are added.

    Ctrl-C (seen by the main thread only) or an error in one part cancels both parts through
    one ``_core.CancelScope``: the worker threads' core calls stop at their next poll, so the
    call ends within the engines' cancel latency instead of after both parts finish."""
    dev_h, dev_r = resolve(ks.devices[0]), resolve(ks.devices[1])
    scope = _core.CancelScope()

    def harmonic():
        with scope:
            return methods.harmonic(m_filled, ks.harmonic_window, ks.lcut, iter, dev_h)

    def ring():
        with scope:
            return methods.ring(m_filled, ks.nside, ks.theta, ks.profile, dev_r)

    if not ks.has_ring:
        return harmonic()
    if not ks.has_harmonic:
        return ring()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        h, r = pool.submit(harmonic), pool.submit(ring)
        try:
            out = r.result()
            out += h.result()
        except BaseException:
            scope.cancel()
            raise
    return out


_CACHE: dict = {}


def cached_split(window, nside, lmax, tol, iter, device) -> KernelSplit:
    """:func:`split_kernel` with a flat spectrum, remembered per (window, nside, lmax, tol,
    iter, device) for this process (``auto`` and ``split`` then fit once) and on disk for the
    next ones (:mod:`skyconv.smooth._split_store`: keyed also by the cost model's constants).
    The arguments are taken as checked (``smooth_map``'s beam); the window is cut or padded to
    lmax + 1."""
    w = np.zeros(lmax + 1)
    given = np.asarray(window, dtype=np.float64)[: lmax + 1]
    w[: given.size] = given
    key = (w.tobytes(), nside, lmax, float(tol), iter, _cost.placement_key(device))
    if key not in _CACHE:
        if len(_CACHE) > 32:
            _CACHE.clear()
        _CACHE[key] = _stored_split(w, nside, lmax, float(tol), iter, device)
    return _CACHE[key]


def _stored_split(w, nside, lmax, tol, iter, device) -> KernelSplit:
    """The split from the disk store, else fitted now and stored."""
    name = _split_store.key(w, nside, lmax, tol, iter, device) if _split_store.enabled() else None
    with stage("smooth split", f"nside {nside} (read from the cache)"):
        ks = _split_store.load(name, KernelSplit) if name else None
    if ks is None:
        with stage("smooth split", f"nside {nside} (fitted)"):
            ks = _split(w, nside, lmax, tol, np.ones(lmax + 1), iter, device, None, None)
        if name:
            _split_store.store(name, ks)
    return ks


def _forget() -> None:
    _CACHE.clear()
    _split_store.clear()


_cost.ON_CLEAR.append(_forget)


__all__ = ["KernelSplit", "split_kernel"]
