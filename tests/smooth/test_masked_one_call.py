"""Masked ring smoothing in one core call (``_core._smooth_ring_masked``, issue 21's speed
work): the weights, m·w, both convolutions and the division without NumPy passes over the map,
and on the GPU without a host round trip.

Reference: the NumPy route it replaces, written from the documented rules of
``skyconv.smooth.masked`` (``weights``, ``stack``, ``normalise`` around the plain ring engine
``_core._smooth_ring_beams``), which it must equal bit for bit on the CPU (the same single IEEE
operation per pixel, the same engine); the GPU to 1e-12 of the CPU (the existing ring engines'
tolerance) with the same UNSEEN pixels. The emulator runs the two new kernels of
kernels/smooth.cu on the host against the same rules.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from _cuda_host import build

from skyconv import _core, healpix, smooth_map
from skyconv.smooth import kernel_profile
from skyconv.smooth import masked as sm_masked

UNSEEN = -1.6375e30


def resol(nside):
    return np.sqrt(4 * np.pi / (12 * nside**2))


def inputs(nside, rng, dtype=np.float64):
    npix = 12 * nside**2
    m = rng.standard_normal(npix).astype(dtype)
    th, _ = healpix.pix2ang(nside, np.arange(npix))
    w = (np.abs(np.cos(th)) >= 0.2).astype(np.float64)
    w[rng.integers(0, npix, npix // 50)] = 0.5  # fractional weights
    bad = rng.integers(0, npix, npix // 40)
    m[bad[::3]] = UNSEEN
    m[bad[1::3]] = np.nan
    m[bad[2::3]] = np.inf
    return m, w


def numpy_route(m, w, nside, profiles, thr):
    """The reference: weights, (m·w, w), the plain engine per beam, normalise."""
    ww = sm_masked.weights(m, True if w is None else w)
    filled = np.where(ww > 0, m, 0.0)
    st = sm_masked.stack(filled, ww)
    ts = [t for t, _ in profiles]
    vs = [v for _, v in profiles]
    s = _core._smooth_ring_beams(st, nside, ts, vs, "cpu")  # (n, 2, npix)
    return np.stack([sm_masked.normalise(s[b], 1.0, thr[b]) for b in range(len(profiles))])


def profiles_of(nside, pxs):
    return [kernel_profile(fwhm=p * resol(nside), tol=1e-5) for p in pxs]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("with_mask", [True, False])
def test_one_call_equals_numpy_route_bit_for_bit(rng, dtype, with_mask):
    nside = 32
    m, w = inputs(nside, rng, dtype)
    w = w if with_mask else None
    profiles = profiles_of(nside, [3.0, 5.0])
    thr = [0.5, 0.3]
    ts = [t for t, _ in profiles]
    vs = [v for _, v in profiles]
    got = _core._smooth_ring_masked(m, nside, ts, vs, thr, w, "cpu")
    want = numpy_route(m, w, nside, profiles, thr)
    assert got.shape == (2, m.size) and got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    # the cut leaves UNSEEN in its middle; isolated missing pixels alone do not
    assert (got == UNSEEN).any() == with_mask and (got != UNSEEN).mean() > 0.5


def test_smooth_map_masked_ring_goes_through_one_call(rng, monkeypatch):
    """smooth_map(mask=, method="ring") (single beam, batch, NEST) equals the NumPy route and
    makes one core call per map."""
    nside = 32
    m, w = inputs(nside, rng)
    fw = [3 * resol(nside), 4 * resol(nside)]
    calls = []
    real = _core._smooth_ring_masked

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(_core, "_smooth_ring_masked", counted)
    one = smooth_map(m, fwhm=fw[0], method="ring", mask=w, min_weight=0.4, device="cpu")
    both = smooth_map(m, fwhm=fw, method="ring", mask=w, min_weight=0.4, device="cpu")
    assert len(calls) == 2
    want = numpy_route(m, w, nside, profiles_of(nside, [3.0, 4.0]), [0.4, 0.4])
    np.testing.assert_array_equal(one, want[0])
    np.testing.assert_array_equal(both, want)
    # NEST in, NEST out: the RING result reordered
    ring_of = healpix.nest2ring(nside, np.arange(m.size))
    nest = smooth_map(
        m[ring_of],
        fwhm=fw[0],
        method="ring",
        mask=w[ring_of],
        min_weight=0.4,
        device="cpu",
        nest=True,
    )
    np.testing.assert_array_equal(nest, want[0][ring_of])


def test_one_call_rejects_bad_shapes(rng):
    nside = 8
    ((t, v),) = profiles_of(nside, [3.0])
    m = rng.standard_normal(12 * nside**2)
    with pytest.raises(ValueError, match="thr"):
        _core._smooth_ring_masked(m, nside, [t], [v], [0.5, 0.5], None, "cpu")
    with pytest.raises(ValueError, match="768"):
        _core._smooth_ring_masked(m, nside, [t], [v], [0.5], np.ones(5), "cpu")
    with pytest.raises(ValueError, match="1-D"):
        _core._smooth_ring_masked(m[None], nside, [t], [v], [0.5], None, "cpu")


def _owner(a):
    """The object at the bottom of ``a``'s base chain (a pooled page-locked output: the
    core's PinnedOwner)."""
    while isinstance(getattr(a, "base", None), np.ndarray):
        a = a.base
    return a.base


