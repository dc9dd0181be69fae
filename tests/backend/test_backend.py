"""Device selection, thread pool, fork safety, error mapping, NVRTC compilation of kernels/."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys

import numpy as np
import pytest

import skyconv
from skyconv import _core, filters
from skyconv._backend import resolve_device

from conftest import gpu_available


def test_backend_info_shape():
    info = skyconv.backend_info()
    assert info["version"] == skyconv.__version__
    assert info["cpu_threads"] >= 1
    cuda = info["cuda"]
    assert isinstance(cuda["available"], bool)
    if cuda["available"]:
        assert cuda["device_name"] and cuda["compute_capability"][0] >= 7
        assert cuda["total_memory_bytes"] > 0
    else:
        assert isinstance(cuda["reason"], str) and cuda["reason"]


def test_import_creates_no_cuda_context():
    code = (
        "import skyconv, json; print(json.dumps(skyconv.backend_info()['cuda']['context_created']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "false"


def test_device_names():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") in ("cpu", "cuda")
    with pytest.raises(ValueError, match="device"):
        resolve_device("tpu")
    with pytest.raises(TypeError, match="device"):
        resolve_device(3)


@pytest.mark.skipif(gpu_available(), reason="checks the no-GPU path")
def test_cuda_without_gpu_raises_device_error():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(skyconv.DeviceError, match="cuda"):
        filters.gaussian_filter1d(a, 1.0, device="cuda")
    assert issubclass(skyconv.DeviceError, skyconv.SkyconvError)
    # "auto" falls back to the CPU
    np.testing.assert_array_equal(
        filters.gaussian_filter1d(a, 1.0, device="auto"),
        filters.gaussian_filter1d(a, 1.0, device="cpu"),
    )


def test_environment_default_device():
    code = (
        "import skyconv, numpy as np\n"
        "try:\n"
        "    skyconv.filters.gaussian_filter1d(np.ones(8, np.float32), 1.0)\n"
        "    print('ran')\n"
        "except skyconv.DeviceError as e:\n"
        "    print('DeviceError')\n"
    )
    env = dict(os.environ, SKYCONV_DEVICE="cuda", SKYCONV_DISABLE_CUDA="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "DeviceError", out.stderr
    env = dict(os.environ, SKYCONV_DEVICE="cpu")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "ran", out.stderr


def test_threads_setting():
    before = skyconv.get_num_threads()
    try:
        skyconv.set_num_threads(3)
        assert skyconv.get_num_threads() == 3
        assert skyconv.backend_info()["cpu_threads"] == 3
    finally:
        skyconv.set_num_threads(before)
    with pytest.raises(ValueError):
        skyconv.set_num_threads(0)
    with pytest.raises(TypeError):
        skyconv.set_num_threads(2.5)


def test_threads_from_environment():
    code = "import skyconv; print(skyconv.get_num_threads())"
    env = dict(os.environ, SKYCONV_NUM_THREADS="5")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "5"


def _child(q):
    a = np.random.default_rng(1).standard_normal((8, 64, 64)).astype(np.float32)
    q.put(float(filters.gaussian_filter1d(a, 2.0, axis=1, device="cpu").sum()))


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_forked_child_does_not_hang():
    a = np.random.default_rng(1).standard_normal((8, 64, 64)).astype(np.float32)
    expected = float(filters.gaussian_filter1d(a, 2.0, axis=1, device="cpu").sum())  # pool up
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(60)
    if p.is_alive():
        p.kill()
        pytest.fail("forked child hung in skyconv's thread pool")
    assert p.exitcode == 0
    assert q.get(timeout=5) == pytest.approx(expected, rel=1e-6)


def test_exception_tree():
    assert issubclass(skyconv.ShapeError, ValueError)
    assert issubclass(skyconv.ShapeError, skyconv.SkyconvError)
    assert issubclass(skyconv.GpuMemoryError, MemoryError)
    assert issubclass(skyconv.InternalError, skyconv.SkyconvError)


def test_kernels_compile_with_nvrtc():
    """Every file in kernels/ compiles for Hopper and Ampere, with no GPU needed, and so does
    every kernel compiled on demand (S+C's register-ring boxcars, a variant of scfind)."""
    try:
        import nvidia.cu13  # noqa: F401  (pip's nvidia-cuda-nvrtc wheel)
    except ImportError:
        if skyconv.backend_info()["cuda"]["nvrtc_version"] is None:
            pytest.skip("NVRTC is not installed (pip install nvidia-cuda-nvrtc==13.0.*)")
    for arch in ((9, 0), (8, 0)):
        sizes = _core._compile_kernels(*arch)
        registered = {name.split("+")[0] for name in sizes}
        assert "scfind+register-ring boxcars" in sizes
        on_disk = {
            f[:-3]
            for f in os.listdir(os.path.join(os.path.dirname(__file__), "..", "..", "kernels"))
            if f.endswith(".cu")
        }
        assert registered == on_disk, "every kernels/*.cu must be registered (and only those)"
        assert all(v > 1000 for v in sizes.values()), sizes
