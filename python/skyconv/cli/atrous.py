"""``skyconv atrous``: DUCHAMP's à trous wavelet reconstruction of a FITS (or ``.npy``,
``.zarr``) spectrum, image or cube (``skyconv.atrous_denoise``).

    skyconv atrous cube.fits --out recon.fits [--dim 3 --snr 4 --scale-min 1 --scale-max 0
                   --filter b3spline --convergence 0.005 --no-robust
                   --device {auto,cpu,cuda} --threads N --hdu N --residual resid.fits
                   --overwrite -q]

The FITS data axes (NAXIS3, NAXIS2, NAXIS1) are the array's (z, y, x); leading degenerate
axes (e.g. a Stokes axis of length 1) are dropped for the reconstruction and restored in the
output. The output keeps the input header (plus HISTORY cards with the parameters and the
result) and the input's float type (integer data are reconstructed in float32). Progress is
printed to stderr after every iteration.

Options map onto ``atrous_denoise``'s keywords in one place, :func:`params`; a parameter-file
option (DUCHAMP's keys) belongs beside :func:`add_options` and feeds the same dictionary.
"""

from __future__ import annotations

import argparse

import numpy as np

from . import _io
from ._common import Progress, add_common, add_output, apply_threads, resolve_device


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``atrous`` verb to an argparse subparsers object.

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
        "atrous",
        help="à trous wavelet reconstruction (DUCHAMP) of a FITS spectrum, image or cube",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", help="input FITS file (or .npy, .zarr)")
    add_output(p, "output file (the reconstruction)")
    p.add_argument(
        "--hdu",
        type=_io.hdu_key,
        default=None,
        help="FITS HDU index or name (default: the first with data)",
    )
    p.add_argument("--residual", help="also write input − reconstruction to this file")
    add_options(p)
    add_common(p)
    p.set_defaults(func=run, command="atrous")
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    """The reconstruction options (DUCHAMP's à trous parameters)."""
    p.add_argument(
        "--dim",
        type=int,
        default=3,
        choices=(1, 2, 3),
        help="1: each spectrum, 2: each channel map, 3: the whole cube (default 3)",
    )
    p.add_argument(
        "--snr",
        type=float,
        default=4.0,
        help="threshold in units of each scale's noise (default 4)",
    )
    p.add_argument("--scale-min", type=int, default=1, help="first scale kept (default 1)")
    p.add_argument("--scale-max", type=int, default=0, help="last scale kept, 0 = all (default 0)")
    p.add_argument("--filter", default="b3spline", choices=("b3spline", "triangle", "haar"))
    p.add_argument(
        "--convergence",
        type=float,
        default=0.005,
        help="relative change of the residual noise that stops (default 0.005)",
    )
    p.add_argument(
        "--no-robust",
        dest="robust",
        action="store_false",
        help="mean/standard deviation instead of median/MADFM",
    )


def params(args: argparse.Namespace) -> dict:
    """``skyconv.atrous_denoise``'s keywords from the parsed options."""
    return dict(
        dim=args.dim,
        snr_recon=args.snr,
        scale_min=args.scale_min,
        scale_max=args.scale_max,
        filter=args.filter,
        convergence=args.convergence,
        robust=args.robust,
    )


def run(args: argparse.Namespace) -> int:
    """Reconstruct ``args.input`` and write it (and ``--residual``) to ``--out``.

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
        An input file cannot be read as an image (exit status 1).
    skyconv.DeviceError
        ``cuda`` asked for and no GPU works (exit status 1), before any work.
    """
    import skyconv

    _io.check_output(args.out, args.overwrite)
    _io.check_output(args.residual, args.overwrite, "--residual")
    _io.check_input(args.input)
    _io.check_distinct([args.out, args.residual], [args.input])
    device, where = resolve_device(args)
    apply_threads(args)
    kwargs = params(args)
    say = Progress("atrous", args.quiet)
    data, header = _io.read_image(args.input, args.hdu)
    shape = data.shape
    squeezed = data
    while squeezed.ndim > 1 and squeezed.shape[0] == 1 and squeezed.ndim > args.dim:
        squeezed = squeezed[0]
    if squeezed.dtype.kind != "f":
        squeezed = squeezed.astype(np.float32)
    say.say(
        f"skyconv atrous: {args.input} {squeezed.shape} {squeezed.dtype}, dim={args.dim}, "
        f"snr={args.snr}, filter={args.filter}, device {where}"
    )

    def progress(iteration, active, units, noise, change):
        change_txt = "" if not np.isfinite(change) else f", change {100 * change:.3g}%"
        units_txt = "" if units == 1 else f", {active} of {units} units still iterating"
        say.say(
            f"  iteration {iteration}: residual noise {noise:.6g}{change_txt}{units_txt} "
            f"({say.elapsed():.2f} s)"
        )

    res = skyconv.atrous_denoise(squeezed, device=device, progress=progress, **kwargs)
    iters = np.asarray(res.iterations)
    noise = np.asarray(res.noise, dtype=np.float64)
    say.say(
        f"done in {say.elapsed():.2f} s on {res.device}: {res.scales} scales, "
        f"{int(iters.max(initial=0))} iterations (max), residual noise "
        f"{np.nanmedian(noise) if np.any(np.isfinite(noise)) else float('nan'):.6g}"
    )
    history = [
        f"skyconv atrous_denoise: dim={args.dim} snr_recon={args.snr} "
        f"scale_min={args.scale_min} scale_max={args.scale_max} filter={args.filter} "
        f"convergence={args.convergence} robust={args.robust}",
        f"skyconv atrous_denoise: {res.scales} scales, "
        f"{int(iters.max(initial=0))} iterations, device {res.device}",
    ]
    _io.write_image(
        args.out, res.data.reshape(shape), header, overwrite=args.overwrite, history=history
    )
    say.say(f"wrote {args.out}")
    if args.residual:
        resid = (squeezed - res.data).astype(res.data.dtype).reshape(shape)
        _io.write_image(args.residual, resid, header, overwrite=args.overwrite, history=history)
        say.say(f"wrote {args.residual}")
    return 0
