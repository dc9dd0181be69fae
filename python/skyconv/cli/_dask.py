"""Dask for the CLI verbs (``scfind``, ``atrous``, ``grid``): ``--chunks``,
``--workers N`` (a local process cluster), ``--scheduler ADDRESS`` (an existing cluster), lazy
inputs (zarr, HDF5 ``file.h5:dataset``, FITS and ``.npy`` read block by block through a memory
map in each task) and the output (``.zarr`` written block by block; ``.fits``/``.npy``
gathered), with Dask's progress bar on stderr.

Without any of the three options a verb runs as before, in memory.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys

import numpy as np

from ._errors import InputFileError, UsageError

DASK_OPTIONS = ("chunks", "workers", "scheduler")


def chunks_type(text: str):
    """argparse type of ``--chunks``: ``auto`` or comma-separated block sizes (z,y,x), each
    a whole number >= 1 or -1 (the whole axis)."""
    t = str(text).strip().lower()
    if t == "auto":
        return "auto"
    try:
        vals = tuple(int(v) for v in t.replace(" ", "").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or comma-separated whole numbers like 64,128,128, got {text!r}"
        ) from None
    if any(v == 0 or v < -1 for v in vals):
        raise argparse.ArgumentTypeError(f"block sizes must be >= 1 or -1, got {text!r}")
    return vals


def add_dask_options(p: argparse.ArgumentParser) -> None:
    """Add ``--chunks``, ``--workers`` and ``--scheduler`` to a verb's parser."""
    g = p.add_argument_group("Dask (out of core and on clusters; needs skyconv[dask])")
    g.add_argument(
        "--chunks",
        type=chunks_type,
        default=None,
        metavar="Z,Y,X|auto",
        help="process the cube in blocks of this size with Dask (zarr: default its own chunks)",
    )
    x = g.add_mutually_exclusive_group()
    x.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="run on a local Dask cluster of N worker processes (one thread each)",
    )
    x.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run on an existing Dask cluster (e.g. tcp://host:8786)",
    )


def wants_dask(args: argparse.Namespace) -> bool:
    """Whether any Dask option was given."""
    return any(getattr(args, k, None) is not None for k in DASK_OPTIONS)


def check_args(args: argparse.Namespace) -> None:
    """UsageError for impossible Dask options (before any work)."""
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    try:
        import dask.array  # noqa: F401
    except ImportError:
        raise UsageError(
            "--chunks/--workers/--scheduler need dask: pip install 'skyconv[dask]'"
        ) from None
    if args.workers is not None or args.scheduler is not None:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise UsageError(
                "--workers/--scheduler need distributed: pip install 'skyconv[dask]'"
            ) from None


@contextlib.contextmanager
def cluster(args: argparse.Namespace):
    """The Dask client for ``--workers``/``--scheduler`` (None without them: Dask's local
    threaded scheduler), closed on exit."""
    if args.scheduler is None and args.workers is None:
        yield None
        return
    import distributed

    if args.scheduler is not None:
        try:
            client = distributed.Client(args.scheduler, timeout="20s")
        except OSError as e:
            raise UsageError(f"--scheduler {args.scheduler}: cannot connect ({e})") from None
        with client:
            yield client
        return
    # each one-thread worker's skyconv pool takes its share of the cores (the S+C and SHT tasks
    # would otherwise size it to the worker's one thread: skyconv._dask.cluster.pool_of_worker)
    share = max(1, (os.cpu_count() or 1) // args.workers)
    env = {"SKYCONV_NUM_THREADS": os.environ.get("SKYCONV_NUM_THREADS") or str(share)}
    with (
        distributed.LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            env=env,
        ) as lc,
        distributed.Client(lc) as client,
    ):
        yield client


@contextlib.contextmanager
def session(args: argparse.Namespace, where: str):
    """The one way a verb runs on Dask: the options checked (:func:`check_args`), then the
    client of :func:`cluster` (None: Dask's local threads) and where the work runs, for the
    verb's messages.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with ``chunks``, ``workers`` and ``scheduler``.
    where : str
        The device the work runs on without a cluster (from ``resolve_device``).

    Yields
    ------
    client : distributed.Client or None
    where : str
        ``"Dask cluster ADDRESS"`` or ``"Dask threads on WHERE"``.

    Raises
    ------
    UsageError
        Dask missing, bad ``--workers``, or a scheduler that cannot be reached.
    """
    check_args(args)
    with cluster(args) as client:
        if client is not None:
            yield client, f"Dask cluster {client.scheduler.address}"
        else:
            yield None, f"Dask threads on {where}"


