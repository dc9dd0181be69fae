"""``smooth_map``: arguments checked once, the beam built once, the method chosen, then each
map run through it (see :mod:`skyconv.smooth` for the methods)."""

from __future__ import annotations

import warnings

import numpy as np

from .. import _core, healpix
from .._utils.arrays import float_array, int_arg
from .._utils.device import resolve
from .._utils.lazy import is_dask_array
from ..exceptions import ArgumentError, ShapeError, SkyconvWarning
from . import batch as _batch
from . import masked as _masked
from . import methods
from .auto import choose_fitting
from .beam import Beam
from .split import apply_split, cached_split

METHODS = ("auto", "harmonic", "ring", "split")
#: The narrowest beam (FWHM, in pixels of side sqrt(4π/npix)) the ring method runs; below it
#: the pixel sum of a kernel about a pixel wide is far off the normalised integral: against
#: the exact smoothing of band-limited white noise at nside 64 (``auto.grid_errors``) the ring
#: method is 9.8% off at 1.5 px (harmonic 6.3%), 39% at 1 px (10%), 2.9x at 0.5 px (13%);
#: against healpy 88x at 0.1 px. ``smooth_map`` uses the harmonic method there, with a
#: SkyconvWarning.
RING_MIN_PIXELS = 1.5


def smooth_map(
    m,
    fwhm=None,
    beam_window=None,
    lmax=None,
    nest=False,
    tol=1e-5,
    method="auto",
    iter=0,
    device=None,
    mask=None,
    min_weight=_masked.MIN_WEIGHT,
    nside=None,
):
    """Smooth a HEALPix map with a Gaussian beam or a beam window, with or without a mask, with
    one beam or many.

    Parameters
    ----------
    m : float32 or float64 array (npix,) or (nmaps, npix), or tuple (ipix, values)
        HEALPix map(s), npix = 12 nside^2 (any unit; the result has the same). Several maps
        are smoothed independently. Without ``mask``, UNSEEN and non-finite pixels are
        missing: they count as 0 in the convolution and keep their input value in the output
        (healpy's behaviour). A tuple (ipix, values) is a partial sky: the pixels ``ipix`` (in
        the call's ordering) have ``values``, the rest is unobserved; it needs ``nside``,
        is smoothed as a masked map (``mask=True``) and gives a full map (npix,). A dask array
        gives a dask array: "auto" and "harmonic" run through the distributed transforms (as
        ``skyconv.map2alm`` / ``alm2map`` of dask arrays); "ring" and "split" smooth each map
        in one task; ``nest=True``, ``mask`` and batches of beams are refused for dask input.
    fwhm : float or 1-D sequence of floats, optional
        Full width at half maximum of a Gaussian beam, in radians (use ``np.radians(x / 60)``
        for x arcmin). A sequence: a batch of beams (see Returns).
    beam_window : array, optional
        Beam window b_l, l = 0 ... len - 1 (b_l = 0 beyond); 2-D (n_beams, len): a batch of
        beams. Exactly one of ``fwhm`` and ``beam_window``.
    lmax : int, optional
        Band limit of the harmonic method and of ``beam_window`` (default 3 nside - 1). The
        ring method with ``fwhm`` uses the Gaussian itself, not band-limited.
    nest : bool
        The map is in the NEST ordering (nside a power of two); the result is too.
    tol : float
        Accuracy: the ring kernel is truncated where it falls below tol * K(0); the split and
        auto methods keep the predicted fractional error below tol (auto: or, where the pixel
        grid puts every method above it, take the ring method when it is as close to the
        exact smoothing as the harmonic method; see :mod:`skyconv.smooth`). In (0, 1).
    method : str
        "auto", "harmonic", "ring" or "split" (see :mod:`skyconv.smooth`). "ring" with a beam
        narrower than ``RING_MIN_PIXELS`` (1.5) pixels FWHM (pixel side sqrt(4π/npix)) runs
        the harmonic method instead and warns (:class:`skyconv.SkyconvWarning`): the ring sum
        of a kernel about a pixel wide is far off (39% at 1 px, 88x the input at 0.1 px).
    iter : int
        Jacobi iterations of map2alm in the harmonic (part of the) method (healpy's ``iter``).
    device : str or None
        "auto", "cpu", "cuda" or "cuda:N" (None: ``SKYCONV_DEVICE``, else "auto": the GPU
        when there is one). Every method runs on either.
    mask : array (npix,) of weights in [0, 1], True, or None
        Normalised (masked) smoothing: with weights w (1 observed, 0 masked; the map's UNSEEN
        and non-finite pixels count as 0; True: 1 everywhere else) the result is
        smooth(m·w) / smooth(w), the kernel-weighted mean of the observed neighbours (m·w and
        w go through the method together: the ring engines share every kernel spectrum
        between them; the harmonic method does the same through the SHT, band-limited, so it
        rings at sharp mask edges; split and auto likewise, as linear methods). In the map's
        ordering. None (default): no normalisation, the result is exactly the unmasked one.
    min_weight : float
        With a mask (or partial-sky input): pixels where smooth(w) / b_0 is below this are
        UNSEEN in the output (b_0: the beam's l = 0 window, 1 for a Gaussian; smooth(w) / b_0
        is the fraction of the beam on observed pixels). In [0, 1]; default 0.5.
    nside : int, optional
        The resolution of partial-sky input (ignored otherwise).

    Returns
    -------
    float64 array
        Shaped like ``m`` (partial-sky input: (npix,)), in the input's ordering and unit;
        with a batch of n beams, (n, npix) for one map and (n, nmaps, npix) for several, equal
        to the calls with each beam (the harmonic method shares one map2alm and one alm2map
        for all beams, the ring method one set-up and forward transform; ``auto`` prices the
        batch so, see :mod:`skyconv.smooth.batch`).

    Notes
    -----
    Memory (bytes per pixel, float64; k = 2 with a mask, else 1): the ring method on the CPU
    needs the input and output maps (8 k each per beam); on the GPU 8 + 32 k on the device
    plus the FFT work (45.5 bytes per pixel in all at nside 16384 without a mask, 85.5 with
    one); the harmonic method the maps plus their a_lm (12 bytes per pixel per alm set at
    lmax = 3 nside - 1; on the GPU ~22 bytes per pixel per component). At nside 16384 (25.8
    GB per map) the ring method needs 147 GB to hold the map whole on one GPU; where less is
    free it runs in ring blocks sized to the free memory (40 bytes per block pixel plus ~2.7
    GB; at least 10.7 GB; on an 80 GB H100 about three blocks), and raises a GpuMemoryError
    naming the bytes below that; with a mask it is not blocked (275 GB). The harmonic method
    needs 50 GB per component. ``method="auto"`` on a GPU only takes a method that fits its
    free memory and, where none fits, runs on the CPU with a SkyconvWarning. On the CPU the
    host holds the input and the output (51.5 GB for one map at nside 16384; the harmonic
    method 90 GB). See :func:`skyconv.smooth.memory.smooth_memory`.

    Masked ring smoothing is one core call per map: the weights, m·w, both convolutions and
    the division run in the engine (on the GPU the map and the mask go up once and only the
    normalised maps come down; the mask's values are checked there too, on the device), not
    as NumPy passes over the map.

    A batch of beams on the GPU returns its (n_beams, ..., npix) result in page-locked host
    memory where the host can hold it (at most half its memory, with as much again free; the
    block is kept for the next batch of that size unless ``SKYCONV_PINNED_MAX_MB`` caps the
    pool), and each beam's result comes down while the next beam computes.

    Raises
    ------
    TypeError
        A non-float map, or an argument of the wrong type.
    skyconv.ShapeError
        ``m`` is not (npix,) or (nmaps, npix) with npix = 12 nside^2; ``beam_window`` not 1-D.
    ValueError
        An unknown ``method`` or ``device``, both or neither of ``fwhm`` and ``beam_window``,
        ``tol`` outside (0, 1), a negative ``lmax`` or ``iter``, ``nest`` with nside not a
        power of 2.
    skyconv.DeviceError
        ``device="cuda"`` and no GPU works.
    skyconv.GpuMemoryError
        ``method="ring"`` on a GPU whose free memory cannot hold the method's fixed buffers
        (the message names the bytes needed and free).
    skyconv.ArgumentError
        A mask outside [0, 1], ``min_weight`` outside [0, 1], partial-sky input without
        ``nside`` or with indices out of range, a masked beam with b_0 <= 0.

    Examples
    --------
    A dipole keeps its shape; a Gaussian beam multiplies it by b_1 = exp(-sigma^2) (band
    limit 4 and 3 Jacobi iterations, so that the quadrature is exact to ~1e-10):

    >>> import numpy as np
    >>> import skyconv
    >>> nside = 16
    >>> theta, phi = skyconv.healpix.pix2ang(nside, np.arange(12 * nside**2))
    >>> fwhm = np.radians(5.0)
    >>> out = skyconv.smooth_map(np.cos(theta), fwhm=fwhm, lmax=4, method="harmonic", iter=3,
    ...                          device="cpu")
    >>> b1 = np.exp(-(fwhm**2) / (8 * np.log(2)))
    >>> bool(np.allclose(out, b1 * np.cos(theta), rtol=0, atol=1e-9))
    True
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ArgumentError(f"method must be one of {METHODS}, got {method!r}")
    if is_dask_array(m):  # distributed smoothing: skyconv._dask.smooth
        if mask is not None or _batch.is_batch(fwhm, beam_window):
            raise ArgumentError(
                "mask and batches of beams are not supported for dask input; compute the "
                "array first (np.asarray) or smooth without them"
            )
        from .._dask import smooth as _dsm

        return _dsm.smooth_map(
            m, fwhm, beam_window, lmax, nest, tol, method, iter, device, single=smooth_map
        )
    if isinstance(m, tuple):
        m = _masked.partial_sky(m, nside)
        mask = True if mask is None else mask
    arr = float_array(m, "m")
    if arr.ndim > 2:
        raise ShapeError(f"m must be 1-D (npix,) or 2-D (nmaps, npix), got shape {arr.shape}")
    maps = arr.reshape(-1, arr.shape[-1])
    nside = healpix.npix2nside(maps.shape[1])
    iter = int_arg(iter, "iter")
    if iter < 0:
        raise ArgumentError(f"iter must be >= 0, got {iter}")
    lmax = 3 * nside - 1 if lmax is None else int_arg(lmax, "lmax")
    if lmax < 0:
        raise ArgumentError(f"lmax must be >= 0, got {lmax}")
    many = _batch.is_batch(fwhm, beam_window)
    beams = (
        _batch.beams(fwhm, beam_window, lmax, tol)
        if many
        else [Beam.from_args(fwhm, beam_window, lmax, tol)]
    )
    # the weights' values: checked by the core call of the ring route, here on the others
    mask = _masked.check_mask(mask, maps.shape[1], values=False)
    if mask is not None:
        min_weight = _masked.check_min_weight(min_weight)
        b0s = [_masked.check_b0(b.window) for b in beams]
    if nest:
        if nside & (nside - 1):
            raise ArgumentError(f"nest=True needs nside a power of 2, got {nside}")
        # ring_of[k]: RING index of NEST pixel k.
        ring_of = healpix.nest2ring(nside, np.arange(maps.shape[1]))
    dev = resolve(device)
    run = _batch_runner(method, beams, nside, iter, dev) if many else None
    if run is None:
        runner = _runner(method, beams[0], nside, iter, dev, mask=mask is not None)
        dev = getattr(runner, "device", dev)

        def run(stack):
            return runner(stack if stack.shape[0] > 1 else stack[0]).reshape(1, *stack.shape)

        run.ring_profiles = getattr(runner, "ring_profiles", None)

    profiles = getattr(run, "ring_profiles", None)
    if mask is not None and profiles is not None:
        # the ring method: prep, both convolutions and the division in one core call
        thr = [min_weight * b0 for b0 in b0s]
        outs = [
            _masked.ring(mk, mask, nside, profiles, thr, dev, ring_of if nest else None)
            for mk in maps
        ]
        maps = maps[:0]
    else:
        outs = []  # per map: (n_beams, npix)
        mask = _masked.check_values(mask)
    for mk in maps:
        if mask is None:
            miss = _core._smooth_missing(mk)
            filled = mk
            if miss is not None:
                filled = mk.astype(np.float64)
                filled[miss] = 0.0
            stack = filled[None]
        else:
            w = _masked.weights(mk, mask)
            filled = np.where(w > 0, mk, 0.0)
            stack = _masked.stack(filled, w)
        if nest:
            ring = np.empty(stack.shape, dtype=stack.dtype)
            ring[:, ring_of] = stack
            stack = ring
        s = run(stack)  # (n_beams, k, npix)
        if mask is not None:
            s = np.stack([_masked.normalise(s[b], b0s[b], min_weight) for b in range(len(beams))])
        else:
            s = s[:, 0]
        if nest:
            s = s[:, ring_of]
        if mask is None and miss is not None:
            s[:, miss] = mk[miss]
        outs.append(s)
    # (n_beams, nmaps, npix); one map: a view of the engine's output, not a copy (a batch's
    # output is large; on the GPU it is a page-locked block, and a copy costs a pass over fresh
    # pages in the first call, issue 18)
    out = outs[0][:, None] if len(outs) == 1 else np.stack(outs, axis=1)
    if arr.ndim == 1:
        out = out[:, 0]
    return out if many else out[0]


def _batch_runner(method, beams, nside, iter, device):
    """A function RING stack (k, npix) -> (n_beams, k, npix) for a batch of beams: the shared
    harmonic transform, or each beam through its own method."""
    if method == "auto":
        method, each = _batch.choose_batch(beams, nside, iter, device)
    else:
        each = [method] * len(beams)
    if method == "harmonic":
        windows = [b.window for b in beams]
        lmax = beams[0].lmax
        return lambda st: methods.harmonic_batch(st, windows, lmax, iter, device)
    return _mixed_runner(each, beams, nside, iter, device)


def _mixed_runner(each, beams, nside, iter, device):
    """A batch runner for per-beam methods ``each``: the ring beams (at least RING_MIN_PIXELS
    wide) as one ring batch, the harmonic ones as one harmonic batch, the rest one by one; the
    results in the beams' order. Carries ``ring_profiles`` when every beam is a ring beam."""
    ring = [
        i
        for i, (mb, b) in enumerate(zip(each, beams))
        if mb == "ring" and b.fwhm_pixels(nside) >= RING_MIN_PIXELS
    ]
    harm = [i for i, mb in enumerate(each) if mb == "harmonic" and i not in ring]
    rest = [i for i in range(len(beams)) if i not in ring and i not in harm]
    profiles = [beams[i].profile for i in ring]
    windows = [beams[i].window for i in harm]
    runners = {i: _runner(each[i], beams[i], nside, iter, device) for i in rest}

    def run(st):
        if len(ring) == len(beams):  # no copy of the batch's (n, k, npix) result
            return methods.ring_beams(st, nside, profiles, device)
        # each part writes its rows of the one output (on the GPU a page-locked block): no
        # copy of the parts (session 10: `out[ring] = ...` copied 34 GB on one thread)
        out = methods.output_empty((len(beams), *st.shape), device)
        if ring:
            methods.ring_beams(st, nside, profiles, device, out=out, rows=ring)
        if harm:
            methods.harmonic_batch(st, windows, beams[0].lmax, iter, device, out=out, rows=harm)
        for i, r in runners.items():
            out[i] = r(st if st.shape[0] > 1 else st[0]).reshape(st.shape)
        return out

    if len(ring) == len(beams):
        run.ring_profiles = profiles
    return run


