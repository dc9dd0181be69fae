"""``method="auto"`` for a batch of beams prices the batch (issue 21: "the auto choice accounts
for the batch"): the ring batch as one set-up and forward transform plus per-beam passes
(``batch.ring_batch_time``), the shared harmonic transform as one map2alm plus an alm2map per
beam; a beam whose ring method meets tol goes to the ring batch even where its single call
takes the harmonic method for speed. The batch under auto equals the loop of single calls
with the same methods to 1e-12."""

from __future__ import annotations

import numpy as np
import pytest

from skyconv import smooth_map
from skyconv.smooth import auto as sm_auto
from skyconv.smooth import batch as sb
from skyconv.smooth import cost as sm_cost
from skyconv.smooth.cost import CostModel, DeviceCost, ring_features


def resol(nside):
    return np.sqrt(4 * np.pi / (12 * nside**2))


def model(ring_consts, harm_consts=(1e-3, 1e-9, 1e-9, 1e-9)):
    return CostModel([DeviceCost("cpu", list(harm_consts), list(ring_consts))])


def test_ring_batch_time_counts_the_set_up_once():
    """One beam: a whole ring call; each further beam: less the constant and half its FFT
    flops (the forward transforms are shared)."""
    nside = 64
    consts = np.array([0.5, 1e-8, 2e-9, 3e-9])
    cost = model(consts)
    reach = [3 * resol(nside), 5 * resol(nside), 8 * resol(nside)]
    single = [float(ring_features(nside, r) @ consts) for r in reach]
    assert sb.ring_batch_time(cost, nside, reach[:1]) == pytest.approx(single[0])
    want = single[0]
    for r in reach[1:]:
        f = ring_features(nside, r)
        want += float(f @ consts) - consts[0] - 0.5 * f[1] * consts[1]
    assert sb.ring_batch_time(cost, nside, reach) == pytest.approx(want)
    assert sb.ring_batch_time(cost, nside, reach) < sum(single) - 1.9 * consts[0]
    assert sb.ring_batch_time(cost, nside, []) == 0.0
    none = CostModel([DeviceCost("cpu", [1e-3, 1e-9, 1e-9, 1e-9], None)])
    assert sb.ring_batch_time(none, nside, reach) == float("inf")


def patched(monkeypatch, cost, own, admissible):
    """A cost model; ``choose`` giving ``own`` for every beam; ring admissible or not."""
    monkeypatch.setattr(sm_cost, "model", lambda dev: cost)

    def choose(beam, nside, iter, dev):
        return own, {"times": {own: 1e-3}}

    monkeypatch.setattr(sb, "choose", choose)
    monkeypatch.setattr(sb, "ring_admissible", lambda beam, nside, iter: admissible)


def test_batch_takes_ring_where_single_calls_take_harmonic(monkeypatch):
    """The GPU case of session 9: each single call takes the harmonic method (a ring call's
    set-up makes it slower alone), the ring method meets tol; as a batch the set-up is paid
    once, so the batch runs as one ring batch. Without admissible rings, or with a ring set-up
    per beam larger than the harmonic batch's marginal cost, the shared transform."""
    nside = 64
    beams = sb.beams(np.linspace(3.0, 5.0, 20) * resol(nside), None, 3 * nside - 1, 1e-5)
    # a ring call: 1 s of set-up, its work nothing; a harmonic smoothing 0.5 s
    patched(monkeypatch, model([1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]), "harmonic", True)
    assert sb.ring_batch_time(sm_cost.model(None), nside, [0.01]) > 0.5  # alone: harmonic
    assert sb.choose_batch(beams, nside, 0, "cpu") == ("each", ["ring"] * 20)
    patched(monkeypatch, model([1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]), "harmonic", False)
    assert sb.choose_batch(beams, nside, 0, "cpu") == ("harmonic", None)
    # ring passes dearer than the harmonic batch's alm2maps: the shared transform
    per_pass = 1e-3 / float(ring_features(nside, 5 * resol(nside))[3])
    patched(monkeypatch, model([0.0, 0.0, 0.0, per_pass], [1e-4, 0.0, 0.0, 0.0]), "harmonic", True)
    assert sb.choose_batch(beams, nside, 0, "cpu") == ("harmonic", None)


