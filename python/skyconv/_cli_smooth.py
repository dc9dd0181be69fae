"""``skyconv smooth``: smooth a HEALPix map FITS file with a Gaussian beam or a beam window.

Maps are read and written as healpy-compatible HEALPix binary tables (see ``_cli_sht``): the
output keeps the input's ORDERING (NESTED maps are smoothed with ``nest=True``). ``--fwhm``
takes a number with a unit: ``5arcmin``, ``0.5deg``, ``1.2e-3rad`` (a bare number is
arcmin); ``--beam-window`` a text file of b_l (one per line, l = 0, 1, ...). Wired into
``skyconv.cli`` with ``add_parser(subparsers)``; ``run(args)`` does the work.
"""

from __future__ import annotations

import argparse
import re

import numpy as np

_UNITS = {
    "arcmin": np.pi / 180 / 60,
    "amin": np.pi / 180 / 60,
    "'": np.pi / 180 / 60,
    "arcsec": np.pi / 180 / 3600,
    "asec": np.pi / 180 / 3600,
    '"': np.pi / 180 / 3600,
    "deg": np.pi / 180,
    "d": np.pi / 180,
    "rad": 1.0,
    "": np.pi / 180 / 60,
}


def parse_angle(text: str) -> float:
    """An angle with a unit (arcmin, arcsec, deg, rad; none = arcmin) in radians."""
    m = re.fullmatch(r"\s*([-+0-9.eE]+)\s*([a-zA-Z'\"]*)\s*", text)
    if m is None or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(
            f"cannot read the angle {text!r}: give a number and arcmin, arcsec, deg or rad"
        )
    try:
        value = float(m.group(1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read the angle {text!r}") from None
    return value * _UNITS[m.group(2).lower()]


def add_parser(subparsers) -> None:
    """Add the ``smooth`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "smooth",
        help="smooth a HEALPix map with a beam (FITS in, FITS out)",
        description="HEALPix map FITS (healpy.write_map layout, any number of columns, each "
        "smoothed as a spin-0 map) -> smoothed map FITS in the same ordering.",
    )
    p.add_argument("input", help="map FITS file")
    p.add_argument("output", help="map FITS file to write")
    beam = p.add_mutually_exclusive_group(required=True)
    beam.add_argument(
        "--fwhm", type=parse_angle, help="Gaussian FWHM with a unit: 5arcmin, 0.5deg, 0.001rad"
    )
    beam.add_argument("--beam-window", help="text file of the beam window b_l, one per line")
    p.add_argument(
        "--method",
        default="auto",
        choices=["auto", "harmonic", "ring", "split"],
        help="smoothing method (default auto)",
    )
    p.add_argument("--lmax", type=int, default=None, help="band limit (default 3*nside-1)")
    p.add_argument("--tol", type=float, default=1e-5, help="accuracy (default 1e-5)")
    p.add_argument("--iter", type=int, default=0, help="map2alm Jacobi iterations (default 0)")
    p.add_argument("--device", default=None, help="auto, cpu or cuda (default: SKYCONV_DEVICE)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.set_defaults(func=run, command="smooth")


def _read(path: str):
    """(maps (ncomp, npix) as stored, column names, nested?)."""
    from astropy.io import fits

    with fits.open(path) as hdul:
        hdu = next((h for h in hdul[1:] if isinstance(h, fits.BinTableHDU)), None)
        if hdu is None:
            raise ValueError(f"{path}: no binary table with a HEALPix map")
        names = [c.name for c in hdu.columns]
        cols = [np.asarray(hdu.data.field(i), dtype=np.float64).ravel() for i in range(len(names))]
        nside = hdu.header.get("NSIDE")
        nested = str(hdu.header.get("ORDERING", "RING")).strip().upper().startswith("NEST")
    maps = np.stack(cols)
    if nside is not None and 12 * int(nside) ** 2 != maps.shape[1]:
        raise ValueError(f"{path}: NSIDE={nside} but the columns hold {maps.shape[1]} pixels")
    return maps, names, nested


def _write(path: str, maps, names, nested: bool, overwrite: bool) -> None:
    from astropy.io import fits

    nside = int(round(np.sqrt(maps.shape[1] / 12)))
    cols = [fits.Column(name=n, format="D", array=m) for n, m in zip(names, maps, strict=True)]
    hdu = fits.BinTableHDU.from_columns(cols)
    h = hdu.header
    h["PIXTYPE"] = ("HEALPIX", "HEALPIX pixelisation")
    h["ORDERING"] = ("NESTED" if nested else "RING", "Pixel ordering scheme, RING or NESTED")
    h["EXTNAME"] = "xtension"
    h["NSIDE"] = (nside, "Resolution parameter of HEALPIX")
    h["FIRSTPIX"] = (0, "First pixel # (0 based)")
    h["LASTPIX"] = (maps.shape[1] - 1, "Last pixel # (0 based)")
    h["INDXSCHM"] = ("IMPLICIT", "Indexing: IMPLICIT or EXPLICIT")
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path, overwrite=overwrite)


def run(args: argparse.Namespace) -> int:
    """Run ``skyconv smooth`` with parsed arguments."""
    import os

    from .smooth import smooth_map

    if os.path.exists(args.output) and not args.overwrite:
        raise OSError(f"{args.output} exists (use --overwrite to replace it)")
    maps, names, nested = _read(args.input)
    window = None
    if args.beam_window is not None:
        window = np.loadtxt(args.beam_window, dtype=np.float64, ndmin=1)
    out = smooth_map(
        maps,
        fwhm=args.fwhm,
        beam_window=window,
        lmax=args.lmax,
        nest=nested,
        tol=args.tol,
        method=args.method,
        iter=args.iter,
        device=args.device,
    )
    _write(args.output, out, names, nested, args.overwrite)
    return 0
