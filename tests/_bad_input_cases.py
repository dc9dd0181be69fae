"""The bad-input matrix of issue 17 as data: every public function × bad values, dtypes, shapes,
layouts, huge sizes, devices, threads and environment variables, each with its defined outcome.

A case is ``Case(name, call, expect)``: ``call(device)`` runs the function on ``device``
(``"cpu"`` or ``"cuda"``); ``expect`` is a :class:`Raises` (the exception derives from
``SkyconvError`` and from ``builtin``, and its message matches ``match``, which names the
argument) or an :class:`Ok` (the call returns and ``check(result, device)`` holds: a correct
result against scipy, healpy or a plain NumPy computation). ``HUGE`` cases may crash the
process today (aborts, panics, hours of work): tests/test_bad_input.py runs them in a child
process (``python tests/_bad_input_cases.py NAME ...`` prints one JSON line per case).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import skyconv
from skyconv import filters, healpix, stats
from skyconv.compat import cygrid as ccygrid
from skyconv.compat import healpy as chp
from skyconv.compat import sofia as csofia


@dataclass(frozen=True)
class Raises:
    """The call raises a skyconv error that is also a ``builtin`` and says ``match``."""

    builtin: type
    match: str


@dataclass(frozen=True)
class Ok:
    """The call returns; ``check(result, device)`` asserts it is right."""

    check: Callable[[Any, str], None]


@dataclass(frozen=True)
class Case:
    name: str
    call: Callable[[str], Any]
    expect: Raises | Ok
    #: Kinds of bad input the case is about (for the report): value, dtype, shape, layout,
    #: huge, device, threads, env.
    kind: str = "value"
    env: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------- inputs

RNG = np.random.default_rng(17)
X1 = RNG.standard_normal(64)
X2 = RNG.standard_normal((16, 24))
CUBE = RNG.standard_normal((8, 16, 16)).astype(np.float32)
NSIDE = 8
NPIX = 12 * NSIDE**2
MAP = RNG.standard_normal(NPIX)
LMAX = 2 * NSIDE
ALM = skyconv.map2alm(MAP, lmax=LMAX, iter=0, device="cpu")
LONS = RNG.uniform(10, 12, 200)
LATS = RNG.uniform(-1, 1, 200)
SAMPLES = RNG.standard_normal(200)
SL = skyconv.Sightlines(np.array([11.0, 11.5]), np.array([0.0, 0.5]))


def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _bigendian(a):
    return a.astype(a.dtype.newbyteorder(">"))


def _close(ref, rtol=1e-6, atol=1e-9):
    def check(got, device):
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=rtol, atol=atol)

    return check


def _scipy_g1d(a, sigma, axis=-1):
    import scipy.ndimage as ndi

    return ndi.gaussian_filter1d(np.asarray(a, dtype=np.float64), sigma, axis=axis)


def _scipy_u1d(a, size, axis=-1):
    import scipy.ndimage as ndi

    return ndi.uniform_filter1d(np.asarray(a, dtype=np.float64), size, axis=axis)


def _same_as(call):
    """The result equals ``call(device)`` (the plain, C-contiguous, native input)."""

    def check(got, device):
        want = call(device)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=0)

    return check


def _mask_same_as(call):
    def check(got, device):
        assert np.array_equal(np.asarray(got), np.asarray(call(device)))

    return check


V, T, M = ValueError, TypeError, MemoryError
GPU = bool(skyconv.backend_info()["cuda"]["available"])


def _huge_ok(builtin_choices=(MemoryError, ValueError)):
    """Huge sizes: a HostMemoryError (MemoryError) naming the bytes, or an ArgumentError that
    names the argument and the limit; never an abort, a panic or hours of work."""
    return Raises(builtin_choices, r"(?i)bytes|limit|at most|too large|must be|<=|exceeds")


# ---------------------------------------------------------------------------------- cases


def _cases() -> list[Case]:
    c: list[Case] = []
    add = c.append

    # -- devices (every compute function goes through the one rule)
    for name, fn in {
        "gaussian_filter1d": lambda d: filters.gaussian_filter1d(X1, 2.0, device=d),
        "smooth_map": lambda d: skyconv.smooth_map(MAP, fwhm=0.3, method="harmonic", device=d),
        "alm2map": lambda d: skyconv.alm2map(ALM, NSIDE, device=d),
        "smooth_and_clip": lambda d: skyconv.smooth_and_clip(CUBE, device=d),
        "grid": lambda d: skyconv.grid(LONS, LATS, SAMPLES, SL, kernel_params=0.3, device=d),
    }.items():
        for bad, exc, match in [
            (1, T, r"device must be a str like 'auto', 'cpu', 'cuda' or 'cuda:N'.*got int 1"),
            (1.5, T, r"device must be a str.*got float"),
            ("tpu", V, r"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'tpu'"),
            ("cuda:x", V, r"device must be .*N a GPU number"),
            ("cuda:-1", V, r"device must be"),
        ]:
            add(
                Case(
                    f"{name}-device={bad!r}",
                    lambda d, fn=fn, bad=bad: fn(bad),
                    Raises(exc, match),
                    "device",
                )
            )
        add(
            Case(
                f"{name}-device='cuda:99'",
                lambda d, fn=fn: fn("cuda:99"),
                Raises(skyconv.DeviceError, r"99|GPU|CUDA|cuda"),
                "device",
            )
        )
        # "gpu" is the default GPU: a result where one works, a DeviceError saying why not.
        add(
            Case(
                f"{name}-device='gpu'",
                lambda d, fn=fn: fn("gpu"),
                Ok(lambda r, d: None) if GPU else Raises(skyconv.DeviceError, r"."),
                "device",
            )
        )
        add(
            Case(
                f"{name}-env-SKYCONV_DEVICE=tpu",
                lambda d, fn=fn: fn(None),
                Raises(V, r"SKYCONV_DEVICE.*'tpu'"),
                "env",
                env={"SKYCONV_DEVICE": "tpu"},
            )
        )

    # -- threads
    for bad, exc, match in [(0, V, r"\bn\b.*>= 1|\bn\b"), (-2, V, r"\bn\b"), (2.5, T, r"\bn\b")]:
        add(
            Case(
                f"set_num_threads({bad!r})",
                lambda d, b=bad: skyconv.set_num_threads(b),
                Raises(exc, match),
                "threads",
            )
        )
    add(
        Case(
            "set_num_threads('4')",
            lambda d: skyconv.set_num_threads("4"),
            Raises(T, r"\bn\b"),
            "threads",
        )
    )

    # -- environment variables read in Python
    add(
        Case(
            "env-SKYCONV_CACHE_DIR-is-a-file",
            lambda d: __import__("skyconv.smooth.cost", fromlist=["x"]).cache_path(),
            Raises(V, r"SKYCONV_CACHE_DIR must name a folder"),
            "env",
            env={"SKYCONV_CACHE_DIR": __file__},
        )
    )
    add(
        Case(
            "env-SKYCONV_RECALIBRATE=maybe",
            lambda d: __import__("skyconv._utils.args", fromlist=["x"]).env_flag(
                "SKYCONV_RECALIBRATE"
            ),
            Raises(V, r"SKYCONV_RECALIBRATE must be one of"),
            "env",
            env={"SKYCONV_RECALIBRATE": "maybe"},
        )
    )

    # -- filters
    g = filters.gaussian_filter1d
    u = filters.uniform_filter1d
    add(Case("gaussian_filter1d-sigma=-1", lambda d: g(X1, -1.0, device=d), Raises(V, "sigma")))
    add(Case("gaussian_filter1d-sigma=nan", lambda d: g(X1, np.nan, device=d), Raises(V, "sigma")))
    # scipy takes float(sigma): so does skyconv.
    add(
        Case(
            "gaussian_filter1d-sigma='2'",
            lambda d: g(X1, "2", device=d),
            Ok(_close(_scipy_g1d(X1, 2.0))),
        )
    )
    add(
        Case(
            "gaussian_filter1d-sigma=[1]",
            lambda d: g(X1, [1.0, 2.0], device=d),
            Raises((T, V), "sigma"),
        )
    )
    add(
        Case(
            "gaussian_filter1d-radius=-1",
            lambda d: g(X1, 1.0, radius=-1, device=d),
            Raises(V, "radius"),
        )
    )
    add(
        Case(
            "gaussian_filter1d-radius=1.5",
            lambda d: g(X1, 1.0, radius=1.5, device=d),
            Raises(T, "radius"),
        )
    )
    add(Case("gaussian_filter1d-axis=5", lambda d: g(X2, 1.0, axis=5, device=d), Raises(V, "axis")))
    add(
        Case(
            "gaussian_filter1d-axis=1.0",
            lambda d: g(X2, 1.0, axis=1.0, device=d),
            Raises(T, "axis"),
        )
    )
    add(
        Case(
            "gaussian_filter1d-mode='bogus'",
            lambda d: g(X1, 1.0, mode="bogus", device=d),
            Raises(V, "mode"),
        )
    )
    # Integer input is refused with the conversion to use (a float32 result would surprise).
    add(
        Case(
            "gaussian_filter1d-int-dtype",
            lambda d: g(np.arange(10), 1.0, device=d),
            Raises(T, r"input must be a float32 or float64 array.*astype"),
            "dtype",
        )
    )
    add(
        Case(
            "gaussian_filter1d-complex-dtype",
            lambda d: g(X1 + 1j, 1.0, device=d),
            Raises(T, r"input|dtype"),
            "dtype",
        )
    )
    add(
        Case(
            "gaussian_filter1d-str-input",
            lambda d: g("abc", 1.0, device=d),
            Raises(T, r"input|dtype"),
            "dtype",
        )
    )
    add(
        Case(
            "gaussian_filter1d-0-d",
            lambda d: g(np.float64(3.0), 1.0, device=d),
            Raises(V, r"input|dimension"),
            "shape",
        )
    )
    add(
        Case(
            "gaussian_filter1d-non-contiguous",
            lambda d: g(X2[:, ::2], 1.5, axis=0, device=d),
            Ok(_close(_scipy_g1d(X2[:, ::2], 1.5, axis=0))),
            "layout",
        )
    )
    add(
        Case(
            "gaussian_filter1d-read-only",
            lambda d: g(_readonly(X2), 1.5, device=d),
            Ok(_close(_scipy_g1d(X2, 1.5))),
            "layout",
        )
    )
    add(
        Case(
            "gaussian_filter1d-big-endian",
            lambda d: g(_bigendian(X2), 1.5, device=d),
            Ok(_close(_scipy_g1d(X2, 1.5))),
            "layout",
        )
    )
    add(
        Case(
            "gaussian_filter1d-fortran",
            lambda d: g(np.asfortranarray(X2), 1.5, device=d),
            Ok(_close(_scipy_g1d(X2, 1.5))),
            "layout",
        )
    )
    add(
        Case(
            "gaussian_filter1d-empty",
            lambda d: g(np.zeros((0, 5)), 1.0, device=d),
            Ok(lambda r, d: r.shape == (0, 5) or (_ for _ in ()).throw(AssertionError(r.shape))),
            "shape",
        )
    )
    add(Case("uniform_filter1d-size=0", lambda d: u(X1, 0, device=d), Raises(V, "size")))
    add(Case("uniform_filter1d-size=2.5", lambda d: u(X1, 2.5, device=d), Raises(T, "size")))
    add(
        Case(
            "uniform_filter1d-big-endian",
            lambda d: u(_bigendian(X2), 3, device=d),
            Ok(_close(_scipy_u1d(X2, 3))),
            "layout",
        )
    )
    add(
        Case(
            "correlate1d-empty-weights",
            lambda d: filters.correlate1d(X1, [], device=d),
            Raises(V, "weights"),
        )
    )
    add(
        Case(
            "correlate1d-nan-weights",
            lambda d: filters.correlate1d(X1, [1, np.nan], device=d),
            Raises(V, "weights"),
        )
    )
    add(Case("chain-not-a-pass", lambda d: filters.chain(X1, [3], device=d), Raises(T, "passes")))

    # -- stats
    add(
        Case("stats.noise-statistic", lambda d: stats.noise(CUBE, "median"), Raises(V, "statistic"))
    )
    add(
        Case(
            "stats.std-flux_range",
            lambda d: stats.std(CUBE, flux_range="up"),
            Raises(V, "flux_range"),
        )
    )
    add(Case("stats.std-stride=0", lambda d: stats.std(CUBE, stride=0), Raises(V, "stride")))
    add(
        Case(
            "stats.std-cadence-and-stride",
            lambda d: stats.std(CUBE, cadence=2, stride=2),
            Raises(V, "cadence"),
        )
    )
    add(Case("stats.histogram-edges", lambda d: stats.histogram(CUBE, [1.0]), Raises(V, "edges")))
    add(
        Case(
            "stats.fit_gaussian-lengths",
            lambda d: stats.fit_gaussian([1, 2], [1], (1, 1)),
            Raises(V, r"x and y"),
        )
    )

    # -- healpix
    add(Case("nside2npix(0)", lambda d: healpix.nside2npix(0), Raises(V, "nside")))
    add(Case("nside2npix(2.5)", lambda d: healpix.nside2npix(2.5), Raises(V, "nside")))
    add(Case("npix2nside(13)", lambda d: healpix.npix2nside(13), Raises(V, "npix")))
    add(Case("npix2nside('x')", lambda d: healpix.npix2nside("x"), Raises(T, "npix")))
    add(Case("pix2ang-ipix-out-of-range", lambda d: healpix.pix2ang(4, 192), Raises(V, "ipix")))
    add(Case("pix2ang-float-ipix", lambda d: healpix.pix2ang(4, 1.5), Raises(T, "ipix")))
    add(
        Case(
            "ang2pix-nest-not-pow2",
            lambda d: healpix.ang2pix(3, 0.1, 0.1, nest=True),
            Raises(V, "nside"),
        )
    )
    add(
        Case(
            "ang2pix-lat-out-of-range",
            lambda d: healpix.ang2pix(4, 0, 95, lonlat=True),
            Raises(V, "lat"),
        )
    )
    add(Case("nest2ring-nside=3", lambda d: healpix.nest2ring(3, 0), Raises(V, "nside")))

    # -- SHTs
    add(Case("alm2map-nside=0", lambda d: skyconv.alm2map(ALM, 0, device=d), Raises(V, "nside")))
    add(
        Case("alm2map-nside=2.0", lambda d: skyconv.alm2map(ALM, 2.0, device=d), Raises(T, "nside"))
    )
    add(
        Case(
            "alm2map-bad-alm-size",
            lambda d: skyconv.alm2map(ALM[:-1], NSIDE, device=d),
            Raises(V, r"alm"),
        )
    )
    add(
        Case(
            "alm2map-str-alm", lambda d: skyconv.alm2map("abc", NSIDE, device=d), Raises(T, r"alm")
        )
    )
    add(
        Case(
            "map2alm-lmax=-1", lambda d: skyconv.map2alm(MAP, lmax=-1, device=d), Raises(V, "lmax")
        )
    )
    add(
        Case(
            "map2alm-iter=-1", lambda d: skyconv.map2alm(MAP, iter=-1, device=d), Raises(V, "iter")
        )
    )
    add(
        Case(
            "map2alm-npix=13",
            lambda d: skyconv.map2alm(np.zeros(13), device=d),
            Raises(V, r"npix|maps|pixels"),
        )
    )
    add(
        Case(
            "map2alm-int-map",
            lambda d: skyconv.map2alm(np.arange(NPIX), lmax=LMAX, device=d),
            Raises(T, r"maps must be a float32 or float64"),
            "dtype",
        )
    )
    add(
        Case(
            "map2alm-big-endian",
            lambda d: skyconv.map2alm(_bigendian(MAP), lmax=LMAX, device=d),
            Ok(_close(skyconv.map2alm(MAP, lmax=LMAX, device="cpu"), 1e-10, 1e-10)),
            "layout",
        )
    )
    add(
        Case(
            "map2alm-read-only",
            lambda d: skyconv.map2alm(_readonly(MAP), lmax=LMAX, device=d),
            Ok(_close(skyconv.map2alm(MAP, lmax=LMAX, device="cpu"), 1e-10, 1e-10)),
            "layout",
        )
    )
    add(Case("almxfl-fl-str", lambda d: skyconv.almxfl(ALM, "x"), Raises(T, r"fl")))

    # -- smooth_map
    sm = skyconv.smooth_map
    add(
        Case(
            "smooth_map-method",
            lambda d: sm(MAP, fwhm=0.1, method="fast", device=d),
            Raises(V, "method"),
        )
    )
    add(Case("smooth_map-fwhm=-1", lambda d: sm(MAP, fwhm=-1.0, device=d), Raises(V, "fwhm")))
    add(Case("smooth_map-fwhm=nan", lambda d: sm(MAP, fwhm=np.nan, device=d), Raises(V, "fwhm")))
    add(Case("smooth_map-fwhm-str", lambda d: sm(MAP, fwhm="1deg", device=d), Raises(T, "fwhm")))
    add(Case("smooth_map-no-beam", lambda d: sm(MAP, device=d), Raises(V, r"fwhm.*beam_window")))
    add(Case("smooth_map-tol=0", lambda d: sm(MAP, fwhm=0.1, tol=0, device=d), Raises(V, "tol")))
    add(
        Case("smooth_map-tol-str", lambda d: sm(MAP, fwhm=0.1, tol="a", device=d), Raises(T, "tol"))
    )
    add(
        Case(
            "smooth_map-lmax=-1", lambda d: sm(MAP, fwhm=0.1, lmax=-1, device=d), Raises(V, "lmax")
        )
    )
    add(
        Case(
            "smooth_map-iter=1.5",
            lambda d: sm(MAP, fwhm=0.1, iter=1.5, device=d),
            Raises(T, "iter"),
        )
    )
    add(
        Case(
            "smooth_map-npix=13",
            lambda d: sm(np.zeros(13), fwhm=0.1, device=d),
            Raises(V, r"npix|m\b|pixels"),
        )
    )
    add(
        Case(
            "smooth_map-3-d",
            lambda d: sm(np.zeros((1, 1, NPIX)), fwhm=0.1, device=d),
            Raises(V, r"\bm\b"),
        )
    )
    add(
        Case(
            "smooth_map-int-dtype",
            lambda d: sm(np.arange(NPIX), fwhm=0.1, device=d),
            Raises(T, r"\bm\b"),
        )
    )
    add(
        Case(
            "smooth_map-nest-nside-3",
            lambda d: sm(np.zeros(108), fwhm=0.1, nest=True, device=d),
            Raises(V, "nest"),
        )
    )
    add(
        Case(
            "smooth_map-beam_window-3-d",
            lambda d: sm(MAP, beam_window=np.ones((2, 2, 2)), device=d),
            Raises(V, "beam_window"),
        )
    )
    add(
        Case(
            "smooth_map-beam_window-nan",
            lambda d: sm(MAP, beam_window=[1.0, np.nan], device=d),
            Raises(V, "beam_window"),
        )
    )
    add(
        Case(
            "smooth_map-big-endian",
            lambda d: sm(_bigendian(MAP), fwhm=0.3, method="harmonic", device=d),
            Ok(_same_as(lambda d: sm(MAP, fwhm=0.3, method="harmonic", device=d))),
            "layout",
        )
    )
    add(
        Case(
            "smooth_map-non-contiguous",
            lambda d: sm(np.stack([MAP, MAP], axis=1)[:, 0], fwhm=0.3, method="harmonic", device=d),
            Ok(_same_as(lambda d: sm(MAP, fwhm=0.3, method="harmonic", device=d))),
            "layout",
        )
    )

    # -- split_kernel
    sk = skyconv.split_kernel
    bw = np.exp(-0.5 * np.arange(3 * NSIDE) ** 2 * 0.01)
    add(Case("split_kernel-nside=0", lambda d: sk(bw, 0, device=d), Raises(V, "nside")))
    add(Case("split_kernel-tol=2", lambda d: sk(bw, NSIDE, tol=2, device=d), Raises(V, "tol")))
    add(
        Case(
            "split_kernel-theta_cut=4",
            lambda d: sk(bw, NSIDE, theta_cut=4.0, device=d),
            Raises(V, "theta_cut"),
        )
    )
    add(
        Case(
            "split_kernel-cl-negative",
            lambda d: sk(bw, NSIDE, cl=-np.ones(3 * NSIDE), device=d),
            Raises(V, r"\bcl\b"),
        )
    )

    # -- grid
    gr = skyconv.grid
    add(
        Case(
            "grid-kernel_params-missing",
            lambda d: gr(LONS, LATS, SAMPLES, SL, device=d),
            Raises(V, "kernel_params"),
        )
    )
    add(
        Case(
            "grid-kernel-int",
            lambda d: gr(LONS, LATS, SAMPLES, SL, kernel=1, kernel_params=0.3, device=d),
            Raises(T, "kernel"),
        )
    )
    add(
        Case(
            "grid-sphere_radius=0",
            lambda d: gr(LONS, LATS, SAMPLES, SL, kernel_params=0.3, sphere_radius=0, device=d),
            Raises(V, "sphere_radius"),
        )
    )
    add(
        Case(
            "grid-lons-2-d",
            lambda d: gr(LONS.reshape(2, -1), LATS, SAMPLES, SL, kernel_params=0.3, device=d),
            Raises(V, "lons"),
        )
    )
    add(
        Case(
            "grid-data-length",
            lambda d: gr(LONS, LATS, SAMPLES[:-1], SL, kernel_params=0.3, device=d),
            Raises(V, "data"),
        )
    )
    add(
        Case(
            "grid-target-str",
            lambda d: gr(LONS, LATS, SAMPLES, "sky", kernel_params=0.3, device=d),
            Raises(T, "target"),
        )
    )
    add(
        Case(
            "grid-dtype-int",
            lambda d: gr(LONS, LATS, SAMPLES, SL, kernel_params=0.3, dtype=np.int32, device=d),
            Raises(T, "dtype"),
        )
    )
    add(
        Case(
            "grid-healpix-nside=0",
            lambda d: gr(
                LONS, LATS, SAMPLES, skyconv.HealpixTarget(0), kernel_params=0.3, device=d
            ),
            Raises(V, "nside"),
        )
    )
    add(
        Case(
            "Gridder-result-before-grid",
            lambda d: skyconv.Gridder(SL, kernel_params=0.3, device=d).result(),
            Raises(RuntimeError, r"nothing has been gridded"),
        )
    )

    # -- smooth_and_clip
    sc = skyconv.smooth_and_clip
    add(
        Case(
            "smooth_and_clip-statistic",
            lambda d: sc(CUBE, statistic="x", device=d),
            Raises(V, "statistic"),
        )
    )
    add(
        Case(
            "smooth_and_clip-flux_range",
            lambda d: sc(CUBE, flux_range="x", device=d),
            Raises(V, "flux_range"),
        )
    )
    add(
        Case(
            "smooth_and_clip-1-d",
            lambda d: sc(np.zeros(10, np.float32), device=d),
            Raises(V, "cube"),
        )
    )
    add(
        Case(
            "smooth_and_clip-kernels_xy-negative",
            lambda d: sc(CUBE, kernels_xy=(-1,), device=d),
            Raises(V, "kernels_xy"),
        )
    )
    add(
        Case(
            "smooth_and_clip-mask-shape",
            lambda d: sc(CUBE, mask=np.zeros((2, 2), bool), device=d),
            Raises(V, "mask"),
        )
    )
    add(
        Case(
            "smooth_and_clip-progress-not-callable",
            lambda d: sc(CUBE, progress=3, device=d),
            Raises(T, "progress"),
        )
    )
    add(
        Case(
            "smooth_and_clip-big-endian",
            lambda d: sc(_bigendian(CUBE), device=d),
            Ok(_mask_same_as(lambda d: sc(CUBE, device=d))),
            "layout",
        )
    )
    add(
        Case(
            "smooth_and_clip-read-only",
            lambda d: sc(_readonly(CUBE), device=d),
            Ok(_mask_same_as(lambda d: sc(CUBE, device=d))),
            "layout",
        )
    )

    # -- atrous_denoise
    ad = skyconv.atrous_denoise
    add(Case("atrous_denoise-dim=4", lambda d: ad(CUBE, dim=4, device=d), Raises(V, "dim")))
    add(
        Case("atrous_denoise-filter", lambda d: ad(CUBE, filter="x", device=d), Raises(V, "filter"))
    )
    add(
        Case(
            "atrous_denoise-progress-not-callable",
            lambda d: ad(CUBE, progress=3, device=d),
            Raises(T, "progress"),
        )
    )

    # -- compat layers
    add(
        Case(
            "compat.healpy.smoothing-fwhm-str",
            lambda d: chp.smoothing(MAP, fwhm="x"),
            Raises(T, r"fwhm|sigma"),
        )
    )
    add(
        Case(
            "compat.healpy.map2alm-npix=13",
            lambda d: chp.map2alm(np.zeros(13)),
            Raises(V, r"npix|map|pixels"),
        )
    )
    add(
        Case(
            "compat.healpy.use_weights-both",
            lambda d: chp.map2alm(MAP, use_weights=True, use_pixel_weights=True),
            Raises(RuntimeError, "Either use pixel or ring weights"),
        )
    )
    add(
        Case(
            "compat.sofia-mask-float",
            lambda d: csofia.SCfinder_mem(CUBE, np.zeros(CUBE.shape), {}, device=d),
            Raises(T, "mask"),
        )
    )
    add(
        Case(
            "compat.sofia-mask-read-only",
            lambda d: csofia.SCfinder_mem(
                CUBE, _readonly(np.zeros(CUBE.shape, np.int32)), {}, device=d
            ),
            Raises(V, "mask"),
        )
    )
    add(
        Case(
            "compat.sofia-world-without-cdelt",
            lambda d: csofia.SCfinder_mem(
                CUBE,
                np.zeros(CUBE.shape, np.int32),
                {},
                kernels=[[1, 1, 1, "b"]],
                kernelUnit="world",
                device=d,
            ),
            Raises(KeyError, "CDELT"),
        )
    )
    add(
        Case(
            "compat.sofia-perSCkernel",
            lambda d: csofia.SCfinder_mem(
                CUBE, np.zeros(CUBE.shape, np.int32), {}, perSCkernel=True, device=d
            ),
            Raises(NotImplementedError, "perSCkernel"),
        )
    )

    def cyg(d, datacube=None):
        g = ccygrid.SlGrid(SL.lons, SL.lats, datacube=datacube, device=d)
        g.set_kernel("gauss1d", (0.3,), 0.9, 0.15)
        g.grid(LONS, LATS, SAMPLES)
        return g.get_datacube()

    add(
        Case(
            "compat.cygrid-read-only-datacube",
            lambda d: cyg(d, _readonly(np.zeros(2, np.float32))),
            Raises(V, "datacube"),
        )
    )
    add(
        Case(
            "compat.cygrid-grid-before-kernel",
            lambda d: ccygrid.SlGrid(SL.lons, SL.lats, device=d).grid(LONS, LATS, SAMPLES),
            Raises(RuntimeError, "kernel"),
        )
    )
    add(
        Case(
            "compat.cygrid-bad-kernel",
            lambda d: ccygrid.SlGrid(SL.lons, SL.lats, device=d).set_kernel("box", (1,), 1, 1),
            Raises(T, "Kernel type not understood: box"),
        )
    )  # Cygrid raises TypeError

    # -- degenerate parameters
    add(
        Case(
            "smooth_map-ring-fwhm=1e-9",
            lambda d: sm(MAP, fwhm=1e-9, method="ring", device=d),
            Ok(_close(sm(MAP, fwhm=1e-9, method="harmonic", device="cpu"), 1e-9, 1e-9)),
        )
    )

    return c


def _host_ram() -> int:
    """Bytes of physical memory of this host (0 where the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _lmax_past_ram(least: int) -> int:
    """An lmax whose complex128 alm need four times this host's memory (at least ``least``):
    a size that cannot fit on this machine, whatever its memory (a 24 GB CI runner or a
    256 GB GPU host, where lmax 60000's 29 GB really fit and ran for minutes)."""
    need = 4 * _host_ram() / 16  # coefficients
    return max(least, int(np.sqrt(2 * need)) + 1)


def _huge_cases() -> list[Case]:
    """Sizes that cannot fit or cannot finish: a clear skyconv error, before any work."""
    h = []
    add = h.append
    x = RNG.standard_normal(1000).astype(np.float32)
    g = filters.gaussian_filter1d
    add(Case("huge-gaussian_filter1d-sigma=1e9", lambda d: g(x, 1e9, device=d), _huge_ok(), "huge"))
    add(
        Case(
            "huge-gaussian_filter1d-radius=1e9",
            lambda d: g(x, 1.0, radius=10**9, device=d),
            _huge_ok(),
            "huge",
        )
    )
    add(
        Case(
            "huge-chain-sigma=1e9",
            lambda d: filters.chain(x, [filters.Gaussian(1e9)], device=d),
            _huge_ok(),
            "huge",
        )
    )
    add(
        Case(
            "huge-uniform_filter1d-size=1e12",
            lambda d: filters.uniform_filter1d(x, 10**12, device=d),
            _huge_ok(),
            "huge",
        )
    )
    add(
        Case(
            "huge-smooth_and_clip-kernels_xy=1e9",
            lambda d: skyconv.smooth_and_clip(CUBE, kernels_xy=(1e9,), kernels_z=(0,), device=d),
            _huge_ok(),
            "huge",
        )
    )
    add(
        Case(
            "huge-smooth_and_clip-kernels_z=1e9",
            lambda d: skyconv.smooth_and_clip(CUBE, kernels_xy=(0,), kernels_z=(10**9,), device=d),
            _huge_ok(),
            "huge",
        )
    )
    add(
        Case(
            "huge-SCfinder_mem-kernel=1e9",
            lambda d: csofia.SCfinder_mem(
                CUBE, np.zeros(CUBE.shape, np.int32), {}, kernels=[[1e9, 1e9, 0, "b"]], device=d
            ),
            _huge_ok(),
            "huge",
        )
    )
    add(
        Case(
            "huge-grid-HealpixTarget(2**20)",
            lambda d: skyconv.grid(
                LONS, LATS, SAMPLES, skyconv.HealpixTarget(2**20), kernel_params=0.3, device=d
            ),
            _huge_ok(),
            "huge",
        )
    )
    add(Case("huge-ring_info(2**29)", lambda d: healpix.ring_info(2**29), _huge_ok(), "huge"))
    add(
        Case(
            "huge-alm2map-nside=2**20",
            lambda d: skyconv.alm2map(ALM, 2**20, device=d),
            _huge_ok(),
            "huge",
        )
    )
    for label, lmax in (
        ("past-ram", _lmax_past_ram(60000)),
        ("1e6", max(10**6, _lmax_past_ram(0))),
        ("2**31", 2**31),
    ):
        add(
            Case(
                f"huge-map2alm-lmax={label}",
                lambda d, lm=lmax: skyconv.map2alm(MAP, lmax=lm, device=d),
                _huge_ok(),
                "huge",
            )
        )
    add(
        Case(
            "huge-smooth_map-harmonic-lmax=1e6",
            lambda d: skyconv.smooth_map(
                MAP, fwhm=0.1, method="harmonic", lmax=max(10**6, _lmax_past_ram(0)), device=d
            ),
            _huge_ok(),
            "huge",
        )
    )
    add(
        Case(
            "huge-compat.healpy.smoothing-lmax=past-ram",
            lambda d: chp.smoothing(MAP, fwhm=0.1, lmax=_lmax_past_ram(10**5)),
            _huge_ok(),
            "huge",
        )
    )
    add(
        Case(
            "huge-compat.healpy.alm2map-nside=2**20",
            lambda d: chp.alm2map(ALM, 2**20),
            _huge_ok(),
            "huge",
        )
    )
    add(
        Case(
            "huge-split_kernel-nside=2**20",
            lambda d: skyconv.split_kernel(np.ones(100), 2**20, device=d),
            Raises(ValueError, r"nside must be in 1\.\.8192"),
            "huge",
        )
    )
    return h


def _junk_calls() -> dict:
    """Every public function with good arguments (``device`` filled in by the test), for the
    junk-value sweep: each parameter in turn gets each of JUNK."""
    from skyconv import compat  # noqa: F401  (compat.healpy is imported above)

    return {
        "filters.gaussian_filter1d": (filters.gaussian_filter1d, {"input": X2, "sigma": 1.0}),
        "filters.uniform_filter1d": (filters.uniform_filter1d, {"input": X2, "size": 3}),
        "filters.correlate1d": (filters.correlate1d, {"input": X2, "weights": [1, 2, 1]}),
        "filters.convolve1d": (filters.convolve1d, {"input": X2, "weights": [1, 2, 1]}),
        "stats.std": (stats.std, {"data": CUBE}),
        "stats.mad": (stats.mad, {"data": CUBE}),
        "stats.gauss": (stats.gauss, {"data": CUBE}),
        "stats.noise": (stats.noise, {"data": CUBE}),
        "stats.histogram": (stats.histogram, {"data": CUBE, "edges": [-1, 0, 1]}),
        "stats.sofia1_rms": (stats.sofia1_rms, {"data": CUBE}),
        "healpix.nside2npix": (healpix.nside2npix, {"nside": 4}),
        "healpix.npix2nside": (healpix.npix2nside, {"npix": 192}),
        "healpix.pix2ang": (healpix.pix2ang, {"nside": 4, "ipix": 3}),
        "healpix.ang2pix": (healpix.ang2pix, {"nside": 4, "theta": 0.3, "phi": 0.2}),
        "healpix.ring_info": (healpix.ring_info, {"nside": 4}),
        "healpix.nest2ring": (healpix.nest2ring, {"nside": 4, "ipix": 3}),
        "alm2map": (skyconv.alm2map, {"alms": ALM, "nside": NSIDE}),
        "map2alm": (skyconv.map2alm, {"maps": MAP, "lmax": LMAX}),
        "almxfl": (skyconv.almxfl, {"alm": ALM, "fl": [1.0, 0.5]}),
        "smooth_map": (skyconv.smooth_map, {"m": MAP, "fwhm": 0.3, "method": "harmonic"}),
        "grid": (
            skyconv.grid,
            {"lons": LONS, "lats": LATS, "data": SAMPLES, "target": SL, "kernel_params": 0.3},
        ),
        "smooth_and_clip": (skyconv.smooth_and_clip, {"cube": CUBE}),
        "atrous_denoise": (skyconv.atrous_denoise, {"data": CUBE}),
        "compat.healpy.smoothing": (chp.smoothing, {"map_in": MAP, "fwhm": 0.3}),
        "compat.healpy.map2alm": (chp.map2alm, {"maps": MAP, "lmax": LMAX}),
        "compat.healpy.alm2map": (chp.alm2map, {"alms": ALM, "nside": NSIDE}),
    }


#: Junk for every parameter: wrong types, NaN, negative, out-of-int64, a list.
JUNK = {
    "None": None,
    "str": "x",
    "float": 1.5,
    "negative": -1,
    "list": [1, 2],
    "nan": float("nan"),
    "object": object(),
    "huge": 10**20,
}
#: Parameters the sweep leaves alone: private ones, the device (its own cases above), and
#: those handed to healpy, which fetches files from the network.
JUNK_SKIP = {"device", "_slab_planes", "use_pixel_weights", "pixwin", "datapath", "verbose"}

CASES = {c.name: c for c in _cases()}
JUNK_CALLS = _junk_calls()
HUGE = {c.name: c for c in _huge_cases()}


def outcome(case: Case, device: str) -> dict:
    """Run one case (with its environment variables set) and describe what happened."""
    old = {k: os.environ.get(k) for k in case.env}
    os.environ.update(case.env)
    t0 = time.perf_counter()
    try:
        result = case.call(device)
    except BaseException as e:  # noqa: BLE001 (a panic is a BaseException: report it)
        if isinstance(e, KeyboardInterrupt):
            raise
        return {
            "raised": True,
            "type": type(e).__name__,
            "mro": [k.__name__ for k in type(e).__mro__],
            "message": str(e),
            "seconds": time.perf_counter() - t0,
            "exc": e,
        }
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"raised": False, "result": result, "seconds": time.perf_counter() - t0}


