"""skyconv.smooth_and_clip's default (precision="sofia2", spatial="boxcar") against the plain
reference of SoFiA-2 2.5.1's rules in _sofia2_exact_ref.py: masks identical voxel for voxel,
noise values equal to float32 rounding; and the GPU engine (one piece and slabbed) identical to
the CPU engine."""

from __future__ import annotations

import numpy as np
import pytest
from _sofia2_exact_ref import FWHM_CONST, boxcar_rule, cadence, scfind

import skyconv

NOISE_RTOL = 2e-7  # about one float32 rounding


def make_cube(rng, shape=(23, 29, 31), dtype=np.float32, nan=True, bias=0.0, rising=False):
    """Noise (σ = 1, or rising along z) with extended sources, NaN blocks and a NaN channel."""
    nz = shape[0]
    sig = np.linspace(0.7, 1.6, nz)[:, None, None] if rising else 1.0
    c = rng.normal(size=shape) * sig + bias
    z, y, x = np.indices(shape)
    for z0, y0, x0, sz, sxy, amp in [
        (0.3, 0.3, 0.4, 2.0, 2.0, 1.5),
        (0.7, 0.7, 0.6, 3.0, 3.0, 0.7),
        (0.2, 0.8, 0.2, 1.0, 1.0, 3.0),
    ]:
        c += amp * np.exp(
            -0.5
            * (
                ((z - z0 * nz) / sz) ** 2
                + ((y - y0 * shape[1]) / sxy) ** 2
                + ((x - x0 * shape[2]) / sxy) ** 2
            )
        )
    if nan:
        c[nz // 3, 2:9, 3:11] = np.nan  # a NaN block
        c[nz // 2] = np.nan  # a NaN channel
        c[:, 5, -1] = np.nan  # a NaN spectrum
    return c.astype(dtype)


def run(cube, **kw):
    return skyconv.smooth_and_clip(cube, device="cpu", return_noise=True, **kw)


def check(cube, **kw):
    ref, rms0, rms = scfind(cube, **kw)
    got, rep = run(cube, **kw)
    assert rep.rms0 == pytest.approx(rms0, rel=NOISE_RTOL)
    np.testing.assert_allclose(rep.rms, rms, rtol=NOISE_RTOL)
    diff = int((got != ref).sum())
    assert diff == 0, f"{diff} voxels differ of {int(ref.sum())} in SoFiA-2's mask"
    assert ref.sum() > 0
    return got, rep


# ------------------------------------------------------------------ the boxcar rule


def test_boxcar_rule_reference_examples():
    # REFERENCE.md / issue 16: 8 px -> 2 x 6, 10 px -> 3 x 5, 15 px -> 4 x 6
    assert boxcar_rule(8 / FWHM_CONST) == (2, 6)
    assert boxcar_rule(10 / FWHM_CONST) == (3, 5)
    assert boxcar_rule(15 / FWHM_CONST) == (4, 6)


def _closest_sigma_rule(sigma):
    best = None
    for n in range(3, 7):
        w = np.sqrt(12 * sigma * sigma / n + 1)
        r = max(0, int(np.round((w - 1) / 2)))
        err = abs(np.sqrt(n * ((2 * r + 1) ** 2 - 1) / 12) - sigma)
        if best is None or err < best[2]:
            best = (r, n, err)
    return best[:2]


def test_boxcar_rule_agrees_with_closest_sigma_only_sometimes():
    for fwhm in (3.0, 6.0):
        assert boxcar_rule(fwhm / FWHM_CONST) == _closest_sigma_rule(fwhm / FWHM_CONST)
    fwhms = np.round(np.arange(1.0, 30.01, 0.1), 1)
    differ = sum(boxcar_rule(f / FWHM_CONST) != _closest_sigma_rule(f / FWHM_CONST) for f in fwhms)
    assert differ == 77  # REFERENCE.md: the rules differ at 77 of 291 FWHMs from 1 to 30 px


@pytest.mark.parametrize("fwhm", [3.0, 6.0, 8.0, 10.0, 15.0])
def test_spatial_boxcar_follows_the_rule(rng, fwhm):
    """The noise of one smoothed cube (no sources, no spectral kernel) equals the reference's,
    which uses the rule; the former rule gives another noise where the rules differ."""
    cube = rng.normal(size=(4, 64, 70)).astype(np.float32)
    kw = {"kernels_xy": (fwhm,), "kernels_z": (0,), "statistic": "std", "threshold": 4.0}
    _, rms0, rms = scfind(cube, **kw)
    got, rep = run(cube, **kw)
    assert rep.rms[0] == pytest.approx(rms[0], rel=NOISE_RTOL)
    _, old = run(cube, spatial="boxcar_approx", **kw)
    same_rule = boxcar_rule(fwhm / FWHM_CONST) == _closest_sigma_rule(fwhm / FWHM_CONST)
    assert (old.rms[0] == rep.rms[0]) == same_rule


# ------------------------------------------------------------------ masks and noise


@pytest.mark.parametrize("statistic", ["mad", "std", "gauss"])
@pytest.mark.parametrize("flux_range", ["negative", "full", "positive"])
def test_every_statistic_and_flux_range(rng, statistic, flux_range):
    cube = make_cube(rng)
    check(
        cube,
        kernels_xy=(0, 3, 6),
        kernels_z=(0, 3, 7),
        threshold=4.0,
        statistic=statistic,
        flux_range=flux_range,
    )


@pytest.mark.parametrize(
    "kxy,kz",
    [
        ((0, 3, 6), (0, 3, 7, 15)),  # SoFiA-2's default kernels
        ((8, 10), (0, 4)),  # rule differs from closest-sigma; even width 4 -> 5
        ((0, 15), (21,)),
        ((2.5,), (0, 1, 2)),
    ],
)
def test_kernel_sets(rng, kxy, kz):
    cube = make_cube(rng, shape=(27, 33, 35))
    check(cube, kernels_xy=kxy, kernels_z=kz, threshold=3.5)


def test_odd_sizes_rising_noise_negative_bias(rng):
    cube = make_cube(rng, shape=(17, 13, 41), rising=True, bias=-0.3)
    for statistic in ("mad", "std", "gauss"):
        check(cube, threshold=3.0, statistic=statistic, flux_range="negative")
        check(cube, threshold=3.0, statistic=statistic, flux_range="positive")


def test_initial_mask_and_replacement(rng):
    cube = make_cube(rng)
    start = np.zeros(cube.shape, bool)
    start[5, 10:14, 12:18] = True
    for replacement in (2.0, 0.5, -1.0):
        got, _ = check(cube, threshold=4.0, replacement=replacement, mask=start)
        assert got[start & ~np.isnan(cube)].all()


def test_single_channel_image(rng):
    img = make_cube(rng, shape=(3, 41, 37))[0]
    ref, rms0, rms = scfind(img[None], kernels_z=(0,), threshold=3.5)
    got, rep = run(img, threshold=3.5)
    assert got.shape == img.shape
    np.testing.assert_array_equal(got, ref[0])
    np.testing.assert_allclose(rep.rms, rms, rtol=NOISE_RTOL)
    with pytest.raises(ValueError, match="no finite values"):
        skyconv.smooth_and_clip(np.full((3, 4, 5), np.nan, np.float32), device="cpu")


def test_float64_cube(rng):
    check(make_cube(rng, dtype=np.float64), threshold=4.0, statistic="mad", flux_range="full")


def test_bright_block_and_quiet_blocks(rng):
    """The CPU engine decides the clip from the voxels its noise pass kept per block of 1024
    columns (at most nz·1024/128, min 256); a block whose bright source overflows that list
    is clipped by a second pass over it. Here block 0 (rows 0-15 of 64 columns) holds 10240
    voxels far above the level, blocks 1 and 2 only noise and a faint source."""
    cube = make_cube(rng, shape=(20, 48, 64), nan=False)
    cube[5:15, :16, :] += 8.0
    got, _ = check(cube, kernels_xy=(0, 3), kernels_z=(0, 3), threshold=4.0)
    assert got[5:15, :16, :].mean() > 0.99


def test_cadence_above_one(rng):
    """A cube of 2,068,491 voxels: cadence 2; the size is odd, so the backward walk samples
    the odd flat indices (a walk from 0 would take the even ones); MAD capped."""
    shape = (41, 201, 251)
    assert cadence(shape) == 2
    assert skyconv.stats.sofia2_cadence(shape) == 2
    cube = make_cube(rng, shape=shape)
    for statistic, flux in (("mad", "negative"), ("std", "full"), ("gauss", "negative")):
        check(cube, kernels_xy=(0, 4), kernels_z=(0, 5), statistic=statistic, flux_range=flux)


def test_mad_in_place_over_blank_stretches_of_the_sample(rng):
    """The CPU engine keeps a float32 cube's sample in float32 and selects SoFiA-2's MAD in the
    sample itself (each 65536-slot chunk compacted, then joined): whole chunks of the sample
    blank (NaN planes) or without a negative value, between chunks that keep values, with the
    one-sided cap; the mask and every noise value as the reference's."""
    shape = (40, 200, 250)  # cadence 2: a sample of 1e6 slots, 16 chunks
    cube = make_cube(rng, shape=shape, nan=False)
    cube[8:16] = np.nan  # ~200k slots: whole chunks with nothing kept
    cube[24:28] = np.abs(cube[24:28]) + 0.1  # chunks with no negative value
    for statistic, flux in (("mad", "negative"), ("mad", "full"), ("mad", "positive")):
        check(cube, kernels_xy=(0, 3), kernels_z=(0, 3), statistic=statistic, flux_range=flux)


def test_cadence_multiple_of_row_rule(rng):
    # size // 999983 = 4, a multiple of nx = 2: cadence 3
    shape = (2, 999983, 2)
    assert cadence(shape) == 3 == skyconv.stats.sofia2_cadence(shape)


def test_mad_sample_rules_matter(rng):
    """The MAD rules (no element 0, one-sided cap) change the noise on a cube built so that
    element 0 and the start of the array decide the median."""
    cube = np.abs(rng.normal(size=(3, 4, 5))).astype(np.float32) + 1.0
    cube.flat[::7] *= -1.0
    cube.flat[0] = -50.0
    _, rms0, _ = scfind(cube, kernels_xy=(0,), kernels_z=(0,), statistic="mad")
    _, rep = run(cube, kernels_xy=(0,), kernels_z=(0,), statistic="mad")
    assert rep.rms0 == rms0
    neg = cube.ravel()[1:][cube.ravel()[1:] < 0][::-1]
    cap = cube.size // 2
    assert len(neg) <= cap
    want = 1.482602218505602 * float(np.median(np.abs(neg)).astype(np.float32))
    assert rms0 == pytest.approx(want, rel=1e-7)


def test_float64_precision_option_keeps_former_rules(rng):
    cube = make_cube(rng)
    a = skyconv.smooth_and_clip(cube, device="cpu", spatial="gaussian", precision="float64")
    b = skyconv.smooth_and_clip(cube, device="cpu")
    assert a.shape == b.shape and (a != b).any()
    with pytest.raises(ValueError, match="precision"):
        skyconv.smooth_and_clip(cube, device="cpu", precision="float32")
    with pytest.raises(ValueError, match="constant"):
        skyconv.smooth_and_clip(cube, device="cpu", edge_mode="reflect")
    skyconv.smooth_and_clip(cube, device="cpu", edge_mode="reflect", precision="float64")


# ------------------------------------------------------------------ GPU


GPU_CASES = [
    {"statistic": "mad", "flux_range": "negative"},
    {"statistic": "mad", "flux_range": "positive"},
    {"statistic": "std", "flux_range": "full"},
    {"statistic": "gauss", "flux_range": "negative"},
    {"statistic": "gauss", "flux_range": "full"},
    {"spatial": "boxcar_approx"},
    {"spatial": "gaussian"},
    {"spectral": "gaussian"},
    {"replacement": -1.0},
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: "-".join(map(str, c.values())))
def test_gpu_equals_cpu_exact(rng, dtype, case):
    cube = make_cube(rng, shape=(31, 37, 41), dtype=dtype, rising=True)
    kw = {"threshold": 3.5, "return_noise": True, **case}
    a, ra = skyconv.smooth_and_clip(cube, device="cpu", **kw)
    b, rb = skyconv.smooth_and_clip(cube, device="cuda", **kw)
    assert rb.rms0 == ra.rms0
    if "gaussian" in case.values():
        # the true Gaussian filters are not SoFiA-2's arithmetic: the GPU's sums round
        # differently (measured on the H100: the noise 1 ulp apart), so they are compared to
        # rounding, and the masks may differ where a voxel sits on the threshold
        np.testing.assert_allclose(rb.rms, ra.rms, rtol=1e-6 if dtype == np.float32 else 1e-12)
        outs = [b] + [
            skyconv.smooth_and_clip(cube, device="cuda", _slab_planes=p, **kw)[0] for p in (4, 9)
        ]
        for c in outs:
            assert np.count_nonzero(c != a) <= 3
        return
    assert rb.rms == ra.rms
    np.testing.assert_array_equal(a, b)
    for planes in (4, 9):
        c, rc = skyconv.smooth_and_clip(cube, device="cuda", _slab_planes=planes, **kw)
        assert rc.rms == ra.rms, planes
        np.testing.assert_array_equal(a, c)


@pytest.mark.gpu
def test_gpu_cadence_above_one_and_reference(rng):
    cube = make_cube(rng, shape=(41, 201, 251))
    kw = {"kernels_xy": (0, 3, 8), "kernels_z": (0, 7), "threshold": 4.0}
    ref, rms0, rms = scfind(cube, **kw)
    for planes in (None, 6):
        got, rep = skyconv.smooth_and_clip(
            cube, device="cuda", return_noise=True, _slab_planes=planes, **kw
        )
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_allclose(rep.rms, rms, rtol=NOISE_RTOL)


@pytest.mark.gpu
@pytest.mark.parametrize("spatial", ["boxcar", "boxcar_approx"])
def test_gpu_float64_precision_with_boxcars(rng, spatial):
    """precision='float64' keeps skyconv's float64 sums on both engines (not bit-identical:
    the engines round differently, as before)."""
    cube = make_cube(rng, shape=(31, 37, 41))
    kw = {"threshold": 3.5, "return_noise": True, "precision": "float64", "spatial": spatial}
    a, ra = skyconv.smooth_and_clip(cube, device="cpu", **kw)
    b, rb = skyconv.smooth_and_clip(cube, device="cuda", **kw)
    c, rc = skyconv.smooth_and_clip(cube, device="cuda", _slab_planes=5, **kw)
    assert (a != b).sum() <= 3 and (b != c).sum() == 0
    np.testing.assert_allclose(rb.rms, ra.rms, rtol=1e-5)
    assert rc.rms == rb.rms


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kxy", [(0, 3, 6), (0, 8, 10, 15)])
def test_gpu_register_ring_boxcars_equal_generic_and_cpu(rng, monkeypatch, dtype, kxy):
    """The register-ring boxcar kernels (chains of one radius, lines long enough for their
    unchecked chunks) against the generic ones (SKYCONV_SC_FIXED=0) and the CPU engine: the
    same masks and noise values, in one piece and in slabs (the carried spectral pass stays
    generic there)."""
    cube = make_cube(rng, shape=(40, 70, 150), dtype=dtype, rising=True)
    kw = {"kernels_xy": kxy, "kernels_z": (0, 3, 7, 15), "threshold": 3.5, "return_noise": True}
    a, ra = skyconv.smooth_and_clip(cube, device="cpu", **kw)
    for planes in (None, 9):
        b, rb = skyconv.smooth_and_clip(cube, device="cuda", _slab_planes=planes, **kw)
        monkeypatch.setenv("SKYCONV_SC_FIXED", "0")
        c, rc = skyconv.smooth_and_clip(cube, device="cuda", _slab_planes=planes, **kw)
        monkeypatch.delenv("SKYCONV_SC_FIXED")
        assert rb.rms == ra.rms == rc.rms, planes
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
