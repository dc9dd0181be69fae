"""Ctrl-C during a long call (issue 17): each long entry point, started in a subprocess and sent
SIGINT about 1 s into its work, raises KeyboardInterrupt within 0.5 s of the signal on the CPU
(the call stops at the engine's next cancel poll; the threads join before the exception is
raised, so the process is idle right after it) and on the GPU (long work is cut into launches
of bounded time, at most two queued: `backend::cuda::pace`). bench/cancel_latency.py sends the
signal at many moments of one call instead of one. A call that has not answered 30 s after
the signal is killed: a failure. On the cuda device the call is interrupted three times, and
the GPU memory the process holds must not grow from the second interrupted call to the third
(no allocation left behind). After the interrupted calls the same function runs on small
inputs and must agree with the CPU: the device is still usable.

A progress callback that raises ends the call with that same exception, for every function
that takes one.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import skyconv

HERE = Path(__file__).resolve().parent
LONG_CALLS = [
    "gaussian_filter1d",
    "uniform_filter1d",
    "chain",
    "smooth_and_clip",
    "atrous_denoise",
    "grid",
    "alm2map",
    "map2alm",
    "smooth_ring",
    "smooth_harmonic",
    "smooth_split",
]
#: Seconds from SIGINT to KeyboardInterrupt per device: the issue's 0.5 s on both (on the GPU
#: a launch already queued cannot be stopped, but at most two pieces of ~60 ms are queued).
LATENCY = {"cpu": 0.5, "cuda": 0.5}
#: The small call after the interrupted ones agrees with the CPU to this fraction of its
#: largest value (float32 engines, iterative ones included); masks: of their elements.
CHECK_RTOL = 1e-2
#: Seconds into the call when SIGINT is sent.
DELAY = 1.0
#: Seconds a call may take to answer the signal before the test kills it.
KILL_AFTER = 30.0
#: MiB the GPU memory of the process may grow between two interrupted calls.
GPU_SLACK_MIB = 64
#: CPU seconds the process may use in the 0.5 s after an interrupted call ends (no thread of
#: the call still working: one would use up to 0.5 s per core).
BUSY_MAX_S = 0.1


class _Child:
    """A `_long_calls.py` subprocess whose stdout lines arrive on a queue with timestamps."""

    def __init__(self, name: str, device: str, repeat: int):
        self.device = device
        env = dict(os.environ, SKYCONV_NUM_THREADS=os.environ.get("SKYCONV_NUM_THREADS", "2"))
        # The device pool gives freed memory back at once: kept memory (by design, up to
        # SKYCONV_GPU_POOL_MB; test_gpu_memory.py) would read as growth when a signal lands
        # after a call that ended, before Python raises (session 20 call 2: 562 → 1074 MiB).
        env["SKYCONV_GPU_POOL_MB"] = "0"
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "_long_calls.py"), name, device, str(repeat)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put((time.monotonic(), line.strip()))
        self.lines.put((time.monotonic(), None))

    def next(self, timeout: float):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return time.monotonic(), None

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        return self.proc.stderr.read()


def _interrupt(child: _Child, name: str) -> tuple[float, int | None]:
    """Wait for `ready`, send SIGINT after DELAY, return (latency, the child's GPU MiB after
    the interrupted call, on cuda)."""
    _, line = child.next(timeout=300)
    assert line == "ready", f"{name}: the child did not start ({line!r}): {child.close()}"
    time.sleep(DELAY)
    sent = time.monotonic()
    child.proc.send_signal(signal.SIGINT)
    got, answer = child.next(timeout=KILL_AFTER)
    assert answer is not None, f"{name}: no answer {KILL_AFTER} s after SIGINT: {child.close()}"
    assert not answer.startswith("done"), (
        f"{name}: the call ended before the signal arrived; make the test call longer"
    )
    assert answer == "interrupted", f"{name}: {answer}"
    _, line = child.next(timeout=KILL_AFTER)
    assert line and line.startswith("busy="), f"{name}: {line!r}: {child.close()}"
    busy = float(line.split("=")[1])
    assert busy <= BUSY_MAX_S, (
        f"{name}: the process used {busy} CPU s in the 0.5 s after the interrupted call ended"
    )
    mib = None
    if child.device == "cuda":
        _, line = child.next(timeout=KILL_AFTER)
        assert line and line.startswith("gpu_mib="), f"{name}: {line!r}: {child.close()}"
        mib = int(line.split("=")[1])
    return got - sent, mib


@pytest.mark.parametrize("name", LONG_CALLS)
def test_ctrl_c_interrupts_a_long_call(name, device):
    # On the GPU, three interrupted calls: the first two may fill caches that stay (cuFFT plans,
    # modules, pooled blocks of the sizes the interrupted stage had reached); a leak grows again
    # on the third.
    repeat = 3 if device == "cuda" else 1
    child = _Child(name, device, repeat)
    try:
        answers = [_interrupt(child, name) for _ in range(repeat)]
        _, check = child.next(timeout=300)
    finally:
        stderr = child.close()
    for latency, _ in answers:
        print(f"{name} on {device}: KeyboardInterrupt {latency:.3f} s after SIGINT")
        assert latency < LATENCY[device], (
            f"{name} on {device}: KeyboardInterrupt {latency:.3f} s after SIGINT"
        )
    if device == "cuda":
        mib = [m for _, m in answers]
        print(f"{name}: GPU memory after each interrupted call {mib} MiB")
        assert mib[2] <= mib[1] + GPU_SLACK_MIB, (
            f"{name}: GPU memory grew from {mib[1]} to {mib[2]} MiB between the second and "
            "third interrupted calls"
        )
    assert check and check.startswith("check "), f"{name}: no check after the calls: {stderr}"
    err, scale = (float(v) for v in check.split()[1:])
    assert err <= CHECK_RTOL * scale, (
        f"{name} on {device} after interrupted calls: max difference {err} from the CPU "
        f"(largest value {scale})"
    )


class _Stop(Exception):
    pass


def _raise_on_second(*args):
    _raise_on_second.calls += 1
    if _raise_on_second.calls >= 2:
        raise _Stop("stop here")


def test_a_raising_progress_callback_propagates_unchanged(device):
    """smooth_and_clip and atrous_denoise: the callback's own exception object comes out."""
    rng = np.random.default_rng(1)
    cube = rng.standard_normal((16, 24, 24)).astype(np.float32)
    calls = {
        "smooth_and_clip": lambda cb: skyconv.smooth_and_clip(
            cube, kernels_xy=(0, 3), kernels_z=(0, 3, 7), device=device, progress=cb
        ),
        "atrous_denoise": lambda cb: skyconv.atrous_denoise(
            cube, dim=3, convergence=1e-9, device=device, progress=cb
        ),
    }
    for name, run in calls.items():
        _raise_on_second.calls = 0
        with pytest.raises(_Stop, match="stop here") as info:
            run(_raise_on_second)
        assert type(info.value) is _Stop, name
        assert _raise_on_second.calls == 2, f"{name}: the call went on after the callback raised"


def test_polling_leaves_short_calls_alone(device):
    """Calls shorter than one poll period (20 ms) return their result, unchanged."""
    x = np.arange(50.0)
    out = skyconv.filters.uniform_filter1d(x, 5, device=device)
    ref = np.convolve(np.pad(x, 2, mode="symmetric"), np.ones(5) / 5, mode="valid")
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)


def test_the_first_call_runs_no_python_code_of_numpy():
    """NumPy's C API is loaded when skyconv is imported (src/py/numpy_api.rs): the first call
    that returns an array runs no Python code of NumPy, so a Ctrl-C cannot land in it (it made
    rust-numpy panic: `PanicException`, not `KeyboardInterrupt`)."""
    code = (
        "import sys\n"
        "import skyconv\n"
        "seen = []\n"
        "sys.setprofile(lambda f, ev, a: ev == 'call' and seen.append(f.f_code.co_filename))\n"
        "lon, lat = skyconv._core._healpix_centres(1, False, None)\n"
        "sys.setprofile(None)\n"
        "assert lon.size == 12, lon\n"
        "print(sorted({f for f in seen if 'numpy' in f}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
