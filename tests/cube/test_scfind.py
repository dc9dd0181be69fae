"""Smooth-and-Clip: skyconv.smooth_and_clip (SoFiA 2 rules), skyconv.compat.sofia.SCfinder_mem
(SoFiA 1.3.2) and skyconv.stats, against the straightforward references in _sofia_ref.py."""

from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import pytest
from _sofia_ref import sofia1_rms, sofia1_scfind, sofia2_scfind

import skyconv
import skyconv.stats as st
from skyconv.compat import sofia

#: skyconv's float64 rules, which _sofia_ref.sofia2_scfind describes (the default now follows
#: SoFiA-2 2.5.1 exactly: tests/cube/test_sofia2_exact.py).
F64 = {"precision": "float64", "spatial": "gaussian"}

KERNELS = [
    [0, 0, 0, "b"],
    [0, 0, 3, "b"],
    [3, 3, 0, "b"],
    [3, 3, 4, "b"],
    [3, 3, 7, "g"],
    [6, 6, 15, "b"],
]


def make_cube(rng, shape=(24, 32, 36), dtype=np.float32, nan=True):
    """Gaussian noise (σ = 1) with a few extended sources of different widths and NaNs."""
    c = rng.normal(size=shape)
    z, y, x = np.indices(shape)
    for z0, y0, x0, sz, sxy, amp in [
        (8, 10, 12, 2.0, 2.0, 1.5),
        (16, 22, 24, 4.0, 3.0, 0.8),
        (5, 25, 8, 1.0, 1.0, 3.0),
    ]:
        c += amp * np.exp(
            -0.5 * (((z - z0) / sz) ** 2 + ((y - y0) / sxy) ** 2 + ((x - x0) / sxy) ** 2)
        )
    if nan:
        c[min(3, shape[0] - 1), 4, 5] = np.nan
        c[min(11, shape[0] - 1), :, 7] = np.nan
        if shape[0] > 2:
            c[-2] = np.nan  # an all-NaN plane
    return c.astype(dtype)


def near_threshold(kept, rtol=1e-5):
    """Voxels whose smoothed value lies within rounding of some kernel's clip level (or between
    the two levels of a histogram edge count on a rounding cliff)."""
    out = None
    for s, _level, lo, hi in kept:
        with np.errstate(invalid="ignore"):
            n = (np.abs(s) >= lo * (1 - rtol)) & (np.abs(s) <= hi * (1 + rtol))
        out = n if out is None else out | n
    return out.reshape(kept[0][0].shape)


def assert_masks_agree(got, ref, kept, max_cascade=0):
    diff = np.asarray(got != ref).reshape(kept[0][0].shape) if kept else (got != ref)
    if not diff.any():
        return
    near = near_threshold(kept)
    bad = diff & ~near
    assert bad.sum() <= max_cascade, f"{diff.sum()} voxels differ, {bad.sum()} not near threshold"


# ------------------------------------------------------------------ compat: SoFiA 1.3.2


@pytest.mark.parametrize("edge", ["constant", "nearest", "reflect", "mirror", "wrap"])
@pytest.mark.parametrize("rms_mode", ["negative", "gauss", "mad", "std"])
def test_compat_matches_sofia1(rng, edge, rms_mode):
    cube = make_cube(rng)
    ref = np.zeros(cube.shape, np.int16)
    ref[8, 10, 12] = 4  # a voxel already flagged by an earlier step
    got = ref.copy()
    _rms0, _noise, kept = sofia1_scfind(
        cube, ref, KERNELS, threshold=4.0, edgeMode=edge, rmsMode=rms_mode, keep=True
    )
    assert (
        sofia.SCfinder_mem(
            cube,
            got,
            {},
            0.0,
            kernels=KERNELS,
            threshold=4.0,
            edgeMode=edge,
            rmsMode=rms_mode,
            device="cpu",
        )
        is None
    )
    assert_masks_agree(got, ref, kept)
    assert got[8, 10, 12] in (4, 5)
    assert ref.sum() > 50


