"""dask9: one Dask clip task of the slab pass (`_clip_rows` from the candidates of 4 row
groups of a 32-plane 541² slab of the bench cube, z 15, fallback where needed), in process, CPU
ms (1 skyconv thread), at a level near and above the noise's bulk."""

import sys
import time

import numpy as np

sys.path.insert(0, "bench")
from dask_cube import _chunk

import skyconv
from skyconv._dask import cube as dc

skyconv.set_num_threads(1)
shape = (256, 541, 541)
_, x = _chunk(shape, (64, 541, 541), (1, 0, 0), 3)  # planes 64..127 of the bench cube
s = x[:47].copy()
nz = 32
r = 7
spec = ("boxcar", 0.0, 0.0, "boxcar", 15.0, False)
mask = np.zeros((nz, 541, 541), np.uint8)
yedges = np.linspace(0, 541, 5).round().astype(int).tolist()
carry = np.zeros((541, 541), np.float32)
parts = []
for y0, y1 in zip(yedges[:-1], yedges[1:]):
    p = dc._slab_core(
        mask,
        carry[y0:y1],
        [(0, 47)],
        spec,
        "constant",
        7,
        100,
        shape,
        ("backward", 7),
        False,
        True,
        "cpu",
        "candidates",
        (y0, y1),
        s,
    )
    parts.append(p)
level = 5 * 1.4826 * 0.2
read = (shape, 100, 7, [(0, 47)])


def run():
    return dc._clip_rows(
        mask,
        yedges,
        level,
        spec,
        "constant",
        ("copysign", -2.0),
        0.0,
        True,
        "cpu",
        read,
        4,
        *parts,
        s,
    )


for lev in (level, 3.0):
    level = lev
    run()
    ts = []
    for _ in range(5):
        a = time.process_time()
        run()
        ts.append(time.process_time() - a)
    print("level", lev, "clip task CPU ms", round(1e3 * np.median(ts), 1))
