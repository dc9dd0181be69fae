"""Type stubs for the compiled extension ``skyconv._core`` (private; use the public modules)."""

import numpy as np
import numpy.typing as npt

# --- healpix (src/py/healpix.rs) -------------------------------------------------------------
# Inputs must be C-contiguous native-endian arrays (skyconv.healpix makes sure); outputs take
# the input's shape. Angles in radians; pixel indices int64. Errors: ValueError (nside, range),
# ShapeError (theta/phi shapes differ).

def _healpix_pix2ang(
    nside: int, ipix: npt.NDArray[np.int64], nest: bool
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
def _healpix_ang2pix(
    nside: int, theta: npt.NDArray[np.float64], phi: npt.NDArray[np.float64], nest: bool
) -> npt.NDArray[np.int64]: ...
def _healpix_ring2nest(nside: int, ipix: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]: ...
def _healpix_nest2ring(nside: int, ipix: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]: ...
def _healpix_ring_info(
    nside: int,
) -> tuple[
    npt.NDArray[np.float64],  # theta
    npt.NDArray[np.float64],  # z = cos(theta)
    npt.NDArray[np.float64],  # sin(theta)
    npt.NDArray[np.int64],  # nphi
    npt.NDArray[np.float64],  # phi0
    npt.NDArray[np.int64],  # first pixel
]: ...
