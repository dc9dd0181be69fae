"""The session 9 GPU hang, reproduced without a GPU (session 10, dask-gpu).

    python dask-gpu-legacy-repro.py MODE THREADS POOL

THREADS Python threads each make 20 calls of ``_core._gpu_admission_probe(0, 64, 300, MODE)``
(an engine section around a parallel loop of 64 × 300 µs on skyconv's pool) on a POOL-thread
pool. MODE "legacy": the old rule (a per-GPU mutex taken on the pool worker running the call);
"admitted": the new one. Prints the calls done per thread; after 30 s, one JSON line (threads
still running = hung).
"""

import json
import os
import sys
import threading
import time

from skyconv import _core

mode, nthreads, pool = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
_core.set_num_threads(pool)
done = [0] * nthreads


def worker(i):
    for _ in range(20):
        s, _same, _all = _core._gpu_admission_probe(0, 64, 300, mode)
        assert s == 64 * 63 // 2, s
        done[i] += 1


ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(nthreads)]
t0 = time.perf_counter()
for t in ts:
    t.start()
last = None
while any(t.is_alive() for t in ts) and time.perf_counter() - t0 < 30:
    time.sleep(1)
    if done != last:
        print(f"{time.perf_counter() - t0:5.1f} s calls done per thread {done}", flush=True)
        last = list(done)
alive = sum(t.is_alive() for t in ts)
seconds = round(time.perf_counter() - t0, 2)
print(json.dumps({"mode": mode, "threads": nthreads, "pool": pool, "done": done,
                  "hung_threads": alive, "seconds": seconds}), flush=True)  # fmt: skip
os._exit(0)  # hung daemon threads would block a normal exit
