"""The on-disk cache of compiled kernels: folder, key, atomic writes, corrupt entries.

The compile round trips use the real NVRTC (pip's nvidia-cuda-nvrtc wheel) on the CPU; each
step runs in a fresh process, as a notebook restart would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import skyconv
from skyconv import _core

from conftest import gpu_available

# The smallest kernel module (kernels/filters.cu): about a second of NVRTC.
MODULE = "filters"
ARCH = (9, 0)


def _nvrtc_or_skip():
    if skyconv.backend_info()["cuda"]["nvrtc_version"] is None:
        pytest.skip("NVRTC is not installed (pip install 'skyconv[cuda13]')")


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, SKYCONV_CACHE_DIR=str(cache), **extra)
    env.pop("SKYCONV_KERNEL_CACHE", None)
    env.update(extra)
    return env


def _compile_in_fresh_process(cache: Path, module: str = MODULE) -> tuple[int, bool, float]:
    """(cubin bytes, cache hit, seconds of the compile call) in a new interpreter."""
    code = (
        "import json, time, skyconv\n"
        "t = time.perf_counter()\n"
        f"n, hit = skyconv._core._compile_module_cached({module!r}, {ARCH[0]}, {ARCH[1]})\n"
        "print(json.dumps([n, hit, time.perf_counter() - t]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(cache)
    )
    assert out.returncode == 0, out.stderr
    n, hit, dt = json.loads(out.stdout.strip().splitlines()[-1])
    return n, hit, dt


def _entries(cache: Path) -> list[Path]:
    d = cache / "kernels"
    return sorted(d.iterdir()) if d.is_dir() else []


def test_cache_folder_from_environment(tmp_path):
    code = "import skyconv; print(skyconv._core._kernel_cache_dir())"

    def folder(**env: str) -> str:
        e = dict(os.environ)
        for k in ("SKYCONV_CACHE_DIR", "XDG_CACHE_HOME", "SKYCONV_KERNEL_CACHE"):
            e.pop(k, None)
        e.update(env)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e)
        return out.stdout.strip()

    assert folder(SKYCONV_CACHE_DIR=str(tmp_path / "c")) == str(tmp_path / "c" / "kernels")
    assert folder(XDG_CACHE_HOME=str(tmp_path / "x")) == str(tmp_path / "x" / "skyconv" / "kernels")
    assert folder(HOME=str(tmp_path / "h")) == str(
        tmp_path / "h" / ".cache" / "skyconv" / "kernels"
    )
    assert folder(SKYCONV_CACHE_DIR=str(tmp_path / "c"), SKYCONV_KERNEL_CACHE="0") == "None"


def test_key_changes_with_every_input():
    src, opts, arch, ver = "__global__ void k() {}", ["--std=c++17"], (9, 0), (13, 0)
    k = _core._kernel_cache_key(src, opts, arch, ver)
    assert len(k) == 32 and int(k, 16) >= 0
    assert _core._kernel_cache_key(src, opts, arch, ver) == k  # deterministic
    others = {
        _core._kernel_cache_key(src + " ", opts, arch, ver),
        _core._kernel_cache_key(src, opts + ["-lineinfo"], arch, ver),
        _core._kernel_cache_key(src, ["--std=c++14"], arch, ver),
        _core._kernel_cache_key(src, opts, (8, 0), ver),
        _core._kernel_cache_key(src, opts, (9, 1), ver),
        _core._kernel_cache_key(src, opts, arch, (12, 9)),
        _core._kernel_cache_key(src, opts, arch, (13, 1)),
        # the same characters split differently between fields
        _core._kernel_cache_key(src + "--std=c++17", [], arch, ver),
    }
    assert k not in others and len(others) == 8


def test_key_is_stable_across_processes():
    """The key is a fixed hash (not Rust's randomised one): the same in every process."""
    code = "import skyconv; print(skyconv._core._kernel_cache_key('x', ['-a'], (9, 0), (13, 0)))"
    keys = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
        for _ in range(2)
    }
    assert len(keys) == 1
    assert keys.pop().strip() == _core._kernel_cache_key("x", ["-a"], (9, 0), (13, 0))


def test_compile_then_cache_hit_in_a_fresh_process(tmp_path):
    _nvrtc_or_skip()
    n1, hit1, cold = _compile_in_fresh_process(tmp_path)
    assert not hit1 and n1 > 1000
    files = _entries(tmp_path)
    key = _core._module_cache_key(MODULE, *ARCH)
    assert [f.name for f in files] == [f"{key}.cubin"]
    n2, hit2, warm = _compile_in_fresh_process(tmp_path)
    assert hit2 and n2 == n1
    print(
        f"\n{MODULE} sm_{ARCH[0]}{ARCH[1]}: compile {cold * 1e3:.0f} ms, cache {warm * 1e3:.1f} ms"
    )
    assert warm < cold / 5, (cold, warm)


