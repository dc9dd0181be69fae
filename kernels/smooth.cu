// The ring method of skyconv.smooth on the GPU (src/smooth/mod.rs has the maths,
// src/smooth/cuda/mod.rs the launch order). Between these kernels the host runs the ring FFTs
// (cuFFT for the belt, the shared Bluestein transform for the polar rings):
//   smooth_phase        the input spectra times the ring weight factor and e^{-i m phi0} (after
//                       the forward FFTs)
//   smooth_kernel_eval  kernel-ring samples of every (output pair, input ring) of a chunk, already
//                       weighted for the cosine sum (1 for self-mirrored points, else 2)
//   smooth_products     per output pair and output bin k: the cosine spectra C_ij(m) by direct
//                       sums over the samples, times the input spectra, summed over the input
//                       rings, phased, folded modulo n_i into bin k and scaled; north and south
//
// Layouts (complex = two doubles): the spectrum of ring r (n_r/2 + 1 bins) starts at complex
// offset first[r] of spec_in / spec_out (the ring's first pixel; rings never overlap there).
// Pairs: SM_PAIR i64 per pair (ring, mirror, lo, hi, L, first support entry); the support entries
// of a pair are its input rings lo..=hi in order. Entry e: taps at tap_off[e] - tap0 of the chunk's
// sample buffer, tap_n[e] samples, flags (1: half-sample grid, 2: covers the whole ring), and
// ab[2e], ab[2e+1] = a, b (u^2 = a + b sin^2(y/2)).

#define SM_PAIR 6
#define SM_HALF 1
#define SM_FULL 2
// Samples between exact restarts of the cosine recurrence (its error grows with the steps).
#define SM_ANCHOR 64

// K at u^2 = sin^2(gamma/2): the cubic of the u interval (src/smooth/profile.rs Table::eval_u2).
__device__ __forceinline__ double sm_eval_u2(const double* coef, i64 ncoef, double inv_h,
                                             double u2_cut, double u2) {
    if (u2 > u2_cut) return 0.0;
    const double q = sqrt(u2) * inv_h;
    i64 k = (i64)q;
    if (k > ncoef - 1) k = ncoef - 1;
    const double t = q - (double)k;
    const double* c = coef + 4 * k;
    return c[0] + t * (c[1] + t * (c[2] + t * c[3]));
}

