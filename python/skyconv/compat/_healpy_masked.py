"""healpy's masked-map conventions: masked arrays in, UNSEEN inside, masked arrays out.

A map given as a numpy masked array, or a sequence of them, is filled with UNSEEN where masked;
a function that received one returns a masked array, masked where the result is UNSEEN (within
healpy's tolerance, rtol 1e-5, atol 1e-8).
"""

from __future__ import annotations

import functools

import numpy as np

from ..sht import UNSEEN


def is_ma(m) -> bool:
    """Whether ``m`` is a masked array or a non-empty sequence whose first map is one."""
    if hasattr(m, "filled"):
        return True
    try:
        return len(m) > 0 and hasattr(m[0], "filled")
    except TypeError:
        return False


def ma_to_array(m):
    """``m`` with masked pixels set to UNSEEN (a plain array); other input unchanged."""
    if hasattr(m, "filled"):
        return m.filled(UNSEEN)
    if is_ma(m):
        return np.array([np.ma.asarray(mm).filled(UNSEEN) for mm in m])
    return m


def to_ma(m):
    """A masked array of ``m``, masked where it is UNSEEN."""
    return np.ma.masked_values(np.array(m), UNSEEN, rtol=1e-5, atol=1e-8, copy=False)


def accept_ma(f):
    """Let ``f(map_in, ...)`` take masked maps: fill them, and mask the result."""

    @functools.wraps(f)
    def wrapper(map_in, *args, **kwargs):
        masked = is_ma(map_in)
        out = f(ma_to_array(map_in), *args, **kwargs)
        return to_ma(out) if masked else out

    return wrapper


__all__ = ["UNSEEN", "accept_ma", "is_ma", "ma_to_array", "to_ma"]
