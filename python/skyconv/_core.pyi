# Type stubs for the Rust extension module skyconv._core. The public, documented API lives in
# the Python modules (skyconv.filters, skyconv.healpix, ...); these are its private entry points.
# Each family appends its section below.

from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str

FloatArray = npt.NDArray[np.float32] | npt.NDArray[np.float64]

# --- backend -------------------------------------------------------------------------------
def set_num_threads(n: int) -> None: ...
def get_num_threads() -> int: ...
def resolve_device(device: str | None = None) -> str: ...
def backend_info() -> dict[str, Any]: ...
def last_profile() -> dict[str, float]: ...
def _set_cuda_search_dirs(dirs: list[str]) -> None: ...
def _compile_kernels(major: int, minor: int) -> dict[str, int]: ...

# --- filters -------------------------------------------------------------------------------
def _correlate1d(
    input: FloatArray,
    weights: list[float],
    axis: int,
    mode: str,
    cval: float,
    origin: int,
    convolve: bool,
    device: str | None = None,
) -> FloatArray: ...
def _gaussian_filter1d(
    input: FloatArray,
    sigma: float,
    axis: int,
    mode: str,
    cval: float,
    truncate: float,
    radius: int | None = None,
    device: str | None = None,
) -> FloatArray: ...
def _uniform_filter1d(
    input: FloatArray,
    size: int,
    axis: int,
    mode: str,
    cval: float,
    origin: int,
    device: str | None = None,
) -> FloatArray: ...

# --- statistics primitive ----------------------------------------------------------------------
def _select_kth(
    data: FloatArray,
    k: int,
    center: float = 0.0,
    abs: bool = False,
    range: str = "all",
    device: str | None = None,
) -> float | None: ...

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

# --- sht (src/py/sht.rs) -------------------------------------------------------------------
# Arguments are checked by skyconv.sht: alm are C-contiguous complex128 arrays in healpy's
# layout for (lmax, mmax); maps C-contiguous float32 or float64 (all one dtype) RING maps of
# 12*nside**2 pixels, UNSEEN pixels counting as 0 (the engine zeroes them on its float64 copy;
# the input is never modified). pol=True only with 3 components. Errors: ShapeError (sizes),
# ValueError (mmax > lmax, nside, ring_weights), TypeError (mixed dtypes), DeviceError.

def _alm2map(
    alms: list[npt.NDArray[np.complex128]],
    nside: int,
    lmax: int,
    mmax: int,
    pol: bool,
    device: str | None = None,
) -> npt.NDArray[np.float64]: ...  # (ncomp, npix)
def _map2alm(
    maps: list[FloatArray],
    nside: int,
    lmax: int,
    mmax: int,
    iter: int,
    pol: bool,
    ring_weights: npt.NDArray[np.float64] | None = None,
    device: str | None = None,
) -> npt.NDArray[np.complex128]: ...  # (ncomp, nalm)
