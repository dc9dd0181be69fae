"""Cost model of the smoothing methods, measured on this machine, and ``method="auto"``.

Times are linear in work counts, with constants measured per device (non-negative least
squares in relative terms):

- harmonic (map2alm + alm2map at band limit L; ``iter`` Jacobi iterations add ``iter`` of each):
  t = (1 + iter) · (c₀ + c₁ · nrings·(L+1)²/2 + c₂ · npix·log₂(4 nside) + c₃ · nrings·(L+1)·
  log₂(4 nside)): the Legendre recurrences, the ring FFTs and the per-(ring, m) work;
- ring (ring-FFT convolution with support θcut): t = r₀ + r₁ · FFT flops + r₂ · spectral
  multiply-add flops + r₃ · direct cosine-sum flops (the GPU engine's kernel spectra), counted by
  the engine's own plan (``_core._ring_plan_info``) for a smooth profile of that support (the
  count depends on θcut and nside, barely on the profile). Measured on the CPU and, where there
  is one, the GPU: either can be the ring method's device.

Errors: each candidate's predicted fractional RMS against the harmonic result (see
:func:`choose_method`); where the pixel grid keeps every method above ``tol`` (beams of a few
pixels), the ring and harmonic methods' errors against the exact smoothing are measured on a
scaled-down white-noise copy of the problem (:func:`grid_errors`, ~0.1-0.5 s, once per
choice) and the ring method is taken when it is about as close (within 1.25x).

Fitted on transforms at nside 64-512 and used up to nside 2048, the model was within a factor
of 2 of measured times for the transforms (mostly below them at high nside) and within 25% for
the ring engine on the shared 2-core machine, whose load moves single timings by as much: close
calls between methods can go either way, clear ones (wide beams) do not.

The constants come from timing a handful of small transforms (a few seconds, on the first
``method="auto"``/``"split"`` or ``split_kernel`` call, never at import) and are kept in a JSON
file, one entry per machine, skyconv version, thread count and device:
``$SKYCONV_CACHE_DIR/smooth_cost.json``, else ``$XDG_CACHE_HOME/skyconv/smooth_cost.json``,
else ``~/.cache/skyconv/smooth_cost.json``. Delete the file or call :func:`clear_cache` to
measure again; ``SKYCONV_RECALIBRATE=1`` measures afresh in every process and leaves the file
alone.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np

from . import _core
from ._backend import get_num_threads, resolve_device
from ._errors import DeviceError

FILE_NAME = "smooth_cost.json"
SCHEMA = 3

# Calibration sizes: (nside, lmax) for the harmonic transforms, (nside, θcut in pixels) for the
# ring engine: past the fixed overheads, a few seconds in all on 2 cores.
HARMONIC_CASES = ((64, 191), (128, 383), (256, 128), (256, 767), (512, 512))
RING_CASES = ((256, 4.0), (256, 8.0), (256, 16.0), (512, 2.0), (512, 12.0))


# --------------------------------------------------------------------------- work counts


def harmonic_features(nside: int, lmax: int) -> np.ndarray:
    """(1, Legendre work, ring-FFT work, per-(ring, m) work) of one map2alm + alm2map."""
    nrings = 4 * nside - 1
    log = math.log2(4 * nside)
    return np.array(
        [1.0, nrings * (lmax + 1.0) ** 2 / 2.0, 12.0 * nside**2 * log, nrings * (lmax + 1.0) * log]
    )


def smooth_profile(theta_cut: float) -> tuple[np.ndarray, np.ndarray]:
    """A smooth stand-in profile of support θcut, for counting the ring engine's work."""
    theta = np.linspace(0.0, theta_cut, 257)
    return theta, (1.0 - (theta / theta_cut) ** 2) ** 4


