"""``skyconv scfind``: SoFiA 2's Smooth-and-Clip source finder on a FITS, ``.npy`` or ``.zarr``
cube, with a progress bar over the kernels.

    skyconv scfind cube.fits --out mask.fits [--kernels-xy 0,3,6 --kernels-z 0,3,7,15
                   --threshold 5 --replacement 2 --statistic mad --flux-range negative
                   --device {auto,cpu,cuda} --threads N --hdu N --overwrite -q]

The mask (uint8, 1 = source) is written in the cube's format with the cube's header: leading
degenerate axes (a Stokes axis of length 1) are dropped, and so are their WCS keywords, so a
4-D cube gives a 3-D mask with a 3-D WCS.

Options map onto ``skyconv.smooth_and_clip``'s keywords in one place, :func:`params`; a
parameter-file option (SoFiA's ``scfind.*`` keys) belongs beside :func:`add_options` and
feeds the same dictionary.
"""

from __future__ import annotations

import argparse

import numpy as np

from . import _io
from ._common import Progress, add_common, add_output, apply_threads, resolve_device
from ._errors import InputFileError


def numbers(text: str, cast=float) -> list:
    """argparse type: comma- or space-separated numbers."""
    try:
        return [cast(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``scfind`` verb to an argparse subparsers object.

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
        "scfind",
        help="Smooth-and-Clip source finding (SoFiA 2 rules) on a spectral-line cube",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("cube", help="input cube: FITS (first HDU with data, or --hdu), .npy or .zarr")
    add_output(p, "output mask: .fits, .npy or .zarr")
    p.add_argument(
        "--hdu",
        type=_io.hdu_key,
        default=None,
        help="FITS HDU index or name (default: first with data)",
    )
    add_options(p)
    add_common(p)
    p.set_defaults(func=run, command="scfind")
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    """The Smooth-and-Clip options (SoFiA 2's ``scfind.*`` parameters)."""
    p.add_argument(
        "--kernels-xy",
        "--kernelsXY",
        dest="kernels_xy",
        default="0,3,6",
        type=numbers,
        help="spatial Gaussian FWHMs in pixels (default: 0,3,6)",
    )
    p.add_argument(
        "--kernels-z",
        "--kernelsZ",
        dest="kernels_z",
        default="0,3,7,15",
        type=numbers,
        help="spectral boxcar widths in channels (default: 0,3,7,15)",
    )
    p.add_argument(
        "--threshold", type=float, default=5.0, help="clip level in units of the noise (default 5)"
    )
    p.add_argument(
        "--replacement",
        type=float,
        default=2.0,
        help="replace masked voxels by ±replacement·rms before smoothing; <0 off (default 2)",
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
    p.add_argument("--spatial", choices=("gaussian", "boxcar_approx"), default="gaussian")
    p.add_argument(
        "--edge-mode",
        dest="edge_mode",
        default="constant",
        choices=("constant", "nearest", "reflect", "mirror", "wrap"),
    )


def params(args: argparse.Namespace) -> dict:
    """``skyconv.smooth_and_clip``'s keywords from the parsed options."""
    return dict(
        kernels_xy=args.kernels_xy,
        kernels_z=args.kernels_z,
        threshold=args.threshold,
        replacement=args.replacement,
        statistic=args.statistic,
        flux_range=args.flux_range,
        spectral=args.spectral,
        spatial=args.spatial,
        edge_mode=args.edge_mode,
    )


def read_cube(path: str, hdu=None):
    """(cube (z, y, x) or (y, x) floating, header or None); leading length-1 axes dropped.

    Raises
    ------
    InputFileError
        Not 2-D or 3-D once degenerate axes are dropped.
    """
    data, header = _io.read_image(path, hdu, min_ndim=2)
    while data.ndim > 3 and data.shape[0] == 1:  # drop degenerate Stokes axes
        data = data[0]
    if data.ndim not in (2, 3):
        raise InputFileError(f"{path}: expected a 2-D or 3-D cube, got shape {data.shape}")
    if data.dtype.kind != "f":
        data = data.astype(np.float32)
    return data, header


def run(args: argparse.Namespace) -> int:
    """Find sources in ``args.cube`` and write the mask to ``--out``.

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
        An input file cannot be read as a 2-D or 3-D cube (exit status 1).
    skyconv.DeviceError
        ``cuda`` asked for and no GPU works (exit status 1), before any work.
    """
    import skyconv

    _io.check_output(args.out, args.overwrite)
    _io.check_input(args.cube, "cube")
    _io.check_distinct([args.out], [args.cube])
    device, where = resolve_device(args)
    apply_threads(args)
    kwargs = params(args)
    say = Progress("scfind", args.quiet)
    cube, header = read_cube(args.cube, args.hdu)

    def bar(done, total, rms):
        say.bar(done, total, "kernels", f" noise {rms:.3e}")

    mask, noise = skyconv.smooth_and_clip(
        np.asarray(cube), device=device, return_noise=True, progress=bar, **kwargs
    )
    dt = say.elapsed()
    if header is not None:
        header = header.copy()
        header.remove("BUNIT", ignore_missing=True, remove_all=True)
        header["BUNIT"] = ("", "1 = source voxel")
    _io.write_image(
        args.out,
        mask,
        header,
        overwrite=args.overwrite,
        history=["skyconv scfind (Smooth-and-Clip, SoFiA 2 rules)"],
    )
    if not args.quiet:
        print(
            f"scfind: {int(mask.sum())} of {mask.size} voxels in the mask "
            f"({len(noise.rms)} kernels, {dt:.2f} s on {where}); "
            f"noise of the cube {noise.rms0:.4e}"
        )
    return 0
