"""Issue 18's instrumentation and the loader's remembered choice (no GPU needed):

- ``skyconv.setup_trace()`` (the core's set-up log, fed by the Rust stages and the Python
  layer's ``_utils.trace.stage``) and ``SKYCONV_TRACE=1`` printing it to stderr;
- the CUDA libraries' choice remembered on disk (``cuda_libs/`` in the cache folder): a fresh
  process whose kernel modules are all in the CUBIN cache never opens NVRTC (checked in
  /proc/self/maps, not only in skyconv's own account), a record is keyed by the situation, a
  damaged record is ignored and rewritten, concurrent processes leave one sound record,
  ``SKYCONV_KERNEL_CACHE=0`` keeps none, ``clear_kernel_cache`` removes them;
- ``skyconv.warmup`` on a machine without a GPU.

Each process-level step runs in a fresh interpreter, as a notebook restart would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import skyconv
from skyconv import _core
from skyconv._utils.trace import stage

MODULE, ARCH = "filters", (9, 0)


def _nvrtc_or_skip():
    if skyconv.backend_info()["cuda"]["nvrtc_version"] is None:
        pytest.skip("NVRTC is not installed (pip install 'skyconv[cuda13]')")


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, SKYCONV_CACHE_DIR=str(cache))
    for k in ("SKYCONV_KERNEL_CACHE", "SKYCONV_TRACE", "SKYCONV_CUDA_LIB_DIRS"):
        env.pop(k, None)
    env.update(extra)
    return env


_CHILD = """
import json, skyconv
from skyconv import _core
n, hit = _core._compile_module_cached({module!r}, {arch[0]}, {arch[1]})
cuda = skyconv.backend_info()["cuda"]
maps = open("/proc/self/maps").read()
print(json.dumps({{"hit": hit, "bytes": n,
    "remembered": cuda["libraries_remembered"], "nvrtc_loaded": cuda["nvrtc_loaded"],
    "cufft_loaded": cuda["cufft_loaded"], "nvrtc": cuda["nvrtc"], "cufft": cuda["cufft"],
    "nvrtc_version": cuda["nvrtc_version"], "rejected": cuda["rejected"],
    "nvrtc_mapped": "libnvrtc" in maps,
    "stages": [e["stage"] for e in skyconv.setup_trace()]}}))
