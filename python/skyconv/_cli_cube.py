"""``skyconv scfind``: Smooth-and-Clip on a FITS (or .npy) cube, with a progress bar over kernels.

The CLI module wires it as::

    from ._cli_cube import add_scfind_parser, run_scfind
    add_scfind_parser(subparsers)          # sets func=run_scfind
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _numbers(text, cast):
    try:
        return [cast(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None


def add_scfind_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``scfind`` subcommand to an ``argparse`` subparsers object; returns its parser."""
    p = subparsers.add_parser(
        "scfind",
        help="Smooth-and-Clip source finding (SoFiA 2 rules) on a spectral-line cube",
        description="Write a uint8 source mask (1 = source) of a (z, y, x) cube found with "
        "SoFiA 2's Smooth-and-Clip rules. Options mirror SoFiA 2's scfind.* "
        "parameters.",
    )
    p.add_argument(
        "cube",
        nargs="?",
        help="input cube: FITS file (first HDU with data, or --hdu) or .npy (not with --par)",
    )
    p.add_argument("--out", "-o", help="output mask: .fits or .npy (optional with --par)")
    p.add_argument(
        "--par",
        help="a SoFiA-2 parameter file: input.*, scfind.*, flag.region and output.* as SoFiA-2 "
        "reads them; writes <output.filename>_mask-raw.fits when output.writeRawMask = true",
    )
    p.add_argument(
        "--hdu", type=int, default=None, help="FITS HDU index (default: first with data)"
    )
    p.add_argument(
        "--kernels-xy",
        "--kernelsXY",
        dest="kernels_xy",
        default="0,3,6",
        type=lambda t: _numbers(t, float),
        help="spatial Gaussian FWHMs in pixels (default: 0,3,6)",
    )
    p.add_argument(
        "--kernels-z",
        "--kernelsZ",
        dest="kernels_z",
        default="0,3,7,15",
        type=lambda t: _numbers(t, float),
        help="spectral boxcar widths in channels (default: 0,3,7,15)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=5.0,
        help="clip level in units of the noise (default: 5.0)",
    )
    p.add_argument(
        "--replacement",
        type=float,
        default=2.0,
        help="replace masked voxels by ±replacement·rms before smoothing; <0 off (default: 2.0)",
    )
    p.add_argument("--statistic", choices=("mad", "std", "gauss"), default="mad")
    p.add_argument(
        "--flux-range",
        "--fluxRange",
        dest="flux_range",
        choices=("negative", "full", "positive"),
        default="negative",
    )
    p.add_argument("--spectral", choices=("boxcar", "gaussian"), default="boxcar")
    p.add_argument("--spatial", choices=("boxcar", "boxcar_approx", "gaussian"), default="boxcar")
    p.add_argument(
        "--precision",
        choices=("sofia2", "float64"),
        default="sofia2",
        help="sofia2: SoFiA-2 2.5.1's arithmetic and estimators (default); float64: skyconv's",
    )
    p.add_argument(
        "--edge-mode",
        dest="edge_mode",
        default="constant",
        choices=("constant", "nearest", "reflect", "mirror", "wrap"),
    )
    p.add_argument("--device", default=None, help="auto, cpu or cuda (default: SKYCONV_DEVICE)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=run_scfind)
    return p


def _read(path, hdu):
    if str(path).endswith(".npy"):
        return np.load(path, mmap_mode="r"), None
    try:
        from astropy.io import fits
    except ImportError:
        raise SystemExit(
            "skyconv scfind: reading FITS needs astropy (pip install astropy)"
        ) from None
    with fits.open(path, memmap=True) as hdul:
        if hdu is None:
            hdu = next(
                (i for i, h in enumerate(hdul) if h.data is not None and h.data.ndim >= 2), None
            )
            if hdu is None:
                raise SystemExit(f"skyconv scfind: no image data in {path}")
        h = hdul[hdu]
        data = np.asarray(h.data)
        header = h.header.copy()
    while data.ndim > 3 and data.shape[0] == 1:  # drop degenerate Stokes axes
        data = data[0]
    if data.ndim not in (2, 3):
        raise SystemExit(f"skyconv scfind: expected a 2-D or 3-D cube, got shape {data.shape}")
    if data.dtype.kind != "f":
        data = data.astype(np.float32)
    return data, header


def _write(path, mask, header, overwrite):
    if str(path).endswith(".npy"):
        import os

        if os.path.exists(path) and not overwrite:
            raise SystemExit(f"skyconv scfind: {path} exists (use --overwrite)")
        np.save(path, mask)
        return
    from astropy.io import fits

    hdr = fits.Header()
    if header is not None:
        for key in ("BSCALE", "BZERO", "BLANK", "BUNIT", "DATAMIN", "DATAMAX"):
            header.remove(key, ignore_missing=True, remove_all=True)
        hdr = header
    hdu = fits.PrimaryHDU(mask, header=hdr)
    hdu.header["BUNIT"] = ("", "1 = source voxel")
    hdu.header["HISTORY"] = "skyconv scfind (Smooth-and-Clip, SoFiA 2 rules)"
    hdu.writeto(path, overwrite=overwrite)


class _Bar:
    """A one-line progress bar on stderr."""

    def __init__(self, quiet):
        self.quiet = quiet
        self.t0 = time.perf_counter()

    def __call__(self, done, total, rms):
        if self.quiet:
            return
        width = 30
        fill = int(width * done / total)
        dt = time.perf_counter() - self.t0
        sys.stderr.write(
            f"\rscfind [{'#' * fill}{'.' * (width - fill)}] {done}/{total} kernels "
            f"noise {rms:.3e}  {dt:.1f} s"
        )
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run_scfind(args) -> int:
    """Run the ``scfind`` subcommand for parsed ``args``; returns the exit status."""
    from .cube import smooth_and_clip

    if args.par is not None:
        from ._utils.sofia_scfind import cli_par

        if args.cube is not None:
            raise SystemExit("skyconv scfind: give the cube in the parameter file (input.data)")
        return cli_par(
            args.par,
            out=args.out,
            write=lambda path, mask, header: _write(path, mask, header, args.overwrite),
            device=args.device,
            quiet=args.quiet,
            progress=_Bar(args.quiet),
        )
    if args.cube is None or args.out is None:
        raise SystemExit("skyconv scfind: needs a cube and --out (or --par FILE)")
    cube, header = _read(args.cube, args.hdu)
    bar = _Bar(args.quiet)
    t0 = time.perf_counter()
    mask, noise = smooth_and_clip(
        np.asarray(cube),
        kernels_xy=args.kernels_xy,
        kernels_z=args.kernels_z,
        threshold=args.threshold,
        replacement=args.replacement,
        statistic=args.statistic,
        flux_range=args.flux_range,
        spectral=args.spectral,
        spatial=args.spatial,
        edge_mode=args.edge_mode,
        precision=args.precision,
        device=args.device,
        return_noise=True,
        progress=bar,
    )
    dt = time.perf_counter() - t0
    _write(args.out, mask, header, args.overwrite)
    if not args.quiet:
        print(
            f"scfind: {int(mask.sum())} of {mask.size} voxels in the mask "
            f"({len(noise.rms)} kernels, {dt:.2f} s); noise of the cube {noise.rms0:.4e}"
        )
    return 0


__all__ = ["add_scfind_parser", "run_scfind"]
