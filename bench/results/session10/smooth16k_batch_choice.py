"""What ``method="auto"`` takes for smooth.beams100's batch (100 beams, 4'-6', nside 2048) and
for its single calls, with the cost model's predicted times (session 10, smooth16k). On the GPU
machine: bash bench/gpu/run.sh cmd python3 bench/results/session10/smooth16k_batch_choice.py"""

import json
import sys

import numpy as np

from skyconv.smooth import batch as sb
from skyconv.smooth import cost as sm_cost
from skyconv.smooth.auto import choose

device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
nside, n = 2048, 100
beams = sb.beams(np.radians(np.linspace(4.0, 6.0, n) / 60), None, 3 * nside - 1, 1e-5)
cost = sm_cost.model(device)
reach = [float(b.profile[0][-1]) for b in beams]
out = {
    "device": device,
    "harmonic_one_s": cost.harmonic_time(nside, 3 * nside - 1, 0)[0],
    "ring_one_s": {
        f"{a:.1f}'": cost.ring_time(nside, reach[i])[0] for a, i in ((4, 0), (5, 50), (6, 99))
    },
    "harmonic_batch_s": sb.batch_harmonic_time(cost, nside, 3 * nside - 1, 0, n),
    "ring_batch_s": sb.ring_batch_time(cost, nside, reach),
}
kind, each = sb.choose_batch(beams, nside, 0, device)
out["batch"] = kind if each is None else {m: each.count(m) for m in set(each)}
out["single"] = {
    f"{4 + 2 * i / (n - 1):.2f}'": choose(beams[i], nside, 0, device)[0] for i in (5, 25, 55, 95)
}
print(json.dumps(out, indent=1))
