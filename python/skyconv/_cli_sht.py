"""``skyconv alm2map`` and ``skyconv map2alm``: spherical harmonic transforms of FITS files.

Files are healpy-compatible: maps are HEALPix binary tables (``healpy.write_map`` layout: one
column per component, ORDERING = RING or NESTED, NSIDE in the header; NESTED maps are reordered
to RING before the transform); alm are binary tables of (INDEX, REAL, IMAG) with
INDEX = l**2 + l + m + 1 (``healpy.write_alm``), one HDU per component. Wired into
``skyconv.cli`` with ``add_parser(subparsers)``; ``run(args)`` does the work.
"""

from __future__ import annotations

import argparse

import numpy as np


def add_parser(subparsers) -> None:
    """Add the ``alm2map`` and ``map2alm`` subcommands to an argparse subparsers object."""
    a = subparsers.add_parser(
        "alm2map",
        help="synthesise a HEALPix map from alm (FITS in, FITS out)",
        description="alm FITS (healpy.write_alm layout, 1 or 3 HDUs T,E,B) -> RING map FITS.",
    )
    a.add_argument("input", help="alm FITS file")
    a.add_argument("output", help="map FITS file to write")
    a.add_argument("--nside", type=int, required=True, help="output resolution")
    a.add_argument("--lmax", type=int, default=None, help="band limit (default: from the file)")
    a.add_argument("--mmax", type=int, default=None, help="default: lmax")
    a.add_argument("--no-pol", action="store_true", help="spin-0 transform of every component")
    a.add_argument("--device", default=None, help="auto, cpu or cuda (default: SKYCONV_DEVICE)")
    a.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    a.set_defaults(func=run, command="alm2map")

    m = subparsers.add_parser(
        "map2alm",
        help="alm of a HEALPix map (FITS in, FITS out)",
        description="HEALPix map FITS (healpy.write_map layout) -> alm FITS (healpy.write_alm).",
    )
    m.add_argument("input", help="map FITS file (1 or 3 columns)")
    m.add_argument("output", help="alm FITS file to write")
    m.add_argument("--lmax", type=int, default=None, help="default 3*nside-1")
    m.add_argument("--mmax", type=int, default=None, help="default: lmax")
    m.add_argument("--iter", type=int, default=3, help="Jacobi iterations (default 3)")
    m.add_argument("--no-pol", action="store_true", help="spin-0 transform of every component")
    m.add_argument("--device", default=None, help="auto, cpu or cuda (default: SKYCONV_DEVICE)")
    m.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    m.set_defaults(func=run, command="map2alm")


# ---------------------------------------------------------------------------------------------
# FITS I/O (astropy), healpy-compatible


def read_map(path: str) -> np.ndarray:
    """Maps of a HEALPix FITS binary table as float64 RING arrays: (npix,) or (ncomp, npix)."""
    from astropy.io import fits

    from . import healpix

    with fits.open(path) as hdul:
        hdu = next((h for h in hdul[1:] if isinstance(h, fits.BinTableHDU)), None)
        if hdu is None:
            raise ValueError(f"{path}: no binary table with a HEALPix map")
        hdr = hdu.header
        cols = [
            np.asarray(hdu.data.field(i), dtype=np.float64).ravel() for i in range(len(hdu.columns))
        ]
        nside = hdr.get("NSIDE")
        ordering = str(hdr.get("ORDERING", "RING")).strip().upper()
    maps = np.stack(cols)
    npix = maps.shape[1]
    if nside is not None and 12 * int(nside) ** 2 != npix:
        raise ValueError(f"{path}: NSIDE={nside} but the columns hold {npix} pixels")
    if ordering.startswith("NEST"):
        ns = int(round(np.sqrt(npix / 12)))
        ring_of_nest = healpix.nest2ring(ns, np.arange(npix))
        out = np.empty_like(maps)
        out[:, ring_of_nest] = maps
        maps = out
    return maps[0] if maps.shape[0] == 1 else maps


def write_map(path: str, maps: np.ndarray, overwrite: bool = False, pol: bool = True) -> None:
    """RING map(s) as a HEALPix binary table (healpy.write_map's layout, float64)."""
    from astropy.io import fits

    maps = np.atleast_2d(maps)
    nside = int(round(np.sqrt(maps.shape[1] / 12)))
    if maps.shape[0] == 3 and pol:
        names = ["I_STOKES", "Q_STOKES", "U_STOKES"]
    else:
        names = [f"SIGNAL{i}" if i else "SIGNAL" for i in range(maps.shape[0])]
    cols = [fits.Column(name=n, format="D", array=m) for n, m in zip(names, maps, strict=False)]
    hdu = fits.BinTableHDU.from_columns(cols)
    h = hdu.header
    h["PIXTYPE"] = ("HEALPIX", "HEALPIX pixelisation")
    h["ORDERING"] = ("RING", "Pixel ordering scheme, either RING or NESTED")
    h["EXTNAME"] = "xtension"
    h["NSIDE"] = (nside, "Resolution parameter of HEALPIX")
    h["FIRSTPIX"] = (0, "First pixel # (0 based)")
    h["LASTPIX"] = (maps.shape[1] - 1, "Last pixel # (0 based)")
    h["INDXSCHM"] = ("IMPLICIT", "Indexing: IMPLICIT or EXPLICIT")
    h["POLCCONV"] = ("COSMO", "Coord. convention for polarisation (COSMO/IAU)")
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path, overwrite=overwrite)


