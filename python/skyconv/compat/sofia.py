"""Drop-in for SoFiA 1.3.2's Smooth-and-Clip finder, ``sofia.pyfind.SCfinder_mem``.

``SCfinder_mem`` has SoFiA's signature and behaviour (see its docstring); ``install()`` puts it
in place of ``sofia.pyfind.SCfinder_mem`` so an unchanged SoFiA 1 pipeline runs on skyconv.

Decisions where SoFiA 1 is loose: noise is measured without SoFiA's optional second pass
(``twoPass``; SCfinder_mem never asks for it); a 2-D cube is treated as one channel (SoFiA
itself fails on 2-D input); a float mask or a mask of another shape is refused with
TypeError/ShapeError; ``perSCkernel=True`` (per-kernel noise normalisation) is not supported.
The histogram Gaussian fits of rmsMode "negative" and "gauss" are done by scipy's
``curve_fit`` exactly as SoFiA does (skyconv counts the histograms); without scipy skyconv's own
least-squares fit is used (it converges further than ``curve_fit``, ~1e-6 relative apart).
Infinite values are left out of the noise statistics (SoFiA counts them) and stay local to
their smoothing windows.
"""

from __future__ import annotations

import math
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import _core
from .._arrays import float_array
from .._backend import get_num_threads
from .._errors import ShapeError
from .._utils.lazy import is_dask_array
from ..exceptions import (
    ArgumentError,
    ArgumentTypeError,
    MissingKeyError,
    UnsupportedError,
)
from ..stats import scipy_fitter, sofia1_stride

FWHM_CONST = 2.0 * math.sqrt(2.0 * math.log(2.0))

_MODES = ("constant", "nearest", "reflect", "mirror", "wrap")
_original = None


def _header_value(header, key):
    try:
        return float(header[key])
    except (KeyError, TypeError, IndexError):
        raise MissingKeyError(f"kernelUnit='world' needs {key} in the header") from None


def _kernel_spec(kernel, kernelUnit, header):
    try:
        kx, ky, kz, kt = kernel
    except (TypeError, ValueError):
        raise ArgumentError(f"each kernel must be [kx, ky, kz, 'b'|'g'], got {kernel!r}") from None
    kx, ky, kz = float(kx), float(ky), float(kz)
    if kernelUnit in ("world", "w"):
        kx = abs(kx / _header_value(header, "CDELT1"))
        ky = abs(ky / _header_value(header, "CDELT2"))
        kz = abs(kz / _header_value(header, "CDELT3"))
    if kt == "b":
        kz = math.ceil(kz)
    sx = sy = 0.0
    if kx + ky:
        # scipy's gaussian_filter skips axes with sigma <= 1e-15
        sy = ky / FWHM_CONST if ky / FWHM_CONST > 1e-15 else 0.0
        sx = kx / FWHM_CONST if kx / FWHM_CONST > 1e-15 else 0.0
    zk, zv = "none", 0.0
    if kz:
        if kz < 0:
            raise ArgumentError(f"spectral kernel size must be >= 0, got {kz}")
        if kt == "b":
            zk, zv = "boxcar", float(kz)
        elif kt == "g":
            zk, zv = "gaussian", kz / FWHM_CONST
    return ("gaussian", sy, sx, zk, zv, False), (kx, ky, kz, kt)


def _by_planes(fn, n):
    """``fn(lo, hi)`` over slices of the first axis's ``n`` planes on skyconv's threads: NumPy
    releases the GIL, so the mask's passes and their first-touch page faults (most of their
    time on a fresh array) spread over the cores."""
    parts = min(get_num_threads(), n)
    if parts <= 1:
        fn(0, n)
        return
    edges = [n * i // parts for i in range(parts + 1)]
    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(fn, edges[:-1], edges[1:]))


