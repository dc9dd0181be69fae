"""Many beams at once: the beams of a batch call, and the auto choice for a batch.

A batch (``fwhm`` a sequence, or ``beam_window`` of shape (n_beams, lmax + 1)) shares work
between its beams: the harmonic method does one map2alm and one alm2map of every beam's
product a_lm·b_l (``methods.harmonic_batch``); the ring method makes one engine call for all
beams (``methods.ring_beams``): on the GPU the map goes up and through the forward ring FFTs
once, then each beam's kernel tables, products and inverse FFTs run on the device (each beam
has its own kernel and support); on the CPU each beam is one pass, the FFT plans cached. When
``auto`` leaves a batch to the beams' own choices and they differ, the ring beams still run as
one ring batch and the harmonic beams as one harmonic batch (split beams alone).

``auto`` prices both ways as batches with the cost model: the shared harmonic transform as one
full smoothing plus one alm2map per further beam (half a smoothing each,
:func:`batch_harmonic_time`); the ring beams as one ring batch, the map's set-up and forward
ring FFTs once and per beam its products and inverse FFTs (:func:`ring_batch_time`). A beam
goes to the ring batch where the ring method meets its ``tol`` (``auto.ring_admissible``),
also where a single call would take the harmonic method for speed: on a GPU at nside 2048 a
harmonic smoothing costs ~5 ring passes, so a batch of 4′-6′ beams whose single calls each
take the harmonic method runs as a ring batch. It takes the shared harmonic transform unless
the ring batch plus a harmonic batch of the other beams is predicted faster.
"""

from __future__ import annotations

import numpy as np

from .._utils.device import resolve
from ..exceptions import ArgumentError, ShapeError
from . import cost as _cost
from .auto import choose, ring_admissible
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


def ring_batch_time(cost, nside: int, reaches) -> float:
    """Predicted seconds of one ring batch (``methods.ring_beams``) of beams with these kernel
    reaches (radians): the map's set-up and forward ring FFTs once, then each beam's kernel
    products and inverse FFTs. By the cost model's terms (``cost.ring_features``: a constant,
    FFT flops, multiply-add and cosine-sum flops) the first beam costs a whole call and each
    further beam a call less the constant and less half its FFT flops (the forward half, done
    once for the batch); on the fastest device."""
    from .cost import ring_features

    reaches = [float(r) for r in reaches]
    if not reaches:
        return 0.0
    best = float("inf")
    for d in cost.devices:
        if d.ring is None:
            continue
        t = 0.0
        for i, r in enumerate(reaches):
            f = ring_features(nside, r)
            if i > 0:
                f[0] = 0.0
                f[1] *= 0.5
            t += float(f @ d.ring)
        best = min(best, t)
    return best


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

    Both sides are priced as batches (the issue's "auto accounts for the batch"): the harmonic
    batch by :func:`batch_harmonic_time` (one map2alm, one alm2map per beam), the ring beams by
    :func:`ring_batch_time` (one set-up and forward transform, per-beam passes), the harmonic
    beams among them as one harmonic batch.
    """
    dev = resolve(device)
    cost = _cost.model(dev)
    lmax = bs[0].lmax
    t_batch = batch_harmonic_time(cost, nside, lmax, iter, len(bs))
    reach = []
    for b in bs:
        try:
            theta, _ = b.profile
        except ValueError:
            return "harmonic", None
        reach.append(float(theta[-1]))
    if ring_batch_time(cost, nside, reach) >= t_batch:
        return "harmonic", None
    each = _each_choice(bs, reach, nside, iter, dev)
    ring = [r for r, m in zip(reach, each) if m == "ring"]
    n_harm = sum(m == "harmonic" for m in each)
    t_each = ring_batch_time(cost, nside, ring)
    if n_harm:
        t_each += batch_harmonic_time(cost, nside, lmax, iter, n_harm)
    for b, m in zip(bs, each):
        if m not in ("ring", "harmonic"):
            t_each += choose(b, nside, iter, dev)[1]["times"][m]
    if t_batch <= t_each:
        return "harmonic", None
    return "each", each


def batch_pick(beam: Beam, nside: int, iter: int, dev) -> str:
    """A beam's method inside a batch: the ring method where it is admissible
    (``auto.ring_admissible``: it meets ``tol``), else the beam's own choice."""
    own = choose(beam, nside, iter, dev)[0]
    if own == "harmonic" and ring_admissible(beam, nside, iter):
        return "ring"
    return own


def _each_choice(bs: list[Beam], reach: list[float], nside: int, iter: int, dev) -> list[str]:
    """Each beam's method in the batch (:func:`batch_pick`, see :func:`choose_batch`): the ends
    first, bisected between."""
    order = sorted(range(len(bs)), key=lambda i: reach[i])

    def pick(k: int) -> str:
        return batch_pick(bs[order[k]], nside, iter, dev)

    lo, hi = pick(0), pick(len(bs) - 1)
    if lo == hi and lo in ("ring", "harmonic"):
        return [lo] * len(bs)
    if (lo, hi) != ("harmonic", "ring"):
        return [batch_pick(b, nside, iter, dev) for b in bs]
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


__all__ = [
    "batch_harmonic_time",
    "batch_pick",
    "beams",
    "choose_batch",
    "is_batch",
    "ring_batch_time",
]
