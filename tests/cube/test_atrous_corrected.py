"""variant="corrected" still gives the results skyconv gave before variant="duchamp" existed.

atrous_corrected_20261126.npz holds (as float32) the reconstructions and iteration counts that
skyconv.atrous_denoise returned on the inputs below, recorded with the build of 2026-11-26 before
the DUCHAMP-exact default was added (commit 45a1b81).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import skyconv

from _refs import rel_err

RECORDED = Path(__file__).with_name("atrous_corrected_20261126.npz")


def cases():
    """The recorded inputs: noise, compact sources, 4% NaN holes, NaN edges on the maps."""
    r = np.random.default_rng(20261126)
    out = {}
    for name, shape, dim, kw in [
        ("d1_b3", (67, 4, 3), 1, {}),
        ("d2_b3", (2, 37, 45), 2, {}),
        (
            "d2_tri_smax",
            (2, 41, 33),
            2,
            {"filter": "triangle", "scale_max": 2, "convergence": 0.02},
        ),
        ("d2_haar", (35, 39), 2, {"filter": "haar", "snr_recon": 3.0}),
        ("d3_b3", (17, 19, 18), 3, {}),
    ]:
        x = r.normal(size=shape)
        g = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
        for _ in range(4):
            c = [r.uniform(0, n) for n in shape]
            x += 7.0 * np.exp(-sum((gi - ci) ** 2 for gi, ci in zip(g, c)) / (2 * 1.8**2))
        x[r.random(shape) < 0.04] = np.nan
        if dim == 2:
            x[..., :2, :] = np.nan
            x[..., :, -1] = np.nan
        out[name] = (x, dim, kw)
    return out


CASES = cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_corrected_equals_recorded(name):
    x, dim, kw = CASES[name]
    rec = np.load(RECORDED)
    res = skyconv.atrous_denoise(x, dim=dim, device="cpu", variant="corrected", **kw)
    # float32 storage of the recorded values: 6e-8 relative per value
    assert rel_err(res.data, rec[name + "_out"].astype(np.float64)) <= 2e-7
    np.testing.assert_array_equal(np.asarray(res.iterations), rec[name + "_it"])


@pytest.mark.parametrize("name", ["d2_b3", "d2_tri_smax", "d2_haar"])
def test_duchamp_default_differs_in_2d(name):
    """The default changed for dim=2 (the recorded results are not DUCHAMP's)."""
    x, dim, kw = CASES[name]
    rec = np.load(RECORDED)
    res = skyconv.atrous_denoise(x, dim=dim, device="cpu", **kw)
    assert rel_err(res.data, rec[name + "_out"].astype(np.float64)) > 1e-3
