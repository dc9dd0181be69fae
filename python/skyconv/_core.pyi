# Type stubs for the Rust extension module skyconv._core. The public, documented API lives in
# the Python modules (skyconv.filters, skyconv.healpix, ...); these are its private entry points.
# Each family appends its section below.

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str

FloatArray = npt.NDArray[np.float32] | npt.NDArray[np.float64]

# --- backend -------------------------------------------------------------------------------
def set_num_threads(n: int) -> None: ...
def get_num_threads() -> int: ...
def resolve_device(device: str | None = None) -> str: ...
def resolve_device_label(device: str | None = None) -> str: ...  # "cpu" or "cuda:N"
def backend_info() -> dict[str, Any]: ...
def last_profile() -> dict[str, float]: ...
def _set_cuda_search_dirs(dirs: list[str]) -> None: ...
def _compile_kernels(major: int, minor: int) -> dict[str, int]: ...
def _compile_module_cached(name: str, major: int, minor: int) -> tuple[int, bool]: ...
def _module_cache_key(name: str, major: int, minor: int) -> str: ...
def _kernel_cache_key(
    source: str, options: list[str], arch: tuple[int, int], nvrtc_version: tuple[int, int]
) -> str: ...
def _kernel_cache_dir() -> str | None: ...
def _clear_kernel_cache() -> int: ...
def _trace_entries() -> list[dict[str, Any]]: ...
def _trace_record(stage: str, detail: str, seconds: float) -> None: ...
def _trace_clear() -> None: ...
def _warmup(ordinal: int, modules: list[str] | None = None, fft: bool = True) -> list[str]: ...
def _select_cuda_libs(
    dirs: list[str],
    driver_version: int | None = None,
    only: int | None = None,
    loadable: list[str] | None = None,
) -> dict[str, Any]: ...
def _dma_direct(address: int, nbytes: int) -> bool: ...  # GPU copies skip staging (page-locked)
def _gpu_admission_probe(
    ordinal: int, parts: int, micros: int, mode: str = "admitted"
) -> tuple[int, int, int]: ...  # test hook of the GPU admission rule (no GPU touched)
def _gpu_admission_stats(
    reset: bool = False,
) -> dict[int, tuple[int, float, float]]: ...  # {ordinal: (calls, waited s, admitted s)}

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
def _select_pair(
    data: FloatArray,
    k0: int,
    k1: int,
    center: float = 0.0,
    abs: bool = False,
    range: str = "all",
    device: str | None = None,
) -> tuple[float, float] | None: ...  # ranks k0 and k1 (the GPU follows both in one selection)

# Key passes of the distributed exact selection (skyconv._dask.select): the finite values of
# data (or |data - center|, float64) whose order-preserving 64-bit key starts with prefix (its
# top 64 - shift bits; all values when shift is 64). ValueError: shift > 64, bits outside
# 1..=min(shift, 24).
def _key_counts(
    data: FloatArray,
    prefix: int = 0,
    shift: int = 64,
    bits: int = 16,
    center: float | None = None,
) -> npt.NDArray[np.uint64]: ...  # counts by the next `bits` key bits, 2**bits of them
def _key_values(
    data: FloatArray,
    prefix: int = 0,
    shift: int = 64,
    center: float | None = None,
) -> npt.NDArray[np.float64]: ...  # the values themselves, in data order

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
def _healpix_vec2pix(
    nside: int,
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    z: npt.NDArray[np.float64],
    nest: bool,
) -> npt.NDArray[np.int64]: ...  # ValueError for a zero or non-finite vector
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

# --- filter chains -----------------------------------------------------------------------------
# passes: (kind, axis, mode, cval, params); kind "gaussian" [sigma, truncate, radius or -1],
# "uniform" [size, origin], "correlate" [origin, *weights].
# _filter_chain pass kinds: "gaussian", "uniform", "correlate", "dilated" ([step, weights...])
def _filter_chain(
    input: FloatArray,
    passes: list[tuple[str, int, str, float, list[float]]],
    device: str | None = None,
) -> FloatArray: ...

