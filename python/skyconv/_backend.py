"""Threads, devices and backend information."""

from __future__ import annotations

from typing import Any

from . import _core
from ._utils.device import resolve_device
from .exceptions import ArgumentError, ArgumentTypeError


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
        raise ArgumentTypeError(f"n must be an int, got {type(n).__name__}")
    if n < 1:
        raise ArgumentError(f"n must be >= 1, got {n}")
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
        ``version``, ``cpu_threads`` and ``cuda``, a dict with:

        - ``available`` (bool) and ``reason`` (why not, or None);
        - ``driver_version`` and ``nvrtc_version`` (strings like ``"12.4"``);
        - ``toolkit``: the CUDA major version (12 or 13) whose libraries are used, or None;
        - ``nvrtc`` and ``cufft``: ``{"path", "version", "cuda", "source"}`` of the library
          used (``source``: where its folder came from: ``python`` for pip's wheels,
          ``conda``, ``CUDA_HOME``, ``CUDA_PATH``, ``/usr/local/cuda``, ``LD_LIBRARY_PATH``,
          ``system``), or None;
        - ``rejected``: ``[{"path", "reason"}]`` for each library found but not used (newer
          than the driver, broken, or of another toolkit than ``SKYCONV_CUDA_VERSION``);
        - ``search_dirs``: ``[(folder, source)]`` searched, in order;
        - ``devices``: ``[{"ordinal", "name", "compute_capability", "total_memory_bytes",
          "context_created"}]`` for every GPU; ``ordinal``: the one ``device="cuda"`` means;
          ``device_name``, ``compute_capability`` and ``total_memory_bytes`` of that GPU;
        - ``context_created`` (whether any CUDA context exists) and ``kernel_cache`` (the
          folder of compiled kernels, or None when ``SKYCONV_KERNEL_CACHE=0``).

    Examples
    --------
    >>> import skyconv
    >>> info = skyconv.backend_info()
    >>> info["version"] == skyconv.__version__, isinstance(info["cuda"]["available"], bool)
    (True, True)
    """
    return _core.backend_info()


def clear_kernel_cache() -> int:
    """Remove skyconv's compiled GPU kernels from the on-disk cache.

    The cache lives in ``$SKYCONV_CACHE_DIR/kernels``, else ``$XDG_CACHE_HOME/skyconv/kernels``,
    else ``~/.cache/skyconv/kernels``; kernels are compiled again (by NVRTC, about a second a
    module) on their next use.

    Returns
    -------
    int
        The number of files removed.

    Raises
    ------
    OSError
        If a cached file cannot be removed.

    Examples
    --------
    >>> import os, tempfile
    >>> import skyconv
    >>> folder = tempfile.mkdtemp()  # a cache of our own, so the user's stays
    >>> old, os.environ["SKYCONV_CACHE_DIR"] = os.environ.get("SKYCONV_CACHE_DIR"), folder
    >>> skyconv.clear_kernel_cache()  # nothing compiled there yet
    0
    >>> _ = os.environ.pop("SKYCONV_CACHE_DIR") if old is None else os.environ.update(
    ...     SKYCONV_CACHE_DIR=old)
    """
    return _core._clear_kernel_cache()


def kernel_cache_dir() -> str | None:
    """The folder of the on-disk kernel cache.

    Returns
    -------
    str or None
        ``$SKYCONV_CACHE_DIR/kernels``, else ``$XDG_CACHE_HOME/skyconv/kernels``, else
        ``~/.cache/skyconv/kernels``; None when the cache is off (``SKYCONV_KERNEL_CACHE=0``).

    Examples
    --------
    >>> import skyconv
    >>> d = skyconv.backend.kernel_cache_dir()
    >>> d is None or d.endswith("kernels")
    True
    """
    return _core._kernel_cache_dir()


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


__all__ = [
    "backend_info",
    "clear_kernel_cache",
    "get_num_threads",
    "kernel_cache_dir",
    "last_profile",
    "resolve_device",
    "set_num_threads",
]
