"""Threads, devices and backend information."""

from __future__ import annotations

from typing import Any

from . import _core
from ._utils.device import resolve_device


def set_num_threads(n: int) -> None:
    """Set the number of CPU threads skyconv uses for all later calls.

    Parameters
    ----------
    n : int
        Number of threads, >= 1.

    Raises
    ------
    TypeError
        ``n`` is not an int.
    ValueError
        ``n`` < 1.

    Examples
    --------
    >>> import skyconv
    >>> before = skyconv.get_num_threads()
    >>> skyconv.set_num_threads(1)
    >>> skyconv.get_num_threads()
    1
    >>> skyconv.set_num_threads(before)
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    _core.set_num_threads(n)


def get_num_threads() -> int:
    """Number of CPU threads skyconv uses.

    Returns
    -------
    int
        Set by :func:`set_num_threads`, else ``SKYCONV_NUM_THREADS``, else all cores.

    Examples
    --------
    >>> import skyconv
    >>> skyconv.get_num_threads() >= 1
    True
    """
    return _core.get_num_threads()


def backend_info() -> dict[str, Any]:
    """Version, CPU threads and CUDA status. Creates no CUDA context.

    Returns
    -------
    dict
        ``version`` (str), ``cpu_threads`` (int) and ``cuda``, a dict with ``available``
        (bool), ``reason`` (why not, or None), ``device_name``, ``compute_capability``
        ((major, minor)), ``total_memory_bytes``, ``driver_version`` and ``nvrtc_version``
        (strings like "13.0"), and ``context_created``.

    Examples
    --------
    >>> import skyconv
    >>> info = skyconv.backend_info()
    >>> info["version"] == skyconv.__version__, isinstance(info["cuda"]["available"], bool)
    (True, True)
    """
    return _core.backend_info()


def last_profile() -> dict[str, float]:
    """Stage timings of the last GPU call, measured with CUDA events.

    Returns
    -------
    dict of str to float
        Milliseconds per stage (e.g. ``h2d``, ``kernel``, ``d2h``, ``total``); empty before
        any GPU call.

    Examples
    --------
    >>> import skyconv
    >>> isinstance(skyconv.last_profile(), dict)
    True
    """
    return _core.last_profile()


__all__ = ["backend_info", "get_num_threads", "last_profile", "resolve_device", "set_num_threads"]
