"""Many beams at once: smooth_map(m, fwhm=[...]) and a 2-D beam_window equal the loop over
single beams to 1e-12 (fractional to the largest value; the harmonic batch shares one map2alm
and one alm2map, the ring batch one engine call with every beam's kernel)."""

from __future__ import annotations

import numpy as np
import pytest

from skyconv import ShapeError, smooth_map
from skyconv.smooth import batch as sb
from skyconv.smooth import gauss_window
from skyconv.smooth.cost import CostModel, DeviceCost

UNSEEN = -1.6375e30


def resol(nside):
    """The pixel size sqrt(4 pi / npix), radians."""
    return np.sqrt(4 * np.pi / (12 * nside**2))


def close(a, b, rel=1e-12):
    scale = np.abs(b[b != UNSEEN]).max()
    assert a.shape == b.shape
    np.testing.assert_array_equal(a == UNSEEN, b == UNSEEN)
    ok = b != UNSEEN
    assert np.abs(a[ok] - b[ok]).max() <= rel * scale


@pytest.mark.parametrize("method", ["harmonic", "ring", "auto"])
def test_fwhm_batch_equals_loop(method, device, rng):
    nside = 32
    fwhms = [f * resol(nside) for f in (3.0, 4.5, 6.0)]
    m = rng.standard_normal(12 * nside**2)
    got = smooth_map(m, fwhm=fwhms, method=method, device=device)
    assert got.shape == (3, m.size)
    each = [method] * len(fwhms)
    if method == "auto":  # the batch's own choice: the shared transform or each beam's method
        beams = sb.beams(fwhms, None, 3 * nside - 1, 1e-5)
        kind, chosen = sb.choose_batch(beams, nside, 0, device)
        each = ["harmonic"] * len(fwhms) if kind == "harmonic" else chosen
    for b, f in enumerate(fwhms):
        close(got[b], smooth_map(m, fwhm=f, method=each[b], device=device))


def test_window_batch_several_maps_nest_mask(device, rng):
    nside = 16
    lmax = 3 * nside - 1
    wins = np.stack([gauss_window(np.radians(f), lmax) for f in (8.0, 12.0)])
    wins[1, 10:] *= 0.9
    m = rng.standard_normal((2, 12 * nside**2))
    mask = (rng.random(m.shape[1]) > 0.1).astype(float)
    for method in ("harmonic", "ring"):
        kw = dict(method=method, nest=True, mask=mask, device=device)
        got = smooth_map(m, beam_window=wins, **kw)
        assert got.shape == (2, 2, m.shape[1])
        for b in range(2):
            close(got[b], smooth_map(m, beam_window=wins[b], **kw))


def test_auto_batch_prices_shared_transform():
    """With a ring engine 100x slower than the transforms, auto takes the shared harmonic
    batch; the batch price is one smoothing plus half a smoothing per further beam."""
    cost = CostModel([DeviceCost("cpu", [1e-3, 1e-9, 1e-9, 1e-9], [1.0, 1e-6, 1e-6, 1e-6])])
    t1 = cost.harmonic_time(64, 191, 0)[0]
    assert sb.batch_harmonic_time(cost, 64, 191, 0, 11) == pytest.approx(t1 * 6)
    assert sb.batch_harmonic_time(cost, 64, 191, 2, 1) == pytest.approx(3 * t1)


def test_batch_errors():
    m = np.ones(12 * 8**2)
    with pytest.raises(ShapeError, match="fwhm"):
        smooth_map(m, fwhm=[[0.1]], device="cpu")
    with pytest.raises(ShapeError, match="beam"):
        smooth_map(m, beam_window=np.ones((0, 5)), device="cpu")


def test_engine_beams_equal_each_beam(device, rng):
    """_core._smooth_ring_beams (one engine call, k maps x n kernels) equals _smooth_ring per
    beam bit for bit (the same arithmetic; on the GPU the same launches)."""
    from skyconv import _core
    from skyconv.smooth import kernel_profile

    nside = 16
    m = rng.standard_normal((2, 12 * nside**2))
    profiles = [kernel_profile(fwhm=f * resol(nside)) for f in (2.5, 4.0, 7.0)]
    ts, vs = [p[0] for p in profiles], [p[1] for p in profiles]
    got = _core._smooth_ring_beams(m, nside, ts, vs, device)
    assert got.shape == (3, 2, m.shape[1])
    for b, (t, v) in enumerate(profiles):
        np.testing.assert_array_equal(got[b], _core._smooth_ring(m, nside, t, v, device))
    one = _core._smooth_ring_beams(m[1], nside, ts, vs, device)
    np.testing.assert_array_equal(one, got[:, 1])


