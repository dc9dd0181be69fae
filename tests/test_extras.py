"""Install extras (issue 17): the ``[test]`` extra pulls no GPU-only wheel (CUDA NVRTC is 90 MB
and useless on a machine without a GPU); the GPU's NVRTC and cuFFT come only with the GPU
extras ``[cuda12]`` and ``[cuda13]``, which the README names."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
#: Distributions that are of use only with an NVIDIA GPU.
GPU_ONLY = re.compile(r"^(nvidia-|cupy|cuda-python|pycuda)", re.IGNORECASE)


def _names(extra: str) -> list[str]:
    return [re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0] for req in EXTRAS[extra]]


def test_no_gpu_only_wheel_outside_the_gpu_extras():
    for extra in EXTRAS:
        if extra in ("cuda12", "cuda13"):
            continue
        gpu_only = [name for name in _names(extra) if GPU_ONLY.match(name)]
        assert gpu_only == [], f"[{extra}] pulls GPU-only wheels: {gpu_only}"


def test_the_gpu_extras_bring_nvrtc_and_cufft():
    assert set(_names("cuda12")) == {"nvidia-cuda-nvrtc-cu12", "nvidia-cufft-cu12"}
    assert set(_names("cuda13")) == {"nvidia-cuda-nvrtc", "nvidia-cufft"}
    readme = (ROOT / "README.md").read_text()
    assert "[cuda13]" in readme and "[cuda12]" in readme
