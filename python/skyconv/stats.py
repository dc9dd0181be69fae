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
from ._utils.args import reals, to_float
from ._utils.arrays import float_array, int_arg
from .exceptions import ArgumentError, ShapeError

#: MAD → standard deviation of a Gaussian (1/Φ⁻¹(3/4)), SoFiA 2's constant.
MAD_TO_STD = 1.482602218505602

_RANGES = ("full", "all", "negative", "positive")


def _prep(data, flux_range, cadence, stride):
    a = float_array(data, "data")
    if a.ndim > 3:
        a = a.reshape((-1,) + a.shape[-2:])
    if flux_range not in _RANGES:
        raise ArgumentError(
            f"flux_range must be 'full', 'negative' or 'positive', got {flux_range!r}"
        )
    if cadence is not None and stride is not None:
        raise ArgumentError("give cadence or stride, not both")
    if stride is not None:
        s = int_arg(stride, "stride")
        if s < 1:
            raise ArgumentError(f"stride must be >= 1, got {s}")
        samp = ("stride", s)
    else:
        c = 1 if cadence is None else int_arg(cadence, "cadence")
        if c < 1:
            raise ArgumentError(f"cadence must be >= 1, got {c}")
        samp = ("cadence", c)
    return a, samp


def _nan(v):
    return math.nan if v is None else float(v)


def std(data, center=0.0, flux_range="full", *, cadence=None, stride=None, clip=None):
    """Root mean square about ``center`` of the sampled finite values in ``flux_range``.

    sqrt(sum((x - center)^2) / n).

    Parameters
    ----------
    data : float32 or float64 array, up to 3-D
        The values (any unit).
    center : float
        The value deviations are measured from (data's unit).
    flux_range : str
        ``"full"`` (alias ``"all"``), ``"negative"`` or ``"positive"``: only values below
        (above) ``center`` count.
    cadence : int, optional
        Use every ``cadence``-th value in memory order (SoFiA 2's rule); default all.
    stride : int, optional
        Use every ``stride``-th plane, row and column of a (z, y, x) array (SoFiA 1's rule).
        At most one of ``cadence`` and ``stride``.
    clip : float, optional
        Only values with |x - center| < clip count (data's unit).

    Returns
    -------
    float
        In data's unit; NaN if no value counts.

    Raises
    ------
    TypeError
        ``data`` is not a float32/float64 array.
    ValueError
        An unknown ``flux_range``, or both ``cadence`` and ``stride``.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import stats
    >>> stats.std(np.array([-2.0, 2.0, np.nan]))
    2.0
    """
    a, samp = _prep(data, flux_range, cadence, stride)
    return _nan(
        _core._stat(
            a,
            "std",
            to_float(center, "center"),
            flux_range,
            samp,
            None if clip is None else to_float(clip, "clip"),
        )
    )


def mad(data, center=0.0, flux_range="full", *, cadence=None, stride=None, clip=None):
    """Median of |x - center| over the sampled finite values in ``flux_range`` (unscaled).

    Multiply by :data:`MAD_TO_STD` for the sigma of a Gaussian. The median is exact (the mean
    of the two middle values for an even count).

    Parameters
    ----------
    data : float32 or float64 array, up to 3-D
        The values (any unit).
    center : float
        The value deviations are measured from (data's unit).
    flux_range : str
        ``"full"`` (alias ``"all"``), ``"negative"`` or ``"positive"``.
    cadence : int, optional
        Use every ``cadence``-th value in memory order (SoFiA 2's rule); default all.
    stride : int, optional
        Use every ``stride``-th plane, row and column of a (z, y, x) array (SoFiA 1's rule).
        At most one of ``cadence`` and ``stride``.
    clip : float, optional
        Only values with |x - center| < clip count.

    Returns
    -------
    float
        In data's unit; NaN if no value counts.

    Raises
    ------
    TypeError
        ``data`` is not a float32/float64 array.
    ValueError
        An unknown ``flux_range``, or both ``cadence`` and ``stride``.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import stats
    >>> stats.mad(np.array([1.0, -3.0, 2.0, 10.0]))
    2.5
    """
    a, samp = _prep(data, flux_range, cadence, stride)
    return _nan(
        _core._stat(
            a,
            "mad",
            to_float(center, "center"),
            flux_range,
            samp,
            None if clip is None else to_float(clip, "clip"),
        )
    )


