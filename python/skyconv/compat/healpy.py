"""healpy drop-in: ``alm2map``, ``map2alm``, ``smoothing``, ``gauss_beam``, ``Alm`` and
``almxfl`` with healpy 1.20's exact signatures and defaults, computed by skyconv (GPU when one
works, else the CPU engine; set ``SKYCONV_DEVICE`` to choose).

Change ``import healpy as hp`` to ``from skyconv.compat import healpy as hp`` for these calls.
Options skyconv does not implement raise ``NotImplementedError`` naming the option:
``pixwin=True`` (needs healpy's pixel window files), ``use_weights=True``,
``use_pixel_weights=True`` and ``datapath`` (need healpy's weight files; pass ring weights to
``skyconv.map2alm(ring_weights=...)`` instead) and ``gal_cut != 0``. ``verbose`` and ``inplace``
are accepted and have no effect (inputs are never modified).

``smoothing`` is healpy's harmonic smoothing (same result to ~1e-12); for real-space smoothing
without ringing, or the fastest method at a given accuracy, use ``skyconv.smooth_map``. Two
deliberate differences: with ``nest=True`` UNSEEN pixels are restored on the right pixels
(healpy 1.20 restores them at the RING positions), and NaN pixels are treated like UNSEEN ones
(zero in the transform, NaN again in the output) where healpy turns the whole map into NaN.
"""

from __future__ import annotations

import numpy as np

from .. import sht as _sht
from ..sht import UNSEEN, Alm, almxfl

__all__ = ["UNSEEN", "Alm", "alm2map", "almxfl", "gauss_beam", "map2alm", "smoothing"]


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


def _not_implemented(option: str, why: str):
    raise NotImplementedError(f"skyconv.compat.healpy: {option} is not supported ({why})")


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
    """healpy.alm2map: HEALPix RING map(s) from alm; ``fwhm``/``sigma`` (radians) smooth with a
    Gaussian beam first (spin-2 beam for E and B when ``pol``)."""
    if pixwin:
        _not_implemented("pixwin=True", "healpy's pixel window files are not bundled")
    comps, lonely = _sht._components(alms, "alms", "alm")
    comps = [_sht._alm_array(c, "alms") for c in comps]
    if sigma is None:
        sigma = fwhm / np.sqrt(8.0 * np.log(2.0))
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


def _refuse_weight_files(use_weights, use_pixel_weights, datapath):
    """healpy's quadrature weights come from data files skyconv does not bundle."""
    if use_weights:
        _not_implemented(
            "use_weights=True",
            "healpy's ring weight files are not bundled; pass ring_weights to skyconv.map2alm",
        )
    if use_pixel_weights:
        _not_implemented("use_pixel_weights=True", "healpy's pixel weight files are not bundled")
    if datapath is not None:
        _not_implemented("datapath", "weight files are not read")


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
    """healpy.map2alm: alm of HEALPix RING map(s) with ``iter`` Jacobi iterations; UNSEEN
    pixels count as 0."""
    _refuse_weight_files(use_weights, use_pixel_weights, datapath)
    if gal_cut != 0:
        _not_implemented("gal_cut", "mask the map with UNSEEN instead")
    return _sht.map2alm(maps, lmax=lmax, mmax=mmax, iter=iter, pol=pol)


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
    """healpy.smoothing: map2alm -> beam -> alm2map. ``fwhm``/``sigma`` in radians (``sigma``
    overrides ``fwhm``, ``beam_window`` both; a zero width still band-limits at ``lmax``).
    With ``pol`` and three maps (I, Q, U) the Gaussian is exp(-(l(l+1) - s^2) sigma^2 / 2),
    s = 2 for E and B; a ``beam_window`` applies to T, E and B alike. UNSEEN (and NaN) pixels
    count as 0 and stay UNSEEN (NaN). Masked arrays are filled with UNSEEN and come back
    masked."""
    _refuse_weight_files(use_weights, use_pixel_weights, datapath)
    from .. import healpix as _hpx
    from ..smooth import _missing

    masked = isinstance(map_in, np.ma.MaskedArray)
    if masked:
        map_in = map_in.filled(UNSEEN)
    if isinstance(map_in, (list, tuple)) and len(map_in) and np.ndim(map_in[0]) == 1:
        maps = np.array([np.asarray(m, dtype=np.float64) for m in map_in])
    else:
        maps = np.array(map_in, dtype=np.float64)
    if maps.ndim not in (1, 2):
        raise _sht.ShapeError(f"map_in must be one map or a sequence of maps, got {maps.shape}")
    lonely = maps.ndim == 1
    maps = np.atleast_2d(maps)
    nside = _sht._npix2nside(maps.shape[1])
    miss = _missing(maps)
    # healpy writes UNSEEN back; non-finite pixels get their own value back.
    restore = np.where(np.isfinite(maps), UNSEEN, maps)[miss]
    maps = np.where(miss, 0.0, maps)
    if nest:
        ring_of = _hpx.nest2ring(nside, np.arange(maps.shape[1]))
        ring = np.empty_like(maps)
        ring[:, ring_of] = maps
        maps = ring
    lm = 3 * nside - 1 if lmax is None or lmax < 0 else int(lmax)
    mm = lm if mmax is None or mmax < 0 else int(mmax)
    polar = bool(pol) and maps.shape[0] == 3
    if polar or maps.shape[0] == 1:
        groups = [(list(maps), polar)]
    else:
        groups = [([m], False) for m in maps]
    ell = np.arange(lm + 1.0)
    if sigma is None:
        sigma = fwhm / (2.0 * np.sqrt(2.0 * np.log(2.0)))
    out = []
    for comps, p in groups:
        alms = _sht.map2alm(comps, lmax=lm, mmax=mm, iter=iter, pol=p)
        for i, a in enumerate(alms):
            if beam_window is not None:
                fact = np.asarray(beam_window, dtype=np.float64)
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
    return np.ma.masked_values(res, UNSEEN) if masked else res
