"""One SHT split over several GPUs of one host (``devices=[0, 1]`` of ``alm2map``/``map2alm``).

The alm are split by m into contiguous blocks balanced by work (the cost of an m is about
lmax + 1 - m), the map by ring pairs (a northern ring with its southern mirror) into blocks
balanced by pixels (the device pipeline weighs a polar ring's pixel 3× for its Bluestein FFT,
and each m by the ring pairs where its Legendre sums are not negligible); each GPU computes the
Legendre sums of its m on all rings, an all-to-all moves them to the ring blocks, each GPU
finishes its rings (map2alm: the same steps backwards, Jacobi iterations included).

Distinct GPUs (``devices=[0, 1]``) keep everything on the devices: each uploads only its block
of alm (or pixels), the rings are processed in rounds of chunks, and the all-to-all of each
round moves Δ GPU to GPU while the next round computes (``last_stats()["transport"]``:
``"peer"`` with peer access between every pair of GPUs, ``"driver-staged"`` where the driver has
to stage the copies through host memory, ``"local"`` for one GPU). Memory per GPU: its alm block
plus the chunk buffers, ``planned_bytes`` in the stats (the formula is in src/sht/cuda/peer.rs);
a GPU that cannot hold its alm block plus one ring pair raises ``GpuMemoryError``. A list naming
a GPU twice (``[0, 0]``) runs the blocks one after the other with the all-to-all staged through
host memory by skyconv (``"host-staged"``). NVLink multicast is never used.
"""

from __future__ import annotations

import logging

import numpy as np

from . import _core
from ._utils.arrays import int_arg
from ._utils.device import resolve
from .exceptions import ArgumentError, ArgumentTypeError

log = logging.getLogger("skyconv.sht")

_last: dict = {}


def last_stats() -> dict:
    """What the last multi-GPU transform of this process did.

    Returns
    -------
    dict
        ``transport`` ("peer", "driver-staged", "local" or "host-staged"), ``devices``,
        ``m_blocks`` ([m0, m1) per device), ``ring_blocks`` ([r0, r1) per device, host-staged
        split), ``pair_blocks`` ([p0, p1) ring pairs per device), ``rounds`` (pipeline rounds of
        the last pass), ``planned_bytes`` (alm block + chunk buffers per device), ``legendre_s``,
        ``exchange_s`` (the all-to-all), ``ring_s`` (seconds summed over the passes of the call:
        wall time of each stage for "host-staged"; for the device pipeline the busiest GPU's
        device time per stage, which overlap one another), ``peak_bytes`` (most device memory
        in use seen on each device, whole device, bytes), ``stage_s_per_gpu`` (device pipeline:
        [Legendre, all-to-all copies, rings] device seconds of each GPU; the Legendre sums run
        on their own stream beside the ring stage), ``wall_s_per_gpu`` (device pipeline:
        [set-up, rounds, final synchronisation] host seconds of each GPU's thread; set-up holds
        the upload of its alm block). Empty before the first call.
    """
    return dict(_last)


def devices_arg(devices, device) -> list[int] | None:
    """The GPU numbers of a ``devices`` argument; None when ``devices`` is None.

    Raises
    ------
    skyconv.ArgumentTypeError
        ``devices`` is not a sequence of ints.
    skyconv.ArgumentError
        An empty list, a negative number, or ``device`` naming the CPU together with ``devices``.
    """
    if devices is None:
        return None
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
        raise ArgumentTypeError(
            f"devices must be a sequence of GPU numbers (ints), e.g. [0, 1], got {devices!r}"
        )
    out = [int_arg(d, "devices") for d in devices]
    if not out:
        raise ArgumentError("devices must list at least one GPU number, e.g. [0, 1], got []")
    if any(d < 0 for d in out):
        raise ArgumentError(f"devices must be GPU numbers >= 0, got {out}")
    if device is not None and not resolve(device).is_cuda:
        raise ArgumentError(
            f"device must be None or a GPU ('cuda') when devices is given, got {device!r}"
        )
    return out


def _record(stats: dict, what: str) -> None:
    _last.clear()
    _last.update(stats)
    _last["transform"] = what
    log.info(
        "%s over GPUs %s (all-to-all %s): legendre %.3f s, all-to-all %.3f s, rings %.3f s",
        what,
        stats["devices"],
        stats["transport"],
        stats["legendre_s"],
        stats["exchange_s"],
        stats["ring_s"],
    )


def alm2map(comps, nside: int, lmax: int, mmax: int, pol: bool, devices: list[int]):
    """(ncomp, npix) maps of validated alm components over ``devices``."""
    out, stats = _core._alm2map_multi(comps, nside, lmax, mmax, pol, devices)
    _record(stats, "alm2map")
    return out


def map2alm(arrs, nside, lmax, mmax, iter, pol, ring_weights, devices):
    """(ncomp, nalm) alm of validated maps over ``devices`` (float64 copies of float32 maps)."""
    maps = [np.ascontiguousarray(a, dtype=np.float64).ravel() for a in arrs]
    out, stats = _core._map2alm_multi(maps, nside, lmax, mmax, iter, pol, devices, ring_weights)
    _record(stats, "map2alm")
    return out
