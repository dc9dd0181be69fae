"""healpy's spectrum, simulation, spin and derivative functions on skyconv's transforms.

``alm2cl`` and ``synalm`` are small numpy; ``alm2map_spin``/``map2alm_spin`` (spin 2) are
skyconv's polarised transform with T = 0; ``alm2map_der1`` is three spin-0 syntheses: the map,
∂T/∂φ (alm times i·m) and sin θ ∂T/∂θ, whose alm follow from the recurrence
sin θ ∂Y_lm/∂θ = l ε_{l+1,m} Y_{l+1,m} − (l+1) ε_{l,m} Y_{l−1,m}, ε_{l,m} = √((l²−m²)/(4l²−1)),
then both divided by sin θ of the pixel's ring (HEALPix has no pixel on a pole).

Handed to healpy when installed (NotImplementedError naming the case otherwise): spins other
than 2 and ``synalm`` of several spectra.
"""

from __future__ import annotations

import numpy as np

from .. import healpix as _hpx
from .. import sht as _sht
from ..exceptions import ArgumentError, ShapeError
from ..sht import Alm
from ._healpy_pix import _handover


def _lmax_of(size, mmax, name):
    lmax = Alm.getlmax(size, mmax)
    if lmax < 0:
        raise ArgumentError(f"{name} has {size} coefficients, not a valid alm size")
    return lmax


def _cross_cl(a, b, lmax, mmax, lmax_out):
    """(1/(2l+1)) Σ_m Re(a_lm b*_lm) with m > 0 counted twice, for l <= min(lmax, lmax_out)."""
    ell, m = _lm_of(lmax, mmax)
    prod = (a * np.conj(b)).real * np.where(m > 0, 2.0, 1.0)
    cl = np.bincount(ell, weights=prod, minlength=lmax + 1)[: lmax + 1]
    cl /= 2.0 * np.arange(lmax + 1) + 1.0
    return cl[: min(lmax, lmax_out) + 1]


def _lm_of(lmax, mmax):
    """l and m of every coefficient of the (lmax, mmax) layout."""
    ms = np.concatenate([np.full(lmax + 1 - m, m) for m in range(mmax + 1)])
    ells = np.concatenate([np.arange(m, lmax + 1) for m in range(mmax + 1)])
    return ells, ms


def alm2cl(alms1, alms2=None, lmax=None, mmax=None, lmax_out=None, nspec=None):
    """healpy.alm2cl: (cross-)power spectra of alm.

    Parameters
    ----------
    alms1 : complex array (nalm,) or sequence of n arrays
        healpy-layout alm.
    alms2 : same as alms1, optional
        Cross-spectra alms1[i] x alms2[i + d] (default: alms1).
    lmax, mmax : int, optional
        Layout of the alm (default from the size, mmax = lmax).
    lmax_out : int, optional
        Last multipole returned (capped at lmax, as healpy).
    nspec : int, optional
        Keep the first nspec spectra (for one alm, the first nspec values, as healpy).

    Returns
    -------
    numpy.ndarray
        C_l = (1/(2l+1)) sum_m Re(a_lm b*_lm) (unit of alm squared): (min(lmax, lmax_out) + 1,)
        for one alm, else (n(n+1)/2, ...) in healpy's order (TT, EE, BB, TE, EB, TB for 3).

    Raises
    ------
    ValueError
        For alm of different sizes or a size that does not fit (lmax, mmax).
    """
    lonely = np.ndim(alms1[0]) == 0 if len(alms1) else True
    a1 = [np.asarray(alms1)] if lonely else [np.asarray(a) for a in alms1]
    if alms2 is None:
        a2 = a1
    else:
        a2 = [np.asarray(alms2)] if np.ndim(alms2[0]) == 0 else [np.asarray(a) for a in alms2]
        if len(a2) != len(a1):
            raise ArgumentError("alms1 and alms2 must have the same number of spectra")
    size = a1[0].size
    if any(a.size != size for a in a1 + a2):
        raise ShapeError("all alms must have the same size")
    if lmax is None:
        lmax = _lmax_of(size, mmax, "alms1")
    mmax = lmax if mmax is None or mmax < 0 else int(mmax)
    if Alm.getsize(lmax, mmax) != size:
        raise ShapeError(f"alm size {size} does not match lmax={lmax}, mmax={mmax}")
    lmax_out = lmax if lmax_out is None else int(lmax_out)
    n = len(a1)
    cls = [
        _cross_cl(a1[i], a2[i + d], lmax, mmax, lmax_out) for d in range(n) for i in range(n - d)
    ]
    if lonely:  # healpy slices the one spectrum itself with nspec
        return cls[0] if nspec is None else cls[0][:nspec]
    return np.array(cls if nspec is None else cls[:nspec])


def one_spectrum(cls) -> bool:
    """Whether ``cls`` is one spectrum (numbers), not a sequence of spectra (some maybe None)."""
    if isinstance(cls, np.ndarray):
        return cls.ndim == 1
    try:
        first = cls[0]
    except (TypeError, IndexError, KeyError):
        return False
    return isinstance(first, (int, float, np.number)) and not isinstance(first, bool)


