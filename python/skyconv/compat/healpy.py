"""healpy drop-in: ``from skyconv.compat import healpy as hp`` keeps healpy code working.

Computed by skyconv, with healpy 1.20.1's signatures and defaults: ``alm2map``, ``map2alm``,
``smoothing``, ``anafast``, ``alm2cl``, ``synalm``, ``synfast``, ``alm2map_spin``,
``map2alm_spin``, ``alm2map_der1``, ``gauss_beam``, ``almxfl``, ``Alm``, ``UNSEEN`` and the
pixel functions (``pix2ang``, ``ang2pix``, ``pix2vec``, ``vec2pix``, ``nside2npix``,
``npix2nside``, ``nside2order``, ``order2nside``, ``nside2resol``, ``nside2pixarea``,
``ring2nest``, ``nest2ring``, ``reorder``, ``query_disc``, ``ud_grade``). Transforms run on
the GPU when one works, else the CPU engine (``SKYCONV_DEVICE`` chooses). Every other name
(``read_map``, ``mollview``, ``Rotator``, ...) is healpy's own, looked up on first use; without
healpy installed it raises AttributeError naming the function and ``pip install healpy``.

Weights: ``use_weights=True`` uses HEALPix ring weights computed by skyconv (same problem as
HEALPix's weight program, solved in float64; no file, no network; ``datapath`` is not read for
them). ``use_pixel_weights=True`` is handed to healpy (which downloads the pixel weight files);
without healpy it logs a warning and proceeds unweighted, as healpy does when the download fails.
``gal_cut`` (degrees) leaves out pixels with |latitude| < gal_cut, as healpy.

Handed to healpy when installed (NotImplementedError naming the option otherwise):
``pixwin=True``, spins other than 2, ``synalm`` of several spectra, ``query_disc`` with
``inclusive`` or ``return_ranges``, array ``nside`` in pixel functions. ``verbose`` and
``inplace`` are accepted and have no effect (inputs are never modified).

``smoothing`` is healpy's harmonic smoothing (same result to ~1e-12 with the same ``iter``); for
real-space smoothing without ringing, or the fastest method at a given accuracy, use
``skyconv.smooth_map``.

Deliberate differences (each tested in tests/compat/test_compat_healpy.py): ``smoothing`` with
``nest=True`` restores UNSEEN pixels on the right pixels (healpy 1.20 restores them at the RING
positions) and treats NaN pixels like UNSEEN ones where healpy turns the whole map into NaN;
``ud_grade`` leaves NaN children out of the mean (healpy's parent becomes NaN); ``query_disc``
with ``nest=True`` returns every centre within the radius for discs wider than a hemisphere
(healpy 1.20.1 misses some); ``alm2map_der1`` works for lmax = 0 (healpy aborts); pixel
indices outside the map, zero vectors and NaN angles raise ValueError (healpy returns arbitrary
values); ``Alm.getlm`` raises AssertionError for an index outside the layout, as healpy.
"""

from __future__ import annotations

import logging

import numpy as np

from .. import healpix as _hpx
from .. import sht as _sht
from .._utils.args import float_value, reals, to_float
from .._utils.arrays import int_arg
from ..exceptions import ArgumentError, StateError
from ..sht import UNSEEN, almxfl
from ..sht import Alm as _Alm
from . import _healpy_orig
from ._healpy_harmonic import (
    alm2cl,
    alm2map_der1,
    alm2map_spin,
    map2alm_spin,
    one_spectrum,
    synalm,
)
from ._healpy_masked import is_ma, ma_to_array, to_ma
from ._healpy_pix import (
    _handover,
    ang2pix,
    nest2ring,
    npix2nside,
    nside2npix,
    nside2order,
    nside2pixarea,
    nside2resol,
    order2nside,
    pix2ang,
    pix2vec,
    query_disc,
    reorder,
    ring2nest,
    ud_grade,
    vec2pix,
)
from ._ring_weights import ring_weights

log = logging.getLogger("skyconv.compat.healpy")

__all__ = [
    "UNSEEN",
    "Alm",
    "alm2cl",
    "alm2map",
    "alm2map_der1",
    "alm2map_spin",
    "almxfl",
    "anafast",
    "ang2pix",
    "gauss_beam",
    "map2alm",
    "map2alm_spin",
    "nest2ring",
    "npix2nside",
    "nside2npix",
    "nside2order",
    "nside2pixarea",
    "nside2resol",
    "order2nside",
    "pix2ang",
    "pix2vec",
    "query_disc",
    "reorder",
    "ring2nest",
    "ring_weights",
    "smoothing",
    "synalm",
    "synfast",
    "ud_grade",
    "vec2pix",
]


