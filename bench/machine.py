"""The machine a run is on: name, host facts, library versions and the rates for the floors.

Rates (bytes/s, float64 flop/s) are measured where a tool to measure them is present, else
taken from per-GPU constants; each carries its ``source``. Floors use them as
``max(bytes / bandwidth, flops / flop_rate)``.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as md
import importlib.util
import os
import platform
import re
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .harness import Work

REPO = Path(__file__).resolve().parents[1]

# Per-GPU constants, matched by substring of the device name (first match wins). hbm_bw is a
# device-to-device copy (read + write); pcie_* are pinned host<->device copies.
GPU_CONSTANTS: list[tuple[str, dict[str, float], str]] = [
    (
        "H100",
        {"hbm_bw": 3.0e12, "pcie_h2d_bw": 54e9, "pcie_d2h_bw": 54e9, "gpu_fp64": 34e12},
        "measured on our H100 machine (REFERENCE.md); fp64 is the SXM non-tensor peak",
    ),
    (
        "H200",
        {"hbm_bw": 4.0e12, "pcie_h2d_bw": 54e9, "pcie_d2h_bw": 54e9, "gpu_fp64": 34e12},
        "nominal (about 85% of the 4.8 TB/s peak); fp64 is the non-tensor peak",
    ),
]

# Distributions whose versions are recorded when installed (importlib.metadata, no import).
VERSIONED = (
    "skyconv",
    "numpy",
    "scipy",
    "healpy",
    "astropy",
    "ducc0",
    "torch",
    "jax",
    "s2fft",
    "cygrid",
    "dask",
)


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


def cpu_model() -> str:
    """The CPU's model name, from /proc/cpuinfo where there is one."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_count() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def backend_info() -> dict[str, Any]:
    """skyconv.backend_info(), or the import error."""
    try:
        import skyconv

        return skyconv.backend_info()
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"}


def gpu_name(info: dict[str, Any]) -> str | None:
    """The GPU's name, from skyconv's backend_info, else cupy, else None."""
    name = (info.get("cuda") or {}).get("device_name")
    if name:
        return name
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        n = props["name"]
        return n.decode() if isinstance(n, bytes) else str(n)
    except Exception:  # noqa: BLE001
        return None


def default_machine_name(gpu: str | None) -> str:
    """e.g. ``vm-2c`` or ``node7-16c-h100``: hostname, CPU count and the GPU model."""
    name = f"{_slug(socket.gethostname()) or 'host'}-{cpu_count()}c"
    if gpu:
        m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Za-z]?)\b", gpu)
        name += "-" + _slug(m.group(1) if m else gpu)
    return name


def versions() -> dict[str, str | None]:
    """Python and the versions of the relevant installed distributions (cupy in any flavour)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in VERSIONED:
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    cupys = sorted(
        d.metadata["Name"]
        for d in md.distributions()
        if (d.metadata["Name"] or "").lower().startswith("cupy")
    )
    out["cupy"] = None
    for name in cupys:
        out["cupy"] = f"{md.version(name)} ({name})"
    return out


def git_commit() -> str | None:
    """HEAD (with ``-dirty``) of the checkout, else the one prepare.sh wrote in .gpu/BUILD_INFO."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            check=False,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if head.returncode == 0:
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                check=False,
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=10,
            )
            return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    info = REPO / ".gpu" / "BUILD_INFO"
    if info.is_file():
        for line in info.read_text().splitlines():
            if line.startswith("commit="):
                return line.split("=", 1)[1].strip() + " (from .gpu/BUILD_INFO)"
    return None


