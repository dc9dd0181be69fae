"""dask9: one slab call and its clip, 1 skyconv thread (dask8's slab: 32 planes of 541², z = 15,
halo 7 below + 8 above, xy 0), median CPU time of 7 calls. Run once per build (PYTHONPATH picks it):
    python dask9-slabcall.py main|branch
main: the slab call keeps W, the clip reads it (`_scfind_block_clip`, "raw");
branch: the slab call keeps the clip candidates, the clip decides from them
(`_scfind_slab_clip`), also with the spectral pass again over every block (level 0 -> all
blocks, the worst case of the fallback, with the halo copy it needs)."""

import os
import sys
import time

import numpy as np

import skyconv
from skyconv import _core

skyconv.set_num_threads(1)
which = sys.argv[1]
rng = np.random.default_rng(5)
S = rng.standard_normal((47, 541, 541)).astype(np.float32)
mask = np.zeros((32, 541, 541), np.uint8)
carry = rng.standard_normal((541, 541)).astype(np.float32) * 0.25
spec = ("boxcar", 0.0, 0.0, "boxcar", 15.0, False)
pieces = [S[:7].copy(), S[7:39].copy(), S[39:].copy()]
args = (mask, spec, "constant", 7, carry, 100, [256, 541, 541], ("backward", 7), False, True, "cpu")


def t(f, n=7):
    """Median CPU ms of the process (skyconv's one pool thread and this one) over n calls."""
    f()
    out = []
    for _ in range(n):
        a = time.process_time()
        f()
        out.append(time.process_time() - a)
    return 1e3 * float(np.median(out))


res = {"concat": t(lambda: np.concatenate(pieces))}
res["slab keep=nothing"] = t(lambda: _core._scfind_slab_sample(S, *args, False, 0))
w = _core._scfind_slab_sample(S, *args, True, 0)[3]
level = 5.0 * 1.4826 * float(np.median(np.abs(w)))  # threshold 5 x the noise of W
RAW = ("gaussian", 0.0, 0.0, "none", 0.0, False)
if which == "main":
    res["slab keep=W"] = t(lambda: _core._scfind_slab_sample(S, *args, True, 0))
    res["clip of W"] = t(
        lambda: _core._scfind_block_clip(
            w, mask, RAW, "constant", ("none", 0.0), 0.0, "raw", level, True, "cpu"
        )
    )
else:
    res["slab keep=candidates"] = t(lambda: _core._scfind_slab_sample(S, *args, False, 0, True))
    c = _core._scfind_slab_sample(S, *args, False, 0, True)[3]
    res["candidates held (KB)"] = sum(a.nbytes for a in c) / 1e3
    cl = (mask, spec, "constant", level, c, 100, [256, 541, 541])
    got = _core._scfind_slab_clip(*cl)
    want = _core._scfind_block_clip(
        w, mask, RAW, "constant", ("none", 0.0), 0.0, "raw", level, True, "cpu"
    )
    assert got is not None and np.array_equal(got, want)
    res["clip from candidates"] = t(lambda: _core._scfind_slab_clip(*cl))
    cl0 = (mask, spec, "constant", 0.0, c, 100, [256, 541, 541])
    assert _core._scfind_slab_clip(*cl0) is None

    def again():
        s = np.concatenate(pieces)
        return _core._scfind_slab_clip(*cl0, s=s, below=7, carry=carry)

    want0 = _core._scfind_block_clip(
        w, mask, RAW, "constant", ("none", 0.0), 0.0, "raw", 0.0, True, "cpu"
    )
    assert np.array_equal(again(), want0)
    res["clip, every block again (level 0, incl. concat)"] = t(again)
load = os.getloadavg()[0]
print(which, "CPU ms", {k: round(v, 1) for k, v in res.items()}, "load", round(load, 2))
