"""Small input files for every computing ``skyconv`` verb, shared by the other tests/cli/test_cli_*
files (this module holds no tests of its own)."""

from __future__ import annotations

import numpy as np

NSIDE = 8
LMAX = 8


def write_inputs(tmp_path, rng) -> dict:
    """Write one small input per verb; returns {verb: (argv without --out, patched name)}:
    the argv runs the verb, the name is the ``skyconv`` function it computes with."""
    hp = __import__("healpy")
    from astropy.io import fits

    m = rng.standard_normal(12 * NSIDE**2)
    hp.write_map(str(tmp_path / "map.fits"), m, dtype=np.float64)
    n = hp.Alm.getsize(LMAX)
    a = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    a[: LMAX + 1] = a[: LMAX + 1].real
    hp.write_alm(str(tmp_path / "alm.fits"), a)
    lon = rng.uniform(0, 360, 400)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, 400)))
    np.savez(tmp_path / "s.npz", lon=lon, lat=lat, data=rng.standard_normal(400))
    cube = rng.standard_normal((8, 12, 12)).astype(np.float32)
    fits.PrimaryHDU(cube).writeto(tmp_path / "cube.fits")
    t = str(tmp_path)
    return {
        "smooth": (["smooth", f"{t}/map.fits", "--fwhm", "10deg"], "smooth_map"),
        "alm2map": (["alm2map", f"{t}/alm.fits", "--nside", str(NSIDE)], "alm2map"),
        "map2alm": (["map2alm", f"{t}/map.fits", "--lmax", str(LMAX)], "map2alm"),
        "grid": (["grid", f"{t}/s.npz", "--nside", str(NSIDE), "--sigma", "10deg"], "grid"),
        "scfind": (
            ["scfind", f"{t}/cube.fits", "--kernels-xy", "0", "--kernels-z", "0,3"],
            "smooth_and_clip",
        ),
        "atrous": (["atrous", f"{t}/cube.fits"], "atrous_denoise"),
    }


VERBS = ("smooth", "alm2map", "map2alm", "grid", "scfind", "atrous")
