"""``skyconv grid``: grid a table of samples onto a FITS header's map or a HEALPix map.

    skyconv grid samples.fits --header target.hdr --sigma 1.06arcmin --out cube.fits
    skyconv grid samples.npz --nside 1024 --fwhm 0.05deg --out map.fits

Samples: any table astropy reads (FITS binary table, ECSV, CSV, ...), a NumPy ``.npz`` or a
``.zarr`` group (one array per column). Columns (``--lon``, ``--lat``, ``--data``,
``--weights``) default to the first of LON/RA/GLON/RAJ2000, LAT/DEC/GLAT/DEJ2000 (any case) and
DATA/FLUX/VALUE/SPECTRUM/TB/INTENSITY; a vector column (or several ``--data`` columns) makes a
spectral cube. Sample coordinates in degrees.

Kernel: ``--sigma``, ``--fwhm`` or ``--sphere-radius`` take a number with a unit (``2arcmin``,
``0.05deg``, ``30arcsec``, ``1e-3rad``); a bare number is read as degrees (and says so on
stderr). ``--kernel-params`` are comma-separated numbers in degrees (gauss2d PA in radians).

Target: ``--header`` a FITS header as text (``fits.Header.totextfile``) or a FITS file whose
first header is used (NAXIS1, NAXIS2 and the celestial WCS), or ``--nside`` for HEALPix
(``--nest``). Output ``--out``: ``.fits`` (a WCS target: the cube in the primary HDU with the
target's celestial WCS and the weights in a ``WEIGHTS`` image extension; a HEALPix target: a
``healpy.write_map`` table, one column per channel, read by ``healpy.read_map``, and the weights
in a second table read by ``healpy.read_map(path, hdu=2)``), or ``.npz`` / ``.zarr`` (arrays
cube, weights, unweighted). Empty pixels are NaN.

More than ``--batch`` samples are gridded in batches with a progress bar (float64 sums).

Dask (``skyconv[dask]``): ``--chunks N`` (samples a chunk; ``N,C`` also C channels a chunk),
``--workers N`` (a local cluster of N processes) or ``--scheduler ADDRESS`` (an existing
cluster) grid through Dask: each sample chunk's partial sums over the pixels it reaches, added by
a tree, divided once (the single call's cube to rounding), with Dask's progress bar. The samples
are read as above, then chunked; the output is written as above.
"""

from __future__ import annotations

import argparse

import numpy as np

from . import _io
from ._common import (
    Progress,
    add_common,
    add_output,
    angle_type,
    before_work,
    positive_int,
    verb_parser,
)
from ._dask import add_dask_options, wants_dask
from ._errors import UsageError

LON_NAMES = ("lon", "ra", "glon", "raj2000", "lons")
LAT_NAMES = ("lat", "dec", "glat", "dej2000", "lats")
DATA_NAMES = ("data", "flux", "value", "spectrum", "tb", "intensity")
FWHM_PER_SIGMA = float(np.sqrt(8 * np.log(2)))


def add_parser(subparsers) -> argparse.ArgumentParser:
    """The ``grid`` verb's parser in ``subparsers`` (see :mod:`skyconv.cli.main`)."""
    p = verb_parser(
        subparsers,
        "grid",
        "grid a table of samples onto a FITS header's map or a HEALPix map",
        __doc__,
    )
    p.add_argument("samples", help="table of samples (FITS table, ECSV, CSV, ..., .npz, .zarr)")
    tgt = p.add_mutually_exclusive_group(required=True)
    tgt.add_argument("--header", help="target FITS header (text file or FITS file)")
    tgt.add_argument("--nside", type=positive_int, help="HEALPix target nside (all pixels)")
    p.add_argument("--nest", action="store_true", help="HEALPix NEST ordering (default RING)")
    add_output(p, "output file (.fits, .npz or .zarr)")
    p.add_argument("--lon", help="longitude column (degrees)")
    p.add_argument("--lat", help="latitude column (degrees)")
    p.add_argument("--data", action="append", help="data column(s); repeat for channels")
    p.add_argument("--weights", help="weight column (optional)")
    p.add_argument(
        "--kernel", default="gauss1d", choices=["gauss1d", "gauss2d", "tapered_sinc", "gaussbessel"]
    )
    k = p.add_mutually_exclusive_group(required=True)
    k.add_argument("--sigma", type=angle_type("deg"), help="kernel sigma (bare number: degrees)")
    k.add_argument(
        "--fwhm", type=angle_type("deg"), help="kernel FWHM = 2.3548 sigma (bare number: degrees)"
    )
    k.add_argument(
        "--kernel-params", help="comma-separated kernel parameters (degrees; gauss2d PA in radians)"
    )
    p.add_argument(
        "--sphere-radius", type=angle_type("deg"), help="kernel support (default 3 sigma)"
    )
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument(
        "--batch",
        type=positive_int,
        default=4_000_000,
        help="samples per batch; more are gridded in batches with a progress bar (default 4e6)",
    )
    add_common(p)
    add_dask_options(p)
    p.set_defaults(func=run, command="grid")
    return p


