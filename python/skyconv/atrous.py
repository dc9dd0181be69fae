"""À trous wavelet reconstruction of spectra, images and cubes (DUCHAMP 1.6.1's algorithm).

``atrous_denoise`` reproduces DUCHAMP's ``reconDim`` 1/2/3 reconstruction: an iterative,
thresholded à trous wavelet transform that keeps the coefficients that stand out of the noise
at each scale. It runs separably (one 1-D pass per axis and scale, so the cost per scale is
O(taps) per voxel), in parallel on the CPU, or on the GPU with everything resident there.

Algorithm (per unit: each spectrum for ``dim=1``, each channel map for ``dim=2``, the whole
cube for ``dim=3``)::

    σ0 = MADFM(data) / 0.6744888            (robust=False: standard deviation, 1/n)
    output = 0
    repeat:
        c = data − output                   (blank voxels: 0, i.e. left out of every sum)
        for s = 1 .. N   (hole spacing 2^(s−1)):
            w = c − h_s ∗ c ;  c = c − w      (h_s: B3 spline, triangle or Haar; mirror edges)
            if scale_min <= s <= scale_max:
                output += w  where  |w| > median(w) + snr_recon · σ0 · f[dim][s]
        output += c
        σ = MADFM(data − output) / 0.6744888
    until iteration >= 2 and |σ_prev − σ| / σ <= convergence

N = int(log2(L−1)) − 1 for the B3 spline and int(log2(L−1)) for the triangle and Haar
filters, L the smallest reconstructed dimension. f are DUCHAMP's noise factors (rms of each
scale's coefficients for unit white noise), extrapolated past its tables by 1/√2, 1/2 or 1/√8
per scale for 1-D, 2-D, 3-D.

Two variants (``variant=``):

``"duchamp"`` (the default) reproduces DUCHAMP 1.6.1, quirks included. It follows these facts
about DUCHAMP (its CHANGES file for 1.2, and the behaviour of its 1-, 2- and 3-D
reconstructions):

- 1-D and 3-D are the algorithm above, with N from the full array dimensions and reflection at
  the array edges (DUCHAMP >= 1.2: "the full image dimensions are always used to calculate the
  number of scales, and reflections will occur at the actual image edges", also when the edges
  are blank); blank voxels are left out of the filter sums.
- 2-D: the scale loop runs ``scale < N``, so only scales 1..N-1 are computed and thresholded,
  and the smooth array left after N-1 scales is added. ``scale_max`` is not applied (every
  scale >= ``scale_min`` is thresholded), and the loop stops on DUCHAMP's fixed tolerance 0.005,
  whatever ``convergence`` is. Blank pixels are not left out of the filter sums: their
  coefficient is input - output, which in the first iteration is DUCHAMP's BLANK value
  (``blank_value``: NaNs read from a FITS file without a BLANK keyword hold -8.00061) and 0 in
  later iterations (DUCHAMP sets a blank pixel's output to its input once it thresholds a scale),
  or the BLANK value in every iteration when no scale is thresholded.
- Noise factors are DUCHAMP's tables as it reads them: for the triangle filter in 2-D, scale 12
  reads an unfilled slot (0: threshold = median) and all later scales extrapolate from 0; the
  triangle 1-D table ends with 1.12763724e-4 (scale 18), a slip of a decade in a sequence
  falling by sqrt(2). (DUCHAMP's loading loops also read past the ends of several source tables,
  into slots beyond the tabulated scales that are never used: no effect.)

``"corrected"`` is skyconv's corrected reconstruction: scales 1..N for every ``dim``,
``scale_max`` and ``convergence`` honoured in 2-D, blank voxels left out of every sum, and the
mended factors (triangle 2-D scale 12 = 2.22868922e-4, triangle 1-D scale 18 = 1.12763724e-3).
For 1-D and 3-D the two variants give identical results unless a triangle spectrum has more than
2^18 channels.

Common to both:

- ``scale_max``: scales above it are computed (the smoothing continues) but not added; the
  final smooth array is always added. 0 (or any value >= N) means all scales.
- Convergence: DUCHAMP loops while ``|Δσ|/σ > tolerance`` and has no cap; skyconv stops as
  well after 100 iterations (cubes and maps need 2-4; only units of very few voxels, such as
  spectra of ~20 channels, can creep on that long) or when σ stays 0 (0/0).
- Blanks are NaN and ±inf (DUCHAMP: its BLANK value); they pass through unchanged (DUCHAMP
  leaves 0 there when no scale is thresholded at all).
- Not reproduced: DUCHAMP's single-precision arithmetic (skyconv sums in double: results
  differ from DUCHAMP's by float32 rounding, about 1e-6 relative, and a coefficient that lies
  within that rounding of its threshold may be kept by one and not the other), and its
  ``flagTrim`` (cutting blank borders off the cube before the reconstruction, which moves the
  reflection edges and can lower N): skyconv reconstructs the array it is given.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import _core
from ._arrays import float_array, int_arg
from ._utils.device import resolve
from ._utils.duchamp_par import DUCHAMP_BLANK
from .exceptions import ArgumentError, ArgumentTypeError

_FILTERS = ("b3spline", "triangle", "haar")
_VARIANTS = ("duchamp", "corrected")


@dataclass(frozen=True)
class AtrousResult:
    """The result of :func:`atrous_denoise`.

    Attributes
    ----------
    data : ndarray
        The reconstruction: input dtype and shape, in the input's units; blank (non-finite)
        voxels are copied from the input.
    iterations : int or ndarray of int
        Iterations run. An int for a whole-array reconstruction (``dim == data.ndim``),
        otherwise one per unit: shape ``data.shape[1:]`` for ``dim=1`` (one per spectrum),
        ``data.shape[:1]`` for ``dim=2`` on a cube (one per channel map). 0 for units with no
        finite voxel.
    noise : float or ndarray of float
        Final residual noise σ of ``data − reconstruction`` (MADFM/0.6744888, or the standard
        deviation when ``robust=False``), in the data's units; same shape as ``iterations``;
        NaN for all-blank units.
    input_noise : float or ndarray of float
        Noise σ0 of the input that set the thresholds (same units and shape).
    scales : int
        Number of wavelet scales N.
    device : str
        ``"cpu"`` or ``"cuda"``.

    The result unpacks as ``recon, iterations, noise = atrous_denoise(...)``.
    """

    data: np.ndarray
    iterations: int | np.ndarray
    noise: float | np.ndarray
    input_noise: float | np.ndarray
    scales: int
    device: str

    def __iter__(self):
        return iter((self.data, self.iterations, self.noise))


def _units_shape(shape: tuple[int, ...], dim: int) -> tuple[int, ...]:
    if dim == 1:
        return shape[1:]
    return shape[: len(shape) - dim]


def _float(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(f"{name} must be a number, got {type(value).__name__}")
    return float(value)


def atrous_denoise(
    data,
    dim: int = 3,
    snr_recon: float = 4.0,
    scale_min: int = 1,
    scale_max: int = 0,
    filter: str = "b3spline",
    convergence: float = 0.005,
    robust: bool = True,
    device: str | None = None,
    *,
    progress: Callable[[int, int, int, float, float], object] | None = None,
    variant: str = "duchamp",
    blank_value: float = DUCHAMP_BLANK,
) -> AtrousResult:
    """Denoise by DUCHAMP's iterative à trous wavelet reconstruction.

    Parameters
    ----------
    data : array_like, float32 or float64, 1 to 3 dimensions
        A spectrum (z,), a pv-slice or image (z, x) / (y, x), or a cube (z, y, x), in any
        units (flux per voxel). NaN and ±inf are blank: left out of every sum and statistic,
        and returned unchanged.
    dim : {1, 2, 3}
        1: each spectrum along axis 0 separately; 2: each map over the last two axes
        separately; 3: the whole cube. Must not exceed ``data.ndim``.
    snr_recon : float >= 0
        Threshold in units of each scale's noise (DUCHAMP ``snrRecon``).
    scale_min, scale_max : int
        First and last wavelet scale added to the reconstruction (``scaleMin``, ``scaleMax``);
        ``scale_max=0`` means all scales. Scale s has hole spacing 2^(s−1) pixels.
    filter : {"b3spline", "triangle", "haar"}
        Scaling function (DUCHAMP ``filterCode`` 1, 2, 3).
    convergence : float > 0
        Stop when the residual noise changes by less than this fraction
        (``reconConvergence``); at least two iterations always run.
    robust : bool
        Median and MADFM statistics (True) or mean and standard deviation (population, 1/n)
        (``flagRobustStats``).
    device : "auto", "cpu", "cuda" or None
        None: the SKYCONV_DEVICE environment variable, else "auto".
    progress : callable, optional
        Called after each iteration as ``progress(iteration, active, units, noise, change)``:
        units still iterating, total units, mean residual σ of the units that ran, and their
        largest relative change of σ. An exception raised in it aborts the call.
    variant : {"duchamp", "corrected"}
        ``"duchamp"``: DUCHAMP 1.6.1's reconstruction exactly, quirks included (for ``dim=2``
        its loop over scales 1..N-1, ``scale_max`` not applied, its fixed convergence 0.005,
        blank pixels holding ``blank_value``; its noise-factor tables). ``"corrected"``:
        skyconv's corrected reconstruction. See the module documentation.
    blank_value : float
        The value DUCHAMP holds in blank pixels (BLANK × BSCALE + BZERO of the FITS header;
        -8.00061 for NaNs in a file without a BLANK keyword), in the data's units. Only the
        ``"duchamp"`` variant's ``dim=2`` reconstruction reads it.

    Returns
    -------
    AtrousResult
        ``data`` (the reconstruction), ``iterations``, ``noise`` (final residual σ),
        ``input_noise``, ``scales`` (N; DUCHAMP's 2-D reconstruction computes N-1 of them),
        ``device``; unpacks as ``recon, iterations, noise``.

    Raises
    ------
    ShapeError
        ``dim > data.ndim``, more than 3 dimensions, or reconstructed axes shorter than the
        filter needs for one scale (5 pixels for the B3 spline, 3 for triangle and Haar).
    ValueError
        Negative or non-finite ``snr_recon``, ``scale_min < 1``, ``0 < scale_max <
        scale_min``, ``convergence <= 0``, an unknown filter or variant, a non-finite
        ``blank_value``.

    All-blank input returns a copy of the input (with a RuntimeWarning), iterations 0 and
    noise NaN. Differences from DUCHAMP 1.6.1 are listed in the module documentation
    (``help(skyconv.atrous)``).

    Notes
    -----
    Memory: both engines hold five arrays of the data's size (input, output, the smooth
    array and two work arrays). On the GPU everything stays on the device for all iterations;
    when that exceeds the GPU budget (80 % of the free memory, capped by the environment
    variable ``SKYCONV_GPU_MEMORY_LIMIT`` in bytes), ``dim=2`` reconstructions run in chunks
    of whole channel maps (independent, so no halo is needed), while ``dim=1`` and ``dim=3`` raise
    ``GpuMemoryError`` stating the memory needed (use ``device="cpu"``).

    Speed: the CPU engine drops converged spectra/maps from its working arrays, so a few
    slowly converging units do not make every iteration process the whole cube.

    Fluxes: hard thresholding keeps a source's significant coefficients but drops the faint,
    partly negative ones around it, so aperture fluxes summed on the reconstruction are biased
    high (10-25 % for sources peaking at 6-10 σ in the tests); measure fluxes on the data
    within a mask derived from the reconstruction.
    """
    a = float_array(data, "data")
    dim = int_arg(dim, "dim")
    if dim not in (1, 2, 3):
        raise ArgumentError(f"dim must be 1, 2 or 3, got {dim}")
    snr = _float(snr_recon, "snr_recon")
    if not math.isfinite(snr) or snr < 0:
        raise ArgumentError(f"snr_recon must be finite and >= 0, got {snr}")
    scale_min = int_arg(scale_min, "scale_min")
    scale_max = int_arg(scale_max, "scale_max")
    if scale_min < 1:
        raise ArgumentError(f"scale_min must be >= 1, got {scale_min}")
    if scale_max < 0 or (scale_max != 0 and scale_max < scale_min):
        raise ArgumentError(f"scale_max must be 0 (all) or >= scale_min, got {scale_max}")
    if not isinstance(filter, str) or filter.lower() not in _FILTERS:
        raise ArgumentError(f"filter must be one of {_FILTERS}, got {filter!r}")
    conv = _float(convergence, "convergence")
    if not math.isfinite(conv) or conv <= 0:
        raise ArgumentError(f"convergence must be finite and > 0, got {conv}")
    if not isinstance(robust, (bool, np.bool_)):
        raise ArgumentTypeError(f"robust must be a bool, got {type(robust).__name__}")
    device = resolve(device).core
    if progress is not None and not callable(progress):
        raise ArgumentTypeError("progress must be callable or None")
    if not isinstance(variant, str) or variant.lower() not in _VARIANTS:
        raise ArgumentError(f"variant must be one of {_VARIANTS}, got {variant!r}")
    blank = _float(blank_value, "blank_value")
    if not math.isfinite(blank):
        raise ArgumentError(f"blank_value must be finite, got {blank}")
    recon, iters, noise, noise0, scales, dev = _core._atrous_denoise(
        a,
        dim,
        snr,
        scale_min,
        scale_max,
        filter.lower(),
        conv,
        bool(robust),
        device,
        progress,
        variant.lower(),
        blank,
    )
    ushape = _units_shape(a.shape, dim)
    iters = np.asarray(iters, dtype=np.int64).reshape(ushape)
    noise = np.asarray(noise, dtype=np.float64).reshape(ushape)
    noise0 = np.asarray(noise0, dtype=np.float64).reshape(ushape)
    if a.size and not np.any(iters):
        warnings.warn(
            "atrous_denoise: every voxel is blank (NaN/inf); returning the input",
            RuntimeWarning,
            stacklevel=2,
        )
    if ushape == ():
        return AtrousResult(recon, int(iters), float(noise), float(noise0), scales, dev)
    return AtrousResult(recon, iters, noise, noise0, scales, dev)


def atrous_scales(
    shape, dim: int = 3, filter: str = "b3spline", variant: str = "duchamp"
) -> tuple[int, np.ndarray]:
    """Number of scales N and the noise factors f[0..N] a reconstruction of ``shape`` uses.

    Parameters
    ----------
    shape : sequence of int
        The data's shape.
    dim, filter, variant
        As for :func:`atrous_denoise`.

    Returns
    -------
    (int, ndarray of float)
        N and f[0..N] (dimensionless; f[s] is the rms of scale s's coefficients for white noise
        of unit rms). DUCHAMP's 2-D reconstruction uses scales 1..N-1 of them.

    Raises
    ------
    ShapeError
        The shape is too small for the filter or ``dim``.
    ValueError
        An unknown filter or variant.
    """
    shape = tuple(int_arg(s, "shape") for s in shape)
    n, f = _core._atrous_plan(
        list(shape), int_arg(dim, "dim"), str(filter).lower(), str(variant).lower()
    )
    return n, np.asarray(f)


__all__ = ["DUCHAMP_BLANK", "AtrousResult", "atrous_denoise", "atrous_scales"]
