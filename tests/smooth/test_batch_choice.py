"""The auto choice of a batch of beams without a choice per beam (issue 21: 100 beams), and
the mixed batch runner (ring beams as one ring batch, harmonic beams as one harmonic batch)."""

from __future__ import annotations

import numpy as np
import pytest

from skyconv import smooth_map
from skyconv.smooth import api as sm_api
from skyconv.smooth import batch as sb
from skyconv.smooth import cost as sm_cost
from skyconv.smooth.cost import CostModel, DeviceCost

UNSEEN = -1.6375e30


def resol(nside):
    return np.sqrt(4 * np.pi / (12 * nside**2))


@pytest.fixture
def fast_ring(monkeypatch):
    """A cost model where the ring method is far cheaper than any harmonic batch; the ring
    method admissible only where the (patched) choose takes it (test_batch_auto.py covers the
    batch taking admissible ring beams that single calls leave to the harmonic method)."""
    cost = CostModel([DeviceCost("cpu", [1.0, 1e-6, 1e-6, 1e-6], [1e-6, 1e-9, 1e-9, 1e-9])])
    monkeypatch.setattr(sm_cost, "model", lambda dev: cost)
    monkeypatch.setattr(sb, "ring_admissible", lambda beam, nside, iter: False)
    return cost


def fake_choose(edge_px, calls):
    """choose(): harmonic below ``edge_px`` pixels FWHM, ring from there (records calls)."""

    def choose(beam, nside, iter, dev):
        calls.append(beam.fwhm)
        m = "ring" if beam.fwhm_pixels(nside) >= edge_px else "harmonic"
        return m, {"times": {m: 1e-3}}

    return choose


@pytest.mark.parametrize("edge_px", [2.0, 3.33, 4.9, 6.5])
def test_batch_choice_bisects_the_edge(fast_ring, monkeypatch, edge_px):
    nside = 64
    px = np.linspace(2.5, 6.0, 40)
    rng = np.random.default_rng(3)
    order = rng.permutation(px.size)  # beams in any order
    beams = sb.beams(px[order] * resol(nside), None, 3 * nside - 1, 1e-5)
    calls = []
    monkeypatch.setattr(sb, "choose", fake_choose(edge_px, calls))
    kind, each = sb.choose_batch(beams, nside, 0, "cpu")
    if edge_px > px.max():  # every beam harmonic: the shared transform, from the two ends
        assert (kind, each, len(calls)) == ("harmonic", None, 2)
        return
    assert kind == "each"
    want = ["ring" if p >= edge_px else "harmonic" for p in px[order]]
    assert each == want
    assert len(calls) <= 2 + int(np.ceil(np.log2(px.size)))  # the ends, then bisection


def test_batch_choice_splits_choose_each(fast_ring, monkeypatch):
    """A split at either end: every beam is chosen on its own (no rule for splits)."""
    nside = 64
    beams = sb.beams(np.array([3.0, 4.0, 5.0]) * resol(nside), None, 3 * nside - 1, 1e-5)
    calls = []

    def choose(beam, nside, iter, dev):
        calls.append(1)
        return "split", {"times": {"split": 1e-6}}

    monkeypatch.setattr(sb, "choose", choose)
    kind, each = sb.choose_batch(beams, nside, 0, "cpu")
    assert (kind, each) == ("each", ["split"] * 3)
    assert len(calls) >= 3


def test_mixed_batch_equals_each_beam(rng):
    """Ring and harmonic beams of one batch (one ring batch + one harmonic batch) equal each
    beam's own call to 1e-12, with and without a mask, in the beams' order."""
    nside = 32
    fw = [f * resol(nside) for f in (3.0, 5.0, 4.0, 6.0)]
    each = ["harmonic", "ring", "harmonic", "ring"]
    beams = sb.beams(fw, None, 3 * nside - 1, 1e-5)
    m = rng.standard_normal(12 * nside**2)
    st = m[None]
    got = sm_api._mixed_runner(each, beams, nside, 0, "cpu")(st)
    assert got.shape == (4, 1, m.size)
    for b in range(4):
        want = smooth_map(m, fwhm=fw[b], method=each[b], device="cpu")
        assert np.abs(got[b, 0] - want).max() <= 1e-12 * np.abs(want).max()
    run = sm_api._mixed_runner(["ring"] * 2, beams[1::2], nside, 0, "cpu")
    assert len(run.ring_profiles) == 2
    assert not hasattr(sm_api._mixed_runner(each, beams, nside, 0, "cpu"), "ring_profiles")
