"""``skyconv scfind``: SoFiA 2's Smooth-and-Clip source finder on a FITS, ``.npy`` or ``.zarr``
cube, with a progress bar over the kernels.

    skyconv scfind cube.fits --out mask.fits [--kernels-xy 0,3,6 --kernels-z 0,3,7,15
                   --threshold 5 --replacement 2 --statistic mad --flux-range negative
                   --spatial boxcar --precision sofia2
                   --device {auto,cpu,cuda} --threads N --hdu N --overwrite -q]
    skyconv scfind --par sofia.par [--out mask.fits --device ... -q]
    skyconv scfind cube.zarr --out mask.zarr --chunks 64,128,128 [--workers N |
                   --scheduler ADDRESS]   (Dask: out of core, the same mask)

By default the mask is SoFiA-2 2.5.1's raw S+C mask, voxel for voxel (its repeated boxcars,
arithmetic, noise sample and statistics: ``--precision sofia2``).

``--par`` reads a SoFiA-2 parameter file instead of the cube and the S+C options:
``input.data``, ``input.region``, ``input.invert``, ``scfind.*``, ``flag.region`` and
``output.*``; other keys are reported as ignored, and settings that change what S+C sees
(``flag.cube``, ``flag.catalog``, ``flag.auto``, preconditioning, ...) as making the mask
differ. With ``output.writeRawMask = true`` the mask is written as SoFiA-2 writes it:
``<output.directory>/<output.filename>_mask-raw.fits``, 8-bit, the (cropped) cube's header.

The mask (uint8, 1 = source) is written in the cube's format with the cube's header: leading
degenerate axes (a Stokes axis of length 1) are dropped, and so are their WCS keywords, so a
4-D cube gives a 3-D mask with a 3-D WCS.

Options map onto ``skyconv.smooth_and_clip``'s keywords in one place, :func:`params`; a
parameter-file option (SoFiA's ``scfind.*`` keys) belongs beside :func:`add_options` and
feeds the same dictionary.
"""

from __future__ import annotations

import argparse
import os
import sys

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
from ._errors import InputFileError, UsageError


