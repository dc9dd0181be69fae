"""Building the host emulations of kernels/*.cu (tests/cuda_host/*.cpp, run in the SIMT
emulator simt.hpp) with the system's C++ compiler; skips the test when there is none."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def build(tmp_path: Path, name: str, flags: tuple[str, ...] = ()) -> Path:
    """Compile tests/cuda_host/NAME.cpp (with the compiler ``flags`` added) into tmp_path."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path / name
    subprocess.run(
        [
            cxx,
            "-O2",
            "-std=c++17",
            *flags,
            "-I",
            str(ROOT / "kernels"),
            "-I",
            str(ROOT / "tests" / "cuda_host"),
            "-o",
            str(exe),
            str(ROOT / "tests" / "cuda_host" / f"{name}.cpp"),
            "-lm",
        ],
        check=True,
    )
    return exe
