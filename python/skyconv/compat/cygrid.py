"""Drop-in replacement for Cygrid 2.0.4's ``WcsGrid`` and ``SlGrid`` (``import
skyconv.compat.cygrid as cygrid``), computed by skyconv's gridding engine.

Same constructor arguments, methods, shape rules, accumulation semantics (repeated ``grid()``
calls add into the data and weight cubes, which have the ``dtype`` given to the constructor or
of a ``datacube`` passed in) and warnings (non-native byte order, datacube dtype overriding
``dtype``). Kernel parameters follow Cygrid: degrees, except the gauss2d position angle in
radians; ``tapered_sinc`` and ``gaussbessel`` take ``(sigma, a, b)``.

Differences, all deliberate:

- Exact: every sample closer than ``sphere_radius`` counts. Cygrid's HEALPix disc lookup misses
  some samples near the sphere's edge (measured: up to 0.15% of a pixel's weight, cube values
  off by up to 3e-3 relative at 150" FWHM / 60" pixels); skyconv matches a brute-force sum to
  1e-12.
- Works with NumPy 2 (Cygrid's byte-order fix calls ``ndarray.newbyteorder``, removed there).
- NaN handling: a NaN value or weight drops that sample for that channel only, a NaN coordinate
  drops the sample (Cygrid lets one NaN poison its whole footprint).
- ``gaussbessel`` is 1/2 at distance 0 (Cygrid returns NaN there).
- ``get_datacube()`` gives NaN for empty pixels without NumPy's divide warning.
- Each ``grid()`` call sums in float64 and adds to the cubes once (Cygrid adds every
  contribution to the float32 cube), so float32 cubes are more accurate.
- ``hpx_max_resolution`` is accepted and ignored (skyconv picks its own lookup resolution);
  ``set_num_threads`` sets skyconv's thread count for the whole process, as OpenMP's did.
- ``device`` keyword on the constructors (skyconv's "auto", "cpu", "cuda", "cuda:N"; None:
  ``SKYCONV_DEVICE``, else "auto"), resolved once per gridder; ``set_kernel`` builds the
  gridder's plan (``skyconv.grid.GridPlan``) that every ``grid()`` call uses.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import _backend, _core
from .._utils.device import resolve
from ..exceptions import ArgumentError, ArgumentTypeError, ShapeError, StateError
from ..grid import GridPlan, _Target, prepare_samples, resolve_target

_KERNELS = {"gauss1d": 1, "gauss2d": 3, "tapered_sinc": 3, "gaussbessel": 3}


def _native(a: np.ndarray) -> np.ndarray:
    if not a.dtype.isnative:
        warnings.warn("Input data byteorder not native, will fix", UserWarning, stacklevel=3)
        a = a.astype(a.dtype.newbyteorder("="))
    return a


class Cygrid:
    """Base class (use ``WcsGrid`` or ``SlGrid``)."""

    def __init__(
        self,
        target: _Target,
        *,
        dbg_messages=False,
        datacube=None,
        weightcube=None,
        dtype=np.float32,
        device=None,
    ):
        self._target = target
        self.dbg_messages = bool(dbg_messages)
        self.datacube = datacube
        self.weightcube = weightcube
        self.dtype = np.dtype(dtype)
        self._device = resolve(device)  # the one device rule, once per gridder
        self.device = str(self._device)
        self._plan = None
        self.kernel_set = False
        self.cubes_prepared = False
        self.cube_shape = None

    # -- settings -----------------------------------------------------------------------

    def set_num_threads(self, nthreads):
        """Change the number of CPU threads (for every later skyconv call, as OpenMP's was)."""
        _backend.set_num_threads(int(nthreads))

    def set_kernel(self, kernel_type, kernel_params, sphere_radius, hpx_max_resolution=None):
        """Set the gridding kernel.

        ``kernel_type``: 'gauss1d' (sigma,), 'gauss2d' (sigma_maj, sigma_min, PA),
        'tapered_sinc' (sigma, a, b) or 'gaussbessel' (sigma, a, b); widths and
        ``sphere_radius`` in degrees, PA in radians. ``hpx_max_resolution`` is ignored.
        Raises TypeError for an unknown kernel type, ValueError for a wrong parameter count.
        """
        kernel_type = str(kernel_type)
        if kernel_type not in _KERNELS:
            raise ArgumentTypeError(
                f"Kernel type not understood: {kernel_type}\nPlease choose from the following\n"
                + "\n".join(_KERNELS)
            )
        params = np.atleast_1d(np.asarray(kernel_params, dtype=np.float64))
        if params.size != _KERNELS[kernel_type]:
            raise ArgumentError(
                f"kernel_params needs {_KERNELS[kernel_type]} entries for {kernel_type}"
            )
        self._plan = GridPlan.build(
            self._target, kernel_type, params, float(sphere_radius), self._device
        )
        self.kernel_set = True
        if self.dbg_messages:
            print(
                f"Using {kernel_type} kernel, parameters {params.tolist()}, "
                f"sphere radius {sphere_radius} deg"
            )

    # -- gridding -----------------------------------------------------------------------

    def _prepare_cubes(self):
        if self.datacube is None:
            self.datacube = np.zeros(self.cube_shape, dtype=self.dtype)
        else:
            if not isinstance(self.datacube, np.ndarray):
                raise ArgumentTypeError("Input datacube must be numpy array.")
            if not self.datacube.flags.c_contiguous:
                raise ArgumentTypeError("Input datacube must be C-contiguous.")
            if self.datacube.shape != self.cube_shape:
                raise ShapeError(
                    "Datacube shape doesn't match expectation. (The data cube, which was "
                    f"provided to the constructor has shape {self.datacube.shape}, while based "
                    f"on the grid-method call, cygrid would expect {self.cube_shape}"
                )
            if self.datacube.dtype not in (np.float32, np.float64):
                raise ArgumentTypeError("Input datacube must have floating point type.")
            if not self.datacube.flags.writeable:
                raise ArgumentError(
                    "Input datacube must be writeable (grid() adds into it), got a read-only array"
                )
            if self.datacube.dtype != self.dtype:
                warnings.warn(
                    f"The datacube that was provided in the constructor ({self.datacube.dtype}) "
                    f"has a different dtype than what was provided with the 'dtype' option "
                    f"({self.dtype}). Will use datacube dtype ({self.datacube.dtype})...",
                    UserWarning,
                    stacklevel=3,
                )
                self.dtype = self.datacube.dtype
        if self.weightcube is None:
            self.weightcube = np.zeros(self.cube_shape, dtype=self.dtype)
        else:
            if not isinstance(self.weightcube, np.ndarray):
                raise ArgumentTypeError("Input weightcube must be numpy array.")
            if not self.weightcube.flags.c_contiguous:
                raise ArgumentTypeError("Input weightcube must be C-contiguous.")
            if self.weightcube.shape != self.datacube.shape:
                raise ShapeError("Weightcube shape doesn't match datacube shape.")
            if self.weightcube.dtype != self.datacube.dtype:
                raise ArgumentTypeError("Weightcube dtype doesn't match datacube dtype.")
            if not self.weightcube.flags.writeable:
                raise ArgumentError(
                    "Input weightcube must be writeable (grid() adds into it), got a read-only "
                    "array"
                )

    def grid(self, lons, lats, data, weights=None):
        """Grid samples at (``lons``, ``lats``) (degrees; 1-D) into the cubes (accumulating).

        ``data``: ``(nsamples,)`` or ``(nsamples, ...)``; the cube gets shape
        ``data.shape[1:] + target shape``. ``weights`` must have data's shape (None = ones).
        Raises ShapeError on any mismatch, RuntimeError if no kernel is set.
        """
        if not self.kernel_set:
            raise StateError("No kernel has been set, use set_kernel method")
        lons = np.asarray(lons)
        lats = np.asarray(lats)
        if lons.ndim != 1 or lats.ndim != 1:
            raise ShapeError("Input coordinates must be 1D objects.")
        if lons.size != lats.size:
            raise ShapeError("Input coordinates (lon, lat) size mismatch.")
        data = np.asarray(data)
        dshape = data.shape
        if not self.cubes_prepared:
            self.cube_shape = dshape[1:] + self._target.shape
            self._prepare_cubes()
            self.cubes_prepared = True
        if self.cube_shape != dshape[1:] + self._target.shape:
            expected = (lons.size,) + self.cube_shape[
                : len(self.cube_shape) - len(self._target.shape)
            ]
            raise ShapeError(f"Data shape mismatch. Expected: {expected} Got: {dshape}")
        if weights is None:
            weights = np.ones_like(data)
        weights = np.asarray(weights)
        if data.shape != weights.shape:
            raise ShapeError(
                "Data and weights arrays must have same shape. "
                f"(got: {data.shape} and {weights.shape})"
            )
        if data.ndim == 0 or data.shape[0] != lons.size:
            raise ShapeError(f"Data has {data.shape[:1]} samples, coordinates {lons.size}")
        data = _native(data)
        weights = _native(weights)
        lons, lats, data2d, weights, _ = prepare_samples(lons, lats, data, weights)
        nchan = data2d.shape[1] if data2d.ndim == 2 else 1
        dcube = self.datacube.reshape(nchan, self._target.size)
        wcube = self.weightcube.reshape(nchan, self._target.size)
        if self.dbg_messages:
            print(f"Gridding {lons.size} spectra in datacube...")
        self._plan.accumulate(lons, lats, data2d, weights, dcube, wcube)

    # -- results ------------------------------------------------------------------------

    def _need_cubes(self):
        if not self.cubes_prepared:
            raise StateError("Nothing has been gridded yet: call grid() first")

    def get_datacube(self):
        """datacube / weightcube, NaN where no sample contributed (no NumPy warning)."""
        self._need_cubes()
        return _core._grid_finish(self.datacube, self.weightcube).reshape(self.cube_shape)

    def get_weights(self):
        """The accumulated weight cube (a view, as Cygrid returns)."""
        self._need_cubes()
        return self.weightcube.reshape(self.cube_shape)

    def get_unweighted_datacube(self):
        """The accumulated weighted data sum (before dividing by the weights)."""
        self._need_cubes()
        return self.datacube.reshape(self.cube_shape)

    def clear_cache(self):
        """Clear internal caches (skyconv keeps none between calls: nothing to do)."""

    def clear_data_and_weights(self):
        """Reset the data and weight cubes to zero."""
        if self.datacube is not None:
            self.datacube[...] = 0.0
        if self.weightcube is not None:
            self.weightcube[...] = 0.0


class WcsGrid(Cygrid):
    """Grid onto the pixels of a FITS header (NAXIS1/NAXIS2 and its celestial WCS).

    ``header``: an ``astropy.io.fits.Header``, a dict, or anything ``astropy.wcs.WCS``
    accepts that also supports ``header['NAXIS1']``.
    """

    def __init__(
        self, header, dbg_messages=False, datacube=None, weightcube=None, dtype=np.float32, **kwargs
    ):
        self.header = header
        target = resolve_target(header if not isinstance(header, dict) else dict(header))
        super().__init__(
            target,
            dbg_messages=dbg_messages,
            datacube=datacube,
            weightcube=weightcube,
            dtype=dtype,
            **kwargs,
        )

    def get_wcs(self):
        """The celestial ``astropy.wcs.WCS`` built from the header."""
        return self._target.wcs

    def get_header(self):
        """The header given to the constructor."""
        return self.header

    def get_world_coords(self):
        """Pixel-centre (lons, lats) in degrees, each (ny, nx); NaN outside the projection."""
        shape = self._target.shape
        return self._target.lons.reshape(shape), self._target.lats.reshape(shape)


class SlGrid(Cygrid):
    """Grid onto sightlines ``sl_lons``, ``sl_lats`` (degrees, 1-D float64)."""

    def __init__(
        self,
        sl_lons,
        sl_lats,
        dbg_messages=False,
        datacube=None,
        weightcube=None,
        dtype=np.float32,
        **kwargs,
    ):
        sl_lons = np.asarray(sl_lons)
        sl_lats = np.asarray(sl_lats)
        if sl_lons.ndim != 1 or sl_lats.ndim != 1 or sl_lons.size != sl_lats.size:
            raise ShapeError("Sightline coordinates must be 1D arrays of equal length.")
        target = resolve_target((sl_lons, sl_lats))
        super().__init__(
            target,
            dbg_messages=dbg_messages,
            datacube=datacube,
            weightcube=weightcube,
            dtype=dtype,
            **kwargs,
        )


__all__ = ["ShapeError", "SlGrid", "WcsGrid"]
