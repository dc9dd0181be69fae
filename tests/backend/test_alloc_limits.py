"""Huge sizes from user input (issue 17): each is refused before work starts with a skyconv
error (HostMemoryError, a MemoryError, naming what was asked for, the bytes and the limit; or
ArgumentError, a ValueError, naming the argument) — never an abort (SIGABRT) or a Rust panic.
Each case runs in its own subprocess, since the failure being tested would kill the
interpreter. Also: environment variables with bad values, and the classes of the core's
errors.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import skyconv
from skyconv import exceptions as ex

#: (name, code, expected class name): the issue's abort and panic cases.
CASES = [
    (
        "gaussian sigma=1e9",
        "skyconv.filters.gaussian_filter1d(np.zeros(100), sigma=1e9, device='cpu')",
        "ArgumentError",
    ),
    (
        "gaussian radius=1e9",
        "skyconv.filters.gaussian_filter1d(np.zeros(100), 1.0, radius=10**9, device='cpu')",
        "ArgumentError",
    ),
    (
        "uniform size=1e12",
        "skyconv.filters.uniform_filter1d(np.zeros(100), size=10**12, device='cpu')",
        "ArgumentError",
    ),
    (
        "chain sigma=1e9",
        "skyconv.filters.chain(np.zeros((8, 8)), [skyconv.filters.Gaussian(1e9, axis=0)],"
        " device='cpu')",
        "ArgumentError",
    ),
    (
        "smooth_and_clip kernels_xy=1e9",
        "skyconv.smooth_and_clip(np.zeros((4, 8, 8), np.float32), kernels_xy=(1e9,),"
        " kernels_z=(0,), device='cpu')",
        "ArgumentError",
    ),
    (
        "smooth_and_clip kernels_z=1e9",
        "skyconv.smooth_and_clip(np.zeros((4, 8, 8), np.float32), kernels_xy=(0,),"
        " kernels_z=(10**9,), device='cpu')",
        "ArgumentError",
    ),
    (
        "SCfinder_mem 1e9-px kernel",
        "from skyconv.compat import sofia; c = np.zeros((4, 8, 8), np.float32);"
        " sofia.SCfinder_mem(c, np.zeros(c.shape, np.int8), {'CDELT1': 1, 'CDELT2': 1, 'CDELT3': 1,"
        " 'BMAJ': 1, 'BMIN': 1}, kernels=[[1e9, 1e9, 0, 'g']])",
        "ArgumentError",
    ),
    (
        "grid HealpixTarget(2**20)",
        "skyconv.grid(np.array([45.0]), np.array([0.0]), np.array([1.0]),"
        " skyconv.HealpixTarget(2**20), kernel_params=20.0, device='cpu')",
        "HostMemoryError",
    ),
    ("ring_info(2**29)", "skyconv.healpix.ring_info(2**29)", "HostMemoryError"),
    (
        "alm2map nside=2**20",
        "skyconv.sht.alm2map(np.zeros(6, complex), nside=2**20, lmax=2, device='cpu')",
        "HostMemoryError",
    ),
    (
        "map2alm lmax=1e6",
        "skyconv.sht.map2alm(np.zeros(192), lmax=10**6, device='cpu')",
        "HostMemoryError",
    ),
    (
        "map2alm lmax=2**31",
        "skyconv.sht.map2alm(np.zeros(192), lmax=2**31, device='cpu')",
        "HostMemoryError",
    ),
    (
        "smooth_map harmonic lmax=1e6",
        "skyconv.smooth_map(np.zeros(192), fwhm=0.01, method='harmonic', lmax=10**6, device='cpu')",
        "HostMemoryError",
    ),
]

CHILD = """
import numpy as np, skyconv
try:
    {code}
except BaseException as e:
    print("CLASS", type(e).__name__)
    print("MRO", " ".join(c.__name__ for c in type(e).__mro__))
    print("MSG", str(e).replace("\\n", " "))
else:
    print("CLASS none")
