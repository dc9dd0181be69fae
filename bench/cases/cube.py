"""Smooth-and-Clip (SoFiA's S+C finder) with the default 12 kernels: skyconv against the scipy
reference implementation (tests/_sofia_ref.py, SoFiA 1.3.2's algorithm with scipy.ndimage in
float32) and, on the GPU, against the same algorithm on cupyx.scipy.ndimage.

Kernels: spatial Gaussian FWHM {0, 3, 6} px × spectral boxcar {0, 3, 7, 15} channels,
threshold 5, replacement 2·rms, MAD noise of the negative values, constant (zero) edges.
Inputs: float32 Gaussian noise (σ = 1) with injected galaxies of different sizes and line
widths: 64 MB (64×512×512) and 256 MB (256×512×512), the CPU targets, and 2 GB
(500×1024×1024, the GPU target; GPU rows only, a CPU reference there takes minutes).

``cube.scfind_compat`` runs skyconv's ``compat.sofia.SCfinder_mem`` (same algorithm as the
reference: the masks agree); ``cube.scfind`` runs the native ``smooth_and_clip`` (SoFiA 2 rules:
strict threshold, copysign replacement, noise on every 999983rd voxel — the masks differ
slightly from the reference's).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ..harness import Case, Comparison, Context, Cupy, Host, Skyconv, SkyconvGpu, Work, register

KXY = (0, 3, 6)
KZ = (0, 3, 7, 15)
KERNELS = [[k, k, z, "b"] for k in KXY for z in KZ]
THRESHOLD = 5.0
FWHM = 2.0 * np.sqrt(2.0 * np.log(2.0))
SHAPE = (256, 512, 512)
SHAPE_64M = (64, 512, 512)
SHAPE_2G = (500, 1024, 1024)
QUICK_SHAPE = (16, 64, 64)
GALAXIES = [  # fractional z, y, x; sigma_z (channels), sigma_xy (pixels), peak S/N
    (0.2, 0.2, 0.2, 1.5, 1.5, 3.0),
    (0.6, 0.25, 0.75, 8.0, 1.5, 1.2),
    (0.3, 0.75, 0.25, 2.0, 5.0, 1.0),
    (0.7, 0.7, 0.7, 6.0, 4.0, 0.8),
    (0.5, 0.5, 0.5, 3.0, 2.5, 1.5),
]


def _reference():
    """tests/_sofia_ref.py (the one copy of the scipy reference)."""
    tests = Path(__file__).resolve().parents[2] / "tests"
    if str(tests) not in sys.path:
        sys.path.insert(0, str(tests))
    import _sofia_ref

    return _sofia_ref


def make_cube(shape) -> np.ndarray:
    rng = np.random.default_rng(6)
    cube = rng.standard_normal(shape, dtype=np.float32)
    for fz, fy, fx, sz, sxy, snr in GALAXIES:
        z0, y0, x0 = (int(f * n) for f, n in zip((fz, fy, fx), shape, strict=True))
        rz, rxy = int(4 * sz) + 1, int(4 * sxy) + 1
        zs = slice(max(0, z0 - rz), min(shape[0], z0 + rz + 1))
        ys = slice(max(0, y0 - rxy), min(shape[1], y0 + rxy + 1))
        xs = slice(max(0, x0 - rxy), min(shape[2], x0 + rxy + 1))
        z, y, x = np.ogrid[zs, ys, xs]
        g = np.exp(-0.5 * (((z - z0) / sz) ** 2 + ((y - y0) / sxy) ** 2 + ((x - x0) / sxy) ** 2))
        cube[zs, ys, xs] += (snr * g).astype(np.float32)
    return cube


def inputs(shape):
    def make(ctx: Context):
        s = QUICK_SHAPE if ctx.quick else shape
        return ctx.cache(("cube.scfind", s), lambda: make_cube(s))

    return make


def work(inputs: tuple) -> Work:
    """Per smoothed kernel: each pass reads and writes the cube; then read for the clip and
    the mask read and written. The cube goes up once, the mask comes down once."""
    a = inputs[0] if isinstance(inputs, tuple) else inputs
    total = Work(h2d_bytes=a.nbytes, d2h_bytes=a.size)
    for k in KXY:
        taps_xy = 2 * int(4.0 * k / FWHM + 0.5) + 1 if k else 0
        for z in KZ:
            passes = 2 * (k > 0) + (z > 0)
            flops = 2 * a.size * (2 * taps_xy + (2 if z else 0))
            total += Work(bytes=passes * 2 * a.nbytes + a.nbytes + 2 * a.size, flops=flops)
    return total


def scipy_reference(cube):
    mask = np.zeros(cube.shape, np.uint8)
    _reference().sofia1_scfind(
        cube,
        mask,
        KERNELS,
        threshold=THRESHOLD,
        maskScaleXY=2.0,
        rmsMode="mad",
        fluxRange="negative",
    )
    return mask


def skyconv_compat(device):
    def run(cube):
        from skyconv.compat import sofia

        mask = np.zeros(cube.shape, np.uint8)
        sofia.SCfinder_mem(
            cube,
            mask,
            {},
            0,
            kernels=KERNELS,
            threshold=THRESHOLD,
            maskScaleXY=2.0,
            rmsMode="mad",
            fluxRange="negative",
            device=device,
        )
        return mask

    run.__name__ = f"skyconv.compat.sofia.SCfinder_mem[{device}]"
    return run


def skyconv_native(device):
    def run(cube):
        import skyconv

        return skyconv.smooth_and_clip(
            cube,
            kernels_xy=KXY,
            kernels_z=KZ,
            threshold=THRESHOLD,
            replacement=2.0,
            statistic="mad",
            flux_range="negative",
            device=device,
        )

    run.__name__ = f"skyconv.smooth_and_clip[{device}]"
    return run


def cupy_reference(cube):
    """SoFiA 1's algorithm on cupy arrays (filters from cupyx.scipy.ndimage)."""
    import cupy as cp
    from cupyx.scipy import ndimage as cnd

    mask = cp.zeros(cube.shape, cp.uint8)
    nan = cp.isnan(cube)
    stride = max(1, int((float(cube.size) / 1e6) ** (1.0 / 3.0)))

    def rms(c):
        s = c[::stride, ::stride, ::stride]
        s = s[s < 0]
        return 1.4826 * float(cp.median(cp.abs(s)))

    rms0 = rms(cube)
    for kx, _, kz, _ in KERNELS:
        s = cp.where(nan, 0, cube)
        s = cp.where((mask > 0) & (s > 0), cp.float32(2.0 * rms0), s)
        s = cp.where((mask > 0) & (s < 0), cp.float32(-2.0 * rms0), s)
        if kx:
            s = cnd.gaussian_filter1d(s, kx / FWHM, axis=1, mode="constant")
            s = cnd.gaussian_filter1d(s, kx / FWHM, axis=2, mode="constant")
        if kz:
            s = cnd.uniform_filter1d(s, kz, axis=0, mode="constant")
        s[nan] = cp.nan
        mask |= (cp.abs(s) >= THRESHOLD * rms(s)).astype(cp.uint8)
    return mask


