"""Smoothing that healpy cannot do (issue 21): masked skies, many beams, nside 16384.

Cases (nside 2048, quick: 64; beams scale with the pixel in quick runs):

- ``smooth.masked5_ring``: a 20% galactic cut (|sin b| < 0.2), FWHM 5′, the ring method with
  ``mask=`` (normalised convolution: m·w and w in one engine call) against healpy's best
  equivalent, ``healpy.smoothing`` of m·w and of w (iter=0), divided. ``rel_err`` compares
  the two normalised maps where healpy's smoothed weight is >= 0.6 (the anchor is NaN
  elsewhere; skyconv cuts at min_weight = 0.5); the harmonic anchor rings at the cut's edge,
  so expect ~1e-3 to 1e-2 there, not roundoff.
- ``smooth.masked5_vs_unmasked``: the same masked call against the unmasked ring call on the
  same engine (the anchor), for the issue's "masked ≤ 2× unmasked time" (``ratio`` ≥ 0.5);
  ``rel_err`` there compares different outputs and means nothing. The masked call is one core
  call (``_core._smooth_ring_masked``), so its GPU row has device stages too.
- ``smooth.beams100``: 100 Gaussian beams (FWHM 4′ ... 6′) on one map, ``smooth_map(m,
  fwhm=[...])`` (auto: the shared harmonic transform, or the beams' own methods with the ring
  beams as one ring batch) against separate ``smooth_map`` calls (auto), GPU rows only. The
  loop side makes ANCHOR_CALLS (10) of the 100 calls (the beams at the middles of ten equal
  index ranges) and reports their time × 10 (its label says so): every first call of a beam
  chooses its method (~1 s each, in the warm-up), and auto remembers 32 choices only.
  ``smooth.beams100_ring``: the same with ``method="ring"`` on both sides (the ring batch's
  pipeline against ring calls, whatever auto would choose), the loop making all 100 calls.
  Both sides return the picked beams' maps (``rel_err`` compares them) but stop their clocks
  before the pick (a 4 GB copy into fresh pages, ~1-2 s, was timed in session 10, ×10 on the
  scaled loop); a loop call's output is dropped unless it is picked, so its page-locked block
  serves the next call. Each side is timed BEAM_REPEATS (3) times after its warm-up (median),
  and every sample prints its parts (:func:`beam_parts`: host, device stages, transfers).
  Quick runs use 8 beams.
  ``smooth.beams8``: the same with 8 beams, CPU rows only (the GPU is covered by beams100).
- ``smooth16k.fwhm1_ring``, ``smooth16k.fwhm1_harmonic`` and ``smooth16k.fwhm1_auto`` (only
  when ``SKYCONV_BENCH_16K=1``, GPU engine only, no anchor, each timed once after its warm-up):
  nside 16384, FWHM 1′, on one GPU; the params record the estimated bytes
  (``skyconv.smooth.memory``: ``device`` for the whole map, ``device_min`` the least). The
  input is NOISE_PERIOD white-noise values repeated (:func:`tiled_noise`, filled on skyconv's
  threads in seconds; drawing 3.2e9 deviates took tens of seconds), made once for the three
  rows. The ring method needs 147 GB for the whole map on the device, more than an H200 has:
  it runs in ring blocks sized to the free memory (``src/smooth/cuda/blocked.rs``; on an H100
  ~3 blocks); the harmonic method needs ~50 GB; ``auto`` takes a method that fits the free
  memory. Expected ~2-3 minutes in all on an H100 (each row: the warm-up and one timed call,
  51.6 GB over PCIe per call).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace

import numpy as np

from ..harness import Case, Comparison, Context, Host, Skyconv, SkyconvGpu, Work, register
from .smooth import SkyconvGpuWall, cmb_map, fwhm_of, nside_of, ring_work

MIN_WEIGHT = 0.5
#: The anchor leaves pixels with a smoothed weight within this of MIN_WEIGHT undefined (its
#: harmonic weight rings by up to a few percent there, so the two would cut different pixels).
ANCHOR_MARGIN = 0.1
N_BEAMS, CPU_BEAMS, QUICK_BEAMS = 100, 8, 8
#: Separate calls the auto beams100 loop makes (its time is scaled to N_BEAMS calls).
ANCHOR_CALLS = 10
#: Timed calls of the slow rows (healpy's anchor, the batches) after their warm-up.
ROW_REPEATS = 1
#: Timed samples of each side of the GPU beams rows after their warm-up (the median is
#: reported: single samples moved by 50% between session 10's runs).
BEAM_REPEATS = 3


class Few:
    """Mixin: time the implementation ROW_REPEATS times after its warm-up (rows of seconds
    each, so that the cases fit one device call)."""

    def measure(self, inputs, settings):
        return super().measure(inputs, replace(settings, repeats=ROW_REPEATS, min_time=0.0))


class FewHost(Few, Host):
    """healpy's anchor: timed ROW_REPEATS times, once for the CPU and GPU rows together
    (remembered per input arrays: the cases share them through ``Context.cache``)."""

    _done: dict = {}

    def measure(self, inputs, settings):
        key = (self.label, tuple(id(x) for x in inputs), settings)
        if key not in self._done:
            self._done[key] = super().measure(inputs, settings)
        return self._done[key]


class FewGpuWall(Few, SkyconvGpuWall):
    pass


def galactic_mask(nside: int, frac: float = 0.2) -> np.ndarray:
    """0 where |z| < frac (|sin b| < 0.2: 20% of the sky), else 1 (RING)."""
    from skyconv import healpix

    th, _ = healpix.pix2ang(nside, np.arange(12 * nside**2))
    return (np.abs(np.cos(th)) >= frac).astype(np.float64)


def masked_inputs(ctx: Context):
    nside = nside_of(ctx)
    m = ctx.cache(("smooth.map", nside), lambda: cmb_map(nside))
    w = ctx.cache(("smooth.galmask", nside), lambda: galactic_mask(nside))
    return m, w, fwhm_of(ctx, 5.0)


def healpy_normalised(m, w, fwhm):
    """healpy's best equivalent: smoothing(m·w) / smoothing(w); NaN where the smoothed weight
    is below MIN_WEIGHT + ANCHOR_MARGIN (so that ``rel_err``, which skips non-finite anchor
    pixels, compares only pixels both define)."""
    import healpy

    num = healpy.smoothing(m * w, fwhm=fwhm, iter=0)
    den = healpy.smoothing(w, fwhm=fwhm, iter=0)
    out = np.full(m.size, np.nan)
    ok = den >= MIN_WEIGHT + ANCHOR_MARGIN
    out[ok] = num[ok] / den[ok]
    return out


def sc_masked(device: str):
    def call(m, w, fwhm):
        import skyconv

        return skyconv.smooth_map(
            m, fwhm=fwhm, method="ring", mask=w, min_weight=MIN_WEIGHT, device=device
        )

    call.__name__ = f"skyconv.smooth_map[ring,mask,{device}]"
    return call


def sc_unmasked(device: str):
    def call(m, w, fwhm):
        import skyconv

        return skyconv.smooth_map(m, fwhm=fwhm, method="ring", device=device)

    call.__name__ = f"skyconv.smooth_map[ring,{device}]"
    return call


def masked_work(inputs) -> Work:
    import skyconv

    m, _, fwhm = inputs
    nside = round(math.sqrt(m.size / 12))
    theta, values = skyconv.smooth.kernel_profile(fwhm=fwhm, tol=1e-5)
    one = ring_work(nside, theta, values)
    io = Work(bytes=3 * 8.0 * m.size, h2d_bytes=16.0 * m.size, d2h_bytes=16.0 * m.size)
    # two maps through one plan: the FFTs and products twice, the kernel once (not counted)
    return io + one + one


HEALPY = FewHost("healpy.smoothing(m·w)/smoothing(w)", [healpy_normalised], requires=("healpy",))
_PARAMS = {"nside": 2048, "quick_nside": 64, "fwhm_arcmin": 5.0, "mask": "|sin b| < 0.2 (20%)"}

register(
    Case(
        name="smooth.masked5_ring",
        description="masked ring smoothing (20% galactic cut, 5′) vs healpy smoothing(m·w)/(w)",
        inputs=masked_inputs,
        work=masked_work,
        comparisons=[
            Comparison("cpu", Skyconv([sc_masked("cpu")]), HEALPY),
            Comparison("gpu", SkyconvGpu([sc_masked("cuda")]), HEALPY),
        ],
        params=dict(_PARAMS, min_weight=MIN_WEIGHT),
    )
)

register(
    Case(
        name="smooth.masked5_vs_unmasked",
        description="masked ring smoothing vs the unmasked ring call (anchor), 5′",
        inputs=masked_inputs,
        work=masked_work,
        comparisons=[
            Comparison(
                "cpu",
                Skyconv([sc_masked("cpu")]),
                Skyconv([sc_unmasked("cpu")], note="the unmasked call: the anchor"),
            ),
            Comparison(
                "gpu",
                SkyconvGpu([sc_masked("cuda")]),
                SkyconvGpu([sc_unmasked("cuda")], note="the unmasked call: the anchor"),
            ),
        ],
        params=dict(_PARAMS, note="ratio = unmasked time / masked time (goal >= 0.5)"),
    )
)


def beams_inputs(n_beams: int):
    def make(ctx: Context):
        nside = nside_of(ctx)
        m = ctx.cache(("smooth.map", nside), lambda: cmb_map(nside))
        n = min(n_beams, QUICK_BEAMS) if ctx.quick else n_beams
        return m, np.array([fwhm_of(ctx, a) for a in np.linspace(4.0, 6.0, n)])

    return make


def picked(n: int) -> np.ndarray:
    """The beams whose maps the beams rows return (``rel_err`` compares them; the scaled anchor
    calls only these): the middles of ANCHOR_CALLS equal index ranges."""
    k = min(n, ANCHOR_CALLS)
    return ((np.arange(k) + 0.5) * n / k).astype(int)


def sc_batch(device: str, method: str = "auto"):
    def call(m, fwhms):
        import skyconv

        return skyconv.smooth_map(m, fwhm=fwhms, device=device, method=method)

    call.__name__ = f"skyconv.smooth_map[fwhm=[...],{device},{method}]"
    return call


def sc_loop(device: str, method: str = "auto"):
    def call(m, fs):
        import skyconv

        return np.stack([skyconv.smooth_map(m, fwhm=f, device=device, method=method) for f in fs])

    call.__name__ = f"[skyconv.smooth_map(fwhm=f,{device},{method}) for f]"
    return call


def beam_parts(e2e_ms: float, profiles: list[dict]) -> dict[str, float]:
    """One timed sample of a GPU beams row from its wall clock and the ``last_profile()`` of
    each core call: ``e2e``; ``device`` (the stages on the device but the transfers);
    ``h2d`` / ``d2h`` (the transfer stages: the batch's overlapped DMAs are not a stage, only
    the tail after its last kernel); ``span`` (first to last event of the calls' timelines);
    ``host`` = e2e - span (Python, plans and tables, output allocation, anything the device
    does not see)."""
    from ..harness import TRANSFER_STAGES

    st: dict[str, float] = {}
    for p in profiles:
        for k, v in p.items():
            st[k] = st.get(k, 0.0) + float(v)
    span = st.get("total", 0.0)
    return {
        "e2e": e2e_ms,
        "device": sum(v for k, v in st.items() if k not in TRANSFER_STAGES),
        "h2d": st.get("h2d", 0.0),
        "d2h": st.get("d2h", 0.0),
        "span": span,
        "host": e2e_ms - span,
    }


def _say(what: str, s: dict[str, float]) -> None:
    print(
        f"    {what}: e2e {s['e2e']:.0f} ms = host {s['host']:.0f} + device span "
        f"{s['span']:.0f} (device stages {s['device']:.0f}, h2d {s['h2d']:.0f}, "
        f"d2h {s['d2h']:.0f})",
        flush=True,
    )


class BeamsRow(SkyconvGpu):
    """One side of a GPU beams row. ``run(m, fwhms)`` returns (the picked beams' maps, a
    sample from :func:`beam_parts`) and stops its clock before it picks: the rows time the
    smoothing, not copies of their outputs (session 10 timed a 4 GB ``np.stack`` or pick in
    each sample, ~1-2 s at the pageable rate of fresh pages, and scaled the loop's ×10). Timed
    BEAM_REPEATS times after one warm-up; each sample's parts are printed (the warm-up's too:
    it pins the batch's output block)."""

    def __init__(self, label: str, run, scale: float = 1.0, note: str = ""):
        super().__init__(run, label=label, note=note)
        self.run, self.scale = run, scale

    def measure(self, inputs, settings):
        return super().measure(inputs, replace(settings, repeats=BEAM_REPEATS, min_time=0.0))

    def _call(self, inputs):
        out, sample = self.run(*inputs)
        _say(self.label, sample)
        return out, {k: v * self.scale for k, v in sample.items()}


def say_choice(nside: int, fwhms) -> None:
    """Print auto's choice for the batch and the GPU cost model's prices behind it (the
    choices are remembered from the batch call: no new measurement)."""
    from skyconv.smooth import batch as sb
    from skyconv.smooth import cost

    lmax = 3 * nside - 1
    bs = sb.beams(fwhms, None, lmax, 1e-5)
    kind, each = sb.choose_batch(bs, nside, 0, "cuda")
    model = cost.model("cuda")
    reach = [float(b.profile[0][-1]) for b in bs]
    ring = [r for r, e in zip(reach, each or []) if e == "ring"]
    print(
        f"    auto batch choice: {kind}; ring {len(ring)}, harmonic "
        f"{(each or []).count('harmonic')} of {len(bs)} beams. GPU model (ms): shared harmonic "
        f"batch {1e3 * sb.batch_harmonic_time(model, nside, lmax, 0, len(bs)):.0f}, all-ring "
        f"batch {1e3 * sb.ring_batch_time(model, nside, reach):.0f}, chosen ring part "
        f"{1e3 * sb.ring_batch_time(model, nside, ring):.0f}; one ring call (middle beam) "
        f"{1e3 * model.ring_time(nside, reach[len(reach) // 2])[0]:.0f}, one harmonic "
        f"{1e3 * model.harmonic_time(nside, lmax)[0]:.0f}",
        flush=True,
    )


def batch_run(method: str):
    """The batch: one ``smooth_map(m, fwhm=[...])``, the (n, npix) output dropped after the
    picked beams are copied out (its page-locked block goes back to the pool for the next
    sample, as a user's next batch of that size would find it)."""

    def run(m, fwhms):
        import skyconv

        t0 = time.perf_counter()
        out = skyconv.smooth_map(m, fwhm=fwhms, device="cuda", method=method)
        e2e = (time.perf_counter() - t0) * 1e3
        # the last core call's stages: the whole ring batch (auto's mixed batch: its last part)
        sample = beam_parts(e2e, [skyconv.last_profile()])
        keep = np.array(out[picked(len(fwhms))])
        del out
        if method == "auto" and not said:
            said.append(True)
            try:
                say_choice(round(math.sqrt(m.size / 12)), fwhms)
            except Exception as e:  # noqa: BLE001 - a diagnostic line, not the measurement
                print(f"    auto batch choice: not shown ({type(e).__name__}: {e})")
        return keep, sample

    said: list = []
    return run


def loop_run(method: str, every: bool):
    """Separate ``smooth_map`` calls: every beam (``every``) or the picked ones. Each call's
    output is dropped unless it is a picked beam's (a loop that keeps 100 maps of 0.4 GB
    would outgrow the page-locked pool, 8 GiB, and the rest would come down at the pageable
    rate: slower, so not the loop to beat), so its block is reused by the next call."""

    def run(m, fwhms):
        import skyconv

        keep = set(picked(len(fwhms)).tolist())
        idx = range(len(fwhms)) if every else sorted(keep)
        kept, profiles = [], []
        t0 = time.perf_counter()
        for i in idx:
            o = skyconv.smooth_map(m, fwhm=fwhms[i], device="cuda", method=method)
            profiles.append(skyconv.last_profile())
            if i in keep:
                kept.append(o)
            del o
        e2e = (time.perf_counter() - t0) * 1e3
        return np.stack(kept), beam_parts(e2e, profiles)

    return run


def beams_work(inputs) -> Work:
    m, fwhms = inputs
    n = len(fwhms)
    return Work(bytes=8.0 * m.size * (1 + n), h2d_bytes=8.0 * m.size, d2h_bytes=8.0 * m.size * n)


def register_gpu_beams(suffix: str, method: str, loop_calls: int) -> None:
    """N_BEAMS beams on one nside 2048 map on the GPU: one batch call against N_BEAMS single
    calls (``loop_calls`` of them timed, scaled to N_BEAMS), both with `method`."""
    every = loop_calls >= N_BEAMS
    label = f"skyconv ({N_BEAMS} calls)"
    if not every:
        label = f"skyconv (x{N_BEAMS / loop_calls:g} of {loop_calls} calls)"
    register(
        Case(
            name=f"smooth.beams{N_BEAMS}{suffix}",
            description=f"{N_BEAMS} beams (4′-6′) on one map in one call vs {N_BEAMS} calls "
            f"({method}; {'every call timed' if every else f'the calls scaled from {loop_calls}'})",
            inputs=beams_inputs(N_BEAMS),
            work=beams_work,
            comparisons=[
                Comparison(
                    "gpu",
                    BeamsRow("skyconv batch", batch_run(method)),
                    BeamsRow(
                        label,
                        loop_run(method, every),
                        scale=1.0 if every else N_BEAMS / loop_calls,
                    ),
                )
            ],
            params={
                "nside": 2048,
                "quick_nside": 64,
                "n_beams": N_BEAMS,
                "quick_beams": QUICK_BEAMS,
                "loop_calls": N_BEAMS if every else loop_calls,
                "repeats": BEAM_REPEATS,
                "method": method,
                "note": "outputs: the picked beams; copies outside the clock; parts per sample "
                "in stages_ms (host = e2e - device span)",
            },
        )
    )


# auto: the loop's first call of each beam chooses its method (~1 s each, the warm-up), and
# auto's choices are remembered for 32 beams only: 10 calls, scaled.
register_gpu_beams("", "auto", ANCHOR_CALLS)
# The same with the ring method on both sides: the ring batch's own pipeline (one upload and
# forward FFT, each beam's result coming down while the next computes, a page-locked output)
# against 100 ring calls, every one timed.
register_gpu_beams("_ring", "ring", N_BEAMS)

# 8 beams: CPU rows (100 CPU calls at nside 2048 would take the default run past its limit).
# One method on both sides (ring), so the batch must equal the loop to rounding: under "auto"
# a batch may choose otherwise than the single calls (the choice accounts for the batch, and
# the cost model is timed on the machine), and the outputs would then differ by the methods'
# errors (~1e-2 at the quick size).
register(
    Case(
        name=f"smooth.beams{CPU_BEAMS}",
        description=f"{CPU_BEAMS} beams (4′-6′) on one map in one call vs {CPU_BEAMS} calls (ring)",
        inputs=beams_inputs(CPU_BEAMS),
        work=beams_work,
        comparisons=[
            Comparison(
                "cpu",
                Skyconv([sc_batch("cpu", method="ring")]),
                Skyconv([sc_loop("cpu", method="ring")]),
            ),
        ],
        params={"nside": 2048, "quick_nside": 64, "n_beams": CPU_BEAMS, "quick_beams": 8},
    )
)


#: Period of the nside 16384 bench map (a prime number of pixels: no ring length divides it).
NOISE_PERIOD = 16777259
#: Pixels per piece of :func:`tiled_noise`'s parallel fill.
NOISE_PIECE = 1 << 23


def tiled_noise(npix: int, seed: int = 5) -> np.ndarray:
    """A float64 map of ``npix`` pixels: NOISE_PERIOD white-noise values repeated, filled in
    pieces on skyconv's threads (NumPy copies release the GIL). The content does not matter
    for the time; drawing 3.2e9 normal deviates on one thread took tens of seconds (session 9),
    this ~2-5 s (a pass over 25.8 GB of fresh pages)."""
    import concurrent.futures

    from skyconv.backend import get_num_threads

    base = np.random.default_rng(seed).standard_normal(min(npix, NOISE_PERIOD))
    period = base.size
    out = np.empty(npix)

    def piece(a: int) -> None:
        end = min(a + NOISE_PIECE, npix)
        while a < end:
            o = a % period
            n = min(end - a, period - o)
            np.copyto(out[a : a + n], base[o : o + n])
            a += n

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, get_num_threads())) as pool:
        list(pool.map(piece, range(0, npix, NOISE_PIECE)))
    return out


