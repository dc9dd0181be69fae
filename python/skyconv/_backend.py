"""Threads, devices and backend information."""

from __future__ import annotations

from typing import Any

from . import _core


def set_num_threads(n: int) -> None:
    """Set the number of CPU threads skyconv uses for all later calls (n >= 1)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    _core.set_num_threads(n)


def get_num_threads() -> int:
    """Number of CPU threads skyconv uses.

    Set by set_num_threads, else SKYCONV_NUM_THREADS, else all cores."""
    return _core.get_num_threads()


def backend_info() -> dict[str, Any]:
    """Version, CPU threads and CUDA status.

    ``info["cuda"]`` holds ``available`` (bool), ``reason`` (why not, or None), ``device_name``,
    ``compute_capability`` ((major, minor)), ``total_memory_bytes``, ``driver_version`` and
    ``nvrtc_version`` (strings like "13.0"), and ``context_created``. Creates no CUDA context.
    """
    return _core.backend_info()


def last_profile() -> dict[str, float]:
    """Stage timings in milliseconds of the last GPU call (e.g. ``h2d``, ``kernel``, ``d2h``,
    ``total``), measured with CUDA events. Empty before any GPU call."""
    return _core.last_profile()


def resolve_device(device: str | None) -> str:
    """``"cpu"`` or ``"cuda"`` for a ``device`` argument (None: SKYCONV_DEVICE, else "auto").

    Raises DeviceError when ``"cuda"`` is asked for and no GPU works, ValueError for an unknown
    name."""
    if device is not None and not isinstance(device, str):
        raise TypeError(f"device must be a str or None, got {type(device).__name__}")
    return _core.resolve_device(device)
