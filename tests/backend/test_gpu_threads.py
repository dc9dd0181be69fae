"""GPU calls from several Python threads at once (issue 19): each call is admitted to its GPU
in the calling thread before its job enters skyconv's pool, so no pool worker waits for a GPU.

The CPU tests use ``_core._gpu_admission_probe`` (a stand-in for a GPU engine call that
touches no GPU: the engine's section around a parallel loop on the pool) in a child process
with a time limit, so a deadlock fails instead of stalling the suite. Under the old rule (a
per-GPU mutex taken on the pool worker running the call, the probe's mode "legacy") the
two-thread case below made no progress (bench/NOTES.md, session 10, dask-gpu). The tests
marked gpu run S+C, smoothing and the SHT from two threads on one GPU and on two GPUs and
compare with the calls made one after the other.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from _hang import within

import skyconv
from skyconv import _core

CHILD_LIMIT_S = 120  # a child that needs ~1 s alone; the 2-core CI machine may be loaded


def run_child(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON line. A child that has not
    finished after CHILD_LIMIT_S seconds fails the test as a hang."""
    try:
        p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                           text=True, timeout=CHILD_LIMIT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer in {CHILD_LIMIT_S} s: the calls deadlocked")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


THREADS = """
    import json, threading
    from skyconv import _core
    _core.set_num_threads(4)

    def calls(ordinals, rounds, parts, micros, mode, out):
        for r in range(rounds):
            o = ordinals[r % len(ordinals)]
            out.append(_core._gpu_admission_probe(o, parts, micros, mode))

    def many(plan, mode="admitted"):
        outs = [[] for _ in plan]
        ts = [threading.Thread(target=calls, args=(*p, mode, o)) for p, o in zip(plan, outs)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return outs
"""


def test_threads_on_one_gpu_are_admitted_one_at_a_time():
    """Four threads × 10 calls on cuda:0, each call a parallel loop on a 4-thread pool: all
    finish, with the right sums, and no two calls were ever inside their sections at once."""
    got = run_child(
        THREADS
        + """
    outs = many([((0,), 10, 64, 300)] * 4)
    print(json.dumps([outs, _core._gpu_admission_stats()]))
    """
    )
    outs, stats = got
    assert len(outs) == 4 and all(len(o) == 10 for o in outs)
    for sum_, same, _ in (c for o in outs for c in o):
        assert sum_ == 64 * 63 // 2
        assert same == 1, "two calls were inside cuda:0 at once"
    # The admissions are counted: 40 calls, each held cuda:0 for its loop (16 rounds of
    # 300 µs at least on 4 threads), and four threads queued for it.
    calls, waited, admitted = stats["0"]
    assert calls == 40
    assert admitted >= 40 * 16 * 300e-6
    assert waited > 0


