"""One way to check a scalar argument or an environment variable: each check raises
:class:`~skyconv.ArgumentTypeError` (a TypeError) for the wrong type and
:class:`~skyconv.ArgumentError` (a ValueError) for a wrong value, naming the argument and what
it accepts."""

from __future__ import annotations

import math
import os

import numpy as np

from ..exceptions import ArgumentError, ArgumentTypeError


def _type_name(value) -> str:
    return type(value).__name__


def int_value(value, name: str, *, min_value: int | None = None, max_value: int | None = None):
    """``value`` as a Python int in ``[min_value, max_value]`` (bools and floats refused).

    Raises
    ------
    skyconv.ArgumentTypeError
        ``value`` is not an int (a bool, a float, a str, ...).
    skyconv.ArgumentError
        ``value`` is outside the bounds; the message names ``name`` and the bounds.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentTypeError(f"{name} must be an int, got {_type_name(value)} {value!r}")
    v = int(value)
    if (min_value is not None and v < min_value) or (max_value is not None and v > max_value):
        raise ArgumentError(f"{name} must be an int {_bounds(min_value, max_value)}, got {v}")
    return v


def positive_int(value, name: str, *, max_value: int | None = None) -> int:
    """``value`` as an int >= 1 (see :func:`int_value`)."""
    return int_value(value, name, min_value=1, max_value=max_value)


def float_value(
    value,
    name: str,
    *,
    min_value: float | None = None,
    max_value: float | None = None,
    min_open: bool = False,
    unit: str = "",
) -> float:
    """``value`` as a finite Python float in the given range.

    ``min_open`` makes the lower bound exclusive (``> min_value``). ``unit`` (e.g. ``"radians"``)
    is named in the message.

    Raises
    ------
    skyconv.ArgumentTypeError
        ``value`` is not a real number.
    skyconv.ArgumentError
        ``value`` is NaN, infinite or outside the range.
    """
    if isinstance(value, (bool, str, bytes)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        if not (isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf"):
            raise ArgumentTypeError(
                f"{name} must be a real number{_unit(unit)}, got {_type_name(value)} {value!r}"
            )
    v = float(value)
    lo_bad = min_value is not None and (v <= min_value if min_open else v < min_value)
    hi_bad = max_value is not None and v > max_value
    if not math.isfinite(v) or lo_bad or hi_bad:
        lo = ">" if min_open else ">="
        parts = []
        if min_value is not None:
            parts.append(f"{lo} {min_value:g}")
        if max_value is not None:
            parts.append(f"<= {max_value:g}")
        rng = " and ".join(parts)
        raise ArgumentError(
            f"{name} must be a finite number{' ' + rng if rng else ''}{_unit(unit)}, got {value!r}"
        )
    return v


def to_float(value, name: str) -> float:
    """``float(value)`` as scipy takes it (numbers, 0-d arrays, numeric strings), raising
    ArgumentTypeError naming ``name`` where ``float()`` fails (lists, None, "abc", ...)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"{name} must be a real number, got {_type_name(value)} {value!r}"
        ) from None


def reals(value, name: str) -> np.ndarray:
    """``np.asarray(value, dtype=float64)``, raising ArgumentTypeError naming ``name`` where
    that fails (strings, objects, ragged lists)."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"{name} must be a real number or an array of them, got {_type_name(value)} "
            f"{str(value)[:60]}"
        ) from None


def one_of(value, name: str, choices) -> str:
    """``value`` if it is one of ``choices`` (strings), else ArgumentError listing them.

    Raises
    ------
    skyconv.ArgumentTypeError
        ``value`` is not a str.
    skyconv.ArgumentError
        ``value`` is not one of ``choices``.
    """
    choices = tuple(choices)
    if not isinstance(value, str):
        raise ArgumentTypeError(
            f"{name} must be one of {_listing(choices)}, got {_type_name(value)} {value!r}"
        )
    if value not in choices:
        raise ArgumentError(f"{name} must be one of {_listing(choices)}, got {value!r}")
    return value


def env_choice(var: str, choices, default: str) -> str:
    """The environment variable ``var`` (stripped, lower case) if one of ``choices``; ``default``
    when unset or empty; ArgumentError naming ``var`` otherwise."""
    raw = os.environ.get(var, "")
    v = raw.strip().lower()
    if not v:
        return default
    if v not in choices:
        raise ArgumentError(
            f"environment variable {var} must be one of {_listing(choices)} or unset, got {raw!r}"
        )
    return v


def env_flag(var: str) -> bool:
    """A 0/1 environment variable (unset or empty: False); ArgumentError naming it otherwise."""
    v = env_choice(var, ("0", "1", "false", "true", "no", "yes", "off", "on"), "0")
    return v in ("1", "true", "yes", "on")


def env_dir(var: str) -> str | None:
    """A folder named by the environment variable ``var`` (None when unset or empty).

    Raises
    ------
    skyconv.ArgumentError
        The value names an existing file that is not a folder.
    """
    v = os.environ.get(var, "")
    if not v.strip():
        return None
    if os.path.exists(v) and not os.path.isdir(v):
        raise ArgumentError(f"environment variable {var} must name a folder, got the file {v!r}")
    return v


def _bounds(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f"in {lo}..{hi}"
    if lo is not None:
        return f">= {lo}"
    return f"<= {hi}"


def _unit(unit: str) -> str:
    return f" ({unit})" if unit else ""


def _listing(choices) -> str:
    c = [repr(x) for x in choices]
    return c[0] if len(c) == 1 else ", ".join(c[:-1]) + " or " + c[-1]


__all__ = [
    "env_choice",
    "env_dir",
    "env_flag",
    "float_value",
    "int_value",
    "one_of",
    "positive_int",
    "reals",
    "to_float",
]
