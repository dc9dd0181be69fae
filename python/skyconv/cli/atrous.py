"""``skyconv atrous``: DUCHAMP's à trous wavelet reconstruction of a FITS (or ``.npy``,
``.zarr``) spectrum, image or cube (``skyconv.atrous_denoise``).

    skyconv atrous cube.fits --out recon.fits [--dim 3 --snr 4 --scale-min 1 --scale-max 0
                   --filter b3spline --convergence 0.005 --no-robust --variant duchamp
                   --device {auto,cpu,cuda} --threads N --hdu N --residual resid.fits
                   --overwrite -q] [--chunks Z,Y,X|auto --workers N | --scheduler ADDRESS]
    skyconv atrous --par duchamp.par [the options above, which override the file]

``--chunks``, ``--workers N`` (a local cluster of N processes) or ``--scheduler ADDRESS`` (an
existing cluster) run the reconstruction through Dask (``skyconv._dask.atrous``: the single
call's iterations and noise): the input (zarr, HDF5 ``FILE.h5:DATASET``, FITS or .npy) read
block by block, ``.zarr`` outputs written block by block (FITS/.npy outputs gathered), with
Dask's progress on stderr.

``--par`` reads a DUCHAMP parameter file (``skyconv._utils.duchamp_par``): imageFile is the
input, reconDim, scaleMin, scaleMax, snrRecon, reconConvergence, filterCode and flagRobustStats
set the reconstruction, fileOutputRecon (or DUCHAMP's default name) the output, and
flagOutputResid/fileOutputResid the residual; other keys are listed as ignored. As DUCHAMP does,
reconDim is lowered to the data's dimensions (3-D of one channel runs 2-D). The blank value
DUCHAMP's 2-D reconstruction uses (``--variant duchamp``) is BLANK×BSCALE+BZERO from the
header, or −8.00061.

The FITS data axes (NAXIS3, NAXIS2, NAXIS1) are the array's (z, y, x); leading degenerate
axes (e.g. a Stokes axis of length 1) are dropped for the reconstruction and restored in the
output. The output keeps the input header (plus HISTORY cards with the parameters and the
result) and the input's float type (integer data are reconstructed in float32). Progress is
printed to stderr after every iteration.

Options (and ``--par``'s keys) map onto ``atrous_denoise``'s keywords in one place,
:func:`params`.
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
    before_work,
    resolve_device,
    verb_parser,
)
from ._dask import add_dask_options, wants_dask
from ._errors import UsageError


def add_parser(subparsers) -> argparse.ArgumentParser:
    """The ``atrous`` verb's parser in ``subparsers`` (see :mod:`skyconv.cli.main`)."""
    p = verb_parser(
        subparsers,
        "atrous",
        "à trous wavelet reconstruction (DUCHAMP) of a FITS spectrum, image or cube",
        __doc__,
    )
    p.add_argument(
        "input", nargs="?", help="input FITS file (or .npy, .zarr); default: imageFile of --par"
    )
    add_output(
        p,
        "output file, the reconstruction (default with --par: fileOutputRecon or DUCHAMP's "
        "default name)",
        required=False,
    )
    p.add_argument("--par", help="DUCHAMP parameter file (its reconstruction keys)")
    p.add_argument(
        "--hdu",
        type=_io.hdu_key,
        default=None,
        help="FITS HDU index or name (default: the first with data)",
    )
    p.add_argument("--residual", help="also write input − reconstruction to this file")
    add_options(p)
    add_dask_options(p)
    add_common(p)
    p.set_defaults(func=run, command="atrous")
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    """The reconstruction options (DUCHAMP's à trous parameters)."""
    p.add_argument(
        "--dim",
        type=int,
        default=None,
        choices=(1, 2, 3),
        help="1: each spectrum, 2: each channel map, 3: the whole cube (default 3)",
    )
    p.add_argument(
        "--snr",
        type=float,
        default=None,
        help="threshold in units of each scale's noise (default 4)",
    )
    p.add_argument("--scale-min", type=int, default=None, help="first scale kept (default 1)")
    p.add_argument(
        "--scale-max", type=int, default=None, help="last scale kept, 0 = all (default 0)"
    )
    p.add_argument(
        "--filter",
        default=None,
        choices=("b3spline", "triangle", "haar"),
        help="scaling function (default b3spline)",
    )
    p.add_argument(
        "--convergence",
        type=float,
        default=None,
        help="relative change of the residual noise that stops (default 0.005)",
    )
    p.add_argument(
        "--no-robust",
        dest="robust",
        action="store_const",
        const=False,
        default=None,
        help="mean/standard deviation instead of median/MADFM",
    )
    p.add_argument(
        "--variant",
        default="duchamp",
        choices=("duchamp", "corrected"),
        help="DUCHAMP 1.6.1 exactly (default) or skyconv's corrected reconstruction",
    )