def problems(case: Case, device: str, got: dict) -> list[str]:
    """What is wrong with ``got`` (an :func:`outcome`) for ``case``; empty when it is right."""
    exp = case.expect
    if isinstance(exp, Raises):
        if not got["raised"]:
            return [f"returned instead of raising {exp.builtin}"]
        out = []
        mro = set(got["mro"])
        builtins = exp.builtin if isinstance(exp.builtin, tuple) else (exp.builtin,)
        if "SkyconvError" not in mro:
            out.append(f"{got['type']} does not derive from SkyconvError")
        if not any(b.__name__ in mro for b in builtins):
            out.append(f"{got['type']} is not a {'/'.join(b.__name__ for b in builtins)}")
        import re

        if not re.search(exp.match, got["message"]):
            out.append(f"message {got['message']!r} does not match {exp.match!r}")
        return out
    if got["raised"]:
        return [f"raised {got['type']}: {got['message']}"]
    try:
        exp.check(got["result"], device)
    except AssertionError as e:
        return [f"wrong result: {e}"]
    return []


def _main(argv: list[str]) -> None:
    """Child process: run HUGE cases by name on argv[0]'s device, one JSON line each (a
    "start" line first, so the parent knows which case killed the process)."""
    device, names = argv[0], argv[1:]
    for name in names:
        print(json.dumps({"start": name}), flush=True)
        got = outcome(HUGE[name], device)
        got.pop("result", None)
        got.pop("exc", None)
        got["problems"] = problems(HUGE[name], device, {**got, "result": None})
        print(json.dumps({"name": name, **got}), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