# The GPU kernel of a pass along `axis` over a whole array of `shape` (element type `dtype`,
# "float32"|"float64"; `split`: à trous's fused split; first tap `offset` elements from the
# output, None: centred; a boundary mode other than constant) and its shared memory in bytes, and
# every tile that fits (kernel name, bytes); None when the pass cannot be split. For benchmarks.
# `gpu`: the ordinal whose shared memory bounds the whole-axis tiles; None: the 48 KB any GPU
# gives a block (no GPU needed).
def _filter_tile_plan(
    shape: list[int],
    axis: int,
    taps: int,
    step: int,
    dtype: str,
    split: bool = False,
    offset: int | None = None,
    gpu: int | None = None,
) -> tuple[tuple[str, int], list[tuple[str, int]]] | None: ...

# --- Smooth-and-Clip and noise statistics (src/py/cube.rs) ----------------------------------
# kernels: (spatial "gaussian"|"boxcar_approx", sigma_y px, sigma_x px, spectral
# "none"|"boxcar"|"gaussian", boxcar width or sigma in channels, use_rms0). replace: ("none"|
# "sign"|"copysign", factor). noise: ("sofia2:std|mad|gauss" or "sofia1:negative|gauss|mad|std",
# "full"|"negative"|"positive", two_pass). sampling: ("cadence"|"stride", n). mask: uint8 of
# the cube's shape, bit 0 = in the mask on entry; on return bit 0 | bit 1 (found by a kernel),
# or bit 0 alone with detected=False (the final mask, no pass of the caller's own).
# Returns (noise of the original cube, noise per kernel) in data units.
def _scfind(
    cube: FloatArray,
    mask: npt.NDArray[np.uint8],
    kernels: list[tuple[str, float, float, str, float, bool]],
    mode: str,
    threshold: float,
    inclusive: bool,
    replace: tuple[str, float],
    noise: tuple[str, str, bool],
    sampling: tuple[str, int],
    slab_planes: int | None = None,
    progress: object | None = None,
    fitter: object | None = None,
    device: str | None = None,
    exact: bool = False,
    detected: bool = True,
) -> tuple[float, list[float]]: ...

# Stages of one kernel for the Dask path (skyconv._dask.cube) on `device` ("cpu", "cuda",
# "cuda:N"; None: SKYCONV_DEVICE, else "auto"), bit-identical to _scfind's own steps on that
# engine. _scfind_spatial: the cube (whole (y, x) planes) prepared (NaN -> 0,
# mask bit 0 -> replace(rms0)) and smoothed spatially; _scfind_spectral: the spectral pass over
# whole z lines, rounded to the dtype, NaN where mask bit 7 (blank); _scfind_noise: the noise
# rule on a gathered sample (slot order of `sampling` over `shape`) and the cube's extremes.
def _scfind_spatial(
    cube: FloatArray,
    mask: npt.NDArray[np.uint8],
    kernel: tuple[str, float, float, str, float, bool],
    mode: str,
    replace: tuple[str, float],
    rms0: float,
    exact: bool = False,
    device: str | None = None,
) -> FloatArray: ...
def _scfind_spectral(
    s: FloatArray,
    mask: npt.NDArray[np.uint8],
    kernel: tuple[str, float, float, str, float, bool],
    mode: str,
    exact: bool = False,
    device: str | None = None,
) -> FloatArray: ...
def _scfind_noise(
    samples: npt.NDArray[np.float64],
    extremes: tuple[float, float] | None,
    noise: tuple[str, str, bool],
    sampling: tuple[str, int],
    shape: list[int],
    single: bool,
    fitter: object | None = None,
) -> float: ...

