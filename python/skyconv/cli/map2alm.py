"""``skyconv map2alm``: the alm of a HEALPix map (FITS in, FITS out).

    skyconv map2alm map.fits --out alm.fits [--lmax L --mmax M --iter 3 --no-pol
                    --device {auto,cpu,cuda} --threads N --overwrite -q]

The map is read in ``healpy.write_map``'s layout (1 or 3 columns; NESTED maps are reordered to
RING); the alm are written as ``healpy.write_alm`` does. The output may also be given as a
second positional argument (deprecated: use ``--out``).
"""

from __future__ import annotations

import argparse

import numpy as np

from ..healpix import npix2nside
from . import _io
from ._common import (
    Progress,
    add_common,
    add_output,
    before_work,
    output_path,
    verb_parser,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """The ``map2alm`` verb's parser in ``subparsers`` (see :mod:`skyconv.cli.main`)."""
    p = verb_parser(subparsers, "map2alm", "alm of a HEALPix map (FITS in, FITS out)", __doc__)
    p.add_argument("input", help="map FITS file (1 or 3 columns)")
    add_output(p, "alm FITS file to write", positional=True)
    p.add_argument("--lmax", type=int, default=None, help="default 3*nside-1")
    p.add_argument("--mmax", type=int, default=None, help="default: lmax")
    p.add_argument("--iter", type=int, default=3, help="Jacobi iterations (default 3)")
    p.add_argument("--no-pol", action="store_true", help="spin-0 transform of every component")
    add_common(p)
    p.set_defaults(func=run, command="map2alm")
    return p


def run(args: argparse.Namespace) -> int:
    """Analyse the map in ``args.input`` and write its alm to ``--out``.

    The verb contract of :mod:`skyconv.cli.main` (0 returned; errors raised, the command line's
    and the outputs' before any work); an input that cannot be read as a HEALPix map is an
    ``InputFileError`` (exit status 1).
    """
    import skyconv

    out = output_path(args, "map2alm")
    device, where = before_work(args, [(out, "--out")], [(args.input, "input")])
    say = Progress("map2alm", args.quiet)
    maps, _, nested = _io.read_healpix(args.input)
    if nested:
        maps = _io.nest_to_ring(maps)
    maps = maps[0] if maps.shape[0] == 1 else maps
    nside = npix2nside(np.atleast_2d(maps).shape[1])
    lmax = args.lmax if args.lmax is not None else 3 * nside - 1
    mmax = args.mmax if args.mmax is not None else lmax
    with say.stage(f"map2alm nside {nside} -> lmax {lmax}, iter {args.iter}, on {where}"):
        alm = skyconv.map2alm(
            maps, lmax=lmax, mmax=mmax, iter=args.iter, pol=not args.no_pol, device=device
        )
    _io.write_alm(out, alm, lmax, mmax, overwrite=args.overwrite)
    say.say(f"map2alm: wrote {out}")
    return 0
