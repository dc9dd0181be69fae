"""The device of a Dask task: the one rule every Dask stage of skyconv follows.

A call's ``device`` argument is checked on the client for its spelling only
(:func:`check`: the client may have no GPU while its workers do) and travels to the tasks
unresolved. Each task resolves it on its worker, at run time (:func:`on_worker`), by the one
device rule of :mod:`skyconv._utils.device`: ``None`` is the worker's ``SKYCONV_DEVICE``, else
``"auto"``; ``"auto"`` and ``"cuda"`` are the GPU the worker sees — under dask-cuda's
``LocalCUDACluster``, or any worker started with ``CUDA_VISIBLE_DEVICES=i``, that is GPU i of
the machine — and ``"cuda:N"`` is GPU N of those the worker sees.

Every resolution is counted in a per-process log, keyed by (stage, device, the worker's
``CUDA_VISIBLE_DEVICES``); the heavy stages (S+C's, à trous's) resolve through :func:`stage`,
which also adds the seconds their core call took. :func:`devices_used` gathers the logs of the
client process and of every worker of the default Distributed client, so a bench or a user can
print where each stage ran (:func:`seconds_used`: how long); :func:`reset` clears them.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from contextlib import contextmanager

from .._utils.device import deferred, resolve
from . import cluster

_LOCK = threading.Lock()
_LOG: Counter = Counter()
_SECONDS: Counter = Counter()
_BYTES: Counter = Counter()


def check(device) -> str | None:
    """The client side of the rule: ``device``'s spelling checked, not resolved.

    Parameters
    ----------
    device : str, skyconv._utils.device.Device or None
        ``"auto"``, ``"cpu"``, ``"cuda"``, ``"gpu"``, ``"cuda:N"`` (any case) or None.

    Returns
    -------
    str or None
        The lower-case name for the tasks (None stays None: each worker's default).

    Raises
    ------
    skyconv.ArgumentTypeError
        ``device`` is not a str, a Device or None.
    skyconv.ArgumentError
        An unknown name (the message lists the accepted ones).
    """
    return deferred(device)


def on_worker(stage: str, device) -> str:
    """The worker side of the rule: ``device`` resolved in the running task, and counted.

    Parameters
    ----------
    stage : str
        The Dask stage's name for the log (e.g. ``"scfind.spatial"``).
    device : str or None
        What :func:`check` returned on the client.

    Returns
    -------
    str
        The core's device string for this task: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Raises
    ------
    skyconv.DeviceError
        ``"cuda"``/``"cuda:N"`` and the worker has no such GPU.
    """
    return _count(stage, resolve(device).core, 0.0)


def _count(stage: str, core: str, seconds: float) -> str:
    key = (stage, core, os.environ.get("CUDA_VISIBLE_DEVICES"))
    with _LOCK:
        _LOG[key] += 1
        _SECONDS[key] += seconds
    return core


@contextmanager
def stage(name: str, device):
    """:func:`on_worker` around a task's core call, adding the call's seconds to the log::

        with stage("scfind.spatial", device) as dev:
            return _core._scfind_spatial(..., dev)

    Yields
    ------
    str
        The core's device string for this task.
    """
    core = resolve(device).core
    # Tasks of a worker with several threads may call the GPU at once: the core admits each
    # call to its GPU in the calling thread before it enters skyconv's pool (issue 19), so
    # nothing here serialises them.
    t = time.perf_counter()
    try:
        yield core
    finally:
        _count(name, core, time.perf_counter() - t)


def copied(name: str, core: str, *parts) -> None:
    """Add to the log the bytes a GPU call of stage ``name`` moved over PCIe, counted from the
    arrays it took and returned (``parts``: arrays, tuples of them, None): a Dask block call
    copies each of its arrays once, up or down (its small index and reduction buffers are
    about the size of the sample arrays it returns). Nothing for the CPU engine."""
    if core == "cpu":
        return

    def size(p):
        if isinstance(p, (tuple, list)):
            return sum(size(q) for q in p)
        return int(getattr(p, "nbytes", 0))

    key = (name, core, os.environ.get("CUDA_VISIBLE_DEVICES"))
    with _LOCK:
        _BYTES[key] += size(parts)


def _local_bytes() -> tuple:
    with _LOCK:
        return os.getpid(), dict(_BYTES)


def bytes_used(client=None) -> dict:
    """Bytes the GPU calls of :func:`copied`'s stages moved over PCIe since the last
    :func:`reset`, by GPU: {"<device> (CUDA_VISIBLE_DEVICES=<v>)": bytes}.

    Parameters
    ----------
    client : distributed.Client, optional
        As for :func:`devices_used`.

    Returns
    -------
    dict
        Empty when no GPU call was counted.
    """
    out: dict = {}
    for log in _logs(_local_bytes, client).values():
        for (_, dev, visible), n in log.items():
            name = _named(dev, visible)
            out[name] = out.get(name, 0) + n
    return dict(sorted(out.items()))


def local_log() -> dict:
    """This process's counts: {(stage, device, CUDA_VISIBLE_DEVICES): tasks}."""
    with _LOCK:
        return dict(_LOG)


def _local_seconds() -> tuple:
    with _LOCK:
        return os.getpid(), dict(_SECONDS)


def _pid_log() -> tuple:
    return os.getpid(), local_log()


def reset(client=None) -> None:
    """Clear the logs of this process and of the workers of ``client`` (default: the
    default Distributed client, when there is one)."""
    _clear()
    client = client or _default_client()
    if client is not None:
        client.run(_clear)


def _clear() -> None:
    with _LOCK:
        _LOG.clear()
        _SECONDS.clear()
        _BYTES.clear()
    from .. import _core

    _core._gpu_admission_stats(reset=True)


def _pid_gpu_time() -> tuple:
    from .. import _core

    return os.getpid(), (os.environ.get("CUDA_VISIBLE_DEVICES"), _core._gpu_admission_stats())


def gpu_time(client=None) -> dict:
    """How the GPU calls of this process and of ``client``'s workers shared their GPUs since
    the last :func:`reset` (the core admits one call at a time to a GPU, in the calling
    thread: :func:`seconds_used` counts that wait as part of a stage's core call).

    Parameters
    ----------
    client : distributed.Client, optional
        As for :func:`devices_used`.

    Returns
    -------
    dict
        {"cuda:<ordinal> (CUDA_VISIBLE_DEVICES=<v>)": {"calls": n, "waited_s": seconds the
        calling threads waited for the GPU, summed, "admitted_s": seconds the GPU was held by
        a call}}; empty when no GPU call ran.
    """
    out: dict = {}
    for visible, stats in _logs(_pid_gpu_time, client).values():
        for ordinal, (calls, waited, admitted) in stats.items():
            name = _named(f"cuda:{ordinal}", visible)
            d = out.setdefault(name, {"calls": 0, "waited_s": 0.0, "admitted_s": 0.0})
            d["calls"] += calls
            d["waited_s"] += waited
            d["admitted_s"] += admitted
    return dict(sorted(out.items()))


def _default_client():
    return cluster.client()


def _logs(local, client=None) -> dict:
    """``local()`` ((pid, log)) of this process and of each worker of ``client`` (default:
    the default client, when there is one), by pid: a worker in this process counts once."""
    out = dict([local()])
    client = client or _default_client()
    if client is not None:
        out.update(client.run(local).values())
    return out


def _named(dev, visible) -> str:
    """A device's name in the logs' keys, with the worker's CUDA_VISIBLE_DEVICES if set."""
    return dev if visible is None else f"{dev} (CUDA_VISIBLE_DEVICES={visible})"


def devices_used(client=None) -> dict:
    """Where the Dask stages ran since the last :func:`reset`.

    Parameters
    ----------
    client : distributed.Client, optional
        The cluster to ask (default: the default client, when there is one); the client
        process's own log is always included (Dask's local schedulers run tasks there).

    Returns
    -------
    dict
        {stage: {"<device> (CUDA_VISIBLE_DEVICES=<v>)" or "<device>": tasks}}, e.g.
        ``{"scfind.spatial": {"cuda (CUDA_VISIBLE_DEVICES=0)": 16, ...}}``.
    """
    out: dict = {}
    for log in _logs(_pid_log, client).values():
        for (stage, dev, visible), n in log.items():
            per = out.setdefault(stage, {})
            name = _named(dev, visible)
            per[name] = per.get(name, 0) + n
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def seconds_used(client=None) -> dict:
    """Seconds spent in the core calls of the stages that resolve through :func:`stage`, summed
    over tasks and workers since the last :func:`reset`: {stage: seconds}. On a GPU worker with
    several threads this includes each call's wait for its GPU (:func:`gpu_time`).

    Parameters
    ----------
    client : distributed.Client, optional
        As for :func:`devices_used`.

    Returns
    -------
    dict
        {stage: seconds} (stages counted by :func:`on_worker` alone are absent).
    """
    out: dict = {}
    for log in _logs(_local_seconds, client).values():
        for (name, _, _), secs in log.items():
            if secs > 0:
                out[name] = out.get(name, 0.0) + secs
    return dict(sorted(out.items()))


def summary(client=None) -> str:
    """:func:`devices_used` as lines ``stage: device × tasks, ...`` (for a bench's log)."""
    used = devices_used(client)
    if not used:
        return "(no skyconv Dask task ran)"
    return "\n".join(
        f"{stage}: " + ", ".join(f"{d} x {n}" for d, n in per.items())
        for stage, per in used.items()
    )


__all__ = [
    "bytes_used", "check", "copied", "devices_used", "gpu_time", "local_log", "on_worker",
    "reset", "seconds_used", "stage", "summary",
]  # fmt: skip
