"""Memory needed by ``smooth_map``, per method and device, without allocating it.

Bytes per pixel (npix = 12 nside^2; float64 maps; k = maps smoothed together: 1, or 2 with a
mask (m·w and w); n = beams):

========================= ======================================================
ring, CPU                 host: 8 k (input) + 8 k (output) per beam, plus per-thread
                          ring buffers (~MB)
ring, GPU                 device: 8 + 32 k (one map buffer, two spectra per map) plus the
                          belt rings' batched FFT work, 16 (2 nside + 1)^2 bytes (~1.3 per
                          pixel), the polar rings' FFT work and the kernel samples
                          (chunked into what is left, <= 1 GB): 45.5 bytes per pixel at
                          nside 16384 for k = 1; host: as on the CPU
harmonic, CPU or GPU      host: 8 k + 8 n k (maps) + 16 k (lmax+1)(lmax+2)/2 / npix per
                          alm set (the k inputs' and the n k products' a_lm: 0.75 x 16 =
                          12 bytes per pixel per set at lmax = 3 nside - 1); the GPU engines
                          hold a map and its a_lm per component on the device
========================= ======================================================

At nside 16384 (3.2e9 pixels) one float64 map is 25.8 GB: the ring method on one GPU needs
147 GB for one unmasked map (more than an H200's 141 GB; the engine refuses with a
DeviceError naming both figures, and ``device="cpu"`` runs it given 52 GB of host memory),
250 GB with a mask. At nside 8192: 37 GB (an H100 holds it), 64 GB with a mask.
"""

from __future__ import annotations

from .. import _core
from .._utils.arrays import int_arg
from ..exceptions import ArgumentError

_METHODS = ("ring", "harmonic")
_DEVICES = ("cpu", "cuda")


def smooth_memory(nside, method="ring", device="cpu", nmaps=1, n_beams=1, lmax=None):
    """Bytes ``smooth_map`` needs for one call, by method and device (an estimate of the big
    buffers; per-thread scratch and the kernel tables, a few MB, are left out).

    Parameters
    ----------
    nside : int
        Resolution (any power of 2 up to 2**29; indices are 64-bit throughout).
    method : str
        "ring" or "harmonic" (a split needs at most the larger of the two).
    device : str
        "cpu" or "cuda".
    nmaps : int
        Maps smoothed together with one kernel (2 for a masked map: m·w and w).
    n_beams : int
        Beams of a batch call.
    lmax : int, optional
        Band limit of the harmonic method (default 3 nside - 1).

    Returns
    -------
    dict
        ``host`` and ``device`` bytes (int; ``device`` 0 on the CPU).

    Raises
    ------
    skyconv.ArgumentError
        An unknown method or device, or a count below 1.

    Examples
    --------
    The ring method on the GPU needs about 46 bytes per pixel for one map at nside 16384:

    >>> from skyconv.smooth.memory import smooth_memory
    >>> b = smooth_memory(16384, "ring", "cuda")["device"]
    >>> round(b / (12 * 16384**2), 1), round(b / 1e9)
    (45.5, 147)
    """
    nside = int_arg(nside, "nside")
    if nside < 1 or nside > 2**29:
        raise ArgumentError(f"nside must be in 1..2**29, got {nside}")
    if method not in _METHODS:
        raise ArgumentError(f"method must be one of {_METHODS}, got {method!r}")
    if device not in _DEVICES:
        raise ArgumentError(f"device must be one of {_DEVICES}, got {device!r}")
    nmaps, n_beams = int_arg(nmaps, "nmaps"), int_arg(n_beams, "n_beams")
    if nmaps < 1 or n_beams < 1:
        raise ArgumentError(f"nmaps and n_beams must be >= 1, got {nmaps} and {n_beams}")
    npix = 12 * nside * nside
    host_maps = 8 * npix * nmaps * (1 + n_beams)
    if method == "ring":
        dev = _core._ring_gpu_bytes(nside, nmaps) if device == "cuda" else 0
        return {"host": host_maps, "device": dev}
    lmax = 3 * nside - 1 if lmax is None else int_arg(lmax, "lmax")
    nalm = (lmax + 1) * (lmax + 2) // 2
    host = host_maps + 16 * nalm * nmaps * (1 + n_beams)
    dev = (8 * npix + 16 * nalm) * nmaps * (1 + n_beams) if device == "cuda" else 0
    return {"host": host, "device": dev}


__all__ = ["smooth_memory"]