def gauss(data, flux_range="full", *, cadence=None, stride=None):
    """Sigma of a zero-centred Gaussian fitted (least squares) to the histogram of the sample.

    The histogram has bins of s0/10 over +-5 s0 (one side for a negative/positive range),
    with s0 = 1.4826 MAD about 0 as the starting value.

    Parameters
    ----------
    data : float32 or float64 array, up to 3-D
        The values (any unit).
    flux_range : str
        ``"full"`` (alias ``"all"``), ``"negative"`` or ``"positive"``.
    cadence : int, optional
        Use every ``cadence``-th value in memory order (SoFiA 2's rule); default all.
    stride : int, optional
        Use every ``stride``-th plane, row and column of a (z, y, x) array (SoFiA 1's rule).
        At most one of ``cadence`` and ``stride``.

    Returns
    -------
    float
        In data's unit; NaN if no value counts.

    Raises
    ------
    TypeError
        ``data`` is not a float32/float64 array.
    ValueError
        An unknown ``flux_range``, or both ``cadence`` and ``stride``.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import stats
    >>> x = np.random.default_rng(0).normal(0.0, 3.0, 100_000)
    >>> bool(abs(stats.gauss(x) / 3.0 - 1) < 0.02)
    True
    """
    a, samp = _prep(data, flux_range, cadence, stride)
    return _nan(_core._stat(a, "gauss", 0.0, flux_range, samp))


def noise(data, statistic="mad", flux_range="full", *, cadence="sofia2", stride=None):
    """Noise sigma about 0 as SoFiA 2 measures it.

    Parameters
    ----------
    data : float32 or float64 array, up to 3-D
        The values (any unit).
    statistic : str
        ``"std"``, ``"mad"`` (times :data:`MAD_TO_STD`) or ``"gauss"``.
    flux_range : str
        ``"full"`` (alias ``"all"``), ``"negative"`` or ``"positive"``.
    cadence : int, "sofia2" or None
        Every ``cadence``-th value; ``"sofia2"`` (default): SoFiA 2's cadence for data's
        shape (:func:`sofia2_cadence`); None: every value.
    stride : int, optional
        SoFiA 1's stride instead of a cadence.

    Returns
    -------
    float
        In data's unit; NaN if no value counts.

    Raises
    ------
    ValueError
        An unknown ``statistic``, ``flux_range`` or ``cadence``.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import stats
    >>> cube = np.random.default_rng(1).normal(0.0, 0.5, (8, 64, 64)).astype(np.float32)
    >>> bool(abs(stats.noise(cube) / 0.5 - 1) < 0.05)
    True
    """
    if statistic not in ("std", "mad", "gauss"):
        raise ArgumentError(f"statistic must be 'std', 'mad' or 'gauss', got {statistic!r}")
    if isinstance(cadence, str):
        if cadence != "sofia2":
            raise ArgumentError(f"cadence must be an int, None or 'sofia2', got {cadence!r}")
        cadence = None if stride is not None else sofia2_cadence(np.shape(data))
    a, samp = _prep(data, flux_range, cadence, stride)
    what = {"std": "std", "mad": "sigma_mad", "gauss": "gauss"}[statistic]
    return _nan(_core._stat(a, what, 0.0, flux_range, samp))


def scipy_fitter():
    """A fitter for SoFiA 1's histogram Gaussians that calls ``scipy.optimize.curve_fit`` as
    SoFiA does (its stopping rule sets the last digits).

    Returns
    -------
    callable or None
        ``fit(x, y, a0, s0) -> (a, sigma)``, or None without scipy.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import stats
    >>> fit = stats.scipy_fitter()
    >>> x = np.linspace(-3, 3, 61)
    >>> a, s = fit(x, 2.0 * np.exp(-(x**2) / 2), 1.0, 2.0)
    >>> round(a, 6), round(abs(s), 6)
    (2.0, 1.0)
    """
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
    """SoFiA 1.3.2's ``GetRMS(cube, rmsMode, fluxRange, sample=sample)`` (zoom 1).

    Histograms are counted by skyconv; the Gaussians are fitted with scipy's ``curve_fit`` as
    in SoFiA (skyconv's own fit without scipy).

    Parameters
    ----------
    data : float32 or float64 array, up to 3-D
        The cube (any unit).
    rms_mode : str
        ``"mad"`` (1.4826 median|x|), ``"std"`` (sqrt(sum x^2 / n)), ``"negative"``
        (Gaussian fitted to the histogram of negative values) or ``"gauss"`` (Gaussian fitted
        to a 100-bin histogram).
    flux_range : str
        ``"all"``, ``"negative"`` or ``"positive"``.
    sample : int
        SoFiA 1's stride (every ``sample``-th plane, row and column).
    two_pass : bool
        Measure twice, the second time clipped (SoFiA 1's two-pass mode).

    Returns
    -------
    float
        In data's unit.

    Raises
    ------
    ValueError
        An unknown ``rms_mode``/``flux_range``, or where SoFiA stops with an error.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import stats
    >>> stats.sofia1_rms(np.array([[[3.0, -4.0]]]), rms_mode="std")
    3.5355339059327378
    """
    if rms_mode not in ("negative", "gauss", "mad", "std"):
        raise ArgumentError(
            f"rms_mode must be 'negative', 'gauss', 'mad' or 'std', got {rms_mode!r}"
        )
    a, samp = _prep(data, flux_range, None, sample)
    return float(
        _core._stat(
            a, "sofia1:" + rms_mode, 0.0, flux_range, samp, None, bool(two_pass), scipy_fitter()
        )
    )