# One task of a kernel for the Dask path, in one core call on `device`: W of the block
# (`input` "raw": the block is W — the cube itself, or a W kept by _scfind_block_sample;
# "cube": prepared and smoothed by both stages of `kernel`, the block holding whole planes /
# whole z lines as the kernel needs; "smoothed": _scfind_spatial's output, the spectral stage
# only). _scfind_block_sample: W at the positions of `sampling` over the whole cube `shape`
# inside the block at `start` -> (slots, values, (min, max) of W or None, W or None): W (the
# block's shape and dtype, NaN where blank) only with `keep`, else no W array is made;
# _scfind_block_clip: `mask` with bit 0 added where |W| > level.
def _scfind_block_sample(
    x: FloatArray,
    mask: npt.NDArray[np.uint8],
    kernel: tuple[str, float, float, str, float, bool],
    mode: str,
    replace: tuple[str, float],
    rms0: float,
    input: str,
    start: list[int],
    shape: list[int],
    sampling: tuple[str, int],
    extremes: bool,
    exact: bool = False,
    device: str | None = None,
    keep: bool = False,
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.float64], tuple[float, float] | None, FloatArray | None
]: ...

# _scfind_slab_sample: _scfind_block_sample with input "smoothed" on the z-slab at plane `z0`
# whose own planes `mask` covers (either engine; exact, a boxcar of radius r along z): `s` holds
# the spatial stage's planes z0 - below .. z0 + nz + above (below = min(r, z0), above =
# min(r + 1, planes over the slab)), `carry` the running mean at the first plane over the slab
# (None for the top slab) -> (..., kept, the carry for the slab below: one (y, x) plane).
# kept: W with `keep`; with `candidates` (CPU engine) the single call's clip candidates for
# _scfind_slab_clip, `ClipCandidates`; else None. With `y0`, the slab is the group of rows
# y0 .. y0 + ny (of `s`, `mask` and `carry`; whole rows of x) of the cube's planes: one chain of
# the Dask graph's wavefront.
def _scfind_slab_sample(
    s: FloatArray,
    mask: npt.NDArray[np.uint8],
    kernel: tuple[str, float, float, str, float, bool],
    mode: str,
    below: int,
    carry: FloatArray | None,
    z0: int,
    shape: list[int],
    sampling: tuple[str, int],
    extremes: bool,
    exact: bool = True,
    device: str | None = None,
    keep: bool = False,
    y0: int = 0,
    candidates: bool = False,
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.float64],
    tuple[float, float] | None,
    FloatArray | ClipCandidates | None,
    FloatArray,
]: ...

# The clip candidates of a slab call, one list a column block of the engine's spectral pass
# (blocks of 1024 flat (y, x) columns): (floor, ends, idx, val); block b's voxels are
# idx[ends[b - 1]:ends[b]] (flat indices in the slab) with W there (val): every voxel of those
# columns, not blank, with |W| > floor[b].
ClipCandidates = tuple[
    npt.NDArray[np.float64],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint64],
    npt.NDArray[np.float64],
]

# _scfind_slab_clip: the clip of a z-slab (CPU engine) from the candidates its
# _scfind_slab_sample kept (arguments as there): `mask` with bit 0 added where |W| > `level`;
# a column block whose floor is under `level` is decided from its list, any other by its
# spectral pass again over `s` with `below` and `carry` (the slab call's inputs: the same W).
# Without `s`, None when a block needs that pass.
def _scfind_slab_clip(
    mask: npt.NDArray[np.uint8],
    kernel: tuple[str, float, float, str, float, bool],
    mode: str,
    level: float,
    candidates: ClipCandidates,
    z0: int,
    shape: list[int],
    y0: int = 0,
    s: FloatArray | None = None,
    below: int = 0,
    carry: FloatArray | None = None,
    exact: bool = True,
    device: str | None = None,
) -> npt.NDArray[np.uint8] | None: ...
def _scfind_block_clip(
    x: FloatArray,
    mask: npt.NDArray[np.uint8],
    kernel: tuple[str, float, float, str, float, bool],
    mode: str,
    replace: tuple[str, float],
    rms0: float,
    input: str,
    level: float,
    exact: bool = False,
    device: str | None = None,
) -> npt.NDArray[np.uint8]: ...
def _stat(
    data: FloatArray,
    what: str,
    center: float,
    flux_range: str,
    sampling: tuple[str, int],
    clip: float | None = None,
    two_pass: bool = False,
    fitter: object | None = None,
) -> float | None: ...
def _histogram(data: FloatArray, edges: list[float]) -> list[int]: ...
def _fit_gaussian(x: list[float], y: list[float], a0: float, s0: float) -> tuple[float, float]: ...
def _sofia2_cadence(shape: list[int]) -> int: ...

