"""`skyconv grid`: grid a table of samples onto a FITS header's map or a HEALPix map.

    skyconv grid samples.fits --header target.hdr --sigma 0.0177 --out cube.fits

Samples: any table astropy reads (FITS binary table, ECSV, CSV, ...) or a NumPy ``.npz``.
Columns (``--lon``, ``--lat``, ``--data``, ``--weights``) default to the first of
LON/RA/GLON/RAJ2000, LAT/DEC/GLAT/DEJ2000 (any case) and DATA/FLUX/VALUE/SPECTRUM; a vector
column (or several ``--data`` columns) makes a spectral cube. Angles in degrees.

Target: ``--header`` a FITS header as text (``fits.Header.totextfile``) or a FITS file whose
first header is used (NAXIS1, NAXIS2 and the celestial WCS), or ``--nside`` for HEALPix
(``--nest``). Output: ``--out`` FITS with the cube in the primary HDU (spatial WCS of the
target) and the weights in a ``WEIGHTS`` extension, or ``.npz`` (cube, weights, unweighted).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

LON_NAMES = ("lon", "ra", "glon", "raj2000", "lons")
LAT_NAMES = ("lat", "dec", "glat", "dej2000", "lats")
DATA_NAMES = ("data", "flux", "value", "spectrum", "tb", "intensity")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``grid`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser(
        "grid",
        help="grid a table of samples onto a FITS header's map or a HEALPix map",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("samples", help="table of samples (FITS table, ECSV, CSV, ... or .npz)")
    tgt = p.add_mutually_exclusive_group(required=True)
    tgt.add_argument("--header", help="target FITS header (text file or FITS file)")
    tgt.add_argument("--nside", type=int, help="HEALPix target nside (all pixels)")
    p.add_argument("--nest", action="store_true", help="HEALPix NEST ordering (default RING)")
    p.add_argument("--out", required=True, help="output file (.fits or .npz)")
    p.add_argument("--lon", help="longitude column (degrees)")
    p.add_argument("--lat", help="latitude column (degrees)")
    p.add_argument("--data", action="append", help="data column(s); repeat for channels")
    p.add_argument("--weights", help="weight column (optional)")
    p.add_argument(
        "--kernel", default="gauss1d", choices=["gauss1d", "gauss2d", "tapered_sinc", "gaussbessel"]
    )
    k = p.add_mutually_exclusive_group(required=True)
    k.add_argument("--sigma", type=float, help="kernel sigma in degrees")
    k.add_argument("--fwhm", type=float, help="kernel FWHM in degrees (sigma = FWHM/2.3548)")
    k.add_argument(
        "--kernel-params", help="comma-separated kernel parameters (degrees; gauss2d PA in radians)"
    )
    p.add_argument("--sphere-radius", type=float, help="degrees (default 3 sigma)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--device", default=None, help="auto, cpu or cuda (default: SKYCONV_DEVICE)")
    p.add_argument("--threads", type=int, help="CPU threads")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    p.set_defaults(func=run)
    return p


def _pick(names, wanted, choices, what):
    if wanted:
        if wanted not in names:
            raise ValueError(f"no column {wanted!r} in the samples (columns: {', '.join(names)})")
        return wanted
    lower = {n.lower(): n for n in names}
    for c in choices:
        if c in lower:
            return lower[c]
    raise ValueError(
        f"cannot find the {what} column among {', '.join(names)}: name it with --{what}"
    )


def read_samples(path: str, lon=None, lat=None, data=None, weights=None):
    """(lons, lats, data, weights or None) from a table file; see the module docs."""
    if path.endswith(".npz"):
        z = np.load(path)
        cols = {k: z[k] for k in z.files}
    else:
        from astropy.table import Table

        t = Table.read(path)
        cols = {n: np.asarray(t[n]) for n in t.colnames}
    names = list(cols)
    lon_c = _pick(names, lon, LON_NAMES, "lon")
    lat_c = _pick(names, lat, LAT_NAMES, "lat")
    data_c = data or [_pick(names, None, DATA_NAMES, "data")]
    for c in data_c:
        _pick(names, c, (), "data")
    if len(data_c) == 1:
        d = cols[data_c[0]]
    else:
        d = np.stack([cols[c] for c in data_c], axis=1)
    d = np.asarray(d)
    if d.dtype.kind != "f":
        d = d.astype(np.float64)
    w = None
    if weights:
        w = np.asarray(cols[_pick(names, weights, (), "weights")], dtype=d.dtype)
    return (
        np.asarray(cols[lon_c], dtype=np.float64),
        np.asarray(cols[lat_c], dtype=np.float64),
        d,
        w,
    )


def read_header(path: str):
    from astropy.io import fits

    try:
        return fits.getheader(path)
    except OSError:
        return fits.Header.fromtextfile(path)


def run(args) -> int:
    """Execute ``skyconv grid`` for parsed ``args``; returns the exit status."""
    import skyconv

    if args.threads is not None:
        skyconv.set_num_threads(args.threads)
    out = Path(args.out)
    if out.exists() and not args.overwrite:
        raise ValueError(f"{out} exists (use --overwrite)")
    if args.kernel_params:
        params = tuple(float(v) for v in args.kernel_params.split(","))
    elif args.fwhm is not None:
        params = (args.fwhm / np.sqrt(8 * np.log(2)),)
    else:
        params = (args.sigma,)
    lons, lats, data, weights = read_samples(
        args.samples, args.lon, args.lat, args.data, args.weights
    )
    if args.header:
        hdr = read_header(args.header)
        target = hdr
    else:
        hdr = None
        target = skyconv.HealpixTarget(args.nside, nest=args.nest)
    res = skyconv.grid(
        lons,
        lats,
        data,
        target,
        kernel=args.kernel,
        kernel_params=params,
        sphere_radius=args.sphere_radius,
        weights=weights,
        dtype=np.dtype(args.dtype),
        device=args.device,
    )
    if out.suffix == ".npz":
        np.savez(out, cube=res.cube, weights=res.weights, unweighted=res.unweighted)
    else:
        _write_fits(out, res, hdr, args)
    filled = np.isfinite(res.cube).mean() if res.cube.size else 0.0
    print(
        f"skyconv grid: {lons.size} samples -> {out} {res.cube.shape} {res.cube.dtype}, "
        f"{filled:.1%} of pixels filled"
    )
    return 0


def _write_fits(out: Path, res, hdr, args) -> None:
    from astropy.io import fits
    from astropy.wcs import WCS

    if hdr is not None:
        h = WCS(hdr).celestial.to_header()
    else:
        h = fits.Header()
        h["PIXTYPE"] = "HEALPIX"
        h["ORDERING"] = "NEST" if args.nest else "RING"
        h["NSIDE"] = args.nside
    h["KERNEL"] = args.kernel
    h["HISTORY"] = "gridded by skyconv.grid"
    prim = fits.PrimaryHDU(res.cube, header=h)
    wts = fits.ImageHDU(res.weights, header=h, name="WEIGHTS")
    fits.HDUList([prim, wts]).writeto(out, overwrite=args.overwrite)
