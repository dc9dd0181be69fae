"""skyconv: GPU and CPU sky convolution for astronomers.

Drop-in fast replacements for healpy's SHTs and smoothing, Cygrid's gridding, SoFiA's
Smooth-and-Clip finder and DUCHAMP's à trous reconstruction. Every compute function takes a
``device`` argument: ``"auto"`` (GPU if one works, else CPU), ``"cpu"``, ``"cuda"`` or
``"cuda:N"``; the default (``None``) is the ``SKYCONV_DEVICE`` environment variable, else
``"auto"``. No CUDA context is created at import time.

This module only re-exports; each family lives in its own module or package (``sht``,
``smooth``, ``grid``, ``filters``, ``stats``, ``healpix``, ``cube``, ``atrous``), the
drop-in replacements in ``compat``, private helpers in ``_utils``.

Examples
--------
>>> import skyconv
>>> skyconv.healpix.nside2npix(4)
192
"""

from __future__ import annotations

from . import _core
from ._utils.cudalibs import search_dirs as _search_dirs
from .exceptions import (
    ArgumentError,
    ArgumentTypeError,
    CudaError,
    DeviceError,
    GpuMemoryError,
    HostMemoryError,
    InternalError,
    MissingKeyError,
    ShapeError,
    SkyconvError,
    SkyconvWarning,
    StateError,
    UnsupportedError,
)

_core._set_cuda_search_dirs(_search_dirs())

from . import filters, healpix, stats  # noqa: E402
from ._backend import (  # noqa: E402
    backend_info,
    clear_kernel_cache,
    get_num_threads,
    last_profile,
    set_num_threads,
    setup_trace,
    warmup,
)
from .atrous import AtrousResult, atrous_denoise  # noqa: E402
from .cube import smooth_and_clip  # noqa: E402
from .grid import Gridder, GridResult, HealpixTarget, Sightlines, grid  # noqa: E402
from .sht import Alm, alm2leg, alm2map, almxfl, leg2alm, leg2map, map2alm, map2leg  # noqa: E402
from .smooth import smooth_map  # noqa: E402
from .split import KernelSplit, split_kernel  # noqa: E402

__version__ = _core.__version__

__all__ = [
    "__version__",
    "backend_info",
    "clear_kernel_cache",
    "get_num_threads",
    "set_num_threads",
    "last_profile",
    "setup_trace",
    "warmup",
    "filters",
    "healpix",
    "stats",
    "alm2map",
    "map2alm",
    "Alm",
    "almxfl",
    "alm2leg",
    "leg2map",
    "map2leg",
    "leg2alm",
    "smooth_map",
    "split_kernel",
    "KernelSplit",
    "grid",
    "Gridder",
    "GridResult",
    "HealpixTarget",
    "Sightlines",
    "smooth_and_clip",
    "atrous_denoise",
    "AtrousResult",
    "SkyconvError",
    "DeviceError",
    "ShapeError",
    "ArgumentError",
    "ArgumentTypeError",
    "HostMemoryError",
    "StateError",
    "UnsupportedError",
    "MissingKeyError",
    "CudaError",
    "GpuMemoryError",
    "InternalError",
    "SkyconvWarning",
]
