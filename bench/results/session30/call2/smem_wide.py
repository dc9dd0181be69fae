"""Session 30 call 2 (session 29 call 1's, rerun after fill_halo; issue 22): the inner-axis
whole kernel (correlate_whole<C>) along z and y at à trous's wide steps with 32 columns a
block, where the axis and its halo take the tile past the 48 KB a launch gets without opting
in (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES), against the 16 or 8 the library takes
within 48 KB. Same bits checked; times against the floor.

    python3 bench/results/session30/call2/smem_wide.py
"""

import functools
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/../../../.."
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
from filters_tiles import launch, modules, timeit  # noqa: E402

B3 = np.array([1, 4, 6, 4, 1]) / 16.0


def main():
    import cupy as cp

    mods = modules(cp, open(os.path.join(ROOT, "kernels", "filters.cu")).read())
    rng = np.random.default_rng(1)
    big = cp.asarray(rng.standard_normal((256, 512, 512), dtype=np.float32))
    dst = cp.empty_like(big)
    copy_ms = timeit(cp, lambda: dst.__setitem__(Ellipsis, big), 20)
    floor = copy_ms  # one read + one write, as the copy
    print(f"floor {floor * 1e3:.0f} us")
    b3 = cp.asarray(B3)
    for axis, an in ((0, "z"), (1, "y")):
        n = big.shape[axis]
        for step in (8, 16, 32):
            halo, off = 4 * step, -2 * step
            ref = None
            row = []
            for c in (32, 16, 8):
                name = f"correlate_whole{c}_f32"
                smem = 48 + (n + halo) * c * 4
                f = mods[np.float32].get_function(name)
                if smem > 48 * 1024:
                    f.max_dynamic_shared_size_bytes = smem
                call = functools.partial(launch, cp, mods, big, axis, b3, off, step, "mirror",
                                         0.0, name, smem, out=dst)  # fmt: skip
                ms = timeit(cp, call, 20)
                got = cp.asnumpy(dst[:8])
                same = "" if ref is None else (" =" if np.array_equal(ref, got) else " DIFF")
                ref = got if ref is None else ref
                row.append(f"C{c} {smem / 1024:5.1f}KB {ms * 1e3:6.1f}us {ms / floor:4.2f}{same}")
            print(f"{an} step {step:2d}: " + " | ".join(row))


if __name__ == "__main__":
    main()