# --- atrous (src/py/atrous.rs) ---------------------------------------------------------------
# data: C-contiguous native-endian float32/float64, 1-3 dimensions (skyconv.atrous checks).
# Returns (reconstruction, iterations, noise, input_noise, scales, device) with one entry per
# unit (spectrum for dim 1, map for dim 2, one for dim 3) in C order of the units' shape.
# progress(iteration, active_units, units, mean_noise, max_rel_change) after each iteration.
# variant: "duchamp" (DUCHAMP 1.6.1 exactly) or "corrected"; blank_value: the value DUCHAMP
# holds in blank pixels (read by the duchamp variant's 2-D reconstruction only).

def _atrous_denoise(
    data: npt.NDArray[np.floating],
    dim: int,
    snr_recon: float,
    scale_min: int,
    scale_max: int,
    filter: str,
    convergence: float,
    robust: bool,
    device: str | None = None,
    progress: Callable[[int, int, int, float, float], object] | None = None,
    variant: str = "duchamp",
    blank_value: float = -8.00061,
) -> tuple[npt.NDArray[np.floating], list[int], list[float], list[float], int, str]: ...
def _atrous_plan(
    shape: list[int], dim: int, filter: str, variant: str = "duchamp"
) -> tuple[int, list[float]]: ...

# Element-wise block steps of the distributed à trous loop (skyconv._dask.atrous), arrays of one
# shape and dtype: (c - smooth, c - (c - smooth)) where x is finite, (NaN, c) at its blanks;
# out + w where |w| > thr (in float64), else out. ValueError: shapes differ; TypeError: dtypes.
def _atrous_block_scale(
    c_ext: FloatArray,
    lo: list[int],
    x: FloatArray,
    out: FloatArray | None,
    w_prev: FloatArray | None,
    thr: float,
    passes: list[tuple[str, int, str, float, list[float]]],
    device: str | None = None,
    keep_w: bool = True,
    counts: bool = True,
) -> tuple[
    FloatArray | None, FloatArray, FloatArray | None, npt.NDArray[np.uint64] | None, float
]: ...
def _atrous_block_finish(
    c: FloatArray,
    x: FloatArray,
    out: FloatArray | None,
    w_prev: FloatArray | None,
    thr: float,
    counts: bool = True,
) -> tuple[FloatArray, npt.NDArray[np.uint64] | None, float]: ...

# --- grid (src/py/grid.rs) -------------------------------------------------------------------
# Coordinates, kernel widths and sphere_radius in degrees (gauss2d PA in radians). data is
# (n,) or (n, nchan); weights None, (n,) or data's shape, same dtype as data. The accumulators
# are (nchan, ntargets) arrays of one float dtype, added to in place. Errors: ShapeError,
# ValueError (kernel, radius, device), DeviceError.

def _grid_check_kernel(
    kernel: str, kernel_params: list[float], sphere_radius: float | None = None
) -> float: ...  # the sphere radius used (degrees); ValueError for a bad kernel or radius
def _grid_accumulate(
    lons: npt.NDArray[np.float64],
    lats: npt.NDArray[np.float64],
    data: npt.NDArray[np.floating],
    weights: npt.NDArray[np.floating] | None,
    target_lons: npt.NDArray[np.float64],
    target_lats: npt.NDArray[np.float64],
    kernel: str,
    kernel_params: list[float],
    sphere_radius: float | None,
    unweighted: npt.NDArray[np.floating],
    weight_sums: npt.NDArray[np.floating],
    device: str | None = None,
) -> None: ...

