"""Robust noise statistics of large arrays, exact and without sorting (skyconv's statistics
core; Smooth-and-Clip measures its noise with these).

Every function looks at a regular *sample* of the array: ``cadence=c`` takes every c-th value
in memory order (SoFiA 2's rule; :func:`sofia2_cadence` gives its default), ``stride=s`` every
s-th plane, row and column of a (z, y, x) array (SoFiA 1's rule; :func:`sofia1_stride`). By
default every value is used. Non-finite values are always skipped. ``flux_range`` is
``"full"`` (alias ``"all"``), ``"negative"`` or ``"positive"``: only values below (above) the
centre count. Medians are exact (the mean of the two middle values for an even count), found
by histogram selection. Values are in the data's units; sums run in float64.
"""

from __future__ import annotations

import math

import numpy as np

from . import _core
from ._arrays import float_array, int_arg

#: MAD → standard deviation of a Gaussian (1/Φ⁻¹(3/4)), SoFiA 2's constant.
MAD_TO_STD = 1.482602218505602

_RANGES = ("full", "all", "negative", "positive")


def _prep(data, flux_range, cadence, stride):
    a = float_array(data, "data")
    if a.ndim > 3:
        a = a.reshape((-1,) + a.shape[-2:])
    if flux_range not in _RANGES:
        raise ValueError(f"flux_range must be 'full', 'negative' or 'positive', got {flux_range!r}")
    if cadence is not None and stride is not None:
        raise ValueError("give cadence or stride, not both")
    if stride is not None:
        s = int_arg(stride, "stride")
        if s < 1:
            raise ValueError(f"stride must be >= 1, got {s}")
        samp = ("stride", s)
    else:
        c = 1 if cadence is None else int_arg(cadence, "cadence")
        if c < 1:
            raise ValueError(f"cadence must be >= 1, got {c}")
        samp = ("cadence", c)
    return a, samp


def _nan(v):
    return math.nan if v is None else float(v)


def std(data, center=0.0, flux_range="full", *, cadence=None, stride=None, clip=None):
    """sqrt(Σ(x − center)² / n) over the sampled finite values in ``flux_range``.

    ``clip``: only values with |x − center| < clip count. Returns NaN if none counts.
    """
    a, samp = _prep(data, flux_range, cadence, stride)
    return _nan(
        _core._stat(
            a, "std", float(center), flux_range, samp, None if clip is None else float(clip)
        )
    )


def mad(data, center=0.0, flux_range="full", *, cadence=None, stride=None, clip=None):
    """Median of |x − center| over the sampled finite values in ``flux_range`` (unscaled;
    multiply by :data:`MAD_TO_STD` for a Gaussian σ). NaN if none counts."""
    a, samp = _prep(data, flux_range, cadence, stride)
    return _nan(
        _core._stat(
            a, "mad", float(center), flux_range, samp, None if clip is None else float(clip)
        )
    )


def gauss(data, flux_range="full", *, cadence=None, stride=None):
    """σ of a zero-centred Gaussian fitted (least squares) to the histogram of the sample.

    The histogram has bins of σ₀/10 over ±5σ₀ (one side for a negative/positive range), with
    σ₀ = 1.4826·MAD about 0 as the starting value. NaN if no value counts.
    """
    a, samp = _prep(data, flux_range, cadence, stride)
    return _nan(_core._stat(a, "gauss", 0.0, flux_range, samp))


def noise(data, statistic="mad", flux_range="full", *, cadence="sofia2", stride=None):
    """Noise σ about 0 as SoFiA 2 measures it: ``"std"``, ``"mad"`` (× :data:`MAD_TO_STD`)
    or ``"gauss"``; by default on SoFiA 2's sample (``cadence="sofia2"``)."""
    if statistic not in ("std", "mad", "gauss"):
        raise ValueError(f"statistic must be 'std', 'mad' or 'gauss', got {statistic!r}")
    if isinstance(cadence, str):
        if cadence != "sofia2":
            raise ValueError(f"cadence must be an int, None or 'sofia2', got {cadence!r}")
        cadence = None if stride is not None else sofia2_cadence(np.shape(data))
    a, samp = _prep(data, flux_range, cadence, stride)
    what = {"std": "std", "mad": "sigma_mad", "gauss": "gauss"}[statistic]
    return _nan(_core._stat(a, what, 0.0, flux_range, samp))


