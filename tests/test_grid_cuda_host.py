"""kernels/grid.cu's candidate search and pair evaluation, compiled for the host with g++ and
checked against a brute-force sum (tests/cuda_host/grid_emu.cpp): GPU logic tested without a
GPU. Skipped when no C++ compiler is found."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def test_grid_device_logic_on_host(tmp_path):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path / "grid_emu"
    subprocess.run([cxx, "-O2", "-std=c++17", "-I", str(ROOT / "kernels"), "-o", str(exe),
                    str(ROOT / "tests" / "cuda_host" / "grid_emu.cpp"), "-lm"], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all ok" in run.stdout
