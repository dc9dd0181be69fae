"""The CUDA gathers cut into paced launches (issue 17: Ctrl-C within 0.5 s however long a
gather is; src/grid/cuda/gather.rs `paced`): a call over many more targets than the first piece
(16384 targets, or 1024 runs of 16 for the spectral gather) gives the CPU engine's sums, with
one and with several blocks of channels (the previous block's download then overlaps the next
block's first piece), finishing on the device (`grid`) and accumulating (`Gridder`)."""

from __future__ import annotations

import numpy as np
import pytest

import skyconv
from skyconv import Gridder, HealpixTarget

from _refs import rel_err

#: HEALPix nside 128: 196608 targets, three pieces or more of each gather.
NSIDE = 128


@pytest.mark.gpu
@pytest.mark.parametrize("nchan, weights", [(1, None), (300, None), (300, "full")])
def test_a_gather_in_many_pieces_matches_the_cpu(rng, nchan, weights):
    n = 100_000
    lon = rng.uniform(0, 360, n)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    shape = (n, nchan) if nchan > 1 else (n,)
    data = rng.normal(size=shape) + 2
    data[::97] = np.nan  # some samples drop out of some sums
    w = rng.uniform(0.5, 2.0, shape) if weights == "full" else None
    target = HealpixTarget(NSIDE)
    kw = {"kernel_params": 0.4, "weights": w, "dtype": np.float64}
    cpu = skyconv.grid(lon, lat, data, target, device="cpu", **kw)
    gpu = skyconv.grid(lon, lat, data, target, device="cuda", **kw)
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(gpu, name), getattr(cpu, name)) <= 1e-12, name
    assert np.isfinite(cpu.cube).mean() > 0.9  # most targets are reached
    g = Gridder(target, kernel_params=0.4, dtype=np.float64, device="cuda")
    half = n // 2
    g.grid(lon[:half], lat[:half], data[:half], weights=None if w is None else w[:half])
    g.grid(lon[half:], lat[half:], data[half:], weights=None if w is None else w[half:])
    acc = g.result()
    for name in ("cube", "weights", "unweighted"):
        assert rel_err(getattr(acc, name), getattr(cpu, name)) <= 1e-12, name
