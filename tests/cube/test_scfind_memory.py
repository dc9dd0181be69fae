"""Peak memory of the CPU ``smooth_and_clip`` in a fresh process (bench/memory.py's child).

The engine keeps one working copy of the cube (the spatially smoothed planes, in the cube's
type) besides the caller's cube and the output mask; issue 22's target (the call's memory <=
mask + 10% of cube + mask) would need the working copy streamed away and is not met yet. This
test guards what the engine does today (2 threads: per-thread plane buffers scale with the
thread count) with room for allocator slack: the call's own peak stays within the mask + one
working cube + half a cube + 24 MiB. It fails if a change adds a second cube-sized buffer (or
a float64 copy of the cube).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import memory  # noqa: E402

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/self/statm"
)


def test_scfind_cpu_peak_memory_has_one_working_cube():
    r = memory.measure((64, 256, 256), device="cpu", threads=2, timeout=900)
    cube, mask = r["cube_bytes"], r["mask_bytes"]
    assert cube == 64 * 256 * 256 * 4 and mask == cube // 4
    assert r["detected"] > 0  # the injected source was found: the kernels really ran
    bound = mask + cube + 0.5 * cube + (24 << 20)
    assert r["call_bytes"] <= bound, memory.describe(r)
    # and the measurement saw the call at all (the mask alone is allocated during it)
    assert r["call_bytes"] >= mask, memory.describe(r)