// A warp per support entry, lanes over its samples: g_k = w_k K(a + b sin^2(y_k/2)),
// y_k = (k + o) 2 pi / L. grid: entries / (blockDim / 32) blocks.
extern "C" __global__ void smooth_kernel_eval(const i64* tap_off, const int* tap_n,
                                              const int* flags, const int* len, const double* ab,
                                              i64 e0, i64 e1, i64 tap0, const double* coef,
                                              i64 ncoef, double inv_h, double u2_cut,
                                              double* taps) {
    const i64 e = e0 + (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (e >= e1) return;
    const int lane = threadIdx.x % 32;
    const int n = tap_n[e];
    const int half = flags[e] & SM_HALF;
    const int full = flags[e] & SM_FULL;
    const i64 L = len[e];
    const double a = ab[2 * e], b = ab[2 * e + 1];
    double* g = taps + (tap_off[e] - tap0);
    for (int k = lane; k < n; k += 32) {
        const double s = sin(3.141592653589793 * (double)(2 * k + half) / (double)(2 * L));
        const double v = sm_eval_u2(coef, ncoef, inv_h, u2_cut, a + b * s * s);
        // y = 0 and (whole ring, integer grid) y = pi are their own mirror images.
        const bool single = !half && (k == 0 || (full && 2 * (i64)k == L));
        g[k] = single ? v : 2.0 * v;
    }
}

// cos(pi * num / L) for num reduced modulo 2L (exact argument).
__device__ __forceinline__ double sm_cos_frac(i64 num, i64 L) {
    return cospi((double)(num % (2 * L)) / (double)L);
}

// C(m) = sum_k g_k cos((k + o) theta), theta = 2 pi m / L, o = half / 2, by the Chebyshev
// recurrence restarted exactly every SM_ANCHOR samples. c1 = cos theta, ch = cos(theta / 2).
__device__ __forceinline__ double sm_cosine_sum(const double* g, int n, int half, i64 m, i64 L,
                                                double c1, double ch) {
    const double x2 = 2.0 * c1;
    double acc = 0.0;
    for (int k0 = 0; k0 < n; k0 += SM_ANCHOR) {
        double cur, prev;
        if (k0 == 0) {
            cur = half ? ch : 1.0;
            prev = half ? ch : c1;  // cos(-theta/2), cos(-theta)
        } else {
            cur = sm_cos_frac(m * (2 * (i64)k0 + half), L);
            prev = sm_cos_frac(m * (2 * (i64)k0 - 2 + half), L);
        }
        const int k1 = min(n, k0 + SM_ANCHOR);
        for (int k = k0; k < k1; ++k) {
            acc += g[k] * cur;
            const double nx = x2 * cur - prev;
            prev = cur;
            cur = nx;
        }
    }
    return acc;
}

// R~_j(m) = e^{-i m phi0_j} R_j(m mod n_j) from the stored bins 0..n_j/2 (already phased):
// periodic, or anti-periodic for rings with phi0 != 0, and R~(p) = s conj R~(n_j - p) above
// n_j / 2 (s = -1 for those rings).
__device__ __forceinline__ void sm_fetch(const double* spec, i64 first, i64 n, int shifted,
                                         i64 m, double& re, double& im) {
    i64 q = 0, p = m;
    if (m >= n) {
        q = m / n;
        p = m - q * n;
    }
    double sign = (shifted && (q & 1)) ? -1.0 : 1.0;
    if (2 * p <= n) {
        re = spec[2 * (first + p)];
        im = spec[2 * (first + p) + 1];
    } else {
        re = spec[2 * (first + n - p)];
        im = -spec[2 * (first + n - p) + 1];
        if (shifted) sign = -sign;
    }
    re *= sign;
    im *= sign;
}

// T(m) of the pair's outputs: north (and south, or for the equator both mirrors into north).
__device__ __forceinline__ void sm_accumulate(const i64* pr, const int* tap_n, const int* flags,
                                              const i64* tap_off, i64 tap0, const double* taps,
                                              const i64* first, const int* nphi,
                                              const int* shifted, i64 nrings,
                                              const double* spec, i64 m, double* tn,
                                              double* ts) {
    const i64 lo = pr[2], hi = pr[3], L = pr[4], s0 = pr[5];
    const bool eq = pr[0] == pr[1];
    const double c1 = sm_cos_frac(2 * m, L);
    const double ch = sm_cos_frac(m, L);
    tn[0] = tn[1] = ts[0] = ts[1] = 0.0;
    for (i64 j = lo; j <= hi; ++j) {
        const i64 e = s0 + (j - lo);
        const int n = tap_n[e];
        if (n == 0) continue;
        const double c = sm_cosine_sum(taps + (tap_off[e] - tap0), n, flags[e] & SM_HALF, m, L,
                                       c1, ch);
        double re, im;
        sm_fetch(spec, first[j], nphi[j], shifted[j], m, re, im);
        tn[0] += c * re;
        tn[1] += c * im;
        const i64 jm = nrings - 1 - j;
        if (eq && jm == j) continue;
        sm_fetch(spec, first[jm], nphi[jm], shifted[jm], m, re, im);
        double* t = eq ? tn : ts;
        t[0] += c * re;
        t[1] += c * im;
    }
}

// acc += w e^{i m phi0} t (conjugated when `conj`; both when `both`), phi0 = pi / n for
// shifted rings.
__device__ __forceinline__ void sm_add_bin(double* acc, const double* t, i64 m, i64 n,
                                           int shifted, double w, bool conj, bool both) {
    double re = t[0], im = t[1];
    if (shifted) {
        double s, c;
        sincospi((double)(m % (2 * n)) / (double)n, &s, &c);
        const double r = re * c - im * s;
        im = re * s + im * c;
        re = r;
    }
    re *= w;
    im *= w;
    if (both) {
        acc[0] += 2.0 * re;
    } else {
        acc[0] += re;
        acc[1] += conj ? -im : im;
    }
}

// One thread per (output pair, output bin k <= n_i / 2): S(k) = sum over the m in [0, L/2] with
// m = k mod n_i of e^{i m phi0} T(m), plus the conjugates of those with m = -k mod n_i (the fold
// of src/smooth/cpu.rs; the m = L/2 bin counts half), scaled. grid: one block per tile.
extern "C" __global__ void smooth_products(const int* tile_pair, const int* tile_k0,
                                           const i64* pairs, const double* pair_scale,
                                           const int* tap_n, const int* flags,
                                           const i64* tap_off, i64 tap0, const double* taps,
                                           const i64* first, const int* nphi,
                                           const int* shifted, i64 nrings,
                                           const double* spec_in, double* spec_out) {
    const i64 pi = tile_pair[blockIdx.x];
    const i64 k = (i64)tile_k0[blockIdx.x] + threadIdx.x;
    const i64* pr = pairs + SM_PAIR * pi;
    const i64 ring = pr[0], mirror = pr[1], L = pr[4];
    const i64 n = nphi[ring], hn = n / 2, N = L / 2;
    if (k > hn) return;
    const int sh = shifted[ring];
    const bool eq = ring == mirror;
    double an[2] = {0.0, 0.0}, as[2] = {0.0, 0.0};
    double tn[2], ts[2];
    // Bins 0 and n/2 are their own conjugate partners: each m adds t + conj t (m = 0 once).
    const bool self = k == 0 || k == hn;
    for (int pass = 0; pass < (self ? 1 : 2); ++pass) {
        for (i64 m = pass == 0 ? k : n - k; m <= N; m += n) {
            sm_accumulate(pr, tap_n, flags, tap_off, tap0, taps, first, nphi, shifted, nrings,
                          spec_in, m, tn, ts);
            const double w = m == N ? 0.5 : 1.0;
            const bool both = self && m != 0;
            sm_add_bin(an, tn, m, n, sh, w, pass == 1, both);
            if (!eq) sm_add_bin(as, ts, m, n, sh, w, pass == 1, both);
        }
    }
    const double scale = pair_scale[pi];
    if (self) an[1] = as[1] = 0.0;
    double* o = spec_out + 2 * (first[ring] + k);
    o[0] = an[0] * scale;
    o[1] = an[1] * scale;
    if (!eq) {
        o = spec_out + 2 * (first[mirror] + k);
        o[0] = as[0] * scale;
        o[1] = as[1] * scale;
    }
}

// The input spectra phased in place: R~_r(k) = e^{-i pi k / n_r} R_r(k) on rings with
// phi0 != 0, for the ring and mirror of each tile's pair (the tiles of smooth_products cover
// every ring's bins). grid: one block per tile.
extern "C" __global__ void smooth_phase(const int* tile_pair, const int* tile_k0,
                                        const i64* pairs, const i64* first, const int* nphi,
                                        const int* shifted, const double* factor,
                                        double* spec) {
    const i64* pr = pairs + SM_PAIR * (i64)tile_pair[blockIdx.x];
    const i64 k = (i64)tile_k0[blockIdx.x] + threadIdx.x;
    for (int side = 0; side < (pr[0] == pr[1] ? 1 : 2); ++side) {
        const i64 r = pr[side];
        const i64 n = nphi[r];
        if (k > n / 2) continue;
        // the FFT is linear: weighting the spectrum weights the ring
        double s = 0.0, c = 1.0;
        if (shifted[r]) sincospi(-(double)k / (double)n, &s, &c);
        s *= factor[r];
        c *= factor[r];
        double* v = spec + 2 * (first[r] + k);
        const double re = v[0] * c - v[1] * s;
        v[1] = v[0] * s + v[1] * c;
        v[0] = re;
    }
}

// Masked (normalised) smoothing, before and after the convolution of the two maps (m w, w)
// (src/smooth/masked.rs has the host version; both must give the same bits):
//   smooth_mask_prep    w = mask (1 when has_mask == 0), 0 where m is missing (healpy's UNSEEN
//                       test or not finite); m -> m w in place (0 w where w is not > 0); sets
//                       *bad = 1 when a mask value is not in [0, 1] (NaN included): the
//                       argument check, so that the host never scans the mask
//   smooth_mask_divide  num / den where den > 0 and den >= thr, else UNSEEN, into out (which
//                       may be num itself)
// grid-stride loops over n pixels.
__device__ __forceinline__ bool sm_missing(double x) {
    return !isfinite(x) || fabs(x - (-1.6375e30)) <= 1e-8 + 1e-5 * 1.6375e30;
}

extern "C" __global__ void smooth_mask_prep(double* m, double* w, int has_mask, i64 n, int* bad) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const double x = m[i];
        double wi = 1.0;
        if (has_mask) {
            wi = w[i];
            if (!(wi >= 0.0 && wi <= 1.0)) *bad = 1;
        }
        if (sm_missing(x)) wi = 0.0;
        w[i] = wi;
        m[i] = wi > 0.0 ? x * wi : 0.0 * wi;
    }
}

extern "C" __global__ void smooth_mask_divide(const double* num, const double* den, double thr, i64 n,
                                              double* out) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const double d = den[i];
        out[i] = (d > 0.0 && d >= thr) ? num[i] / d : -1.6375e30;
    }
}