class Alm(_Alm):
    """healpy's alm index helpers (m-major layout), as static methods."""

    @staticmethod
    def getlm(lmax, i=None):
        """(l, m) of index ``i`` (all indices of the mmax = lmax layout if None).

        Raises AssertionError (as healpy) when an index is not in [0, getsize(lmax)).
        """
        size = _Alm.getsize(lmax)
        if i is None:
            i = np.arange(size)
        idx = np.asarray(i)
        assert idx.size == 0 or (np.max(idx) < size and np.min(idx) >= 0), (
            f"Invalid index, it should be in [0, {size}) for lmax={lmax}"
        )
        return _Alm.getlm(lmax, i)


def __getattr__(name):
    """healpy's own ``name`` (and ``__version__``) for everything skyconv does not provide."""
    if name.startswith("__") and name != "__version__":
        raise AttributeError(name)
    return _healpy_orig.original(name)


def __dir__():
    hp = _healpy_orig.module()
    theirs = [n for n in dir(hp) if not n.startswith("_")] if hp is not None else []
    return sorted(set(globals()) | set(theirs))


def gauss_beam(fwhm, lmax=512, pol=False):
    """Gaussian beam window function b_l = exp(-l(l+1) sigma^2 / 2), sigma = fwhm/sqrt(8 ln 2).

    ``fwhm`` in radians. With ``pol=True`` an (lmax+1, 4) array: T, E, B, TE beams (E and B
    multiplied by exp(2 sigma^2), TE by exp(sigma^2)), as healpy.
    """
    sigma = fwhm / np.sqrt(8.0 * np.log(2.0))
    ell = np.arange(lmax + 1)
    sigma2 = sigma**2
    g = np.exp(-0.5 * ell * (ell + 1) * sigma2)
    if not pol:
        return g
    return g[:, np.newaxis] * np.exp([0.0, 2 * sigma2, 2 * sigma2, sigma2])


def alm2map(
    alms,
    nside,
    lmax=None,
    mmax=None,
    pixwin=False,
    fwhm=0.0,
    sigma=None,
    pol=True,
    inplace=False,
    verbose=True,
):
    """healpy.alm2map: HEALPix RING map(s) from alm.

    Parameters
    ----------
    alms : complex array (nalm,) or (ncomp, nalm), or sequence of arrays
        healpy-layout alm (the map's unit).
    nside : int
        Output resolution.
    lmax, mmax : int, optional
        Band limits (default from the array size, mmax = lmax).
    pixwin : bool
        Handed to healpy (pixel window files); NotImplementedError without healpy.
    fwhm, sigma : float
        Gaussian beam in radians applied first (spin-2 beam for E and B with ``pol``).
    pol : bool
        (T, E, B) -> (I, Q, U) for three components.
    inplace, verbose : bool
        Ignored (the input is never modified).

    Returns
    -------
    numpy.ndarray
        float64 (npix,) for one alm, (ncomp, npix) otherwise.

    Raises
    ------
    ShapeError
        If the alm size fits no (lmax, mmax).
    """
    if pixwin:
        return _handover(
            "alm2map",
            "pixwin=True",
            alms,
            nside,
            lmax=lmax,
            mmax=mmax,
            pixwin=pixwin,
            fwhm=fwhm,
            sigma=sigma,
            pol=pol,
            inplace=inplace,
        )
    comps, lonely = _sht._components(alms, "alms", "alm")
    comps = [_sht._alm_array(c, "alms") for c in comps]
    if sigma is None:
        fwhm = float_value(fwhm, "fwhm", min_value=0.0, unit="radians")
        sigma = fwhm / np.sqrt(8.0 * np.log(2.0))
    else:
        sigma = float_value(sigma, "sigma", min_value=0.0, unit="radians")
    if sigma != 0:
        size = comps[0].size
        mm = None if mmax is None or mmax < 0 else mmax
        lm = lmax if lmax is not None and lmax >= 0 else Alm.getlmax(size, mm)
        if lm < 0:
            raise _sht.ShapeError(f"alm has {size} coefficients, not a valid alm size")
        ell = np.arange(lm + 1)
        b0 = np.exp(-0.5 * ell * (ell + 1) * sigma**2)
        b2 = np.exp(-0.5 * (ell * (ell + 1) - 4) * sigma**2)
        polar = pol and len(comps) == 3
        comps = [
            almxfl(c, b2 if (polar and i > 0) else b0, mmax=mm if mm is not None else lm)
            for i, c in enumerate(comps)
        ]
    x = comps[0] if lonely else comps
    return _sht.alm2map(x, nside, lmax=lmax, mmax=mmax, pol=pol)