@pytest.mark.parametrize("rms_mode", ["negative", "gauss", "mad", "std"])
@pytest.mark.parametrize("flux", ["all", "negative", "positive"])
def test_compat_flux_range_and_noise(rng, rms_mode, flux):
    cube = make_cube(rng, dtype=np.float64)
    ref = np.zeros(cube.shape, np.uint8)
    got = ref.copy()
    _, _noise, kept = sofia1_scfind(
        cube, ref, KERNELS[:4], threshold=3.5, rmsMode=rms_mode, fluxRange=flux, keep=True
    )
    sofia.SCfinder_mem(
        cube,
        got,
        {},
        0,
        kernels=KERNELS[:4],
        threshold=3.5,
        rmsMode=rms_mode,
        fluxRange=flux,
        device="cpu",
    )
    assert_masks_agree(got, ref, kept)
    # the noise values themselves, through skyconv.stats
    for s, *_ in kept:
        want = sofia1_rms(s, rms_mode, flux, 1)
        assert st.sofia1_rms(s, rms_mode, flux, sample=1) == pytest.approx(want, rel=1e-6)


def test_compat_sampling_large_cube(rng):
    # size > 1e6 * 8: SoFiA samples every 2nd plane, row and column
    cube = rng.normal(size=(40, 160, 200)).astype(np.float32)
    cube[20:24, 80:90, 100:110] += 3
    assert st.sofia1_stride(cube.shape) == 1
    big = rng.normal(size=(80, 130, 130)).astype(np.float32)
    assert st.sofia1_stride(big.shape) == 1
    huge_shape = (130, 130, 500)
    assert st.sofia1_stride(huge_shape) == 2
    c = rng.normal(size=huge_shape).astype(np.float32)
    for mode in ("negative", "mad", "gauss", "std"):
        assert st.sofia1_rms(c, mode, "all", sample=2) == pytest.approx(
            sofia1_rms(c, mode, "all", 2), rel=1e-6
        )


def test_compat_world_units_and_header_types(rng):
    cube = make_cube(rng, nan=False)
    hdr = {"CDELT1": -0.5, "CDELT2": 0.5, "CDELT3": 2.0}
    kern = [[0, 0, 0, "b"], [1.5, 1.5, 7.0, "b"], [3.0, 3.0, 5.0, "g"]]
    ref = np.zeros(cube.shape, np.int32)
    got = ref.copy()
    _, _, kept = sofia1_scfind(cube, ref, kern, kernelUnit="world", header=hdr, keep=True)
    sofia.SCfinder_mem(cube, got, hdr, 0, kernels=kern, kernelUnit="world", device="cpu")
    assert_masks_agree(got, ref, kept)
    fits = pytest.importorskip("astropy.io.fits")
    h = fits.Header()
    for k, v in hdr.items():
        h[k] = v
    got2 = np.zeros(cube.shape, np.int32)
    sofia.SCfinder_mem(cube, got2, h, 0, kernels=kern, kernelUnit="w", device="cpu")
    np.testing.assert_array_equal(got2, got)
    with pytest.raises(KeyError, match="CDELT3"):
        sofia.SCfinder_mem(
            cube, got2, {"CDELT1": 1, "CDELT2": 1}, 0, kernels=kern, kernelUnit="world"
        )


