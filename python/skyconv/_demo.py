"""`skyconv demo`: run every public skyconv function and every compat layer (compat.healpy,
compat.sofia, compat.cygrid) on synthetic data, on each usable device, and print time and
agreement with the reference (healpy, scipy, Cygrid, or a plain NumPy computation) where it is
installed; "reference not installed (pip install 'skyconv[test]')" where it is not."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from . import backend_info, filters


@dataclass
class Row:
    task: str
    device: str
    seconds: float
    reference: str
    rel_err: float | None  # max |skyconv - ref| / max |ref|; None if the reference is missing
    metric: str = "max rel err"


def _rel(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    scale = float(np.max(np.abs(ref))) or 1.0
    return float(np.max(np.abs(got - ref))) / scale


def _timed(fn: Callable):
    fn()  # warm-up: thread pool start, NVRTC compile on first GPU use
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def demo_filters(devices: list[str]) -> Iterator[Row]:
    rng = np.random.default_rng(0)
    cube = rng.standard_normal((64, 256, 256)).astype(np.float32)
    try:
        import scipy.ndimage as ndi
    except ImportError:
        ndi = None
    cases = {
        "gaussian_filter1d(sigma=2.55, axis=1)": (
            lambda d: filters.gaussian_filter1d(cube, 2.55, axis=1, mode="constant", device=d),
            lambda: ndi.gaussian_filter1d(cube, 2.55, axis=1, mode="constant"),
        ),
        "uniform_filter1d(size=7, axis=0)": (
            lambda d: filters.uniform_filter1d(cube, 7, axis=0, mode="constant", device=d),
            lambda: ndi.uniform_filter1d(cube, 7, axis=0, mode="constant"),
        ),
    }
    for name, (ours, ref) in cases.items():
        expected = ref() if ndi is not None else None
        for d in devices:
            got, dt = _timed(lambda ours=ours, d=d: ours(d))
            err = _rel(got, expected) if expected is not None else None
            yield Row(f"filters.{name} on 64x256x256 f32", d, dt, "scipy.ndimage", err)


def demo_healpix(devices: list[str]) -> Iterator[Row]:
    from . import healpix

    rng = np.random.default_rng(1)
    theta = np.arccos(rng.uniform(-1, 1, 1_000_000))
    phi = rng.uniform(0, 2 * np.pi, 1_000_000)
    try:
        import healpy
    except ImportError:
        healpy = None
    for nest in (False, True):
        got, dt = _timed(lambda nest=nest: healpix.ang2pix(2048, theta, phi, nest=nest))
        err = None
        if healpy is not None:
            err = float(np.count_nonzero(got != healpy.ang2pix(2048, theta, phi, nest=nest)))
        scheme = "NEST" if nest else "RING"
        yield Row(
            f"healpix.ang2pix(2048, 1e6 points, {scheme})",
            "cpu",
            dt,
            "healpy",
            err,
            "pixels differing",
        )


def demo_sht(devices: list[str]) -> Iterator[Row]:
    from . import alm2map, map2alm

    nside, lmax = 256, 256
    rng = np.random.default_rng(5)
    size = (lmax + 1) * (lmax + 2) // 2
    alm = rng.standard_normal(size) + 1j * rng.standard_normal(size)
    alm[: lmax + 1] = alm[: lmax + 1].real  # m = 0 coefficients are real
    try:
        import healpy
    except ImportError:
        healpy = None
    ref = healpy.alm2map(alm, nside, lmax=lmax) if healpy is not None else None
    for d in devices:
        m, dt = _timed(lambda d=d: alm2map(alm, nside, lmax=lmax, device=d))
        err = float(np.linalg.norm(m - ref) / np.linalg.norm(ref)) if ref is not None else None
        yield Row(f"alm2map(nside {nside}, lmax {lmax})", d, dt, "healpy", err, "rel L2 err")
        back, dt = _timed(lambda d=d, m=m: map2alm(m, lmax=lmax, iter=3, device=d))
        err = float(np.linalg.norm(back - alm) / np.linalg.norm(alm))
        yield Row(
            "map2alm(iter=3) of that map: round trip", d, dt, "the input alm", err, "rel L2 err"
        )


def demo_grid(devices: list[str]) -> Iterator[Row]:
    from .grid import Sightlines, grid

    rng = np.random.default_rng(3)
    n = 200_000
    lons = rng.uniform(-2.5, 2.5, n) % 360.0
    lats = rng.uniform(-2.5, 2.5, n)
    centred = (lons + 180) % 360 - 180  # longitudes in (-180, 180]
    data = np.exp(-(centred**2) / 0.5 - lats**2 / 0.5) + 0.1 * rng.standard_normal(n)
    # A 100x100 grid of sightlines, 0.05 deg apart, across RA = 0.
    ty, tx = np.mgrid[-2.0:2.0:100j, -2.0:2.0:100j]
    target = Sightlines(tx.ravel() % 360.0, ty.ravel())
    sigma = 0.05
    maps = {}
    for d in devices:
        maps[d], dt = _timed(
            lambda d=d: (
                grid(
                    lons,
                    lats,
                    data,
                    target,
                    kernel="gauss1d",
                    kernel_params=(sigma,),
                    sphere_radius=3 * sigma,
                    dtype=np.float64,
                    device=d,
                ).cube
            )
        )
        if d == "cpu":
            err = _brute_force_check(lons, lats, data, target, sigma, maps[d])
            ref = "plain NumPy haversine sums (20 sightlines)"
        else:
            err = _rel(np.nan_to_num(maps[d]), np.nan_to_num(maps["cpu"]))
            ref = "the CPU engine"
        yield Row("grid(2e5 samples -> 1e4 sightlines, gauss1d)", d, dt, ref, err)


def _brute_force_check(lons, lats, data, target, sigma, gridded) -> float:
    """Plain float64 haversine sums at a few sightlines, against the gridded values."""
    errs = []
    for i in np.random.default_rng(4).integers(0, target.lons.size, 20):
        a, b, c, d = map(np.radians, (target.lons[i], target.lats[i], lons, lats))
        h = np.sin((d - b) / 2) ** 2 + np.cos(b) * np.cos(d) * np.sin((c - a) / 2) ** 2
        dist = np.degrees(2 * np.arcsin(np.sqrt(h)))
        k = np.where(dist < 3 * sigma, np.exp(-(dist**2) / (2 * sigma**2)), 0.0)
        ref = np.sum(k * data) / np.sum(k)
        errs.append(abs(gridded[i] - ref) / max(abs(ref), 1e-300))
    return float(max(errs))


def _synthetic_cube(shape=(48, 96, 96), seed=2):
    """Gaussian noise (sigma 1) with three Gaussian sources of peak 2-4 sigma."""
    rng = np.random.default_rng(seed)
    cube = rng.standard_normal(shape).astype(np.float32)
    z, y, x = np.indices(shape)
    for cz, cy, cx, amp in [(12, 30, 30, 4.0), (24, 60, 50, 3.0), (36, 40, 70, 2.0)]:
        cube += amp * np.exp(-((z - cz) ** 2 / 18 + (y - cy) ** 2 / 20 + (x - cx) ** 2 / 20))
    return cube


def demo_cube(devices: list[str]) -> Iterator[Row]:
    from . import atrous_denoise, smooth_and_clip

    cube = _synthetic_cube()
    masks = {}
    for d in devices:
        masks[d], dt = _timed(lambda d=d: smooth_and_clip(cube, device=d))
        diff = float(np.count_nonzero(masks[d] != masks["cpu"])) if d != "cpu" else None
        yield Row(
            f"smooth_and_clip(48x96x96, 12 kernels) -> {int(masks[d].sum())} voxels",
            d,
            dt,
            "the CPU engine" if d != "cpu" else "itself",
            diff,
            "voxels differing",
        )
    recon = {}
    for d in devices:
        recon[d], dt = _timed(lambda d=d: atrous_denoise(cube, dim=3, device=d))
        err = _rel(recon[d].data, recon["cpu"].data) if d != "cpu" else None
        yield Row(
            f"atrous_denoise(48x96x96, dim 3) -> {recon[d].iterations} iterations",
            d,
            dt,
            "the CPU engine" if d != "cpu" else "itself",
            err,
        )


def _healpy():
    try:
        import healpy
    except ImportError:
        return None
    return healpy


def _white_map(nside: int, lmax: int, seed: int) -> np.ndarray:
    """A map band-limited at lmax (unit-variance alm), RING order."""
    from . import alm2map

    rng = np.random.default_rng(seed)
    size = (lmax + 1) * (lmax + 2) // 2
    alm = (rng.standard_normal(size) + 1j * rng.standard_normal(size)) / np.sqrt(2.0)
    alm[: lmax + 1] = alm[: lmax + 1].real * np.sqrt(2.0)
    return alm2map(alm, nside, lmax=lmax, device="cpu")


def demo_smooth(devices: list[str]) -> Iterator[Row]:
    from . import smooth_map, split_kernel
    from .smooth import gauss_window

    nside, fwhm = 128, np.radians(2.0)
    m = _white_map(nside, 3 * nside - 1, 6)
    hp = _healpy()
    ref = hp.smoothing(m, fwhm=fwhm, iter=0, use_pixel_weights=False) if hp else None
    # (The ring method is not compared here: it is the real-space smoothing, ~1e-3 off
    # healpy's band-limited one at 4 px by the pixel grid, see skyconv.smooth.)
    for method in ("harmonic", "split"):
        for d in devices:
            got, dt = _timed(lambda d=d, k=method: smooth_map(m, fwhm, method=k, device=d))
            err = None if ref is None else float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
            yield Row(
                f"smooth_map(nside {nside}, fwhm 2 deg, method={method!r})",
                d,
                dt,
                "healpy",
                err,
                "rel L2 err",
            )
    window = gauss_window(fwhm, 3 * nside - 1)
    for d in devices:
        ks, dt = _timed(lambda d=d: split_kernel(window, nside, tol=1e-5, device=d))
        yield Row(
            f"split_kernel(nside {nside}, 2 deg): lcut {ks.lcut}, "
            f"theta_cut {np.degrees(ks.theta_cut):.2f} deg",
            d,
            dt,
            "its tol (1e-5)",
            float(ks.predicted_error),
            "predicted err",
        )


def demo_compat_healpy(devices: list[str]) -> Iterator[Row]:
    from .compat import healpy as chp

    nside, lmax = 64, 127
    m = _white_map(nside, lmax, 7)
    hp = _healpy()
    fwhm = np.radians(3.0)
    cases = {
        "compat.healpy.map2alm(iter=3)": (
            lambda: chp.map2alm(m, lmax=lmax, iter=3),
            (lambda: hp.map2alm(m, lmax=lmax, iter=3)) if hp else None,
        ),
        "compat.healpy.smoothing(fwhm 3 deg)": (
            lambda: chp.smoothing(m, fwhm=fwhm),
            (lambda: hp.smoothing(m, fwhm=fwhm)) if hp else None,
        ),
    }
    for name, (ours, ref) in cases.items():
        got, dt = _timed(ours)
        err = None
        if ref is not None:
            r = ref()
            err = float(np.linalg.norm(got - r) / np.linalg.norm(r))
        # compat.healpy runs where SKYCONV_DEVICE puts it (healpy's signature has no device).
        yield Row(f"{name} (nside {nside}, lmax {lmax})", "auto", dt, "healpy", err, "rel L2 err")


def _sofia1_reference(cube, kernels, threshold, scale):
    """SoFiA 1's S+C (docstring of compat.sofia.SCfinder_mem) in plain NumPy/scipy, rmsMode
    "std", spatial Gaussian kernels only: the mask after all kernels."""
    import scipy.ndimage as ndi

    from .compat.sofia import FWHM_CONST

    rms0 = np.sqrt(np.mean(cube.astype(np.float64) ** 2))
    mask = np.zeros(cube.shape, dtype=bool)
    for kx, ky in kernels:
        c = cube.astype(np.float64)
        c[mask] = np.sign(c[mask]) * scale * rms0
        if kx > 0:
            c = ndi.gaussian_filter1d(c, kx / FWHM_CONST, axis=2, mode="constant", truncate=4)
        if ky > 0:
            c = ndi.gaussian_filter1d(c, ky / FWHM_CONST, axis=1, mode="constant", truncate=4)
        rms = np.sqrt(np.mean(c**2))
        mask |= np.abs(c) >= threshold * rms
    return mask


def demo_compat_sofia(devices: list[str]) -> Iterator[Row]:
    from .compat import sofia

    cube = _synthetic_cube((32, 64, 64), seed=8)
    kernels = [(0, 0), (3, 3), (6, 6)]
    try:
        ref = _sofia1_reference(cube, kernels, 4.0, 2.0)
    except ImportError:
        ref = None
    for d in devices:

        def run(d=d):
            mask = np.zeros(cube.shape, dtype=np.int32)
            sofia.SCfinder_mem(
                cube,
                mask,
                {},
                kernels=[[kx, ky, 0, "b"] for kx, ky in kernels],
                threshold=4.0,
                rmsMode="std",
                device=d,
            )
            return mask

        mask, dt = _timed(run)
        diff = None if ref is None else float(np.count_nonzero((mask > 0) != ref))
        yield Row(
            f"compat.sofia.SCfinder_mem(32x64x64, 3 kernels) -> {int((mask > 0).sum())} voxels",
            d,
            dt,
            "NumPy/scipy S+C",
            diff,
            "voxels differing",
        )


def demo_compat_cygrid(devices: list[str]) -> Iterator[Row]:
    from .compat import cygrid as ccy

    rng = np.random.default_rng(9)
    n, sigma = 50_000, 0.05
    lons = rng.uniform(10.0, 12.0, n)
    lats = rng.uniform(-1.0, 1.0, n)
    data = np.sin(np.radians(lons) * 40) + 0.1 * rng.standard_normal(n)
    ty, tx = np.mgrid[-0.8:0.8:40j, 10.2:11.8:40j]
    target = type("T", (), {"lons": tx.ravel(), "lats": ty.ravel()})
    try:
        import cygrid as real
    except ImportError:
        real = None
    for d in devices:

        def run(mod=ccy, d=d):
            kw = {"device": d} if mod is ccy else {}
            g = mod.SlGrid(target.lons, target.lats, dtype=np.float64, **kw)
            g.set_kernel("gauss1d", (sigma,), 3 * sigma, sigma / 2)
            g.grid(lons, lats, data)
            return g.get_datacube()

        cube, dt = _timed(run)
        if real is not None:
            err, ref = _rel(cube, run(real)), "cygrid"
        else:
            err = _brute_force_check(lons, lats, data, target, sigma, cube)
            ref = "plain NumPy haversine sums (20 sightlines)"
        yield Row("compat.cygrid.SlGrid(5e4 samples -> 1600 sightlines)", d, dt, ref, err)


#: Every family's demo, in the order printed. Families append theirs here.
DEMOS: list[Callable[[list[str]], Iterator[Row]]] = [
    demo_filters,
    demo_healpix,
    demo_sht,
    demo_smooth,
    demo_grid,
    demo_cube,
    demo_compat_healpy,
    demo_compat_sofia,
    demo_compat_cygrid,
]

#: What the agreement column says when a reference library is missing.
NOT_INSTALLED = "reference not installed (pip install 'skyconv[test]')"


def run(devices: list[str] | None = None) -> list[Row]:
    """Run all demos, printing one line per (task, device); returns the rows."""
    info = backend_info()
    if devices is None:
        devices = ["cpu"] + (["cuda"] if info["cuda"]["available"] else [])
    cuda = info["cuda"]
    gpu = cuda["device_name"] if cuda["available"] else f"none ({cuda['reason']})"
    print(f"skyconv {info['version']}: {info['cpu_threads']} CPU threads; GPU: {gpu}")
    print(f"{'task':66s} {'device':6s} {'time':>9s}  agreement")
    rows = []
    for demo in DEMOS:
        for row in demo(devices):
            if row.rel_err is not None:
                agree = f"{row.metric} {row.rel_err:.3g} vs {row.reference}"
            elif row.reference == "itself":
                agree = "(reference run)"
            else:
                agree = f"{row.reference}: {NOT_INSTALLED}"
            print(f"{row.task:66s} {row.device:6s} {row.seconds * 1e3:7.1f}ms  {agree}", flush=True)
            rows.append(row)
    return rows
