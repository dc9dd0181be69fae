"""Set-up stages of the Python layer in the core's set-up log (``skyconv.setup_trace``): a
one-time host cost (the smoothing cost model, a fitted split, a measured error) is timed with
:func:`stage` and lands beside the core's own entries (CUDA libraries, context, kernel modules,
cuFFT plans, page-locked blocks, ring weights), printed to stderr as it happens under
``SKYCONV_TRACE``."""

from __future__ import annotations

import time
from contextlib import contextmanager

from .. import _core


@contextmanager
def stage(name: str, detail: str = ""):
    """Time the block as set-up stage ``name`` (recorded also when it raises)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _core._trace_record(name, detail, time.perf_counter() - t0)


__all__ = ["stage"]
