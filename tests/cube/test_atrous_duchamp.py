"""skyconv.atrous_denoise's default (variant="duchamp") against DUCHAMP 1.6.1's rules.

The reference below is written plainly in NumPy float64 from the stated rules of DUCHAMP
1.6.1's reconstruction (not from its code), one unit at a time, with a direct (non-separable)
convolution by the full outer-product filter and mirror edges by index arithmetic:

- N = int(log2(L-1)) - 1 (B3 spline) or int(log2(L-1)) (triangle, Haar), L the smallest
  reconstructed dimension of the whole array (DUCHAMP >= 1.2 uses the full dimensions, and
  reflects at the array edges, also when the edges are blank).
- 1-D and 3-D: scales 1..N; blank taps are left out of the filter sums; scales
  scaleMin..scaleMax are thresholded; the loop stops on reconConvergence.
- 2-D: scales 1..N-1 only (the loop runs `scale < numScales`), the smooth array left after
  N-1 scales is added; scaleMax is not applied (every scale >= scaleMin is thresholded); the
  loop stops on DUCHAMP's fixed 0.005, not on reconConvergence; blank pixels are not left out
  of the filter sums: in the first iteration they hold DUCHAMP's BLANK value (blank_value), in
  later ones 0 (input - output, the output there having been set to the input) -- or the BLANK
  value again when no scale was thresholded.
- Noise factors: DUCHAMP's tables, triangle 1-D scale 18 = 1.12763724e-4 and triangle 2-D
  scale 12 = 0 (extrapolated from 0 after it); past the tables divided by sqrt(2), 2, sqrt(8).
- Threshold |w| > median(w) + snrRecon * sigma0 * f[dim][s]; sigma = MADFM/0.6744888.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import skyconv
from skyconv.atrous import atrous_scales

from _atrous_ref import MADFM_TO_SIGMA, WEIGHTS, factor, n_scales
from _refs import rel_err

DUCHAMP_BLANK = -8.00061


def reflect(i: int, n: int) -> int:
    """DUCHAMP's edge rule, applied until the index is inside: x<0 -> -x, x>=n -> 2(n-1)-x."""
    while i < 0 or i >= n:
        i = -i if i < 0 else 2 * (n - 1) - i
    return i


def smooth(c: np.ndarray, good: np.ndarray, w1, step: int, skip_blank_taps: bool) -> np.ndarray:
    """Sum over the outer-product filter's taps of c at the reflected positions."""
    hw = len(w1) // 2
    out = np.zeros_like(c)
    for offs in itertools.product(range(len(w1)), repeat=c.ndim):
        weight = np.prod([w1[o] for o in offs])
        idx = [
            np.array([reflect(j + (o - hw) * step, n) for j in range(n)])
            for o, n in zip(offs, c.shape, strict=True)
        ]
        tap = c[np.ix_(*idx)]
        if skip_blank_taps:
            tap = np.where(good[np.ix_(*idx)], tap, 0.0)
        out += weight * tap
    return out


def madfm_sigma(x: np.ndarray) -> float:
    return float(np.median(np.abs(x - np.median(x)))) / MADFM_TO_SIGMA


def duchamp_unit(x, dim, filt="b3spline", snr=4.0, smin=1, smax=0, conv=0.005, blank=None):
    """DUCHAMP 1.6.1's reconstruction of one unit (spectrum, map or cube), robust statistics."""
    blank = DUCHAMP_BLANK if blank is None else blank
    x = np.asarray(x, dtype=np.float64)
    good = np.isfinite(x)
    if not good.any():
        return x.copy(), 0
    n = n_scales(min(x.shape), filt)
    loop = n - 1 if dim == 2 else n
    if dim == 2:
        kept = [s >= smin for s in range(1, loop + 1)]
        conv = 0.005
    else:
        top = smax if 0 < smax <= n else n
        kept = [smin <= s <= top for s in range(1, loop + 1)]
    sigma0 = madfm_sigma(x[good])
    out = np.zeros_like(x)
    old, it = 1e9, 0
    while True:
        it += 1
        leak = blank if dim == 2 and (it == 1 or not any(kept)) else 0.0
        c = np.where(good, x - out, leak)
        for s in range(1, loop + 1):
            sm = smooth(c, good, WEIGHTS[filt], 2 ** (s - 1), skip_blank_taps=dim != 2)
            w = np.where(good, c - sm, 0.0)
            c = c - w
            if kept[s - 1]:
                thr = float(np.median(w[good])) + snr * sigma0 * factor(filt, dim, s)
                out = np.where(good & (np.abs(w) > thr), out + w, out)
        out = np.where(good, out + c, out)
        new = np.float64(madfm_sigma((x - out)[good]))
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = abs(old - new) / new  # NaN (0/0) stops, as in DUCHAMP
        if not (it == 1 or rel > conv) or it >= 100:
            break
        old = new
    return np.where(good, out, x), it


