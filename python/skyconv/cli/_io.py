"""The one reader and writer of the CLI's files: images and cubes (FITS, ``.npy``, ``.zarr``),
HEALPix maps and alm (healpy's FITS layouts), sample tables; and the checks done before work.

Every verb checks its outputs with :func:`check_output` and its inputs with
:func:`check_input` before it reads or computes anything. FITS needs astropy; ``.zarr`` needs
the optional ``zarr`` package (a clear error otherwise).
"""

from __future__ import annotations

import os
import re
import zipfile

import numpy as np

from ..healpix import npix2nside
from ._errors import InputFileError, MissingDependencyError, OutputExistsError, UsageError

# --------------------------------------------------------------------------------------------
# checks done before any work


def file_format(path: str) -> str:
    """``"npy"``, ``"npz"``, ``"zarr"`` or ``"fits"`` (anything else) from a path's suffix."""
    p = str(path).rstrip("/").lower()
    for ext in ("npy", "npz", "zarr"):
        if p.endswith("." + ext):
            return ext
    return "fits"


def check_output(
    path: str | None, overwrite: bool, option: str = "--out", data_file: bool = True
) -> None:
    """Refuse an output that cannot be written, before any work is done.

    Parameters
    ----------
    path : str or None
        The output path (None: nothing to check).
    overwrite : bool
        ``--overwrite`` was given: an existing file may be replaced.
    option : str
        The option that named the path, for the message.
    data_file : bool
        The path is a data file (FITS, .npy, .npz, .zarr): check that the package its format
        needs is installed. False for other files (JSON, text).

    Raises
    ------
    OutputExistsError
        ``path`` exists and ``overwrite`` is False (exit status 2).
    UsageError
        The folder that would hold ``path`` does not exist (exit status 2).
    MissingDependencyError
        A ``.zarr`` path without the ``zarr`` package, or FITS without astropy.
    """
    if path is None:
        return
    if os.path.exists(path) and not overwrite:
        raise OutputExistsError(f"{path} exists (use --overwrite to replace it)")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"{option} {path}: the folder {parent} does not exist")
    if data_file:
        _need(file_format(path))


def check_distinct(outputs, inputs) -> None:
    """Refuse an output that is one of the inputs (``UsageError``, exit status 2): the input
    may still be read (memory-mapped) while the output is written.

    Parameters
    ----------
    outputs, inputs : sequence of (str or None)
        Paths; None entries are skipped. Call after :func:`check_input`.
    """
    for out in outputs:
        if out is None or not os.path.exists(out):
            continue
        for inp in inputs:
            if inp is not None and os.path.exists(inp) and os.path.samefile(out, inp):
                raise UsageError(f"the output {out} is the input {inp}: write another file")


def check_input(path: str, option: str = "input") -> None:
    """Refuse a missing input file before any work (``UsageError``, exit status 2)."""
    if not os.path.exists(path):
        raise UsageError(f"{option} {path}: no such file")
    _need(file_format(path))


def _need(fmt: str):
    if fmt == "zarr":
        try:
            import zarr
        except ImportError:
            raise MissingDependencyError(
                ".zarr files need the zarr package: pip install zarr (or use .fits or .npy)"
            ) from None
        return zarr
    if fmt == "fits":
        try:
            from astropy.io import fits
        except ImportError:
            raise MissingDependencyError(
                "FITS files need astropy: pip install astropy (or use .npy)"
            ) from None
        return fits
    return None


# --------------------------------------------------------------------------------------------
# images and cubes


