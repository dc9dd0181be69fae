"""`skyconv demo`: run every skyconv function on synthetic data, on each usable device, and
print time and agreement with the reference library where it is installed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from . import backend_info, filters


@dataclass
class Row:
    task: str
    device: str
    seconds: float
    reference: str
    rel_err: float | None  # max |skyconv - ref| / max |ref|; None if the reference is missing
    metric: str = "max rel err"


def _rel(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    scale = float(np.max(np.abs(ref))) or 1.0
    return float(np.max(np.abs(got - ref))) / scale


def _timed(fn: Callable):
    fn()  # warm-up: thread pool start, NVRTC compile on first GPU use
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def demo_filters(devices: list[str]) -> Iterator[Row]:
    rng = np.random.default_rng(0)
    cube = rng.standard_normal((64, 256, 256)).astype(np.float32)
    try:
        import scipy.ndimage as ndi
    except ImportError:
        ndi = None
    cases = {
        "gaussian_filter1d(sigma=2.55, axis=1)": (
            lambda d: filters.gaussian_filter1d(cube, 2.55, axis=1, mode="constant", device=d),
            lambda: ndi.gaussian_filter1d(cube, 2.55, axis=1, mode="constant"),
        ),
        "uniform_filter1d(size=7, axis=0)": (
            lambda d: filters.uniform_filter1d(cube, 7, axis=0, mode="constant", device=d),
            lambda: ndi.uniform_filter1d(cube, 7, axis=0, mode="constant"),
        ),
    }
    for name, (ours, ref) in cases.items():
        expected = ref() if ndi is not None else None
        for d in devices:
            got, dt = _timed(lambda ours=ours, d=d: ours(d))
            err = _rel(got, expected) if expected is not None else None
            yield Row(f"filters.{name} on 64x256x256 f32", d, dt, "scipy.ndimage", err)


def demo_healpix(devices: list[str]) -> Iterator[Row]:
    from . import healpix

    rng = np.random.default_rng(1)
    theta = np.arccos(rng.uniform(-1, 1, 1_000_000))
    phi = rng.uniform(0, 2 * np.pi, 1_000_000)
    try:
        import healpy
    except ImportError:
        healpy = None
    for nest in (False, True):
        got, dt = _timed(lambda nest=nest: healpix.ang2pix(2048, theta, phi, nest=nest))
        err = None
        if healpy is not None:
            err = float(np.count_nonzero(got != healpy.ang2pix(2048, theta, phi, nest=nest)))
        scheme = "NEST" if nest else "RING"
        yield Row(f"healpix.ang2pix(2048, 1e6 points, {scheme})", "cpu", dt, "healpy", err,
                  "pixels differing")


#: Every family's demo, in the order printed. Families append theirs here.
DEMOS: list[Callable[[list[str]], Iterator[Row]]] = [demo_filters, demo_healpix]


def run(devices: list[str] | None = None) -> list[Row]:
    """Run all demos, printing one line per (task, device); returns the rows."""
    info = backend_info()
    if devices is None:
        devices = ["cpu"] + (["cuda"] if info["cuda"]["available"] else [])
    cuda = info["cuda"]
    gpu = cuda["device_name"] if cuda["available"] else f"none ({cuda['reason']})"
    print(f"skyconv {info['version']}: {info['cpu_threads']} CPU threads; GPU: {gpu}")
    print(f"{'task':66s} {'device':6s} {'time':>9s}  agreement")
    rows = []
    for demo in DEMOS:
        for row in demo(devices):
            agree = (f"{row.metric} {row.rel_err:.3g} vs {row.reference}"
                     if row.rel_err is not None else f"({row.reference} not installed)")
            print(f"{row.task:66s} {row.device:6s} {row.seconds * 1e3:7.1f}ms  {agree}",
                  flush=True)
            rows.append(row)
    return rows
