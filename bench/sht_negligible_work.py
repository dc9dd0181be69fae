"""How much Legendre work the CPU SHT's negligibility threshold leaves (issue 22, session 11).

    python -m bench.sht_negligible_work --nside 512 [--thresholds 400 100 60]

The CPU engine runs the recurrences over blocks of 8 ring pairs and visits (accumulates) a
block's degrees from the first l where one of its lanes reaches 2^-T (the most equatorward
lane, the largest sin θ, gets there first). For each threshold T this counts the visited
(block, degree) pairs, summed over m, from log2 |λ_lm| on the block's last lane, followed
along l with the ratio recurrence (λ_l / λ_{l-1}; monotonic growth in the evanescent zone,
where the crossing happens). The kernel's arithmetic is proportional to this count. Also
counts the same with ducc0's documented per-ring limit m ≤ lmax sin θ + max(100, lmax/100).
"""

from __future__ import annotations

import argparse

import numpy as np


def visited(nside: int, thresholds: list[int]) -> dict[int, tuple[int, int]]:
    lmax = 2 * nside
    i = np.arange(1, 2 * nside + 1)
    z = np.where(i < nside, 1 - i**2 / (3.0 * nside**2), 4.0 / 3 - 2.0 * i / (3 * nside))
    blk = np.arange(7, 2 * nside, 8)  # the last lane of each block of 8 pairs
    x = z[blk]
    s = np.sqrt((1 - x) * (1 + x))
    ms = np.arange(lmax + 1)
    mf = ms[:, None].astype(float)
    k = np.arange(1, lmax + 1)
    lp = np.concatenate([[0.0], np.cumsum(np.log2((2 * k - 1) / (2 * k)))])
    log2_mm = 0.5 * (np.log2((2 * ms + 1) / (4 * np.pi)) + lp)[:, None] + mf * np.log2(s)
    n = (lmax + 1 - ms)[:, None]
    mcut = ms[:, None] <= np.minimum(lmax * s + max(100.0, 0.01 * lmax), lmax)[None, :]
    out = {}
    for t in thresholds:
        lg = log2_mm.copy()
        cross = np.where(lg >= -t, 0, -1)
        r = np.ones_like(lg)
        for deg in range(1, lmax + 1):
            lf = float(deg)
            with np.errstate(all="ignore"):
                a = np.sqrt((4 * lf * lf - 1) / (lf * lf - mf * mf))
                c = np.sqrt(
                    (4 * lf * lf - 1)
                    * ((lf - 1) ** 2 - mf * mf)
                    / ((lf * lf - mf * mf) * (4 * (lf - 1) ** 2 - 1))
                )
                rn = np.where(ms[:, None] == deg - 1, a * x, a * x - c / r)
            live = ms[:, None] <= deg - 1
            r = np.where(live, rn, 1.0)
            lg += np.where(live, np.log2(np.abs(r) + 1e-300), 0.0)
            new = live & (cross < 0) & (lg >= -t)
            cross[new] = (deg - mf.astype(int) + np.zeros_like(cross))[new]
        work = np.where(cross >= 0, n - cross, 0)
        out[t] = (int(work.sum()), int(np.where(mcut, work, 0).sum()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nside", type=int, nargs="+", default=[512])
    ap.add_argument("--thresholds", type=int, nargs="+", default=[400, 100, 60])
    a = ap.parse_args()
    for ns in a.nside:
        res = visited(ns, a.thresholds)
        base = res[a.thresholds[0]][0]
        for t, (w, wc) in res.items():
            print(
                f"nside {ns} T {t}: visited block-degrees {w} ({w / base:.3f} of T"
                f" {a.thresholds[0]}); with ducc0's m limit {wc / base:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