def numbers(text: str, cast=float) -> list:
    """argparse type: comma- or space-separated numbers."""
    try:
        return [cast(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None


def add_parser(subparsers) -> argparse.ArgumentParser:
    """The ``scfind`` verb's parser in ``subparsers`` (see :mod:`skyconv.cli.main`)."""
    p = verb_parser(
        subparsers,
        "scfind",
        "Smooth-and-Clip source finding (SoFiA 2 rules) on a spectral-line cube",
        __doc__,
    )
    p.add_argument(
        "cube",
        nargs="?",
        help="input cube: FITS (first HDU with data, or --hdu), .npy or .zarr (not with --par)",
    )
    add_output(p, "output mask: .fits, .npy or .zarr (optional with --par)", required=False)
    p.add_argument(
        "--par",
        metavar="FILE",
        default=None,
        help="a SoFiA-2 parameter file: the cube and the S+C settings come from it",
    )
    p.add_argument(
        "--hdu",
        type=_io.hdu_key,
        default=None,
        help="FITS HDU index or name (default: first with data)",
    )
    add_options(p)
    add_common(p)
    add_dask_options(p)
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
    p.add_argument(
        "--spatial",
        choices=("boxcar", "boxcar_approx", "gaussian"),
        default="boxcar",
        help="boxcar: SoFiA-2's repeated boxcars (default); boxcar_approx: skyconv's former "
        "rule; gaussian: a true Gaussian",
    )
    p.add_argument(
        "--precision",
        choices=("sofia2", "float64"),
        default="sofia2",
        help="sofia2: SoFiA-2 2.5.1's arithmetic, sample and statistics (default); "
        "float64: skyconv's float64 rules",
    )
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
        precision=args.precision,
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

    The verb contract of :mod:`skyconv.cli.main` (0 returned; errors raised, the command line's
    and the outputs' before any work); an input that cannot be read as a 2-D or 3-D cube is an
    ``InputFileError`` (exit status 1).
    """
    import skyconv

    if args.par is not None:
        return run_par(args)
    if args.cube is None or args.out is None:
        raise UsageError("scfind needs a cube and --out PATH (or --par FILE)")
    if wants_dask(args):
        return run_dask(args)
    device, where = before_work(args, [(args.out, "--out")], [(args.cube, "cube")])
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


def run_dask(args: argparse.Namespace) -> int:
    """``skyconv scfind CUBE --out MASK`` with ``--chunks``/``--workers``/``--scheduler``: the
    cube read block by block (zarr, HDF5 ``FILE.h5:DATASET``, FITS or .npy through memory
    maps), Smooth + Clip on Dask (the single call's mask and noise), the mask written block
    by block to ``.zarr`` (or gathered for .fits/.npy).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by the parser :func:`add_parser` made.

    Returns
    -------
    int
        0 (errors are raised, as in :func:`run`).

    Raises
    ------
    UsageError
        Dask missing, bad ``--chunks``/``--workers``, or a scheduler that cannot be reached.
    InputFileError
        The cube cannot be read block by block.
    """
    import skyconv

    from . import _dask

    cube, header = _dask.open_cube(args, args.cube, [(args.out, "--out")])
    device, where = resolve_device(args)
    apply_threads(args)
    say = Progress("scfind", args.quiet)

    def bar(done, total, rms):
        say.bar(done, total, "kernels", f" noise {rms:.3e}")

    if header is not None:
        header = header.copy()
        header.remove("BUNIT", ignore_missing=True, remove_all=True)
        header["BUNIT"] = ("", "1 = source voxel")
    scratch = os.path.dirname(os.path.abspath(args.out))  # out of core: next to the output
    with _dask.session(args, where) as (client, where):
        mask, noise = skyconv.smooth_and_clip(
            cube, device=args.device, return_noise=True, progress=bar, scratch=scratch,
            **params(args),
        )  # fmt: skip
        out = _dask.write_lazy(
            args.out,
            mask,
            header,
            client,
            args.quiet,
            history=["skyconv scfind (Smooth-and-Clip, SoFiA 2 rules, Dask)"],
        )
    dt = say.elapsed()
    if not args.quiet:
        n = int(out.sum()) if out is not None else int(mask.sum().compute())
        print(
            f"scfind: {n} of {mask.size} voxels in the mask ({len(noise.rms)} kernels, "
            f"{dt:.2f} s, blocks {cube.chunksize} on {where}); noise of the cube "
            f"{noise.rms0:.4e}"
        )
    return 0


def run_par(args: argparse.Namespace) -> int:
    """``skyconv scfind --par FILE``: Smooth + Clip as a SoFiA-2 parameter file says.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by the parser :func:`add_parser` made, with ``par`` set.

    Returns
    -------
    int
        0 (errors are raised, as in :func:`run`).

    Raises
    ------
    UsageError
        The parameter file cannot be used, a cube is also given, or nothing would be written
        (``output.writeRawMask = false`` and no ``--out``) (exit status 2).
    OutputExistsError
        The raw mask exists and ``output.overwrite = false``, or ``--out`` exists without
        ``--overwrite`` (exit status 2).
    InputFileError
        ``input.data`` cannot be read as a 2-D or 3-D cube, or ``input.region`` lies outside
        it (exit status 1).
    """
    import skyconv

    from .._utils.sofia_par import ParError, read_par
    from .._utils.sofia_scfind import load_cube, write_raw_mask

    if args.cube is not None:
        raise UsageError("with --par the cube is the parameter file's input.data: drop CUBE")
    _io.check_input(args.par, "--par")
    try:
        par = read_par(args.par)
    except ParError as e:
        raise UsageError(str(e)) from None
    say = Progress("scfind", args.quiet)
    if par.ignored:
        say.say(f"scfind: ignored (not part of Smooth + Clip): {', '.join(par.ignored)}")
    for w in par.warnings:
        print(f"scfind: warning: {w}", file=sys.stderr)
    if not par.enabled:
        say.say("scfind: scfind.enable = false in the parameter file: nothing to do")
        return 0
    raw = par.raw_mask_path if par.write_raw_mask else None
    if raw is None and args.out is None:
        raise UsageError(
            "output.writeRawMask is false in the parameter file and no --out is given: "
            "nothing would be written"
        )
    _io.check_output(raw, par.overwrite, option="output.filename")
    _io.check_output(args.out, args.overwrite)
    _io.check_input(par.data, "input.data")
    _io.check_distinct([raw, args.out], [par.data])
    device, where = resolve_device(args)
    apply_threads(args)
    try:
        cube, header = load_cube(par)
    except (OSError, ValueError) as e:
        raise InputFileError(f"{par.data}: {e}") from None

    def bar(done, total, rms):
        say.bar(done, total, "kernels", f" noise {rms:.3e}")

    mask, noise = skyconv.smooth_and_clip(
        cube, device=device, return_noise=True, progress=bar, **par.kwargs
    )
    dt = say.elapsed()
    written = []
    if raw is not None:
        write_raw_mask(raw, mask, header, par.overwrite)
        written.append(raw)
    if args.out is not None:
        _io.write_image(
            args.out,
            mask,
            header,
            overwrite=args.overwrite,
            history=["skyconv scfind --par (Smooth-and-Clip, SoFiA-2 2.5.1 rules)"],
        )
        written.append(args.out)
    if not args.quiet:
        print(
            f"scfind: {int(mask.sum())} of {mask.size} voxels in the mask "
            f"({len(noise.rms)} kernels, {dt:.2f} s on {where}); "
            f"noise of the cube {noise.rms0:.4e}; wrote {', '.join(written)}"
        )
    return 0
