"""1-D separable filters on a cube: skyconv.filters against scipy.ndimage and cupyx.scipy.ndimage.

The passes are the ones of one SoFiA Smooth+Clip kernel: a spatial Gaussian of FWHM 6 px
(sigma 2.55) along y and along x, and a spectral boxcar of 7 channels along z, with SoFiA's
``mode="constant"``, on a 128x512x512 float32 cube (axes z, y, x). ``filters.sc_kernel`` runs
the three passes in a row: skyconv as one ``skyconv.filters.chain`` call (on the GPU the cube
crosses the bus once each way, as the floor counts it), scipy and cupy as three calls.

All three libraries share the function names and signatures, so a pass is written once as
(function name, args, kwargs) and applied to whichever module.
"""

from __future__ import annotations

import importlib

import numpy as np

from ..harness import Case, Comparison, Context, Cupy, Host, Skyconv, SkyconvGpu, Work, register

SIGMA = 6.0 / np.sqrt(8.0 * np.log(2.0))  # FWHM 6 px: 2.548
BOX = 7
MODE = "constant"
SHAPE = (128, 512, 512)
QUICK_SHAPE = (16, 64, 64)

# name: (function, positional args, keyword args, taps)
PASSES = {
    "gauss_y": ("gaussian_filter1d", (SIGMA,), {"axis": 1}, 2 * int(4.0 * SIGMA + 0.5) + 1),
    "gauss_x": ("gaussian_filter1d", (SIGMA,), {"axis": 2}, 2 * int(4.0 * SIGMA + 0.5) + 1),
    "box_z": ("uniform_filter1d", (BOX,), {"axis": 0}, BOX),
}


def cube(ctx: Context) -> np.ndarray:
    """The shared input: Gaussian noise, float32, shape (z, y, x)."""
    shape = QUICK_SHAPE if ctx.quick else SHAPE
    return ctx.cache(
        ("filters.cube", shape),
        lambda: np.random.default_rng(1).standard_normal(shape, dtype=np.float32),
    )


def step(module: str, pass_name: str, **extra):
    """One pass as a step calling ``module.<function>`` (module imported at first call)."""
    fname, args, kwargs, _ = PASSES[pass_name]

    def call(a):
        fn = getattr(importlib.import_module(module), fname)
        return fn(a, *args, mode=MODE, **kwargs, **extra)

    call.__name__ = f"{module}.{fname}"
    return call


def chain_step(passes: list[str], device: str):
    """All passes as one ``skyconv.filters.chain`` call."""
    from skyconv import filters

    kinds = {"gaussian_filter1d": filters.Gaussian, "uniform_filter1d": filters.Uniform}
    specs = [kinds[PASSES[p][0]](*PASSES[p][1], mode=MODE, **PASSES[p][2]) for p in passes]

    def call(a):
        return filters.chain(a, specs, device=device)

    call.__name__ = "skyconv.filters.chain"
    return call


def skyconv_steps(passes: list[str], device: str) -> list:
    if len(passes) == 1:
        return [step("skyconv.filters", passes[0], device=device)]
    return [chain_step(passes, device)]


def work(passes: list[str]):
    """Floors: each pass reads and writes the cube once; the cube crosses the bus once."""

    def w(inputs: tuple) -> Work:
        a = inputs[0]
        total = Work(h2d_bytes=a.nbytes, d2h_bytes=a.nbytes)
        for p in passes:
            total += Work(bytes=2 * a.nbytes, flops=2 * PASSES[p][3] * a.size)
        return total

    return w


def filter_case(name: str, description: str, passes: list[str]) -> Case:
    """Register ``filters.<name>``: the passes, on CPU and GPU, against scipy and cupy."""
    return register(
        Case(
            name=f"filters.{name}",
            description=description,
            inputs=cube,
            work=work(passes),
            params={
                "passes": [
                    dict(zip(("function", "args", "kwargs", "taps"), PASSES[p])) for p in passes
                ],
                "mode": MODE,
                "shape": list(SHAPE),
                "quick_shape": list(QUICK_SHAPE),
            },
            comparisons=[
                Comparison(
                    "cpu",
                    Skyconv(skyconv_steps(passes, "cpu")),
                    Host(
                        "scipy.ndimage",
                        [step("scipy.ndimage", p) for p in passes],
                        requires=("scipy",),
                        threads=1,
                    ),
                ),
                Comparison(
                    "gpu",
                    SkyconvGpu(skyconv_steps(passes, "cuda")),
                    Cupy("cupyx.scipy.ndimage", [step("cupyx.scipy.ndimage", p) for p in passes]),
                ),
            ],
        )
    )


filter_case("gauss_y", "gaussian_filter1d sigma 2.55 (FWHM 6 px) along y", ["gauss_y"])
filter_case("gauss_x", "gaussian_filter1d sigma 2.55 (FWHM 6 px) along x", ["gauss_x"])
filter_case("box_z", "uniform_filter1d size 7 along z", ["box_z"])
filter_case(
    "sc_kernel",
    "one Smooth+Clip kernel: gauss y, gauss x, boxcar z in a row",
    ["gauss_y", "gauss_x", "box_z"],
)
