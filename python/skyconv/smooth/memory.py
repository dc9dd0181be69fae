"""Memory needed by ``smooth_map``, per method and device, without allocating it.

Bytes per pixel (npix = 12 nside^2; float64 maps; k = maps smoothed together: 1, or 2 with a
mask (m·w and w); n = beams):

========================= ======================================================
ring, CPU                 host: 8 k (input) + 8 k (output) per beam, plus per-thread
                          ring buffers (~MB); with a mask, per map: the map and mask,
                          32 of scratch ((m·w, w) and their smoothed maps), 8 per beam
ring, GPU                 device: 8 + 32 k (one map buffer, two spectra per map) plus
                          the belt rings' batched FFT work, 16 (2 nside + 1)^2 bytes (~1.3 per
                          pixel), the polar rings' FFT work and the kernel samples
                          (chunked into what is left, <= 1 GB): 45.5 bytes per pixel at
                          nside 16384 for k = 1 (``device``). Where that does not fit, ring
                          blocks (unmasked only): per block of rings 40 bytes per block
                          pixel plus a fixed ~2.7 GB (the samples' 1 GiB buffer, the polar
                          rings' transform work, the belt's cuFFT plans); blocks are sized to
                          the free memory, at least npix / 16 pixels: ``device_min``. With a
                          mask (one call per map: map and mask up, only the normalised maps
                          down) that of k = 2 plus a second map buffer, 8: 85.5 bytes per
                          pixel, not blocked; host: as on the CPU
harmonic, CPU             host: 8 k + 8 n k (maps) + 16 k (lmax+1)(lmax+2)/2 / npix per
                          alm set (the k inputs' and the n k products' a_lm: 0.75 x 16 =
                          12 bytes per pixel per set at lmax = 3 nside - 1)
harmonic, GPU             device: a map and its a_lm per component of one transform call
                          (k for map2alm; the products of one alm2map group: at most
                          ``BATCH_ALM_BYTES`` of a_lm, ~14 beams of one map at nside 2048,
                          one at nside 16384) plus ~10% of transform work (measured: 50 GB
                          at nside 16384 on an H100 for 45 GB of map and a_lm): 22.4
                          bytes per pixel at lmax = 3 nside - 1
========================= ======================================================

At nside 16384 (3.2e9 pixels) one float64 map is 25.8 GB: the ring method on one GPU needs
147 GB for one unmasked map held whole (more than an H200's 141 GB), so it runs in ring blocks
(``device_min``: 10.7 GB at least; on an 80 GB H100, budget ~63 GB, three blocks of ~1.5e9
pixels, the halo rings of each block transformed twice); 275 GB with a mask (not blocked: the
masked ring method does not run on one GPU at nside 16384); the harmonic method 50 GB per
component (an H100 holds one map; a masked map's two components, 100 GB, need an H200 or the
CPU). The host holds the input and the output (51.5 GB for one map, ring or harmonic; the
harmonic method's a_lm 12 bytes per pixel more per set). ``method="auto"`` on a GPU takes only
methods that fit its free memory (:func:`fits_gpu`, by ``device_min``; else the fastest of the
others that meets ``tol`` and fits, else it runs on the CPU, see
:func:`skyconv.smooth.auto.choose_fitting`). At nside 8192: ring 37 GB (an H100 holds it
whole), 69 GB with a mask.
"""

from __future__ import annotations

from .. import _core
from .._utils.arrays import int_arg
from ..exceptions import ArgumentError

_METHODS = ("ring", "harmonic", "split")
_DEVICES = ("cpu", "cuda")