def _pixel_weights_unavailable(nside: int, why: str) -> None:
    log.warning(
        "Could not download pixel weights for nside %d: %s. Proceeding without pixel weights.",
        nside,
        why,
    )


def _gal_cut(maps: np.ndarray, gal_cut) -> np.ndarray:
    """``maps`` (ncomp, npix) with pixels at |latitude| < gal_cut degrees set to 0."""
    nside = npix2nside(maps.shape[-1])
    _, lat = _hpx.pix2ang(nside, np.arange(maps.shape[-1]), lonlat=True)
    return np.where(np.abs(lat) < gal_cut, 0.0, maps)


def _as_maps(maps):
    """Masked or plain map(s) as a list of 1-D float arrays, and whether there was one."""
    maps = ma_to_array(maps)
    comps, lonely = _sht._components(maps, "maps", "map")
    return comps, lonely or len(comps) == 1  # healpy: a (1, npix) input gives one alm


def map2alm(
    maps,
    lmax=None,
    mmax=None,
    iter=3,
    pol=True,
    use_weights=False,
    datapath=None,
    gal_cut=0,
    use_pixel_weights=False,
    verbose=True,
):
    """healpy.map2alm: alm of HEALPix RING map(s) by quadrature with Jacobi iterations.

    Parameters
    ----------
    maps : array (npix,) or (ncomp, npix), or sequence of maps (masked arrays accepted)
        RING-ordered map(s), any unit. UNSEEN and masked pixels count as 0.
    lmax, mmax : int, optional
        Band limits (default 3*nside - 1 and lmax).
    iter : int
        Jacobi iterations (default 3, as healpy).
    pol : bool
        With three maps (I, Q, U), the polarised transform giving (T, E, B).
    use_weights : bool
        Multiply each ring's pixel weight by HEALPix's ring weight, computed by skyconv
        (:func:`ring_weights`; no file, no network).
    datapath : str, optional
        Only passed on with ``use_pixel_weights`` (ring weights are not read from files).
    gal_cut : float
        Degrees: pixels with |latitude| < gal_cut count as 0.
    use_pixel_weights : bool
        Handed to healpy (which fetches its pixel weight files); without healpy a warning is
        logged and the transform runs unweighted, as healpy does when the download fails.
    verbose : bool
        Ignored.

    Returns
    -------
    numpy.ndarray
        complex128 alm (nalm,) for one map, (ncomp, nalm) otherwise; the maps' unit.

    Raises
    ------
    RuntimeError
        If both ``use_weights`` and ``use_pixel_weights`` are set.
    ValueError, ShapeError
        For invalid lmax/mmax or a map size that is not 12*nside**2.
    """
    if use_pixel_weights:
        if use_weights:
            raise StateError("Either use pixel or ring weights")
        if _healpy_orig.module() is not None:
            return _healpy_orig.original("map2alm")(
                maps,
                lmax=lmax,
                mmax=mmax,
                iter=iter,
                pol=pol,
                datapath=datapath,
                gal_cut=gal_cut,
                use_pixel_weights=True,
            )
        comps, _ = _as_maps(maps)
        _pixel_weights_unavailable(npix2nside(np.size(comps[0])), "healpy is not installed")
    comps, lonely = _as_maps(maps)
    if gal_cut is not None and to_float(gal_cut, "gal_cut") > 0:
        comps = list(_gal_cut(np.array([np.asarray(c, dtype=np.float64) for c in comps]), gal_cut))
    w = ring_weights(npix2nside(np.size(comps[0]))) if use_weights else None
    x = comps[0] if lonely else comps
    alms = _sht.map2alm(x, lmax=lmax, mmax=mmax, iter=iter, pol=pol, ring_weights=w)
    return alms