def scfind_case(name, description, shape, cpu=True):
    comparisons = []
    impl = skyconv_compat if name.endswith("compat") else skyconv_native
    if cpu:
        comparisons.append(
            Comparison(
                "cpu",
                Skyconv(impl("cpu")),
                Host(
                    "scipy.ndimage (tests/_sofia_ref.py)",
                    scipy_reference,
                    requires=("scipy",),
                    threads=1,
                ),
            )
        )
    comparisons.append(
        Comparison("gpu", SkyconvGpu(impl("cuda")), Cupy("cupyx.scipy.ndimage", cupy_reference))
    )
    return register(
        Case(
            name=name,
            description=description,
            inputs=inputs(shape),
            work=work,
            params={
                "kernels": KERNELS,
                "threshold": THRESHOLD,
                "replacement": 2.0,
                "noise": "mad of negative values",
                "shape": list(shape),
                "quick_shape": list(QUICK_SHAPE),
                "dtype": "float32",
            },
            comparisons=comparisons,
        )
    )


scfind_case("cube.scfind", "smooth_and_clip, default 12 kernels, 256 MB float32 cube", SHAPE)
scfind_case(
    "cube.scfind_64mb", "smooth_and_clip, default 12 kernels, 64 MB float32 cube", SHAPE_64M
)
scfind_case("cube.scfind_compat", "compat SCfinder_mem, default 12 kernels, 256 MB cube", SHAPE)
scfind_case(
    "cube.scfind_2gb", "smooth_and_clip, default 12 kernels, 2 GB float32 cube", SHAPE_2G, cpu=False
)
