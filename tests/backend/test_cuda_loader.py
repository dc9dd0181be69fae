"""The CUDA library loader: search folders, toolkit choice for a driver, rejected candidates.

The choice logic runs on fake library folders (empty or garbage files named like CUDA's
libraries; `loadable` says which of them "load"), and on the real NVRTC 13 of pip's
nvidia-cuda-nvrtc wheel where it is installed. No GPU is needed.
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
from skyconv._utils.cudalibs import search_dirs

from conftest import gpu_available


def _fake(folder: Path, *names: str, content: bytes = b"") -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for n in names:
        (folder / n).write_bytes(content)
        out.append(str(folder / n))
    return out


def _reasons(sel) -> dict[str, str]:
    return {r["path"]: r["reason"] for r in sel["rejected"]}


@pytest.fixture
def two_toolkits(tmp_path):
    """A CUDA 13 folder (pip layout) and a CUDA 12 folder, every file 'loadable'."""
    d13 = tmp_path / "site" / "nvidia" / "cu13" / "lib"
    d12 = tmp_path / "cuda-12.4" / "lib64"
    files = _fake(d13, "libnvrtc.so.13", "libcufft.so.12")
    files += _fake(d12, "libnvrtc.so.12", "libcufft.so.11")
    return d13, d12, files


def test_sonames_found_in_each_folder(two_toolkits):
    d13, d12, files = two_toolkits
    sel = _core._select_cuda_libs([str(d13), str(d12)], 13000, loadable=files)
    found = {(Path(p).name, v) for p, v in sel["candidates"]}
    assert found == {
        ("libnvrtc.so.13", 13),
        ("libcufft.so.12", 13),
        ("libnvrtc.so.12", 12),
        ("libcufft.so.11", 12),
    }


@pytest.mark.parametrize("driver", [13000, 13010, 13020])
def test_newest_toolkit_the_driver_runs(two_toolkits, driver):
    d13, d12, files = two_toolkits
    # folder order does not matter across toolkits: 13 wins on a 13.x driver
    for dirs in ([d13, d12], [d12, d13]):
        sel = _core._select_cuda_libs([str(d) for d in dirs], driver, loadable=files)
        assert sel["toolkit"] == 13
        assert sel["nvrtc"] == str(d13 / "libnvrtc.so.13")
        assert sel["cufft"] == str(d13 / "libcufft.so.12")
        assert sel["rejected"] == []


@pytest.mark.parametrize("driver", [12000, 12020, 12040, 12090])
def test_library_newer_than_driver_rejected(two_toolkits, driver):
    d13, d12, files = two_toolkits
    sel = _core._select_cuda_libs([str(d13), str(d12)], driver, loadable=files)
    assert sel["toolkit"] == 12
    assert sel["nvrtc"] == str(d12 / "libnvrtc.so.12")
    assert sel["cufft"] == str(d12 / "libcufft.so.11")
    why = _reasons(sel)
    assert set(why) == {str(d13 / "libnvrtc.so.13"), str(d13 / "libcufft.so.12")}
    ver = f"{driver // 1000}.{driver % 1000 // 10}"
    for r in why.values():
        assert "newer than the driver" in r and f"CUDA {ver}" in r, r


def test_driver_older_than_both_toolkits(two_toolkits):
    d13, d12, files = two_toolkits
    sel = _core._select_cuda_libs([str(d13), str(d12)], 11080, loadable=files)
    assert sel["toolkit"] is None and sel["nvrtc"] is None and sel["cufft"] is None
    assert len(sel["rejected"]) == 4


def test_no_driver_accepts_newest(two_toolkits):
    """Compiling kernels on a machine without a GPU: every toolkit is allowed."""
    d13, d12, files = two_toolkits
    sel = _core._select_cuda_libs([str(d12), str(d13)], None, loadable=files)
    assert sel["toolkit"] == 13


def test_override_picks_the_asked_toolkit(two_toolkits):
    d13, d12, files = two_toolkits
    sel = _core._select_cuda_libs([str(d13), str(d12)], 13000, only=12, loadable=files)
    assert sel["toolkit"] == 12 and sel["nvrtc"] == str(d12 / "libnvrtc.so.12")
    assert all("SKYCONV_CUDA_VERSION=12" in r for r in _reasons(sel).values())
    # an override the driver cannot run finds nothing
    sel = _core._select_cuda_libs([str(d13), str(d12)], 12040, only=13, loadable=files)
    assert sel["toolkit"] is None
    why = _reasons(sel)
    assert "newer than the driver" in why[str(d13 / "libnvrtc.so.13")]
    assert "SKYCONV_CUDA_VERSION=13" in why[str(d12 / "libnvrtc.so.12")]


def test_search_order_within_a_toolkit(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    fa = _fake(a, "libnvrtc.so.12", "libcufft.so.11")
    fb = _fake(b, "libnvrtc.so.12", "libcufft.so.11")
    sel = _core._select_cuda_libs([str(a), str(b)], 12040, loadable=fa + fb)
    assert sel["nvrtc"] == fa[0] and sel["cufft"] == fa[1]
    sel = _core._select_cuda_libs([str(b), str(a)], 12040, loadable=fa + fb)
    assert sel["nvrtc"] == fb[0] and sel["cufft"] == fb[1]


def test_broken_library_skipped_with_reason(tmp_path):
    """The first NVRTC does not load: the next one of the same toolkit is used."""
    a, b = tmp_path / "a", tmp_path / "b"
    fa = _fake(a, "libnvrtc.so.12")
    fb = _fake(b, "libnvrtc.so.12", "libcufft.so.11")
    sel = _core._select_cuda_libs([str(a), str(b)], 12040, loadable=fb)
    assert sel["toolkit"] == 12 and sel["nvrtc"] == fb[0] and sel["cufft"] == fb[1]
    assert _reasons(sel) == {fa[0]: "not loadable (test)"}


def test_complete_older_toolkit_beats_newer_without_cufft(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    fa = _fake(a, "libnvrtc.so.13")
    fb = _fake(b, "libnvrtc.so.12", "libcufft.so.11")
    sel = _core._select_cuda_libs([str(a), str(b)], 13000, loadable=fa + fb)
    assert sel["toolkit"] == 12 and sel["cufft"] == fb[1]
    assert "lacks cuFFT" in _reasons(sel)[fa[0]]


def test_nvrtc_alone_is_used_without_cufft(tmp_path):
    """Kernels still compile; FFT-based calls report the missing cuFFT."""
    fa = _fake(tmp_path, "libnvrtc.so.13")
    sel = _core._select_cuda_libs([str(tmp_path)], 13000, loadable=fa)
    assert sel["toolkit"] == 13 and sel["nvrtc"] == fa[0] and sel["cufft"] is None


def test_garbage_files_rejected_by_the_real_loader(tmp_path):
    files = _fake(tmp_path, "libnvrtc.so.12", "libcufft.so.11", content=b"not an ELF file\n")
    files += _fake(tmp_path, "libnvrtc.so.13")  # empty
    sel = _core._select_cuda_libs([str(tmp_path)], 13000)
    assert sel["toolkit"] is None
    why = _reasons(sel)
    assert set(why) == {files[0], files[2]}  # cuFFT is not tried without an NVRTC
    for r in why.values():
        assert r.startswith("cannot be loaded"), r


def _real_nvrtc13() -> Path:
    for d in search_dirs():
        p = Path(d) / "libnvrtc.so.13"
        if p.is_file():
            return p
    pytest.skip("pip's nvidia-cuda-nvrtc 13 wheel is not installed")


def test_real_nvrtc13_chosen_and_refused_for_a_12_driver(tmp_path):
    real = _real_nvrtc13()
    d = tmp_path / "lib"
    d.mkdir()
    for f in real.parent.iterdir():
        if f.name.startswith("libnvrtc"):
            (d / f.name).symlink_to(f)
    _fake(d, "libcufft.so.12", content=b"garbage")
    sel = _core._select_cuda_libs([str(d)], 13000)
    assert sel["toolkit"] == 13 and sel["nvrtc"] == str(d / "libnvrtc.so.13")
    assert sel["cufft"] is None
    assert _reasons(sel)[str(d / "libcufft.so.12")].startswith("cannot be loaded")
    sel = _core._select_cuda_libs([str(d)], 12080)
    assert sel["toolkit"] is None
    assert "newer than the driver" in _reasons(sel)[str(d / "libnvrtc.so.13")]


def test_library_of_another_version_under_a_soname_rejected(tmp_path):
    """A real NVRTC 13 named libnvrtc.so.12 reports its version and is refused."""
    real = _real_nvrtc13()
    (tmp_path / "libnvrtc.so.12").symlink_to(real)
    sel = _core._select_cuda_libs([str(tmp_path)], 12040)
    assert sel["toolkit"] is None
    why = _reasons(sel)[str(tmp_path / "libnvrtc.so.12")]
    assert "reports NVRTC 13." in why and "not CUDA 12" in why, why


def test_python_search_dirs_cover_both_wheel_layouts(tmp_path, monkeypatch):
    site = tmp_path / "site"
    for sub in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cufft/lib"):
        (site / sub).mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(site)])
    extra = tmp_path / "extra"
    extra.mkdir()
    monkeypatch.setenv("SKYCONV_CUDA_LIB_DIRS", str(extra))
    dirs = search_dirs()
    assert dirs == [
        str(extra),
        str(site / "nvidia/cu13/lib"),
        str(site / "nvidia/cuda_nvrtc/lib"),
        str(site / "nvidia/cufft/lib"),
    ]


def _info_in(env: dict[str, str]) -> dict:
    code = "import skyconv, json; print(json.dumps(skyconv.backend_info()['cuda']))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout)


def test_backend_info_reports_libraries():
    info = skyconv.backend_info()["cuda"]
    for key in ("toolkit", "nvrtc", "cufft", "rejected", "search_dirs", "devices", "ordinal"):
        assert key in info
    assert info["ordinal"] == 0
    if info["nvrtc"] is not None:
        nv = info["nvrtc"]
        assert os.path.isfile(nv["path"]) and nv["cuda"] == info["toolkit"]
        assert nv["version"] == info["nvrtc_version"]
        assert nv["source"] in (
            "python",
            "conda",
            "CUDA_HOME",
            "CUDA_PATH",
            "/usr/local/cuda",
            "LD_LIBRARY_PATH",
            "system",
        )
    for r in info["rejected"]:
        assert r["path"] and r["reason"]
    if not gpu_available():
        assert info["devices"] == []


def test_search_sources_from_environment(tmp_path):
    conda = tmp_path / "conda"
    (conda / "lib").mkdir(parents=True)
    home = tmp_path / "cudahome"
    (home / "lib64").mkdir(parents=True)
    ld = tmp_path / "ld"
    ld.mkdir()
    env = dict(
        os.environ,
        CONDA_PREFIX=str(conda),
        CUDA_HOME=str(home),
        LD_LIBRARY_PATH=str(ld),
    )
    dirs = _info_in(env)["search_dirs"]
    order = [s for _, s in dirs]
    assert [str(conda / "lib"), "conda"] in dirs
    assert [str(home / "lib64"), "CUDA_HOME"] in dirs
    assert [str(ld), "LD_LIBRARY_PATH"] in dirs
    # pip's folders first, LD_LIBRARY_PATH last
    assert order.index("conda") < order.index("CUDA_HOME") < order.index("LD_LIBRARY_PATH")
    if "python" in order:
        assert order.index("python") < order.index("conda")
    if "system" in order:  # the distribution's folders come last
        assert order.index("LD_LIBRARY_PATH") < order.index("system")


def test_override_without_its_libraries_names_the_pip_command():
    """SKYCONV_CUDA_VERSION=12 where only CUDA 13's NVRTC is installed: the kernel compiler
    names the missing piece and the extra that installs it."""
    info = skyconv.backend_info()["cuda"]
    if any(Path(d, "libnvrtc.so.12").exists() for d, _ in info["search_dirs"]):
        pytest.skip("a CUDA 12 NVRTC is installed here")
    code = (
        "import skyconv\n"
        "try:\n"
        "    skyconv._core._compile_kernels(9, 0)\n"
        "except skyconv.DeviceError as e:\n"
        "    print('DeviceError:', e)\n"
    )
    env = dict(os.environ, SKYCONV_CUDA_VERSION="12")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "DeviceError:" in out.stdout, out.stderr
    assert "NVRTC was not found" in out.stdout
    assert "pip install 'skyconv[cuda12]'" in out.stdout
    env = dict(os.environ, SKYCONV_CUDA_VERSION="11")
    info = _info_in(env)
    assert "SKYCONV_CUDA_VERSION must be 12 or 13" in info["config_error"]


def test_device_ordinal_names():
    assert _core.resolve_device_label("cpu") == "cpu"
    for bad in ("cuda:", "cuda:x", "cuda:-1", "cuda:1.5", "cpu:0"):
        with pytest.raises(ValueError, match="cuda:N"):
            _core.resolve_device(bad)
    if not gpu_available():
        for name in ("cuda:0", "CUDA:1", "gpu:0"):
            with pytest.raises(skyconv.DeviceError):
                _core.resolve_device(name)
        assert _core.resolve_device_label("auto") == "cpu"


@pytest.mark.gpu
def test_gpu_ordinals_and_devices():
    info = skyconv.backend_info()["cuda"]
    n = len(info["devices"])
    assert n >= 1 and [d["ordinal"] for d in info["devices"]] == list(range(n))
    assert info["devices"][0]["name"] == info["device_name"]
    assert _core.resolve_device("cuda:0") == "cuda"
    assert _core.resolve_device_label("cuda") == "cuda:0"
    assert _core.resolve_device_label(f"cuda:{n - 1}") == f"cuda:{n - 1}"
    assert _core.resolve_device_label("auto") == "cuda:0"
    with pytest.raises(skyconv.DeviceError, match=f"reports {n} CUDA device"):
        _core.resolve_device(f"cuda:{n}")
    assert info["toolkit"] in (12, 13)
    assert info["nvrtc"]["cuda"] == info["toolkit"] and info["cufft"]["cuda"] == info["toolkit"]
    drv = tuple(int(x) for x in info["driver_version"].split("."))
    assert info["toolkit"] <= drv[0], "a toolkit newer than the driver was chosen"


@pytest.mark.gpu
def test_every_ordinal_gives_the_same_result(rng):
    """The same call on each GPU (cuda:N) equals the CPU's; contexts appear per ordinal."""
    from skyconv import filters

    a = rng.standard_normal((6, 40, 50))
    ref = filters.gaussian_filter1d(a, 2.0, axis=1, device="cpu")
    n = len(skyconv.backend_info()["cuda"]["devices"])
    for k in range(n):
        got = filters.gaussian_filter1d(a, 2.0, axis=1, device=f"cuda:{k}")
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    made = [d["context_created"] for d in skyconv.backend_info()["cuda"]["devices"]]
    assert all(made), made


