"""Map smoothing: skyconv.smooth_map against healpy.smoothing(iter=0).

Size from the issue: nside 2048, Gaussian FWHM 5 arcmin (quick: nside 64, FWHM 2 deg), a
white-noise RING map. The ring method (real-space, ARKCoS) and the harmonic method (map2alm,
beam, alm2map) on the CPU; the anchor is healpy on all the machine's cores. The ring method
differs from healpy by the beam's part beyond lmax and the pixel quadrature (see
skyconv.smooth), so its "rel err" is not a bug measure.

Floors of the ring method, from its plan (``skyconv._core._ring_plan_info``): real-FFT flops
(2.5 n log2 n) of the input and output rings and of one full-length transform per kernel ring,
plus 4 flops per spectral multiply-accumulate; bytes: the map read, the spectra written and
read, the result written (8 bytes a pixel each).
"""

from __future__ import annotations

import numpy as np

from ..harness import Case, Comparison, Context, Host, Skyconv, Work, register

NSIDE, FWHM_ARCMIN = 2048, 5.0
QUICK_NSIDE, QUICK_FWHM_ARCMIN = 64, 120.0


def sizes(ctx: Context) -> tuple[int, float]:
    ns, fw = (QUICK_NSIDE, QUICK_FWHM_ARCMIN) if ctx.quick else (NSIDE, FWHM_ARCMIN)
    return ns, np.radians(fw / 60.0)


def map_input(ctx: Context):
    nside, fwhm = sizes(ctx)

    def build():
        return np.random.default_rng(5).standard_normal(12 * nside**2)

    return (ctx.cache(("smooth.map", nside), build), fwhm)


def ring_work(inputs: tuple) -> Work:
    m, fwhm = inputs
    from skyconv import _core
    from skyconv.smooth import kernel_profile

    nside = round(np.sqrt(m.size / 12))
    theta, values = kernel_profile(fwhm=fwhm)
    info = _core._ring_plan_info(nside, theta, values)
    return Work(bytes=info["bytes"], flops=info["fft_flops"] + info["mac_flops"])


def harmonic_work(inputs: tuple) -> Work:
    m, _ = inputs
    nside = round(np.sqrt(m.size / 12))
    lmax = 3 * nside - 1
    nalm = (lmax + 1) * (lmax + 2) // 2
    # Two transforms at ~7 flops per (ring pair, l, m); map in, alm twice, map out.
    return Work(bytes=2 * m.nbytes + 2 * 16 * nalm, flops=2 * 7.0 * 2 * nside * nalm)


def sc_smooth(method):
    def call(m, fwhm):
        import skyconv

        return skyconv.smooth_map(m, fwhm=fwhm, method=method, iter=0, device="cpu")

    call.__name__ = f"skyconv.smooth_map[{method}]"
    return call


def hp_smooth(m, fwhm):
    import healpy

    return healpy.smoothing(m, fwhm=fwhm, iter=0)


for method, work in (("ring", ring_work), ("harmonic", harmonic_work)):
    register(
        Case(
            name=f"smooth.{method}",
            description=f"smooth_map(method={method!r}), nside 2048, FWHM 5 arcmin",
            inputs=map_input,
            work=work,
            comparisons=[
                Comparison(
                    "cpu",
                    Skyconv([sc_smooth(method)]),
                    Host("healpy", [hp_smooth], requires=("healpy",)),
                )
            ],
            params={
                "nside": NSIDE,
                "fwhm_arcmin": FWHM_ARCMIN,
                "quick_nside": QUICK_NSIDE,
                "quick_fwhm_arcmin": QUICK_FWHM_ARCMIN,
            },
        )
    )