_DEFAULTS = dict(
    dim=3,
    snr_recon=4.0,
    scale_min=1,
    scale_max=0,
    filter="b3spline",
    convergence=0.005,
    robust=True,
)
# atrous_denoise keyword -> option dest
_OPTIONS = dict(
    dim="dim",
    snr_recon="snr",
    scale_min="scale_min",
    scale_max="scale_max",
    filter="filter",
    convergence="convergence",
    robust="robust",
)


def params(args: argparse.Namespace, say=None) -> dict:
    """``skyconv.atrous_denoise``'s keywords from ``--par`` (if given) and the parsed options,
    which override the file.

    With ``--par``, ``args.input``, ``args.out`` and ``args.residual`` left out on the command
    line are filled from the file, and its adjustments and ignored keys are reported through
    ``say``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by the parser :func:`add_parser` made.
    say : callable, optional
        Takes one message (str).

    Returns
    -------
    dict
        dim, snr_recon, scale_min, scale_max, filter, convergence, robust.

    Raises
    ------
    UsageError
        The parameter file does not turn the reconstruction on, asks for a subsection, or has
        a filterCode DUCHAMP does not know; no input or output is named.
    OSError
        The parameter file cannot be read.
    """
    kwargs = dict(_DEFAULTS)
    if getattr(args, "par", None):
        from .._utils.duchamp_par import read_duchamp_par

        try:
            par = read_duchamp_par(args.par)
            for line in par.report():
                if say is not None:
                    say(f"skyconv atrous: {args.par}: {line}")
            par.check_reconstruction()
        except ValueError as e:
            raise UsageError(f"{args.par}: {e}") from None
        kwargs.update(par.atrous_kwargs())
        args.input = args.input or par.image_file
        args.out = args.out or par.recon_file()
        if args.residual is None and par.flag_output_resid:
            args.residual = par.resid_file()
    for key, opt in _OPTIONS.items():
        if getattr(args, opt) is not None:
            kwargs[key] = getattr(args, opt)
    if not args.input or not args.out:
        raise UsageError("name the input and --out, or give --par")
    return kwargs


def run(args: argparse.Namespace) -> int:
    """Reconstruct ``args.input`` and write it (and ``--residual``) to ``--out``.

    The verb contract of :mod:`skyconv.cli.main` (0 returned; errors raised, the command line's
    and the outputs' before any work); an input that cannot be read as an image is an
    ``InputFileError`` (exit status 1).
    """
    import skyconv

    from .._utils.duchamp_par import header_blank_value

    say = Progress("atrous", args.quiet)
    kwargs = params(args, say.say)
    if wants_dask(args):
        return run_dask(args, kwargs, say)
    outputs = [(args.out, "--out"), (args.residual, "--residual")]
    device, where = before_work(args, outputs, [(args.input, "input")])
    data, header = _io.read_image(args.input, args.hdu)
    dim = kwargs["dim"]
    shape = data.shape
    squeezed = data
    while squeezed.ndim > 1 and squeezed.shape[0] == 1 and squeezed.ndim > dim:
        squeezed = squeezed[0]
    if squeezed.dtype.kind != "f":
        squeezed = squeezed.astype(np.float32)
    if args.par:
        # DUCHAMP lowers reconDim to the data's dimensions, and runs 3-D on one channel as 2-D.
        lowered = min(dim, squeezed.ndim)
        if lowered == 3 and squeezed.shape[0] == 1:
            squeezed, lowered = squeezed[0], 2
        if lowered != dim:
            say.say(f"skyconv atrous: reconDim {dim} lowered to {lowered}, as DUCHAMP does")
            dim = kwargs["dim"] = lowered
    blank_value = header_blank_value(header if header is not None else {})
    say.say(
        f"skyconv atrous: {args.input} {squeezed.shape} {squeezed.dtype}, dim={dim}, "
        f"snr={kwargs['snr_recon']}, filter={kwargs['filter']}, variant={args.variant}, "
        f"device {where}"
    )

    progress = _progress(say)
    res = skyconv.atrous_denoise(
        squeezed,
        device=device,
        progress=progress,
        variant=args.variant,
        blank_value=blank_value,
        **kwargs,
    )
    history = _history(res, kwargs, args, say)
    _io.write_image(
        args.out, res.data.reshape(shape), header, overwrite=args.overwrite, history=history
    )
    say.say(f"wrote {args.out}")
    if args.residual:
        resid = (squeezed - res.data).astype(res.data.dtype).reshape(shape)
        _io.write_image(args.residual, resid, header, overwrite=args.overwrite, history=history)
        say.say(f"wrote {args.residual}")
    return 0


