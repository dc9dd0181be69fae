"""``method="auto"``: the fastest smoothing method whose predicted error meets ``tol``.

The chooser sits above what it chooses between: the methods (:mod:`.methods`), the split
(:mod:`.split`) and the cost model (:mod:`.cost`). Each candidate's predicted fractional RMS
is against the harmonic result; where the pixel grid keeps every method above ``tol`` (beams
of a few pixels), the ring and harmonic methods' errors against the exact smoothing are
measured on a scaled-down white-noise copy of the problem (:func:`grid_errors`, ~0.1-0.5 s,
once per choice) and the ring method is taken when it is about as close (within 1.25x).
"""

from __future__ import annotations

import math

import numpy as np

from .. import sht
from .._utils.device import CPU, resolve
from .._utils.trace import stage
from . import _split_store, methods
from . import cost as _cost
from ._disc import disc_matrix
from ._fit import DISC_SAFETY, TabulatedProfile
from .beam import Beam
from .split import cached_split


def choose_method(nside, lmax, window, tol, device=None, iter=0):
    """The fastest smoothing method whose predicted error meets ``tol``, for a beam window
    (:func:`choose` for a :class:`~skyconv.smooth.beam.Beam`; a Gaussian window is recognised
    and its ring kernel is the Gaussian itself).

    Candidates: "harmonic" at ``lmax`` (the reference: no error); "split" from
    :func:`skyconv.smooth.split.split_kernel` (a split that is only a harmonic part runs it at the
    window's effective band limit, where the rest of the window carries < 0.1 tol); "ring",
    the ring method with skyconv.smooth's truncated profile, when its predicted error (window
    error plus pixel-grid error, see ``skyconv.smooth._disc``) meets ``tol``.

    The harmonic result is itself off the exact smoothing by the pixel grid's error: for
    beams of a few pixels on a white map, ~4e-3 at 3 px, far above any usual tol, and the
    ring method's pixel-grid error is of the same size. So when the ring method misses ``tol``
    against the harmonic result but would be the fastest, both methods' errors against the
    exact smoothing are measured (:func:`grid_errors`) and the ring method is taken if its
    error is at most GRID_SLACK (1.25) times the harmonic method's (white noise: from
    ~2 px up, where the two are within 1-15%; below, the ring method is ~1.5x farther), and
    the beam is at least GRID_MIN_PIXELS (2.5) pixels FWHM: narrower, the ring result is off
    healpy's (harmonic) smoothing by 1e-2 and more, so auto keeps to the harmonic or split
    method.

    Returns ``(method, info)``: ``info`` holds ``times`` and ``errors`` per candidate
    (seconds; fractional RMS against the harmonic result), ``vs_exact`` (the
    :func:`grid_errors` measurement, or None when not needed), the ``split`` (a KernelSplit),
    ``lmax_eff`` and ``devices``. Remembered per (window, nside, lmax, tol, iter, device) for
    this process.
    """
    return choose(Beam.from_window(window, int(lmax), float(tol)), int(nside), int(iter), device)


def choose(beam: Beam, nside: int, iter: int, device):
    """:func:`choose_method` for a checked beam; remembered per (beam, nside, iter, device
    placement) for this process."""
    dev = resolve(device)
    key = (beam.key, nside, iter, _cost.placement_key(dev))
    if key not in _CHOICES:
        if len(_CHOICES) > 32:
            _CHOICES.clear()
        with stage("smooth choice", f"nside {nside} (the whole choice, stages above included)"):
            _CHOICES[key] = _choose(beam, nside, iter, dev)
    return _CHOICES[key]


def choose_fitting(beam: Beam, nside: int, iter: int, device, nmaps=1, n_beams=1, mask=False):
    """:func:`choose`, kept to the methods that fit the GPU's free memory: ``(method, device,
    info)``.

    On the CPU, or where the chosen method fits (:func:`skyconv.smooth.memory.fits_gpu`
    against ``_core._gpu_budget``: 80% of the free memory), the choice as it is. Else the
    fastest other candidate that meets ``tol`` (the ring method by the same rules as in
    :func:`choose`) and fits; where none fits (nside 16384 with a mask on an H100: every
    method needs more than 80 GB) the CPU's own choice, on the CPU. ``nmaps``, ``n_beams``
    and ``mask`` size the call (:func:`~skyconv.smooth.memory.smooth_memory`).
    """
    from .. import _core
    from .memory import fits_gpu

    dev = resolve(device)
    method, info = choose(beam, nside, iter, dev)
    if not dev.is_cuda:
        return method, dev, info
    budget = _core._gpu_budget(dev.core)

    def fits(m):
        return fits_gpu(m, nside, budget, beam.lmax, nmaps, n_beams, mask)

    if fits(method):
        return method, dev, info
    times, errors, vs = info["times"], info["errors"], info["vs_exact"]
    ok = [m for m in times if errors[m] <= beam.tol]
    if (
        "ring" in times
        and vs is not None
        and vs["ring"] <= GRID_SLACK * vs["harmonic"]
        and beam.fwhm_pixels(nside) >= GRID_MIN_PIXELS
    ):
        ok.append("ring")
    fitting = [m for m in ok if fits(m)]
    if fitting:
        return min(fitting, key=lambda m: times[m]), dev, info
    method, info = choose(beam, nside, iter, CPU)
    return method, CPU, info


