"""``skyconv atrous``: à trous wavelet reconstruction of a FITS cube (see skyconv.atrous).

    skyconv atrous cube.fits --out recon.fits [--dim 3 --snr 4 --scale-min 1 --scale-max 0
                   --filter b3spline --convergence 0.005 --no-robust --variant duchamp
                   --device auto --hdu 0 --residual resid.fits --overwrite --quiet]
    skyconv atrous --par duchamp.par [options above, which override the file]

``--par`` reads a DUCHAMP parameter file (skyconv._utils.duchamp_par): imageFile is the input,
reconDim, scaleMin, scaleMax, snrRecon, reconConvergence, filterCode and flagRobustStats set
the reconstruction, fileOutputRecon (or DUCHAMP's default name) the output, and
flagOutputResid/fileOutputResid the residual. Other keys are listed as ignored. The blank value
DUCHAMP's 2-D reconstruction uses is BLANK×BSCALE+BZERO from the header, or −8.00061.

The FITS data axes (NAXIS3, NAXIS2, NAXIS1) are the array's (z, y, x); leading degenerate
axes (e.g. a Stokes axis of length 1) are dropped for the reconstruction and restored in the
output. The output keeps the input header (plus HISTORY cards with the parameters and the
result) and the input's float type (integer data are reconstructed in float32). Progress is
printed to stderr after every iteration.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``atrous`` subcommand to an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "atrous",
        help="à trous wavelet reconstruction (DUCHAMP) of a FITS spectrum, image or cube",
        description="Denoise a FITS cube by DUCHAMP's iterative à trous wavelet "
        "reconstruction (skyconv.atrous_denoise).",
    )
    p.add_argument("input", nargs="?", help="input FITS file (default: imageFile of --par)")
    p.add_argument(
        "--out",
        "-o",
        help="output FITS file, the reconstruction (default with --par: fileOutputRecon or "
        "DUCHAMP's default name)",
    )
    p.add_argument("--par", help="DUCHAMP parameter file (its reconstruction keys)")
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
    p.add_argument("--filter", default=None, choices=("b3spline", "triangle", "haar"))
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
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    p.add_argument("--hdu", default=0, help="HDU index or name (default 0)")
    p.add_argument("--residual", help="also write input − reconstruction to this FITS file")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    p.set_defaults(func=run)
    return p


def _hdu_key(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


_DEFAULTS = {
    "dim": 3,
    "snr_recon": 4.0,
    "scale_min": 1,
    "scale_max": 0,
    "filter": "b3spline",
    "convergence": 0.005,
    "robust": True,
}
_OPTIONS = {
    "dim": "dim",
    "snr_recon": "snr",
    "scale_min": "scale_min",
    "scale_max": "scale_max",
    "filter": "filter",
    "convergence": "convergence",
    "robust": "robust",
}


def _settings(args: argparse.Namespace, say) -> dict:
    """Input, outputs and atrous_denoise keywords from --par (if given) and the options, which
    override the file. Raises ValueError when they cannot be had."""
    from ._utils.duchamp_par import read_duchamp_par

    kwargs = dict(_DEFAULTS)
    s = {"input": args.input, "out": args.out, "residual": args.residual}
    if args.par:
        par = read_duchamp_par(args.par)
        for line in par.report():
            say(f"skyconv atrous: {args.par}: {line}")
        par.check_reconstruction()
        kwargs.update(par.atrous_kwargs())
        s["input"] = s["input"] or par.image_file
        s["out"] = s["out"] or par.recon_file()
        if s["residual"] is None and par.flag_output_resid:
            s["residual"] = par.resid_file()
    for key, opt in _OPTIONS.items():
        if getattr(args, opt) is not None:
            kwargs[key] = getattr(args, opt)
    if not s["input"] or not s["out"]:
        raise ValueError("give the input and --out, or --par")
    s["kwargs"] = kwargs
    return s


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; returns the exit status (0 success, 2 bad input)."""
    from astropy.io import fits

    from ._utils.duchamp_par import header_blank_value
    from .atrous import atrous_denoise

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    try:
        settings = _settings(args, say)
    except (ValueError, OSError) as e:
        print(f"skyconv atrous: {e}", file=sys.stderr)
        return 2
    kw = settings["kwargs"]
    args.input, args.out, args.residual = (settings[k] for k in ("input", "out", "residual"))
    dim = kw["dim"]
    with fits.open(args.input) as hdul:
        hdu = hdul[_hdu_key(args.hdu)]
        if hdu.data is None:
            print(f"skyconv atrous: HDU {args.hdu} of {args.input} has no data", file=sys.stderr)
            return 2
        data = np.asarray(hdu.data)
        header = hdu.header.copy()
        blank_value = header_blank_value(hdu.header)
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
            say(f"skyconv atrous: reconDim {dim} lowered to {lowered}, as DUCHAMP does")
            dim = kw["dim"] = lowered
    say(
        f"skyconv atrous: {args.input} {squeezed.shape} {squeezed.dtype}, dim={dim}, "
        f"snr={kw['snr_recon']}, filter={kw['filter']}, variant={args.variant}"
    )
    t0 = time.perf_counter()

    def progress(iteration, active, units, noise, change):
        change_txt = "" if not np.isfinite(change) else f", change {100 * change:.3g}%"
        units_txt = "" if units == 1 else f", {active} of {units} units still iterating"
        say(
            f"  iteration {iteration}: residual noise {noise:.6g}{change_txt}{units_txt} "
            f"({time.perf_counter() - t0:.2f} s)"
        )

    try:
        res = atrous_denoise(
            squeezed,
            device=args.device,
            progress=progress,
            variant=args.variant,
            blank_value=blank_value,
            **kw,
        )
    except (ValueError, TypeError) as e:
        print(f"skyconv atrous: {e}", file=sys.stderr)
        return 2
    iters = np.asarray(res.iterations)
    noise = np.asarray(res.noise, dtype=np.float64)
    say(
        f"done in {time.perf_counter() - t0:.2f} s on {res.device}: {res.scales} scales, "
        f"{int(iters.max(initial=0))} iterations (max), residual noise "
        f"{np.nanmedian(noise) if np.any(np.isfinite(noise)) else float('nan'):.6g}"
    )
    header.add_history(
        f"skyconv atrous_denoise: dim={dim} snr_recon={kw['snr_recon']} "
        f"scale_min={kw['scale_min']} scale_max={kw['scale_max']} filter={kw['filter']} "
        f"convergence={kw['convergence']} robust={kw['robust']} variant={args.variant}"
    )
    header.add_history(
        f"skyconv atrous_denoise: {res.scales} scales, "
        f"{int(iters.max(initial=0))} iterations, device {res.device}"
    )
    recon = res.data.reshape(shape)
    fits.PrimaryHDU(recon, header=header).writeto(args.out, overwrite=args.overwrite)
    say(f"wrote {args.out}")
    if args.residual:
        resid = (squeezed - res.data).astype(res.data.dtype).reshape(shape)
        fits.PrimaryHDU(resid, header=header).writeto(args.residual, overwrite=args.overwrite)
        say(f"wrote {args.residual}")
    return 0


def main(argv=None) -> int:
    """Stand-alone entry (``python -m skyconv._cli_atrous ...``)."""
    parser = argparse.ArgumentParser(prog="skyconv")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