def read_alm(path: str) -> tuple[np.ndarray, int, int]:
    """alm HDUs (INDEX, REAL, IMAG) -> (alm (nalm,) or (ncomp, nalm), lmax, mmax)."""
    from astropy.io import fits

    comps = []
    with fits.open(path) as hdul:
        for h in hdul[1:]:
            if not isinstance(h, fits.BinTableHDU):
                continue
            idx = np.asarray(h.data.field(0), dtype=np.int64)
            re = np.asarray(h.data.field(1), dtype=np.float64)
            im = np.asarray(h.data.field(2), dtype=np.float64)
            comps.append((idx, re, im))
    if not comps:
        raise ValueError(f"{path}: no alm binary table")
    lmax = mmax = 0
    for idx, _, _ in comps:
        ell = np.floor(np.sqrt(idx - 1)).astype(np.int64)
        em = idx - ell * ell - ell - 1
        if np.any(em < 0) or np.any(em > ell):
            raise ValueError(f"{path}: bad alm INDEX values")
        lmax = max(lmax, int(ell.max()))
        mmax = max(mmax, int(em.max()))
    out = np.zeros((len(comps), (mmax + 1) * (lmax + 1) - mmax * (mmax + 1) // 2), complex)
    for c, (idx, re, im) in enumerate(comps):
        ell = np.floor(np.sqrt(idx - 1)).astype(np.int64)
        em = idx - ell * ell - ell - 1
        out[c, em * (2 * lmax + 1 - em) // 2 + ell] = re + 1j * im
    return (out[0] if len(comps) == 1 else out), lmax, mmax


def write_alm(path: str, alms: np.ndarray, lmax: int, mmax: int, overwrite: bool = False):
    """alm as healpy.write_alm does: one HDU per component with INDEX = l^2 + l + m + 1."""
    from astropy.io import fits

    alms = np.atleast_2d(alms)
    ell = np.concatenate([np.arange(m, lmax + 1) for m in range(mmax + 1)])
    em = np.concatenate([np.full(lmax + 1 - m, m) for m in range(mmax + 1)])
    index = ell * ell + ell + em + 1
    hdus = [fits.PrimaryHDU()]
    for a in alms:
        cols = [
            fits.Column(name="INDEX", format="J", array=index),
            fits.Column(name="REAL", format="D", array=a.real),
            fits.Column(name="IMAG", format="D", array=a.imag),
        ]
        h = fits.BinTableHDU.from_columns(cols)
        h.header["MAX-LPOL"] = (lmax, "Maximum L multipole order")
        h.header["MAX-MPOL"] = (mmax, "Maximum M multipole degree")
        hdus.append(h)
    fits.HDUList(hdus).writeto(path, overwrite=overwrite)


def run(args: argparse.Namespace) -> int:
    """Run ``skyconv alm2map`` or ``skyconv map2alm`` with parsed arguments."""
    from . import sht

    if args.command == "alm2map":
        alm, lmax, mmax = read_alm(args.input)
        if args.lmax is not None or args.mmax is not None:
            lmax2 = args.lmax if args.lmax is not None else lmax
            mmax2 = min(args.mmax if args.mmax is not None else lmax2, lmax2)
            alm = _truncate(alm, lmax, mmax, lmax2, mmax2)
            lmax, mmax = lmax2, mmax2
        maps = sht.alm2map(
            alm, args.nside, lmax=lmax, mmax=mmax, pol=not args.no_pol, device=args.device
        )
        write_map(args.output, maps, overwrite=args.overwrite, pol=not args.no_pol)
        return 0
    maps = read_map(args.input)
    alm = sht.map2alm(
        maps,
        lmax=args.lmax,
        mmax=args.mmax,
        iter=args.iter,
        pol=not args.no_pol,
        device=args.device,
    )
    npix = np.atleast_2d(maps).shape[1]
    lmax = args.lmax if args.lmax is not None else 3 * int(round(np.sqrt(npix / 12))) - 1
    mmax = args.mmax if args.mmax is not None else lmax
    write_alm(args.output, alm, lmax, mmax, overwrite=args.overwrite)
    return 0


def _truncate(alm, lmax, mmax, lmax2, mmax2):
    """Re-layout alm from (lmax, mmax) to (lmax2, mmax2), zero-padding or truncating."""
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