def duchamp(data, dim, **kw):
    """The reference over every unit, laid out as skyconv lays them out."""
    data = np.asarray(data, dtype=np.float64)
    out = np.empty_like(data)
    if dim == 1:
        ushape = data.shape[1:]
        sels = [(slice(None),) + u for u in np.ndindex(*ushape)]
    else:
        ushape = data.shape[: data.ndim - dim]
        sels = [u + (Ellipsis,) for u in np.ndindex(*ushape)]
    iters = np.zeros(ushape, dtype=np.int64)
    for u, sel in zip(np.ndindex(*ushape), sels, strict=True):
        out[sel], iters[u] = duchamp_unit(data[sel], dim, **kw)
    return out, iters


def sky(rng, shape, dim, border=0, holes=0.0):
    """Noise, a few compact sources, a NaN border `border` pixels wide on the reconstructed
    axes' low sides (and one pixel on their high sides) and a fraction `holes` of NaN pixels."""
    x = rng.normal(0.0, 1.0, size=shape)
    grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    for _ in range(4):
        centre = [rng.uniform(0, n) for n in shape]
        r2 = sum((g - c) ** 2 for g, c in zip(grids, centre, strict=True))
        x += 7.0 * np.exp(-r2 / (2 * 1.8**2))
    if border:
        for ax in [0] if dim == 1 else range(x.ndim - dim, x.ndim):
            sl = [slice(None)] * x.ndim
            sl[ax] = slice(0, border)
            x[tuple(sl)] = np.nan
            sl[ax] = slice(shape[ax] - 1, shape[ax])
            x[tuple(sl)] = np.nan
    if holes:
        x[rng.random(shape) < holes] = np.nan
    return x


def check(x, dim, tol=1e-6, **kw):
    res = skyconv.atrous_denoise(x, dim=dim, device="cpu", **kw)
    ref, iters = duchamp(x, dim, **{k: v for k, v in _ref_kw(kw).items()})
    assert rel_err(res.data, ref) <= tol, rel_err(res.data, ref)
    np.testing.assert_array_equal(np.asarray(res.iterations), iters)
    bad = ~np.isfinite(x)
    np.testing.assert_array_equal(res.data[bad], x[bad])
    return res, ref


def _ref_kw(kw):
    names = {
        "filter": "filt",
        "snr_recon": "snr",
        "scale_min": "smin",
        "scale_max": "smax",
        "convergence": "conv",
        "blank_value": "blank",
    }
    return {names[k]: v for k, v in kw.items() if k in names}


@pytest.mark.parametrize("filt", ["b3spline", "triangle", "haar"])
@pytest.mark.parametrize(
    "shape,dim,border,holes",
    [
        ((65,), 1, 0, 0.0),
        ((67, 3), 1, 3, 0.05),
        ((35, 41), 2, 0, 0.0),
        ((37, 45), 2, 2, 0.0),
        ((2, 33, 29), 2, 1, 0.04),
        ((19, 23, 17), 3, 0, 0.0),
        ((21, 19, 17), 3, 2, 0.03),
    ],
)
def test_default_is_duchamp(rng, shape, dim, border, holes, filt):
    x = sky(rng, shape, dim, border, holes)
    res, _ = check(x, dim, filter=filt)
    assert res.scales == n_scales(shape[0] if dim == 1 else min(shape[-dim:]), filt)