"""


def _run(code: str, env=None) -> dict[str, str]:
    r = subprocess.run(
        [sys.executable, "-c", CHILD.format(code=code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, f"the interpreter died (rc {r.returncode}): {r.stderr[-2000:]}"
    assert "panicked" not in r.stderr, r.stderr[-2000:]
    return dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)


@pytest.mark.parametrize("name,code,cls", CASES, ids=[c[0] for c in CASES])
def test_huge_sizes_are_refused_not_aborted(name, code, cls):
    out = _run(code)
    assert out.get("CLASS") == cls, f"{name}: {out}"
    mro = out["MRO"].split()
    assert "SkyconvError" in mro, out
    if cls == "HostMemoryError":
        assert "MemoryError" in mro
        msg = out["MSG"]
        # what was asked for, the bytes, and the limit
        assert "cannot allocate" in msg and "bytes" in msg, msg
        assert "available" in msg or "more than this machine" in msg, msg
    else:
        assert "ValueError" in mro


def test_host_memory_error_numbers_are_right():
    """The byte count in the message is the output's size: (12 nside^2) float64 for alm2map."""
    nside = 2**20
    with pytest.raises(ex.HostMemoryError) as info:
        skyconv.sht.alm2map(np.zeros(6, complex), nside=nside, lmax=2, device="cpu")
    assert f"({12 * nside * nside * 8} bytes)" in str(info.value)


def test_kernel_reach_is_bounded_by_the_axis():
    """A filter reaching past max(axis length, 32768) samples is an ArgumentError naming the
    axis; one just inside matches a float64 brute force of scipy's rule (reflect mode)."""
    x = np.random.default_rng(3).standard_normal(40)
    with pytest.raises(ex.ArgumentError, match="axis 0 has only 40 samples"):
        skyconv.filters.uniform_filter1d(x, 2 * 40000 + 1, device="cpu")
    size = 301  # longer than the axis: every tap reads the reflected extension
    out = skyconv.filters.uniform_filter1d(x, size, mode="reflect", device="cpu")
    ext = np.concatenate([x, x[::-1]])  # period 2n of the 'reflect' extension
    idx = (np.arange(len(x))[:, None] + np.arange(-(size // 2), size // 2 + 1)[None, :]) % 80
    ref = ext[idx].mean(axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("value", ["0", "abc", "-3", "2.5"])
def test_bad_skyconv_num_threads_is_an_argument_error(value):
    env = dict(os.environ, SKYCONV_NUM_THREADS=value)
    out = _run("skyconv.filters.uniform_filter1d(np.zeros(10), 3, device='cpu')", env=env)
    assert out.get("CLASS") == "ArgumentError", out
    assert "SKYCONV_NUM_THREADS" in out["MSG"] and repr(value).strip("'") in out["MSG"], out
    assert "positive integer" in out["MSG"], out


def test_good_skyconv_num_threads_is_used():
    env = dict(os.environ, SKYCONV_NUM_THREADS=" 3 ")
    r = subprocess.run(
        [sys.executable, "-c", "import skyconv; print(skyconv.get_num_threads())"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.stdout.strip() == "3", r.stderr


def test_bad_sht_chunk_pairs_is_an_argument_error():
    env = dict(os.environ, SKYCONV_SHT_CHUNK_PAIRS="many")
    out = _run("skyconv.sht.alm2map(np.zeros(6, complex), 2, lmax=2, device='cpu')", env=env)
    assert out.get("CLASS") == "ArgumentError", out
    assert "SKYCONV_SHT_CHUNK_PAIRS" in out["MSG"], out


def test_core_errors_are_skyconv_classes():
    """Value and type errors raised by the Rust core itself are ArgumentError /
    ArgumentTypeError (still ValueError / TypeError), never plain builtins."""
    core = skyconv._core
    with pytest.raises(ex.ArgumentError) as info:
        core._uniform_filter1d(np.zeros(10), 3, 0, "bogus", 0.0, 0, "cpu")
    assert isinstance(info.value, ValueError) and "mode must be one of" in str(info.value)
    with pytest.raises(ex.ArgumentError):
        core._uniform_filter1d(np.zeros((4, 4))[:, ::2], 3, 0, "reflect", 0.0, 0, "cpu")
    with pytest.raises(ex.ArgumentError):
        core.set_num_threads(0)