def open_cube(args: argparse.Namespace, path: str, outputs):
    """Check a cube verb's input and outputs (before any work), then open the cube lazily.

    Parameters
    ----------
    args : argparse.Namespace
        With ``hdu``, ``chunks`` and ``overwrite``.
    path : str
        The input: zarr, ``FILE.h5[:DATASET]``, FITS or .npy.
    outputs : list of (str or None, str)
        (path, option name) of every output the verb writes.

    Returns
    -------
    cube : dask.array.Array
    header : astropy.io.fits.Header or None

    Raises
    ------
    OutputExistsError, UsageError, InputFileError
        As :func:`skyconv.cli._io.check_output`, ``check_input`` and :func:`read_lazy`.
    """
    from . import _io

    check_args(args)
    for out, option in outputs:
        _io.check_output(out, args.overwrite, option)
    h5 = hdf5_parts(path)
    _io.check_input(h5[0] if h5 else path, "input")
    _io.check_distinct([o for o, _ in outputs], [h5[0] if h5 else path])
    return read_lazy(path, args.hdu, args.chunks)


def _block_chunks(shape, chunks, native):
    if chunks is None or chunks == "auto":
        return native or "auto"
    if len(chunks) != len(shape):
        raise UsageError(f"--chunks has {len(chunks)} sizes for a {len(shape)}-D cube {shape}")
    return chunks


def _fits_block(path, hdu, index):
    from astropy.io import fits

    with fits.open(path, memmap=True, do_not_scale_image_data=True) as h:
        return np.array(h[hdu].data[index])


def _npy_block(path, index):
    return np.array(np.load(path, mmap_mode="r")[index])


def _lazy(shape, dtype, chunks, read):
    """A dask array whose blocks are ``read(slices)``, one task per block."""
    import dask
    import dask.array as da

    normal = da.core.normalize_chunks(chunks, shape, dtype=dtype)
    starts = [np.cumsum((0,) + c[:-1]) for c in normal]
    blocks = np.empty(tuple(len(c) for c in normal), dtype=object)
    for idx in np.ndindex(blocks.shape):
        sl = tuple(
            slice(int(starts[a][i]), int(starts[a][i]) + normal[a][i]) for a, i in enumerate(idx)
        )
        bshape = tuple(normal[a][i] for a, i in enumerate(idx))
        blocks[idx] = da.from_delayed(dask.delayed(read)(sl), bshape, dtype=dtype)
    return da.block(blocks.tolist()) if blocks.ndim else blocks[()]


def read_lazy(path: str, hdu=None, chunks=None):
    """(dask array, FITS header or None) of an image or cube, read block by block.

    Parameters
    ----------
    path : str
        ``.zarr`` (``fits_header`` attribute as the CLI writes it), ``.h5``/``.hdf5``/``.hdf``
        with ``:DATASET`` (default: the file's only dataset), ``.npy`` or FITS.
    hdu : int, str or None
        FITS HDU (default: the first with data).
    chunks : tuple, "auto" or None
        Block sizes (None: zarr's and HDF5's own chunks, else Dask's ``auto``).

    Returns
    -------
    data : dask.array.Array
        Leading length-1 axes dropped (a Stokes axis), so a cube is 3-D or 2-D.
    header : astropy.io.fits.Header or None

    Raises
    ------
    InputFileError
        The file cannot be read as an image, or a FITS image is scaled (BSCALE/BZERO/BLANK).
    """
    import dask.array as da

    from . import _io

    h5 = hdf5_parts(path)
    if h5 is not None:
        data, header = _read_hdf5(h5[0], h5[1], chunks), None
    elif _io.file_format(path) == "zarr":
        zarr = _io._need("zarr")
        arr = zarr.open_array(path, mode="r")
        header = None
        cards = arr.attrs.get("fits_header")
        if cards is not None:
            header = _io._need("fits").Header.fromstring("".join(cards))
        data = da.from_zarr(path, chunks=_block_chunks(arr.shape, chunks, arr.chunks))
    elif _io.file_format(path) == "npy":
        m = np.load(path, mmap_mode="r")
        c = _block_chunks(m.shape, chunks, None)
        data, header = _lazy(m.shape, m.dtype, c, lambda sl, p=path: _npy_block(p, sl)), None
    else:
        fits = _io._need("fits")
        try:
            with fits.open(path, memmap=True, do_not_scale_image_data=True) as hl:
                if hdu is None:
                    hdu = next(
                        (i for i, h in enumerate(hl) if getattr(h, "is_image", False) and h.shape),
                        None,
                    )
                    if hdu is None:
                        raise InputFileError(f"{path}: no image HDU with data")
                h = hl[hdu]
                header = h.header.copy()
                shape, dtype = tuple(h.shape), h.data.dtype
        except OSError as e:
            raise InputFileError(f"{path}: not a FITS file ({e})") from None
        except (KeyError, IndexError):
            raise InputFileError(f"{path}: no HDU {hdu!r}") from None
        if any(k in header for k in ("BSCALE", "BZERO", "BLANK")) and dtype.kind != "f":
            raise InputFileError(
                f"{path}: a scaled integer FITS image cannot be read block by block; "
                "convert it to floating point (or drop --chunks/--workers/--scheduler)"
            )
        c = _block_chunks(shape, chunks, None)
        data = _lazy(shape, dtype, c, lambda sl, p=path, k=hdu: _fits_block(p, k, sl))
    while data.ndim > 3 and data.shape[0] == 1:
        data = data[0]
    if data.ndim not in (2, 3):
        raise InputFileError(f"{path}: expected a 2-D or 3-D cube, got shape {data.shape}")
    if data.dtype.kind != "f":
        data = data.astype(np.float32)
    elif not data.dtype.isnative:
        data = data.astype(data.dtype.newbyteorder("="))
    return data, header


