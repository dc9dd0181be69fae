"""``skyconv alm2map``: synthesise a HEALPix map from alm (FITS in, FITS out).

    skyconv alm2map alm.fits --nside 256 --out map.fits [--lmax L --mmax M --no-pol
                    --device {auto,cpu,cuda} --threads N --overwrite -q]

alm are read in ``healpy.write_alm``'s layout (one (INDEX, REAL, IMAG) table per component,
INDEX = l² + l + m + 1; 1 component, or 3 for T, E, B); the map is written as
``healpy.write_map`` does (RING, one column per component). The output may also be given as a
second positional argument (deprecated: use ``--out``).
"""

from __future__ import annotations

import argparse

import numpy as np

from . import _io
from ._common import (
    Progress,
    add_common,
    add_output,
    before_work,
    output_path,
    positive_int,
    verb_parser,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """The ``alm2map`` verb's parser in ``subparsers`` (see :mod:`skyconv.cli.main`)."""
    p = verb_parser(
        subparsers, "alm2map", "synthesise a HEALPix map from alm (FITS in, FITS out)", __doc__
    )
    p.add_argument("input", help="alm FITS file (healpy.write_alm layout)")
    add_output(p, "map FITS file to write", positional=True)
    p.add_argument("--nside", type=positive_int, required=True, help="output resolution")
    p.add_argument("--lmax", type=int, default=None, help="band limit (default: from the file)")
    p.add_argument("--mmax", type=int, default=None, help="default: lmax")
    p.add_argument("--no-pol", action="store_true", help="spin-0 transform of every component")
    add_common(p)
    p.set_defaults(func=run, command="alm2map")
    return p


def run(args: argparse.Namespace) -> int:
    """Synthesise the map of the alm in ``args.input`` and write it to ``--out``.

    The verb contract of :mod:`skyconv.cli.main` (0 returned; errors raised, the command line's
    and the outputs' before any work); an input that cannot be read as alm is an
    ``InputFileError`` (exit status 1).
    """
    import skyconv

    out = output_path(args, "alm2map")
    device, where = before_work(args, [(out, "--out")], [(args.input, "input")])
    say = Progress("alm2map", args.quiet)
    alm, lmax, mmax = _io.read_alm(args.input)
    if args.lmax is not None or args.mmax is not None:
        lmax2 = args.lmax if args.lmax is not None else lmax
        mmax2 = min(args.mmax if args.mmax is not None else lmax2, lmax2)
        alm = relayout(alm, lmax, mmax, lmax2, mmax2)
        lmax, mmax = lmax2, mmax2
    pol = not args.no_pol
    with say.stage(f"alm2map lmax {lmax} -> nside {args.nside} on {where}"):
        maps = skyconv.alm2map(alm, args.nside, lmax=lmax, mmax=mmax, pol=pol, device=device)
    _io.write_healpix(out, maps, nested=False, overwrite=args.overwrite, pol=pol)
    say.say(f"alm2map: wrote {out}")
    return 0


def relayout(alm, lmax, mmax, lmax2, mmax2):
    """alm re-laid from (lmax, mmax) to (lmax2, mmax2) in healpy's order, zero-padded or
    truncated."""
    a = np.atleast_2d(alm)
    out = np.zeros((a.shape[0], (mmax2 + 1) * (lmax2 + 1) - mmax2 * (mmax2 + 1) // 2), complex)
    for m in range(min(mmax, mmax2) + 1):
        n = min(lmax, lmax2) + 1 - m
        if n <= 0:
            continue
        src = m * (2 * lmax + 1 - m) // 2 + m
        dst = m * (2 * lmax2 + 1 - m) // 2 + m
        out[:, dst : dst + n] = a[:, src : src + n]
    return out[0] if np.ndim(alm) == 1 else out
