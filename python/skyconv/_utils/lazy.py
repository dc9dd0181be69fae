"""Dask as an optional dependency: recognise a dask array without importing dask, and import
dask.array only when a dask input arrives (``pip install 'skyconv[dask]'``).

Every family's Dask path (``skyconv/_dask/``) goes through these two functions, so "is this a
dask array" and "dask is missing" have one answer each.
"""

from __future__ import annotations

import sys

from ..exceptions import SkyconvError

INSTALL_HINT = "pip install 'skyconv[dask]'"


class DaskMissingError(SkyconvError, ImportError):
    """A dask array was given (or Dask was asked for) but dask is not installed."""


def is_dask_array(x) -> bool:
    """True if `x` is a ``dask.array.Array``; never imports dask (a dask array can only exist
    if dask is already imported)."""
    mod = sys.modules.get("dask.array")
    return mod is not None and isinstance(x, mod.Array)


def dask_array():
    """The ``dask.array`` module, or :class:`DaskMissingError` with the install command."""
    try:
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - exercised only without dask
        raise DaskMissingError(f"this needs dask: {INSTALL_HINT}") from exc
    return da
