"""The input and output of SoFiA-2's Smooth + Clip step as its parameter file describes them
(``skyconv scfind --par``, :mod:`skyconv.cli.scfind`): read the cube (``input.data``,
``input.region``, ``input.invert``) with ``flag.region`` boxes blanked, and write the raw mask
as SoFiA-2 does: 8-bit, 1 = detected, the (cropped) cube's header and WCS, file
``<output.directory>/<output.filename>_mask-raw.fits``.
"""

from __future__ import annotations

import os

import numpy as np

from ..exceptions import ArgumentError, ShapeError
from .sofia_par import SofiaPar


def load_cube(par: SofiaPar):
    """The cube S+C sees and its FITS header (CRPIX shifted for ``input.region``).

    Parameters
    ----------
    par : SofiaPar

    Returns
    -------
    cube : ndarray (z, y, x) or (y, x), float32 or float64
    header : astropy.io.fits.Header

    Raises
    ------
    ValueError
        A region outside the cube, or data that is not 2-D or 3-D.
    """
    from astropy.io import fits

    with fits.open(par.data, memmap=True) as hdul:
        h = hdul[0]
        data = np.asarray(h.data)
        header = h.header.copy()
    while data.ndim > 3 and data.shape[0] == 1:  # degenerate Stokes axes
        data = data[0]
    if data.ndim not in (2, 3):
        raise ShapeError(f"{par.data}: expected a 2-D or 3-D cube, got shape {data.shape}")
    if data.dtype.kind != "f":
        data = data.astype(np.float32)
    data = data.astype(data.dtype.newbyteorder("="), copy=True)
    cube3 = data if data.ndim == 3 else data[None]
    for b in par.flag_regions:
        x0, x1, y0, y1, z0, z1 = b
        cube3[z0 : z1 + 1, y0 : y1 + 1, x0 : x1 + 1] = np.nan
    if par.region is not None:
        x0, x1, y0, y1, z0, z1 = par.region
        nz, ny, nx = cube3.shape
        if x1 >= nx or y1 >= ny or (data.ndim == 3 and z1 >= nz):
            raise ArgumentError(
                f"input.region {par.region} lies outside the cube of {nx} x {ny} x {nz} pixels"
            )
        zs = slice(z0, z1 + 1) if data.ndim == 3 else slice(None)
        cube3 = cube3[zs, y0 : y1 + 1, x0 : x1 + 1]
        for axis, lo in ((1, x0), (2, y0), (3, z0 if data.ndim == 3 else 0)):
            key = f"CRPIX{axis}"
            if key in header and lo:
                header[key] = header[key] - lo
    if par.invert:
        cube3 = -cube3
    cube = np.ascontiguousarray(cube3 if data.ndim == 3 else cube3[0])
    return cube, header


def write_raw_mask(path, mask, header, overwrite):
    """Write ``mask`` as SoFiA-2's raw mask: BITPIX 8, the cube's header otherwise.

    Parameters
    ----------
    path : str
    mask : ndarray of uint8 (values 0 and 1)
    header : astropy.io.fits.Header or None
    overwrite : bool

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is false.
    """
    from astropy.io import fits

    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists and output.overwrite is false")
    hdr = fits.Header() if header is None else header.copy()
    for key in ("BSCALE", "BZERO", "BLANK", "BUNIT", "DATAMIN", "DATAMAX"):
        hdr.remove(key, ignore_missing=True, remove_all=True)
    hdu = fits.PrimaryHDU(np.asarray(mask, dtype=np.uint8), header=hdr)
    hdu.header["HISTORY"] = "skyconv scfind --par: raw Smooth + Clip mask (SoFiA-2 2.5.1 rules)"
    hdu.writeto(path, overwrite=overwrite)


__all__ = ["load_cube", "write_raw_mask"]
