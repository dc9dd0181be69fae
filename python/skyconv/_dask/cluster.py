"""What the Dask paths read of the current Distributed cluster: its client and its workers'
scheduler info (threads, memory limit), in one place. Without Distributed or a client both say
so (None, an empty list), and each caller keeps its own fallback."""

from __future__ import annotations


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


def workers() -> list[dict]:
    """The scheduler's info of each worker of the current client (keys ``"address"``,
    ``"nthreads"``, ``"memory_limit"``, ...), sorted by address; empty without a client."""
    c = client()
    if c is None:
        return []
    info = c.scheduler_info().get("workers", {})
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