@pytest.mark.gpu
def test_gpu_toolkit_override_in_fresh_process():
    """SKYCONV_CUDA_VERSION=12 and =13 each give that toolkit or a DeviceError that names the
    extra to install (never the other toolkit)."""
    code = (
        "import skyconv, json, numpy as np\n"
        "i = skyconv.backend_info()['cuda']\n"
        "try:\n"
        "    skyconv.filters.gaussian_filter1d(np.ones((4, 8)), 1.0, device='cuda')\n"
        "    print(json.dumps(['ran', i['toolkit'], i['cufft'] and i['cufft']['cuda']]))\n"
        "except skyconv.DeviceError as e:\n"
        "    print(json.dumps(['DeviceError', str(e)]))\n"
    )
    drv = int(skyconv.backend_info()["cuda"]["driver_version"].split(".")[0])
    for v in (12, 13):
        env = dict(os.environ, SKYCONV_CUDA_VERSION=str(v))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        if res[0] == "ran":
            assert res[1] == v and res[2] in (v, None)
            assert v <= drv
        else:
            assert f"skyconv[cuda{v}]" in res[1] or "newer than the driver" in res[1], res


@pytest.mark.parametrize("toolkit", [12, 13])
def test_kernels_compile_with_each_installed_nvrtc(toolkit):
    """Every kernel module compiles with the NVRTC of CUDA 12 and of CUDA 13, where installed
    (SKYCONV_CUDA_LIB_DIRS can point at an unpacked nvidia-cuda-nvrtc-cu12 wheel), for the
    H100 (sm_90) and the A100 (sm_80), in a fresh process with SKYCONV_CUDA_VERSION set."""
    dirs = [d for d, _ in skyconv.backend_info()["cuda"]["search_dirs"]]
    if not any(Path(d, f"libnvrtc.so.{toolkit}").exists() for d in dirs):
        pytest.skip(f"no NVRTC of CUDA {toolkit} here (pip install 'skyconv[cuda{toolkit}]')")
    code = (
        "import json, skyconv\n"
        "i = skyconv.backend_info()['cuda']\n"
        "out = {a: skyconv._core._compile_kernels(*a) for a in ((9, 0), (8, 0))}\n"
        "print(json.dumps([i['toolkit'], i['nvrtc_version'], [sorted(v.items()) "
        "for v in out.values()]]))\n"
    )
    env = dict(os.environ, SKYCONV_CUDA_VERSION=str(toolkit))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    tk, ver, sizes = json.loads(out.stdout.strip().splitlines()[-1])
    assert tk == toolkit and ver.startswith(f"{toolkit}.")
    on_disk = {
        f[:-3] for f in os.listdir(Path(__file__).parents[2] / "kernels") if f.endswith(".cu")
    }
    for per_arch in sizes:
        assert {k.split("+")[0] for k, _ in per_arch} == on_disk
        assert all(v > 1000 for _, v in per_arch), per_arch