def smoothing(
    map_in,
    fwhm=0.0,
    sigma=None,
    beam_window=None,
    pol=True,
    iter=3,
    lmax=None,
    mmax=None,
    use_weights=False,
    use_pixel_weights=False,
    datapath=None,
    verbose=True,
    nest=False,
):
    """healpy.smoothing: map2alm, multiply by a beam, alm2map.

    Parameters
    ----------
    map_in : array (npix,) or (ncomp, npix), or sequence of maps (masked arrays accepted)
        RING maps (``nest=True``: NEST), any unit.
    fwhm : float
        Gaussian beam FWHM in radians (``sigma`` overrides it, ``beam_window`` both). With
        ``pol`` and three maps the beam is exp(-(l(l+1) - s^2) sigma^2 / 2), s = 2 for E and B.
    sigma : float, optional
        Gaussian beam sigma in radians.
    beam_window : array, optional
        b_l applied to every component (0 beyond its length).
    pol : bool
        Polarised transform for three maps (I, Q, U).
    iter : int
        Jacobi iterations of map2alm (default 3, as healpy).
    lmax, mmax : int, optional
        Band limits (default 3*nside - 1 and lmax).
    use_weights : bool
        HEALPix ring weights computed by skyconv.
    use_pixel_weights : bool
        Handed to healpy (a warning and no weights without it).
    datapath : str, optional
        Passed on with ``use_pixel_weights``.
    verbose : bool
        Ignored.
    nest : bool
        Maps in the NEST ordering.

    Returns
    -------
    numpy.ndarray or numpy.ma.MaskedArray
        float64 map(s) shaped like the input; UNSEEN (and NaN) pixels stay UNSEEN (NaN). Masked
        input (an array or a sequence of them) gives a masked array, masked where UNSEEN.

    Raises
    ------
    ShapeError
        If the maps are not 1-D or 2-D, or not 12*nside**2 pixels.
    """
    if use_pixel_weights:
        if _healpy_orig.module() is not None:
            return _healpy_orig.original("smoothing")(
                map_in,
                fwhm=fwhm,
                sigma=sigma,
                beam_window=beam_window,
                pol=pol,
                iter=iter,
                lmax=lmax,
                mmax=mmax,
                use_weights=use_weights,
                use_pixel_weights=True,
                datapath=datapath,
                nest=nest,
            )
    from ..smooth import _missing

    masked = is_ma(map_in)
    map_in = ma_to_array(map_in)
    if isinstance(map_in, (list, tuple)) and len(map_in) and np.ndim(map_in[0]) == 1:
        maps = np.array([reals(m, "map_in") for m in map_in])
    else:
        maps = np.array(reals(map_in, "map_in"))
    if maps.ndim not in (1, 2):
        raise _sht.ShapeError(f"map_in must be one map or a sequence of maps, got {maps.shape}")
    lonely = maps.ndim == 1
    maps = np.atleast_2d(maps)
    nside = _sht._npix2nside(maps.shape[1])
    if use_pixel_weights:
        _pixel_weights_unavailable(nside, "healpy is not installed")
    w = ring_weights(nside) if use_weights else None
    miss = _missing(maps)
    # healpy writes UNSEEN back; non-finite pixels get their own value back.
    restore = np.where(np.isfinite(maps), UNSEEN, maps)[miss]
    maps = np.where(miss, 0.0, maps)
    if nest:
        ring_of = _hpx.nest2ring(nside, np.arange(maps.shape[1]))
        ring = np.empty_like(maps)
        ring[:, ring_of] = maps
        maps = ring
    lmax = None if lmax is None else int_arg(lmax, "lmax")
    mmax = None if mmax is None else int_arg(mmax, "mmax")
    lm = 3 * nside - 1 if lmax is None or lmax < 0 else lmax
    mm = lm if mmax is None or mmax < 0 else mmax
    polar = bool(pol) and maps.shape[0] == 3
    if polar or maps.shape[0] == 1:
        groups = [(list(maps), polar)]
    else:
        groups = [([m], False) for m in maps]
    ell = np.arange(lm + 1.0)
    if sigma is None:
        sigma = float_value(fwhm, "fwhm", min_value=0.0, unit="radians") / (
            2.0 * np.sqrt(2.0 * np.log(2.0))
        )
    else:
        sigma = float_value(sigma, "sigma", min_value=0.0, unit="radians")
    out = []
    for comps, p in groups:
        alms = _sht.map2alm(comps, lmax=lm, mmax=mm, iter=iter, pol=p, ring_weights=w)
        for i, a in enumerate(alms):
            if beam_window is not None:
                fact = reals(beam_window, "beam_window")
            else:
                s = 2 if (p and i >= 1) else 0
                fact = np.exp(-0.5 * (ell * (ell + 1) - s**2) * sigma**2)
            almxfl(a, fact, mmax=mm, inplace=True)
        out.extend(_sht.alm2map(list(alms), nside, lmax=lm, mmax=mm, pol=p))
    res = np.array(out)
    if nest:
        res = res[:, ring_of]
    res[miss] = restore
    res = res[0] if lonely else res
    return to_ma(res) if masked else res


