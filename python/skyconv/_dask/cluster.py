"""What the Dask paths read of the current Distributed cluster: its client and its workers'
scheduler info (threads, memory limit), in one place. Without Distributed or a client both say
so (None, an empty list), and each caller keeps its own fallback. On a worker,
:func:`pool_of_worker` sizes skyconv's thread pool to the worker's threads."""

from __future__ import annotations

import os


def client():
    """The current Distributed client, or None (no Distributed, no client, or a scheduler set
    in Dask's config that is not this client's: e.g. ``scheduler="synchronous"``, under which
    a persist through the client would hand the local scheduler futures it cannot read)."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        c = default_client()
    except ValueError:
        return None
    import dask
    from dask.base import get_scheduler

    if dask.config.get("scheduler", None) is not None:
        if getattr(get_scheduler(), "__self__", None) is not c:
            return None
    return c


def workers(c=None) -> list[dict]:
    """The scheduler's info of each worker of client ``c`` (default: the current client; keys
    ``"address"``, ``"nthreads"``, ``"memory_limit"``, ...), sorted by address; empty without
    a client.

    Asked of the scheduler now: ``Client.scheduler_info()`` returns the client's cached copy,
    which the client's periodic refresh (it asks for no workers) can replace between that
    call's fetch and its return, so that it reads a cluster of none."""
    c = client() if c is None else c
    if c is None:
        return []
    info = c.sync(c.scheduler.identity).get("workers", {})
    return [{**info[a], "address": a} for a in sorted(info)]


def threads() -> int:
    """Worker threads of the cluster (0 without a client)."""
    return sum(w.get("nthreads", 1) for w in workers())


def holders(x, wait: bool = False) -> dict | None:
    """The worker holding each block of the persisted dask array ``x``, by block index (blocks
    with no holder left out), after the blocks are computed with ``wait``; None without a
    client."""
    c = client()
    if c is None:
        return None
    from distributed import futures_of
    from distributed import wait as wait_for

    fs = futures_of(x)
    if wait:
        wait_for(fs)
    out = {}
    for key, where in c.who_has(fs).items():
        if where and isinstance(key, tuple):
            out[tuple(key[1:])] = where[0]
    return out


_POOL_SET = False


def pool_of_worker() -> None:
    """Once per worker process (a task calls it before its core call): skyconv's pool takes
    the worker's thread count (unless SKYCONV_NUM_THREADS sets it), so that W workers x T
    threads run W·T engine threads, not W x all cores. The SHT's and S+C's tasks call it."""
    global _POOL_SET
    if _POOL_SET:
        return
    _POOL_SET = True
    if os.environ.get("SKYCONV_NUM_THREADS"):
        return
    try:
        from distributed import get_worker

        n = get_worker().state.nthreads
    except (ImportError, ValueError, AttributeError):
        return
    from .._backend import get_num_threads, set_num_threads

    if n >= 1 and get_num_threads() != n:
        set_num_threads(n)
