"""Convolution-based gridding of irregularly sampled data (single-dish maps and cubes).

``skyconv.grid`` is Cygrid's algorithm computed exactly: every output pixel gets

    cube[c, p] = sum_s K(d_sp) w[s, c] v[s, c] / sum_s K(d_sp) w[s, c]

over the samples s whose true great-circle distance d_sp (float64 haversine-exact) to the
pixel centre is below ``sphere_radius``. Sums run in float64 in a fixed order, so results are
identical whatever the thread count.

Units: coordinates, kernel widths and ``sphere_radius`` in degrees; the gauss2d position angle
in radians (Cygrid's conventions). Kernels (``kernel_params``):

- ``"gauss1d"``: ``(sigma,)`` -> exp(-d^2 / 2 sigma^2)
- ``"gauss2d"``: ``(sigma_maj, sigma_min, pa)`` -> elliptical Gaussian, major axis along the
  bearing ``pa`` (radians, from north through +lon)
- ``"tapered_sinc"``: ``(sigma, a, b)`` or ``(sigma,)`` with a=2.52, b=1.55 ->
  sinc(x/b) exp(-(x/a)^2), x = pi d / sigma
- ``"gaussbessel"``: ``(sigma, a, b)`` or ``(sigma,)`` -> J1(x)/x exp(-d^2 / 2 (a sigma)^2),
  x = pi d / (b sigma); 1/2 at d = 0 (Cygrid gives NaN there)

A scalar ``kernel_params`` means ``(sigma,)``. ``sphere_radius`` defaults to 3 sigma
(3 sigma_maj for gauss2d).

NaN policy: a NaN coordinate drops the sample; a NaN weight shared by all channels drops the
sample; a NaN value (or a NaN per-channel weight) drops that sample for that channel only.
Output pixels no sample reaches are NaN (no NumPy warning), as are WCS pixels outside the
projection.

Targets: a FITS header (``astropy.io.fits.Header`` or dict with NAXIS1/NAXIS2 and a celestial
WCS), an ``astropy.wcs.WCS`` with ``pixel_shape`` set or a ``(WCS, (ny, nx))`` pair (pixel
centres from astropy), sightlines ``(lons, lats)`` or ``Sightlines``, or a ``HealpixTarget``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _core
from ._utils.args import reals, to_float
from ._utils.arrays import float_array, int_arg
from ._utils.device import Device, resolve
from ._utils.lazy import is_dask_array
from .exceptions import ArgumentError, ArgumentTypeError, ShapeError, StateError

#: Samples per call into the core (its sort index is 32-bit).
_MAX_BATCH = 2**31


@dataclass(frozen=True, eq=False)
class HealpixTarget:
    """Grid onto HEALPix pixel centres.

    Parameters
    ----------
    nside : int
        Resolution.
    nest : bool
        NEST instead of RING ordering.
    pixels : 1-D int array, optional
        The pixel indices (in that scheme) to grid, in output order; default all.

    Examples
    --------
    >>> import numpy as np
    >>> import skyconv
    >>> res = skyconv.grid([45.0], [0.0], np.array([1.0]), skyconv.HealpixTarget(1),
    ...                    kernel_params=20.0, device="cpu")
    >>> res.cube.shape, int(np.isfinite(res.cube).sum())  # the 4 centres within 60 deg
    ((12,), 4)
    """

    nside: int
    nest: bool = False
    pixels: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Sightlines:
    """Grid onto arbitrary positions.

    Parameters
    ----------
    lons, lats : 1-D float arrays
        Positions in degrees, same length.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import Sightlines
    >>> Sightlines(np.array([0.0, 1.0]), np.array([0.0, 0.0])).lons.size
    2
    """

    lons: np.ndarray
    lats: np.ndarray


class GridResult:
    """The result of gridding: ``cube`` = ``unweighted`` / ``weights`` (NaN where the weight is
    0).

    All three have shape ``data.shape[1:] + target shape`` and the requested dtype. When every
    channel has the same weight sums (weights None or per sample, and no NaN value reaching a
    pixel) the GPU engine returns one weight map: ``weights`` is then a read-only broadcast
    view of it, and ``unweighted`` is derived as ``cube * weights`` (0 where the weight is 0)
    on first access. ``np.array(res.weights)`` gives a writable full copy.

    Parameters
    ----------
    cube : array
        The gridded data (data's unit).
    weights : array
        Sum of kernel times weight per pixel (full shape, or the spatial shape when shared).
    unweighted : array, optional
        Sum of kernel times weight times data; derived when None.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv import GridResult
    >>> r = GridResult(np.array([2.0, np.nan]), np.array([0.5, 0.0]))
    >>> r.unweighted.tolist()
    [1.0, 0.0]
    """

    def __init__(self, cube: np.ndarray, weights: np.ndarray, unweighted: np.ndarray | None = None):
        self.cube = cube
        self._weights = weights
        self._unweighted = unweighted

    @property
    def weights(self) -> np.ndarray:
        w = self._weights
        if w.shape != self.cube.shape:
            w = np.broadcast_to(w, self.cube.shape)
        return w

    @property
    def unweighted(self) -> np.ndarray:
        if self._unweighted is None:
            w = self.weights
            u = np.zeros(self.cube.shape, dtype=self.cube.dtype)
            np.multiply(self.cube, w, out=u, where=w != 0)
            self._unweighted = u
        return self._unweighted

    def __repr__(self) -> str:
        return f"GridResult(shape={self.cube.shape}, dtype={self.cube.dtype})"


class _Target:
    """Resolved target: pixel centres (degrees, NaN where invalid) and the spatial shape."""

    def __init__(self, lons, lats, shape, wcs=None, header=None):
        self.lons = np.ascontiguousarray(lons, dtype=np.float64).ravel()
        self.lats = np.ascontiguousarray(lats, dtype=np.float64).ravel()
        self.shape = tuple(int(s) for s in shape)
        self.wcs = wcs
        self.header = header
        bad = ~(np.isfinite(self.lons) & np.isfinite(self.lats))
        if bad.any():
            self.lons = self.lons.copy()
            self.lats = self.lats.copy()
            self.lons[bad] = np.nan
            self.lats[bad] = np.nan

    @property
    def size(self) -> int:
        return self.lons.size


def _wcs_target(w, shape, header=None) -> _Target:
    cel = w.celestial
    if cel.naxis != 2:
        raise ArgumentError("the WCS has no celestial (longitude, latitude) axes")
    ny, nx = (int_arg(s, "shape") for s in shape)
    if ny < 0 or nx < 0:
        raise ArgumentError(f"target shape must be non-negative, got {(ny, nx)}")
    yy, xx = np.indices((ny, nx), dtype=np.float64)
    world = cel.wcs_pix2world(xx.ravel(), yy.ravel(), 0)
    lng, lat = cel.wcs.lng, cel.wcs.lat
    if lng < 0 or lat < 0:
        lng, lat = 0, 1
    return _Target(world[lng], world[lat], (ny, nx), wcs=cel, header=header)


#: Pixel centres of recent header targets, by header content (astropy takes ~20 ms for a
#: 300 x 300 map, as long as the gridding itself; repeated calls onto one map reuse them).
_HEADER_CACHE: dict = {}
_HEADER_CACHE_SIZE = 4


def _header_key(header):
    items = header.items() if isinstance(header, dict) else header.cards
    try:
        return tuple((str(k), repr(v)) for k, v, *_ in items)
    except (TypeError, ValueError):  # pragma: no cover - unusual header values: no caching
        return None


def _header_target(header) -> _Target:
    from astropy.wcs import WCS

    key = _header_key(header)
    hit = _HEADER_CACHE.get(key) if key is not None else None
    if hit is not None:
        return hit
    try:
        shape = (header["NAXIS2"], header["NAXIS1"])
    except KeyError as e:
        raise ArgumentError(f"target header lacks {e.args[0]}") from None
    tgt = _wcs_target(WCS(header), shape, header=header)
    if key is not None:
        tgt.lons.flags.writeable = False
        tgt.lats.flags.writeable = False
        if len(_HEADER_CACHE) >= _HEADER_CACHE_SIZE:
            _HEADER_CACHE.pop(next(iter(_HEADER_CACHE)))
        _HEADER_CACHE[key] = tgt
    return tgt


def resolve_target(target) -> _Target:
    """The target pixel centres for any accepted ``target`` form (see the module docs)."""
    if isinstance(target, _Target):
        return target
    if isinstance(target, HealpixTarget):
        nside = int_arg(target.nside, "nside")
        if nside < 1:
            raise ArgumentError(f"nside must be >= 1, got {nside}")
        pix = None
        if target.pixels is not None:
            pix = np.asarray(target.pixels)
            if pix.dtype.kind not in "iu" or pix.ndim != 1:
                raise ArgumentTypeError("HealpixTarget.pixels must be a 1-D integer array")
            pix = np.ascontiguousarray(pix, dtype=np.int64)
        lons, lats = _core._healpix_centres(nside, bool(target.nest), pix)
        return _Target(lons, lats, (lons.size,))
    if isinstance(target, Sightlines):
        return _sightlines(target.lons, target.lats)
    try:
        from astropy.io.fits import Header
        from astropy.wcs import WCS
    except ImportError:  # pragma: no cover - astropy is needed for WCS targets only
        Header = WCS = ()
    if WCS and isinstance(target, WCS):
        shape = target.array_shape
        if shape is None:
            raise ArgumentError("the WCS has no pixel_shape: pass (wcs, (ny, nx))")
        return _wcs_target(target, shape[-2:])
    if (Header and isinstance(target, Header)) or isinstance(target, dict):
        return _header_target(target)
    if isinstance(target, (tuple, list)) and len(target) == 2:
        first, second = target
        if WCS and isinstance(first, WCS):
            return _wcs_target(first, tuple(second))
        return _sightlines(first, second)
    raise ArgumentTypeError(
        "target must be a FITS header, an astropy WCS (with pixel_shape) or (WCS, shape), "
        f"sightlines (lons, lats) or a HealpixTarget; got {type(target).__name__}"
    )


def _sightlines(lons, lats) -> _Target:
    lons = _coords(lons, "target lons")
    lats = _coords(lats, "target lats")
    if lons.size != lats.size:
        raise ShapeError(f"target lons and lats differ in length ({lons.size} and {lats.size})")
    return _Target(lons, lats, (lons.size,))


def _coords(a, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiu":
        raise ArgumentTypeError(f"{name} must be a real-valued array, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ShapeError(f"{name} must be 1-D, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float64)


def kernel_args(kernel, kernel_params, sphere_radius):
    """Validate and normalise (kernel name, params list, radius or None)."""
    if not isinstance(kernel, str):
        raise ArgumentTypeError(f"kernel must be a str, got {type(kernel).__name__}")
    if kernel_params is None:
        raise ArgumentError(
            f"kernel_params is required for kernel {kernel!r} (widths in degrees, e.g. (sigma,))"
        )
    params = np.atleast_1d(reals(kernel_params, "kernel_params"))
    if params.ndim != 1:
        raise ArgumentError("kernel_params must be a number or a flat sequence of numbers")
    if sphere_radius is not None:
        sphere_radius = to_float(sphere_radius, "sphere_radius")
        if not (np.isfinite(sphere_radius) and 0 < sphere_radius <= 180):
            raise ArgumentError(f"sphere_radius must be in (0, 180] degrees, got {sphere_radius}")
    _core._grid_check_kernel(kernel, params.tolist(), sphere_radius)  # the core's own checks
    return kernel, params.tolist(), sphere_radius


def _out_dtype(dtype) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"dtype must be float32 or float64, got {type(dtype).__name__} {dtype!r}"
        ) from None
    if dt not in (np.float32, np.float64):
        raise ArgumentTypeError(f"dtype must be float32 or float64, got {dt}")
    return dt


def prepare_samples(lons, lats, data, weights):
    """Checked inputs: float64 coordinates, data as (n, nchan) and weights None, (n,) or
    (n, nchan) of data's (common) float dtype. Returns (lons, lats, data2d, weights, chan_shape)."""
    lons = _coords(lons, "lons")
    lats = _coords(lats, "lats")
    n = lons.size
    if lats.size != n:
        raise ShapeError(f"lons and lats differ in length ({n} and {lats.size})")
    data = float_array(data, "data")
    if data.shape[0] != n:
        raise ShapeError(f"data has {data.shape[0]} samples along axis 0, lons has {n}")
    chan_shape = data.shape[1:]
    nchan = int(np.prod(chan_shape, dtype=np.int64))
    data2d = data.reshape(n, nchan) if data.ndim > 1 else data
    if weights is not None:
        weights = float_array(weights, "weights")
        if weights.shape not in ((n,), data.shape):
            raise ShapeError(
                f"weights must have shape {(n,)} or data's shape {data.shape}, got {weights.shape}"
            )
        common = np.result_type(data.dtype, weights.dtype)
        data2d = data2d.astype(common, copy=False)
        weights = weights.astype(common, copy=False)
        if weights.ndim > 1:
            weights = weights.reshape(n, nchan)
            if data2d.ndim == 1:
                weights = weights.reshape(n)
    return lons, lats, np.ascontiguousarray(data2d), weights, chan_shape


@dataclass(frozen=True, eq=False)
class GridPlan:
    """Everything about a gridding job but the samples, checked and resolved once: the target's
    pixel centres, the kernel (name, parameters and sphere radius, checked by the core), and
    the device. ``Gridder`` and ``compat.cygrid`` hold one; ``grid`` builds one per call.

    Examples
    --------
    >>> import numpy as np
    >>> from skyconv.grid import GridPlan, Sightlines
    >>> plan = GridPlan.build(Sightlines(np.zeros(1), np.zeros(1)), "gauss1d", 1.0, None, "cpu")
    >>> u, w = np.zeros((1, 1)), np.zeros((1, 1))
    >>> plan.accumulate(np.zeros(2), np.array([0.5, -0.5]), np.array([2.0, 4.0]), None, u, w)
    >>> str(plan.device), round(float(u[0, 0] / w[0, 0]), 12)
    ('cpu', 3.0)
    """

    target: _Target
    kernel: str
    params: list
    radius: float | None
    device: Device

    @classmethod
    def build(cls, target, kernel, kernel_params, sphere_radius, device) -> GridPlan:
        """Resolve ``target`` (see :func:`resolve_target`), check the kernel, resolve
        ``device`` (the one device rule)."""
        tgt = target if isinstance(target, _Target) else resolve_target(target)
        kernel, params, radius = kernel_args(kernel, kernel_params, sphere_radius)
        return cls(tgt, kernel, params, radius, resolve(device))

    def accumulate(self, lons, lats, data2d, weights, unweighted, weight_sums) -> None:
        """Add checked samples (see :func:`prepare_samples`) into the (nchan, ntargets)
        accumulators, in batches the core accepts."""
        n = lons.size
        for s in range(0, max(n, 1), _MAX_BATCH):
            e = min(n, s + _MAX_BATCH)
            w = None if weights is None else weights[s:e]
            _core._grid_accumulate(
                lons[s:e],
                lats[s:e],
                data2d[s:e],
                w,
                self.target.lons,
                self.target.lats,
                self.kernel,
                self.params,
                self.radius,
                unweighted,
                weight_sums,
                self.device.core,
            )

    def once(self, lons, lats, data2d, weights, dtype: np.dtype):
        """(cube, weights, unweighted or None) of one batch of at most 2**31 checked samples:
        on the GPU the sums, the division and the cast to ``dtype`` all happen on the device."""
        t = self.target
        return _core._grid_once(
            lons, lats, data2d, weights, t.lons, t.lats, self.kernel, self.params, self.radius,
            dtype.name, self.device.core,
        )  # fmt: skip


def accumulate(
    target, lons, lats, data2d, weights, kernel, params, radius, unweighted, weight_sums, device
):
    """Add checked samples into the (nchan, ntargets) accumulators (the plan-less form of
    :meth:`GridPlan.accumulate`, for callers of the old signature; the kernel is assumed
    checked by :func:`kernel_args`)."""
    plan = GridPlan(target, kernel, params, radius, resolve(device))
    plan.accumulate(lons, lats, data2d, weights, unweighted, weight_sums)


def grid(
    lons,
    lats,
    data,
    target,
    kernel="gauss1d",
    kernel_params=None,
    sphere_radius=None,
    weights=None,
    dtype=np.float32,
    device=None,
) -> GridResult:
    """Grid samples at (``lons``, ``lats``) onto ``target`` (Cygrid's algorithm, exact sums).

    Parameters
    ----------
    lons, lats : 1-D float arrays
        Sample positions, degrees.
    data : float32 or float64 array
        ``(nsamples,)`` or ``(nsamples, nchan, ...)``, any unit.
    target : FITS header, WCS, (WCS, shape), (lons, lats), Sightlines or HealpixTarget
        Where to grid (see the module docstring).
    kernel : str
        ``"gauss1d"``, ``"gauss2d"``, ``"tapered_sinc"`` or ``"gaussbessel"`` (see the module
        docstring).
    kernel_params : float or sequence of float
        The kernel's widths in degrees (gauss2d's position angle in radians); a scalar means
        ``(sigma,)``. Required.
    sphere_radius : float, optional
        Samples farther than this from a pixel centre are ignored, degrees in (0, 180]
        (default 3 sigma, 3 sigma_maj for gauss2d).
    weights : float array, optional
        None (all 1), ``(nsamples,)`` (shared by all channels) or data's shape.
    dtype : float32 or float64
        The result's dtype.
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto"), resolved
        once.

    Returns
    -------
    GridResult
        ``cube``, ``weights`` and ``unweighted``, each ``data.shape[1:] + target shape``
        (``(ny, nx)`` for WCS targets, ``(n,)`` for sightlines and HEALPix); NaN where no
        sample reaches a pixel. When any sample array is a ``dask.array.Array`` (chunked along
        the sample axis, ``data`` optionally along its channels) the three are lazy dask
        arrays chunked by ``data``'s channel blocks: per sample chunk partial sums over the
        pixels the chunk reaches, added by a tree, divided once (``skyconv._dask.grid``); the
        device is then resolved on each worker.

    Raises
    ------
    skyconv.ShapeError
        Inconsistent shapes (a ValueError).
    ValueError
        A bad kernel, kernel parameters, radius or device.
    TypeError
        Arguments of the wrong type, an unknown target form.
    skyconv.DeviceError
        ``device="cuda"`` and no GPU works.

    Examples
    --------
    Two samples, each alone within reach of one sightline:

    >>> import numpy as np
    >>> import skyconv
    >>> res = skyconv.grid([10.0, 20.0], [0.0, 0.0], np.array([1.0, 3.0]),
    ...                    skyconv.Sightlines(np.array([10.0, 20.0]), np.zeros(2)),
    ...                    kernel_params=0.5, device="cpu")
    >>> res.cube.tolist()
    [1.0, 3.0]
    """
    if any(is_dask_array(x) for x in (lons, lats, data, weights)):
        from ._dask.grid import grid as dask_grid

        tgt = resolve_target(target)
        kernel, params, radius = kernel_args(kernel, kernel_params, sphere_radius)
        cube, wsum, usum = dask_grid(
            lons, lats, data, tgt, kernel, params, radius, weights, _out_dtype(dtype), device
        )
        return GridResult(cube, wsum, usum)
    dt = _out_dtype(dtype)
    plan = GridPlan.build(target, kernel, kernel_params, sphere_radius, device)
    lons, lats, data2d, weights, chan_shape = prepare_samples(lons, lats, data, weights)
    if lons.size > _MAX_BATCH:
        g = Gridder(plan, dtype=dt, _accumulate_in_dtype=True)
        g.grid(lons, lats, data2d.reshape((lons.size,) + chan_shape), weights=weights)
        return g._result(copy=False)
    # One call: on the GPU the sums, the division and the cast to dtype all happen on the
    # device and the cube comes down with one weight map (or per-channel weights when they
    # differ); the unweighted sums are derived on request.
    cube, wsum, usum = plan.once(lons, lats, data2d, weights, dt)
    shape = chan_shape + plan.target.shape
    wshape = shape if wsum.size == cube.size else plan.target.shape
    return GridResult(
        cube.reshape(shape),
        wsum.reshape(wshape),
        None if usum is None else usum.reshape(shape),
    )


class Gridder:
    """Accumulating gridder for surveys larger than memory.

    Call :meth:`grid` once per batch of samples (their sums add up), then :meth:`result`
    divides once. The target, kernel and device are resolved once, into a :class:`GridPlan`
    (``.plan``) that every batch uses. Accumulators are float64 (two ``8 * nchan * npix``
    byte arrays) whatever ``dtype``; the result is cast to ``dtype``.

    Parameters
    ----------
    target : as in :func:`grid`
    kernel : str
        ``"gauss1d"``, ``"gauss2d"``, ``"tapered_sinc"`` or ``"gaussbessel"`` (see the module
        docstring).
    kernel_params : float or sequence of float
        The kernel's widths in degrees (gauss2d's position angle in radians); a scalar means
        ``(sigma,)``. Required.
    sphere_radius : float, optional
        Samples farther than this from a pixel centre are ignored, degrees in (0, 180]
        (default 3 sigma, 3 sigma_maj for gauss2d).
    dtype : float32 or float64
        The result's dtype.
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto"), resolved
        once.

    Raises
    ------
    ValueError, TypeError, skyconv.DeviceError
        As :func:`grid`, at construction.

    Examples
    --------
    >>> import numpy as np
    >>> import skyconv
    >>> g = skyconv.Gridder(skyconv.Sightlines(np.array([0.0]), np.array([0.0])),
    ...                     kernel_params=1.0, device="cpu")
    >>> g.grid([0.0], [0.5], np.array([2.0]))
    >>> g.grid([0.0], [-0.5], np.array([4.0]))
    >>> g.result().cube.tolist()
    [3.0]
    """

    def __init__(
        self,
        target,
        kernel="gauss1d",
        kernel_params=None,
        sphere_radius=None,
        dtype=np.float32,
        device=None,
        *,
        _accumulate_in_dtype=False,
    ):
        if isinstance(target, GridPlan):  # from grid(): already resolved
            self.plan = target
        else:
            self.plan = GridPlan.build(target, kernel, kernel_params, sphere_radius, device)
        self.dtype = _out_dtype(dtype)
        self._acc_dtype = self.dtype if _accumulate_in_dtype else np.dtype(np.float64)
        self._chan_shape = None
        self._u = self._w = None

    @property
    def target(self) -> _Target:
        """The resolved target (pixel centres)."""
        return self.plan.target

    @property
    def kernel(self) -> str:
        """The kernel's name."""
        return self.plan.kernel

    @property
    def kernel_params(self) -> list:
        """The kernel's parameters (degrees; gauss2d's position angle in radians)."""
        return self.plan.params

    @property
    def sphere_radius(self) -> float | None:
        """The sphere radius asked for (degrees; None: the kernel's default)."""
        return self.plan.radius

    @property
    def device(self) -> str:
        """The device every batch runs on: "cpu", "cuda" or "cuda:N"."""
        return str(self.plan.device)

    @property
    def target_shape(self) -> tuple:
        """Spatial shape of the output: (ny, nx) for WCS targets, (n,) otherwise."""
        return self.target.shape

    @property
    def target_lons(self) -> np.ndarray:
        """Target pixel centre longitudes in degrees (flat; NaN outside the projection)."""
        return self.target.lons

    @property
    def target_lats(self) -> np.ndarray:
        """Target pixel centre latitudes in degrees (flat)."""
        return self.target.lats

    def grid(self, lons, lats, data, weights=None) -> None:
        """Add a batch of samples.

        Parameters
        ----------
        lons, lats : 1-D float arrays
            Positions, degrees.
        data : float array
            ``(nsamples,)`` or ``(nsamples, nchan, ...)``; every batch has the same channel shape.
        weights : float array, optional
            None, ``(nsamples,)`` or data's shape.

        Dask arrays (chunked along the samples) are summed on the Dask cluster, by the tree of
        :func:`grid`, and the sums added to this gridder's accumulators.

        Raises
        ------
        skyconv.ShapeError
            Inconsistent shapes, or a channel shape unlike earlier batches'.
        KeyboardInterrupt
            Ctrl-C during the batch: part of it may have been added (the accumulators are
            summed in place); :meth:`clear` and grid the batches again.
        """
        lazy = any(is_dask_array(x) for x in (lons, lats, data, weights))
        if lazy:  # summed on the Dask cluster, added here (skyconv._dask.grid.accumulate)
            chan_shape = tuple(np.shape(data)[1:])
        else:
            lons, lats, data2d, weights, chan_shape = prepare_samples(lons, lats, data, weights)
        if self._chan_shape is None:
            nchan = int(np.prod(chan_shape, dtype=np.int64))
            self._chan_shape = chan_shape
            self._u = np.zeros((nchan, self.target.size), dtype=self._acc_dtype)
            self._w = np.zeros_like(self._u)
        elif chan_shape != self._chan_shape:
            raise ShapeError(
                f"data has channel shape {chan_shape}, earlier batches had {self._chan_shape}"
            )
        if lazy:
            from ._dask.grid import accumulate as dask_accumulate

            dask_accumulate(self.plan, lons, lats, data, weights, self._u, self._w)
            return
        self.plan.accumulate(lons, lats, data2d, weights, self._u, self._w)

    def result(self) -> GridResult:
        """The gridded cube, weights and unweighted sums.

        Returns
        -------
        GridResult
            Copies, dtype ``dtype``.

        Raises
        ------
        skyconv.StateError
            Nothing has been gridded yet (a RuntimeError).
        """
        return self._result(copy=True)

    def _result(self, copy: bool) -> GridResult:
        if self._u is None:
            raise StateError("nothing has been gridded yet: call grid() first")
        shape = self._chan_shape + self.target.shape
        cube = _core._grid_finish(self._u, self._w).astype(self.dtype, copy=False)
        return GridResult(
            cube=cube.reshape(shape),
            weights=self._w.astype(self.dtype, copy=copy).reshape(shape),
            unweighted=self._u.astype(self.dtype, copy=copy).reshape(shape),
        )

    def clear(self) -> None:
        """Zero the accumulators; the plan (target, kernel, device) stays."""
        if self._u is not None:
            self._u[...] = 0
            self._w[...] = 0


__all__ = ["GridPlan", "GridResult", "Gridder", "HealpixTarget", "Sightlines", "grid"]
