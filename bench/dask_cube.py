"""The zarr test cube of the Dask benches (bench/dask_gpu.py, bench/dask_scfind.py): its size
from the command line, written fast (chunks generated and written by a thread pool, no
compression), kept when it exists with the same shape and chunks, and the disk's read rate of
its chunk files measured apart from any computation (O_DIRECT where the file system allows it,
so the page cache does not answer).
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}  # fmt: skip


def parse_size(text: str) -> int:
    """Bytes of ``"32GB"``, ``"0.2 GB"``, ``"512MiB"`` or a plain number of bytes.

    Raises
    ------
    ValueError
        Not a number with one of the units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB.
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"size must be like 32GB, 0.2GB or 512MiB, got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def shape_for(nbytes: int, planes: int, itemsize: int = 4) -> tuple[int, int, int]:
    """(planes, side, side) of about ``nbytes`` (``planes`` capped so a plane has >= 64²)."""
    planes = max(1, min(planes, nbytes // (itemsize * 64 * 64)))
    side = max(8, int(np.sqrt(nbytes / itemsize / planes)))
    return planes, side, side


def _chunk(shape, chunks, index, seed):
    """Block ``index`` of the cube: deterministic noise and sources every ~64 pixels."""
    lo = [i * c for i, c in zip(index, chunks)]
    hi = [min(n, a + c) for n, a, c in zip(shape, lo, chunks)]
    rng = np.random.default_rng([seed, *index])
    blk = rng.standard_normal([b - a for a, b in zip(lo, hi)], dtype=np.float32)
    z, y, x = np.ogrid[lo[0] : hi[0], lo[1] : hi[1], lo[2] : hi[2]]
    s = np.exp(-((z % 48 - 24) ** 2) / 50.0) * np.exp(
        -((y % 64 - 32) ** 2 + (x % 64 - 32) ** 2) / 18.0
    )
    blk += (3.0 * s).astype(np.float32)
    return tuple(slice(a, b) for a, b in zip(lo, hi)), blk


def write_cube(path: str, shape, chunks, seed: int = 3, threads: int | None = None) -> float:
    """Write the float32 zarr cube (uncompressed) unless ``path`` holds one of this shape and
    chunks; returns the seconds spent (0 when kept)."""
    import zarr

    shape, chunks = tuple(int(n) for n in shape), tuple(int(n) for n in chunks)
    if os.path.exists(path):
        try:
            z = zarr.open_array(path, mode="r")
            if tuple(z.shape) == shape and tuple(z.chunks) == chunks:
                return 0.0
        except Exception:  # noqa: BLE001 (a half-written store: rewrite it)
            pass
        shutil.rmtree(path)
    t = time.perf_counter()
    z = zarr.create_array(path, shape=shape, chunks=chunks, dtype=np.float32,
                          compressors=None, fill_value=0.0)  # fmt: skip
    grid = [range(-(-n // c)) for n, c in zip(shape, chunks)]
    index = [(i, j, k) for i in grid[0] for j in grid[1] for k in grid[2]]

    def one(ix):
        sl, blk = _chunk(shape, chunks, ix, seed)
        z[sl] = blk

    with ThreadPoolExecutor(threads or os.cpu_count() or 1) as pool:
        list(pool.map(one, index))
    return time.perf_counter() - t


def chunk_files(path: str) -> list[str]:
    """The chunk files of a zarr store (every file but its metadata)."""
    out = []
    for root, _, files in os.walk(path):
        out.extend(os.path.join(root, f) for f in files
                   if not f.startswith(".z") and f != "zarr.json")  # fmt: skip
    return sorted(out)


def read_rate(path: str, threads: int = 8, limit: int | None = None) -> dict:
    """Read the store's chunk files (up to ``limit`` bytes) with ``threads`` readers and
    return {"gb_s", "bytes", "seconds", "direct"}: "direct" says whether O_DIRECT bypassed the
    page cache (else the rate may be the page cache's: the cube was just written)."""
    files = chunk_files(path)
    if limit is not None:
        keep, total = [], 0
        for f in files:
            if total >= limit:
                break
            keep.append(f)
            total += os.path.getsize(f)
        files = keep
    block = 16 << 20
    direct = hasattr(os, "O_DIRECT")

    def one(f):
        nonlocal direct
        n = 0
        if direct:
            try:
                fd = os.open(f, os.O_RDONLY | os.O_DIRECT)
            except OSError:
                direct = False
            else:
                buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
                try:
                    while True:
                        k = os.readv(fd, [buf])
                        n += k
                        if k < block:
                            return n
                except OSError:
                    direct = False
                    n = 0
                finally:
                    os.close(fd)
                    buf.close()
        with open(f, "rb", buffering=0) as fh:
            while chunk := fh.read(block):
                n += len(chunk)
        return n

    t = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        nbytes = sum(pool.map(one, files))
    dt = time.perf_counter() - t
    return {"gb_s": nbytes / dt / 1e9 if dt > 0 else float("inf"), "bytes": nbytes,
            "seconds": dt, "direct": direct}  # fmt: skip


__all__ = ["chunk_files", "parse_size", "read_rate", "shape_for", "write_cube"]
