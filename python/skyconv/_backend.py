"""Threads, devices and backend information."""

from __future__ import annotations

import os
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
        - ``device_count``: the number of GPUs this process sees, and ``visible_devices``:
          ``CUDA_VISIBLE_DEVICES`` as set (None: unset). Under dask-cuda's
          ``LocalCUDACluster`` each worker sees one GPU, its ordinal 0 (``"cuda"``);
        - ``context_created`` (whether any CUDA context exists) and ``kernel_cache`` (the
          folder of compiled kernels, or None when ``SKYCONV_KERNEL_CACHE=0``);
        - ``nvrtc_loaded`` and ``cufft_loaded``: whether the library has been opened in this
          process, and ``libraries_remembered``: whether the choice above came from the
          on-disk record of an earlier process (then NVRTC is opened only when a kernel is
          not in the cache, and cuFFT at the first FFT).

    Examples
    --------
    >>> import skyconv
    >>> info = skyconv.backend_info()
    >>> info["version"] == skyconv.__version__, isinstance(info["cuda"]["available"], bool)
    (True, True)
    """
    info = _core.backend_info()
    cuda = info["cuda"]
    cuda["device_count"] = len(cuda.get("devices") or ())
    cuda["visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return info


def clear_kernel_cache() -> int:
    """Remove skyconv's compiled GPU kernels from the on-disk cache.

    The cache lives in ``$SKYCONV_CACHE_DIR/kernels``, else ``$XDG_CACHE_HOME/skyconv/kernels``,
    else ``~/.cache/skyconv/kernels``; kernels are compiled again (by NVRTC, about a second a
    module) on their next use. The loader's remembered choice of CUDA libraries (``cuda_libs``
    beside it) is removed too: the next process searches again.

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


def setup_trace(clear: bool = False) -> list[dict[str, Any]]:
    """The one-time set-up costs this process has paid, in order: where a first call's time
    goes beyond the work itself.

    Each entry is a stage of the core (``"cuda libraries"``: the search for NVRTC and cuFFT;
    ``"library open"``: a dlopen; ``"driver init"``: loading libcuda and cuInit; ``"context"``:
    creating a GPU's primary context; ``"module cache read"``, ``"nvrtc compile"``,
    ``"module load"``: a kernel module from the CUBIN cache or NVRTC into the context;
    ``"cufft plan"``; ``"staging alloc"`` and ``"pinned block"``: page-locked host memory;
    ``"ring weights"``; ``"peer access"``: one GPU's access to another's memory, enabled once
    per pair for the multi-GPU SHT) or of the Python layer (``"smooth cost model"``,
    ``"smooth split"``, ``"smooth ring error"``, ``"smooth grid errors"``, ``"smooth choice"``).
    Set
    ``SKYCONV_TRACE=1`` to have each printed to stderr as it happens.

    Parameters
    ----------
    clear : bool
        Forget the entries after returning them (to see only those of the next call).

    Returns
    -------
    list of dict
        ``{"stage": str, "detail": str, "seconds": float, "at": float}``, oldest first;
        ``at`` is when the stage ended, in seconds since the log's first use. At most 4096
        entries are kept (the oldest dropped).

    Examples
    --------
    >>> import skyconv
    >>> all({"stage", "detail", "seconds", "at"} <= set(e) for e in skyconv.setup_trace())
    True
    """
    out = _core._trace_entries()
    if clear:
        _core._trace_clear()
    return out


def warmup(device=None, modules=None, fft: bool = True) -> list[str]:
    """Pay a GPU's one-time set-up now, so that the first real call does not: create the
    device's CUDA context, load the kernel modules (from the on-disk cache, else compiled by
    NVRTC) and open cuFFT. Opt-in: ``import skyconv`` never creates a context (a context in
    the parent process would break ``fork``-based multiprocessing).

    Parameters
    ----------
    device : str or None
        ``"cuda"``, ``"cuda:N"`` or ``"auto"``/None (the GPU when there is one; on a machine
        without one nothing is done). ``"cpu"`` does nothing.
    modules : sequence of str, optional
        Kernel modules to load (``"sht"``, ``"ringfft"``, ``"smooth"``, ``"grid"``,
        ``"atrous"``, ``"filters"``, ``"select"``, ``"scfind"``); default all. ``"filters"``
        loads both of its halves (float32 and float64; a call compiles only its own, ~3 s).
        ``"scfind"`` also compiles the boxcar kernels of SoFiA-2's default kernels on float32
        cubes (other kernel sets and float64 cubes compile theirs at their first call, ~1-2 s).
    fft : bool
        Also open cuFFT (needed by the SHTs and the ring smoothing).

    Returns
    -------
    list of str
        The modules loaded (empty on the CPU).

    Raises
    ------
    skyconv.DeviceError
        ``device="cuda"`` and no GPU works.
    skyconv.ArgumentError
        An unknown device or module name.
    skyconv.ArgumentTypeError
        ``modules`` is not a sequence of str.

    Examples
    --------
    >>> import skyconv
    >>> skyconv.warmup("cpu")
    []
    """
    from ._utils.device import resolve

    if modules is not None:
        if isinstance(modules, str) or not all(isinstance(m, str) for m in modules):
            raise ArgumentTypeError(f"modules must be a sequence of str, got {modules!r}")
        modules = list(modules)
    dev = resolve(device)
    if not dev.is_cuda:
        return []
    return _core._warmup(dev.index or 0, modules, bool(fft))


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
    "setup_trace",
    "warmup",
]