def read_image(path: str, hdu=None, min_ndim: int = 1):
    """An image or cube and its header.

    Parameters
    ----------
    path : str
        ``.fits`` (any other suffix is read as FITS), ``.npy`` or ``.zarr`` (an array whose
        attribute ``fits_header`` holds the header's cards, as :func:`write_image` writes).
    hdu : int, str or None
        FITS HDU index or name; None: the first HDU with at least ``min_ndim`` data axes.
    min_ndim : int
        Fewest axes an HDU needs to be picked when ``hdu`` is None.

    Returns
    -------
    data : numpy.ndarray
        The array as stored (FITS axes reversed: NAXIS3, NAXIS2, NAXIS1 → (z, y, x)).
    header : astropy.io.fits.Header or None
        The HDU's header (None for ``.npy``; a zarr array's ``fits_header`` when present).

    Raises
    ------
    InputFileError
        No HDU with data, or the HDU asked for does not exist.
    """
    fmt = file_format(path)
    if fmt == "npy":
        try:
            return np.load(path, mmap_mode="r"), None
        except ValueError as e:
            raise InputFileError(f"{path}: not a NumPy .npy array ({e})") from None
    if fmt == "zarr":
        zarr = _need("zarr")
        arr = zarr.open_array(path, mode="r")
        cards = arr.attrs.get("fits_header")
        header = None
        if cards is not None:
            fits = _need("fits")
            header = fits.Header.fromstring("".join(cards))
        return np.asarray(arr[...]), header
    fits = _need("fits")
    try:
        return _read_fits_image(fits, path, hdu, min_ndim, memmap=True)
    except ValueError as e:
        # astropy cannot memory-map scaled or BLANK-flagged integer images: read them whole.
        if "memory-mapped" not in str(e):
            raise
        return _read_fits_image(fits, path, hdu, min_ndim, memmap=False)


def _read_fits_image(fits, path: str, hdu, min_ndim: int, memmap: bool):
    try:
        hdul = fits.open(path, memmap=memmap)
    except OSError as e:
        raise InputFileError(f"{path}: not a FITS file ({e})") from None
    with hdul:
        if hdu is None:
            hdu = next(
                (
                    i
                    for i, h in enumerate(hdul)
                    if getattr(h, "is_image", False)
                    and h.data is not None
                    and h.data.ndim >= min_ndim
                ),
                None,
            )
            if hdu is None:
                raise InputFileError(f"{path}: no image HDU with data")
        try:
            h = hdul[hdu]
        except (KeyError, IndexError):
            raise InputFileError(f"{path}: no HDU {hdu!r}") from None
        if h.data is None:
            raise InputFileError(f"{path}: HDU {hdu} has no data")
        return np.array(h.data), h.header.copy()