@pytest.mark.parametrize("mask_dtype", [np.int8, np.uint16, np.int32, ">i4", np.int64, bool])
def test_compat_mask_dtypes_in_place(rng, mask_dtype):
    cube = make_cube(rng).astype(">f4")  # big-endian, as read from FITS
    native = cube.astype(np.float32)
    ref = np.zeros(cube.shape, np.int64)
    ref[0, 0, 0] = 1
    if mask_dtype is not bool:
        ref[1, 1, 1] = 2
    sofia1_scfind(native, ref, KERNELS[:3], threshold=4.0)
    got = np.zeros(cube.shape, mask_dtype)
    got[0, 0, 0] = 1
    if mask_dtype is not bool:
        got[1, 1, 1] = 2
    buf = got
    sofia.SCfinder_mem(cube, got, {}, 0, kernels=KERNELS[:3], threshold=4.0, device="cpu")
    assert got is buf and got.dtype == np.dtype(mask_dtype)
    np.testing.assert_array_equal(
        got.astype(np.int64), ref.astype(bool) if mask_dtype is bool else ref
    )


def test_compat_unused_args_verbose_and_errors(rng, capsys):
    cube = make_cube(rng)
    mask = np.zeros(cube.shape, np.int16)
    sofia.SCfinder_mem(
        cube,
        mask,
        {},
        0.0,
        kernels=KERNELS[:2],
        threshold=4.0,
        sizeFilter=0.5,
        maskScaleZ=3.0,
        verbose=1,
        scaleX=True,
        scaleY=True,
        scaleZ=False,
        edgeX=1,
        edgeY=1,
        edgeZ=1,
        method="3d",
        windowSpatial=5,
        windowSpectral=5,
        gridSpatial=2,
        gridSpectral=2,
        interpolation="linear",
        device="cpu",
    )
    assert "Filter" in capsys.readouterr().out
    with pytest.raises(TypeError, match="integer"):
        sofia.SCfinder_mem(cube, mask.astype(np.float32), {}, 0, kernels=KERNELS[:1])
    with pytest.raises(skyconv.ShapeError):
        sofia.SCfinder_mem(cube, mask[:-1], {}, 0, kernels=KERNELS[:1])
    with pytest.raises(TypeError):
        sofia.SCfinder_mem(cube, mask.tolist(), {}, 0, kernels=KERNELS[:1])
    with pytest.raises(TypeError):
        sofia.SCfinder_mem(cube.astype(np.int32), mask, {}, 0, kernels=KERNELS[:1])
    with pytest.raises(NotImplementedError):
        sofia.SCfinder_mem(cube, mask, {}, 0, kernels=KERNELS[:1], perSCkernel=True)
    with pytest.raises(ValueError, match="edgeMode"):
        sofia.SCfinder_mem(cube, mask, {}, 0, kernels=KERNELS[:1], edgeMode="bogus")
    with pytest.warns(UserWarning, match="rmsMode"):
        sofia.SCfinder_mem(cube, mask, {}, 0, kernels=KERNELS[:1], rmsMode="bogus", device="cpu")
    pos = np.abs(cube)
    with pytest.raises(ValueError, match="negative"):
        sofia.SCfinder_mem(
            pos, mask, {}, 0, kernels=KERNELS[:1], rmsMode="mad", fluxRange="negative", device="cpu"
        )


def test_compat_2d_float64_and_tiny_cube(rng):
    img = make_cube(rng, shape=(1, 30, 40), dtype=np.float64, nan=False)[0]
    ref = np.zeros(img.shape, np.int16)
    got = ref.copy()
    _, _, kept = sofia1_scfind(img, ref, KERNELS, threshold=3.0, rmsMode="mad", keep=True)
    sofia.SCfinder_mem(img, got, {}, 0, kernels=KERNELS, threshold=3.0, rmsMode="mad", device="cpu")
    assert_masks_agree(got, ref, kept)
    tiny = rng.normal(size=(3, 4, 5)).astype(np.float32)  # smaller than every kernel
    for edge in ("constant", "reflect", "wrap"):
        ref = np.zeros(tiny.shape, np.int16)
        got = ref.copy()
        _, _, kept = sofia1_scfind(
            tiny, ref, KERNELS, threshold=1.0, rmsMode="std", edgeMode=edge, keep=True
        )
        sofia.SCfinder_mem(
            tiny,
            got,
            {},
            0,
            kernels=KERNELS,
            threshold=1.0,
            rmsMode="std",
            edgeMode=edge,
            device="cpu",
        )
        assert_masks_agree(got, ref, kept)