def histogram(data, edges):
    """Counts of the finite values of ``data`` in the bins ``edges``.

    Parameters
    ----------
    data : float32 or float64 array
        The values.
    edges : 1-D sequence of float
        Increasing bin edges (data's unit), at least two; ``np.histogram``'s rule (the last
        bin is closed).

    Returns
    -------
    int64 array (len(edges) - 1,)

    Raises
    ------
    ValueError
        ``edges`` not finite, not increasing or shorter than 2.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import stats
    >>> stats.histogram(np.array([0.5, 1.5, 2.0, np.nan]), [0.0, 1.0, 2.0]).tolist()
    [1, 2]
    """
    a = float_array(data, "data")
    e = reals(edges, "edges")
    if e.ndim != 1 or e.size < 2 or np.any(np.diff(e) < 0) or not np.all(np.isfinite(e)):
        raise ArgumentError("edges must be a finite, increasing 1-D sequence of at least 2 values")
    return np.asarray(_core._histogram(a, e.tolist()), dtype=np.int64)


def fit_gaussian(x, y, p0):
    """Least-squares fit of ``A exp(-x^2 / (2 sigma^2))`` to (x, y), as
    ``scipy.optimize.curve_fit`` would.

    Parameters
    ----------
    x, y : 1-D sequences of float
        The points (same length).
    p0 : (float, float)
        Starting (A, sigma).

    Returns
    -------
    (float, float)
        (A, sigma); sigma's sign is arbitrary.

    Raises
    ------
    ValueError
        ``x`` and ``y`` differ in length.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import stats
    >>> x = np.linspace(-4, 4, 81)
    >>> a, s = stats.fit_gaussian(x, 5.0 * np.exp(-(x**2) / 8.0), (1.0, 1.0))
    >>> round(a, 6), round(abs(s), 6)
    (5.0, 2.0)
    """
    xx = np.asarray(x, dtype=np.float64).ravel()
    yy = np.asarray(y, dtype=np.float64).ravel()
    if xx.shape != yy.shape:
        raise ShapeError(f"x and y must have the same length, got {xx.size} and {yy.size}")
    a0, s0 = (float(v) for v in p0)
    return _core._fit_gaussian(xx.tolist(), yy.tolist(), a0, s0)


def sofia2_cadence(shape) -> int:
    """SoFiA 2's sampling cadence for an array of ``shape``.

    size // 999983 (1 below 2; one less when it is a multiple of the x size).

    Parameters
    ----------
    shape : sequence of int
        The array's shape (the last three axes count).

    Returns
    -------
    int

    Examples
    --------
    >>> from skyconv import stats
    >>> stats.sofia2_cadence((10, 100, 100)), stats.sofia2_cadence((100, 512, 512))
    (1, 26)
    """
    return int(_core._sofia2_cadence([int(n) for n in shape][-3:]))


def sofia1_stride(shape) -> int:
    """SoFiA 1's sampling stride: max(1, int((size / 1e6) ** (1 / min(3, ndim)))).

    Parameters
    ----------
    shape : sequence of int
        The array's shape.

    Returns
    -------
    int

    Examples
    --------
    >>> from skyconv import stats
    >>> stats.sofia1_stride((100, 512, 512))
    2
    """
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