def ring_features(nside: int, theta_cut: float) -> np.ndarray:
    """(1, FFT flops, multiply-add flops, cosine-sum flops) of one ring convolution with
    support θcut."""
    plan_info = getattr(_core, "_ring_plan_info", None)
    if plan_info is not None:
        info = plan_info(int(nside), *smooth_profile(theta_cut))
        keys = ("fft_flops", "mac_flops", "cos_flops")
        return np.array([1.0] + [float(info[k]) for k in keys])
    # Without the plan: every pair of rings within θcut costs one FFT of length 4 nside.
    from . import healpix

    th = healpix.ring_info(nside)["theta"]
    pairs = np.sum(
        np.searchsorted(th, th + theta_cut, "right") - np.searchsorted(th, th - theta_cut)
    )
    n = 4 * nside
    return np.array([1.0, 2.5 * pairs * n * math.log2(n), 4.0 * pairs * n, 0.0])


# --------------------------------------------------------------------------- the cache


def cache_path() -> Path:
    """Where the measured constants are kept (see the module docstring)."""
    base = os.environ.get("SKYCONV_CACHE_DIR")
    if base:
        return Path(base) / FILE_NAME
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "skyconv" / FILE_NAME


def clear_cache() -> None:
    """Forget the measured constants (file and this process): the next use measures again."""
    _MODELS.clear()
    _CHOICES.clear()
    try:
        cache_path().unlink()
    except FileNotFoundError:
        pass


def device_key(device: str | None) -> str:
    """Names what a measurement is valid for: machine, skyconv version, threads, device."""
    dev = resolve_device(device)
    if dev == "cuda":
        info = _core.backend_info()["cuda"]
        what = f"cuda:{info.get('device_name')}"
    else:
        what = f"cpu:{get_num_threads()}threads"
    return f"{platform.node()}|{platform.machine()}|{os.cpu_count()}cpus|{_core.__version__}|{what}"


def placement_key(device: str | None) -> tuple[str, str]:
    """What a choice depends on besides the problem: the devices measured, and whether the
    request was "auto" (which lets the two parts of a split go to different devices)."""
    asked = device if device is not None else os.environ.get("SKYCONV_DEVICE", "auto")
    return device_key(device), str(asked).strip().lower()


def _load() -> dict:
    try:
        doc = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return doc.get("entries", {}) if doc.get("schema") == SCHEMA else {}


def _store(key: str, entry: dict) -> None:
    path = cache_path()
    try:
        entries = _load()
        entries[key] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"schema": SCHEMA, "entries": entries}, indent=1))
        tmp.replace(path)  # atomic: concurrent processes never read half a file
    except OSError:
        pass  # a read-only home only costs a measurement per process


# --------------------------------------------------------------------------- measuring


def _best_of(fn, repeats: int = 2) -> float:
    """Shortest of ``repeats`` runs after a warm-up (plans, caches, NVRTC): on a shared
    machine the shortest is the least disturbed."""
    fn()
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _fit(rows: list[np.ndarray], times: list[float]) -> list[float]:
    """Non-negative constants c with rows·c ≈ times, in relative terms (every case counts)."""
    a = np.array(rows) / np.array(times)[:, None]
    b = np.ones(len(times))
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    active = list(range(a.shape[1]))
    while True:  # drop negative constants one at a time (tiny NNLS)
        c = np.zeros(a.shape[1])
        sol = np.linalg.lstsq(a[:, active] / scale[active], b, rcond=None)[0]
        c[active] = sol / scale[active]
        neg = [i for i in active if c[i] < 0]
        if not neg:
            return [float(x) for x in c]
        active.remove(min(neg, key=lambda i: c[i]))


def _measure_harmonic(device: str) -> list[float]:
    from . import sht

    rows, times = [], []
    rng = np.random.default_rng(0)
    for nside, lmax in HARMONIC_CASES:
        m = rng.standard_normal(12 * nside * nside)

        def run(m=m, lmax=lmax, nside=nside):
            alm = sht.map2alm(m, lmax=lmax, iter=0, device=device)
            sht.alm2map(alm, nside, lmax=lmax, device=device)

        times.append(_best_of(run))
        rows.append(harmonic_features(nside, lmax))
    return _fit(rows, times)


