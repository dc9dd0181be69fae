"""Separable 1-D filters with scipy.ndimage's semantics, on the CPU or the GPU.

``correlate1d``, ``convolve1d``, ``gaussian_filter1d`` and ``uniform_filter1d`` take the same
arguments as their scipy.ndimage namesakes (same window placement, ``origin`` and boundary
modes ``constant``, ``nearest``, ``reflect``, ``mirror``, ``wrap`` and the ``grid-*`` aliases)
plus ``device``. Inputs are float32 or float64 arrays of any number of dimensions (big-endian
and non-contiguous inputs are accepted); the output has the input's dtype and shape. Sums are
accumulated in float64 and rounded once, as scipy does.

Difference from scipy: scipy's ``uniform_filter1d`` keeps a running sum, so one NaN or inf
poisons the rest of its line; skyconv keeps non-finite values local to the windows that hold
them (finite inputs give the same result).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _core
from ._arrays import float_array, int_arg, normalize_axis

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
        raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}; got {mode!r}")
    return mode


def _weights(weights) -> list[float]:
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise ValueError("weights must be a non-empty 1-D sequence of numbers")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite")
    return w.tolist()


def correlate1d(input, weights, axis=-1, mode="reflect", cval=0.0, origin=0, *, device=None):
    """1-D correlation along ``axis``.

    ``out[i] = sum_j weights[j] * input[i + j - len(weights)//2 - origin]``.

    Same semantics as ``scipy.ndimage.correlate1d``. ``device``: "auto", "cpu" or "cuda"
    (None: SKYCONV_DEVICE, else "auto"). Returns a new array of the input's dtype and shape.
    """
    a = float_array(input, "input")
    return _core._correlate1d(
        a,
        _weights(weights),
        normalize_axis(axis, a.ndim),
        _mode(mode),
        float(cval),
        int_arg(origin, "origin"),
        False,
        device,
    )


def convolve1d(input, weights, axis=-1, mode="reflect", cval=0.0, origin=0, *, device=None):
    """1-D convolution along ``axis``, as ``scipy.ndimage.convolve1d`` (reversed weights)."""
    a = float_array(input, "input")
    return _core._correlate1d(
        a,
        _weights(weights),
        normalize_axis(axis, a.ndim),
        _mode(mode),
        float(cval),
        int_arg(origin, "origin"),
        True,
        device,
    )


def gaussian_filter1d(
    input, sigma, axis=-1, mode="reflect", cval=0.0, truncate=4.0, *, radius=None, device=None
):
    """Gaussian smoothing along ``axis``, as ``scipy.ndimage.gaussian_filter1d`` (order 0).

    ``sigma`` is the standard deviation in pixels (0 returns a copy); the kernel has
    ``radius = int(truncate * sigma + 0.5)`` unless ``radius`` is given, and is normalised to
    sum 1.
    """
    a = float_array(input, "input")
    sigma = float(sigma)
    if not np.isfinite(sigma) or sigma < 0:
        raise ValueError(f"sigma must be finite and >= 0, got {sigma}")
    if radius is not None:
        radius = int_arg(radius, "radius")
        if radius < 0:
            raise ValueError(f"radius must be >= 0, got {radius}")
    return _core._gaussian_filter1d(
        a,
        sigma,
        normalize_axis(axis, a.ndim),
        _mode(mode),
        float(cval),
        float(truncate),
        radius,
        device,
    )


def uniform_filter1d(input, size, axis=-1, mode="reflect", cval=0.0, origin=0, *, device=None):
    """Boxcar mean of ``size`` pixels along ``axis``, as ``scipy.ndimage.uniform_filter1d``.

    Runs as a sliding sum on the CPU (O(1) per output whatever the size).
    """
    a = float_array(input, "input")
    size = int_arg(size, "size")
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    return _core._uniform_filter1d(
        a,
        size,
        normalize_axis(axis, a.ndim),
        _mode(mode),
        float(cval),
        int_arg(origin, "origin"),
        device,
    )


@dataclass(frozen=True)
class Gaussian:
    """A ``gaussian_filter1d`` pass for :func:`chain` (sigma in pixels)."""

    sigma: float
    axis: int = -1
    mode: str = "reflect"
    cval: float = 0.0
    truncate: float = 4.0
    radius: int | None = None


@dataclass(frozen=True)
class Uniform:
    """A ``uniform_filter1d`` pass (boxcar of ``size`` pixels) for :func:`chain`."""

    size: int
    axis: int = -1
    mode: str = "reflect"
    cval: float = 0.0
    origin: int = 0


@dataclass(frozen=True)
class Correlate:
    """A ``correlate1d`` pass for :func:`chain`."""

    weights: tuple[float, ...]
    axis: int = -1
    mode: str = "reflect"
    cval: float = 0.0
    origin: int = 0


def _spec(p, ndim: int):
    if not isinstance(p, (Gaussian, Uniform, Correlate)):
        raise TypeError(f"passes must hold Gaussian, Uniform or Correlate, got {type(p).__name__}")
    axis = normalize_axis(p.axis, ndim)
    if isinstance(p, Gaussian):
        sigma = float(p.sigma)
        if not np.isfinite(sigma) or sigma < 0:
            raise ValueError(f"sigma must be finite and >= 0, got {sigma}")
        radius = -1.0 if p.radius is None else float(int_arg(p.radius, "radius"))
        return ("gaussian", axis, _mode(p.mode), float(p.cval), [sigma, float(p.truncate), radius])
    if isinstance(p, Uniform):
        size = int_arg(p.size, "size")
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        return (
            "uniform",
            axis,
            _mode(p.mode),
            float(p.cval),
            [float(size), float(int_arg(p.origin, "origin"))],
        )
    return (
        "correlate",
        axis,
        _mode(p.mode),
        float(p.cval),
        [float(int_arg(p.origin, "origin"))] + _weights(p.weights),
    )


def chain(input, passes, *, device=None):
    """Apply several 1-D passes in order, e.g. SoFiA's spatial Gaussian and spectral boxcar::

        chain(cube, [Gaussian(2.55, axis=2), Gaussian(2.55, axis=1), Uniform(7, axis=0)])

    Same result as calling the functions one after the other, but on the GPU the array crosses
    the bus once each way and the passes run back to back on the device.
    """
    a = float_array(input, "input")
    specs = [_spec(p, a.ndim) for p in passes]
    return _core._filter_chain(a, specs, device)


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