_CHOICES: dict = {}
_cost.ON_CLEAR.append(lambda: _CHOICES.clear())


def _choose(beam: Beam, nside, iter, device):
    lmax, tol, window = beam.lmax, beam.tol, beam.window
    cost = _cost.model(device)
    ks = cached_split(window, nside, lmax, tol, iter, device)
    times = {"harmonic": cost.harmonic_time(nside, lmax, iter)[0], "split": ks.predicted_time}
    errors = {"harmonic": 0.0, "split": ks.predicted_error}
    ring = _ring_candidate(beam, nside, cost, min(times.values()))
    vs_exact = None
    if ring is not None:
        times["ring"], errors["ring"] = ring
    ok = [m for m in times if errors[m] <= tol]
    if (
        ring is not None
        and errors["ring"] > tol
        and times["ring"] < min(times[m] for m in ok)
        and beam.fwhm_pixels(nside) >= GRID_MIN_PIXELS
    ):
        # The ring method misses tol against the harmonic result; it may still be as close
        # to the exact smoothing as the harmonic method is (narrow beams: both at the grid's
        # floor). Measured, not modelled, on a scaled-down copy of the problem.
        vs_exact = _stored_grid_errors(nside, lmax, window, tol, iter, beam.fwhm)
        if vs_exact["ring"] <= GRID_SLACK * vs_exact["harmonic"]:
            ok.append("ring")
    method = min(ok, key=lambda m: times[m])
    info = {
        "times": times,
        "errors": errors,
        "vs_exact": vs_exact,
        "split": ks,
        "lmax_eff": ks.lmax_eff,
        "devices": [d.device for d in cost.devices],
    }
    return method, info


#: The ring method is taken when its error against the exact smoothing is at most this
#: multiple of the harmonic method's (white noise at a few pixels: the two within ~1%).
GRID_SLACK = 1.25
#: The grid rule (taking the ring method although it misses tol against the harmonic result)
#: applies to beams of at least this FWHM in pixels only: below, the ring result is off
#: healpy's smoothing by ~1e-2 and more (2.2e-3 at 3 px, 2.7e-2 at 2 px, 8e-2 at 1.5 px; red
#: noise at nside 64), which users compare against, so auto takes the harmonic or split method.
GRID_MIN_PIXELS = 2.5
#: The scaled-down copy of a problem on which ``grid_errors`` measures.
GRID_NSIDE = 128


def grid_errors(nside, lmax, window, tol, iter, fwhm=None):
    """Fractional RMS errors of the ring and harmonic (``iter``) methods against the exact
    smoothing, measured on white noise band-limited at ``lmax``, with the problem scaled to
    nside ≤ GRID_NSIDE (the beam kept in pixels: b(ℓ) read at ℓ·nside/nside_c). Both errors
    come mostly from the pixel grid (the samples do not fix a white map's highest multipoles),
    so they scale with the beam in pixels, not with nside. {"ring": …, "harmonic": …, "nside":
    the nside measured at}. ~0.1 s at nside 128 on 2 cores. ``fwhm``: the beam's FWHM
    (radians) when it is that Gaussian (the ring kernel is then the Gaussian itself)."""

    nc = min(int(nside), GRID_NSIDE)
    scale = nside / nc
    lc = max(1, min(round(lmax / scale), 4 * nc))
    w = np.asarray(window, dtype=np.float64)[: lmax + 1]
    ell = np.arange(lc + 1)
    if fwhm is not None:  # the same Gaussian in pixels, not ℓ(ℓ+1) read off at scaled ℓ
        wc = methods.gauss(fwhm * scale, lc)
    else:
        wc = np.interp(ell * scale, np.arange(w.size), w, right=0.0)
    rng = np.random.default_rng(7)
    nalm = (lc + 1) * (lc + 2) // 2
    alm = (rng.standard_normal(nalm) + 1j * rng.standard_normal(nalm)) / math.sqrt(2.0)
    alm[: lc + 1] = alm[: lc + 1].real * math.sqrt(2.0)  # m = 0: real, unit variance
    m = sht.alm2map(alm, nc, lmax=lc, device="cpu")
    exact = sht.alm2map(sht.almxfl(alm, wc), nc, lmax=lc, device="cpu")
    if fwhm is not None:
        theta, values = methods.fwhm_profile(fwhm * scale, tol)
    else:
        theta, values = methods.window_profile(wc, tol)
    got = {
        "ring": methods.ring(m, nc, theta, values, CPU),
        "harmonic": methods.harmonic(m, wc, lc, iter, CPU),
    }
    rms = float(np.sqrt(np.mean(exact**2)))
    out = {k: float(np.sqrt(np.mean((v - exact) ** 2))) / rms for k, v in got.items()}
    out["nside"] = nc
    return out


