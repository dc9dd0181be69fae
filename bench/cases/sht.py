"""Spherical harmonic transforms: skyconv.alm2map / map2alm against healpy (and ducc0).

Sizes from the issue: nside 2048, lmax 4096 (quick: nside 64, lmax 128), spin 0, map2alm with
iter=0; the polarised (T, E, B) transform at nside 1024, lmax 2048; GPU-only runs at nside 4096
(lmax 8192) and 8192 (lmax 16384). White alm with a real a_l0 (healpy's layout, complex128).
On the gpu rows the anchor is healpy on all the machine's cores (the issue's target is 30x).

Floors: the Legendre recurrence costs about 7 flops per (ring pair, l, m) for spin 0 (3 for
the step, 4 for the complex accumulation) and 3x that for (T, E, B); the map and the alm are
read or written once; the alm go up the bus and the map comes down (the reverse for map2alm).
"""

from __future__ import annotations

import numpy as np

from ..harness import Case, Comparison, Context, Host, Skyconv, SkyconvGpu, Work, register

SIZES = {
    # name: (nside, lmax, quick nside, quick lmax, pol)
    "": (2048, 4096, 64, 128, False),
    "_pol": (1024, 2048, 32, 64, True),
    "_4096": (4096, 8192, 64, 128, False),
    "_8192": (8192, 16384, 64, 128, False),
}


def nalm(lmax: int) -> int:
    return (lmax + 1) * (lmax + 2) // 2


def sizes(ctx: Context, key: str) -> tuple[int, int, bool]:
    ns, lmax, qns, qlmax, pol = SIZES[key]
    return (qns, qlmax, pol) if ctx.quick else (ns, lmax, pol)


def alm_input(key: str):
    def make(ctx: Context):
        nside, lmax, pol = sizes(ctx, key)

        def build():
            rng = np.random.default_rng(3)
            n = nalm(lmax)
            shape = (3, n) if pol else (n,)
            a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
            a[..., : lmax + 1] = a[..., : lmax + 1].real
            return a

        return (ctx.cache(("sht.alm", lmax, pol), build), nside)

    return make


def map_input(key: str):
    def make(ctx: Context):
        nside, lmax, pol = sizes(ctx, key)

        def build():
            rng = np.random.default_rng(4)
            shape = (3, 12 * nside**2) if pol else (12 * nside**2,)
            return rng.standard_normal(shape)

        return (ctx.cache(("sht.map", nside, pol), build), lmax)

    return make


def synth_work(inputs: tuple) -> Work:
    alm, nside = inputs
    ncomp = 3 if alm.ndim == 2 else 1
    lmax = round((np.sqrt(8 * alm.shape[-1] + 1) - 3) / 2)
    flops = 7.0 * 2 * nside * nalm(lmax) * ncomp
    map_bytes = ncomp * 12 * nside**2 * 8
    return Work(
        bytes=alm.nbytes + map_bytes, flops=flops, h2d_bytes=alm.nbytes, d2h_bytes=map_bytes
    )


def anal_work(inputs: tuple) -> Work:
    maps, lmax = inputs
    ncomp = 3 if maps.ndim == 2 else 1
    nside = round(np.sqrt(maps.shape[-1] / 12))
    flops = 7.0 * 2 * nside * nalm(lmax) * ncomp
    alm_bytes = ncomp * nalm(lmax) * 16
    return Work(
        bytes=maps.nbytes + alm_bytes, flops=flops, h2d_bytes=maps.nbytes, d2h_bytes=alm_bytes
    )


def sc_synth(device):
    def call(alm, nside):
        import skyconv

        return skyconv.alm2map(alm, nside, device=device)

    call.__name__ = f"skyconv.alm2map[{device}]"
    return call


def hp_synth(alm, nside):
    import healpy

    return healpy.alm2map(alm, nside)


def ducc_synth(alm, nside):
    """ducc0 on skyconv's thread count; (T, E, B) as spin 0 + spin 2 (healpy's convention)."""
    import ducc0

    from skyconv import get_num_threads

    lmax = round((np.sqrt(8 * alm.shape[-1] + 1) - 3) / 2)
    geom = ducc0.healpix.Healpix_Base(nside, "RING").sht_info()
    kw = dict(lmax=lmax, nthreads=get_num_threads(), **geom)
    if alm.ndim == 2:
        t = ducc0.sht.synthesis(alm=alm[:1], spin=0, **kw)
        qu = ducc0.sht.synthesis(alm=alm[1:], spin=2, **kw)
        return np.concatenate([t, qu])
    return ducc0.sht.synthesis(alm=alm.reshape(1, -1), spin=0, **kw)[0]


