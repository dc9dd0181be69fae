"""``skyconv atrous``: à trous wavelet reconstruction of a FITS cube (see skyconv.atrous).

    skyconv atrous cube.fits --out recon.fits [--dim 3 --snr 4 --scale-min 1 --scale-max 0
                   --filter b3spline --convergence 0.005 --no-robust --device auto
                   --hdu 0 --residual resid.fits --overwrite --quiet]

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
    p.add_argument("input", help="input FITS file")
    p.add_argument("--out", "-o", required=True, help="output FITS file (the reconstruction)")
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


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; returns the exit status (0 success, 2 bad input)."""
    from astropy.io import fits

    from .atrous import atrous_denoise

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    with fits.open(args.input) as hdul:
        hdu = hdul[_hdu_key(args.hdu)]
        if hdu.data is None:
            print(f"skyconv atrous: HDU {args.hdu} of {args.input} has no data", file=sys.stderr)
            return 2
        data = np.asarray(hdu.data)
        header = hdu.header.copy()
    shape = data.shape
    squeezed = data
    while squeezed.ndim > 1 and squeezed.shape[0] == 1 and squeezed.ndim > args.dim:
        squeezed = squeezed[0]
    if squeezed.dtype.kind != "f":
        squeezed = squeezed.astype(np.float32)
    say(
        f"skyconv atrous: {args.input} {squeezed.shape} {squeezed.dtype}, dim={args.dim}, "
        f"snr={args.snr}, filter={args.filter}"
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
            dim=args.dim,
            snr_recon=args.snr,
            scale_min=args.scale_min,
            scale_max=args.scale_max,
            filter=args.filter,
            convergence=args.convergence,
            robust=args.robust,
            device=args.device,
            progress=progress,
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
        f"skyconv atrous_denoise: dim={args.dim} snr_recon={args.snr} "
        f"scale_min={args.scale_min} scale_max={args.scale_max} filter={args.filter} "
        f"convergence={args.convergence} robust={args.robust}"
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