def _measure_ring(device: str) -> list[float] | None:
    """The ring constants, or None where the ring engine does not run on ``device``."""
    from . import smooth

    rows, times = [], []
    rng = np.random.default_rng(1)
    for nside, steps in RING_CASES:
        theta_cut = steps * math.sqrt(4 * math.pi / (12 * nside * nside))
        theta, values = smooth_profile(theta_cut)
        m = rng.standard_normal(12 * nside * nside)
        try:
            t = _best_of(lambda m=m, n=nside, th=theta, v=values: smooth._ring(m, n, th, v, device))
        except DeviceError:  # no ring engine on this device
            return None
        times.append(t)
        rows.append(ring_features(nside, theta_cut))
    return _fit(rows, times)


class DeviceCost:
    """Measured constants of one device (seconds per unit of work)."""

    def __init__(self, device: str, harmonic: list[float], ring: list[float] | None):
        self.device = device
        self.harmonic = np.array(harmonic)
        self.ring = None if ring is None else np.array(ring)

    def harmonic_time(self, nside: int, lmax: int, iter: int = 0) -> float:
        if lmax < 0:
            return 0.0
        return float((1 + iter) * harmonic_features(nside, lmax) @ self.harmonic)

    def ring_time(self, nside: int, theta_cut: float) -> float:
        if theta_cut <= 0:
            return 0.0
        if self.ring is None:
            return math.inf
        return float(ring_features(nside, theta_cut) @ self.ring)