def hdu_key(value):
    """argparse type of ``--hdu``: an index (int) or an EXTNAME (str)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


_AXIS_KEY = re.compile(
    r"^(NAXIS|CTYPE|CRVAL|CDELT|CRPIX|CUNIT|CROTA|CNAME|CRDER|CSYER|CPERI|CZPHS)(\d+)[A-Z]?$"
)
_MATRIX_KEY = re.compile(r"^(PC|CD|PV|PS)(\d+)_(\d+)[A-Z]?$")


def drop_axes(header, ndim: int):
    """A copy of ``header`` without the keywords of FITS axes above ``ndim``.

    Removes ``NAXISn``, ``CTYPEn``, ``CRVALn``, ``CDELTn``, ``CRPIXn``, ``CUNITn``, ``CROTAn``
    (and the other per-axis WCS keywords, all alternate letters) for ``n > ndim``, the
    ``PCi_j``/``CDi_j`` entries with ``i`` or ``j`` above ``ndim`` and ``PVi_m``/``PSi_m`` of
    those axes, and sets ``WCSAXES`` to ``ndim`` where present, so that a 3-D mask of a 4-D
    (Stokes) cube has a 3-D WCS that astropy reads without warnings.
    """
    out = header.copy()
    for key in list(out.keys()):
        m = _AXIS_KEY.match(key)
        if m and int(m.group(2)) > ndim:
            out.remove(key, ignore_missing=True, remove_all=True)
            continue
        m = _MATRIX_KEY.match(key)
        if m:
            i, j = int(m.group(2)), int(m.group(3))
            if i > ndim or (m.group(1) in ("PC", "CD") and j > ndim):
                out.remove(key, ignore_missing=True, remove_all=True)
    for key in list(out.keys()):
        if key.startswith("WCSAXES"):
            out[key] = min(int(out[key]), ndim)
    return out


_SCALING_KEYS = ("BSCALE", "BZERO", "BLANK", "DATAMIN", "DATAMAX")


def write_image(
    path: str, data: np.ndarray, header=None, overwrite: bool = False, history=(), extra=()
) -> None:
    """Write an image or cube with its header.

    Parameters
    ----------
    path : str
        ``.fits`` (any other suffix), ``.npy`` or ``.zarr``.
    data : numpy.ndarray
        The array (FITS: NAXIS1 is the last axis).
    header : astropy.io.fits.Header or None
        Copied; the data-scaling keywords (BSCALE, BZERO, BLANK, DATAMIN, DATAMAX) are removed
        and the keywords of axes beyond ``data.ndim`` dropped (:func:`drop_axes`).
    overwrite : bool
        Replace an existing file (the verb has already checked with :func:`check_output`).
    history : sequence of str
        HISTORY cards to add.
    extra : sequence of (name, array)
        Further FITS image extensions (e.g. ``("WEIGHTS", w)``); FITS only.

    Raises
    ------
    UsageError
        ``extra`` arrays with a ``.npy`` or ``.zarr`` path.
    """
    fmt = file_format(path)
    data = np.asarray(data)
    if fmt in ("npy", "zarr") and extra:
        names = ", ".join(n for n, _ in extra)
        raise UsageError(f"{path}: a .{fmt} file holds one array; {names} need .fits")
    if fmt == "npy":
        if os.path.exists(path) and not overwrite:
            raise OutputExistsError(f"{path} exists (use --overwrite to replace it)")
        np.save(path, data)
        return
    hdr = _clean_header(header, data.ndim, history)
    if fmt == "zarr":
        zarr = _need("zarr")
        if os.path.exists(path) and not overwrite:
            raise OutputExistsError(f"{path} exists (use --overwrite to replace it)")
        arr = zarr.open_array(path, mode="w", shape=data.shape, dtype=data.dtype)
        arr[...] = data
        if hdr is not None:
            arr.attrs["fits_header"] = [c.image for c in hdr.cards]
        return
    fits = _need("fits")
    hdus = [fits.PrimaryHDU(data, header=hdr)]
    for name, arr in extra:
        hdus.append(
            fits.ImageHDU(
                np.asarray(arr), header=_clean_header(header, np.ndim(arr), ()), name=name
            )
        )
    fits.HDUList(hdus).writeto(path, overwrite=overwrite)


def _clean_header(header, ndim, history):
    if header is None and not history:
        return None
    fits = _need("fits")
    hdr = fits.Header() if header is None else drop_axes(header, ndim)
    for key in _SCALING_KEYS:
        hdr.remove(key, ignore_missing=True, remove_all=True)
    for line in history:
        hdr.add_history(line)
    return hdr


def write_arrays(path: str, arrays: dict, overwrite: bool = False) -> None:
    """Several named arrays: ``.npz`` (``numpy.savez``) or ``.zarr`` (a group, one array each).

    Raises
    ------
    UsageError
        Any other format.
    """
    fmt = file_format(path)
    if fmt not in ("npz", "zarr"):
        raise UsageError(f"{path}: several arrays need .npz, .zarr or .fits")
    if os.path.exists(path) and not overwrite:
        raise OutputExistsError(f"{path} exists (use --overwrite to replace it)")
    if fmt == "npz":
        np.savez(path, **arrays)
        return
    zarr = _need("zarr")
    g = zarr.open_group(path, mode="w")
    for name, arr in arrays.items():
        arr = np.asarray(arr)
        create = getattr(g, "create_array", None) or g.create_dataset  # zarr 3 or 2
        z = create(name, shape=arr.shape, dtype=arr.dtype)
        z[...] = arr


# --------------------------------------------------------------------------------------------
# tables of samples


def read_table(path: str) -> dict[str, np.ndarray]:
    """The columns of a table: ``.npz`` (one array per column), ``.zarr`` (a group with one
    array per column) or anything ``astropy.table.Table.read`` reads (FITS, ECSV, CSV, ...).

    Raises
    ------
    InputFileError
        The file cannot be read as a table.
    """
    fmt = file_format(path)
    if fmt == "npz":
        try:
            with np.load(path) as z:
                return {k: z[k] for k in z.files}
        except (ValueError, OSError, zipfile.BadZipFile) as e:
            raise InputFileError(f"{path}: not a NumPy .npz file ({e})") from None
    if fmt == "zarr":
        zarr = _need("zarr")
        g = zarr.open_group(path, mode="r")
        return {k: np.asarray(g[k][...]) for k in sorted(g.array_keys())}
    _need("fits")
    from astropy.table import Table

    try:
        t = Table.read(path)
    except Exception as e:  # astropy raises many kinds for an unreadable table
        raise InputFileError(f"{path}: cannot read a table ({e})") from None
    return {n: np.asarray(t[n]) for n in t.colnames}


def read_header(path: str):
    """A FITS header from a FITS file (its first header) or a text file
    (``Header.totextfile``'s layout)."""
    fits = _need("fits")
    try:
        return fits.getheader(path)
    except OSError:
        try:
            return fits.Header.fromtextfile(path)
        except Exception as e:
            raise InputFileError(
                f"{path}: neither a FITS file nor a header text file ({e})"
            ) from None


# --------------------------------------------------------------------------------------------
# HEALPix maps and alm (healpy's layouts)


def read_healpix(path: str):
    """The maps of a HEALPix FITS binary table (``healpy.write_map``'s layout), as stored.

    Returns
    -------
    maps : numpy.ndarray
        ``(ncomp, npix)`` float64, in the file's ordering.
    names : list of str
        The column names.
    nested : bool
        ORDERING is NESTED.

    Raises
    ------
    InputFileError
        No binary table, NSIDE that does not match the pixel count, or a cut-sky (EXPLICIT)
        map.
    """
    fits = _need("fits")
    try:
        hdul = fits.open(path)
    except OSError as e:
        raise InputFileError(f"{path}: not a FITS file ({e})") from None
    with hdul:
        hdu = next((h for h in hdul[1:] if isinstance(h, fits.BinTableHDU)), None)
        if hdu is None:
            raise InputFileError(f"{path}: no binary table with a HEALPix map")
        hdr = hdu.header
        if str(hdr.get("INDXSCHM", "IMPLICIT")).strip().upper() == "EXPLICIT":
            raise InputFileError(f"{path}: cut-sky (INDXSCHM = EXPLICIT) maps are not supported")
        names = [c.name for c in hdu.columns]
        cols = [np.asarray(hdu.data.field(i), dtype=np.float64).ravel() for i in range(len(names))]
        nside = hdr.get("NSIDE")
        nested = str(hdr.get("ORDERING", "RING")).strip().upper().startswith("NEST")
    maps = np.stack(cols)
    npix = maps.shape[1]
    if nside is not None and 12 * int(nside) ** 2 != npix:
        raise InputFileError(f"{path}: NSIDE={nside} but the columns hold {npix} pixels")
    if nside is None:
        try:
            npix2nside(npix)
        except ValueError:
            raise InputFileError(f"{path}: {npix} pixels is not a HEALPix map size") from None
    return maps, names, nested


def healpix_names(ncomp: int, pol: bool = False) -> list[str]:
    """Column names: I/Q/U_STOKES for a polarised triple, else SIGNAL, SIGNAL1, ..."""
    if ncomp == 3 and pol:
        return ["I_STOKES", "Q_STOKES", "U_STOKES"]
    return [f"SIGNAL{i}" if i else "SIGNAL" for i in range(ncomp)]


def write_healpix(
    path: str,
    maps: np.ndarray,
    names=None,
    nested: bool = False,
    overwrite: bool = False,
    pol: bool = False,
    extra=(),
    history=(),
) -> None:
    """Write HEALPix maps as ``healpy.write_map`` does, so ``healpy.read_map`` reads them back.

    Parameters
    ----------
    path : str
        The FITS file.
    maps : numpy.ndarray
        ``(npix,)`` or ``(ncomp, npix)``, float32 (written as E) or float64 (D); at most 999.
    names : list of str, optional
        Column names (default :func:`healpix_names`).
    nested : bool
        The maps are in NESTED ordering (written in ORDERING).
    overwrite : bool
        Replace an existing file (already checked by :func:`check_output`).
    pol : bool
        Three maps are I, Q, U (POLCCONV = COSMO is written).
    extra : sequence of (name, array)
        Further HEALPix tables of the same layout (e.g. ``("WEIGHTS", w)``), read with
        ``healpy.read_map(path, hdu=2)``.
    history : sequence of str
        HISTORY cards.

    Raises
    ------
    UsageError
        More than 999 maps (a FITS table's column limit).
    """
    fits = _need("fits")
    hdus = [fits.PrimaryHDU()]
    hdus.append(_healpix_table(fits, maps, names, nested, pol, "xtension", history))
    for name, arr in extra:
        hdus.append(_healpix_table(fits, arr, None, nested, False, name, ()))
    fits.HDUList(hdus).writeto(path, overwrite=overwrite)


def _healpix_table(fits, maps, names, nested, pol, extname, history):
    maps = np.atleast_2d(np.asarray(maps))
    ncomp, npix = maps.shape
    if ncomp > 999:
        raise UsageError(
            f"{ncomp} maps do not fit in a FITS table (999 columns at most): write .npz or .zarr"
        )
    nside = npix2nside(npix)
    fmt = "E" if maps.dtype == np.float32 else "D"
    if fmt == "D":
        maps = maps.astype(np.float64, copy=False)
    names = names if names is not None else healpix_names(ncomp, pol)
    cols = [fits.Column(name=n, format=fmt, array=m) for n, m in zip(names, maps, strict=True)]
    hdu = fits.BinTableHDU.from_columns(cols)
    h = hdu.header
    h["PIXTYPE"] = ("HEALPIX", "HEALPIX pixelisation")
    h["ORDERING"] = ("NESTED" if nested else "RING", "Pixel ordering scheme, RING or NESTED")
    h["EXTNAME"] = extname
    h["NSIDE"] = (nside, "Resolution parameter of HEALPIX")
    h["FIRSTPIX"] = (0, "First pixel # (0 based)")
    h["LASTPIX"] = (npix - 1, "Last pixel # (0 based)")
    h["INDXSCHM"] = ("IMPLICIT", "Indexing: IMPLICIT or EXPLICIT")
    h["OBJECT"] = ("FULLSKY", "Sky coverage")
    if pol and ncomp == 3:
        h["POLCCONV"] = ("COSMO", "Coord. convention for polarisation (COSMO/IAU)")
    for line in history:
        h.add_history(line)
    return hdu


def read_window(path: str) -> np.ndarray:
    """A beam window b_l (l = 0, 1, ...) as float64: a text file (one value per line) or a FITS
    table whose first column holds it (``healpy.write_cl``'s layout, as Planck's beam files).

    Raises
    ------
    InputFileError
        Neither a FITS table nor a text file of numbers.
    """
    if str(path).lower().endswith((".fits", ".fit", ".fits.gz", ".fit.gz")):
        fits = _need("fits")
        try:
            with fits.open(path) as hdul:
                hdu = next((h for h in hdul[1:] if isinstance(h, fits.BinTableHDU)), None)
                if hdu is None:
                    raise InputFileError(f"{path}: no table with a beam window")
                return np.asarray(hdu.data.field(0), dtype=np.float64).ravel()
        except OSError as e:
            raise InputFileError(f"{path}: not a FITS file ({e})") from None
    try:
        return np.loadtxt(path, dtype=np.float64, ndmin=1)
    except ValueError as e:
        raise InputFileError(f"{path}: not a text file of b_l values ({e})") from None


def nest_to_ring(maps: np.ndarray) -> np.ndarray:
    """``(ncomp, npix)`` NESTED maps reordered to RING."""
    from .. import healpix

    npix = maps.shape[-1]
    nside = npix2nside(npix)
    out = np.empty_like(maps)
    out[..., healpix.nest2ring(nside, np.arange(npix))] = maps
    return out


def read_alm(path: str) -> tuple[np.ndarray, int, int]:
    """alm of ``healpy.write_alm``'s layout: one (INDEX, REAL, IMAG) table per component with
    INDEX = l² + l + m + 1.

    Returns
    -------
    alm : numpy.ndarray
        complex128, ``(nalm,)`` or ``(ncomp, nalm)``, healpy's m-major order.
    lmax, mmax : int

    Raises
    ------
    InputFileError
        No alm table, or INDEX values that are not l² + l + m + 1 with 0 <= m <= l.
    """
    fits = _need("fits")
    comps = []
    try:
        hdul = fits.open(path)
    except OSError as e:
        raise InputFileError(f"{path}: not a FITS file ({e})") from None
    with hdul:
        for h in hdul[1:]:
            if not isinstance(h, fits.BinTableHDU) or len(h.columns) < 3:
                continue
            idx = np.asarray(h.data.field(0), dtype=np.int64)
            re_ = np.asarray(h.data.field(1), dtype=np.float64)
            im = np.asarray(h.data.field(2), dtype=np.float64)
            comps.append((idx, re_, im))
    if not comps:
        raise InputFileError(f"{path}: no alm binary table")
    lmax = mmax = 0
    for idx, _, _ in comps:
        if idx.size == 0 or np.any(idx < 1):
            raise InputFileError(f"{path}: bad alm INDEX values")
        ell = np.floor(np.sqrt(idx - 1)).astype(np.int64)
        em = idx - ell * ell - ell - 1
        if np.any(em < 0) or np.any(em > ell):
            raise InputFileError(f"{path}: bad alm INDEX values")
        lmax = max(lmax, int(ell.max()))
        mmax = max(mmax, int(em.max()))
    out = np.zeros((len(comps), (mmax + 1) * (lmax + 1) - mmax * (mmax + 1) // 2), complex)
    for c, (idx, re_, im) in enumerate(comps):
        ell = np.floor(np.sqrt(idx - 1)).astype(np.int64)
        em = idx - ell * ell - ell - 1
        out[c, em * (2 * lmax + 1 - em) // 2 + ell] = re_ + 1j * im
    return (out[0] if len(comps) == 1 else out), lmax, mmax


def write_alm(path: str, alms: np.ndarray, lmax: int, mmax: int, overwrite: bool = False):
    """alm as ``healpy.write_alm`` writes them (one HDU per component, INDEX = l² + l + m + 1,
    MAX-LPOL and MAX-MPOL in each header)."""
    fits = _need("fits")
    alms = np.atleast_2d(alms)
    ell = np.concatenate([np.arange(m, lmax + 1) for m in range(mmax + 1)])
    em = np.concatenate([np.full(lmax + 1 - m, m) for m in range(mmax + 1)])
    index = ell * ell + ell + em + 1
    hdus = [fits.PrimaryHDU()]
    for a in alms:
        cols = [
            fits.Column(name="INDEX", format="J" if index.max() < 2**31 else "K", array=index),
            fits.Column(name="REAL", format="D", array=a.real),
            fits.Column(name="IMAG", format="D", array=a.imag),
        ]
        h = fits.BinTableHDU.from_columns(cols)
        h.header["MAX-LPOL"] = (lmax, "Maximum L multipole order")
        h.header["MAX-MPOL"] = (mmax, "Maximum M multipole degree")
        hdus.append(h)
    fits.HDUList(hdus).writeto(path, overwrite=overwrite)


__all__ = [
    "check_distinct",
    "check_input",
    "check_output",
    "drop_axes",
    "file_format",
    "hdu_key",
    "healpix_names",
    "nest_to_ring",
    "read_alm",
    "read_header",
    "read_healpix",
    "read_image",
    "read_table",
    "read_window",
    "write_alm",
    "write_arrays",
    "write_healpix",
    "write_image",
]