@pytest.mark.gpu
def test_cuda12_and_cuda13_libraries_agree(tmp_path):
    """The FFT-based transforms (cuFFT through skyconv's own bindings) and a kernel-only call
    give the same float64 numbers (1e-12 relative) with CUDA 12's and CUDA 13's libraries,
    where this machine has both (bench/gpu/run.sh use-cuda12 provides CUDA 12's)."""
    code = (
        "import sys, numpy as np, skyconv\n"
        "r = np.random.default_rng(7)\n"
        "nside, lmax = 64, 128\n"
        "nalm = (lmax + 1) * (lmax + 2) // 2\n"
        "a = r.standard_normal(nalm) + 1j * r.standard_normal(nalm)\n"
        "a[: lmax + 1] = a[: lmax + 1].real\n"
        "m = r.standard_normal(12 * nside**2)\n"
        "try:\n"
        "    out = dict(\n"
        "        alm2map=skyconv.alm2map(a, nside, lmax=lmax, device='cuda'),\n"
        "        map2alm=skyconv.map2alm(m, lmax=lmax, device='cuda'),\n"
        "        smooth=skyconv.smooth_map(m, fwhm=np.radians(2.0), method='ring', "
        "device='cuda'),\n"
        "        filt=skyconv.filters.gaussian_filter1d(m.reshape(48, -1), 3.0, device='cuda'),\n"
        "    )\n"
        "except skyconv.DeviceError as e:\n"
        "    print('DeviceError', e)\n"
        "    sys.exit(0)\n"
        "assert skyconv.backend_info()['cuda']['toolkit'] == int(sys.argv[2])\n"
        "np.savez(sys.argv[1], **out)\n"
        "print('saved')\n"
    )
    res = {}
    for v in (12, 13):
        path = tmp_path / f"cuda{v}.npz"
        env = dict(os.environ, SKYCONV_CUDA_VERSION=str(v))
        out = subprocess.run(
            [sys.executable, "-c", code, str(path), str(v)],
            capture_output=True,
            text=True,
            env=env,
        )
        assert out.returncode == 0, out.stderr
        if "saved" not in out.stdout:
            pytest.skip(f"CUDA {v}'s libraries are not usable here: {out.stdout.strip()}")
        res[v] = np.load(path)
    for name in res[13].files:
        x, y = res[13][name], res[12][name]
        scale = np.max(np.abs(x))
        assert np.max(np.abs(x - y)) <= 1e-12 * scale, name