def test_install_replaces_pyfind(monkeypatch):
    assert sofia.install() is ("sofia" in sys.modules and hasattr(sys.modules["sofia"], "pyfind"))
    pkg = types.ModuleType("sofia")
    pyfind = types.ModuleType("sofia.pyfind")

    def original(*args, **kwargs):
        return "sofia"

    pyfind.SCfinder_mem = original
    pkg.pyfind = pyfind
    monkeypatch.setitem(sys.modules, "sofia", pkg)
    monkeypatch.setitem(sys.modules, "sofia.pyfind", pyfind)
    assert sofia.install() is True
    assert pyfind.SCfinder_mem is sofia.SCfinder_mem
    assert sofia.uninstall() is True
    assert pyfind.SCfinder_mem is original


# ------------------------------------------------------------------ native: SoFiA 2 rules


@pytest.mark.parametrize(
    "statistic,flux",
    [
        ("mad", "negative"),
        ("std", "full"),
        ("gauss", "negative"),
        ("mad", "positive"),
        ("gauss", "full"),
        ("std", "negative"),
    ],
)
def test_native_matches_float64_reference(rng, statistic, flux):
    cube = make_cube(rng, dtype=np.float64)
    kw = {
        "kernels_xy": (0, 3, 6),
        "kernels_z": (0, 3, 6, 15),
        "threshold": 4.0,
        "statistic": statistic,
        "flux_range": flux,
    }
    ref, rms0, noise, kept = sofia2_scfind(cube, keep=True, **kw)
    got, rep = skyconv.smooth_and_clip(cube, return_noise=True, device="cpu", **F64, **kw)
    assert got.dtype == np.uint8 and got.shape == cube.shape
    assert_masks_agree(got, ref, kept)
    rtol = 1e-6 if statistic == "gauss" else 1e-9  # scipy's curve_fit stops at ~1e-8
    assert rep.rms0 == pytest.approx(rms0, rel=rtol)
    np.testing.assert_allclose(rep.rms, noise, rtol=rtol)
    assert rep.kernels[:4] == [(0.0, 0), (0.0, 3), (0.0, 7), (0.0, 15)]
    assert not got[np.isnan(cube)].any()
    assert got.sum() > 50


@pytest.mark.parametrize(
    "spatial,spectral,edge",
    [
        ("boxcar_approx", "boxcar", "constant"),
        ("gaussian", "gaussian", "reflect"),
        ("boxcar_approx", "gaussian", "nearest"),
        ("gaussian", "boxcar", "wrap"),
        ("gaussian", "boxcar", "mirror"),
    ],
)
def test_native_kernel_shapes_and_modes(rng, spatial, spectral, edge):
    cube = make_cube(rng, dtype=np.float64)
    kw = {
        "kernels_xy": (0, 2.5, 5),
        "kernels_z": (0, 3, 9),
        "threshold": 4.0,
        "spatial": spatial,
        "spectral": spectral,
        "edge_mode": edge,
    }
    ref, _rms0, noise, kept = sofia2_scfind(cube, keep=True, **kw)
    got, rep = skyconv.smooth_and_clip(
        cube, return_noise=True, device="cpu", precision="float64", **kw
    )
    assert_masks_agree(got, ref, kept)
    np.testing.assert_allclose(rep.rms, noise, rtol=1e-9)


def test_native_float32_input_mask_and_replacement(rng):
    cube = make_cube(rng, dtype=np.float32)
    start = np.zeros(cube.shape, bool)
    start[8, 8:12, 10:14] = True
    for replacement in (2.0, -1.0):
        ref, _, noise, kept = sofia2_scfind(
            cube, threshold=4.0, replacement=replacement, mask=start, keep=True
        )
        got, rep = skyconv.smooth_and_clip(
            cube,
            threshold=4.0,
            replacement=replacement,
            mask=start,
            device="cpu",
            return_noise=True,
            **F64,
        )
        assert got[start].all()
        assert_masks_agree(got, ref, kept, max_cascade=2)
        np.testing.assert_allclose(rep.rms, noise, rtol=1e-6)