def scipy_fitter():
    """A fitter for SoFiA 1's histogram Gaussians that calls ``scipy.optimize.curve_fit`` as
    SoFiA does (its stopping rule sets the last digits), or None without scipy."""
    try:
        from scipy import optimize
    except ImportError:
        return None

    def gaussian(x, a, sigma):
        return a * np.exp(-(x**2) / (2.0 * sigma**2))

    def fit(x, y, a0, s0):
        p = optimize.curve_fit(gaussian, np.asarray(x), np.asarray(y), p0=[a0, s0])[0]
        return float(p[0]), float(p[1])

    return fit


def sofia1_rms(data, rms_mode="negative", flux_range="all", *, sample=1, two_pass=False):
    """SoFiA 1.3.2's ``GetRMS(cube, rmsMode, fluxRange, sample=sample)`` (zoom 1): ``"mad"``
    (1.4826·median|x|), ``"std"`` (sqrt(Σx²/n)), ``"negative"`` (Gaussian fitted to the
    histogram of negative values) or ``"gauss"`` (Gaussian fitted to a 100-bin histogram).
    Histograms are counted by skyconv, the Gaussians fitted with scipy's ``curve_fit`` as in
    SoFiA (skyconv's own fit without scipy). Raises ValueError where SoFiA stops with an
    error."""
    if rms_mode not in ("negative", "gauss", "mad", "std"):
        raise ValueError(f"rms_mode must be 'negative', 'gauss', 'mad' or 'std', got {rms_mode!r}")
    a, samp = _prep(data, flux_range, None, sample)
    return float(
        _core._stat(
            a, "sofia1:" + rms_mode, 0.0, flux_range, samp, None, bool(two_pass), scipy_fitter()
        )
    )


def histogram(data, edges):
    """Counts of the finite values of ``data`` in the bins ``edges`` (increasing), with
    ``np.histogram``'s rule (last bin closed)."""
    a = float_array(data, "data")
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 2 or np.any(np.diff(e) < 0) or not np.all(np.isfinite(e)):
        raise ValueError("edges must be a finite, increasing 1-D sequence of at least 2 values")
    return np.asarray(_core._histogram(a, e.tolist()), dtype=np.int64)


def fit_gaussian(x, y, p0):
    """Least-squares fit of ``A·exp(−x²/(2σ²))`` to (x, y) from ``p0 = (A, σ)``; returns
    (A, σ) (σ's sign is arbitrary), as ``scipy.optimize.curve_fit`` would."""
    xx = np.asarray(x, dtype=np.float64).ravel()
    yy = np.asarray(y, dtype=np.float64).ravel()
    if xx.shape != yy.shape:
        raise ValueError("x and y must have the same length")
    a0, s0 = (float(v) for v in p0)
    return _core._fit_gaussian(xx.tolist(), yy.tolist(), a0, s0)


def sofia2_cadence(shape) -> int:
    """SoFiA 2's sampling cadence: size // 999983 (1 below 2; one less when it is a multiple
    of the x size)."""
    return int(_core._sofia2_cadence([int(n) for n in shape][-3:]))


def sofia1_stride(shape) -> int:
    """SoFiA 1's sampling stride: max(1, int((size / 1e6) ** (1 / min(3, ndim))))."""
    shape = tuple(int(n) for n in shape)
    size = int(np.prod(shape)) if shape else 1
    return max(1, int((float(size) / 1e6) ** (1.0 / min(3, max(1, len(shape))))))


__all__ = [
    "MAD_TO_STD",
    "fit_gaussian",
    "gauss",
    "histogram",
    "mad",
    "noise",
    "scipy_fitter",
    "sofia1_rms",
    "sofia1_stride",
    "sofia2_cadence",
    "std",
]
