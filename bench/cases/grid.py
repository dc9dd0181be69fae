"""Convolution gridding: skyconv.grid against Cygrid 2.0.4 (issue 5's benchmark).

Field 5 deg x 5 deg around (30, 40) deg, uniform random samples, a gauss1d kernel of FWHM 150"
(sigma = 150"/2.3548), sphere radius 3 sigma, onto a 300 x 300 SIN map of 60" pixels (each
sample reaches about 32 pixels). Continuum cases with 1e6, 1e7 and 1e8 samples (float32) and a
spectral case of 2e5 spectra x 1024 channels (float32, 0.8 GB).

Cygrid needs numpy<2, so it runs in its own interpreter: set ``SKYCONV_BENCH_CYGRID_PYTHON``
to a python with cygrid 2.0.4 (e.g. ``python3 -m venv v && v/bin/pip install 'numpy<2'
cygrid==2.0.4``; on the GPU machine bench/gpu/run.sh sets it up from ``.gpu-cygrid/``, see
bench/README.md); without it the anchor is skipped. Cygrid gets skyconv's thread count (it is
timed in ``_cygrid_worker.py`` with the same warm-up/repeat rules, WcsGrid construction
included). Its cube differs from skyconv's (exact) by up to a few 1e-3 relative: Cygrid's
HEALPix disc lookup misses samples near the sphere edge (checked against a brute-force sum in
tests/grid/test_grid.py's reference).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..harness import Case, Comparison, Context, Host, Skyconv, SkyconvGpu, Work, register

LON0, LAT0 = 30.0, 40.0
FIELD = 5.0  # degrees
PIX = 60.0 / 3600.0
NPIX = 300
SIGMA = 150.0 / 3600.0 / 2.3548
RADIUS = 3.0 * SIGMA


def header() -> dict:
    n = NPIX
    return {
        "NAXIS": 2,
        "NAXIS1": n,
        "NAXIS2": n,
        "CTYPE1": "RA---SIN",
        "CTYPE2": "DEC--SIN",
        "CRVAL1": LON0,
        "CRVAL2": LAT0,
        "CRPIX1": n / 2 + 0.5,
        "CRPIX2": n / 2 + 0.5,
        "CDELT1": -PIX,
        "CDELT2": PIX,
        "CUNIT1": "deg",
        "CUNIT2": "deg",
    }


def samples(n: int, nchan: int):
    """Uniform positions over the field (1 deg = cos(dec) in longitude) and N(0,1) data."""
    size = FIELD
    rng = np.random.default_rng(5)
    lats = LAT0 + rng.uniform(-size / 2, size / 2, n)
    lons = LON0 + rng.uniform(-size / 2, size / 2, n) / np.cos(np.radians(LAT0))
    shape = (n,) if nchan == 1 else (n, nchan)
    data = rng.standard_normal(shape, dtype=np.float32)
    return lons, lats, data


def pairs_per_sample() -> float:
    """Pixels within the sphere radius of a sample: pi r^2 / pixel area."""
    return np.pi * RADIUS**2 / PIX**2


def work(inputs: tuple) -> Work:
    lons, lats, data = inputs
    nchan = 1 if data.ndim == 1 else data.shape[1]
    pairs = lons.size * pairs_per_sample()
    in_bytes = lons.nbytes + lats.nbytes + data.nbytes
    # Per pair: distance (~12 flops), kernel (~20), and 2 multiply-adds per channel.
    return Work(
        bytes=in_bytes,
        flops=pairs * (32 + 4 * nchan),
        h2d_bytes=in_bytes,
        d2h_bytes=2 * 4 * nchan * NPIX * NPIX,
    )


def skyconv_step(device: str):
    hdr = header()

    def call(lons, lats, data):
        import skyconv

        return skyconv.grid(
            lons, lats, data, hdr, kernel_params=SIGMA, sphere_radius=RADIUS, device=device
        ).cube

    call.__name__ = f"skyconv.grid[{device}]"
    return call


class CygridVenv(Host):
    """Cygrid 2.0.4 in the interpreter named by SKYCONV_BENCH_CYGRID_PYTHON (numpy<2)."""

    def __init__(self):
        super().__init__("cygrid 2.0.4", [lambda *a: None])
        self.python = os.environ.get("SKYCONV_BENCH_CYGRID_PYTHON", "")

    def unavailable(self) -> str | None:
        if not self.python:
            return "SKYCONV_BENCH_CYGRID_PYTHON is not set (Cygrid needs its own numpy<2 venv)"
        try:
            subprocess.run(
                [self.python, "-c", "import cygrid"], check=True, capture_output=True, timeout=120
            )
        except (OSError, subprocess.SubprocessError) as e:
            return f"cannot import cygrid with {self.python}: {e}"
        return None

    def measure(self, inputs: tuple, settings):
        import skyconv

        self.threads = skyconv.get_num_threads()
        lons, lats, data = inputs
        worker = Path(__file__).with_name("_cygrid_worker.py")
        with tempfile.TemporaryDirectory() as tmp:
            src, out = Path(tmp, "in.npz"), Path(tmp, "cube.npy")
            np.savez(
                src,
                lons=lons,
                lats=lats,
                data=data,
                sigma=SIGMA,
                radius=RADIUS,
                header_json=json.dumps(header()),
            )
            args = [
                self.python,
                str(worker),
                str(src),
                str(out),
                str(self.threads),
                str(settings.warmup),
                str(settings.repeats),
                str(settings.min_time),
                str(settings.budget),
            ]
            env = {**os.environ, "OMP_NUM_THREADS": str(self.threads)}
            run = subprocess.run(args, check=True, capture_output=True, text=True, env=env)
            res = json.loads(run.stdout.strip().splitlines()[-1])
            cube = np.load(out)
        rec = self._record({"e2e": res["e2e"]})
        rec["versions"] = {"cygrid": res["cygrid"], "numpy": res["numpy"]}
        return cube, rec

    def describe(self) -> dict:
        d = super().describe()
        d["python"] = self.python or None
        d["executable_running_bench"] = sys.executable
        return d


def page_locked(inputs: tuple) -> tuple:
    """The same samples with the data rows in page-locked host memory (cupyx.empty_pinned, as a
    pipeline that reads into pinned buffers would hold them): they go up by DMA at the pinned
    rate instead of through the host copy that pageable memory needs. NumPy memory when cupy
    is missing (then the case repeats the pageable one)."""
    lons, lats, data = inputs
    try:
        import cupyx
    except ImportError:
        return inputs
    rows = cupyx.empty_pinned(data.shape, dtype=data.dtype)
    rows[...] = data
    return lons, lats, rows


def grid_case(
    name: str,
    n: int,
    quick_n: int,
    nchan: int = 1,
    quick_nchan: int = 1,
    pinned: bool = False,
) -> Case:
    def inputs(ctx: Context):
        size = (quick_n, quick_nchan) if ctx.quick else (n, nchan)
        got = ctx.cache(("grid.samples", *size), lambda: samples(*size))
        return page_locked(got) if pinned else got

    return register(
        Case(
            name=f"grid.{name}",
            description=(
                f'gauss1d FWHM 150" onto 300x300 60" pixels, {n:.0e} samples'
                + (f" x {nchan} channels" if nchan > 1 else "")
                + " (float32)"
                + (", data rows in page-locked memory" if pinned else "")
            ),
            inputs=inputs,
            work=work,
            params={
                "n": n,
                "nchan": nchan,
                "quick_n": quick_n,
                "quick_nchan": quick_nchan,
                "sigma_deg": SIGMA,
                "sphere_radius_deg": RADIUS,
                "pixel_deg": PIX,
                "npix": [NPIX, NPIX],
                "field_deg": FIELD,
                "centre_deg": [LON0, LAT0],
                "pairs_per_sample": pairs_per_sample(),
            },
            # Page-locked rows only change the GPU's upload: no CPU row, no second Cygrid run.
            comparisons=[Comparison("gpu", SkyconvGpu([skyconv_step("cuda")]))]
            if pinned
            else [
                Comparison("cpu", Skyconv([skyconv_step("cpu")]), CygridVenv()),
                Comparison("gpu", SkyconvGpu([skyconv_step("cuda")]), CygridVenv()),
            ],
        )
    )


grid_case("cont_1e6", 10**6, 10**4)
grid_case("cont_1e7", 10**7, 10**4)
grid_case("cont_1e8", 10**8, 10**4)
grid_case("spec_2e5x1024", 2 * 10**5, 2000, nchan=1024, quick_nchan=16)
grid_case("spec_2e5x1024_pinned", 2 * 10**5, 2000, nchan=1024, quick_nchan=16, pinned=True)