def test_engine_beams_write_rows_of_out(device, rng):
    """With ``out`` and ``rows`` the engine writes beam b into out[rows[b]] and nothing else
    (the mixed batch's ring part, no copy): the rows equal _smooth_ring bit for bit, the other
    rows keep their values, ``out`` itself is returned (also a pooled GPU output block)."""
    from skyconv import _core
    from skyconv.smooth import kernel_profile, methods

    nside = 16
    m = rng.standard_normal((2, 12 * nside**2))
    profiles = [kernel_profile(fwhm=f * resol(nside)) for f in (2.5, 4.0, 7.0)]
    ts, vs = [p[0] for p in profiles], [p[1] for p in profiles]
    out = np.full((5, *m.shape), 7.5)
    back = _core._smooth_ring_beams(m, nside, ts, vs, device, out, [3, 0, 1])
    assert back is out
    for b, row in enumerate([3, 0, 1]):
        np.testing.assert_array_equal(out[row], _core._smooth_ring(m, nside, ts[b], vs[b], device))
    assert (out[[2, 4]] == 7.5).all()
    # default rows 0 .. n - 1; a one-map input and a pooled output (page-locked on the GPU)
    big = methods.output_empty((3, m.shape[1]), device)
    methods.ring_beams(m[0], nside, profiles, device, out=big)
    for b in range(3):
        np.testing.assert_array_equal(big[b], _core._smooth_ring(m[0], nside, ts[b], vs[b], device))


def test_engine_beams_out_errors(rng):
    from skyconv import _core
    from skyconv.smooth import kernel_profile

    nside = 8
    m = rng.standard_normal(12 * nside**2)
    t, v = kernel_profile(fwhm=3 * resol(nside))
    out = np.zeros((3, m.size))
    for bad, rows, match in [
        (np.zeros((3, m.size + 1)), [0], "shape"),
        (np.zeros((3, 2, m.size)), [0], "shape"),
        (out, [0, 0], "distinct"),
        (out, [3], "distinct"),
        (out, [0, 1], "one row per beam"),
        (np.zeros((3, m.size))[:, ::1].T.copy().T, [0], "C-contiguous"),
    ]:
        with pytest.raises(ValueError, match=match):
            _core._smooth_ring_beams(m, nside, [t], [v], "cpu", bad, rows)
    ro = np.zeros((2, m.size))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        _core._smooth_ring_beams(m, nside, [t], [v], "cpu", ro, [0])
    with pytest.raises(ValueError, match="rows needs out"):
        _core._smooth_ring_beams(m, nside, [t], [v], "cpu", None, [0])


def test_harmonic_batch_writes_rows_of_out(device, rng):
    """harmonic_batch with ``out``/``rows``: each beam in its row (contiguous rows in one
    threaded copy, scattered ones row by row), equal to the batch's own output."""
    from skyconv.smooth import methods

    nside = 16
    lmax = 3 * nside - 1
    m = rng.standard_normal((1, 12 * nside**2))
    ws = [gauss_window(f * resol(nside), lmax) for f in (2.0, 3.0, 5.0)]
    want = methods.harmonic_batch(m, ws, lmax, 0, device)
    for rows in ([1, 2, 3], [4, 0, 2]):
        out = np.full((5, *m.shape), 7.5)
        assert methods.harmonic_batch(m, ws, lmax, 0, device, out=out, rows=rows) is out
        np.testing.assert_array_equal(out[rows], want)
        others = [r for r in range(5) if r not in rows]
        assert (out[others] == 7.5).all()


def test_products_into_equals_almxfl(rng):
    """The harmonic batch's products, row b·k + i = almxfl(alm[i], window b), written in
    place on threads: bit for bit almxfl's (k = 2 maps, 3 windows, one shorter than lmax)."""
    from skyconv import almxfl
    from skyconv.smooth import methods

    lmax = 40
    nalm = (lmax + 1) * (lmax + 2) // 2
    alm = rng.standard_normal((2, nalm)) + 1j * rng.standard_normal((2, nalm))
    ws = [gauss_window(0.1, lmax), gauss_window(0.3, lmax), np.linspace(1.0, 0.5, 20)]
    prods = np.full((6, nalm), np.nan + 0j)
    methods.products_into(prods, alm, ws)
    for b, w in enumerate(ws):
        for i in range(2):
            np.testing.assert_array_equal(prods[2 * b + i], almxfl(alm[i], w))


def test_copy_into_in_pieces_on_threads(rng, monkeypatch):
    """The harmonic batch's copies into its output: in pieces on skyconv's threads, every
    element once (a piece size that leaves a ragged last piece; a strided target falls back
    to NumPy's own copy)."""
    import skyconv
    from skyconv.smooth import methods

    monkeypatch.setattr(methods, "COPY_PIECE", 1000)
    before = skyconv.get_num_threads()
    skyconv.set_num_threads(3)
    try:
        src = rng.standard_normal((2, 3, 4321))
        out = np.zeros((4, 3, 4321))
        methods.copy_into(out[1:3], src)
        np.testing.assert_array_equal(out[1:3], src)
        assert not out[0].any() and not out[3].any()
        strided = np.zeros((3, 8642))[:, ::2]
        methods.copy_into(strided, src[0])
        np.testing.assert_array_equal(strided, src[0])
    finally:
        skyconv.set_num_threads(before)
