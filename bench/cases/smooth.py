"""Smoothing: skyconv.smooth_map by each method against healpy.smoothing(iter=0).

Accuracy: ``rel_err`` is against healpy's output; ``rel_err_ref`` (skyconv) and
``anchor_rel_err_ref`` (healpy) against the exact smoothing of the map's known alm.

Issue 4's sizes: nside 2048 (quick: 64), lmax 3·nside − 1 (both tools' default), tol 1e-5,
iter=0, a band-limited CMB-like map (ℓ ≤ 2 nside). FWHM 5′ for every method (ring, harmonic,
split, auto), and the wide beams 30′ and 1° where ``auto`` must be no slower than the best single
method; quick runs scale the beams with the pixel (×32). The ``auto`` cases record the method it
chose and its predicted times in their params (and print them). healpy is timed once per beam
and that measurement is the anchor of every method's row.

Timing: the warm-up call of ``split``/``auto`` measures the cost model (when it is not cached)
and fits the split, so the timed calls are the smoothing itself; the planning time is recorded
in the params as ``plan_seconds``.

Floors: the harmonic transforms as in bench/cases/sht.py (7 flops per ring pair, ℓ and m, one
map2alm and one alm2map at the band limit used), counting only the (ring, ℓ, m) above the
turning point ℓ ≈ m / sin θ (below it λ_ℓm is negligible and fast transforms skip it: 66% of
the nside·lmax² terms remain); the ring engine's FFT and multiply-add flops as its plan counts
them (``_core._ring_plan_info``); a split adds its two parts. Bytes: the map in
and out (plus the alm of the transforms). GPU rows of the ring method are one GPU call each, so
they report ``last_profile``'s stages (h2d, setup, fft, kernel, products, d2h) beside the wall
clock (issue 4's target: nside 2048, 5′, ≤ ~60 ms end to end on an H100:
``smooth.fwhm5_ring``); the other methods' GPU rows are wall clock only (several GPU calls).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..harness import Case, Comparison, Context, Host, Impl, Skyconv, SkyconvGpu, Work, register

NSIDE, QUICK_NSIDE = 2048, 64
TOL = 1e-5
BEAMS = (5.0, 30.0, 60.0)  # arcmin at NSIDE
METHODS = ("harmonic", "ring", "split", "auto")


def nside_of(ctx: Context) -> int:
    return QUICK_NSIDE if ctx.quick else NSIDE


def fwhm_of(ctx: Context, arcmin: float) -> float:
    """FWHM in radians, scaled with the pixel in quick runs."""
    return math.radians(arcmin * NSIDE / nside_of(ctx) / 60)


#: the alm of each cmb_map, by nside (for the exact reference)
_ALM: dict[int, np.ndarray] = {}


def cmb_map(nside: int) -> np.ndarray:
    """A CMB-like band-limited map (ℓ ≤ 2 nside, μK): a first peak near ℓ = 220, a D_ℓ floor."""
    import skyconv

    lmax = 2 * nside
    ell = np.arange(lmax + 1)
    dl = 5000 * np.exp(-(((ell - 220) / 120) ** 2)) + 1000 * np.exp(-ell / 400) + 200
    cl = np.zeros(lmax + 1)
    cl[2:] = 2 * np.pi * dl[2:] / (ell[2:] * (ell[2:] + 1))
    rng = np.random.default_rng(11)
    l_of, m_of = skyconv.Alm.getlm(lmax)
    alm = (rng.standard_normal(l_of.size) + 1j * rng.standard_normal(l_of.size)) * np.sqrt(
        cl[l_of] / 2
    )
    alm[m_of == 0] = alm[m_of == 0].real * np.sqrt(2)
    _ALM[nside] = alm
    return skyconv.alm2map(alm, nside)


def exact_smoothing(inputs: tuple) -> np.ndarray:
    """The exact Gaussian smoothing of the band-limited map: its alm times the beam, by healpy.

    Both healpy.smoothing(iter=0) and the ring method's pixel sums carry a quadrature error
    (largest at the poles); this is the answer neither approximates."""
    import healpy

    m, fwhm = inputs
    nside = healpy.npix2nside(m.size)
    alm = _ALM[nside]
    lmax = 2 * nside
    return healpy.alm2map(healpy.almxfl(alm, healpy.gauss_beam(fwhm, lmax=lmax)), nside, lmax=lmax)


def inputs_for(arcmin: float):
    def make(ctx: Context):
        nside = nside_of(ctx)
        return ctx.cache(("smooth.map", nside), lambda: cmb_map(nside)), fwhm_of(ctx, arcmin)

    return make


# --------------------------------------------------------------------------- work


def legendre_terms(nside: int, lmax: int) -> float:
    """(ring pair, ℓ, m) terms a transform cannot skip: on a ring at colatitude θ, λ_ℓm(θ) is
    exponentially small below its turning point ℓ ≈ m / sin θ, so an ideal transform sums
    ℓ from max(m, m / sin θ) to lmax (the polar rings need far fewer than lmax²/2)."""
    from skyconv import healpix

    s = healpix.ring_info(nside)["sin_theta"][: 2 * nside]  # north half and the equator
    n = lmax + 1.0
    count = np.floor(s * n - 1e-12) + 1  # m = 0 .. ⌊s n⌋ have terms
    return float(np.sum(count * n - count * (count - 1) / (2 * s)))


def sht_work(nside: int, lmax: int) -> Work:
    """One map2alm and one alm2map at band limit lmax: 7 flops per term as in sht.py (3 for
    the recurrence step, 4 for the complex accumulation), the alm written and read."""
    if lmax < 0:
        return Work()
    nalm = (lmax + 1) * (lmax + 2) // 2
    return Work(bytes=2 * 16.0 * nalm, flops=2 * 7.0 * legendre_terms(nside, lmax))


def ring_work(nside: int, theta, values) -> Work:
    from skyconv import _core

    info = _core._ring_plan_info(nside, np.asarray(theta), np.asarray(values))
    return Work(bytes=float(info["bytes"]) / 2, flops=info["fft_flops"] + info["mac_flops"])


def plan(method: str, m: np.ndarray, fwhm: float) -> tuple[str, Work, dict]:
    """What ``method`` runs for this map and beam: (what, its work, facts for the params)."""
    import skyconv
    from skyconv import smooth, split
    from skyconv.smooth import auto

    nside = round(math.sqrt(m.size / 12))
    lmax = 3 * nside - 1
    window = smooth.gauss_window(fwhm, lmax)
    io = Work(bytes=2 * 8.0 * m.size, h2d_bytes=8.0 * m.size, d2h_bytes=8.0 * m.size)
    facts: dict = {}
    if method == "auto":
        t0 = time.perf_counter()
        method, info = auto.choose_method(nside, lmax, window, TOL)
        facts = {
            "choice": method,
            "predicted_s": {k: round(v, 3) for k, v in info["times"].items()},
            "predicted_error": {k: float(f"{v:.2e}") for k, v in info["errors"].items()},
            "vs_exact": info["vs_exact"]
            and {k: float(f"{v:.2e}") for k, v in info["vs_exact"].items()},
            "plan_seconds": round(time.perf_counter() - t0, 2),
        }
    if method == "harmonic":
        return "harmonic", io + sht_work(nside, lmax), {**facts, "ring_part": False}
    if method == "ring":
        facts["ring_part"] = True
        theta, values = skyconv.smooth.kernel_profile(fwhm=fwhm, tol=TOL)
        return (
            f"ring (θcut {math.degrees(theta[-1]) * 60:.1f}′)",
            io + ring_work(nside, theta, values),
            facts,
        )
    t0 = time.perf_counter()
    ks = split.cached_split(window, nside, lmax, TOL, 0, None)
    facts.setdefault("plan_seconds", round(time.perf_counter() - t0, 2))
    facts["split"] = ks.summary()
    facts["ring_part"] = bool(ks.has_ring)
    work = io + sht_work(nside, ks.lcut)
    if ks.has_ring:
        work = work + ring_work(nside, ks.theta, ks.profile)
    return f"split (ℓcut {ks.lcut}, θcut {math.degrees(ks.theta_cut) * 60:.1f}′)", work, facts


def work_for(method: str, params: dict):
    def work(inputs: tuple) -> Work:
        m, fwhm = inputs
        what, w, facts = plan(method, m, fwhm)
        params.update(runs=what, **facts)
        print(f"  {method}: runs {what}" + (f"; {facts}" if facts else ""), flush=True)
        return w

    return work


# --------------------------------------------------------------------------- implementations


class SharedHost(Host):
    """A CPU anchor measured once per input and reused by every case that names it."""

    _done: dict = {}

    def measure(self, inputs, settings):
        key = (self.label, id(inputs[0]), inputs[1:], settings)
        if key not in self._done:
            self._done[key] = super().measure(inputs, settings)
        return self._done[key]


class SkyconvGpuWall(SkyconvGpu):
    """skyconv on the GPU, wall clock only (a smoothing makes several GPU calls)."""

    _call = Impl._call


def healpy_smoothing(m, fwhm):
    import healpy

    return healpy.smoothing(m, fwhm=fwhm, iter=0)


def sc_smooth(method: str, device: str):
    def call(m, fwhm):
        import skyconv

        return skyconv.smooth_map(m, fwhm=fwhm, tol=TOL, method=method, iter=0, device=device)

    call.__name__ = f"skyconv.smooth_map[{method},{device}]"
    return call


ANCHOR = SharedHost("healpy.smoothing", [healpy_smoothing], requires=("healpy",))

for beam in BEAMS:
    for method in METHODS:
        comps = [Comparison("cpu", Skyconv([sc_smooth(method, "cpu")]), ANCHOR)]
        gpu = SkyconvGpu if method == "ring" else SkyconvGpuWall  # one GPU call, or several
        comps.append(Comparison("gpu", gpu([sc_smooth(method, "cuda")]), ANCHOR))
        params = {
            "nside": NSIDE,
            "quick_nside": QUICK_NSIDE,
            "fwhm_arcmin": beam,
            "method": method,
            "tol": TOL,
            "iter": 0,
            "lmax": "3 nside - 1",
        }
        register(
            Case(
                name=f"smooth.fwhm{beam:g}_{method}",
                description=f"smooth_map {method} vs healpy.smoothing, nside 2048, {beam:g}′",
                inputs=inputs_for(beam),
                work=work_for(method, params),
                comparisons=comps,
                params=params,
                reference=exact_smoothing,
            )
        )