def synalm(cls, lmax=None, mmax=None, new=False, verbose=True):
    """healpy.synalm: Gaussian random alm with power spectrum ``cls``.

    Parameters
    ----------
    cls : array (lmax + 1,)
        C_l (unit squared). Several spectra are handed to healpy.
    lmax, mmax : int, optional
        Layout (default len(cls) - 1 and lmax); C_l beyond len(cls) count as 0.
    new, verbose : bool
        Ignored for one spectrum.

    Returns
    -------
    numpy.ndarray
        complex128 alm: real and imaginary parts drawn from numpy's global random state (all real
        parts, then all imaginary parts, as healpy: the same seed gives healpy's alm), m = 0 real.
    """
    if not one_spectrum(cls):
        return _handover("synalm", "several spectra", cls, lmax=lmax, mmax=mmax, new=new)
    c = np.asarray(cls, dtype=np.float64)
    lmax = c.size - 1 if lmax is None or lmax < 0 else int(lmax)
    mmax = lmax if mmax is None or mmax < 0 else int(mmax)
    ell, m = _lm_of(lmax, mmax)
    n = ell.size
    g = np.random.standard_normal(2 * n)
    alm = (g[:n] + 1j * g[n:]) / np.sqrt(2.0)
    alm[m == 0] = g[:n][m == 0]
    full = np.zeros(lmax + 1)
    k = min(lmax + 1, c.size)
    full[:k] = c[:k]
    return alm * np.sqrt(full[ell])


def alm2map_spin(alms, nside, spin, lmax, mmax=None):
    """healpy.alm2map_spin: two spin-s maps from gradient and curl alm.

    Parameters
    ----------
    alms : sequence of two complex arrays
        Gradient (E) and curl (B) alm.
    nside : int
        Output resolution.
    spin : int
        2 on skyconv; other spins are handed to healpy.
    lmax : int
        Band limit.
    mmax : int, optional
        Default lmax.

    Returns
    -------
    list of two numpy.ndarray
        float64 Q and U maps (npix,), healpy's sign convention.
    """
    if int(spin) != 2:
        return _handover("alm2map_spin", f"spin {spin}", alms, nside, spin, lmax, mmax=mmax)
    e, b = (np.asarray(a, dtype=np.complex128) for a in alms)
    mm = lmax if mmax is None else mmax
    maps = _sht.alm2map([np.zeros_like(e), e, b], nside, lmax=lmax, mmax=mm, pol=True)
    return [maps[1], maps[2]]


def map2alm_spin(maps, spin, lmax=None, mmax=None):
    """healpy.map2alm_spin: gradient and curl alm of two spin-s maps (no iteration).

    Parameters
    ----------
    maps : sequence of two arrays (npix,)
        Q and U RING maps.
    spin : int
        2 on skyconv; other spins are handed to healpy.
    lmax, mmax : int, optional
        Band limits (default 3*nside - 1 and lmax).

    Returns
    -------
    list of two numpy.ndarray
        complex128 E and B alm.
    """
    if int(spin) != 2:
        return _handover("map2alm_spin", f"spin {spin}", maps, spin, lmax=lmax, mmax=mmax)
    q, u = (np.asarray(m, dtype=np.float64) for m in maps)
    alms = _sht.map2alm([np.zeros_like(q), q, u], lmax=lmax, mmax=mmax, iter=0, pol=True)
    return [alms[1], alms[2]]


def _sin_dtheta_alm(alm, lmax, mmax):
    """alm (up to lmax + 1) of sin θ ∂T/∂θ for T with alm ``alm``."""
    out = np.zeros(Alm.getsize(lmax + 1, mmax), dtype=np.complex128)
    for m in range(mmax + 1):
        src = alm[Alm.getidx(lmax, m, m) : Alm.getidx(lmax, lmax, m) + 1]  # l = m..lmax
        ell = np.arange(m, lmax + 2, dtype=np.float64)  # output l = m..lmax+1
        eps = np.sqrt((ell * ell - m * m) / (4.0 * ell * ell - 1.0))  # ε_{l,m}
        dst = np.zeros(ell.size, dtype=np.complex128)
        # b_l += (l-1) ε_{l,m} a_{l-1}: from l' = l-1 (term l' ε_{l'+1} Y_{l'+1}).
        dst[1:] += (ell[1:] - 1.0) * eps[1:] * src
        # b_l -= (l+2) ε_{l+1,m} a_{l+1}: from l' = l+1 (term -(l'+1) ε_{l'} Y_{l'-1}).
        dst[:-2] -= (ell[:-2] + 2.0) * eps[1:-1] * src[1:]
        start = Alm.getidx(lmax + 1, m, m)
        out[start : start + dst.size] = dst
    return out


def alm2map_der1(alm, nside, lmax=None, mmax=None):
    """healpy.alm2map_der1: a map and its first derivatives.

    Parameters
    ----------
    alm : complex array
        healpy-layout alm of a spin-0 field.
    nside : int
        Output resolution.
    lmax, mmax : int, optional
        Layout (default from the size, mmax = lmax).

    Returns
    -------
    numpy.ndarray
        float64 (3, npix): T, dT/dtheta and dT/dphi / sin(theta) (per radian).
    """
    a = np.asarray(alm, dtype=np.complex128)
    if lmax is None:
        lmax = _lmax_of(a.size, mmax, "alm")
    mmax = lmax if mmax is None or mmax < 0 else int(mmax)
    _, m = _lm_of(lmax, mmax)
    t = _sht.alm2map(a, nside, lmax=lmax, mmax=mmax)
    dphi = _sht.alm2map(a * (1j * m), nside, lmax=lmax, mmax=mmax)
    sdt = _sht.alm2map(_sin_dtheta_alm(a, lmax, mmax), nside, lmax=lmax + 1, mmax=mmax)
    info = _hpx.ring_info(nside)
    sin_pix = np.repeat(info["sin_theta"], info["nphi"])
    return np.array([t, sdt / sin_pix, dphi / sin_pix])
