"""Two+ Python threads each running a call whose 'engine' holds a lock across a parallel
section on skyconv's pool. mode=legacy: the old rule (lock taken on the pool worker);
mode=admitted: the new rule. Prints progress; a hang shows as no 'done' line."""
import sys, threading, time, json
from skyconv import _core
mode = sys.argv[1]; nthreads = int(sys.argv[2]); pool = int(sys.argv[3])
_core.set_num_threads(pool)
done = [0] * nthreads
def worker(i):
    for r in range(20):
        s, same, _ = _core._gpu_admission_probe(0, 64, 300, mode)
        assert s == 2016, s
        done[i] += 1
ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(nthreads)]
t0 = time.perf_counter()
for t in ts: t.start()
last = None
while any(t.is_alive() for t in ts) and time.perf_counter() - t0 < 30:
    time.sleep(1)
    if done != last:
        print(f"{time.perf_counter()-t0:5.1f} s calls done per thread {done}", flush=True); last = list(done)
alive = sum(t.is_alive() for t in ts)
print(json.dumps({"mode": mode, "threads": nthreads, "pool": pool, "done": done,
                  "hung_threads": alive, "seconds": round(time.perf_counter()-t0, 2)}), flush=True)
import os; os._exit(0)
