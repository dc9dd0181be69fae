"""Argument checks shared by the public functions: dtypes, byte order, contiguity, axes."""

from __future__ import annotations

import numpy as np

from ..exceptions import ArgumentError, ArgumentTypeError, ShapeError


def float_array(a, name: str, *, min_ndim: int = 1) -> np.ndarray:
    """``a`` as a C-contiguous, native-endian float32/float64 array (copied only if needed).

    Raises TypeError naming ``name`` for non-float dtypes and ShapeError for too few dimensions.
    """
    arr = np.asarray(a)
    if arr.dtype.kind != "f" or arr.dtype.itemsize not in (4, 8):
        raise ArgumentTypeError(
            f"{name} must be a float32 or float64 array, got dtype {arr.dtype} "
            f"(convert with {name}.astype(np.float32) or np.float64)"
        )
    if arr.ndim < min_ndim:
        raise ShapeError(f"{name} must have at least {min_ndim} dimension(s), got {arr.ndim}")
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return np.ascontiguousarray(arr)


def normalize_axis(axis, ndim: int, name: str = "axis") -> int:
    """A non-negative axis index, raising ValueError naming ``name`` when out of range."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ArgumentTypeError(f"{name} must be an int, got {type(axis).__name__}")
    ax = int(axis)
    if not -ndim <= ax < ndim:
        raise ArgumentError(f"{name}={ax} is out of range for an array with {ndim} dimension(s)")
    return ax % ndim


#: Integer arguments fit in a signed 64-bit integer (what the core takes).
INT_LIMIT = 2**63 - 1


def int_arg(value, name: str) -> int:
    """An integer argument (rejects bools and floats with a TypeError naming it, and values
    outside the signed 64-bit range with a ValueError naming it)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if not -INT_LIMIT <= v <= INT_LIMIT:
        raise ArgumentError(f"{name} must be an int of magnitude below 2**63, got {v}")
    return v