def test_native_2d_tiny_and_all_nan(rng):
    img = make_cube(rng, shape=(1, 40, 50), dtype=np.float64)[0]
    ref, _, noise, kept = sofia2_scfind(img, threshold=3.5, keep=True)
    got, rep = skyconv.smooth_and_clip(img, threshold=3.5, device="cpu", return_noise=True, **F64)
    assert got.shape == img.shape
    assert [k[1] for k in rep.kernels] == [0, 0, 0]
    assert_masks_agree(got, ref, kept)
    np.testing.assert_allclose(rep.rms, noise, rtol=1e-9)
    tiny = rng.normal(size=(4, 5, 6))
    ref, _, noise, kept = sofia2_scfind(
        tiny, kernels_xy=(0, 10), kernels_z=(0, 15), threshold=1.0, flux_range="full", keep=True
    )
    got, rep = skyconv.smooth_and_clip(
        tiny,
        kernels_xy=(0, 10),
        kernels_z=(0, 15),
        threshold=1.0,
        flux_range="full",
        device="cpu",
        return_noise=True,
        **F64,
    )
    assert_masks_agree(got, ref, kept)
    np.testing.assert_allclose(rep.rms, noise, rtol=1e-9)
    with pytest.raises(ValueError, match="no finite values"):
        skyconv.smooth_and_clip(np.full((3, 4, 5), np.nan, np.float32), device="cpu")


def test_native_argument_errors(rng):
    cube = make_cube(rng, shape=(6, 7, 8))
    sc = skyconv.smooth_and_clip
    with pytest.raises(skyconv.ShapeError):
        sc(cube, mask=np.zeros((6, 7, 9), bool), device="cpu")
    with pytest.raises(TypeError, match="mask"):
        sc(cube, mask=np.zeros(cube.shape, np.float32), device="cpu")
    with pytest.raises(skyconv.ShapeError):
        sc(cube[None], device="cpu")
    with pytest.raises(TypeError):
        sc(cube.astype(np.int16), device="cpu")
    for bad in (
        {"statistic": "median"},
        {"flux_range": "both"},
        {"spectral": "hann"},
        {"spatial": "box"},
        {"edge_mode": "zero"},
        {"threshold": -1},
        {"kernels_xy": (-3,)},
        {"kernels_z": (2.5,)},
        {"kernels_z": ()},
        {"device": "tpu"},
    ):
        with pytest.raises(ValueError):
            sc(cube, **bad)


def test_native_progress_and_threads(rng):
    cube = make_cube(rng)
    seen = []
    a = skyconv.smooth_and_clip(cube, device="cpu", progress=lambda *a: seen.append(a))
    assert [s[:2] for s in seen] == [(i + 1, 12) for i in range(12)]
    n = skyconv.get_num_threads()
    try:
        skyconv.set_num_threads(1)
        b = skyconv.smooth_and_clip(cube, device="cpu")
    finally:
        skyconv.set_num_threads(n)
    np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ skyconv.stats


