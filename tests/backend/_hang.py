"""A time limit for tests that could hang (pytest-timeout is not a dependency): the work runs
on a helper thread and a test whose work has not returned in time fails instead of stalling
the suite."""

from __future__ import annotations

import threading

import pytest


def within(seconds: float, fn, *args):
    """``fn(*args)`` on a daemon thread; its result, or its exception re-raised here.

    Raises ``pytest.fail`` when it has not returned after ``seconds`` (the thread is left
    behind; a cluster the caller opened around this call is closed by the caller's ``with``).
    """
    out: dict = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"no result in {seconds} s: the calls made no progress (a hang)")
    if "error" in out:
        raise out["error"]
    return out["value"]