def _device_cost(device: str) -> DeviceCost:
    """The constants of ``device``: this process's, else the file's, else measured now."""
    key = device_key(device)
    if key in _MODELS:
        return _MODELS[key]
    fresh = os.environ.get("SKYCONV_RECALIBRATE", "") not in ("", "0")
    entry = None if fresh else _load().get(key)
    if entry is None:
        entry = {
            "harmonic": _measure_harmonic(device),
            "ring": _measure_ring(device),
            "measured": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        if not fresh:
            _store(key, entry)
    cost = DeviceCost(device, entry["harmonic"], entry["ring"])
    _MODELS[key] = cost
    return cost


_MODELS: dict[str, DeviceCost] = {}


class CostModel:
    """Predicted times on the devices a ``device`` argument allows ("auto" with a GPU: both the
    GPU and the CPU, so the two parts of a split can run side by side)."""

    def __init__(self, devices: list[DeviceCost]):
        self.devices = devices

    def harmonic_time(self, nside: int, lmax: int, iter: int = 0) -> tuple[float, str]:
        """(seconds, device) of the harmonic method on the fastest device."""
        return min((d.harmonic_time(nside, lmax, iter), d.device) for d in self.devices)

    def ring_time(self, nside: int, theta_cut: float) -> tuple[float, str]:
        """(seconds, device) of a ring convolution on the fastest device."""
        return min((d.ring_time(nside, theta_cut), d.device) for d in self.devices)

    def split_time(self, nside: int, lcut: int, theta_cut: float, iter: int = 0):
        """(total, harmonic seconds, ring seconds, (harmonic device, ring device)) for the
        fastest placement: different devices run at once (the longer part counts), one device
        runs both (they add)."""
        best = None
        for dh in self.devices:
            for dr in self.devices:
                th = dh.harmonic_time(nside, lcut, iter)
                tr = dr.ring_time(nside, theta_cut)
                total = max(th, tr) if dh is not dr else th + tr
                if best is None or total < best[0]:
                    best = (total, th, tr, (dh.device, dr.device))
        return best


def model(device: str | None = None) -> CostModel:
    """The cost model for a ``device`` argument, measuring what is not cached yet."""
    dev = resolve_device(device)
    explicit = device if device is not None else os.environ.get("SKYCONV_DEVICE", "auto")
    devices = [_device_cost(dev)]
    if dev == "cuda" and str(explicit).strip().lower() == "auto":
        devices.append(_device_cost("cpu"))
    return CostModel(devices)


# --------------------------------------------------------------------------- method="auto"


def choose_method(nside, lmax, window, tol, device=None, iter=0):
    """The fastest smoothing method whose predicted error meets ``tol``.

    Candidates: "harmonic" at ``lmax`` (the reference: no error); "split" from
    :func:`skyconv.split.split_kernel` (a split that is only a harmonic part runs it at the
    window's effective band limit, where the rest of the window carries < 0.1 tol); "ring",
    the ring method with skyconv.smooth's truncated profile, when its predicted error (window
    error plus pixel-grid error, see ``skyconv._split_disc``) meets ``tol``.

    The harmonic result is itself off the exact smoothing by the pixel grid's error: for
    beams of a few pixels on a white map, ~4e-3 at 3 px, far above any usual tol, and the
    ring method's pixel-grid error is of the same size. So when the ring method misses ``tol``
    against the harmonic result but would be the fastest, both methods' errors against the
    exact smoothing are measured (:func:`grid_errors`) and the ring method is taken if its
    error is at most GRID_SLACK (1.25) times the harmonic method's (white noise: from
    ~2 px up, where the two are within 1-15%; below, the ring method is ~1.5x farther).

    Returns ``(method, info)``: ``info`` holds ``times`` and ``errors`` per candidate
    (seconds; fractional RMS against the harmonic result), ``vs_exact`` (the
    :func:`grid_errors` measurement, or None when not needed), the ``split`` (a KernelSplit),
    ``lmax_eff`` and ``devices``. Remembered per (window, nside, lmax, tol, iter, device) for
    this process.
    """
    w = np.ascontiguousarray(window, dtype=np.float64)
    key = (w.tobytes(), nside, lmax, float(tol), iter, placement_key(device))
    if key not in _CHOICES:
        if len(_CHOICES) > 32:
            _CHOICES.clear()
        _CHOICES[key] = _choose(nside, lmax, w, tol, device, iter)
    return _CHOICES[key]


_CHOICES: dict = {}


def _choose(nside, lmax, window, tol, device, iter):
    from .split import cached_split

    cost = model(device)
    ks = cached_split(window, nside, lmax, tol, iter, device)
    times = {"harmonic": cost.harmonic_time(nside, lmax, iter)[0], "split": ks.predicted_time}
    errors = {"harmonic": 0.0, "split": ks.predicted_error}
    ring = _ring_candidate(nside, lmax, window, tol, cost, min(times.values()))
    vs_exact = None
    if ring is not None:
        times["ring"], errors["ring"] = ring
    ok = [m for m in times if errors[m] <= tol]
    if ring is not None and errors["ring"] > tol and times["ring"] < min(times[m] for m in ok):
        # The ring method misses tol against the harmonic result; it may still be as close
        # to the exact smoothing as the harmonic method is (narrow beams: both at the grid's
        # floor). Measured, not modelled, on a scaled-down copy of the problem.
        vs_exact = grid_errors(nside, lmax, window, tol, iter)
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
#: The scaled-down copy of a problem on which ``grid_errors`` measures.
GRID_NSIDE = 128


def grid_errors(nside, lmax, window, tol, iter):
    """Fractional RMS errors of the ring and harmonic (``iter``) methods against the exact
    smoothing, measured on white noise band-limited at ``lmax``, with the problem scaled to
    nside ≤ GRID_NSIDE (the beam kept in pixels: b(ℓ) read at ℓ·nside/nside_c). Both errors
    come mostly from the pixel grid (the samples do not fix a white map's highest multipoles),
    so they scale with the beam in pixels, not with nside. {"ring": …, "harmonic": …, "nside":
    the nside measured at}. ~0.1 s at nside 128 on 2 cores."""
    from . import sht, smooth

    nc = min(int(nside), GRID_NSIDE)
    scale = nside / nc
    lc = max(1, min(round(lmax / scale), 4 * nc))
    w = np.asarray(window, dtype=np.float64)[: lmax + 1]
    ell = np.arange(lc + 1)
    fwhm = gaussian_fwhm(w)
    if fwhm is not None:  # the same Gaussian in pixels, not ℓ(ℓ+1) read off at scaled ℓ
        wc = smooth.gauss_window(fwhm * scale, lc)
    else:
        wc = np.interp(ell * scale, np.arange(w.size), w, right=0.0)
    rng = np.random.default_rng(7)
    nalm = (lc + 1) * (lc + 2) // 2
    alm = (rng.standard_normal(nalm) + 1j * rng.standard_normal(nalm)) / math.sqrt(2.0)
    alm[: lc + 1] = alm[: lc + 1].real * math.sqrt(2.0)  # m = 0: real, unit variance
    m = sht.alm2map(alm, nc, lmax=lc, device="cpu")
    exact = sht.alm2map(sht.almxfl(alm, wc), nc, lmax=lc, device="cpu")
    if fwhm is not None:
        theta, values = smooth.kernel_profile(fwhm=fwhm * scale, tol=tol)
    else:
        theta, values = smooth._profile(wc, tol)
    got = {
        "ring": smooth._ring(m, nc, theta, values, "cpu"),
        "harmonic": smooth._harmonic(m, wc, lc, iter, "cpu"),
    }
    rms = float(np.sqrt(np.mean(exact**2)))
    out = {k: float(np.sqrt(np.mean((v - exact) ** 2))) / rms for k, v in got.items()}
    out["nside"] = nc
    return out


def gaussian_fwhm(window) -> float | None:
    """The FWHM (radians) when ``window`` is a Gaussian beam exp(−½ℓ(ℓ+1)σ²) (to 1e-9), else
    None: smooth_map's ring method then uses the Gaussian itself, not the band-limited sum."""
    w = np.asarray(window, dtype=np.float64)
    if w.size < 2 or w[0] != 1.0 or not np.all(w[1:] < 1) or w[1] <= 0:
        return None
    ell = np.arange(w.size)
    ref = int(np.argmin(np.abs(w - 0.5)))  # σ² from the best-conditioned multipole
    sigma2 = -2 * math.log(w[ref]) / (ref * (ref + 1))
    if np.max(np.abs(np.exp(-0.5 * ell * (ell + 1) * sigma2) - w)) > 1e-9:
        return None
    return math.sqrt(sigma2 * 8 * math.log(2))


def _ring_candidate(nside, lmax, window, tol, cost, beat):
    """(time, predicted error) of skyconv.smooth's ring method; None where it cannot run or
    cannot beat ``beat`` seconds (then its error is not worth measuring)."""
    from . import _split_disc, smooth
    from ._split_fit import DISC_SAFETY, TabulatedProfile

    k = np.asarray(window, dtype=np.float64)[: lmax + 1]
    fwhm = gaussian_fwhm(k)
    try:
        if fwhm is not None:
            theta, values = smooth.kernel_profile(fwhm=fwhm, tol=tol)
        else:
            theta, values = smooth._profile(k, tol)
    except ValueError:
        return None
    t = cost.ring_time(nside, float(theta[-1]))[0]
    if not t < beat:
        return None
    prof = TabulatedProfile(theta, values)
    weights = (2 * np.arange(k.size) + 1) / (4 * np.pi)
    signal = float(np.sum(weights * k**2))
    if signal <= 0:
        return None
    resid = smooth.profile_window(theta, values, k.size - 1) - k
    disc = float(_split_disc.disc_matrix(nside, prof, weights)[0, 0])
    err = math.sqrt((float(np.sum(weights * resid**2)) + DISC_SAFETY**2 * disc) / signal)
    return t, err
