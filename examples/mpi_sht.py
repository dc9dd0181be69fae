"""One spherical harmonic transform split over MPI ranks with skyconv's public SHT halves (the
S2HAT scheme), for codes that already run under MPI (TOAST, PySM style).

Each rank owns a block of m (its alm) and a block of rings (its pixels):

- alm2map: ``alm2leg`` on the rank's m for all rings → one ``Alltoallv`` sends each rank the
  Δ_m of its rings → ``leg2map`` on the rank's rings;
- map2alm: ``map2leg`` on the rank's rings → ``Alltoallv`` the other way → ``leg2alm`` on the
  rank's m over all rings; each Jacobi iteration is a distributed alm2map and map2alm.

Run::

    mpiexec -n 4 python examples/mpi_sht.py --nside 256 --lmax 511 --pol --iter 3
    mpiexec -n 2 python examples/mpi_sht.py --check   # compare with the single-process calls

``--check`` runs spin 0 and spin 2 (pol), iter 0 and 3, lmax != 2 nside and mmax < lmax, and
exits with status 1 if a distributed result differs from the single-process one by more than
1e-12 relative.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import skyconv
from skyconv import sht_halves as H


class Layout:
    """The m blocks and ring blocks of every rank."""

    def __init__(self, comm, nside, lmax, mmax):
        n = comm.size
        self.comm, self.nside, self.lmax, self.mmax = comm, nside, lmax, mmax
        self.ms = H.m_blocks(lmax, mmax, n)
        self.rings = H.ring_blocks(nside, n)
        # fewer m (or rings) than ranks: the last ranks get empty blocks
        empty = np.zeros(0, np.int64)
        self.ms += [empty] * (n - len(self.ms))
        self.rings += [empty] * (n - len(self.rings))
        self.my_ms = self.ms[comm.rank]
        self.my_rings = self.rings[comm.rank]
        self.my_pix = H.ring_pixels(nside, self.my_rings)


def _alltoallv(comm, blocks_out, shapes_in):
    """Send blocks_out[s] (complex128) to rank s; receive arrays of shapes_in[s] from rank s."""
    send = np.concatenate([b.ravel() for b in blocks_out]) if blocks_out else np.zeros(0)
    send = np.ascontiguousarray(send, dtype=np.complex128)
    scount = np.array([b.size for b in blocks_out], dtype=np.int64)
    rcount = np.array([int(np.prod(s)) for s in shapes_in], dtype=np.int64)
    sdisp = np.concatenate(([0], np.cumsum(scount)[:-1]))
    rdisp = np.concatenate(([0], np.cumsum(rcount)[:-1]))
    recv = np.empty(int(rcount.sum()), np.complex128)
    comm.Alltoallv(
        [send, (scount, sdisp), MPI.C_DOUBLE_COMPLEX], [recv, (rcount, rdisp), MPI.C_DOUBLE_COMPLEX]
    )
    return [recv[d : d + c].reshape(s) for d, c, s in zip(rdisp, rcount, shapes_in)]


def _stage1_leg(alm_blk, lay, pol):
    """alm2leg of this rank's m on all rings: (ncomp, nrings, len(my_ms))."""
    nside, lmax, ms = lay.nside, lay.lmax, lay.my_ms
    if pol:
        t = H.alm2leg(alm_blk[:1], nside, lmax, ms)
        return np.concatenate([t, H.alm2leg(alm_blk[1:], nside, lmax, ms, spin=2)])
    return H.alm2leg(alm_blk, nside, lmax, ms)


def alm2map(alm_blk, lay, pol):
    """Distributed synthesis: this rank's alm block (ncomp, nblk) → its pixels (ncomp, npix_r)."""
    nc = alm_blk.shape[0]
    leg = _stage1_leg(alm_blk, lay, pol)  # (nc, all rings, my m)
    out = [leg[:, r, :] for r in lay.rings]  # to rank s: its rings
    shapes = [(nc, lay.my_rings.size, ms.size) for ms in lay.ms]
    got = _alltoallv(lay.comm, out, shapes)
    full = np.concatenate(got, axis=2)  # (nc, my rings, all m): the m blocks are in m order
    return H.leg2map(full, lay.nside, lay.my_rings)


