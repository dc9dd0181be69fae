"""Summary of dask11's A/B runs (bench/results/session20/dask11-ab-*.json): per run the Dask wall,
the tasks, and the medians over the slab-pass kernels (those that ran slab_core tasks, kernel 1
excluded) of the kernel's tasks, wall, client build and the seconds no task ran anywhere, and
the median noise → next kernel's first task."""

import glob
import json
import statistics as st
import sys

med = st.median
for path in sorted(glob.glob(sys.argv[1] if len(sys.argv) > 1 else
                             "bench/results/session20/dask11-ab-*.json")):  # fmt: skip
    run = json.load(open(path))["runs"][0]
    ks = [s for s in run["steps"][1:] if s["tasks_run"].get("slab_core")]
    nn = [b["noise_to_next"] for b in run["barriers"] if b.get("noise_to_next") is not None]
    name = path.rsplit("-ab-", 1)[-1][:-5]
    print(f"{name:26s} wall {run['dask_s']:6.2f} tasks {run['tasks_run']:6d} "
          f"slab kernels {len(ks):2d}: tasks {med(sum(s['tasks_run'].values()) for s in ks):6.0f} "
          f"wall {med(s['wall_s'] for s in ks):5.2f} "
          f"build {med(s['client_build_s'] for s in ks):5.3f} "
          f"idle {med(s['all_idle_s'] for s in ks):5.2f} n->next {med(nn) if nn else 0:5.3f} "
          f"cpu {run['worker_cpu_s']:5.1f} masks {run['masks_equal']}")  # fmt: skip