def test_stats_against_numpy(rng):
    x = rng.normal(size=(20, 30, 40)).astype(np.float32)
    x[0, 0, :5] = np.nan
    f = x[np.isfinite(x)].astype(np.float64)
    assert st.std(x) == pytest.approx(np.sqrt(np.mean(f * f)), rel=1e-12)
    assert st.std(x, center=0.5) == pytest.approx(np.sqrt(np.mean((f - 0.5) ** 2)), rel=1e-12)
    assert st.mad(x) == np.median(np.abs(f))
    assert st.mad(x, 0.3, "negative") == np.median(np.abs(f[f < 0.3] - 0.3))
    assert st.mad(x, clip=1.0) == np.median(np.abs(f)[np.abs(f) < 1.0])
    sub = x.ravel()[::7]
    g = sub[np.isfinite(sub)].astype(np.float64)
    assert st.std(x, cadence=7, flux_range="positive") == pytest.approx(
        np.sqrt(np.mean(g[g > 0] ** 2)), rel=1e-12
    )
    s = x[::3, ::3, ::3]
    h = s[np.isfinite(s)].astype(np.float64)
    assert st.mad(x, stride=3) == np.median(np.abs(h))
    assert st.noise(x, "mad") == pytest.approx(st.MAD_TO_STD * np.median(np.abs(f)), rel=1e-12)
    assert st.gauss(x) == pytest.approx(1.0, rel=0.05)
    edges = np.linspace(-3, 3, 17)
    np.testing.assert_array_equal(st.histogram(x, edges), np.histogram(f, edges)[0])
    assert st.sofia2_cadence((500, 1024, 1024)) == 524
    assert st.sofia2_cadence((1, 4 * 999983, 2)) == 7
    assert st.sofia1_stride((500, 1024, 1024)) == 8
    assert np.isnan(st.std(np.full(10, np.nan)))
    with pytest.raises(ValueError):
        st.std(x, flux_range="both")
    with pytest.raises(ValueError):
        st.mad(x, cadence=2, stride=2)


def test_fit_gaussian_matches_curve_fit(rng):
    optimize = pytest.importorskip("scipy.optimize")
    x = np.linspace(-4, 4, 81)
    y = 100 * np.exp(-(x**2) / (2 * 1.3**2)) + rng.normal(scale=2.0, size=x.size)
    want = optimize.curve_fit(lambda t, a, s: a * np.exp(-(t**2) / (2 * s**2)), x, y, p0=[90, 1.0])[
        0
    ]
    a, s = st.fit_gaussian(x, y, (90, 1.0))
    assert a == pytest.approx(want[0], rel=1e-7)
    assert abs(s) == pytest.approx(abs(want[1]), rel=1e-7)


# ------------------------------------------------------------------ CUDA


def test_scfind_kernels_compile():
    """kernels/scfind.cu is registered and compiles under NVRTC (no GPU needed)."""
    try:
        mods = skyconv._core._compile_kernels(9, 0)
    except skyconv.DeviceError as e:
        pytest.skip(f"NVRTC not available: {e}")
    assert mods.get("scfind", 0) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_equals_cpu(rng, dtype):
    cube = make_cube(rng, shape=(40, 48, 56), dtype=dtype)
    kw = {"threshold": 4.0, "return_noise": True}
    a, ra = skyconv.smooth_and_clip(cube, device="cpu", **kw)
    b, rb = skyconv.smooth_and_clip(cube, device="cuda", **kw)
    assert (a != b).sum() <= 3
    np.testing.assert_allclose(rb.rms, ra.rms, rtol=1e-5)
    for rms_mode in ("negative", "gauss", "mad", "std"):
        m1 = np.zeros(cube.shape, np.int16)
        m2 = m1.copy()
        sofia.SCfinder_mem(
            cube, m1, {}, 0, kernels=KERNELS, threshold=4.0, rmsMode=rms_mode, device="cpu"
        )
        sofia.SCfinder_mem(
            cube, m2, {}, 0, kernels=KERNELS, threshold=4.0, rmsMode=rms_mode, device="cuda"
        )
        assert (m1 != m2).sum() <= 3, rms_mode