def _pick(names, wanted, choices, what):
    if wanted:
        if wanted not in names:
            raise UsageError(f"no column {wanted!r} in the samples (columns: {', '.join(names)})")
        return wanted
    lower = {n.lower(): n for n in names}
    for c in choices:
        if c in lower:
            return lower[c]
    raise UsageError(
        f"cannot find the {what} column among {', '.join(names)}: name it with --{what}"
    )


def read_samples(path: str, lon=None, lat=None, data=None, weights=None):
    """(lons, lats, data, weights or None) from a table file; see the module docs.

    Raises
    ------
    UsageError
        A named column is missing, or no column has a default name.
    """
    cols = _io.read_table(path)
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


def kernel_params(args: argparse.Namespace) -> tuple:
    """The kernel parameters in degrees from ``--kernel-params``, ``--fwhm`` or ``--sigma``."""
    if args.kernel_params:
        try:
            return tuple(float(v) for v in args.kernel_params.split(","))
        except ValueError:
            raise UsageError(
                f"--kernel-params {args.kernel_params!r}: expected comma-separated numbers"
            ) from None
    if args.fwhm is not None:
        return (args.fwhm.to("deg") / FWHM_PER_SIGMA,)
    return (args.sigma.to("deg"),)


def run(args: argparse.Namespace) -> int:
    """Grid the samples of ``args.samples`` and write the cube and weights to ``--out``.

    The verb contract of :mod:`skyconv.cli.main` (0 returned; errors raised, the command line's
    and the outputs' before any work); an input that cannot be read as a table is an
    ``InputFileError`` (exit status 1).
    """
    import skyconv

    out = args.out
    fmt = _io.file_format(out)
    if fmt not in ("fits", "npz", "zarr"):
        raise UsageError(f"--out {out}: grid writes .fits, .npz or .zarr")
    inputs = [(args.samples, "samples"), (args.header or None, "--header")]
    device, where = before_work(args, [(out, "--out")], inputs)
    params = kernel_params(args)
    radius = None if args.sphere_radius is None else args.sphere_radius.to("deg")
    say = Progress("grid", args.quiet)
    for opt in ("sigma", "fwhm", "sphere_radius"):
        say.note_bare("--" + opt.replace("_", "-"), getattr(args, opt), "deg")
    lons, lats, data, weights = read_samples(
        args.samples, args.lon, args.lat, args.data, args.weights
    )
    nmaps = int(np.prod(data.shape[1:], dtype=np.int64))
    if args.header:
        hdr = _io.read_header(args.header)
        target = hdr
    else:
        hdr = None
        target = skyconv.HealpixTarget(args.nside, nest=args.nest)
        if fmt == "fits" and nmaps > 999:
            raise UsageError(
                f"{nmaps} channels do not fit in a HEALPix FITS table (999 at most): "
                "write .npz or .zarr"
            )
    kw = dict(
        kernel=args.kernel,
        kernel_params=params,
        sphere_radius=radius,
        dtype=np.dtype(args.dtype),
        device=device,
    )
    if wants_dask(args):
        res = _grid_dask(lons, lats, data, weights, target, kw, args)
    elif lons.size <= args.batch:
        with say.stage(f"{lons.size} samples, {nmaps} channel(s) on {where}"):
            res = skyconv.grid(lons, lats, data, target, weights=weights, **kw)
    else:
        res = _grid_batches(skyconv.Gridder(target, **kw), lons, lats, data, weights, args, say)
    _write(out, fmt, res, hdr, args)
    filled = np.isfinite(res.cube).mean() if res.cube.size else 0.0
    if not args.quiet:
        print(
            f"skyconv grid: {lons.size} samples -> {out} {res.cube.shape} {res.cube.dtype}, "
            f"{filled:.1%} of pixels filled"
        )
    return 0