def SCfinder_mem(
    cube,
    mask,
    header,
    t0=None,
    kernels=[[0, 0, 0, "b"]],  # noqa: B006 (SoFiA's signature; never mutated)
    threshold=3.5,
    sizeFilter=0,
    maskScaleXY=2.0,
    maskScaleZ=2.0,
    kernelUnit="pixel",
    edgeMode="constant",
    rmsMode="negative",
    fluxRange="all",
    verbose=0,
    perSCkernel=False,
    scaleX=False,
    scaleY=False,
    scaleZ=True,
    edgeX=0,
    edgeY=0,
    edgeZ=0,
    method="1d2d",
    windowSpatial=20,
    windowSpectral=20,
    gridSpatial=0,
    gridSpectral=0,
    interpolation="none",
    device=None,
    _slab_planes=None,
):
    """SoFiA 1.3.2's Smooth-and-Clip finder; ORs 1 into ``mask`` in place and returns None.

    cube: (z, y, x) float32/float64 array (big-endian accepted; NaN = blank). mask: integer
    (or boolean) array of the cube's shape, modified in place: ``mask |= |smoothed| >=
    threshold · rms``. header: dict or astropy Header (CDELT1-3 used when
    ``kernelUnit="world"``). kernels: ``[kx, ky, kz, 'b'|'g']`` in list order — kx, ky spatial
    Gaussian FWHM, kz spectral boxcar width (rounded up) or Gaussian FWHM, in pixels (or world
    units divided by |CDELTn|). Per kernel: copy, NaN → 0, voxels with mask > 0 set to
    ±maskScaleXY·rms (rms of the original cube; zeros stay 0), Gaussian smoothing of y and x
    (truncate 4, ``mode=edgeMode``), boxcar/Gaussian along z, NaN restored, noise of the
    smoothed cube, threshold. rmsMode: "negative" (Gaussian fit to the negative-flux
    histogram), "gauss" (Gaussian fit to the flux histogram), "mad" (1.4826·median|x|), "std"
    (sqrt(Σx²/n)), on every s-th plane/row/column, s = max(1, int((size/1e6)^(1/3))).
    fluxRange: "all", "negative", "positive". sizeFilter, maskScaleZ, t0 and the
    noise-scaling arguments are accepted and unused, as in SoFiA. ``device``: skyconv's
    device (None: SKYCONV_DEVICE, else "auto").
    """
    if perSCkernel:
        raise UnsupportedError("perSCkernel=True (per-kernel noise scaling) is not supported")
    if is_dask_array(cube) or is_dask_array(mask):
        raise ArgumentTypeError(
            "SCfinder_mem updates its NumPy mask in place, which a dask array cannot be; for "
            "dask cubes use skyconv.smooth_and_clip (returns a lazy dask mask), or pass "
            "cube.compute()"
        )
    a = float_array(cube, "cube")
    if a.ndim not in (2, 3):
        raise ShapeError(f"cube must be 3-D (z, y, x) or 2-D, got {a.ndim} dimension(s)")
    if not isinstance(mask, np.ndarray):
        raise ArgumentTypeError("mask must be a NumPy integer array (it is updated in place)")
    if mask.dtype.kind not in "iub":
        raise ArgumentTypeError(f"mask must have an integer dtype, got {mask.dtype}")
    if mask.shape != a.shape:
        raise ShapeError(f"mask has shape {mask.shape}, the cube has {a.shape}")
    if not mask.flags.writeable:
        raise ArgumentError("mask must be writeable (it is updated in place)")
    if edgeMode not in _MODES:
        raise ArgumentError(f"edgeMode must be one of {_MODES}, got {edgeMode!r}")
    if fluxRange not in ("all", "positive", "negative"):
        warnings.warn(
            f"Illegal value of fluxRange = '{fluxRange}'; using 'all' instead.", stacklevel=2
        )
        fluxRange = "all"
    if rmsMode not in ("std", "mad", "negative", "gauss"):
        warnings.warn(f"Illegal value of rmsMode = '{rmsMode}'; using 'mad' instead.", stacklevel=2)
        rmsMode = "mad"
    threshold = float(threshold)
    specs, labels = [], []
    for kern in kernels:
        spec, label = _kernel_spec(kern, kernelUnit, header)
        specs.append(spec)
        labels.append(label)
    cube3 = a.reshape((1,) + a.shape) if a.ndim == 2 else a
    # One byte a voxel, MASKED where the mask is > 0, written in one pass (no temporaries).
    work = np.empty(cube3.shape, np.uint8)
    flat = work.reshape(mask.shape)  # a view: work is contiguous

    def load(lo, hi):
        np.greater(mask[lo:hi], 0, out=flat[lo:hi].view(np.bool_))

    _by_planes(load, mask.shape[0])
    stride = sofia1_stride(a.shape)

    def report(i, rms):
        if verbose:
            kx, ky, kz, kt = labels[i]
            sys.stdout.write(f"    Filter {kx} {ky} {kz} {kt} ... rms = {rms:.3e}\n")

    _core._scfind(
        cube3,
        work,
        specs,
        edgeMode,
        threshold,
        True,
        ("sign", float(maskScaleXY)),
        ("sofia1:" + rmsMode, fluxRange, False),
        ("stride", stride),
        slab_planes=_slab_planes,
        progress=report if verbose else None,
        fitter=scipy_fitter(),
        device=device,
    )

    # The engine returns MASKED (1) | DETECTED (2) only: DETECTED becomes SoFiA's 1, in place.
    def store(lo, hi):
        found = np.right_shift(flat[lo:hi], 1, out=flat[lo:hi])
        np.bitwise_or(mask[lo:hi], found, out=mask[lo:hi], casting="unsafe")

    _by_planes(store, mask.shape[0])


def install() -> bool:
    """Replace ``sofia.pyfind.SCfinder_mem`` with skyconv's; False if SoFiA 1 is not importable."""
    global _original
    try:
        from sofia import pyfind
    except ImportError:
        return False
    if pyfind.SCfinder_mem is not SCfinder_mem:
        _original = pyfind.SCfinder_mem
        pyfind.SCfinder_mem = SCfinder_mem
    return True


def uninstall() -> bool:
    """Put SoFiA's own ``SCfinder_mem`` back; False if nothing was installed."""
    global _original
    if _original is None:
        return False
    from sofia import pyfind

    pyfind.SCfinder_mem = _original
    _original = None
    return True


__all__ = ["SCfinder_mem", "install", "uninstall"]