def test_threads_on_two_gpus_run_at_once():
    """One thread on cuda:0 and one on cuda:1 (the gates need no GPU): both finish, each GPU
    alone in its section, and the two calls overlap (each saw the other inside)."""
    got = run_child(
        THREADS
        + """
    outs = many([((0,), 6, 32, 20000), ((1,), 6, 32, 20000)])
    print(json.dumps(outs))
    """
    )
    calls = [c for o in got for c in o]
    assert [c[0] for c in calls] == [32 * 31 // 2] * 12
    assert all(c[1] == 1 for c in calls)
    assert max(c[2] for c in calls) == 2, "the calls on two GPUs never overlapped"


def test_threads_mixing_gpus_and_the_same_gpu():
    """Three threads cycling over cuda:0 and cuda:1 in different orders: no deadlock, never two
    calls in one GPU's section."""
    got = run_child(
        THREADS
        + """
    outs = many([((0, 1), 12, 48, 200), ((1, 0), 12, 48, 200), ((0,), 12, 48, 200)])
    print(json.dumps(outs))
    """
    )
    calls = [c for o in got for c in o]
    assert len(calls) == 36
    assert all(c[0] == 48 * 47 // 2 and c[1] == 1 for c in calls)


def test_a_pool_job_not_admitted_is_refused():
    """A job on the pool that opens a GPU section without its call's admission is an error
    (a binding that forgot to pass its device), never a wait on a pool worker."""
    from skyconv._errors import InternalError

    with pytest.raises(InternalError, match="not admitted"):
        _core._gpu_admission_probe(0, 4, 10, "unadmitted")
    assert _core._gpu_admission_probe(0, 4, 10) == (6, 1, 1)


def test_bad_probe_arguments():
    with pytest.raises(skyconv.ArgumentError, match="mode must be"):
        _core._gpu_admission_probe(0, 4, 10, "other")
    with pytest.raises(skyconv.ArgumentError, match="ordinal must be"):
        _core._gpu_admission_probe(8, 4, 10)


def test_ctrl_c_while_waiting_for_the_gpu():
    """A call waiting for its GPU (another thread's call holds it for ~2 s) answers Ctrl-C
    within a poll: the wait is in the calling thread, which looks for signals."""
    got = run_child(
        THREADS
        + """
    import os, signal, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    holder = threading.Thread(target=_core._gpu_admission_probe, args=(0, 4, 2_000_000))
    holder.start()
    time.sleep(0.3)
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    t0 = time.perf_counter()
    try:
        _core._gpu_admission_probe(0, 4, 10)
        what = "returned"
    except KeyboardInterrupt:
        what = "KeyboardInterrupt"
    waited = time.perf_counter() - t0
    holder.join()
    after = _core._gpu_admission_probe(0, 4, 10)  # the gate was released
    print(json.dumps([what, waited, after]))
    """
    )
    what, waited, after = got
    assert what == "KeyboardInterrupt"
    assert waited < 1.5, f"Ctrl-C answered after {waited:.2f} s (the holder runs ~2 s)"
    assert after == [6, 1, 1]


# ------------------------------------------------------------------- on the GPU (marked gpu)


def together(jobs):
    """Run each zero-argument job on its own thread at once; their results in order."""
    outs: list = [None] * len(jobs)
    errs: list = []
    start = threading.Barrier(len(jobs))

    def run(i, job):
        try:
            start.wait()
            outs[i] = job()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errs.append(e)

    ts = [threading.Thread(target=run, args=(i, j)) for i, j in enumerate(jobs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise errs[0]
    return outs


def gpu_inputs(rng):
    """Inputs of three GPU calls that each enter parallel sections on the pool: a small cube
    for S+C, a map for ring smoothing, alm for alm2map."""
    cube = rng.standard_normal((48, 64, 64)).astype(np.float32)
    cube[10:20, 20:30, 20:30] += 3.0
    nside = 128
    m = rng.standard_normal(12 * nside * nside)
    alm = skyconv.map2alm(m, lmax=2 * nside, device="cpu")
    return cube, m, alm, nside


def gpu_jobs(inputs, device):
    """The three calls on ``device``, on ``inputs`` (:func:`gpu_inputs`): (name, job) pairs."""
    cube, m, alm, nside = inputs
    fwhm = np.radians(1.0)
    return [
        ("scfind", lambda: skyconv.smooth_and_clip(cube, threshold=4.0, device=device)),
        ("smooth", lambda: skyconv.smooth_map(m, fwhm=fwhm, method="ring", device=device)),
        ("alm2map", lambda: skyconv.alm2map(alm, nside, device=device)),
    ]


def gpu_count() -> int:
    return skyconv.backend_info()["cuda"].get("device_count", 0) or 0


@pytest.mark.gpu
def test_two_threads_on_one_gpu_equal_the_sequential_calls(rng):
    """S+C, smoothing and SHT, each from two threads, six threads on cuda:0 at once: equal to
    the same calls one after the other; a hang fails after 120 s."""
    jobs = gpu_jobs(gpu_inputs(rng), "cuda:0")
    want = [job() for _, job in jobs]
    got = within(120, together, [job for _, job in jobs] * 2)
    for (name, _), w, g1, g2 in zip(jobs, want, got[:3], got[3:]):
        np.testing.assert_array_equal(g1, w, err_msg=name)
        np.testing.assert_array_equal(g2, w, err_msg=name)


@pytest.mark.gpu
def test_two_threads_on_two_gpus_equal_the_sequential_calls(rng):
    """The same calls on cuda:0 and on cuda:1 (the same inputs), six threads at once."""
    if gpu_count() < 2:
        pytest.skip("needs two GPUs")
    inputs = gpu_inputs(rng)  # the same data on both GPUs
    j0, j1 = gpu_jobs(inputs, "cuda:0"), gpu_jobs(inputs, "cuda:1")
    want = [job() for _, job in j0]
    got = within(120, together, [job for _, job in j0] + [job for _, job in j1])
    for (name, _), w, g0, g1 in zip(j0, want, got[:3], got[3:]):
        np.testing.assert_array_equal(g0, w, err_msg=f"{name} on cuda:0")
        if name == "scfind":  # a mask: the same voxels on either GPU
            np.testing.assert_array_equal(g1, w, err_msg=f"{name} on cuda:1")
        else:  # the same model of GPU and code: equal to rounding at most
            np.testing.assert_allclose(g1, w, rtol=1e-12, atol=1e-12, err_msg=f"{name} on cuda:1")