@pytest.mark.parametrize("bad", [-0.25, 1.5, np.nan, np.inf])
def test_one_call_checks_the_mask_values(rng, bad, device):
    """The ring route leaves the weights' check to the core call (no NumPy passes over the
    mask): a value outside [0, 1] anywhere, also under a missing map pixel, is an ArgumentError
    naming the mask, on either engine; the harmonic route checks in Python, the same way."""
    from skyconv import ArgumentError

    nside = 16
    m, w = inputs(nside, rng)
    miss = int(np.flatnonzero(m == UNSEEN)[0])
    ((t, v),) = profiles_of(nside, [3.0])
    for at in (5, miss):
        wb = w.copy()
        wb[at] = bad
        with pytest.raises(ArgumentError, match=r"mask must hold weights in \[0, 1\]"):
            _core._smooth_ring_masked(m, nside, [t], [v], [0.5], wb, device)
        for method in ("ring", "harmonic"):
            with pytest.raises(ArgumentError, match=r"mask must hold weights in \[0, 1\]"):
                smooth_map(m, fwhm=3 * resol(nside), method=method, mask=wb, device=device)
    # the edges are weights: 0 and 1 exactly pass
    wb = w.copy()
    wb[:2] = [0.0, 1.0]
    assert _core._smooth_ring_masked(m, nside, [t], [v], [0.5], wb, device).shape == (1, m.size)


@pytest.mark.gpu
@pytest.mark.parametrize("pool", ["on", "off"])
def test_gpu_overlapped_batches_equal_the_cpu_and_the_loop(rng, monkeypatch, pool):
    """Batches of beams whose outputs come down while the next beam computes: into pooled
    page-locked outputs (direct DMAs on the copy stream; nside 256 x 3 beams = 19 MB, over the
    pool's 16 MB floor) and, with the pool off, through the staging buffers after the next
    beam's products. Masked (two output buffers taking turns) and unmasked (the map buffer and
    one more): equal to the single-beam calls (the same launches) and to the CPU to 1e-12."""
    if pool == "off":
        monkeypatch.setenv("SKYCONV_PINNED_MAX_MB", "0")
    nside = 256
    m, w = inputs(nside, rng)
    profiles = profiles_of(nside, [3.0, 6.0, 4.5])
    thr = [0.5, 0.5, 0.2]
    ts = [t for t, _ in profiles]
    vs = [v for _, v in profiles]
    gpu = _core._smooth_ring_masked(m, nside, ts, vs, thr, w, "cuda")
    assert (type(_owner(gpu)).__name__ == "PinnedOwner") == (pool == "on")
    cpu = _core._smooth_ring_masked(m, nside, ts, vs, thr, w, "cpu")
    np.testing.assert_array_equal(cpu == UNSEEN, gpu == UNSEEN)
    ok = cpu != UNSEEN
    assert np.abs(gpu[ok] - cpu[ok]).max() <= 1e-12 * np.abs(cpu[ok]).max()
    for b in range(3):
        one = _core._smooth_ring_masked(m, nside, [ts[b]], [vs[b]], [thr[b]], w, "cuda")
        np.testing.assert_array_equal(one[0], gpu[b])
    filled = np.where(np.isfinite(m) & (m != UNSEEN), m, 0.0)
    two = np.stack([filled, filled[::-1].copy()])  # two maps: outputs beam-major
    plain = _core._smooth_ring_beams(two, nside, ts, vs, "cuda")
    assert plain.shape == (3, 2, m.size)
    ref = _core._smooth_ring_beams(two, nside, ts, vs, "cpu")
    assert np.abs(plain - ref).max() <= 1e-12 * np.abs(ref).max()
    for b in range(3):
        for k in range(2):
            one = _core._smooth_ring(two[k], nside, ts[b], vs[b], "cuda")
            np.testing.assert_array_equal(one, plain[b, k])


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    return build(tmp_path_factory.mktemp("smooth_mask_emu"), "smooth_mask_emu")