def test_batch_pick_keeps_splits_and_rings(monkeypatch):
    nside = 64
    b = sb.beams([3 * resol(nside)], None, 3 * nside - 1, 1e-5)[0]
    for own, adm, want in [
        ("ring", False, "ring"),
        ("split", True, "split"),
        ("harmonic", True, "ring"),
        ("harmonic", False, "harmonic"),
    ]:
        patched(monkeypatch, model([1.0, 0, 0, 0]), own, adm)
        assert sb.batch_pick(b, nside, 0, "cpu") == want


def test_ring_admissible_follows_choose(monkeypatch):
    """ring_admissible is choose's rule without the time: the predicted error within tol, or
    the grid rule (>= GRID_MIN_PIXELS wide, within GRID_SLACK of the harmonic method against
    the exact smoothing); a wide beam at a loose tol is admissible, a 2-pixel one at 1e-8 not."""
    nside = 64
    wide = sb.beams([8 * resol(nside)], None, 3 * nside - 1, 1e-3)[0]
    assert sm_auto.ring_admissible(wide, nside, 0)
    narrow = sb.beams([2 * resol(nside)], None, 3 * nside - 1, 1e-8)[0]
    assert not sm_auto.ring_admissible(narrow, nside, 0)
    mid = sb.beams([3 * resol(nside)], None, 3 * nside - 1, 1e-8)[0]
    monkeypatch.setattr(sm_auto, "_stored_ring_error", lambda beam, n: 1e-3)
    monkeypatch.setattr(
        sm_auto, "_stored_grid_errors", lambda *a: {"ring": 1.2, "harmonic": 1.0, "nside": 64}
    )
    assert sm_auto.ring_admissible(mid, nside, 0)
    monkeypatch.setattr(
        sm_auto, "_stored_grid_errors", lambda *a: {"ring": 1.3, "harmonic": 1.0, "nside": 64}
    )
    assert not sm_auto.ring_admissible(mid, nside, 0)


def run_batch_vs_loop(monkeypatch, device, rng, nside=32):
    """auto batch vs auto loop when the ring method is cheap and admissible for every beam
    (single calls and the batch both take it): equal to 1e-12, the batch as one ring batch."""
    fw = np.array([3.0, 4.0, 5.0, 6.0]) * resol(nside)
    cost = model([1e-6, 1e-12, 1e-12, 1e-12], [1.0, 0.0, 0.0, 0.0])
    monkeypatch.setattr(sm_cost, "model", lambda dev: cost)

    def choose(beam, n, iter, dev):
        return "ring", {"times": {"ring": 1e-6}, "errors": {"ring": 0.0}, "vs_exact": None}

    monkeypatch.setattr(sm_auto, "choose", choose)
    monkeypatch.setattr(sb, "choose", choose)
    m = rng.standard_normal(12 * nside**2)
    kind, each = sb.choose_batch(sb.beams(fw, None, 3 * nside - 1, 1e-5), nside, 0, device)
    assert (kind, each) == ("each", ["ring"] * 4)
    got = smooth_map(m, fwhm=fw, device=device)
    assert got.shape == (4, m.size)
    for b, f in enumerate(fw):
        one = smooth_map(m, fwhm=f, device=device)
        np.testing.assert_allclose(got[b], one, rtol=0, atol=1e-12 * np.abs(one).max())
        ring = smooth_map(m, fwhm=f, device=device, method="ring")
        np.testing.assert_allclose(got[b], ring, rtol=0, atol=1e-12 * np.abs(ring).max())


def test_auto_batch_equals_auto_loop_cpu(monkeypatch, rng):
    run_batch_vs_loop(monkeypatch, "cpu", rng)


@pytest.mark.gpu
def test_auto_batch_equals_auto_loop_gpu(monkeypatch, rng):
    run_batch_vs_loop(monkeypatch, "cuda", rng)


