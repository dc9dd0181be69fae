"""Smooth-and-Clip source finding on spectral-line cubes (SoFiA 2's S+C finder).

For every combination of a spatial kernel (Gaussian, FWHM in pixels) and a spectral kernel
(boxcar, width in channels), the cube is copied, voxels already in the mask are replaced by
``copysign(replacement · rms, x)`` (rms of the original cube), the copy is smoothed (NaN
counted as 0, restored afterwards), its noise is measured and every voxel with
``|smoothed| > threshold · noise`` joins the mask.

By default every step follows SoFiA-2 2.5.1 exactly, so that the mask equals SoFiA-2's raw
S+C mask voxel for voxel: the spatial Gaussian is SoFiA-2's choice of 3–6 repeated boxcars,
boxcars are running means in the cube's precision (float32 for float32 cubes) computed
backwards from the end of each line with zero padding (rows, then columns, then spectra), the
noise sample walks backwards from the end of the cube, and the statistics are SoFiA-2's own
(see ``precision``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _core
from . import stats as _stats  # noqa: F401  (makes skyconv.stats importable with skyconv)
from ._arrays import float_array
from ._errors import ShapeError
from ._utils.args import to_float
from ._utils.device import resolve
from ._utils.lazy import is_dask_array
from .exceptions import ArgumentError, ArgumentTypeError

#: FWHM = FWHM_CONST · σ for a Gaussian.
FWHM_CONST = 2.0 * np.sqrt(2.0 * np.log(2.0))

_MODES = ("constant", "nearest", "reflect", "mirror", "wrap")


@dataclass
class NoiseReport:
    """Noise values of one Smooth-and-Clip run, in the data's units.

    ``rms0`` is the noise of the original cube; ``kernels[i] = (fwhm_xy, width_z)`` and
    ``rms[i]`` the noise of the cube smoothed with it, in the order the kernels ran.
    """

    rms0: float
    kernels: list = field(default_factory=list)
    rms: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(zip(self.kernels, self.rms, strict=True))


def _kernel_list(values, name, *, integer):
    try:
        vals = [float(v) for v in np.atleast_1d(np.asarray(values, dtype=np.float64))]
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{name} must be a sequence of numbers") from None
    if not vals:
        raise ArgumentError(f"{name} must not be empty")
    for v in vals:
        if not np.isfinite(v) or v < 0:
            raise ArgumentError(f"{name} must be finite and >= 0, got {v}")
        if integer and v != int(v):
            raise ArgumentError(f"{name} must be whole numbers of channels, got {v}")
    return sorted(set(vals))


def _check_mask(mask, shape):
    if mask is None:
        return np.zeros(shape, dtype=np.uint8)
    m = np.asarray(mask)
    if m.dtype.kind not in "biu":
        raise ArgumentTypeError(f"mask must be a boolean or integer array, got dtype {m.dtype}")
    if m.shape != shape:
        raise ShapeError(f"mask has shape {m.shape}, the cube has {shape}")
    return (m != 0).astype(np.uint8)


@dataclass(frozen=True)
class _Run:
    """The checked settings of one Smooth-and-Clip call, in the core's terms (shared by the
    NumPy path and the Dask path, ``skyconv._dask.cube``)."""

    specs: list
    labels: list
    threshold: float
    replace: tuple
    noise: tuple
    sampling: tuple
    exact: bool
    edge_mode: str


def _setup(
    ndim, shape, kernels_xy, kernels_z, threshold, replacement, statistic, flux_range,
    spectral, spatial, edge_mode, precision,
) -> _Run:  # fmt: skip
    """Check :func:`smooth_and_clip`'s settings for a cube of ``shape``; the core's specs."""
    if ndim not in (2, 3):
        raise ShapeError(f"cube must be 3-D (z, y, x) or 2-D (y, x), got {ndim} dimension(s)")
    if spectral not in ("boxcar", "gaussian"):
        raise ArgumentError(f"spectral must be 'boxcar' or 'gaussian', got {spectral!r}")
    if spatial not in ("boxcar", "boxcar_approx", "gaussian"):
        raise ArgumentError(
            f"spatial must be 'boxcar', 'boxcar_approx' or 'gaussian', got {spatial!r}"
        )
    if precision not in ("sofia2", "float64"):
        raise ArgumentError(f"precision must be 'sofia2' or 'float64', got {precision!r}")
    if statistic not in ("mad", "std", "gauss"):
        raise ArgumentError(f"statistic must be 'mad', 'std' or 'gauss', got {statistic!r}")
    if flux_range not in ("negative", "full", "all", "positive"):
        raise ArgumentError(
            f"flux_range must be 'negative', 'full' or 'positive', got {flux_range!r}"
        )
    if edge_mode not in _MODES:
        raise ArgumentError(f"edge_mode must be one of {_MODES}, got {edge_mode!r}")
    exact = precision == "sofia2"
    if exact and edge_mode != "constant":
        raise ArgumentError(
            "precision='sofia2' pads with zeros as SoFiA-2 does: use edge_mode='constant', "
            f"or precision='float64' for edge_mode={edge_mode!r}"
        )
    threshold = to_float(threshold, "threshold")
    if not np.isfinite(threshold) or threshold < 0:
        raise ArgumentError(f"threshold must be finite and >= 0, got {threshold}")
    replacement = to_float(replacement, "replacement")
    if np.isnan(replacement):
        raise ArgumentError("replacement must be a number")
    xy = _kernel_list(kernels_xy, "kernels_xy", integer=False)
    zs = _kernel_list(kernels_z, "kernels_z", integer=spectral == "boxcar")
    if spectral == "boxcar":
        zs = sorted({int(z) + 1 if int(z) % 2 == 0 and z > 0 else int(z) for z in zs})
    if ndim == 2:
        zs = [0]
    shape3 = (1,) + tuple(shape) if ndim == 2 else tuple(shape)

    specs, labels = [], []
    for k in xy:
        for z in zs:
            sigma = k / FWHM_CONST
            zk = "none" if z == 0 else spectral
            zv = float(z) if spectral == "boxcar" else z / FWHM_CONST
            specs.append((spatial, sigma, sigma, zk, zv, k == 0 and z == 0))
            labels.append((k, z))
    cadence = int(_core._sofia2_cadence(list(shape3)))
    rep = ("copysign", replacement) if replacement >= 0 else ("none", 0.0)
    rng = "full" if flux_range == "all" else flux_range
    noise = (
        ("sofia2x:" if exact else "sofia2:") + statistic,
        rng,
        False,
    )
    sampling = ("backward" if exact else "cadence", cadence)
    return _Run(specs, labels, threshold, rep, noise, sampling, exact, edge_mode)


def smooth_and_clip(
    cube,
    kernels_xy=(0, 3, 6),
    kernels_z=(0, 3, 7, 15),
    threshold=5.0,
    replacement=2.0,
    statistic="mad",
    flux_range="negative",
    spectral="boxcar",
    spatial="boxcar",
    edge_mode="constant",
    mask=None,
    device=None,
    *,
    precision="sofia2",
    return_noise=False,
    progress=None,
    scratch=None,
    _slab_planes=None,
):
    """SoFiA 2's Smooth-and-Clip finder; returns a uint8 mask (1 = source) of the cube's shape.

    Parameters
    ----------
    cube : float32 or float64 array (z, y, x), or (y, x) for a single channel (then
        ``kernels_z`` is ignored). NaN voxels are blank: smoothed as 0, never in the mask.
    kernels_xy : spatial Gaussian FWHMs in pixels (0 = none); sorted, duplicates dropped.
    kernels_z : spectral kernel widths in channels (0 = none); sorted. For ``spectral="boxcar"``
        whole numbers, an even width n becomes n + 1 (as SoFiA 2); for ``"gaussian"`` FWHMs.
    threshold : clip level in units of each smoothed cube's noise (|x| > threshold · noise).
    replacement : voxels already in the mask become ``copysign(replacement · rms0, x)`` before
        smoothing (rms0: noise of the original cube); < 0 disables replacement.
    statistic : ``"mad"`` (1.482602218505602·median|x|), ``"std"`` (sqrt(mean x²)) or
        ``"gauss"`` (Gaussian fitted to the histogram), all about 0, on SoFiA 2's sample of
        about 10⁶ voxels (cadence c = size // 999983, 1 below 2, one less when a multiple of
        the x size).
    flux_range : ``"negative"``, ``"full"`` or ``"positive"``: which values the noise uses.
    spectral : ``"boxcar"`` or ``"gaussian"``.
    spatial : ``"boxcar"`` (default: SoFiA-2's repeated boxcars: n = 3..6 passes of radius r,
        the n whose exact radius sqrt(3σ²/n + 1/4) − 1/2 is closest to a whole number),
        ``"boxcar_approx"`` (skyconv's former rule: the (r, n) whose σ is closest to the
        requested σ) or ``"gaussian"`` (true Gaussian truncated at 4σ, as scipy).
    edge_mode : boundary mode of the smoothing, as scipy.ndimage ("constant" pads with 0,
        SoFiA 2's choice; the only mode with ``precision="sofia2"``).
    precision : ``"sofia2"`` (default) or ``"float64"``. ``"sofia2"`` reproduces SoFiA-2
        2.5.1's arithmetic and estimators: boxcars as running means in the cube's precision,
        updated backwards from the end of each line (rows, then columns, then spectra); the
        noise sample taken at flat indices size − c, size − 2c, …; ``std`` sqrt(Σx²/n) over
        it; ``mad`` without element 0, at most size // (2c) values for a one-sided flux range
        (those nearest the start of the array dropped), an even count's median the mean of
        the two middle values in the cube's precision; ``gauss`` SoFiA-2's histogram fit (101
        bins over ±max|x| of the whole cube, taken again over ±2.5 m where m is its second
        moment, then a straight-line least-squares fit of ln(count) against x² in the cube's
        precision over all but the two end bins; σ = sqrt(−1 / (2 · slope))).
        ``"float64"`` is skyconv's former behaviour: boxcar sums in float64 rounded once,
        the sample at flat indices 0, c, 2c, …, exact float64 medians and, for ``gauss``, a
        Levenberg–Marquardt fit of a zero-centred Gaussian to a histogram of bin width σ₀/10
        over ±5σ₀ (σ₀ from the MAD).
    mask : optional boolean/integer array of the cube's shape; nonzero voxels start in the
        mask (replaced before smoothing) and stay in it.
    device : "auto", "cpu", "cuda" or None (None: SKYCONV_DEVICE, else "auto").
    return_noise : also return a :class:`NoiseReport` (noise per kernel).
    progress : optional callable ``progress(done, total, noise)`` called after each kernel.
        An exception it raises ends the call and propagates unchanged (the one rule for every
        skyconv callback); the callback is not called again.
    scratch : dask cubes only: directory for the temporary zarr store through which a cube that
        takes 30 % of the Dask cluster's memory or more is smoothed out of core (about 2.25×
        the cube's bytes for float32, removed when the returned mask is dropped); it must be
        reachable by every worker. Default: Dask's ``temporary-directory``, else the system's.

    Kernels run spatial-major: for each xy kernel every z kernel; the (0, 0) kernel clips the
    original cube with its own noise.
    """
    if is_dask_array(cube) or is_dask_array(mask):
        from ._dask.cube import smooth_and_clip as dask_smooth_and_clip
        from ._dask.halo import check_known_chunks

        if is_dask_array(cube):
            check_known_chunks(cube, "cube")
        run = _setup(
            np.ndim(cube), np.shape(cube), kernels_xy, kernels_z, threshold, replacement,
            statistic, flux_range, spectral, spatial, edge_mode, precision,
        )  # fmt: skip
        out, rms0, rms = dask_smooth_and_clip(
            cube, run, mask, device, progress=progress, scratch=scratch
        )
        return (out, NoiseReport(rms0, list(run.labels), rms)) if return_noise else out
    a = float_array(cube, "cube")
    run = _setup(
        a.ndim, a.shape, kernels_xy, kernels_z, threshold, replacement, statistic, flux_range,
        spectral, spatial, edge_mode, precision,
    )  # fmt: skip
    m = _check_mask(mask, a.shape)
    cube3 = a.reshape((1,) + a.shape) if a.ndim == 2 else a
    m3 = m.reshape(cube3.shape)
    device = resolve(device).core  # the one device rule, once
    specs, labels = run.specs, run.labels
    total = len(specs)
    if progress is not None and not callable(progress):
        raise ArgumentTypeError(
            f"progress must be callable or None, got {type(progress).__name__} {progress!r}"
        )
    raised: list[BaseException] = []  # the callback's own exception, re-raised unchanged
    cb = None
    if progress is not None:

        def cb(i, rms):
            if raised:  # the call is being cancelled: the callback is not called again
                return
            try:
                progress(i + 1, total, rms)
            except BaseException as e:
                raised.append(e)
                raise

    exact, threshold, rep, noise, sampling = (
        run.exact, run.threshold, run.replace, run.noise, run.sampling
    )  # fmt: skip
    rms0, rms = _core._scfind(
        cube3,
        m3,
        specs,
        run.edge_mode,
        threshold,
        False,
        rep,
        noise,
        sampling,
        slab_planes=_slab_planes,
        progress=cb,
        device=device,
        exact=exact,
        detected=False,  # the MASKED bit alone: initial mask and detections
    )
    if raised:
        raise raised[0]
    out = m
    if return_noise:
        return out, NoiseReport(float(rms0), labels, [float(r) for r in rms])
    return out


__all__ = ["FWHM_CONST", "NoiseReport", "smooth_and_clip"]
