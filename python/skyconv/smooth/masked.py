"""Masked and partial-sky smoothing: the weights of a map, and the normalised convolution.

With weights w in [0, 1] (1 observed, 0 masked; UNSEEN and non-finite pixels of the map count
as 0) every method smooths m·w and w with the same kernel (as two maps of one call: the ring
engines share each kernel spectrum between them) and divides,

    s(q) = Σ_p K(γ_pq) w(p) m(p) / Σ_p K(γ_pq) w(p),

the kernel-weighted mean of the observed neighbours, where the smoothed weight, relative to the
beam's total b_0, is at least ``min_weight``; UNSEEN elsewhere. A map that is constant where
observed stays that constant (to roundoff) wherever it is defined.
"""

from __future__ import annotations

import numpy as np

from .. import _core
from .._utils.arrays import int_arg
from ..exceptions import ArgumentError, ArgumentTypeError, ShapeError
from ..sht import UNSEEN
from .methods import missing

#: Default ``min_weight``: at least half the beam falls on observed pixels.
MIN_WEIGHT = 0.5


def check_min_weight(min_weight) -> float:
    """``min_weight`` as a float in [0, 1] (errors name it)."""
    try:
        v = float(min_weight)
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"min_weight must be a number in [0, 1], got {type(min_weight).__name__}"
        ) from None
    if not 0.0 <= v <= 1.0:
        raise ArgumentError(f"min_weight must be in [0, 1], got {min_weight}")
    return v


def partial_sky(m, nside):
    """A full map (npix,) from partial-sky input ``(ipix, values)``: UNSEEN where not given.

    Parameters
    ----------
    m : tuple (ipix, values)
        Pixel indices (integers in [0, 12 nside^2), unique; in the ordering of the call) and
        their values (float, same length).
    nside : int

    Returns
    -------
    float64 array (12 nside^2,)

    Raises
    ------
    skyconv.ArgumentError
        ``nside`` missing or invalid, indices out of range or repeated.
    skyconv.ArgumentTypeError
        Non-integer indices or non-real values.
    skyconv.ShapeError
        ``ipix`` and ``values`` not 1-D of the same length.
    """
    if nside is None:
        raise ArgumentError("nside is needed with partial-sky input m = (ipix, values)")
    nside = int_arg(nside, "nside")
    if nside < 1 or nside > 2**29:
        raise ArgumentError(f"nside must be in 1..2**29, got {nside}")
    if len(m) != 2:
        raise ShapeError(f"partial-sky input must be (ipix, values), got {len(m)} items")
    ipix, values = np.asarray(m[0]), np.asarray(m[1])
    if ipix.dtype.kind not in "iu":
        raise ArgumentTypeError(f"ipix must be integers, got dtype {ipix.dtype}")
    if values.dtype.kind not in "fiu" or values.dtype.kind == "b":
        raise ArgumentTypeError(f"values must be real numbers, got dtype {values.dtype}")
    if ipix.ndim != 1 or values.shape != ipix.shape:
        raise ShapeError(
            f"ipix and values must be 1-D of one length, got {ipix.shape} and {values.shape}"
        )
    npix = 12 * nside * nside
    ipix = ipix.astype(np.int64)
    if ipix.size and (ipix.min() < 0 or ipix.max() >= npix):
        raise ArgumentError(f"ipix must be in [0, {npix}) for nside {nside}")
    if np.unique(ipix).size != ipix.size:
        raise ArgumentError("ipix must not repeat a pixel")
    full = np.full(npix, UNSEEN)
    full[ipix] = values
    return full


def weights(mk: np.ndarray, mask) -> np.ndarray:
    """w for one map row ``mk``: ``mask`` (None or True: 1) times 0 at its missing pixels."""
    w = np.ones(mk.size) if mask is None or mask is True else np.array(mask, np.float64)
    w[missing(mk)] = 0.0
    return w


def check_mask(mask, npix: int, values: bool = True):
    """``mask`` as None, True or a float64 (npix,) array (errors name it); with ``values`` its
    weights are checked to lie in [0, 1] here (three passes over the mask); without, the caller
    leaves that to the core call it passes the mask to (``_core._smooth_ring_masked`` checks
    them in its own first pass, on the device on the GPU) or calls :func:`check_values`."""
    if mask is None or mask is True:
        return mask
    if mask is False:
        return None
    w = np.asarray(mask)
    if w.dtype.kind not in "biuf":
        raise ArgumentTypeError(f"mask must be a real or boolean array, got dtype {w.dtype}")
    w = np.ascontiguousarray(w, dtype=np.float64)
    if w.shape != (npix,):
        raise ShapeError(f"mask must have shape ({npix},) like the map, got {w.shape}")
    return check_values(w) if values else w


def check_values(w):
    """``w`` (None, True or a float64 array) after checking its weights lie in [0, 1]."""
    if w is None or w is True:
        return w
    if not (np.all(np.isfinite(w)) and w.min() >= 0.0 and w.max() <= 1.0):
        raise ArgumentError("mask must hold weights in [0, 1] (1 observed, 0 masked)")
    return w


def stack(filled: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The two maps the methods smooth: (m·w, w), (2, npix) float64 (m filled: 0 at missing)."""
    return np.stack([filled * w, w])


def normalise(smoothed: np.ndarray, b0: float, min_weight: float) -> np.ndarray:
    """s = smooth(m·w) / smooth(w) where smooth(w) / b0 >= min_weight (and > 0), else UNSEEN.
    ``smoothed``: (..., 2, npix); returns (..., npix)."""
    num, den = smoothed[..., 0, :], smoothed[..., 1, :]
    ok = (den > 0) & (den >= min_weight * b0)
    out = np.full(num.shape, UNSEEN)
    np.divide(num, den, out=out, where=ok)
    return out


def ring(mk, mask, nside, profiles, thr, device, ring_of=None) -> np.ndarray:
    """Masked ring smoothing of one map row ``mk`` with every beam of ``profiles`` in one core
    call (``_core._smooth_ring_masked``): the weights, m·w, both convolutions and
    :func:`normalise` (threshold ``thr[b]`` = min_weight·b_0 of beam b) without NumPy passes
    over the map; on the GPU only the normalised maps come down. The same bits as
    ``normalise(ring_beams(stack(...)))``. ``mask``: a checked float64 (npix,) array or True;
    ``ring_of``: RING index of each NEST pixel when the map is NEST (the result is too).
    Returns (n_beams, npix) float64."""
    w = None if mask is True else mask
    if ring_of is not None:
        mk = _to_ring(mk, ring_of)
        w = None if w is None else _to_ring(w, ring_of)
    ts = [np.ascontiguousarray(t, dtype=np.float64) for t, _ in profiles]
    vs = [np.ascontiguousarray(v, dtype=np.float64) for _, v in profiles]
    out = _core._smooth_ring_masked(
        np.ascontiguousarray(mk), int(nside), ts, vs, [float(t) for t in thr], w, device.core
    )
    return out if ring_of is None else out[:, ring_of]


def _to_ring(a, ring_of):
    r = np.empty(a.shape, dtype=a.dtype)
    r[ring_of] = a
    return r


def check_b0(window) -> float:
    """b_0 of a beam, the smoothed weight of a full sky (the normalisation of ``min_weight``);
    masked smoothing needs it positive."""
    b0 = float(window[0])
    if not b0 > 0:
        raise ArgumentError(f"masked smoothing needs a beam with b_0 > 0, got b_0 = {b0}")
    return b0


__all__ = ["MIN_WEIGHT"]
