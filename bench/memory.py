"""Peak memory of ``smooth_and_clip`` in a fresh process (issue 22: peak RSS ≤ cube + mask +
10%).

    python -m bench.memory                       # 64 MB and 256 MB cubes, the CPU engine
    python -m bench.memory --shape 64 512 512 --device cpu --json out.json

A child interpreter imports numpy and skyconv, fills a float32 cube plane by plane (no
temporaries), resets the kernel's peak-RSS mark (``/proc/self/clear_refs``), records its
resident set (``rss_before``), runs the default 12-kernel ``smooth_and_clip`` and reads the
peak resident set since the reset (``VmHWM``; ``ru_maxrss`` where that is not available). The
call's own memory is ``peak - rss_before``: the output mask (one byte a voxel, which the target
counts) plus skyconv's working buffers. Reported: both in MB and as a share of the cube, and
the target's verdict, ``peak - rss_before <= mask + 0.10 * (cube + mask)``. ``measure`` is what
the test (tests/cube/test_scfind_memory.py) calls with a small cube and a loose bound.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
import skyconv

shape = tuple(int(v) for v in sys.argv[1:4])
device = sys.argv[4]
threads = int(sys.argv[5])
if threads:
    skyconv.set_num_threads(threads)
cube = np.empty(shape, np.float32)
rng = np.random.default_rng(6)
for plane in cube:
    rng.standard_normal(plane.shape, dtype=np.float32, out=plane)
cube[shape[0] // 2, shape[1] // 2, shape[2] // 2] += 50  # one source: detections happen


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def hwm():
    # the peak resident set since the last reset (VmHWM), else ru_maxrss (process lifetime)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# warm the allocator and the thread pool on a tiny cube first (not what is measured)
skyconv.smooth_and_clip(rng.standard_normal((8, 16, 16), dtype=np.float32), device=device)
try:  # reset the peak to the current resident set: earlier peaks must not count
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    pass
before = rss()
peak_before = hwm()
t0 = time.perf_counter()
mask = skyconv.smooth_and_clip(cube, device=device)
seconds = time.perf_counter() - t0
peak = hwm()
print(json.dumps({"shape": list(shape), "cube_bytes": cube.nbytes, "mask_bytes": mask.nbytes,
                  "rss_before": before, "peak_before": peak_before, "peak": peak,
                  "seconds": seconds, "detected": int(mask.sum())}))
"""


def measure(shape, device: str = "cpu", threads: int = 0, timeout: float = 1800) -> dict:
    """Run the child for ``shape``; returns its numbers plus ``call_bytes`` (peak − RSS before
    the call), ``allowed_bytes`` (mask + 10% of cube + mask) and ``meets_target``.

    Raises RuntimeError with the child's stderr when it fails.
    """
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *(str(int(n)) for n in shape), device, str(int(threads))],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory child failed: {proc.stderr.strip()[-2000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    if r["peak"] < r["peak_before"]:  # ru_maxrss never decreases; defensive
        raise RuntimeError("ru_maxrss went down")
    r["call_bytes"] = max(0, r["peak"] - r["rss_before"])
    r["allowed_bytes"] = r["mask_bytes"] + 0.10 * (r["cube_bytes"] + r["mask_bytes"])
    r["meets_target"] = r["call_bytes"] <= r["allowed_bytes"]
    r["device"] = device
    return r


def describe(r: dict) -> str:
    """One line: sizes in MB and the call's memory as multiples of the cube."""
    mb = 1 << 20
    cube = r["cube_bytes"]
    return (
        f"{'x'.join(map(str, r['shape']))} float32 ({cube / mb:.0f} MB) on {r['device']}: "
        f"{r['seconds']:.2f} s, call's memory {r['call_bytes'] / mb:.0f} MB = "
        f"{r['call_bytes'] / cube:.2f} x cube (mask {r['mask_bytes'] / mb:.0f} MB; target "
        f"<= {r['allowed_bytes'] / mb:.0f} MB: {'met' if r['meets_target'] else 'NOT met'})"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.split("\n")[0])
    p.add_argument("--shape", nargs=3, type=int, action="append", metavar=("Z", "Y", "X"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="skyconv threads (0: default)")
    p.add_argument("--json", help="write every number to this file")
    args = p.parse_args(argv)
    shapes = args.shape or [(64, 512, 512), (256, 512, 512)]
    out = []
    for shape in shapes:
        r = measure(shape, args.device, args.threads)
        print(describe(r), flush=True)
        out.append(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if all(r["meets_target"] for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
