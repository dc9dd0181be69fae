"""The beam of one smoothing call, checked and built once: ``fwhm`` or a window, the band
limit ``lmax`` and the accuracy ``tol``; every method takes it as it is."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..exceptions import ArgumentError
from .methods import (
    check_fwhm,
    check_tol,
    check_window,
    fwhm_profile,
    gauss,
    gaussian_fwhm,
    window_profile,
)


@dataclass(frozen=True, eq=False)
class Beam:
    """A radial beam on the sphere.

    Attributes
    ----------
    window : float64 array (lmax + 1,)
        b_l for l = 0 ... lmax (0 past the end of a given window).
    lmax : int
        Band limit of the harmonic method.
    tol : float
        Accuracy in (0, 1) (see ``smooth_map``).
    fwhm : float or None
        The Gaussian's FWHM in radians when the beam is one; the ring method then uses the
        Gaussian itself, not its band-limited window.
    """

    window: np.ndarray
    lmax: int
    tol: float
    fwhm: float | None = None

    @classmethod
    def from_args(cls, fwhm, beam_window, lmax: int, tol) -> Beam:
        """The beam of ``smooth_map``'s arguments (exactly one of ``fwhm`` and
        ``beam_window``; ``lmax`` a checked int >= 0), every argument checked here once."""
        tol = check_tol(tol)
        if (fwhm is None) == (beam_window is None):
            raise ArgumentError("give exactly one of fwhm (radians) and beam_window")
        if fwhm is not None:
            f = check_fwhm(fwhm)
            return cls(gauss(f, lmax), lmax, tol, f)
        w = check_window(beam_window)
        window = np.zeros(lmax + 1)
        window[: min(w.size, lmax + 1)] = w[: lmax + 1]
        return cls(window, lmax, tol)

    @classmethod
    def from_window(cls, window, lmax: int, tol: float) -> Beam:
        """The beam of a window b_l (l = 0 ... lmax) when only the window is known (a Gaussian
        window is recognised, to 1e-9, and gets its FWHM)."""
        w = np.zeros(lmax + 1)
        given = np.asarray(window, dtype=np.float64)[: lmax + 1]
        w[: given.size] = given
        return cls(w, lmax, float(tol), gaussian_fwhm(w))

    @cached_property
    def profile(self) -> tuple[np.ndarray, np.ndarray]:
        """The ring method's kernel (theta, values), see ``kernel_profile``; computed once."""
        if self.fwhm is not None:
            return fwhm_profile(self.fwhm, self.tol)
        return window_profile(self.window, self.tol)

    def fwhm_pixels(self, nside: int) -> float:
        """The beam's FWHM in pixels (of side sqrt(4π / 12 nside²)): ``fwhm`` for a Gaussian,
        else twice the radius where the ring profile falls to half its peak (inf when there is
        no such profile)."""
        pixel = math.sqrt(math.pi / 3.0) / nside
        if self.fwhm is not None:
            return self.fwhm / pixel
        try:
            theta, values = self.profile
        except ValueError:
            return math.inf
        if values.size == 0 or not values[0] > 0:
            return math.inf
        below = np.nonzero(values < 0.5 * values[0])[0]
        if below.size == 0:
            return math.inf
        return 2.0 * float(theta[below[0]]) / pixel

    @cached_property
    def key(self) -> tuple:
        """What a cached choice or split of this beam depends on."""
        return (self.window.tobytes(), self.lmax, self.tol, self.fwhm)


__all__ = ["Beam"]