def hdf5_parts(path: str):
    """(file, dataset or None) for ``FILE.h5[:DATASET]`` (also .hdf5, .hdf); else None."""
    m = re.match(r"^(.*\.(?:h5|hdf5|hdf))(?::(.+))?$", path, re.IGNORECASE)
    return None if m is None else (m.group(1), m.group(2))


def _h5_block(path, dset, index):
    import h5py

    with h5py.File(path, "r") as f:
        return np.array(f[dset][index])


def _read_hdf5(path, dset, chunks):
    try:
        import h5py
    except ImportError:
        raise UsageError("HDF5 files need h5py: pip install h5py") from None
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise InputFileError(f"{path}: not an HDF5 file ({e})") from None
    with f:
        if dset is None:
            names = []
            f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
            if len(names) != 1:
                raise InputFileError(
                    f"{path}: holds {len(names)} datasets; name one as {path}:DATASET"
                )
            dset = names[0]
        if dset not in f:
            raise InputFileError(f"{path}: no dataset {dset!r}")
        shape, dtype, native = f[dset].shape, f[dset].dtype, f[dset].chunks
    c = _block_chunks(shape, chunks, native)
    return _lazy(shape, dtype, c, lambda sl, p=path, d=dset: _h5_block(p, d, sl))


def write_lazy(path: str, data, header, client, quiet: bool, history=()) -> np.ndarray | None:
    """Write dask array ``data``: ``.zarr`` block by block (with the header's cards in
    ``fits_header``), other formats gathered and written by the CLI's writer. Shows Dask's
    progress unless ``quiet``. Returns the gathered array (None for zarr)."""
    from . import _io

    if _io.file_format(path) == "zarr":
        zarr = _io._need("zarr")

        if os.path.exists(path):
            import shutil

            shutil.rmtree(path)  # the verb has checked --overwrite
        store = data.to_zarr(path, compute=False)
        _compute(store, client, quiet)
        hdr = _io._clean_header(header, data.ndim, history)
        if hdr is not None:
            zarr.open_array(path, mode="r+").attrs["fits_header"] = [c.image for c in hdr.cards]
        return None
    (arr,) = _compute(data, client, quiet, gather=True)
    _io.write_image(path, arr, header, overwrite=True, history=history)
    return arr


def _compute(x, client, quiet, gather=False):
    import dask

    if client is not None:
        fut = client.compute(x)
        if not quiet:
            from distributed import progress

            progress(fut, file=sys.stderr) if _progress_takes_file() else progress(fut)
            print(file=sys.stderr)
        return (fut.result(),)
    if quiet:
        return dask.compute(x)
    from dask.diagnostics import ProgressBar

    with ProgressBar(out=sys.stderr):
        return dask.compute(x)


def _progress_takes_file() -> bool:
    import inspect

    from distributed import progress

    return "file" in inspect.signature(progress).parameters


__all__ = [
    "add_dask_options",
    "check_args",
    "chunks_type",
    "cluster",
    "open_cube",
    "read_lazy",
    "session",
    "wants_dask",
    "write_lazy",
]
