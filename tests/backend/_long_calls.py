"""Long calls for the Ctrl-C tests (tests/backend/test_interrupt.py): each is a few seconds or
more on 2 CPU cores, so that a SIGINT sent after ~1 s lands in the middle of the work.

Run as a script: ``python _long_calls.py NAME DEVICE [REPEAT]`` builds the inputs, then REPEAT
times (default 1): prints ``ready``, runs the call and prints ``interrupted`` (KeyboardInterrupt),
``raised <type>: <message>`` or ``done`` at once, then ``busy=<s>``: the CPU seconds this
process used in the IDLE_S seconds after the answer (threads still working after the call
ended would show there), then on the cuda device a line ``gpu_mib=<MiB>``: the GPU memory
this process holds after a small synchronising call (nvidia-smi, which takes a second or two:
after the answer, so that it does not count in the latency), so the parent can check that an
interrupted call leaves no allocation behind. Last, ``check <max error> <scale>``: the same
call on small inputs, on DEVICE and on the CPU, so the parent can check that the device still
computes right after the interrupted calls.
"""

import sys

import numpy as np


def _setup(name: str, device: str, small: bool = False):
    """The call `name` on `device`: the long one, or with `small` the same function on inputs
    that take milliseconds (to check a device after interrupted calls)."""
    import skyconv

    rng = np.random.default_rng(0)
    side, sigma, width = (64, 3.0, 9) if small else (3000, 400.0, 3201)
    if name == "gaussian_filter1d":
        x = rng.standard_normal((side, side)).astype(np.float32)
        return lambda: skyconv.filters.gaussian_filter1d(x, sigma, axis=0, device=device)
    if name == "uniform_filter1d":
        x = rng.standard_normal((side, side)).astype(np.float32)
        w = np.ones(width)
        return lambda: skyconv.filters.correlate1d(x, w, axis=0, device=device)
    if name == "chain":
        x = rng.standard_normal((side, side)).astype(np.float32)
        passes = [skyconv.filters.Gaussian(sigma, axis=0), skyconv.filters.Gaussian(sigma, axis=1)]
        return lambda: skyconv.filters.chain(x, passes, device=device)
    if name == "smooth_and_clip":
        c = rng.standard_normal((16, 32, 32) if small else (128, 256, 256)).astype(np.float32)
        return lambda: skyconv.smooth_and_clip(
            c, kernels_xy=(0, 3, 6, 9, 12, 15), kernels_z=(0, 3, 7, 15, 31), device=device
        )
    if name == "atrous_denoise":
        c = rng.standard_normal((16, 32, 32) if small else (96, 256, 256)).astype(np.float32)
        return lambda: skyconv.atrous_denoise(c, dim=3, convergence=1e-9, device=device)
    if name == "grid":
        n = 20_000 if small else 4_000_000
        lon = rng.uniform(0, 40, n)
        lat = rng.uniform(-20, 20, n)
        d = rng.standard_normal((n, 16)).astype(np.float32)
        tgt = skyconv.HealpixTarget(64 if small else 1024)
        return lambda: skyconv.grid(lon, lat, d, tgt, kernel_params=1.0, device=device)
    if name in ("alm2map", "map2alm", "smooth_ring", "smooth_harmonic", "smooth_split"):
        nside, lmax = (32, 95) if small else (1024, 3071)
        alm = np.zeros(skyconv.sht.Alm.getsize(lmax), complex)
        alm[:] = rng.standard_normal(alm.size)
        if name == "alm2map":
            return lambda: [
                skyconv.sht.alm2map(alm, nside, lmax=lmax, device=device) for _ in range(1)
            ]
        if small:
            big = skyconv.sht.alm2map(alm, nside, lmax=lmax, device="cpu")
        else:
            m = skyconv.sht.alm2map(alm[: skyconv.sht.Alm.getsize(200)], 256, lmax=200)
            big = np.repeat(m, 16)  # an nside 1024 map
        if name == "map2alm":
            return lambda: skyconv.sht.map2alm(big, lmax=lmax, iter=3, device=device)
        method = name.split("_")[1]
        if small:
            fwhm = np.radians(6.0)
        else:
            fwhm = np.radians(60 / 60) if method != "ring" else np.radians(30 / 60)
        return lambda: skyconv.smooth_map(big, fwhm=fwhm, method=method, device=device)
    raise SystemExit(f"unknown call {name}")


