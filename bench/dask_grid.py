"""Gridding through Dask vs the single call, same samples, same machine.

    python bench/dask_grid.py --samples 1e7 --nchan 8 --map 512 --workers 4 --threads 4
    python bench/dask_grid.py --samples 1e8 --nchan 1 --map 2048 --workers 16 --threads 1

Samples: a survey-like scan (rows of constant latitude, sorted), over a SIN map of ``--map``²
pixels of 1 arcmin with a Gaussian kernel of 1.5 pixels (sphere radius 3σ), ``--nchan``
float32 channels. Both paths get the samples in memory (NumPy for the single call, the same
arrays wrapped by ``dask.array.from_array`` with ``--chunk`` samples a chunk for Dask) and grid
in float64 on ``--device``; the Dask cluster is a LocalCluster of ``--workers`` processes ×
``--threads`` threads (skyconv's thread count inside each is set to ``--threads``). Prints the
time of each (best of ``--repeats``), the ratio, the largest difference of the cubes (relative
to the largest value) and the peak RSS of each worker.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def survey(n: int, nchan: int, side: int, rng):
    """(lons, lats, data, header): ``n`` samples on scan rows over a side × side 1' map."""
    half = side / 2 / 60.0
    rows = max(1, int(np.sqrt(n)))
    per = -(-n // rows)
    lat = np.repeat(np.linspace(-half, half, rows), per)[:n] + 30.0
    lon = np.tile(np.linspace(-half, half, per), rows)[:n] / np.cos(np.radians(30.0)) + 150.0
    lon += rng.normal(0, 0.1 / 60, n)
    lat += rng.normal(0, 0.1 / 60, n)
    data = rng.normal(size=(n, nchan) if nchan > 1 else n).astype(np.float32)
    header = {
        "NAXIS": 2, "NAXIS1": side, "NAXIS2": side, "CTYPE1": "RA---SIN", "CTYPE2": "DEC--SIN",
        "CRVAL1": 150.0, "CRVAL2": 30.0, "CRPIX1": side / 2 + 0.5, "CRPIX2": side / 2 + 0.5,
        "CDELT1": -1 / 60.0, "CDELT2": 1 / 60.0,
    }  # fmt: skip
    return lon, lat, data, header


def _set_threads(n):
    import skyconv

    skyconv.set_num_threads(n)
    return n


def _peak_rss():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=float, default=1e7)
    p.add_argument("--nchan", type=int, default=1)
    p.add_argument("--map", type=int, default=512, help="map side in pixels (1 arcmin)")
    p.add_argument("--chunk", type=float, default=2e6, help="samples per Dask chunk")
    p.add_argument("--chan-chunk", type=int, default=0, help="channels per chunk (0: all)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--threads", type=int, default=4, help="threads per worker")
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args(argv)

    import dask.array as da
    from distributed import Client, LocalCluster

    import skyconv

    n = int(a.samples)
    rng = np.random.default_rng(1)
    lon, lat, data, header = survey(n, a.nchan, a.map, rng)
    sigma = 1.5 / 60.0
    kw = dict(kernel_params=sigma, dtype=np.float64, device=a.device)
    print(f"{n:.3g} samples x {a.nchan} channel(s) -> {a.map}^2 map, device {a.device}")

    def best(fn):
        times = []
        for _ in range(a.repeats):
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        return min(times), out

    t1, ref = best(lambda: skyconv.grid(lon, lat, data, header, **kw).cube)
    print(f"single call: {t1:.3f} s ({n / t1:.3g} samples/s)")
    with (
        LocalCluster(n_workers=a.workers, threads_per_worker=a.threads, processes=True,
                     dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        client.run(_set_threads, a.threads)
        c = int(a.chunk)
        # The samples in the workers' memory before the clock starts, as in the single call.
        dlon = da.from_array(lon, chunks=c).persist()
        dlat = da.from_array(lat, chunks=c).persist()
        dchunks = (c,) if data.ndim == 1 else (c, a.chan_chunk or a.nchan)
        ddata = da.from_array(data, chunks=dchunks).persist()
        t2, cube = best(lambda: skyconv.grid(dlon, dlat, ddata, header, **kw).cube.compute())
        rss = client.run(_peak_rss)
    scale = np.nanmax(np.abs(ref))
    diff = np.nanmax(np.abs(cube - ref)) / scale
    same_nan = np.array_equal(np.isnan(cube), np.isnan(ref))
    print(f"dask ({a.workers} workers x {a.threads} threads, chunks of {c:.3g}): {t2:.3f} s "
          f"({n / t2:.3g} samples/s)")  # fmt: skip
    print(f"ratio dask / single: {t2 / t1:.2f}")
    print(f"max |dask - single| / max|single| = {diff:.2e}, NaN pixels identical: {same_nan}")
    print("peak RSS per worker (MB):", ", ".join(f"{v / 1e6:.0f}" for v in rss.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
