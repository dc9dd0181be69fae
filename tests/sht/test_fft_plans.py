"""The CUDA SHT's cuFFT plans depend on the FFT length only (issue 20): chunks of any row count
run through a length's shared plans (full batches plus the remainder's binary digits), so a
transform at a new chunk size or a new call adds no plan per chunk, and results do not change.

Marked ``gpu``: they run on a machine with a CUDA GPU.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

import skyconv
from skyconv import alm2map, map2alm

from _refs import rel_l2

pytestmark = pytest.mark.gpu

# src/backend/cuda/fft.rs: ROWS_BYTES and MAX_BATCH
ROWS_BYTES = 32 << 20
MAX_BATCH = 1024


def full_batch(n: int) -> int:
    b = min(max(ROWS_BYTES // (16 * n), 1), MAX_BATCH)
    return 1 << (b.bit_length() - 1)


def random_alm(rng, lmax, ncomp):
    n = skyconv.Alm.getsize(lmax)
    a = rng.standard_normal((ncomp, n)) + 1j * rng.standard_normal((ncomp, n))
    a[:, : lmax + 1] = a[:, : lmax + 1].real
    if ncomp == 3:
        lidx = np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])
        a[1:, lidx < 2] = 0
    return a


def plans(trace):
    """(kind, n) -> batches of the cuFFT plans created in a set-up trace."""
    out = defaultdict(list)
    for e in trace:
        if e["stage"] != "cufft plan":
            continue
        kind, n, batch = e["detail"].split()
        out[(kind, int(n.split("=")[1]))].append(int(batch.split("=")[1]))
    return out


def test_chunk_sizes_share_the_length_plans(rng, monkeypatch):
    """Eight chunk sizes (6..288 rows per chunk, polar Bluestein batches of as many job counts)
    create at most log2(full batch) + 1 plans per (kind, length), each once, every batch a power
    of two (per chunk, the old plans took the chunk's row or job count: 6 rows at 1 pair); the
    results equal the CPU's."""
    nside, lmax = 40, 100  # belt length 160: no other test of the process uses it
    a = random_alm(rng, lmax, 3)
    m = rng.standard_normal((3, 12 * nside**2))
    cpu_map = alm2map(a, nside, lmax=lmax, device="cpu")
    cpu_alm = map2alm(m, lmax=lmax, iter=0, device="cpu")
    skyconv.setup_trace(clear=True)
    for pairs in (1, 2, 3, 5, 7, 11, 12, 48):
        monkeypatch.setenv("SKYCONV_SHT_CHUNK_PAIRS", str(pairs))
        assert rel_l2(alm2map(a, nside, lmax=lmax, device="cuda"), cpu_map) <= 1e-12
        assert rel_l2(map2alm(m, lmax=lmax, iter=0, device="cuda"), cpu_alm) <= 1e-12
    made = plans(skyconv.setup_trace(clear=True))
    for (kind, n), batches in made.items():
        assert len(batches) == len(set(batches)), (kind, n, batches)
        assert all(b & (b - 1) == 0 and b <= full_batch(n) for b in batches), (kind, n, batches)
        assert len(batches) <= full_batch(n).bit_length(), (kind, n, batches)
    assert made, "no cuFFT plan was traced"


def test_rows_beyond_a_full_batch(rng):
    """nside 1024, T, Q, U (3 components): the chunks' equatorial rows (length 4096, a full
    batch of 512 rows) span several full executions and a remainder; GPU == CPU to 1e-12 both
    ways, and a second call creates no plan."""
    nside, lmax = 1024, 1024
    a = random_alm(rng, lmax, 3)
    cpu = alm2map(a, nside, lmax=lmax, device="cpu")
    gpu = alm2map(a, nside, lmax=lmax, device="cuda")
    assert rel_l2(gpu, cpu) <= 1e-12
    back_cpu = map2alm(cpu, lmax=lmax, iter=0, device="cpu")
    back_gpu = map2alm(cpu, lmax=lmax, iter=0, device="cuda")
    assert rel_l2(back_gpu, back_cpu) <= 1e-12
    skyconv.setup_trace(clear=True)
    alm2map(a, nside, lmax=lmax, device="cuda")
    map2alm(cpu, lmax=lmax, iter=0, device="cuda")
    assert plans(skyconv.setup_trace(clear=True)) == {}
