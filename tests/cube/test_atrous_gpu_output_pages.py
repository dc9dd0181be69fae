"""The GPU à trous maps its output's pages on a helper thread while the device iterates
(issue 22's transfer work): results stay identical whatever skyconv's thread count, and a
one-thread pool does not deadlock (the call runs in a child process with a time limit, so a
hang fails the test instead of stopping the suite)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

CHILD = """
import sys, numpy as np, skyconv
x = np.random.default_rng(9).standard_normal((48, 64, 80))
x[10, 20, 30] += 40
outs = []
for n in (1, 2, 4):
    skyconv.set_num_threads(n)
    outs.append(skyconv.atrous_denoise(x, device="cuda"))
cpu = skyconv.atrous_denoise(x, device="cpu")
np.savez(sys.argv[1], *[o.data for o in outs], cpu=cpu.data)
"""


@pytest.mark.gpu
def test_gpu_atrous_output_pages_any_thread_count(tmp_path):
    out = tmp_path / "r.npz"
    subprocess.run(
        [sys.executable, "-c", CHILD, str(out)],
        env=dict(os.environ),
        check=True,
        timeout=300,
    )
    with np.load(out) as z:
        one, two, four, cpu = z["arr_0"], z["arr_1"], z["arr_2"], z["cpu"]
    assert np.array_equal(one, two) and np.array_equal(one, four)
    # the same bound against the CPU engine as test_atrous.py's test_gpu_equals_cpu
    assert np.max(np.abs(one - cpu)) <= 1e-5 * np.max(np.abs(cpu))