@pytest.mark.parametrize(
    "kw",
    [
        {"snr_recon": 2.5, "scale_min": 2},
        {"scale_max": 2},  # ignored by DUCHAMP's 2-D reconstruction
        {"convergence": 0.05},  # ditto: 2-D stops on 0.005
        {"blank_value": 3.5},
        {"scale_min": 9},  # nothing thresholded: 2-D blanks hold the BLANK value throughout
    ],
)
@pytest.mark.parametrize("shape,dim", [((41, 3), 1), ((2, 37, 31), 2), ((17, 19, 21), 3)])
def test_options_follow_duchamp(rng, shape, dim, kw):
    x = sky(rng, shape, dim, border=2, holes=0.03)
    check(x, dim, **kw)


def test_float32_follows_duchamp(rng):
    x = sky(rng, (2, 29, 33), 2, border=1, holes=0.03).astype(np.float32)
    res = skyconv.atrous_denoise(x, dim=2, device="cpu")
    ref, _ = duchamp(x, 2)
    assert res.data.dtype == np.float32
    assert rel_err(res.data, ref) <= 1e-5


def test_2d_differs_from_corrected(rng):
    """The duchamp and corrected 2-D reconstructions differ (so the tests above can fail)."""
    x = sky(rng, (45, 39), 2, border=2)
    d = skyconv.atrous_denoise(x, dim=2, device="cpu")
    c = skyconv.atrous_denoise(x, dim=2, device="cpu", variant="corrected")
    assert rel_err(d.data, c.data) > 1e-2
    ref, _ = duchamp(x, 2)
    assert rel_err(c.data, ref) > 1e-2


@pytest.mark.parametrize("dim", [1, 3])
def test_1d_3d_variants_agree_without_table_quirks(rng, dim):
    """In 1-D and 3-D the variants differ only in noise factors past the sizes used here."""
    x = sky(rng, (23, 19, 21), dim, border=1, holes=0.02)
    d = skyconv.atrous_denoise(x, dim=dim, device="cpu")
    c = skyconv.atrous_denoise(x, dim=dim, device="cpu", variant="corrected")
    np.testing.assert_array_equal(d.data, c.data)


def test_noise_factor_tables():
    """DUCHAMP's table quirks, read back through atrous_scales (shapes are not run)."""
    big = 2**19 + 1  # triangle: 19 scales in 1-D
    _, f = atrous_scales((big,), dim=1, filter="triangle")
    assert f[18] == 1.12763724e-4
    assert abs(f[19] - 1.12763724e-4 / math.sqrt(2)) <= 1e-18
    _, f = atrous_scales((big,), dim=1, filter="triangle", variant="corrected")
    assert f[18] == 1.12763724e-3
    _, f = atrous_scales((2**14 + 1, 2**14 + 1), dim=2, filter="triangle")
    assert f[11] == 4.45738098e-4 and f[12] == 0.0 and f[13] == 0.0 and f[14] == 0.0
    _, f = atrous_scales((2**14 + 1, 2**14 + 1), dim=2, filter="triangle", variant="corrected")
    assert f[12] == 2.22868922e-4 and f[13] == 2.22868922e-4 / 2
    n, f = atrous_scales((4097, 4097), dim=2)
    assert n == 11 and f[11] == 3.18194170e-4


def test_bad_variant_and_blank_value(rng):
    x = sky(rng, (21, 21), 2)
    with pytest.raises(ValueError, match="variant"):
        skyconv.atrous_denoise(x, dim=2, variant="exact")
    with pytest.raises(ValueError, match="blank_value"):
        skyconv.atrous_denoise(x, dim=2, blank_value=float("nan"))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["duchamp", "corrected"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape,dim", [((67, 5, 4), 1), ((37, 45), 2), ((3, 33, 29), 2), ((19, 23, 17), 3)]
)
@pytest.mark.parametrize("filt", ["b3spline", "triangle", "haar"])
def test_gpu_equals_cpu_both_variants(rng, shape, dim, dtype, variant, filt):
    x = sky(rng, shape, dim, border=2, holes=0.03).astype(dtype)
    cpu = skyconv.atrous_denoise(x, dim=dim, filter=filt, device="cpu", variant=variant)
    gpu = skyconv.atrous_denoise(x, dim=dim, filter=filt, device="cuda", variant=variant)
    assert gpu.device == "cuda" and gpu.data.dtype == x.dtype
    # as test_atrous.py's GPU test: float32 rounding may move a unit's stop by one iteration
    assert rel_err(gpu.data, cpu.data) <= 1e-5
    steps = np.abs(np.asarray(gpu.iterations) - np.asarray(cpu.iterations))
    assert np.max(steps) <= (0 if dtype == np.float64 else 1)
    bad = ~np.isfinite(x)
    np.testing.assert_array_equal(np.isnan(gpu.data), bad)