@pytest.mark.parametrize(
    "damage",
    ["truncate", "flip_byte", "garbage", "empty"],
)
def test_corrupt_entry_is_recompiled(tmp_path, damage):
    _nvrtc_or_skip()
    n, hit, _ = _compile_in_fresh_process(tmp_path)
    (entry,) = _entries(tmp_path)
    raw = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip_byte":
        b = bytearray(raw)
        b[len(b) - 100] ^= 0xFF
        entry.write_bytes(bytes(b))
    elif damage == "garbage":
        entry.write_bytes(os.urandom(len(raw)))
    else:
        entry.write_bytes(b"")
    n2, hit2, _ = _compile_in_fresh_process(tmp_path)
    assert not hit2 and n2 == n
    assert entry.read_bytes() == raw, "the entry was rewritten"
    assert _compile_in_fresh_process(tmp_path)[1]


def test_concurrent_writers(tmp_path):
    """Several processes compile the same module into an empty cache at once: all succeed,
    one sound entry is left, and no temporary file."""
    _nvrtc_or_skip()
    code = (
        "import json, sys, time, skyconv\n"
        "t0 = float(sys.argv[1])\n"
        "while time.time() < t0: pass\n"
        f"print(json.dumps(skyconv._core._compile_module_cached({MODULE!r}, 9, 0)))\n"
    )
    start = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(tmp_path),
        )
        for _ in range(4)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    sizes = {n for n, _ in results}
    assert len(sizes) == 1
    files = _entries(tmp_path)
    key = _core._module_cache_key(MODULE, *ARCH)
    assert [f.name for f in files] == [f"{key}.cubin"], files
    n, hit, _ = _compile_in_fresh_process(tmp_path)
    assert hit and n == sizes.pop()


def test_clear_kernel_cache(tmp_path, monkeypatch):
    _nvrtc_or_skip()
    _compile_in_fresh_process(tmp_path)
    (tmp_path / "kernels" / ".stray.123.tmp").write_bytes(b"x")
    (tmp_path / "kernels" / "keep.txt").write_bytes(b"not ours")
    monkeypatch.setenv("SKYCONV_CACHE_DIR", str(tmp_path))
    # the module, the stray temporary file, and the loader's remembered choice (cuda_libs/)
    assert skyconv.clear_kernel_cache() == 3
    assert [f.name for f in _entries(tmp_path)] == ["keep.txt"]
    assert skyconv.clear_kernel_cache() == 0
    monkeypatch.setenv("SKYCONV_CACHE_DIR", str(tmp_path / "never-made"))
    assert skyconv.clear_kernel_cache() == 0


def test_cache_off(tmp_path):
    _nvrtc_or_skip()
    code = (
        "import json, skyconv\n"
        f"print(json.dumps(skyconv._core._compile_module_cached({MODULE!r}, 9, 0)))\n"
    )
    env = _env(tmp_path, SKYCONV_KERNEL_CACHE="0")
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert json.loads(out.stdout)[1] is False, out.stderr
    assert _entries(tmp_path) == []


def test_unwritable_cache_still_compiles(tmp_path):
    _nvrtc_or_skip()
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    n, hit, _ = _compile_in_fresh_process(blocker)
    assert n > 1000 and not hit


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_first_gpu_call_fills_then_uses_the_cache(tmp_path):
    """A fresh process's first GPU call compiles only the modules it needs and caches them; the
    next fresh process loads them (and gets the same numbers)."""
    code = (
        "import json, time, numpy as np, skyconv\n"
        "a = np.random.default_rng(3).standard_normal((4, 64, 64))\n"
        "t = time.perf_counter()\n"
        "b = skyconv.filters.gaussian_filter1d(a, 2.0, axis=2, device='cuda')\n"
        "print(json.dumps([time.perf_counter() - t, float(b.sum()), b[1, 2, 3]]))\n"
    )
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path)
        )
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        # name -> (size, mtime) of every entry: the second process must rewrite none of them
        entries = {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in _entries(tmp_path)}
        if len(runs) == 1:
            first = entries
            assert len(first) >= 1 and all(n.endswith(".cubin") for n in first)
            assert len(first) < 8, f"compiled modules the call does not need: {sorted(first)}"
    assert entries == first, "the second process compiled again instead of loading the cache"
    assert runs[0][1:] == runs[1][1:]
    # times are for information only (timing targets live in bench/gpu/first_call.py)
    print(f"\nfirst GPU call: cold cache {runs[0][0]:.3f} s, warm cache {runs[1][0]:.3f} s")
