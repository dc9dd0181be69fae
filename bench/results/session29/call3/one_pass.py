"""Session 29 call 3: one B3 pass of the 256x512^2 float32 cube along z at step 32
(correlate_whole16, the pass still 1.8x its floor) and one along x at step 32 (correlate_lines8,
new halo), each launched once for ncu."""

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/../../../.."
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
import cupy as cp  # noqa: E402
from filters_tiles import launch, modules, tile_plan  # noqa: E402

mods = modules(cp, open(os.path.join(ROOT, "kernels", "filters.cu")).read())
x = cp.asarray(np.random.default_rng(1).standard_normal((256, 512, 512), dtype=np.float32))
w = cp.asarray(np.array([1, 4, 6, 4, 1]) / 16.0)
for axis in (0, 2):
    (kernel, smem), _ = tile_plan(x.shape, axis, 5, 32, x.dtype)
    launch(cp, mods, x, axis, w, -64, 32, "mirror", 0.0, kernel, smem)
cp.cuda.Device().synchronize()
