"""Many beams at once: the beams of a batch call, and the auto choice for a batch.

A batch (``fwhm`` a sequence, or ``beam_window`` of shape (n_beams, lmax + 1)) shares work
between its beams: the harmonic method does one map2alm and one alm2map of every beam's
product a_lm·b_l (``methods.harmonic_batch``); the ring method makes one engine call for all
beams (``methods.ring_beams``): on the GPU the map goes up and through the forward ring FFTs
once, then each beam's kernel tables, products and inverse FFTs run on the device (each beam
has its own kernel and support); on the CPU each beam is one pass, the FFT plans cached. When
``auto`` leaves a batch to the beams' own choices and they differ, the ring beams still run as
one ring batch and the harmonic beams as one harmonic batch (split beams alone). The
cost model prices the harmonic batch as one full smoothing plus one alm2map per further beam
(half a smoothing each), so ``auto`` takes the shared harmonic transform unless the beams'
own choices, summed, are faster.
"""

from __future__ import annotations

import numpy as np

from .._utils.device import resolve
from ..exceptions import ArgumentError, ShapeError
from . import cost as _cost
from .auto import choose
from .beam import Beam


def is_batch(fwhm, beam_window) -> bool:
    """Whether the call asks for several beams (``fwhm`` not a scalar, or a 2-D window)."""
    if fwhm is not None and np.ndim(fwhm) > 0:
        return True
    return beam_window is not None and np.ndim(beam_window) == 2


def beams(fwhm, beam_window, lmax: int, tol) -> list[Beam]:
    """The checked beams of a batch call (see :func:`is_batch`)."""
    if fwhm is not None and beam_window is not None:
        raise ArgumentError("give exactly one of fwhm (radians) and beam_window")
    if fwhm is not None:
        f = np.asarray(fwhm)
        if f.ndim != 1 or f.size == 0:
            raise ShapeError(f"fwhm must be a number or a non-empty 1-D sequence, got {f.shape}")
        return [Beam.from_args(float(x), None, lmax, tol) for x in f]
    w = np.asarray(beam_window)
    if w.shape[0] == 0:
        raise ShapeError(f"beam_window must hold at least one beam, got shape {w.shape}")
    return [Beam.from_args(None, row, lmax, tol) for row in w]


def batch_harmonic_time(cost, nside: int, lmax: int, iter: int, n_beams: int) -> float:
    """Predicted seconds of the shared harmonic batch: one smoothing (map2alm with ``iter``
    and one alm2map) plus half a smoothing without iterations per further beam."""
    t_full = cost.harmonic_time(nside, lmax, iter)[0]
    t_one = cost.harmonic_time(nside, lmax, 0)[0]
    return t_full + 0.5 * t_one * (n_beams - 1)


def choose_batch(bs: list[Beam], nside: int, iter: int, device):
    """("harmonic", None) when the shared harmonic batch is predicted fastest, else
    ("each", [method per beam]).

    The beams' own choices are only worked out when their ring methods alone could beat the
    batch (each choice fits a split and may measure the pixel grid's error, ~seconds). They are
    made for the narrowest and the widest beam (by the ring kernel's reach) first: where both
    take the ring method, or both the harmonic method, every beam between takes it too (the ring
    method's error falls and its time grows with the width, the harmonic time is the same for
    all); where the narrowest takes the harmonic method and the widest the ring method, the
    width at which the choice changes is bisected (~log2 n choices, not n). Other combinations
    (a split at either end) choose every beam on its own.
    """
    dev = resolve(device)
    cost = _cost.model(dev)
    lmax = bs[0].lmax
    t_batch = batch_harmonic_time(cost, nside, lmax, iter, len(bs))
    t_ring, reach = 0.0, []
    for b in bs:
        try:
            theta, _ = b.profile
        except ValueError:
            return "harmonic", None
        reach.append(float(theta[-1]))
        t_ring += cost.ring_time(nside, reach[-1])[0]
        if t_ring >= t_batch:
            return "harmonic", None
    each = _each_choice(bs, reach, nside, iter, dev)
    ring = [r for r, m in zip(reach, each) if m == "ring"]
    n_harm = sum(m == "harmonic" for m in each)
    t_each = sum(cost.ring_time(nside, r)[0] for r in ring)
    if n_harm:
        t_each += batch_harmonic_time(cost, nside, lmax, iter, n_harm)
    for b, m in zip(bs, each):
        if m not in ("ring", "harmonic"):
            t_each += choose(b, nside, iter, dev)[1]["times"][m]
    if t_batch <= t_each:
        return "harmonic", None
    return "each", each


def _each_choice(bs: list[Beam], reach: list[float], nside: int, iter: int, dev) -> list[str]:
    """Each beam's method (see :func:`choose_batch`): the ends first, bisected between."""
    order = sorted(range(len(bs)), key=lambda i: reach[i])

    def pick(k: int) -> str:
        return choose(bs[order[k]], nside, iter, dev)[0]

    lo, hi = pick(0), pick(len(bs) - 1)
    if lo == hi and lo in ("ring", "harmonic"):
        return [lo] * len(bs)
    if (lo, hi) != ("harmonic", "ring"):
        return [choose(b, nside, iter, dev)[0] for b in bs]
    a, z = 0, len(bs) - 1  # pick(a) is harmonic, pick(z) ring
    while z - a > 1:
        mid = (a + z) // 2
        if pick(mid) == "ring":
            z = mid
        else:
            a = mid
    out = [""] * len(bs)
    for k, i in enumerate(order):
        out[i] = "ring" if k >= z else "harmonic"
    return out


__all__ = ["batch_harmonic_time", "beams", "choose_batch", "is_batch"]
