"""dask9: one kernel's slab pass (the core calls a Dask slab-pass kernel makes: per slab the
slab call, then the clip), main's build and this branch's in ONE process, alternated slab by
slab, CPU time (1 skyconv thread), on the bench cube (bench/dask_cube.py: noise + a source
every 64 px and 48 planes), kernel xy 0 (S = the cube), boxcar z, level = 5 x the MAD noise
of W. main: slab call keeping W + `_scfind_block_clip` of W; branch: slab call keeping the
clip candidates + `_scfind_slab_clip` (again with the slab's planes, copied as the Dask task
copies them, when a block's floor is not under the level).

    python dask9-slabpass.py SIZE PLANES CHUNK ZW  (main's package at /tmp/dask9-main)
"""

import importlib.util
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../.."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))

from dask_cube import _chunk, parse_size, shape_for  # noqa: E402

import skyconv  # noqa: E402
from skyconv import _core  # noqa: E402

spec_ = importlib.util.spec_from_file_location(
    "dask9main._core", "/tmp/dask9-main/skyconv/_core.abi3.so"
)
main_core = importlib.util.module_from_spec(spec_)
spec_.loader.exec_module(main_core)

skyconv.set_num_threads(1)
size, planes, chunk, zw = (
    parse_size(sys.argv[1]),
    int(sys.argv[2]),
    int(sys.argv[3]),
    int(sys.argv[4]),
)
shape = shape_for(size, planes)
_, cube = _chunk(shape, shape, (0, 0, 0), 3)
nz, r = shape[0], zw // 2
edges = list(range(0, nz, chunk)) + [nz]
spec = ("boxcar", 0.0, 0.0, "boxcar", float(zw), False)
RAW = ("gaussian", 0.0, 0.0, "none", 0.0, False)
samp = ("backward", 7)
# the level: 5 x the MAD noise of W (whole cube, one call)
w_all = _core._scfind_spectral(cube, np.zeros(shape, np.uint8), spec, "constant", True, "cpu")
level = 5.0 * 1.4826 * float(np.median(np.abs(w_all[::7, ::7, ::7])))
del w_all
cpu = {"main slab": 0.0, "main clip": 0.0, "branch slab": 0.0, "branch clip": 0.0}
again = 0
carry_m = carry_b = None
for k in reversed(range(len(edges) - 1)):
    z0, z1 = edges[k], edges[k + 1]
    below, above = min(r, z0), min(r + 1, nz - z1)
    pieces = [cube[z0 - below : z0], cube[z0:z1], cube[z1 : z1 + above]]
    s = np.concatenate(pieces)  # the slab call's own copy (both builds)
    mask = np.zeros((z1 - z0, *shape[1:]), np.uint8)
    a = (mask, spec, "constant", below)
    b = (z0, list(shape), samp, False, True, "cpu")
    t0 = time.process_time()
    out_m = main_core._scfind_slab_sample(s, *a, carry_m, *b, True, 0)
    t1 = time.process_time()
    clip_m = main_core._scfind_block_clip(
        out_m[3], mask, RAW, "constant", ("none", 0.0), 0.0, "raw", level, True, "cpu"
    )
    t2 = time.process_time()
    out_b = _core._scfind_slab_sample(s, *a, carry_b, *b, False, 0, True)
    t3 = time.process_time()
    cl = (mask, spec, "constant", level, out_b[3], z0, list(shape), 0)
    clip_b = _core._scfind_slab_clip(*cl)
    if clip_b is None:
        again += 1
        s2 = np.concatenate(pieces)
        clip_b = _core._scfind_slab_clip(*cl, s=s2, below=below, carry=carry_b)
    t4 = time.process_time()
    assert np.array_equal(clip_m, clip_b) and np.array_equal(out_m[4], out_b[4])
    cpu["main slab"] += t1 - t0
    cpu["main clip"] += t2 - t1
    cpu["branch slab"] += t3 - t2
    cpu["branch clip"] += t4 - t3
    carry_m, carry_b = out_m[4], out_b[4]
nb = len(edges) - 1
print(
    f"cube {shape}, {nb} slabs of {chunk} planes, z {zw}: CPU s (1 thread) "
    + ", ".join(f"{k} {v:.3f}" for k, v in cpu.items())
    + f"; slab+clip main {cpu['main slab'] + cpu['main clip']:.3f} branch "
    f"{cpu['branch slab'] + cpu['branch clip']:.3f}; clips passing blocks again {again}/{nb}; "
    f"detected {int(clip_m.sum())} in the last slab; load {os.getloadavg()[0]:.1f}"
)
