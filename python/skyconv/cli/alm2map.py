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
    apply_threads,
    output_path,
    positive_int,
    resolve_device,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``alm2map`` verb to an argparse subparsers object.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers`` returned.

    Returns
    -------
    argparse.ArgumentParser
        The verb's parser; parsing sets ``command`` and ``func`` (:func:`run`).
    """
    p = subparsers.add_parser(
        "alm2map",
        help="synthesise a HEALPix map from alm (FITS in, FITS out)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by the parser :func:`add_parser` made.

    Returns
    -------
    int
        0 (errors are raised; :func:`skyconv.cli.run_verb` turns them into an exit status).

    Raises
    ------
    OutputExistsError, UsageError
        An output exists without ``--overwrite``, an input is missing, or the command line
        asks for something impossible: raised before any work (exit status 2).
    InputFileError
        An input file cannot be read as alm (exit status 1).
    skyconv.DeviceError
        ``cuda`` asked for and no GPU works (exit status 1), before any work.
    """
    import skyconv

    out = output_path(args, "alm2map")
    _io.check_output(out, args.overwrite)
    _io.check_input(args.input)
    _io.check_distinct([out], [args.input])
    device, where = resolve_device(args)
    apply_threads(args)
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