@pytest.mark.gpu
@pytest.mark.parametrize("flux", ["all", "negative", "positive"])
def test_gpu_compat_mad_on_device_equals_cpu(rng, flux):
    """SoFiA 1's mad is selected on the device (no sample download): same masks as the CPU's
    for every flux range, and the CPU's error when no value lies in the range."""
    cube = make_cube(rng, shape=(40, 48, 56))
    masks = []
    for device in ("cpu", "cuda"):
        m = np.zeros(cube.shape, np.int16)
        kw = {"threshold": 4.0, "rmsMode": "mad", "fluxRange": flux, "device": device}
        sofia.SCfinder_mem(cube, m, {}, 0, kernels=KERNELS, **kw)
        masks.append(m)
    assert masks[0].sum() > 50
    assert (masks[0] != masks[1]).sum() <= 3
    positive = np.abs(cube) + 1.0
    errors = []
    for device in ("cpu", "cuda"):
        with pytest.raises(ValueError, match="no negative fluxes") as e:
            sofia.SCfinder_mem(
                positive, np.zeros(cube.shape, np.uint8), {}, 0, kernels=KERNELS,
                rmsMode="mad", fluxRange="negative", device=device,
            )  # fmt: skip
        errors.append(str(e.value))
    assert errors[0] == errors[1]