"""


def _child(cache: Path, **extra: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(module=MODULE, arch=ARCH)],
        capture_output=True,
        text=True,
        env=_env(cache, **extra),
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _records(cache: Path) -> list[Path]:
    d = cache / "cuda_libs"
    return sorted(d.glob("*.txt")) if d.is_dir() else []


# ------------------------------------------------------------------ the set-up log


def test_trace_records_in_order_and_clears():
    skyconv.setup_trace(clear=True)
    _core._trace_record("unit stage", "one", 0.125)
    with stage("unit block", "two"):
        pass
    got = skyconv.setup_trace()
    assert [(e["stage"], e["detail"]) for e in got] == [
        ("unit stage", "one"),
        ("unit block", "two"),
    ]
    assert got[0]["seconds"] == 0.125
    assert 0 <= got[1]["seconds"] < 0.5 and got[0]["at"] <= got[1]["at"]
    assert skyconv.setup_trace(clear=True) == got
    assert skyconv.setup_trace() == []


def test_stage_records_when_the_block_raises():
    skyconv.setup_trace(clear=True)
    with pytest.raises(KeyError):
        with stage("unit failing"):
            raise KeyError("x")
    assert [e["stage"] for e in skyconv.setup_trace(clear=True)] == ["unit failing"]


def test_trace_env_prints_to_stderr(tmp_path):
    code = "from skyconv import _core\n_core._trace_record('unit stage', 'detail', 0.0125)\n"
    for value, printed in (("1", True), ("0", False), ("", False)):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=_env(tmp_path, SKYCONV_TRACE=value),
        )
        assert out.returncode == 0, out.stderr
        line = "skyconv trace: unit stage detail: 12.5 ms"
        assert (line in out.stderr) == printed, (value, out.stderr)


def test_ring_weights_appear_in_the_trace(tmp_path):
    """A core stage (the ring weights of a nside first used here) lands in the log."""
    code = (
        "import numpy as np, skyconv\n"
        "skyconv.smooth_map(np.ones(12 * 8**2), fwhm=0.3, method='ring', device='cpu')\n"
        "print([e['detail'] for e in skyconv.setup_trace() if e['stage'] == 'ring weights'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    assert "nside 8 (solved)" in out.stdout


def test_warmup_on_the_cpu_does_nothing():
    assert skyconv.warmup("cpu") == []
    with pytest.raises(skyconv.ArgumentError):
        skyconv.warmup("tpu")
    if not skyconv.backend_info()["cuda"]["available"]:
        assert skyconv.warmup() == []  # "auto" without a GPU: the CPU
        with pytest.raises(skyconv.DeviceError):
            skyconv.warmup("cuda")
    with pytest.raises(TypeError):
        skyconv.warmup("cpu", modules="sht")


# ------------------------------------------------------------------ the remembered libraries


def test_second_process_never_opens_nvrtc(tmp_path):
    _nvrtc_or_skip()
    first = _child(tmp_path)
    assert not first["hit"] and not first["remembered"]
    assert first["nvrtc_loaded"] and first["nvrtc_mapped"]
    assert len(_records(tmp_path)) == 1
    second = _child(tmp_path)
    assert second["hit"] and second["bytes"] == first["bytes"]
    assert second["remembered"]
    assert not second["nvrtc_loaded"] and not second["nvrtc_mapped"]
    assert not second["cufft_loaded"]
    assert "nvrtc compile" in first["stages"] and "nvrtc compile" not in second["stages"]
    for k in ("nvrtc", "cufft", "nvrtc_version", "rejected"):
        assert second[k] == first[k], k
    assert len(_records(tmp_path)) == 1


def test_cache_miss_with_a_remembered_choice_opens_nvrtc(tmp_path):
    _nvrtc_or_skip()
    _child(tmp_path)
    for f in (tmp_path / "kernels").glob("*.cubin"):
        f.unlink()
    again = _child(tmp_path)
    assert again["remembered"] and not again["hit"]
    assert again["nvrtc_loaded"] and again["nvrtc_mapped"]


def test_record_key_follows_the_search_folders(tmp_path):
    _nvrtc_or_skip()
    extra = tmp_path / "more-libs"
    extra.mkdir()
    _child(tmp_path)
    other = _child(tmp_path, SKYCONV_CUDA_LIB_DIRS=str(extra))
    assert not other["remembered"]  # another situation: searched afresh
    assert len(_records(tmp_path)) == 2


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong key", "bad version"])
def test_damaged_record_is_ignored_and_rewritten(tmp_path, damage):
    _nvrtc_or_skip()
    first = _child(tmp_path)
    (rec,) = _records(tmp_path)
    text = rec.read_text()
    if damage == "truncate":
        rec.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        rec.write_bytes(os.urandom(200))
    elif damage == "wrong key":
        rec.write_text(text.replace(rec.stem, "0" * 32))
    else:
        rec.write_text(text.replace(first["nvrtc_version"], "x.y"))
    again = _child(tmp_path)
    assert not again["remembered"]  # searched and opened afresh
    assert again["nvrtc_version"] == first["nvrtc_version"]
    assert rec.read_text() == text  # rewritten whole
    assert _child(tmp_path)["remembered"]


def test_concurrent_processes_leave_one_sound_record(tmp_path):
    _nvrtc_or_skip()
    code = _CHILD.format(module=MODULE, arch=ARCH)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(tmp_path),
        )
        for _ in range(4)
    ]
    outs = [p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    versions = {json.loads(o.strip().splitlines()[-1])["nvrtc_version"] for o, _ in outs}
    assert len(versions) == 1
    assert len(_records(tmp_path)) == 1
    assert not list((tmp_path / "cuda_libs").glob("*.tmp"))
    assert _child(tmp_path)["remembered"]


def test_kernel_cache_off_keeps_no_record(tmp_path):
    _nvrtc_or_skip()
    r = _child(tmp_path, SKYCONV_KERNEL_CACHE="0")
    assert not r["remembered"] and not r["hit"]
    assert _records(tmp_path) == []


def test_clear_kernel_cache_removes_records(tmp_path, monkeypatch):
    _nvrtc_or_skip()
    _child(tmp_path)
    assert len(_records(tmp_path)) == 1
    monkeypatch.setenv("SKYCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SKYCONV_KERNEL_CACHE", raising=False)
    removed = skyconv.clear_kernel_cache()
    assert removed >= 2  # the module and the record
    assert _records(tmp_path) == []
    assert not _child(tmp_path)["remembered"]


# ------------------------------------------------------------------ on the GPU


_GPU_CHILD = """
import json, numpy as np, skyconv
r = np.random.default_rng(5)
lmax, nside = 64, 32
a = r.standard_normal((lmax + 1) * (lmax + 2) // 2) + 1j * r.standard_normal(
    (lmax + 1) * (lmax + 2) // 2)
a[: lmax + 1] = a[: lmax + 1].real
skyconv.setup_trace(clear=True)
m = skyconv.alm2map(a, nside, lmax=lmax, device="cuda")
s = skyconv.smooth_map(m, fwhm=np.radians(6.0), method="ring", device="cuda")
stages = skyconv.setup_trace(clear=True)
skyconv.smooth_map(m, fwhm=np.radians(6.0), method="ring", device="cuda")
cuda = skyconv.backend_info()["cuda"]
print(json.dumps({"m": m.tolist(), "s": s.tolist(), "stages": stages,
    "later": skyconv.setup_trace(), "remembered": cuda["libraries_remembered"],
    "nvrtc_loaded": cuda["nvrtc_loaded"], "cufft_loaded": cuda["cufft_loaded"],
    "nvrtc_mapped": "libnvrtc" in open("/proc/self/maps").read()}))
"""


def _gpu_child(cache: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _GPU_CHILD], capture_output=True, text=True, env=_env(cache)
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _gpu_or_skip():
    from conftest import gpu_available

    if not gpu_available():
        pytest.skip("needs a GPU")


@pytest.mark.gpu
def test_gpu_warm_process_loads_no_nvrtc_and_gives_the_same_numbers(tmp_path):
    """Cold cache (NVRTC compiles, libraries searched and opened), then a warm process: no
    NVRTC in its address space, cuFFT opened at its first plan, and bit-identical results;
    the first call's set-up stages are in the log and the later call pays none."""
    _gpu_or_skip()
    cold = _gpu_child(tmp_path)
    warm = _gpu_child(tmp_path)
    assert cold["nvrtc_loaded"] and not cold["remembered"]
    assert warm["remembered"] and not warm["nvrtc_loaded"] and not warm["nvrtc_mapped"]
    assert warm["cufft_loaded"]
    assert warm["m"] == cold["m"] and warm["s"] == cold["s"]
    names = {e["stage"] for e in warm["stages"]}
    assert {"driver init", "context", "module cache read", "module load", "cufft plan"} <= names
    assert "nvrtc compile" in {e["stage"] for e in cold["stages"]}
    assert "nvrtc compile" not in names
    assert warm["later"] == []
    # the CPU engine agrees (the reference the GPU suite holds both engines to)
    m = np.array(warm["m"])
    ref = skyconv.smooth_map(m, fwhm=np.radians(6.0), method="ring", device="cpu")
    assert np.max(np.abs(np.array(warm["s"]) - ref)) <= 1e-10 * np.max(np.abs(ref))


@pytest.mark.gpu
def test_gpu_warmup_creates_the_context_and_loads_modules():
    _gpu_or_skip()
    skyconv.setup_trace(clear=True)
    loaded = skyconv.warmup("cuda", modules=["sht", "ringfft"])
    assert loaded == ["sht", "ringfft"]
    assert skyconv.backend_info()["cuda"]["context_created"]
    assert skyconv.backend_info()["cuda"]["cufft_loaded"]
    with pytest.raises(skyconv.ArgumentError, match="no kernel module"):
        skyconv.warmup("cuda", modules=["nope"])
    assert sorted(skyconv.warmup("cuda")) == sorted(
        ["filters", "select", "scfind", "atrous", "grid", "sht", "ringfft", "smooth"]
    )


_SC_CHILD = """
import json, numpy as np, skyconv
c = np.random.default_rng(3).standard_normal((32, 64, 64)).astype(np.float32)
c[16, 30:34, 30:34] += 8.0
skyconv.warmup("cuda", modules=["scfind", "select"], fft=False)
skyconv.setup_trace(clear=True)
m = skyconv.smooth_and_clip(c, device="cuda")
warm = [e["stage"] + " " + e["detail"] for e in skyconv.setup_trace(clear=True)]
m64 = skyconv.smooth_and_clip(c.astype(np.float64), device="cuda")
f64 = [e["stage"] + " " + e["detail"] for e in skyconv.setup_trace(clear=True)]
ref = skyconv.smooth_and_clip(c, device="cpu")
ref64 = skyconv.smooth_and_clip(c.astype(np.float64), device="cpu")
print(json.dumps({"warm": warm, "f64": f64, "found": int(m.sum()), "same": bool(
    np.array_equal(m, ref)), "same64": bool(np.array_equal(m64, ref64))}))
"""


@pytest.mark.gpu
def test_gpu_warmup_covers_a_default_smooth_and_clip(tmp_path):
    """S+C's register-ring boxcars are compiled on demand, a call's own set (cuda_fixed.rs):
    `warmup` compiles the set of SoFiA-2's default kernels on float32, so such a call then
    loads and compiles nothing (with `select`, its noise's medians, warmed too); a float64
    cube needs its own set (one variant module)."""
    _gpu_or_skip()
    out = subprocess.run(
        [sys.executable, "-c", _SC_CHILD], capture_output=True, text=True, env=_env(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["found"] > 0 and r["same"] and r["same64"]
    assert not any(s.startswith(("nvrtc compile", "module ")) for s in r["warm"]), r["warm"]
    compiled = [s for s in r["f64"] if s.startswith("nvrtc compile")]
    assert len(compiled) == 1 and "scfind" in compiled[0], r["f64"]


_FILTERS_CHILD = """
import json, sys, numpy as np, skyconv
from skyconv import filters
a = np.random.default_rng(4).standard_normal((8, 40, 50))
if sys.argv[1] == "warm":
    skyconv.warmup("cuda", modules=["filters"], fft=False)
out = {}
for dt in (np.float32, np.float64):
    skyconv.setup_trace(clear=True)
    x = a.astype(dt)
    g = filters.gaussian_filter1d(x, 2.0, axis=1, device="cuda")
    c = filters.gaussian_filter1d(x, 2.0, axis=1, device="cpu")
    out[dt.__name__] = {
        "trace": [e["stage"] for e in skyconv.setup_trace(clear=True)],
        "err": float(np.max(np.abs(g.astype(np.float64) - c)) / np.max(np.abs(c))),
    }
print(json.dumps(out))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("warm", [False, True])
def test_gpu_filters_compile_one_element_type_a_call(tmp_path, warm):
    """The filters module holds one element type a compile (kernels/filters.cu, FILTERS_F64):
    with a cold cache a float32 call and then a float64 call each compile exactly one module;
    after `warmup(modules=["filters"])` neither compiles nor loads any. Results as the CPU's
    (1e-6 relative in float32, 1e-12 in float64)."""
    _gpu_or_skip()
    out = subprocess.run(
        [sys.executable, "-c", _FILTERS_CHILD, "warm" if warm else "cold"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["float32"]["err"] <= 1e-6 and r["float64"]["err"] <= 1e-12, r
    for dt in ("float32", "float64"):
        stages = r[dt]["trace"]
        if warm:
            assert not any(s in ("nvrtc compile", "module load") for s in stages), stages
        else:
            assert stages.count("nvrtc compile") == 1, (dt, stages)
