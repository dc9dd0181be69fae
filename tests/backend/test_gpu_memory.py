"""Out of GPU memory (issue 17): every GPU entry point either cuts its work to the memory it
may use, or raises ``skyconv.GpuMemoryError`` (a ``MemoryError``) that says how much it asked
for — never a CUDA error, an abort or a wrong answer.

Each entry point runs in a child process whose GPU memory budget is forced down with
``SKYCONV_GPU_MEMORY_LIMIT`` (bytes): small inputs, and a budget far below what they need at
once. A result must then agree with the CPU engine; an error must be a GpuMemoryError naming
bytes or the budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

#: The forced budgets (bytes): a few rows of the inputs, and almost nothing.
BUDGETS = [1 << 16, 64]

CALLS = {
    "gaussian_filter1d": "skyconv.filters.gaussian_filter1d(X, 3.0, axis=0, device=dev)",
    "correlate1d_axis1": "skyconv.filters.correlate1d(X, np.ones(9), axis=1, device=dev)",
    "chain": "skyconv.filters.chain(X, [skyconv.filters.Gaussian(2.0, axis=0), "
    "skyconv.filters.Gaussian(2.0, axis=1)], device=dev)",
    "smooth_and_clip": "skyconv.smooth_and_clip(C, kernels_xy=(0, 3), kernels_z=(0, 3), "
    "device=dev)",
    "atrous_denoise": "skyconv.atrous_denoise(C, dim=3, device=dev).data",
    "grid": "skyconv.grid(LON, LAT, D, skyconv.HealpixTarget(32), kernel_params=2.0, "
    "device=dev).cube",
    "alm2map": "skyconv.alm2map(ALM, 64, device=dev)",
    "map2alm": "skyconv.map2alm(M, lmax=127, device=dev)",
    "smooth_ring": "skyconv.smooth_map(M, fwhm=np.radians(3), method='ring', device=dev)",
    "smooth_harmonic": "skyconv.smooth_map(M, fwhm=np.radians(3), method='harmonic', device=dev)",
}

CHILD = """
import json, sys
import numpy as np
import skyconv

rng = np.random.default_rng(3)
X = rng.standard_normal((300, 200)).astype(np.float32)
C = rng.standard_normal((24, 40, 40)).astype(np.float32)
LON, LAT = rng.uniform(0, 30, 5000), rng.uniform(-15, 15, 5000)
D = rng.standard_normal((5000, 3)).astype(np.float32)
M = rng.standard_normal(12 * 64**2)
ALM = skyconv.map2alm(M, lmax=127, device="cpu")
expr = sys.argv[1]
ref = np.asarray(eval(expr, {**globals(), "dev": "cpu"}))
try:
    got = np.asarray(eval(expr, {**globals(), "dev": "cuda"}))
except BaseException as e:  # noqa: BLE001 (reported to the parent)
    print(json.dumps({"raised": type(e).__name__, "mro": [k.__name__ for k in type(e).__mro__],
                      "message": str(e)}))
else:
    if got.dtype.kind in "biu":
        err, scale = float(np.mean(got != ref)), 1.0
    else:
        err = float(np.nanmax(np.abs(got.astype(float) - ref.astype(float))))
        scale = float(np.nanmax(np.abs(ref.astype(float))))
    print(json.dumps({"err": err, "scale": scale}))
"""


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_small_gpu_budget_chunks_or_raises_gpu_memory_error(name, budget):
    env = {**os.environ, "SKYCONV_GPU_MEMORY_LIMIT": str(budget)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, CALLS[name]],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = out.stdout.strip().splitlines()
    assert out.returncode == 0 and lines, f"{name}: exit {out.returncode}: {out.stderr[-800:]}"
    rec = json.loads(lines[-1])
    if "raised" in rec:
        assert rec["raised"] == "GpuMemoryError", rec
        assert "MemoryError" in rec["mro"] and "SkyconvError" in rec["mro"], rec
        assert any(w in rec["message"] for w in ("bytes", "budget", "iB")), rec
    else:
        assert rec["err"] <= 1e-3 * rec["scale"], f"{name} with a {budget}-byte budget: {rec}"


def test_an_allocation_past_the_card_names_its_bytes():
    """A GPU call whose device buffers alone exceed the card's total memory (the map of an
    alm2map, kept on the device, at an nside whose map needs more than the card; the host has
    the memory for it only on large machines, so the host refusal is accepted too)."""
    import numpy as np

    import skyconv

    total = skyconv.backend_info()["cuda"]["total_memory_bytes"]
    nside = 1 << int(np.ceil(np.log2(np.sqrt(total / 8 / 12) * 1.05)))
    alm = np.zeros(skyconv.sht.Alm.getsize(8), complex)
    alm[0] = 1.0
    with pytest.raises(MemoryError) as info:
        skyconv.alm2map(alm, nside, lmax=8, device="cuda")
    assert isinstance(info.value, skyconv.SkyconvError)
    assert "bytes" in str(info.value), str(info.value)


POOL_CHILD = """
import numpy as np
import skyconv

x = np.random.default_rng(2).standard_normal((40, 64, 64)).astype(np.float32)
ref = skyconv.atrous_denoise(x, device="cpu").data
try:
    runs = [skyconv.atrous_denoise(x, device="cuda").data for _ in range(3)]
except skyconv.SkyconvError as e:
    print(type(e).__name__, "|", e)
else:
    same = all(np.array_equal(r, runs[0]) for r in runs)
    err = float(np.max(np.abs(runs[0] - ref)) / np.max(np.abs(ref)))
    print("ok", same, err <= 1e-5)
"""


@pytest.mark.parametrize(
    "keep, expect",
    [
        (None, "ok True True"),
        ("0", "ok True True"),
        ("64", "ok True True"),
        ("lots", "ArgumentError"),
    ],
)
def test_the_device_pool_setting(keep, expect):
    """SKYCONV_GPU_POOL_MB (MiB of freed GPU memory kept for the next calls, read when the
    process opens the GPU): any whole number gives the same results as the CPU engine, call
    after call; anything else is an ArgumentError naming the variable."""
    env = dict(os.environ)
    env.pop("SKYCONV_GPU_POOL_MB", None)
    if keep is not None:
        env["SKYCONV_GPU_POOL_MB"] = keep
    out = subprocess.run([sys.executable, "-c", POOL_CHILD], capture_output=True, text=True,
                         env=env, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-800:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith(expect), line
    if keep == "lots":
        assert "SKYCONV_GPU_POOL_MB" in line, line