def _arrays(result) -> list:
    """The arrays of a result (an array, a list or tuple of them, or a result object)."""
    if isinstance(result, np.ndarray):
        return [result]
    if isinstance(result, (list, tuple)):
        return [a for r in result for a in _arrays(r)]
    for attr in ("cube", "data"):
        if isinstance(getattr(result, attr, None), np.ndarray):
            return [getattr(result, attr)]
    return [np.asarray(result)]


def _check(name: str, device: str) -> str:
    """``check <max abs difference> <max abs value>`` of the small call on `device` vs the CPU
    (for masks, ``check <fraction of elements that differ> 1``)."""
    got = _arrays(_setup(name, device, small=True)())
    ref = _arrays(_setup(name, "cpu", small=True)())
    if any(r.dtype.kind in "biu" for r in ref):  # masks: the fraction of elements that differ
        err = max(float(np.mean(g != r)) for g, r in zip(got, ref))
        return f"check {err:.6g} 1"
    err = max(float(np.nanmax(np.abs(g - r.astype(float)))) for g, r in zip(got, ref))
    scale = max(float(np.nanmax(np.abs(r.astype(float)))) for r in ref)
    return f"check {err:.6g} {scale:.6g}"


def _gpu_mib() -> str:
    """``gpu_mib=N``: the GPU memory (MiB) held by this process, per nvidia-smi."""
    import os
    import subprocess

    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    mine = [
        line.split(",")[1].strip()
        for line in out.splitlines()
        if line.split(",")[0].strip() == str(os.getpid())
    ]
    return f"gpu_mib={mine[0] if mine else 0}"


#: Seconds after a call's answer over which its CPU use is measured (``busy=``).
IDLE_S = 0.5


def _run_once(call, device: str, settle) -> None:
    import time

    print("ready", flush=True)
    try:
        # Repeat the call until the signal comes (at most 60 s), so that a machine fast enough
        # to finish one call before the parent's SIGINT still has the signal land mid-call.
        deadline = time.monotonic() + 60
        call()
        while time.monotonic() < deadline:
            call()
        what = "done"
    except KeyboardInterrupt:
        what = "interrupted"
    except BaseException as e:  # noqa: BLE001 (reported to the parent test)
        what = f"raised {type(e).__name__}: {e}"
    print(what, flush=True)
    cpu = time.process_time()
    time.sleep(IDLE_S)
    print(f"busy={time.process_time() - cpu:.4f}", flush=True)
    if device == "cuda":
        # A small call first: it synchronises the device, and the blocks the interrupted call
        # gave back to the stream-ordered memory pool are released at a synchronisation; before
        # it, the count read one of two levels by where the signal had landed (e.g. alm2map 530
        # or 914 MiB, falling back on the next call), which is no leak.
        settle()
        print(_gpu_mib(), flush=True)


def main() -> None:
    # Python's own Ctrl-C handler, as in a terminal or a Jupyter kernel: a process started in
    # the background by a shell without job control (`cmd &` in a script, as CI runners may
    # start the suite) inherits SIGINT ignored, and Python then installs no handler, so the
    # signal would never reach the call (why the whole-suite runs of session 9 saw no answer).
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)
    name, device = sys.argv[1], sys.argv[2]
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    call = _setup(name, device)
    small = _setup(name, device, small=True)
    if device == "cuda":
        # Compile (or load) the call's kernel modules first: NVRTC's compilation of a module,
        # once per machine and kernel version (then read from the disk cache), cannot be
        # interrupted and took 2.75 s for the grid module in session 9's GPU run.
        small()
    for _ in range(repeat):
        _run_once(call, device, small)
    print(_check(name, device), flush=True)


if __name__ == "__main__":
    main()