@pytest.mark.gpu
@pytest.mark.parametrize("rms_mode", ["negative", "gauss"])
@pytest.mark.parametrize("flux", ["all", "negative", "positive"])
def test_gpu_compat_histogram_fits_equal_cpu(rng, rms_mode, flux):
    """SoFiA 1's histogram fits count the sample's histograms on the device: the noise of the
    original cube and of an unsmoothed kernel (the same sample on both engines) equals the
    CPU's exactly, that of smoothed kernels to 1e-6 (their samples differ by rounding)."""
    cube = make_cube(rng, shape=(40, 48, 56))
    kernels = [[0, 0, 0, "b"], [3, 3, 0, "b"], [0, 0, 3, "b"], [3, 3, 7, "g"]]
    specs = [sofia._kernel_spec(k, "pixel", {})[0] for k in kernels]
    got = {}
    for device in ("cpu", "cuda"):
        work = np.zeros(cube.shape, np.uint8)
        got[device] = skyconv._core._scfind(
            cube, work, specs, "constant", 4.0, True, ("sign", 2.0),
            ("sofia1:" + rms_mode, flux, False), ("stride", st.sofia1_stride(cube.shape)),
            fitter=st.scipy_fitter(), device=device,
        )  # fmt: skip
    (c0, c), (g0, g) = got["cpu"], got["cuda"]
    assert g0 == c0
    assert g[0] == c[0]
    np.testing.assert_allclose(g[1:], c[1:], rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("spectral", ["boxcar", "gaussian"])
def test_gpu_slabbed_equals_unslabbed(rng, spectral):
    from skyconv.cube import smooth_and_clip

    cube = make_cube(rng, shape=(37, 40, 44))
    kw = {
        "threshold": 4.0,
        "return_noise": True,
        "device": "cuda",
        "spectral": spectral,
        "edge_mode": "reflect",
        "precision": "float64",
    }
    a, ra = smooth_and_clip(cube, **kw)
    for planes in (5, 16):
        b, rb = smooth_and_clip(cube, _slab_planes=planes, **kw)
        np.testing.assert_array_equal(a, b)
        assert rb.rms == ra.rms
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = np.zeros(cube.shape, np.int16)
        sofia.SCfinder_mem(
            cube, c, {}, 0, kernels=KERNELS, rmsMode="negative", device="cuda", _slab_planes=7
        )
        d = np.zeros(cube.shape, np.int16)
        sofia.SCfinder_mem(cube, d, {}, 0, kernels=KERNELS, rmsMode="negative", device="cuda")
        np.testing.assert_array_equal(c, d)


def test_native_sparse_noise_sample(rng):
    """A cube large enough for SoFiA 2's cadence (> 1) and for point-by-point sampling."""
    cube = rng.normal(size=(48, 480, 480))
    cube[20:26, 200:230, 200:230] += 1.0
    assert st.sofia2_cadence(cube.shape) == 11
    kw = {"kernels_xy": (0, 3), "kernels_z": (0, 7), "threshold": 4.0}
    ref, rms0, noise, _ = sofia2_scfind(cube, **kw)
    got, rep = skyconv.smooth_and_clip(cube, return_noise=True, device="cpu", **F64, **kw)
    assert rep.rms0 == pytest.approx(rms0, rel=1e-12)
    np.testing.assert_allclose(rep.rms, noise, rtol=1e-12)
    assert (got != ref).sum() == 0


def test_cli_scfind(rng, tmp_path, capsys):
    import argparse

    from skyconv._cli_cube import add_scfind_parser

    cube = make_cube(rng, nan=False)
    np.save(tmp_path / "cube.npy", cube)
    parser = argparse.ArgumentParser(prog="skyconv")
    add_scfind_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "scfind",
            str(tmp_path / "cube.npy"),
            "--out",
            str(tmp_path / "mask.npy"),
            "--kernelsXY",
            "0,3",
            "--kernels-z",
            "0 3",
            "--threshold",
            "4",
            "--device",
            "cpu",
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr()
    assert "4/4 kernels" in out.err and "voxels in the mask" in out.out
    want = skyconv.smooth_and_clip(
        cube, kernels_xy=(0, 3), kernels_z=(0, 3), threshold=4.0, device="cpu"
    )
    np.testing.assert_array_equal(np.load(tmp_path / "mask.npy"), want)
    fits = pytest.importorskip("astropy.io.fits")
    hdr = fits.Header()
    hdr["CTYPE3"] = "FREQ"
    fits.PrimaryHDU(cube[None], header=hdr).writeto(tmp_path / "cube.fits")
    args = parser.parse_args(
        [
            "scfind",
            str(tmp_path / "cube.fits"),
            "-o",
            str(tmp_path / "mask.fits"),
            "--kernels-xy",
            "0,3",
            "--kernelsZ",
            "0,3",
            "--threshold",
            "4",
            "--device",
            "cpu",
            "-q",
        ]
    )
    assert args.func(args) == 0
    with fits.open(tmp_path / "mask.fits") as h:
        np.testing.assert_array_equal(h[0].data, want)
        assert h[0].header["CTYPE3"] == "FREQ"


@pytest.mark.parametrize("slab_planes", [None, 7])
def test_core_returns_the_detected_bit_only_when_asked(rng, device, slab_planes):
    """`_scfind(detected=False)` returns the final mask (bit 0 alone) with no pass of the
    caller's, equal to bit 0 of the `detected=True` mask, from a fresh zero mask (the GPU engine
    then maps its pages beside the device work) and from a mask with voxels set; resident on the
    device and in slabs (`slab_planes`, GPU only)."""
    from skyconv import _core
    from skyconv.cube import _setup

    cube = make_cube(rng, shape=(40, 48, 56))
    cube[10:14, 20:26, 20:26] += 3.0
    run = _setup(
        3, cube.shape, (0, 3), (0, 3, 7), 4.0, 2.0, "mad", "negative", "boxcar", "boxcar",
        "constant", "sofia2",
    )  # fmt: skip
    given = np.zeros(cube.shape, np.uint8)
    given[30:33, 5:9, 5:9] = 1
    for start in (np.zeros(cube.shape, np.uint8), given):
        got = {}
        for detected in (True, False):
            m = start.copy()
            _core._scfind(
                cube, m, run.specs, run.edge_mode, run.threshold, False, tuple(run.replace),
                run.noise, run.sampling, slab_planes=slab_planes, device=device,
                exact=run.exact, detected=detected,
            )  # fmt: skip
            got[detected] = m
        both, final = got[True], got[False]
        assert set(np.unique(both)) == {0, 3} | ({1} if start.any() else set())
        assert set(np.unique(final)) == {0, 1}
        np.testing.assert_array_equal(final, both & 1)
        assert (final[start == 1] == 1).all()