# _grid_once: (cube, weights, unweighted), each (nchan, ntargets) of dtype ("float32" or
# "float64"), from this batch alone; on the GPU divided and cast on the device.
def _grid_once(
    lons: npt.NDArray[np.float64],
    lats: npt.NDArray[np.float64],
    data: npt.NDArray[np.floating],
    weights: npt.NDArray[np.floating] | None,
    target_lons: npt.NDArray[np.float64],
    target_lats: npt.NDArray[np.float64],
    kernel: str,
    kernel_params: list[float],
    sphere_radius: float | None,
    dtype: str,
    device: str | None = None,
) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.floating], npt.NDArray[np.floating]]: ...
def _grid_finish(
    unweighted: npt.NDArray[np.floating], weights: npt.NDArray[np.floating]
) -> npt.NDArray[np.floating]: ...  # unweighted / weights, NaN where weights == 0
def _grid_arg_layout() -> list[str]: ...  # "Struct.field offset size" of the CUDA kernel args
def _grid_memory_plan(
    nsamples: int,
    ntargets: int,
    nchan: int,
    data_itemsize: int,
    out_itemsize: int,
    weights: str,
    finish: bool,
    sphere_radius: float,
    budget: int,
) -> tuple[int, str, int, int]: ...  # (chunk samples, "resident"|"packed", block chans, bytes)
def _healpix_centres(
    nside: int, nest: bool, pixels: npt.NDArray[np.int64] | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...  # (lons, lats) degrees

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

# One transform split over several GPUs (src/sht/cuda/multi.rs). The dict: transport
# ("host-staged"), devices, m_blocks, ring_blocks, legendre_s, exchange_s, ring_s, peak_bytes.
def _alm2map_multi(
    alms: list[npt.NDArray[np.complex128]],
    nside: int,
    lmax: int,
    mmax: int,
    pol: bool,
    devices: list[int],
) -> tuple[npt.NDArray[np.float64], dict[str, object]]: ...  # (ncomp, npix), stats
def _map2alm_multi(
    maps: list[npt.NDArray[np.float64]],
    nside: int,
    lmax: int,
    mmax: int,
    iter: int,
    pol: bool,
    devices: list[int],
    ring_weights: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.complex128], dict[str, object]]: ...  # (ncomp, nalm), stats

# --- SHT halves (src/py/sht_halves.rs) --------------------------------------------------------
# skyconv.sht_halves checks and converts the arguments (ms, rings: int64; arrays C-contiguous).
def _m_blocks(lmax: int, mmax: int, n: int) -> list[tuple[int, int]]: ...  # [m0, m1) per worker
def _ring_blocks(nside: int, n: int) -> list[tuple[int, int]]: ...  # [r0, r1) per worker
def _alm2leg(
    alm: npt.NDArray[np.complex128],  # (ncomp, nblk)
    nside: int,
    lmax: int,
    ms: npt.NDArray[np.int64],
    rings: npt.NDArray[np.int64],
    spin2: bool,
    device: str | None = None,
) -> npt.NDArray[np.complex128]: ...  # (ncomp, len(rings), len(ms))
def _leg2map(
    leg: list[npt.NDArray[np.complex128]],  # pieces along m: (ncomp, len(rings), width k)
    nside: int,
    rings: npt.NDArray[np.int64],
    device: str | None = None,
) -> npt.NDArray[np.float64]: ...  # (ncomp, sum of ring lengths)
def _map2leg(
    maps: npt.NDArray[np.float64],  # (ncomp, sum of ring lengths)
    nside: int,
    widths: list[int],  # m per piece, summing to mmax+1
    rings: npt.NDArray[np.int64],
    device: str | None = None,
) -> list[npt.NDArray[np.complex128]]: ...  # pieces along m: (ncomp, len(rings), widths[k])
def _leg2alm(
    leg: list[npt.NDArray[np.complex128]],  # pieces along rings: (ncomp, rings of k, len(ms))
    nside: int,
    lmax: int,
    ms: npt.NDArray[np.int64],
    rings: npt.NDArray[np.int64],
    spin2: bool,
    ring_weights: npt.NDArray[np.float64] | None = None,
    device: str | None = None,
) -> npt.NDArray[np.complex128]: ...  # (ncomp, nblk)