def anafast(
    map1,
    map2=None,
    nspec=None,
    lmax=None,
    mmax=None,
    iter=3,
    alm=False,
    pol=True,
    use_weights=False,
    datapath=None,
    gal_cut=0,
    use_pixel_weights=False,
):
    """healpy.anafast: (cross-)power spectra of map(s), :func:`map2alm` then :func:`alm2cl`.

    Parameters
    ----------
    map1 : array (npix,) or (ncomp, npix), or sequence of maps (masked arrays accepted)
        RING map(s), any unit.
    map2 : same as map1, optional
        Second map(s) for cross-spectra.
    nspec : int, optional
        Keep the first nspec spectra.
    lmax, mmax, iter, pol, use_weights, datapath, gal_cut, use_pixel_weights
        As :func:`map2alm`.
    alm : bool
        Also return the alm.

    Returns
    -------
    numpy.ndarray or tuple
        C_l in the maps' unit squared: (lmax + 1,) for one map, (6, lmax + 1) for I, Q, U (TT, EE,
        BB, TE, EB, TB); with ``alm=True`` (cl, alm1) or (cl, alm1, alm2).
    """
    kw = dict(
        lmax=lmax,
        mmax=mmax,
        iter=iter,
        pol=pol,
        use_weights=use_weights,
        datapath=datapath,
        gal_cut=gal_cut,
        use_pixel_weights=use_pixel_weights,
    )
    alms1 = map2alm(map1, **kw)
    alms2 = map2alm(map2, **kw) if map2 is not None else None
    cls = alm2cl(alms1, alms2=alms2, lmax=lmax, mmax=mmax, lmax_out=lmax, nspec=nspec)
    if alm:
        return (cls, alms1) if alms2 is None else (cls, alms1, alms2)
    return cls


def synfast(
    cls,
    nside,
    lmax=None,
    mmax=None,
    alm=False,
    pol=True,
    pixwin=False,
    fwhm=0.0,
    sigma=None,
    new=False,
    verbose=True,
):
    """healpy.synfast: a Gaussian random map with power spectrum ``cls``.

    Parameters
    ----------
    cls : array (lmax + 1,)
        C_l (map unit squared). Several spectra are handed to healpy.
    nside : int
        Output resolution.
    lmax, mmax : int, optional
        Band limits (default min(len(cls) - 1, 3*nside - 1) and lmax).
    alm : bool
        Also return the alm (after the beam, as healpy).
    pol : bool
        Passed on to alm2map.
    pixwin : bool
        Handed to healpy.
    fwhm, sigma : float
        Gaussian beam in radians.
    new, verbose : bool
        Ignored for one spectrum.

    Returns
    -------
    numpy.ndarray or tuple
        float64 map (npix,), or (map, alm) with ``alm=True``. Draws come from numpy's global
        random state in healpy's order: the same seed gives healpy's map.

    Raises
    ------
    ValueError
        For an invalid nside.
    """
    if not one_spectrum(cls) or pixwin:
        return _handover(
            "synfast",
            "several spectra or pixwin=True",
            cls,
            nside,
            lmax=lmax,
            mmax=mmax,
            alm=alm,
            pol=pol,
            pixwin=pixwin,
            fwhm=fwhm,
            sigma=sigma,
            new=new,
        )
    if not _hpx.isnsideok(nside):
        raise ArgumentError(f"Wrong nside value: {nside}")
    lmax = min(len(cls) - 1, 3 * nside - 1) if lmax is None or lmax < 0 else int(lmax)
    mmax = lmax if mmax is None or mmax < 0 else int(mmax)
    alms = synalm(cls, lmax=lmax, mmax=mmax, new=new)
    if sigma is None:
        fwhm = float_value(fwhm, "fwhm", min_value=0.0, unit="radians")
        sigma = fwhm / np.sqrt(8.0 * np.log(2.0))
    else:
        sigma = float_value(sigma, "sigma", min_value=0.0, unit="radians")
    if sigma != 0:  # healpy returns the beam-smoothed alm (its alm2map runs in place)
        ell = np.arange(lmax + 1.0)
        almxfl(alms, np.exp(-0.5 * ell * (ell + 1) * sigma**2), mmax=mmax, inplace=True)
    maps = alm2map(alms, nside, lmax=lmax, mmax=mmax, pol=pol)
    return (maps, alms) if alm else maps