def sc_anal(device):
    def call(maps, lmax):
        import skyconv

        return skyconv.map2alm(maps, lmax=lmax, iter=0, device=device)

    call.__name__ = f"skyconv.map2alm[{device}]"
    return call


def hp_anal(maps, lmax):
    import healpy

    return healpy.map2alm(maps, lmax=lmax, iter=0)


def ducc_anal(maps, lmax):
    """ducc0's adjoint synthesis with healpy's iter=0 weights (4π/npix); (I, Q, U) as spin 0 +
    spin 2."""
    import ducc0

    from skyconv import get_num_threads

    nside = round(np.sqrt(maps.shape[-1] / 12))
    geom = ducc0.healpix.Healpix_Base(nside, "RING").sht_info()
    w = 4 * np.pi / maps.shape[-1]
    kw = dict(lmax=lmax, nthreads=get_num_threads(), **geom)
    if maps.ndim == 2:
        t = ducc0.sht.adjoint_synthesis(map=maps[:1] * w, spin=0, **kw)
        eb = ducc0.sht.adjoint_synthesis(map=maps[1:] * w, spin=2, **kw)
        return np.concatenate([t, eb])
    return ducc0.sht.adjoint_synthesis(map=maps.reshape(1, -1) * w, spin=0, **kw)[0]


def case(name, desc, inputs, work, sc, hp_impl, ducc_impl=None, gpu_only=False, key=""):
    comps = []
    if not gpu_only:
        comps.append(
            Comparison("cpu", Skyconv([sc("cpu")]), Host("healpy", [hp_impl], requires=("healpy",)))
        )
    comps.append(
        Comparison(
            "gpu",
            SkyconvGpu([sc("cuda")]),
            None if gpu_only else Host("healpy", [hp_impl], requires=("healpy",)),
        )
    )
    ns, lmax, qns, qlmax, pol = SIZES[key]
    register(
        Case(
            name=name,
            description=desc,
            inputs=inputs,
            work=work,
            comparisons=comps,
            params={"nside": ns, "lmax": lmax, "quick_nside": qns, "quick_lmax": qlmax, "pol": pol},
        )
    )
    if ducc_impl is not None:
        register(
            Case(
                name=name + "_vs_ducc0",
                description=desc + " (anchor ducc0.sht)",
                inputs=inputs,
                work=work,
                comparisons=[
                    Comparison(
                        "cpu",
                        Skyconv([sc("cpu")]),
                        Host("ducc0.sht", [ducc_impl], requires=("ducc0",)),
                    )
                ],
                params={"nside": ns, "lmax": lmax, "pol": pol},
            )
        )


case(
    "sht.alm2map",
    "alm2map spin 0, nside 2048, lmax 4096",
    alm_input(""),
    synth_work,
    sc_synth,
    hp_synth,
    ducc_synth,
)
case(
    "sht.map2alm",
    "map2alm spin 0 iter=0, nside 2048, lmax 4096",
    map_input(""),
    anal_work,
    sc_anal,
    hp_anal,
    ducc_anal,
)
case(
    "sht.alm2map_pol",
    "alm2map (T,E,B) -> (I,Q,U), nside 1024, lmax 2048",
    alm_input("_pol"),
    synth_work,
    sc_synth,
    hp_synth,
    ducc_synth,
    key="_pol",
)
case(
    "sht.map2alm_pol",
    "map2alm (I,Q,U) -> (T,E,B) iter=0, nside 1024, lmax 2048",
    map_input("_pol"),
    anal_work,
    sc_anal,
    hp_anal,
    ducc_anal,
    key="_pol",
)
case(
    "sht.alm2map_4096",
    "GPU alm2map spin 0, nside 4096, lmax 8192",
    alm_input("_4096"),
    synth_work,
    sc_synth,
    hp_synth,
    gpu_only=True,
    key="_4096",
)
case(
    "sht.alm2map_8192",
    "GPU alm2map spin 0, nside 8192, lmax 16384 (chunked)",
    alm_input("_8192"),
    synth_work,
    sc_synth,
    hp_synth,
    gpu_only=True,
    key="_8192",
)
case(
    "sht.map2alm_8192",
    "GPU map2alm spin 0 iter=0, nside 8192, lmax 16384 (chunked)",
    map_input("_8192"),
    anal_work,
    sc_anal,
    hp_anal,
    gpu_only=True,
    key="_8192",
)