def _runner(method, beam: Beam, nside, iter, device, mask=False):
    """A function RING-filled map -> smoothed map for the chosen method (``auto``: one that
    fits the GPU's free memory, else on the CPU; the function's ``device`` says where)."""
    if method == "auto":
        method, dev, _ = choose_fitting(beam, nside, iter, device, mask=mask)
        if dev != device:
            warnings.warn(
                f"smooth_map: no smoothing method fits the GPU's free memory at nside {nside}"
                f"{' with a mask' if mask else ''} (see skyconv.smooth.memory.smooth_memory); "
                "running on the CPU",
                SkyconvWarning,
                stacklevel=3,
            )
        run = _runner(method, beam, nside, iter, dev)
        run.device = dev
        return run
    if method == "ring" and beam.fwhm_pixels(nside) < RING_MIN_PIXELS:
        warnings.warn(
            f"smooth_map: the ring method needs a beam of at least {RING_MIN_PIXELS:g} pixel(s) "
            f"FWHM, got {beam.fwhm_pixels(nside):.3g} at nside {nside}; using the harmonic "
            "method instead",
            SkyconvWarning,
            stacklevel=3,
        )
        method = "harmonic"
    if method == "harmonic":
        # float32 maps go to the engines as they are (they compute in float64).
        return lambda f: methods.harmonic(f, beam.window, beam.lmax, iter, device)
    if method == "ring":
        theta, values = beam.profile

        def ring_run(f):
            return methods.ring(f, nside, theta, values, device)

        ring_run.ring_profiles = [(theta, values)]
        return ring_run
    ks = cached_split(beam.window, nside, beam.lmax, beam.tol, iter, device)
    return lambda f: apply_split(ks, f, iter)


__all__ = ["METHODS", "RING_MIN_PIXELS", "smooth_map"]