def ring_admissible(beam: Beam, nside: int, iter: int) -> bool:
    """Whether the ring method meets the beam's ``tol`` by :func:`choose`'s rules, whatever its
    time: its predicted error against the harmonic result is at most ``tol``, or the beam is
    at least GRID_MIN_PIXELS wide and its error against the exact smoothing is at most
    GRID_SLACK times the harmonic method's (measured, :func:`grid_errors`). Both numbers come
    from the stores :func:`choose` uses. A batch of beams (``batch.choose_batch``) takes the
    ring method for a beam where it is admissible and the batch's price says so, also where a
    single call would take the harmonic method for speed."""
    try:
        _ = beam.profile  # the ring kernel (ValueError where the window has none)
    except ValueError:
        return False
    err = _stored_ring_error(beam, nside)
    if err is None:
        return False
    if err <= beam.tol:
        return True
    if beam.fwhm_pixels(nside) < GRID_MIN_PIXELS:
        return False
    vs = _stored_grid_errors(nside, beam.lmax, beam.window, beam.tol, iter, beam.fwhm)
    return vs["ring"] <= GRID_SLACK * vs["harmonic"]


def _stored_grid_errors(nside, lmax, window, tol, iter, fwhm):
    """:func:`grid_errors`, kept on disk per problem (``_split_store``): a fresh process's
    first auto choice for a narrow beam then skips the measurement."""
    name = _split_store.grid_key(window, nside, lmax, tol, iter, fwhm)
    with stage("smooth grid errors", f"nside {nside} (read from the cache)"):
        found = _split_store.load_json(name) if _split_store.enabled() else None
    if found is not None and {"ring", "harmonic", "nside"} <= found.keys():
        return found
    with stage("smooth grid errors", f"nside {nside} (measured)"):
        out = grid_errors(nside, lmax, window, tol, iter, fwhm=fwhm)
    if _split_store.enabled():
        _split_store.store_json(name, out)
    return out


def _ring_candidate(beam: Beam, nside, cost, beat):
    """(time, predicted error) of the ring method with the beam's truncated kernel; None where
    it cannot run or cannot beat ``beat`` seconds (then its error is not worth measuring)."""
    try:
        theta, _ = beam.profile
    except ValueError:
        return None
    t = cost.ring_time(nside, float(theta[-1]))[0]
    if not t < beat:
        return None
    err = _stored_ring_error(beam, nside)
    return None if err is None else (t, err)


def _stored_ring_error(beam: Beam, nside: int):
    """:func:`_ring_error`, kept on disk per problem (``_split_store``): its Legendre
    transform of the profile and pixel-grid matrix cost ~1 s at nside 2048, most of a fresh
    process's first auto choice there (issue 18)."""
    on = _split_store.enabled()
    name = _split_store.ring_key(beam.window, nside, beam.lmax, beam.tol, beam.fwhm)
    with stage("smooth ring error", f"nside {nside} (read from the cache)"):
        found = _split_store.load_json(name) if on else None
    if found is not None and "error" in found:
        return found["error"]
    with stage("smooth ring error", f"nside {nside} (computed)"):
        err = _ring_error(beam, nside)
    if on:
        _split_store.store_json(name, {"error": err})
    return err


def _ring_error(beam: Beam, nside: int):
    """Predicted fractional RMS error of the ring method with the beam's truncated kernel
    against the harmonic result (window error plus pixel-grid error); None where the window
    carries no signal."""
    k = beam.window
    theta, values = beam.profile
    prof = TabulatedProfile(theta, values)
    weights = (2 * np.arange(k.size) + 1) / (4 * np.pi)
    signal = float(np.sum(weights * k**2))
    if signal <= 0:
        return None
    resid = methods.profile_window(theta, values, k.size - 1) - k
    disc = float(disc_matrix(nside, prof, weights)[0, 0])
    return math.sqrt((float(np.sum(weights * resid**2)) + DISC_SAFETY**2 * disc) / signal)


__all__ = ["choose", "choose_fitting", "choose_method", "grid_errors", "ring_admissible"]
