"""Separable 1-D filters with scipy.ndimage's semantics, on the CPU or the GPU.

``correlate1d``, ``convolve1d``, ``gaussian_filter1d`` and ``uniform_filter1d`` take the same
arguments as their scipy.ndimage namesakes (same window placement, ``origin`` and boundary
modes ``constant``, ``nearest``, ``reflect``, ``mirror``, ``wrap`` and the ``grid-*`` aliases)
plus ``device``. A ``dask.array.Array`` input gives a lazy dask array of the same chunks, equal
to the NumPy call on the whole array (halos of the kernel's reach; ``skyconv._dask.filters``).
Inputs are float32 or float64 arrays of any number of dimensions (big-endian
and non-contiguous inputs are accepted); the output has the input's dtype and shape. Sums are
accumulated in float64 and rounded once, as scipy does.

Kernels longer than the axis are applied as scipy applies them (the boundary extension repeats
as far as the kernel reaches: ``tests/cube/test_filters.py::test_kernel_longer_than_line``);
kernels are bounded, whatever the axis: a Gaussian radius of at most 2**23 - 1 samples, a
uniform filter of at most 2**24 (``sigma=1e9`` or ``size=10**12`` is an ``ArgumentError`` that
says so, before any work).

Difference from scipy: scipy's ``uniform_filter1d`` keeps a running sum, so one NaN or inf
poisons the rest of its line; skyconv keeps non-finite values local to the windows that hold
them (finite inputs give the same result).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _core
from ._utils.args import reals, to_float
from ._utils.arrays import float_array, int_arg, normalize_axis
from ._utils.device import resolve
from ._utils.lazy import is_dask_array
from .exceptions import ArgumentError, ArgumentTypeError


def _dask_filters():
    """The Dask paths (``skyconv._dask.filters``), imported when a dask array arrives."""
    from ._dask import filters

    return filters


_MODES = (
    "constant",
    "nearest",
    "reflect",
    "mirror",
    "wrap",
    "grid-constant",
    "grid-mirror",
    "grid-wrap",
)


def _mode(mode) -> str:
    if mode not in _MODES:
        raise ArgumentError(f"mode must be one of {', '.join(map(repr, _MODES))}; got {mode!r}")
    return mode


def _weights(weights) -> list[float]:
    w = reals(weights, "weights")
    if w.ndim != 1 or w.size == 0:
        raise ArgumentError("weights must be a non-empty 1-D sequence of numbers")
    if not np.all(np.isfinite(w)):
        raise ArgumentError("weights must be finite")
    return w.tolist()


def correlate1d(input, weights, axis=-1, mode="reflect", cval=0.0, origin=0, *, device=None):
    """1-D correlation along ``axis``, as ``scipy.ndimage.correlate1d``.

    out[i] = sum_j weights[j] input[i + j - len(weights) // 2 - origin], summed in float64.

    Parameters
    ----------
    input : float32 or float64 array
        Any number of dimensions (big-endian and non-contiguous accepted).
    weights : 1-D sequence of float
        The finite filter weights.
    axis : int
        The axis to filter along (negative counts from the end).
    mode : str
        Boundary mode: ``"constant"``, ``"nearest"``, ``"reflect"``, ``"mirror"``, ``"wrap"``
        or the ``"grid-*"`` aliases (scipy's).
    cval : float
        The value beyond the edges for ``mode="constant"``.
    origin : int
        Shift of the window (scipy's).
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto").

    Returns
    -------
    array
        A new array of the input's dtype and shape (input's unit).

    Raises
    ------
    TypeError
        ``input`` is not float32/float64, or an argument of the wrong type.
    ValueError
        An unknown ``mode`` or ``device``, an axis out of range, bad weights or sizes.
    skyconv.DeviceError
        ``device="cuda"`` and no GPU works.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import filters
    >>> filters.correlate1d(np.array([1.0, 2.0, 4.0]), [1.0, 0.0, -1.0], device="cpu")
    array([-1., -3., -2.])
    """
    if is_dask_array(input):
        return _dask_filters().filter1d(
            correlate1d, "correlate", input, axis, mode,
            {"weights": weights, "cval": cval, "origin": origin}, device,
        )  # fmt: skip
    a = float_array(input, "input")
    return _core._correlate1d(
        a,
        _weights(weights),
        normalize_axis(axis, a.ndim),
        _mode(mode),
        to_float(cval, "cval"),
        int_arg(origin, "origin"),
        False,
        resolve(device).core,
    )


def convolve1d(input, weights, axis=-1, mode="reflect", cval=0.0, origin=0, *, device=None):
    """1-D convolution along ``axis``, as ``scipy.ndimage.convolve1d`` (reversed weights).

    Parameters
    ----------
    input : float32 or float64 array
        Any number of dimensions.
    weights : 1-D sequence of float
        The finite filter weights.
    axis : int
        The axis to filter along (negative counts from the end).
    mode : str
        Boundary mode: ``"constant"``, ``"nearest"``, ``"reflect"``, ``"mirror"``, ``"wrap"``
        or the ``"grid-*"`` aliases (scipy's).
    cval : float
        The value beyond the edges for ``mode="constant"``.
    origin : int
        Shift of the window (scipy's).
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto").

    Returns
    -------
    array
        A new array of the input's dtype and shape (input's unit).

    Raises
    ------
    TypeError
        ``input`` is not float32/float64, or an argument of the wrong type.
    ValueError
        An unknown ``mode`` or ``device``, an axis out of range, bad weights or sizes.
    skyconv.DeviceError
        ``device="cuda"`` and no GPU works.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import filters
    >>> filters.convolve1d(np.array([1.0, 2.0, 4.0]), [1.0, 0.0, -1.0], device="cpu")
    array([1., 3., 2.])
    """
    if is_dask_array(input):
        return _dask_filters().filter1d(
            convolve1d, "convolve", input, axis, mode,
            {"weights": weights, "cval": cval, "origin": origin}, device,
        )  # fmt: skip
    a = float_array(input, "input")
    return _core._correlate1d(
        a,
        _weights(weights),
        normalize_axis(axis, a.ndim),
        _mode(mode),
        to_float(cval, "cval"),
        int_arg(origin, "origin"),
        True,
        resolve(device).core,
    )


def gaussian_filter1d(
    input, sigma, axis=-1, mode="reflect", cval=0.0, truncate=4.0, *, radius=None, device=None
):
    """Gaussian smoothing along ``axis``, as ``scipy.ndimage.gaussian_filter1d`` (order 0).

    Parameters
    ----------
    input : float32 or float64 array
        Any number of dimensions.
    sigma : float
        Standard deviation in pixels, >= 0 (0 returns a copy).
    axis : int
        The axis to filter along (negative counts from the end).
    mode : str
        Boundary mode: ``"constant"``, ``"nearest"``, ``"reflect"``, ``"mirror"``, ``"wrap"``
        or the ``"grid-*"`` aliases (scipy's).
    cval : float
        The value beyond the edges for ``mode="constant"``.
    truncate : float
        The kernel's radius is ``int(truncate * sigma + 0.5)`` pixels...
    radius : int, optional
        ...unless given here (pixels, >= 0). The kernel is normalised to sum 1.
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto").

    Returns
    -------
    array
        A new array of the input's dtype and shape (input's unit).

    Raises
    ------
    TypeError
        ``input`` is not float32/float64, or an argument of the wrong type.
    ValueError
        An unknown ``mode`` or ``device``, an axis out of range, bad weights or sizes.
    skyconv.DeviceError
        ``device="cuda"`` and no GPU works.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import filters
    >>> x = np.zeros(9)
    >>> x[4] = 1.0
    >>> y = filters.gaussian_filter1d(x, 1.0, device="cpu")
    >>> round(float(y.sum()), 12), bool(y[4] == y.max())
    (1.0, True)
    """
    if is_dask_array(input):
        return _dask_filters().filter1d(
            gaussian_filter1d, "gaussian", input, axis, mode,
            {"sigma": sigma, "cval": cval, "truncate": truncate, "radius": radius}, device,
        )  # fmt: skip
    a = float_array(input, "input")
    sigma = to_float(sigma, "sigma")
    if not np.isfinite(sigma) or sigma < 0:
        raise ArgumentError(f"sigma must be finite and >= 0, got {sigma}")
    if radius is not None:
        radius = int_arg(radius, "radius")
        if radius < 0:
            raise ArgumentError(f"radius must be >= 0, got {radius}")
    return _core._gaussian_filter1d(
        a,
        sigma,
        normalize_axis(axis, a.ndim),
        _mode(mode),
        to_float(cval, "cval"),
        to_float(truncate, "truncate"),
        radius,
        resolve(device).core,
    )


def uniform_filter1d(input, size, axis=-1, mode="reflect", cval=0.0, origin=0, *, device=None):
    """Boxcar mean of ``size`` pixels along ``axis``, as ``scipy.ndimage.uniform_filter1d``.

    A sliding sum on the CPU (O(1) per output whatever the size); unlike scipy, a NaN or inf
    stays local to the windows that hold it.

    Parameters
    ----------
    input : float32 or float64 array
        Any number of dimensions.
    size : int
        Window length in pixels, >= 1.
    axis : int
        The axis to filter along (negative counts from the end).
    mode : str
        Boundary mode: ``"constant"``, ``"nearest"``, ``"reflect"``, ``"mirror"``, ``"wrap"``
        or the ``"grid-*"`` aliases (scipy's).
    cval : float
        The value beyond the edges for ``mode="constant"``.
    origin : int
        Shift of the window (scipy's).
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto").

    Returns
    -------
    array
        A new array of the input's dtype and shape (input's unit).

    Raises
    ------
    TypeError
        ``input`` is not float32/float64, or an argument of the wrong type.
    ValueError
        An unknown ``mode`` or ``device``, an axis out of range, bad weights or sizes.
    skyconv.DeviceError
        ``device="cuda"`` and no GPU works.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import filters
    >>> filters.uniform_filter1d(np.array([0.0, 3.0, 6.0, 9.0]), 3, mode="nearest", device="cpu")
    array([1., 3., 6., 8.])
    """
    if is_dask_array(input):
        return _dask_filters().filter1d(
            uniform_filter1d, "uniform", input, axis, mode,
            {"size": size, "cval": cval, "origin": origin}, device,
        )  # fmt: skip
    a = float_array(input, "input")
    size = int_arg(size, "size")
    if size < 1:
        raise ArgumentError(f"size must be >= 1, got {size}")
    return _core._uniform_filter1d(
        a,
        size,
        normalize_axis(axis, a.ndim),
        _mode(mode),
        to_float(cval, "cval"),
        int_arg(origin, "origin"),
        resolve(device).core,
    )


@dataclass(frozen=True)
class Gaussian:
    """A :func:`gaussian_filter1d` pass for :func:`chain`.

    Parameters
    ----------
    sigma : float
        Standard deviation in pixels.
    axis, mode, cval, truncate, radius
        As in :func:`gaussian_filter1d`.

    Examples
    --------
    >>> from skyconv.filters import Gaussian
    >>> Gaussian(2.55, axis=1).radius is None
    True
    """

    sigma: float
    axis: int = -1
    mode: str = "reflect"
    cval: float = 0.0
    truncate: float = 4.0
    radius: int | None = None


@dataclass(frozen=True)
class Uniform:
    """A :func:`uniform_filter1d` pass (boxcar of ``size`` pixels) for :func:`chain`.

    Parameters
    ----------
    size : int
        Window length in pixels.
    axis, mode, cval, origin
        As in :func:`uniform_filter1d`.

    Examples
    --------
    >>> from skyconv.filters import Uniform
    >>> Uniform(7, axis=0).size
    7
    """

    size: int
    axis: int = -1
    mode: str = "reflect"
    cval: float = 0.0
    origin: int = 0


@dataclass(frozen=True)
class Correlate:
    """A :func:`correlate1d` pass for :func:`chain`.

    Parameters
    ----------
    weights : tuple of float
        The filter weights.
    axis, mode, cval, origin
        As in :func:`correlate1d`.

    Examples
    --------
    >>> from skyconv.filters import Correlate
    >>> Correlate((0.25, 0.5, 0.25)).weights
    (0.25, 0.5, 0.25)
    """

    weights: tuple[float, ...]
    axis: int = -1
    mode: str = "reflect"
    cval: float = 0.0
    origin: int = 0


def _spec(p, ndim: int):
    if not isinstance(p, (Gaussian, Uniform, Correlate)):
        raise ArgumentTypeError(
            f"passes must hold Gaussian, Uniform or Correlate, got {type(p).__name__}"
        )
    axis = normalize_axis(p.axis, ndim)
    if isinstance(p, Gaussian):
        sigma = to_float(p.sigma, "sigma")
        if not np.isfinite(sigma) or sigma < 0:
            raise ArgumentError(f"sigma must be finite and >= 0, got {sigma}")
        radius = -1.0 if p.radius is None else float(int_arg(p.radius, "radius"))
        return (
            "gaussian",
            axis,
            _mode(p.mode),
            to_float(p.cval, "cval"),
            [sigma, to_float(p.truncate, "truncate"), radius],
        )
    if isinstance(p, Uniform):
        size = int_arg(p.size, "size")
        if size < 1:
            raise ArgumentError(f"size must be >= 1, got {size}")
        return (
            "uniform",
            axis,
            _mode(p.mode),
            to_float(p.cval, "cval"),
            [float(size), float(int_arg(p.origin, "origin"))],
        )
    return (
        "correlate",
        axis,
        _mode(p.mode),
        to_float(p.cval, "cval"),
        [float(int_arg(p.origin, "origin"))] + _weights(p.weights),
    )


def chain(input, passes, *, device=None):
    """Apply several 1-D passes in order (e.g. SoFiA's spatial Gaussians and spectral boxcar).

    Same result as calling the functions one after the other, but on the GPU the array
    crosses the bus once each way and the passes run back to back on the device.

    Parameters
    ----------
    input : float32 or float64 array
        Any number of dimensions.
    passes : sequence of Gaussian, Uniform or Correlate
        The passes, applied first to last.
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto").

    Returns
    -------
    array
        A new array of the input's dtype and shape (input's unit).

    Raises
    ------
    TypeError
        ``input`` is not float32/float64, or an argument of the wrong type.
    ValueError
        An unknown ``mode`` or ``device``, an axis out of range, bad weights or sizes.
    skyconv.DeviceError
        ``device="cuda"`` and no GPU works.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import filters
    >>> from skyconv.filters import Gaussian, Uniform
    >>> cube = np.random.default_rng(0).standard_normal((8, 16, 16)).astype(np.float32)
    >>> passes = [Gaussian(1.5, axis=2), Gaussian(1.5, axis=1), Uniform(3, axis=0)]
    >>> out = filters.chain(cube, passes, device="cpu")
    >>> one_by_one = filters.uniform_filter1d(
    ...     filters.gaussian_filter1d(filters.gaussian_filter1d(cube, 1.5, axis=2), 1.5, axis=1),
    ...     3, axis=0)
    >>> bool(np.allclose(out, one_by_one, atol=1e-6)), out.dtype
    (True, dtype('float32'))
    """
    if is_dask_array(input):
        return _dask_filters().chain(chain, input, passes, device)
    a = float_array(input, "input")
    specs = [_spec(p, a.ndim) for p in passes]
    return _core._filter_chain(a, specs, resolve(device).core)


__all__ = [
    "correlate1d",
    "convolve1d",
    "gaussian_filter1d",
    "uniform_filter1d",
    "chain",
    "Gaussian",
    "Uniform",
    "Correlate",
]