def run_dask(args: argparse.Namespace, kwargs: dict, say) -> int:
    """``skyconv atrous INPUT --out OUT`` with ``--chunks``/``--workers``/``--scheduler``: the
    input read block by block (zarr, HDF5 ``FILE.h5:DATASET``, FITS or .npy), the
    reconstruction on Dask (the single call's iterations and noise), written block by block to
    ``.zarr`` (or gathered for FITS/.npy); ``--residual`` likewise.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by the parser :func:`add_parser` made.
    kwargs : dict
        ``atrous_denoise``'s keywords (:func:`params`).
    say : skyconv.cli._common.Progress
        The verb's messages.

    Returns
    -------
    int
        0 (errors are raised, as in :func:`run`).

    Raises
    ------
    UsageError
        Dask missing, bad Dask options, an output that exists without ``--overwrite``, or a
        scheduler that cannot be reached (exit status 2).
    InputFileError
        The input cannot be read block by block (exit status 1).
    """
    import skyconv

    from .._utils.duchamp_par import header_blank_value
    from . import _dask

    outputs = [(args.out, "--out"), (args.residual, "--residual")]
    data, header = _dask.open_cube(args, args.input, [o for o in outputs if o[0]])
    device, where = resolve_device(args)
    apply_threads(args)
    if args.par and min(kwargs["dim"], data.ndim) != kwargs["dim"]:
        say.say(f"skyconv atrous: reconDim {kwargs['dim']} lowered to {data.ndim}, as DUCHAMP does")
        kwargs["dim"] = data.ndim
    blank_value = header_blank_value(header if header is not None else {})
    with _dask.session(args, where) as (client, where):
        say.say(
            f"skyconv atrous: {args.input} {data.shape} {data.dtype} blocks {data.chunksize}, "
            f"dim={kwargs['dim']}, snr={kwargs['snr_recon']}, filter={kwargs['filter']}, "
            f"variant={args.variant}, on {where}"
        )
        one_unit = kwargs["dim"] >= data.ndim  # per-unit Dask runs report no iterations
        res = skyconv.atrous_denoise(
            data,
            device=args.device,
            progress=_progress(say) if one_unit else None,
            variant=args.variant,
            blank_value=blank_value,
            **kwargs,
        )
        history = _history(res, kwargs, args, say) + ["skyconv atrous: through Dask"]
        _dask.write_lazy(args.out, res.data, header, client, args.quiet, history=history)
        say.say(f"wrote {args.out}")
        if args.residual:
            resid = (data - res.data).astype(res.data.dtype)
            _dask.write_lazy(args.residual, resid, header, client, args.quiet, history=history)
            say.say(f"wrote {args.residual}")
    return 0


def _progress(say):
    """The per-iteration progress callback: one line on stderr per iteration."""

    def progress(iteration, active, units, noise, change):
        change_txt = "" if not np.isfinite(change) else f", change {100 * change:.3g}%"
        units_txt = "" if units == 1 else f", {active} of {units} units still iterating"
        say.say(
            f"  iteration {iteration}: residual noise {noise:.6g}{change_txt}{units_txt} "
            f"({say.elapsed():.2f} s)"
        )

    return progress


def _history(res, kwargs, args, say) -> list:
    """Report the result and return the HISTORY cards for the output headers."""
    dim = kwargs["dim"]
    iters = np.asarray(res.iterations)
    noise = np.asarray(res.noise, dtype=np.float64)
    say.say(
        f"done in {say.elapsed():.2f} s on {res.device}: {res.scales} scales, "
        f"{int(iters.max(initial=0))} iterations (max), residual noise "
        f"{np.nanmedian(noise) if np.any(np.isfinite(noise)) else float('nan'):.6g}"
    )
    history = [
        f"skyconv atrous_denoise: dim={dim} snr_recon={kwargs['snr_recon']} "
        f"scale_min={kwargs['scale_min']} scale_max={kwargs['scale_max']} "
        f"filter={kwargs['filter']} convergence={kwargs['convergence']} "
        f"robust={kwargs['robust']} variant={args.variant}",
        f"skyconv atrous_denoise: {res.scales} scales, "
        f"{int(iters.max(initial=0))} iterations, device {res.device}",
    ]
    return history