@pytest.mark.gpu
def test_gpu_harmonic_batch_output_is_page_locked_and_equal(rng):
    """The shared harmonic batch on the GPU writes into a pooled page-locked block (the
    batch's output, reused by the next batch of that size) and equals the loop to 1e-12."""
    from skyconv.smooth import methods

    nside = 32
    m = rng.standard_normal(12 * nside**2)
    fw = np.array([3.0, 4.0, 5.0]) * resol(nside)
    got = smooth_map(m, fwhm=fw, device="cuda", method="harmonic")
    for b, f in enumerate(fw):
        one = smooth_map(m, fwhm=f, device="cuda", method="harmonic")
        np.testing.assert_allclose(got[b], one, rtol=0, atol=1e-12 * np.abs(one).max())
    out = methods.output_empty((3, 1, 12 * 1024**2), "cuda")
    assert out.shape == (3, 1, 12 * 1024**2) and out.dtype == np.float64
    assert out.base is not None  # a view of the pooled block (ordinary NumPy memory owns itself)


def test_output_empty_on_cpu():
    from skyconv import HostMemoryError
    from skyconv.smooth import methods

    a = methods.output_empty((2, 3), "cpu")
    assert a.shape == (2, 3) and a.dtype == np.float64 and a.flags.c_contiguous
    with pytest.raises(HostMemoryError, match="bytes"):
        methods.output_empty((1 << 40, 1 << 20), "cpu")


def gpu_like_model(nside):
    """A cost model with the H100's measured end-to-end times at nside 2048 (bench/NOTES.md,
    sessions 9-10): a ring call of a 5′ beam 45 ms, 15 ms of it set-up (plan, tables, the
    map's upload), the rest growing with the kernel's cosine-sum work; a harmonic smoothing
    229 ms (the GPU's single auto calls took it for these beams)."""
    reach5 = float(sb.beams([np.radians(5 / 60)], None, 3 * nside - 1, 1e-5)[0].profile[0][-1])
    cos5 = float(ring_features(nside, reach5)[3])
    return CostModel([DeviceCost("cuda", [0.229, 0.0, 0.0, 0.0], [0.015, 0.0, 0.0, 0.030 / cos5])])


@pytest.mark.slow  # ~15 s on 2 cores with an empty store (ring errors at nside 2048), ~4 s warm
def test_bench_batch_takes_the_ring_batch_on_a_gpu_like_model(monkeypatch):
    """The bench's batch (smooth.beams100: 100 beams of 4′-6′ at nside 2048, tol 1e-5) on a
    GPU-like cost model, each single call taking the harmonic method (as the GPU's did): every
    beam the ring method may take (auto.ring_admissible, not patched: at least GRID_MIN_PIXELS
    = 2.5 px wide, 4.3′, and within GRID_SLACK of the harmonic method against the exact
    smoothing) goes to the one ring batch, predicted ~4x faster than the shared transform; the
    15 narrower beams stay harmonic (the ring method misses tol there, and auto keeps tol)."""
    nside = 2048
    fw = np.radians(np.linspace(4.0, 6.0, 100) / 60)
    beams = sb.beams(fw, None, 3 * nside - 1, 1e-5)
    cost = gpu_like_model(nside)
    monkeypatch.setattr(sm_cost, "model", lambda dev: cost)
    monkeypatch.setattr(sb, "choose", lambda b, n, i, d: ("harmonic", {"times": {}}))
    kind, each = sb.choose_batch(beams, nside, 0, "cpu")
    assert kind == "each"
    wide = [b.fwhm_pixels(nside) >= sm_auto.GRID_MIN_PIXELS for b in beams]
    assert each == ["ring" if w else "harmonic" for w in wide]
    assert each.count("ring") == 85
    reach = [float(b.profile[0][-1]) for b in beams]
    t_ring = sb.ring_batch_time(cost, nside, [r for r, w in zip(reach, wide) if w])
    t_mixed = t_ring + sb.batch_harmonic_time(cost, nside, 3 * nside - 1, 0, 15)
    t_shared = sb.batch_harmonic_time(cost, nside, 3 * nside - 1, 0, 100)
    assert t_mixed < t_shared / 2