def loadavg() -> float | None:
    """The 1-minute load average (None where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def host_facts() -> dict[str, Any]:
    """Hostname, OS, CPU model and count, memory."""
    mem = None
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": cpu_count(),
        "os_cpu_count": os.cpu_count(),
        "memory_bytes": mem,
        "loadavg_1min": loadavg(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


# --------------------------------------------------------------------------- rates


def _rate(value: float | None, source: str) -> dict[str, Any]:
    return {"value": value, "source": source}


def _best_of(n: int, fn) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_host_bw(nbytes: int) -> float:
    """Copy bandwidth of host memory (read + write bytes/s), one NumPy copy per CPU."""
    n = nbytes // 8
    src = np.ones(n)
    dst = np.empty_like(src)
    threads = cpu_count()
    bounds = np.linspace(0, n, threads + 1).astype(int)
    with ThreadPoolExecutor(threads) as pool:

        def copy():
            list(
                pool.map(
                    lambda i: np.copyto(
                        dst[bounds[i] : bounds[i + 1]], src[bounds[i] : bounds[i + 1]]
                    ),
                    range(threads),
                )
            )

        copy()
        t = _best_of(5, copy)
    return 2 * n * 8 / t


def measure_cpu_fp64(n: int) -> float:
    """float64 flop/s of a NumPy (BLAS) matrix product: an upper bound for stencil codes."""
    a = np.random.default_rng(0).standard_normal((n, n))
    a @ a
    return 2 * n**3 / _best_of(3, lambda: a @ a)


def measure_gpu(nbytes: int) -> dict[str, float]:
    """With cupy: device copy bandwidth, pinned and pageable PCIe rates (bytes/s)."""
    import cupy
    import cupyx

    out: dict[str, float] = {}
    src = cupy.ones(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()

    def ev_time(fn) -> float:
        fn()
        best = float("inf")
        for _ in range(5):
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            best = min(best, cupy.cuda.get_elapsed_time(start, stop) / 1e3)
        return best

    out["hbm_bw"] = 2 * src.nbytes / ev_time(lambda: cupy.copyto(dst, src))
    pinned = cupyx.empty_pinned(src.shape, dtype=np.float32)
    pinned[...] = 1.0
    out["pcie_h2d_bw"] = src.nbytes / ev_time(lambda: src.set(pinned))
    out["pcie_d2h_bw"] = src.nbytes / ev_time(lambda: src.get(out=pinned))
    host = np.ones(src.shape, dtype=np.float32)

    def up_pageable():
        cupy.asarray(host)
        cupy.cuda.runtime.deviceSynchronize()

    out["pcie_pageable_h2d_bw"] = src.nbytes / _best_of(3, up_pageable)
    out["pcie_pageable_d2h_bw"] = src.nbytes / _best_of(3, lambda: cupy.asnumpy(src))
    return out


def measure_rates(quick: bool, gpu: str | None, want_gpu: bool) -> dict[str, dict[str, Any]]:
    """Rates for the floors: measured where possible, per-GPU constants otherwise."""
    rates: dict[str, dict[str, Any]] = {}
    size = (64 if quick else 512) << 20
    rates["host_bw"] = _rate(
        measure_host_bw(size),
        f"measured: NumPy copy of {size >> 20} MiB on {cpu_count()} threads, best of 5",
    )
    n = 512 if quick else 2048
    rates["cpu_fp64"] = _rate(measure_cpu_fp64(n), f"measured: NumPy matmul {n}x{n}, best of 3")
    if not want_gpu:
        return rates
    for pattern, consts, why in GPU_CONSTANTS:
        if gpu and pattern in gpu:
            for k, v in consts.items():
                rates[k] = _rate(v, f"constant for {pattern}: {why}")
            break
    if importlib.util.find_spec("cupy") is None:
        return rates
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            gsize = (64 if quick else 1024) << 20
            try:
                measured = measure_gpu(gsize)
            finally:
                cupy.get_default_memory_pool().free_all_blocks()
                cupy.get_default_pinned_memory_pool().free_all_blocks()
            for k, v in measured.items():
                rates[k] = _rate(v, f"measured with cupy, {gsize >> 20} MiB")
    except Exception as e:  # noqa: BLE001 - cupy cannot measure: the constants stand
        rates["gpu_measure_error"] = _rate(None, f"{type(e).__name__}: {e}")
    return rates


def _div(num: float, rate: dict[str, Any] | None) -> float | None:
    if not num:
        return 0.0
    if not rate or not rate.get("value"):
        return None
    return num / rate["value"] * 1e3


def h2d_share(work: Work, e2e_ms: float | None, rates: dict[str, dict[str, Any]]) -> dict:
    """The input rate of a GPU call (its host-to-device bytes over its end-to-end time) and
    that rate as a fraction of this run's measured pinned and pageable (cudaMemcpy from a NumPy
    array) host-to-device rates."""
    if not e2e_ms or not work.h2d_bytes:
        return {}
    rate = work.h2d_bytes / (e2e_ms * 1e-3)
    out: dict[str, Any] = {"input_gb_per_s": rate / 1e9}
    for key, name in (("of_pinned", "pcie_h2d_bw"), ("of_pageable", "pcie_pageable_h2d_bw")):
        r = rates.get(name)
        out[key] = rate / r["value"] if r and r.get("value") else None
    return out


def floors(work: Work, engine: str, rates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Floors in ms for ``work`` on ``engine``: memory, compute, their max, and PCIe on the GPU.

    ``pcie_ms`` is the time to move the inputs up and the outputs down at the pinned rate (an
    end-to-end call from NumPy cannot beat ``max(floor_ms, pcie_ms)``, and not even that unless
    copies overlap with each other and with the kernels).
    """
    if engine == "cpu":
        mem, comp = _div(work.bytes, rates.get("host_bw")), _div(work.flops, rates.get("cpu_fp64"))
    else:
        mem, comp = _div(work.bytes, rates.get("hbm_bw")), _div(work.flops, rates.get("gpu_fp64"))
    known = [v for v in (mem, comp) if v is not None]
    out: dict[str, Any] = {
        "memory_ms": mem,
        "compute_ms": comp,
        "floor_ms": max(known) if known else None,
    }
    if engine == "gpu":
        up, down = (
            _div(work.h2d_bytes, rates.get("pcie_h2d_bw")),
            _div(work.d2h_bytes, rates.get("pcie_d2h_bw")),
        )
        out["pcie_ms"] = None if up is None or down is None else up + down
    return out
