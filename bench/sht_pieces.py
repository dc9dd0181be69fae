"""The Dask split SHT's task bodies with Δ joined or cut by copies (session 12's path) vs Δ in
pieces (map2leg writing one piece per m block, leg2map / leg2alm reading a list), in one
process, alternating, medians: what the pieces save per task, without the scheduler's noise.

    python bench/sht_pieces.py [--nside 1024] [--blocks 2] [--repeats 5] [--threads N]

Per layer (ring block 0 / m block 0 of ``--blocks``): ``ring_anal`` map2leg of a ring block then
the cut into m-block pieces vs map2leg(widths=...); ``m_anal`` leg2alm of the m block's pieces
joined along the rings vs the list; ``ring_synth`` leg2map of the pieces joined along m vs the
list. Prints one JSON line per layer (seconds: median, min; ratio new/old) and checks that both
give the same numbers bit for bit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import skyconv
from skyconv import sht_halves as H


def _cut_m(leg, widths):
    """Session 12's ring task: the whole Δ cut along m into C-contiguous pieces (copies)."""
    ends = np.cumsum(widths)
    return [np.ascontiguousarray(leg[:, :, e - w : e]) for w, e in zip(widths, ends)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nside", type=int, default=1024)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=None)
    a = p.parse_args()
    if a.threads:
        skyconv.set_num_threads(a.threads)
    nside, lmax = a.nside, 2 * a.nside
    mb, rb = H.m_blocks(lmax, lmax, a.blocks), H.ring_blocks(nside, a.blocks)
    widths = [len(b) for b in mb]
    rng = np.random.default_rng(0)
    maps = rng.standard_normal((1, 12 * nside**2))
    mps = [np.ascontiguousarray(maps[:, H.ring_pixels(nside, r)]) for r in rb]
    pieces = [H.map2leg(mp, nside, lmax, r, widths=widths) for mp, r in zip(mps, rb)]
    mine = [pc[0] for pc in pieces]  # m block 0's piece of every ring block
    synth = [np.ascontiguousarray(H.map2leg(mps[0], nside, lmax, rb[0]))]  # Δ of ring block 0
    synth = _cut_m(synth[0], widths)
    layers = {
        "ring_anal": (
            lambda: _cut_m(H.map2leg(mps[0], nside, lmax, rb[0]), widths),
            lambda: H.map2leg(mps[0], nside, lmax, rb[0], widths=widths),
        ),
        "m_anal": (
            lambda: H.leg2alm(np.concatenate(mine, axis=1), nside, lmax, mb[0]),
            lambda: H.leg2alm(mine, nside, lmax, mb[0]),
        ),
        "ring_synth": (
            lambda: H.leg2map(np.concatenate(synth, axis=2), nside, rb[0]),
            lambda: H.leg2map(synth, nside, rb[0]),
        ),
    }
    for name, (old, new) in layers.items():
        o, n = old(), new()  # warm-up, and the same numbers both ways
        same = (
            all(np.array_equal(x, y) for x, y in zip(o, n))
            if isinstance(o, list)
            else (np.array_equal(o, n))
        )
        del o, n
        to, tn = [], []
        for _ in range(a.repeats):
            for f, ts in ((old, to), (new, tn)):
                t0 = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t0)
        mo, mn = statistics.median(to), statistics.median(tn)
        print(
            json.dumps(
                dict(
                    layer=name,
                    nside=nside,
                    lmax=lmax,
                    blocks=a.blocks,
                    threads=skyconv.get_num_threads(),
                    old_s=round(mo, 4),
                    new_s=round(mn, 4),
                    old_min_s=round(min(to), 4),
                    new_min_s=round(min(tn), 4),
                    ratio=round(mn / mo, 3),
                    bit_identical=bool(same),
                )
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