def _analysis(map_blk, lay, pol, w):
    """Distributed map2alm with iter = 0: this rank's pixels → its alm block."""
    nc = map_blk.shape[0]
    leg = H.map2leg(map_blk, lay.nside, lay.mmax, lay.my_rings)  # (nc, my rings, all m)
    out = [leg[:, :, ms] for ms in lay.ms]  # to rank s: its m
    shapes = [(nc, r.size, lay.my_ms.size) for r in lay.rings]
    got = np.concatenate(_alltoallv(lay.comm, out, shapes), axis=1)  # (nc, all rings, my m)
    nside, lmax, ms = lay.nside, lay.lmax, lay.my_ms
    if pol:
        t = H.leg2alm(got[:1], nside, lmax, ms, ring_weights=w)
        return np.concatenate([t, H.leg2alm(got[1:], nside, lmax, ms, spin=2, ring_weights=w)])
    return H.leg2alm(got, nside, lmax, ms, ring_weights=w)


def map2alm(map_blk, lay, pol, iter=0, ring_weights=None):
    """Distributed map2alm with Jacobi iterations (UNSEEN pixels count as 0)."""
    m = np.array(map_blk, dtype=np.float64)
    m[np.abs(m - skyconv.sht.UNSEEN) <= 1e-8 + 1e-5 * abs(skyconv.sht.UNSEEN)] = 0.0
    alm = _analysis(m, lay, pol, ring_weights)
    for _ in range(iter):
        alm = alm + _analysis(m - alm2map(alm, lay, pol), lay, pol, ring_weights)
    return alm


def _gather_full(comm, blk, idx, n):
    """Assemble (ncomp, n) on rank 0 from each rank's block and its index positions."""
    parts = comm.gather((idx, blk), root=0)
    if comm.rank != 0:
        return None
    out = np.zeros((blk.shape[0], n), dtype=blk.dtype)
    for i, b in parts:
        out[:, i] = b
    return out


def run(comm, nside, lmax, mmax, pol, iter, seed=0, check=False):
    lay = Layout(comm, nside, lmax, mmax)
    rng = np.random.default_rng(seed)  # every rank draws the same alm; keeps its block
    nc = 3 if pol else 1
    nalm = skyconv.Alm.getsize(lmax, mmax)
    alm = rng.normal(size=(nc, nalm)) + 1j * rng.normal(size=(nc, nalm))
    alm[:, : lmax + 1].imag = 0
    aidx = H.block_index(lmax, lay.my_ms)
    comm.Barrier()
    t0 = time.perf_counter()
    maps = alm2map(np.ascontiguousarray(alm[:, aidx]), lay, pol)
    t1 = time.perf_counter()
    back = map2alm(maps, lay, pol, iter=iter)
    t2 = time.perf_counter()
    full_map = _gather_full(comm, maps, lay.my_pix, 12 * nside * nside)
    full_alm = _gather_full(comm, back, aidx, nalm)
    bad = False
    if comm.rank == 0:
        print(
            f"ranks={comm.size} nside={nside} lmax={lmax} mmax={mmax} pol={pol} iter={iter}: "
            f"alm2map {t1 - t0:.3f} s, map2alm {t2 - t1:.3f} s"
        )
        if check:
            ref_map = skyconv.alm2map(alm, nside, lmax=lmax, mmax=mmax, pol=pol, device="cpu")
            ref_alm = skyconv.map2alm(
                ref_map, lmax=lmax, mmax=mmax, iter=iter, pol=pol, device="cpu"
            )
            e1 = np.abs(full_map - ref_map).max() / np.abs(ref_map).max()
            e2 = np.abs(full_alm - ref_alm).max() / np.abs(ref_alm).max()
            print(f"  max relative error: alm2map {e1:.3e}, map2alm {e2:.3e}")
            bad = not (e1 <= 1e-12 and e2 <= 1e-12)
    return comm.bcast(bad, root=0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nside", type=int, default=64)
    p.add_argument("--lmax", type=int, default=None, help="default 2*nside")
    p.add_argument("--mmax", type=int, default=None, help="default lmax")
    p.add_argument("--iter", type=int, default=0)
    p.add_argument("--pol", action="store_true", help="T, E, B -> I, Q, U (spin 0 and 2)")
    p.add_argument("--check", action="store_true", help="test against single-process calls")
    a = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    if a.check:
        cases = [(16, 40, 30, False, 0), (16, 40, 30, True, 3), (8, 19, 19, False, 3)]
        cases += [(8, 25, 12, True, 0), (4, 8, 0, False, 1)]  # last: fewer m than ranks
        bad = [run(comm, *c, check=True) for c in cases]
        return int(any(bad))
    lmax = 2 * a.nside if a.lmax is None else a.lmax
    mmax = lmax if a.mmax is None else a.mmax
    run(comm, a.nside, lmax, mmax, a.pol, a.iter)
    return 0


if __name__ == "__main__":
    sys.exit(main())