def big_inputs(ctx: Context):
    nside = 64 if ctx.quick else 16384
    m = ctx.cache(("smooth16k.map", nside), lambda: tiled_noise(12 * nside**2))
    return m, math.radians(1.0 / 60) * (16384 / nside)


def big_work(inputs) -> Work:
    m, fwhm = inputs
    return Work(bytes=16.0 * m.size, h2d_bytes=8.0 * m.size, d2h_bytes=8.0 * m.size)


def sc_big(method: str):
    def call(m, fwhm):
        import skyconv

        return skyconv.smooth_map(m, fwhm=fwhm, method=method, device="cuda")

    call.__name__ = f"skyconv.smooth_map[{method},cuda]"
    return call


if os.environ.get("SKYCONV_BENCH_16K", "") not in ("", "0"):
    from skyconv.smooth.memory import smooth_memory

    for method in ("ring", "harmonic", "auto"):
        mem = smooth_memory(16384, "ring" if method == "auto" else method, "cuda")
        register(
            Case(
                name=f"smooth16k.fwhm1_{method}",
                description=f"nside 16384, FWHM 1′, {method} method on one GPU: time, memory",
                inputs=big_inputs,
                work=big_work,
                comparisons=[Comparison("gpu", FewGpuWall([sc_big(method)]), None)],
                params={
                    "nside": 16384,
                    "fwhm_arcmin": 1.0,
                    "estimated_device_bytes": mem["device"],
                    "estimated_device_min_bytes": mem["device_min"],
                    "estimated_host_bytes": mem["host"],
                },
            )
        )