@pytest.mark.gpu
def test_gpu_duchamp_2d_chunked_equals_cpu(rng, monkeypatch):
    """dim=2 over the memory budget runs in chunks of maps; the BLANK-value quirk survives."""
    x = sky(rng, (7, 33, 35), 2, border=2, holes=0.03).astype(np.float32)
    cpu = skyconv.atrous_denoise(x, dim=2, device="cpu")
    full = skyconv.atrous_denoise(x, dim=2, device="cuda")
    # As in test_atrous.py: this limit fits two maps at a time (chunks of 2, 2, 2, 1).
    per_map = 5 * 33 * 35 * 4 + 64 + (16 << 20)
    monkeypatch.setenv("SKYCONV_GPU_MEMORY_LIMIT", str(per_map + 2 * 5 * 33 * 35 * 4))
    chunked = skyconv.atrous_denoise(x, dim=2, device="cuda")
    np.testing.assert_array_equal(chunked.data, full.data)
    assert rel_err(full.data, cpu.data) <= 1e-5
    assert np.max(np.abs(np.asarray(full.iterations) - cpu.iterations)) <= 1


def propagated_noise(filt: str, dim: int, s: int) -> float:
    """rms of scale s's wavelet coefficients for white noise of unit rms, by propagating it
    through the filters: w_s = (H_{s-1} - H_s) x with H_s the product of the dilated filters of
    scales 1..s, separable, so sum(g^2) = A^d - 2 C^d + B^d with the 1-D responses a, b."""

    def response(k):
        h, origin = np.array([1.0]), 0
        for j in range(1, k + 1):
            step = 2 ** (j - 1)
            d = np.zeros((len(WEIGHTS[filt]) - 1) * step + 1)
            d[::step] = WEIGHTS[filt]
            h, origin = np.convolve(h, d), origin - (len(WEIGHTS[filt]) // 2) * step
        return h, origin

    (a, oa), (b, ob) = response(s - 1), response(s)
    lo, hi = min(oa, ob), max(oa + len(a), ob + len(b))
    pa, pb = np.zeros(hi - lo), np.zeros(hi - lo)
    pa[oa - lo : oa - lo + len(a)] = a
    pb[ob - lo : ob - lo + len(b)] = b
    big_a, big_b, big_c = pa @ pa, pb @ pb, pa @ pb
    return math.sqrt(big_a**dim - 2 * big_c**dim + big_b**dim)


# Entries of DUCHAMP's tables that are not the propagated noise (kept in both variants):
# B3 2-D scale 4 is 7.3e-4 high, Haar 1-D scale 1 is 8.6e-5 high, and every Haar 2-D entry is
# half of it.
TABLE_SLIPS = {("b3spline", 2, 4): 7.3e-4, ("haar", 1, 1): 8.6e-5}
# Scales DUCHAMP tabulates (past them it divides by sqrt(2), 2, sqrt(8) per scale).
TABULATED = {
    "b3spline": {1: 18, 2: 11, 3: 7},
    "triangle": {1: 18, 2: 12, 3: 8},
    "haar": {1: 6, 2: 6, 3: 8},
}


@pytest.mark.parametrize("filt", ["b3spline", "triangle", "haar"])
@pytest.mark.parametrize("dim", [1, 2, 3])
def test_noise_factors_are_the_propagated_noise(filt, dim):
    """DUCHAMP's tables are the filters' propagated noise (to 3e-8, but for the slips listed
    above); its extrapolation past them is within 6e-7 in 1-D and 2-D and 2.1e-4 in 3-D."""
    top = {1: 14, 2: 13, 3: 10}[dim]
    n, f = atrous_scales((2**top + 1,) * dim, dim=dim, filter=filt, variant="corrected")
    for s in range(1, n + 1):
        want = propagated_noise(filt, dim, s)
        if filt == "haar" and dim == 2:
            want /= 2
        dev = f[s] / want - 1
        if s <= TABULATED[filt][dim]:
            slip = TABLE_SLIPS.get((filt, dim, s), 0.0)
            assert abs(dev - slip) <= (1e-5 if slip else 3e-8), (s, dev)
        else:
            assert abs(dev) <= (6e-7 if dim < 3 else 2.2e-4), (s, dev)


def duchamp_float32(x, dim, filt="b3spline", snr=4.0, blank=DUCHAMP_BLANK):
    """duchamp_unit with DUCHAMP's arithmetic: float32 arrays (data, coefficients, output,
    medians, sigma, threshold), each filter tap subtracted in double and rounded to float32,
    the noise factors in double; robust statistics, snrRecon as a float32."""
    f32 = np.float32
    x = np.asarray(x, dtype=np.float32)
    good = np.isfinite(x)
    xin = np.where(good, x, f32(blank))  # DUCHAMP's array holds the BLANK value
    n = n_scales(min(x.shape), filt)
    loop = n - 1 if dim == 2 else n
    w1 = WEIGHTS[filt]
    hw = len(w1) // 2

    def mad(v):
        v = np.sort(v.astype(np.float32))
        m = len(v)
        med = v[m // 2] if m % 2 else f32((np.float64(v[m // 2 - 1]) + v[m // 2]) / 2)
        d = np.sort(np.abs(v - med).astype(np.float32))
        md = d[m // 2] if m % 2 else f32((np.float64(d[m // 2 - 1]) + d[m // 2]) / 2)
        return med, f32(md / 0.6744888)

    _, s0 = mad(xin[good])
    out = np.zeros_like(xin)
    old, it = f32(1e9), 0
    while True:
        it += 1
        c = (xin - out).astype(np.float32)
        for s in range(1, loop + 1):
            step = 2 ** (s - 1)
            wav = c.copy()
            for offs in itertools.product(range(len(w1)), repeat=c.ndim):
                weight = np.prod([w1[o] for o in offs])
                idx = [
                    np.array([reflect(j + (o - hw) * step, m) for j in range(m)])
                    for o, m in zip(offs, c.shape)
                ]
                tap = c[np.ix_(*idx)].astype(np.float64)
                if dim != 2:
                    tap = np.where(good[np.ix_(*idx)], tap, 0.0)
                wav = (wav.astype(np.float64) - weight * tap).astype(np.float32)
            wav = np.where(good, wav, f32(0))
            c = (c - wav).astype(np.float32)
            v = np.sort(wav[good])
            m = len(v)
            med = v[m // 2] if m % 2 else f32((np.float64(v[m // 2 - 1]) + v[m // 2]) / 2)
            thr = f32(
                np.float64(med) + np.float64(f32(snr)) * np.float64(s0) * factor(filt, dim, s)
            )
            out = np.where(
                ~good, xin, np.where(np.abs(wav) > thr, (out + wav).astype(np.float32), out)
            )
        out = np.where(good, (out + c).astype(np.float32), out)
        _, new = mad((xin - out)[good])
        rel = abs(np.float64(old) - new) / np.float64(new)
        if not (rel > 0.005) or it >= 100:  # conv: only the default 0.005 here
            break
        old = new
    return np.where(good, out, x), it


@pytest.mark.parametrize(
    "shape,dim,border,holes", [((45, 51), 2, 0, 0.0), ((45, 51), 2, 2, 0.03), ((67,), 1, 0, 0.0)]
)
def test_within_1e6_of_duchamps_float32_arithmetic(rng, shape, dim, border, holes):
    """DUCHAMP computes in float32; skyconv (float64 sums) stays within 1e-6 of that, with the
    same iteration count (measured: 6e-8 to 4e-7, also for 3-D)."""
    x = sky(rng, shape, dim, border, holes).astype(np.float32)
    want, iters = duchamp_float32(x, dim)
    res = skyconv.atrous_denoise(x, dim=dim, device="cpu")
    assert rel_err(res.data, want) <= 1e-6
    assert res.iterations == iters
