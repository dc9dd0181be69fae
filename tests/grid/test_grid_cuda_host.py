"""kernels/grid.cu tested without a GPU: its kernels are compiled for the host with g++ and run
in a small SIMT emulator (tests/cuda_host/simt.hpp: fibers for threads, real barriers and warp
collectives, a shuffled schedule). Skipped when no C++ compiler is found.

- grid_emu.cpp: the per-target candidate search and pair evaluation against a brute-force sum.
- grid_device_emu.cpp: the whole device pipeline in src/grid/cuda/'s launch order: the plan
  built on the device (equal to the host plan, bit for bit), the gathers (resident and packed
  channel blocks), the finish kernel, against brute force, and deterministic across schedules.
- The layouts of the kernels' argument structs against the Rust #[repr(C)] mirrors.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _cuda_host import build

from skyconv import _core

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["grid_emu", "grid_device_emu"])
def test_grid_device_logic_on_host(tmp_path, name):
    exe = build(tmp_path, name)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all ok" in run.stdout


def test_kernel_argument_layouts_match(tmp_path):
    exe = build(tmp_path, "grid_device_emu")
    run = subprocess.run([str(exe), "--layout"], capture_output=True, text=True, check=True)
    c_side = run.stdout.split("\n")
    c_side = [line for line in c_side if line]
    rust_side = _core._grid_arg_layout()
    assert rust_side == c_side
    assert len(c_side) > 80


def test_launched_kernel_names_exist():
    """Every kernel name src/grid/cuda/ launches (literal, or format!("grid_x_{}") over the
    f32/f64 suffixes) is an extern "C" __global__ function of kernels/grid.cu."""
    import re

    rust = "\n".join(f.read_text() for f in sorted((ROOT / "src" / "grid" / "cuda").glob("*.rs")))
    cuda = (ROOT / "kernels" / "grid.cu").read_text()
    defined = set(
        re.findall(
            r'extern "C" __global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(grid_\w+)\s*\(',
            cuda,
        )
    )
    launched = set(re.findall(r'launch\(\s*gpu,\s*"(grid_\w+)"', rust))
    for stem in re.findall(r'format!\("(grid_\w+?)_\{\}"', rust):
        launched |= {f"{stem}_f32", f"{stem}_f64"}
    assert len(launched) >= 12, launched
    assert launched <= defined, launched - defined