# --- smooth (src/py/smooth.rs) ---------------------------------------------------------------
# The ring method (ARKCoS) and its kernel profiles; skyconv.smooth checks the arguments. A
# profile is (theta, values): K per steradian at ascending nodes theta[0] = 0 ... theta[-1] =
# theta_cut (radians), K = 0 beyond. Errors: ShapeError (map length, profile lengths),
# ValueError (nside, fwhm <= 0, tol not in (0, 1), non-finite beam_window or profile, theta not
# from 0 and ascending), DeviceError (device="cuda" without a usable GPU, or a map too large for
# its memory).

def _smooth_ring(
    map: FloatArray,
    nside: int,
    theta: npt.NDArray[np.float64],
    values: npt.NDArray[np.float64],
    device: str | None = None,
) -> npt.NDArray[np.float64]: ...  # RING map(s) (npix,) or (nmaps, npix), sum_p K m(p) 4pi/npix
def _smooth_ring_beams(
    map: FloatArray,
    nside: int,
    thetas: list[npt.NDArray[np.float64]],
    values: list[npt.NDArray[np.float64]],
    device: str | None = None,
    out: npt.NDArray[np.float64] | None = None,
    rows: list[int] | None = None,
) -> npt.NDArray[np.float64]: ...  # (n_beams, *map.shape), or out with beam b in out[rows[b]]
def _smooth_ring_masked(
    map: FloatArray,
    nside: int,
    thetas: list[npt.NDArray[np.float64]],
    values: list[npt.NDArray[np.float64]],
    thr: list[float],
    mask: npt.NDArray[np.float64] | None = None,
    device: str | None = None,
) -> npt.NDArray[np.float64]: ...  # (n_beams, npix): smooth(m·w)/smooth(w), UNSEEN below thr[b]
def _gpu_budget(
    device: str | None = None,
) -> int | None: ...  # bytes a GPU call may use now (80% of free); None on the CPU
def _ring_gpu_bytes(
    nside: int, nmaps: int = 1, blocked: bool = False
) -> int: ...  # GPU bytes of the ring method for nmaps maps at once; blocked: its least
def _output_empty(
    shape: Sequence[int], device: str | None = None
) -> npt.NDArray[np.float64]: ...  # uninitialised; page-locked (pooled) on a GPU
def _kernel_profile(
    fwhm: float | None = None,
    beam_window: npt.NDArray[np.float64] | None = None,
    tol: float = 1e-5,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...  # (theta, values)
def _profile_window(
    theta: npt.NDArray[np.float64], values: npt.NDArray[np.float64], lmax: int
) -> npt.NDArray[np.float64]: ...  # b_l, l = 0 ... lmax
def _ring_plan_info(
    nside: int, theta: npt.NDArray[np.float64], values: npt.NDArray[np.float64]
) -> dict[str, Any]: ...  # theta_cut, extent, lengths, inputs, kernel_ffts, flops, bytes
def _ring_cuda_tables(
    nside: int, theta: npt.NDArray[np.float64], values: npt.NDArray[np.float64], max_taps: int
) -> dict[str, Any]: ...  # the CUDA ring engine's tables and chunks (host emulation tests)
def _ring_cuda_blocks(
    nside: int,
    theta: npt.NDArray[np.float64],
    values: npt.NDArray[np.float64],
    cap: int,
    max_taps: int,
) -> list[dict[str, Any]]: ...  # the blocked engine's ring blocks (host emulation tests)
def _ring_device(device: str | None = None) -> str: ...  # "cpu" or "cuda", or DeviceError
def _smooth_missing(
    m: FloatArray,
) -> npt.NDArray[np.bool_] | None: ...  # UNSEEN (healpy's test) or non-finite; None if none

class CancelScope:
    """A cancel flag shared by the core calls made inside ``with scope:`` on any thread.

    Only the main thread sees Ctrl-C; work spread over threads cancels its scope when the main
    thread gets ``KeyboardInterrupt`` (or one part fails), and every core call inside the
    scope then raises ``KeyboardInterrupt`` at its next poll (every 20 ms).
    """

    def __init__(self) -> None: ...
    def cancel(self) -> None:
        """Stop every core call running or started inside this scope."""
    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
    def __enter__(self) -> CancelScope: ...
    def __exit__(self, *args: object) -> bool: ...
