"""dask9: the A/B runs' totals (bench/dask_sc_profile.py JSON): Dask wall, workers' CPU, and
the task-stream thread-s of the slab calls and the clips summed over the kernels (RUNS: the
folder of the JSON files, default this one)."""

import glob
import json
import os
import sys

here = os.environ.get("RUNS", os.path.dirname(os.path.abspath(__file__)))
for tag in sys.argv[1:]:
    for b in ("main", "branch"):
        for f in sorted(glob.glob(f"{here}/dask9-{tag}-{b}-r*.json")):
            r = json.load(open(f))["runs"][0]
            kinds = {}
            for st in r["steps"]:
                for k, v in st.get("kinds", {}).items():
                    kinds[k] = kinds.get(k, 0.0) + v
            clip = kinds.get("clip_rows", 0) + kinds.get("clip_core", 0)
            core = kinds.get("slab_core", 0)
            print(
                f"{tag:>16} {b:>6} {os.path.basename(f)[-7:-5]}: Dask {r['dask_s']:6.2f} s, "
                f"workers' CPU {r['worker_cpu_s']:5.1f} s, slab_core {core:5.2f}"
                f" thread-s, clips {clip:5.2f}, spatial "
                f"{kinds.get('spatial_block', 0) + kinds.get('spatial_update', 0):5.2f}, single "
                f"{r['single_s']:.2f} s, masks equal {r['masks_equal']}"
            )
