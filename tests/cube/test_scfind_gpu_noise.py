"""The GPU engine's SoFiA-2 MAD on the device (src/cube/scfind/cuda_mad.rs) and its one-pass
clip: noise values and masks identical to the CPU engine's (which takes the sample on the host,
src/cube/stats/sofia2.rs) in every branch of the rule: the one-sided cap binding or not, an odd
or even count kept, several count chunks, the full flux range, in-range infinities (the host
rule then decides), float32 and float64, one piece and z-slabs."""

from __future__ import annotations

import numpy as np
import pytest
from _sofia2_exact_ref import scfind

import skyconv

pytestmark = pytest.mark.gpu

KW = {"kernels_xy": (0, 3), "kernels_z": (0, 3), "threshold": 3.5, "statistic": "mad"}


def noisy(rng, shape, bias, dtype=np.float32):
    """Noise of σ = 1 with a mean of `bias` (negative: more than half the values below 0, so
    the one-sided cap of size/(2c) values binds) and one bright source."""
    c = rng.normal(size=shape) + bias
    z, y, x = (s // 2 for s in shape)
    c[z - 1 : z + 2, y - 2 : y + 3, x - 2 : x + 3] += 6.0
    return c.astype(dtype)


def both(cube, **kw):
    kw = {**KW, "return_noise": True, **kw}
    a, ra = skyconv.smooth_and_clip(cube, device="cpu", **kw)
    b, rb = skyconv.smooth_and_clip(cube, device="cuda", **kw)
    return a, ra, b, rb


def kept(cube, flux):
    """Number of values SoFiA-2's one-sided MAD of the raw cube keeps (cadence 1)."""
    v = cube.ravel()[1:]  # the walk's last slot, element 0, is left out
    inr = (v < 0) if flux == "negative" else (v > 0)
    return min(int(inr.sum()), cube.size // 2)


@pytest.mark.parametrize("shape", [(31, 37, 41), (31, 37, 40)])  # cap 23513 (odd), 22940 (even)
@pytest.mark.parametrize("bias", [-0.3, 0.3])
@pytest.mark.parametrize("flux", ["negative", "positive"])
def test_one_sided_cap_and_parity(rng, shape, bias, flux):
    cube = noisy(rng, shape, bias)
    n = kept(cube, flux)
    binds = n == cube.size // 2
    assert binds == ((bias < 0) == (flux == "negative"))  # the case is what it says
    a, ra, b, rb = both(cube, flux_range=flux)
    assert rb.rms0 == ra.rms0
    assert rb.rms == ra.rms
    np.testing.assert_array_equal(a, b)
    assert a.any()
    c, rc = skyconv.smooth_and_clip(
        cube, device="cuda", return_noise=True, flux_range=flux, _slab_planes=7, **KW
    )
    assert rc.rms == ra.rms
    np.testing.assert_array_equal(a, c)


def test_parity_of_the_kept_count_is_covered(rng):
    """The cases above keep an odd and an even number of values where the cap binds."""
    assert (31 * 37 * 41) // 2 % 2 == 1 and (31 * 37 * 40) // 2 % 2 == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_full_range_and_reference(rng, dtype):
    cube = noisy(rng, (23, 29, 33), 0.1, dtype)
    cube[5, 3:9, 4:12] = np.nan
    a, ra, b, rb = both(cube, flux_range="full")
    assert rb.rms0 == ra.rms0 and rb.rms == ra.rms
    np.testing.assert_array_equal(a, b)
    ref, rms0, rms = scfind(cube, flux_range="full", **KW)
    np.testing.assert_array_equal(b, ref)
    assert rb.rms0 == pytest.approx(rms0, rel=2e-7)


def test_cadence_two_many_chunks(rng):
    """2.1 M voxels: cadence 2, a backward walk that does not end at element 0 (size odd), the
    sample spread over hundreds of count chunks."""
    cube = noisy(rng, (13, 401, 403), -0.05)
    assert skyconv.stats.sofia2_cadence(cube.shape) == 2
    a, ra, b, rb = both(cube, kernels_xy=(0, 3), kernels_z=(0,))
    assert rb.rms0 == ra.rms0 and rb.rms == ra.rms
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("flux", ["negative", "full"])
def test_infinities_in_range_fall_back_to_the_host_rule(rng, flux):
    cube = noisy(rng, (11, 17, 19), 0.0)
    cube.flat[[37, 401, 2000]] = -np.inf
    a, ra, b, rb = both(cube, flux_range=flux, kernels_xy=(0,), kernels_z=(0,))
    assert rb.rms0 == ra.rms0 and rb.rms == ra.rms
    np.testing.assert_array_equal(a, b)
