"""``skyconv smooth``: smooth a HEALPix map FITS file with a Gaussian beam or a beam window.

    skyconv smooth map.fits --fwhm 5arcmin --out smoothed.fits [--method auto --lmax L
                   --tol 1e-5 --iter 0 --device {auto,cpu,cuda} --threads N --overwrite -q]

Maps are read and written as healpy-compatible HEALPix binary tables (``healpy.write_map``'s
layout, any number of columns, each smoothed as a spin-0 map); the output keeps the input's
column names and ORDERING (NESTED maps are smoothed with ``nest=True``) and is read back by
``healpy.read_map``. ``--fwhm`` takes a number with a unit: ``5arcmin``, ``0.5deg``,
``1.2e-3rad``, ``30arcsec``; a bare number is read as arcmin (and says so on stderr).
``--beam-window`` is a text file of b_l (one per line, l = 0, 1, ...) or a FITS table whose
first column holds them (``healpy.write_cl``'s layout, as Planck's beam window files). The
output may also be given as a second positional argument (deprecated: use ``--out``).
"""

from __future__ import annotations

import argparse

from ..healpix import npix2nside
from . import _io
from ._common import (
    Progress,
    add_common,
    add_output,
    angle_type,
    before_work,
    output_path,
    verb_parser,
)
from ._common import parse_angle as _parse_angle


def parse_angle(text: str) -> float:
    """An angle with a unit (arcmin, arcsec, deg, rad; a bare number is arcmin) in radians.

    Raises
    ------
    argparse.ArgumentTypeError
        Not a number with a known unit.
    """
    return _parse_angle(text, "arcmin")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """The ``smooth`` verb's parser in ``subparsers`` (see :mod:`skyconv.cli.main`)."""
    p = verb_parser(
        subparsers, "smooth", "smooth a HEALPix map with a beam (FITS in, FITS out)", __doc__
    )
    p.add_argument("input", help="map FITS file (healpy.write_map layout)")
    add_output(p, "map FITS file to write", positional=True)
    beam = p.add_mutually_exclusive_group(required=True)
    beam.add_argument(
        "--fwhm",
        type=angle_type("arcmin"),
        help="Gaussian FWHM with a unit: 5arcmin, 0.5deg, 0.001rad (bare number: arcmin)",
    )
    beam.add_argument(
        "--beam-window",
        help="the beam window b_l: a text file (one per line) or a FITS table (healpy.write_cl)",
    )
    p.add_argument(
        "--method",
        default="auto",
        choices=["auto", "harmonic", "ring", "split"],
        help="smoothing method (default auto)",
    )
    p.add_argument("--lmax", type=int, default=None, help="band limit (default 3*nside-1)")
    p.add_argument("--tol", type=float, default=1e-5, help="accuracy (default 1e-5)")
    p.add_argument("--iter", type=int, default=0, help="map2alm Jacobi iterations (default 0)")
    add_common(p)
    p.set_defaults(func=run, command="smooth")
    return p


def run(args: argparse.Namespace) -> int:
    """Smooth the maps of ``args.input`` and write them to ``--out``.

    The verb contract of :mod:`skyconv.cli.main` (0 returned; errors raised, the command line's
    and the outputs' before any work); an input that cannot be read as a HEALPix map is an
    ``InputFileError`` (exit status 1).
    """
    import skyconv

    out = output_path(args, "smooth")
    inputs = [(args.input, "input"), (args.beam_window, "--beam-window")]
    device, where = before_work(args, [(out, "--out")], inputs)
    say = Progress("smooth", args.quiet)
    say.note_bare("--fwhm", args.fwhm, "arcmin")
    maps, names, nested = _io.read_healpix(args.input)
    window = None
    if args.beam_window is not None:
        window = _io.read_window(args.beam_window)
    nside = npix2nside(maps.shape[1])
    with say.stage(f"{len(names)} map(s) at nside {nside}, method {args.method}, on {where}"):
        result = skyconv.smooth_map(
            maps,
            fwhm=None if args.fwhm is None else float(args.fwhm),
            beam_window=window,
            lmax=args.lmax,
            nest=nested,
            tol=args.tol,
            method=args.method,
            iter=args.iter,
            device=device,
        )
    _io.write_healpix(
        out,
        result,
        names,
        nested,
        args.overwrite,
        history=[f"skyconv smooth {args.input}: method={args.method} tol={args.tol}"],
    )
    say.say(f"smooth: wrote {out}")
    return 0