#: Samples a chunk for --workers/--scheduler without --chunks (or with --chunks auto).
DASK_CHUNK = 1_000_000


def _dask_chunks(args, data) -> tuple:
    """(samples, channels) a chunk from ``--chunks`` (N or N,C; 'auto': DASK_CHUNK, all)."""
    c = args.chunks
    if c is None or c == "auto":
        return DASK_CHUNK, -1
    if len(c) > 2:
        raise UsageError(f"--chunks for grid is N or N,C (samples, channels), got {c}")
    n = c[0]
    ch = c[1] if len(c) == 2 else -1
    if len(c) == 2 and data.ndim < 2:
        raise UsageError("--chunks N,C: the samples have one channel; give --chunks N")
    return n, ch


def _grid_dask(lons, lats, data, weights, target, kw, args):
    """Grid through Dask (see the module docs); the result gathered (target-sized)."""
    from . import _dask

    _dask.check_args(args)
    import dask.array as da

    import skyconv

    n, ch = _dask_chunks(args, data)
    n = lons.size if n == -1 else n
    dchunks = (n,) + ((ch,) + data.shape[2:] if data.ndim > 1 else ())
    dl = da.from_array(lons, chunks=n)
    db = da.from_array(lats, chunks=n)
    dd = da.from_array(data, chunks=dchunks)
    dw = None if weights is None else da.from_array(weights, chunks=n)
    with _dask.session(args, "") as (client, _):
        res = skyconv.grid(dl, db, dd, target, weights=dw, **kw)
        both = da.stack([res.cube, res.weights, res.unweighted])
        (arr,) = _dask._compute(both, client, args.quiet, gather=True)
    return skyconv.GridResult(arr[0], arr[1], arr[2])


def _grid_batches(gridder, lons, lats, data, weights, args, say):
    n = lons.size
    nbatch = -(-n // args.batch)
    for b in range(nbatch):
        s = slice(b * args.batch, min(n, (b + 1) * args.batch))
        gridder.grid(lons[s], lats[s], data[s], None if weights is None else weights[s])
        say.bar(b + 1, nbatch, "batches", f" ({s.stop} of {n} samples)")
    return gridder.result()


def _write(out, fmt, res, hdr, args) -> None:
    history = [f"gridded by skyconv.grid: kernel {args.kernel}"]
    if fmt in ("npz", "zarr"):
        arrays = {"cube": res.cube, "weights": np.asarray(res.weights)}
        if res.unweighted is not None:
            arrays["unweighted"] = np.asarray(res.unweighted)
        _io.write_arrays(out, arrays, overwrite=args.overwrite)
        return
    if hdr is None:
        npix = res.cube.shape[-1]
        weights = np.asarray(res.weights)
        _io.write_healpix(
            out,
            res.cube.reshape(-1, npix),
            nested=args.nest,
            overwrite=args.overwrite,
            extra=[("WEIGHTS", weights.reshape(-1, npix))],
            history=history,
        )
        return
    from astropy.wcs import WCS

    h = WCS(hdr).celestial.to_header()
    h["KERNEL"] = args.kernel
    _io.write_image(
        out,
        res.cube,
        h,
        overwrite=args.overwrite,
        history=history,
        extra=[("WEIGHTS", np.asarray(res.weights))],
    )