@pytest.mark.parametrize("with_mask", [True, False])
def test_emulated_mask_kernels_follow_the_rules(emu, tmp_path, rng, with_mask):
    n = 1000  # more than the emulated grid's threads: the grid-stride loops
    m, w = inputs(8, rng)
    m, w = m[:n], w[:n]
    m.tofile(tmp_path / "map.bin")
    if with_mask:
        w.tofile(tmp_path / "mask.bin")
    num = rng.standard_normal(n)
    den = rng.uniform(-0.2, 1.0, n)
    den[:5] = [0.0, -0.0, 0.3, 0.29999999999999993, 1e-300]
    num.tofile(tmp_path / "num.bin")
    den.tofile(tmp_path / "den.bin")
    thr = 0.3
    run = subprocess.run(
        [str(emu), str(tmp_path), str(int(with_mask)), repr(thr)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().endswith("bad 0")
    ww = sm_masked.weights(m, w if with_mask else True)
    want = sm_masked.stack(np.where(ww > 0, m, 0.0), ww)
    np.testing.assert_array_equal(np.fromfile(tmp_path / "w.bin"), want[1])
    np.testing.assert_array_equal(np.fromfile(tmp_path / "mw.bin"), want[0])
    out = np.fromfile(tmp_path / "out.bin")
    np.testing.assert_array_equal(out, sm_masked.normalise(np.stack([num, den]), 1.0, thr))
    assert out[0] == UNSEEN and out[3] == UNSEEN and out[2] == num[2] / 0.3
    np.testing.assert_array_equal(np.fromfile(tmp_path / "out_inplace.bin"), out)
    if with_mask:  # a weight outside [0, 1] sets the prep's flag (the outputs as before)
        w[7] = 1.25
        w.tofile(tmp_path / "mask.bin")
        run = subprocess.run(
            [str(emu), str(tmp_path), "1", repr(thr)], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0 and run.stdout.strip().endswith("bad 1"), run.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("nside, with_mask", [(64, True), (64, False), (256, True)])
def test_gpu_one_call_equals_cpu(rng, nside, with_mask):
    m, w = inputs(nside, rng)
    w = w if with_mask else None
    profiles = profiles_of(nside, [3.0, 6.0, 4.5])
    thr = [0.5, 0.5, 0.2]
    ts = [t for t, _ in profiles]
    vs = [v for _, v in profiles]
    cpu = _core._smooth_ring_masked(m, nside, ts, vs, thr, w, "cpu")
    gpu = _core._smooth_ring_masked(m, nside, ts, vs, thr, w, "cuda")
    np.testing.assert_array_equal(cpu == UNSEEN, gpu == UNSEEN)
    ok = cpu != UNSEEN
    assert np.abs(gpu[ok] - cpu[ok]).max() <= 1e-12 * np.abs(cpu[ok]).max()


@pytest.mark.gpu
def test_gpu_one_call_float32_nest_partial_sky(rng):
    nside = 64
    m, w = inputs(nside, rng, np.float32)
    ring_of = healpix.nest2ring(nside, np.arange(m.size))
    kw = dict(fwhm=4 * resol(nside), method="ring", mask=w[ring_of], nest=True)
    cpu = smooth_map(m[ring_of], device="cpu", **kw)
    gpu = smooth_map(m[ring_of], device="cuda", **kw)
    np.testing.assert_array_equal(cpu == UNSEEN, gpu == UNSEEN)
    ok = cpu != UNSEEN
    assert np.abs(gpu[ok] - cpu[ok]).max() <= 1e-12 * np.abs(cpu[ok]).max()
    ipix = np.flatnonzero(np.isfinite(m) & (w > 0))
    part = smooth_map(
        (ipix, m[ipix]), nside=nside, fwhm=4 * resol(nside), method="ring", device="cuda"
    )
    ref = smooth_map(
        (ipix, m[ipix]), nside=nside, fwhm=4 * resol(nside), method="ring", device="cpu"
    )
    np.testing.assert_array_equal(part == UNSEEN, ref == UNSEEN)