def smooth_memory(nside, method="ring", device="cpu", nmaps=1, n_beams=1, lmax=None, mask=False):
    """Bytes ``smooth_map`` needs for one call, by method and device (an estimate of the big
    buffers; per-thread scratch and the kernel tables, a few MB, are left out).

    Parameters
    ----------
    nside : int
        Resolution (any power of 2 up to 2**29; indices are 64-bit throughout).
    method : str
        "ring", "harmonic" or "split" (a split runs a harmonic and a ring part at once: their
        sum, an upper bound).
    device : str
        "cpu" or "cuda".
    nmaps : int
        Maps of the call (each smoothed with every beam).
    n_beams : int
        Beams of a batch call.
    lmax : int, optional
        Band limit of the harmonic method (default 3 nside - 1).
    mask : bool
        Masked (normalised) smoothing: m·w and w go through the method together.

    Returns
    -------
    dict
        ``host`` and ``device`` bytes (int; ``device`` 0 on the CPU) and ``device_min``: the
        least device memory the call runs in (the unmasked ring method's ring blocks where
        the whole map does not fit; else ``device``).

    Raises
    ------
    skyconv.ArgumentError
        An unknown method or device, or a count below 1.

    Examples
    --------
    The ring method on the GPU needs about 46 bytes per pixel for one map at nside 16384,
    the harmonic method about 50 GB:

    >>> from skyconv.smooth.memory import smooth_memory
    >>> b = smooth_memory(16384, "ring", "cuda")["device"]
    >>> round(b / (12 * 16384**2), 1), round(b / 1e9)
    (45.5, 147)
    >>> round(smooth_memory(16384, "harmonic", "cuda")["device"] / 1e9)
    50

    Where the whole map does not fit, the ring method runs in ring blocks:

    >>> round(smooth_memory(16384, "ring", "cuda")["device_min"] / 1e9, 1)
    10.7
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
    lmax = 3 * nside - 1 if lmax is None else int_arg(lmax, "lmax")
    if method == "split":
        r = smooth_memory(nside, "ring", device, nmaps, n_beams, lmax, mask)
        h = smooth_memory(nside, "harmonic", device, nmaps, n_beams, lmax, mask)
        return {
            "host": r["host"] + h["host"],
            "device": r["device"] + h["device"],
            "device_min": r["device_min"] + h["device_min"],
        }
    npix = 12 * nside * nside
    k = nmaps * (2 if mask else 1)
    host_maps = 8 * npix * k * (1 + n_beams)
    if method == "ring":
        if mask:
            host = 8 * npix * nmaps * (2 + n_beams) + 32 * npix
            dev = ring_masked_gpu_bytes(nside) if device == "cuda" else 0
            return {"host": host, "device": dev, "device_min": dev}
        dev = _core._ring_gpu_bytes(nside, nmaps) if device == "cuda" else 0
        low = min(dev, _core._ring_gpu_bytes(nside, blocked=True)) if device == "cuda" else 0
        return {"host": host_maps, "device": dev, "device_min": low}
    nalm = (lmax + 1) * (lmax + 2) // 2
    host = host_maps + 16 * nalm * k * (1 + n_beams)
    dev = harmonic_gpu_bytes(nside, lmax, k, n_beams) if device == "cuda" else 0
    return {"host": host, "device": dev, "device_min": dev}


def ring_masked_gpu_bytes(nside: int) -> int:
    """Device bytes of masked ring smoothing of one map (the unmasked engine's for two maps
    plus a second map buffer; the kernel samples come on top, chunked into what is left)."""
    return _core._ring_gpu_bytes(nside, 2) + 8 * 12 * nside * nside


#: Transform work of the GPU SHT beyond the maps and a_lm (measured: 50 GB at nside 16384).
HARMONIC_WORK = 0.1


def harmonic_gpu_bytes(nside: int, lmax: int, k: int, n_beams: int) -> int:
    """Device bytes of the harmonic method for ``k`` maps and ``n_beams`` beams: the largest
    transform call (map2alm of the k maps, or one alm2map group of products, see
    ``methods.harmonic_batch``) holds a map and its a_lm per component, plus its work."""
    from .methods import BATCH_ALM_BYTES

    nalm = (lmax + 1) * (lmax + 2) // 2
    group = max(1, min(n_beams, BATCH_ALM_BYTES // max(16 * nalm * k, 1)))
    per = 8 * 12 * nside * nside + 16 * nalm
    return int(per * k * group * (1 + HARMONIC_WORK))


def fits_gpu(method: str, nside: int, budget: int, lmax=None, nmaps=1, n_beams=1, mask=False):
    """Whether ``method`` runs in at most ``budget`` bytes of GPU memory (its ``device_min``,
    see :func:`smooth_memory`)."""
    need = smooth_memory(nside, method, "cuda", nmaps, n_beams, lmax, mask)["device_min"]
    return need <= budget


__all__ = ["fits_gpu", "smooth_memory"]
