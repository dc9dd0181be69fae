"""Cost model of the smoothing methods, measured on this machine (``method="auto"`` and the
split method predict their times with it; see :mod:`skyconv.smooth.auto`).

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

from .. import _core, healpix, sht
from .._utils.args import env_dir, env_flag
from .._utils.device import CPU, Device, resolve
from .._utils.trace import stage
from ..backend import get_num_threads
from ..exceptions import DeviceError, GpuMemoryError
from . import methods

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
    support θcut (counted once per (nside, θcut) in a process: the engine's plan takes
    ~10-30 ms at nside 1024, and a split scan asks for the same few θcut again)."""
    key = (int(nside), float(theta_cut))
    found = _FEATURES.get(key)
    if found is None:
        if len(_FEATURES) > 256:
            _FEATURES.clear()
        found = _FEATURES[key] = _count_ring_features(*key)
    return found.copy()


_FEATURES: dict[tuple[int, float], np.ndarray] = {}


def _count_ring_features(nside: int, theta_cut: float) -> np.ndarray:
    plan_info = getattr(_core, "_ring_plan_info", None)
    if plan_info is not None:
        info = plan_info(int(nside), *smooth_profile(theta_cut))
        keys = ("fft_flops", "mac_flops", "cos_flops")
        return np.array([1.0] + [float(info[k]) for k in keys])
    # Without the plan: every pair of rings within θcut costs one FFT of length 4 nside.
    th = healpix.ring_info(nside)["theta"]
    pairs = np.sum(
        np.searchsorted(th, th + theta_cut, "right") - np.searchsorted(th, th - theta_cut)
    )
    n = 4 * nside
    return np.array([1.0, 2.5 * pairs * n * math.log2(n), 4.0 * pairs * n, 0.0])


# --------------------------------------------------------------------------- the cache


def cache_path() -> Path:
    """Where the measured constants are kept (see the module docstring)."""
    base = env_dir("SKYCONV_CACHE_DIR")
    if base:
        return Path(base) / FILE_NAME
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "skyconv" / FILE_NAME


#: Functions called by :func:`clear_cache`: the caches built on the constants (the layers
#: above register theirs; this module imports none of them).
ON_CLEAR: list = []


def clear_cache() -> None:
    """Forget the measured constants (file and this process): the next use measures again."""
    _MODELS.clear()
    for forget in ON_CLEAR:
        forget()
    try:
        cache_path().unlink()
    except FileNotFoundError:
        pass


def device_key(device: Device | str | None) -> str:
    """Names what a measurement is valid for: machine, skyconv version, threads, device."""
    dev = resolve(device)
    if dev.is_cuda:
        info = _core.backend_info()["cuda"]
        what = f"{dev}:{info.get('device_name')}"
    else:
        what = f"cpu:{get_num_threads()}threads"
    return f"{platform.node()}|{platform.machine()}|{os.cpu_count()}cpus|{_core.__version__}|{what}"


def placement_key(device: Device | str | None) -> tuple[str, str]:
    """What a choice depends on besides the problem: the devices measured, and whether the
    request was "auto" (which lets the two parts of a split go to different devices)."""
    dev = resolve(device)
    return device_key(dev), "auto" if dev.auto else str(dev)


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


def _measure_harmonic(device: Device) -> list[float]:
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


def _measure_ring(device: Device) -> list[float] | None:
    """The ring constants, or None where the ring engine does not run on ``device``."""
    rows, times = [], []
    rng = np.random.default_rng(1)
    for nside, steps in RING_CASES:
        theta_cut = steps * math.sqrt(4 * math.pi / (12 * nside * nside))
        theta, values = smooth_profile(theta_cut)
        m = rng.standard_normal(12 * nside * nside)
        try:
            t = _best_of(lambda m=m, n=nside, th=theta, v=values: methods.ring(m, n, th, v, device))
        except (DeviceError, GpuMemoryError):  # no ring engine on this device, or it does not fit
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


def _device_cost(device: Device) -> DeviceCost:
    """The constants of ``device``: this process's, else the file's, else measured now."""
    key = device_key(device)
    if key in _MODELS:
        return _MODELS[key]
    fresh = env_flag("SKYCONV_RECALIBRATE")
    with stage("smooth cost model", f"{device} (read from the cache)"):
        entry = None if fresh else _load().get(key)
    if entry is None:
        with stage("smooth cost model", f"{device} (measured)"):
            entry = {
                "harmonic": _measure_harmonic(device),
                "ring": _measure_ring(device),
                "measured": time.strftime("%Y-%m-%dT%H:%M:%S"),
            }
        if not fresh:
            _store(key, entry)
    cost = DeviceCost(str(device), entry["harmonic"], entry["ring"])
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


def model(device: Device | str | None = None) -> CostModel:
    """The cost model for a ``device`` argument, measuring what is not cached yet ("auto"
    with a GPU: the GPU and the CPU)."""
    dev = resolve(device)
    devices = [_device_cost(dev)]
    if dev.is_cuda and dev.auto:
        devices.append(_device_cost(CPU))
    return CostModel(devices)
