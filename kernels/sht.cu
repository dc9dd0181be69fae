// Spherical harmonic transforms on the HEALPix RING grid (see src/sht/legendre.rs for the
// maths, which this mirrors in float64):
//   leg_synth_*  alm -> ring Fourier coefficients F_m(ring) (Legendre stage of alm2map)
//   fold         F_m -> half spectrum of each ring (aliasing m > nphi/2, phase shift phi0)
//   scatter      ring rows -> map pixels;   gather: map pixels -> ring rows
//   unfold       half spectrum -> weighted F_m(ring) (analysis)
//   leg_anal_*   F_m(ring) -> alm (Legendre stage of map2alm, adds into the alm)
//   sub_f64 / add_f64   Jacobi iteration helpers
// The ring FFTs between fold/scatter and gather/unfold are cuFFT calls made by the host.
//
// A chunk holds `np` ring pairs starting at pair p0 (pair p = northern ring p, 0-based, and its
// southern mirror 4*nside-2-p; the equator pair has no southern ring). Its rows are
// row = 2*(p - p0) + south. Buffers per component c (up to 3 per launch):
//   phase[c][row][m]  complex (interleaved), (mmax+1) per row
//   spec[row][c][k]   complex half spectrum, H = 2*nside+1 per row
//   rows[row][c][j]   real ring values, 4*nside per row
// (spec and rows keep the components of a row together, so that one batched cuFFT call covers
// a ring pair, or all equatorial rings, for every component; gridDim.z is the component count)
// Components are passed as separate pointers (a0, a1, a2 / m0, m1, m2).
//
// The Legendre kernels work on a list of m (mlist[col], col = the phase column, ncol columns
// per row) whose a_{m m} sits at moff[col] in the alm arrays (the full transform passes
// 0..mmax and healpy's offsets; the SHT halves any m subset, packed m by m). The ring kernels
// (fold, scatter, gather, unfold) either derive each row's ring from the pair layout above
// (direct = 0) or, with direct != 0, take row p0 + row itself as the index into their per-row
// tables (the halves: any list of rings, one row each). All pixel and alm offsets are 64-bit
// (a pixel index passes 2^31 at nside 16384; a ring has up to 2^31 pixels at nside 2^29).

#define SHT_BIG 0x1p400
#define SHT_SMALL 0x1p-400
#define SHT_UP 0x1p800
#define SHT_DOWN 0x1p-800
#define SHT_LT 16  // l values per shared-memory tile (even)

// healpy's spin-2 signs (src/sht/legendre.rs SQ1, SQ2, SU1, SU2)
#define SQ1 (-1.0)
#define SQ2 (-1.0)
#define SU1 (-1.0)
#define SU2 (1.0)

struct cplx {
    double re, im;
};

// Bring v into [2^-400, 2^400] so that a product of two such values cannot overflow.
__device__ __forceinline__ void renorm(double& v, int& k) {
    while (v != 0.0 && fabs(v) < SHT_SMALL) {
        v *= SHT_UP;
        k += 1;
    }
    while (fabs(v) > SHT_BIG && isfinite(v)) {
        v *= SHT_DOWN;
        k -= 1;
    }
}

// Start value lambda_mm(theta) as v * 2^(-800 k), or 0 when lambda_lm is negligible for every
// l <= lmax (bound: log2 |lambda_mm| + log2 growth < -400).
__device__ void start_value(double s, int m, double norm, double log2_bound, double& v, int& k) {
    double rv = 1.0, bv = s;
    int rk = 0, bk = 0;
    renorm(bv, bk);
    int e = m;
    while (e > 0) {
        if (e & 1) {
            rv *= bv;
            rk += bk;
            renorm(rv, rk);
        }
        e >>= 1;
        if (e > 0) {
            bv *= bv;
            bk *= 2;
            renorm(bv, bk);
        }
    }
    rv *= norm;
    if (rv == 0.0) {
        v = 0.0;
        k = 0;
        return;
    }
    double l2 = log2(fabs(rv)) - 800.0 * rk;
    if (l2 + log2_bound < -400.0) {
        v = 0.0;
        k = 0;
        return;
    }
    renorm(rv, rk);
    v = rv;
    k = rk;
}

__device__ __forceinline__ double log2_growth_bound(int m, int lmax, const double* lnfact) {
    double lnb = log((2.0 * lmax + 1.0) / (2.0 * m + 1.0)) + lnfact[lmax + m] - lnfact[lmax - m] -
                 lnfact[2 * m];
    return 0.5 * lnb / 0.69314718055994530942;
}

// One step of the l-recurrence: (l0, l1) <- (l1, A x l1 - C l0); returns the new value.
__device__ __forceinline__ double leg_step(double A, double C, double x, double& l0, double& l1) {
    const double l2 = A * x * l1 - C * l0;
    l0 = l1;
    l1 = l2;
    return l2;
}

// Recurrence and spin-2 coefficients of degree l for order m (zeros beyond lmax).
struct Coef {
    double A, C, q1, q2, q3, q4, q5;
};

__device__ __forceinline__ Coef coef_of(int l, int m, int lmax, bool pol) {
    Coef c = {0, 0, 0, 0, 0, 0, 0};
    if (l > lmax) return c;
    const double lf = l, mf = m;
    const double lm2 = (double)(l - m) * (double)(l + m);
    if (l == m + 1) {
        c.A = sqrt(2.0 * mf + 3.0);
    } else if (l > m + 1) {
        const double l1m2 = (double)(l - 1 - m) * (double)(l - 1 + m);
        const double a2 = (4.0 * lf * lf - 1.0) / lm2;
        c.A = sqrt(a2);
        c.C = sqrt(a2 * l1m2 / (4.0 * (lf - 1.0) * (lf - 1.0) - 1.0));
    }
    if (pol && l >= 2) {
        const double nl = 2.0 / sqrt((lf - 1.0) * lf * (lf + 1.0) * (lf + 2.0));
        const double fl = sqrt((2.0 * lf + 1.0) / (2.0 * lf - 1.0) * lm2);
        c.q1 = nl * (lf - mf * mf);
        c.q2 = nl * lf * (lf - 1.0) * 0.5;
        c.q3 = nl * fl;
        c.q4 = nl * mf * (lf - 1.0);
        c.q5 = nl * mf * fl;
    }
    return c;
}

__device__ __forceinline__ const double* pick(const double* a0, const double* a1,
                                              const double* a2, int c) {
    return c == 0 ? a0 : (c == 1 ? a1 : a2);
}
__device__ __forceinline__ double* pickm(double* a0, double* a1, double* a2, int c) {
    return c == 0 ? a0 : (c == 1 ? a1 : a2);
}

// ------------------------------------------------------------------------------------------
// Legendre blocks: LEG_TPB threads (TPB_LEG in src/sht/cuda/mod.rs). Both stages
// walk l in coefficient tiles of LEG_TPB values, one l per thread, so that the sqrt and
// division chains of a tile (and, for the synthesis, its alm loads) run once per LEG_TPB l on
// every warp at once; within a tile, sub-tiles of SHT_LT l check the fast path (no ring of the
// block still scaled) until it holds, after which it always does (k only falls). A tile of
// SHT_LT l computed and loaded by SHT_LT threads made the block wait on one warp's chains and
// on an alm load every SHT_LT l (session 11: 13 % of the synthesis at nside 4096).

#define LEG_TPB 128

// Coefficients of l = lc + threadIdx.x into the tile (zeros beyond lmax).
template <bool POL>
__device__ __forceinline__ void coef_tile(int lc, int m, int lmax, double* sA, double* sC,
                                          double (*sq)[LEG_TPB]) {
    const int t = threadIdx.x;
    const Coef c = coef_of(lc + t, m, lmax, POL);
    sA[t] = c.A;
    sC[t] = c.C;
    if (POL) {
        sq[0][t] = c.q1;
        sq[1][t] = c.q2;
        sq[2][t] = c.q3;
        sq[3][t] = c.q4;
        sq[4][t] = c.q5;
    }
}

// ------------------------------------------------------------------------------------------
// Synthesis Legendre stage. Block: one m (blockIdx.y); each thread runs the recurrence for R
// ring pairs (pl = base + r * LEG_TPB), so every coefficient and alm read from shared memory
// serves R rings and the R recurrences overlap. NS0 spin-0 components (alm a0.., phase planes
// 0..NS0-1), then if POL a spin-2 pair (E, B) -> (Q, U) in the next two. phase plane c is at
// phase + c * plane (plane = 2*np rows * (mmax+1) complex).

template <int NS0, bool POL, int R>
__device__ void leg_synth(const double* a0, const double* a1, const double* a2, i64 lmax_,
                          i64 mmax_, const double* norms, const double* lnfact,
                          const i64* mlist, const i64* moff, const double* pair_x,
                          const double* pair_s, i64 p0, i64 np, double* phase) {
    const int lmax = (int)lmax_;
    (void)mmax_;
    const i64 col = blockIdx.y, ncol = gridDim.y;
    const int m = (int)mlist[col];
    const i64 base = (i64)blockIdx.x * LEG_TPB * R + threadIdx.x;
    __shared__ double sA[LEG_TPB], sC[LEG_TPB];
    __shared__ double sq[POL ? 5 : 1][LEG_TPB];
    __shared__ double sa[3][2][LEG_TPB];

    const double lb = log2_growth_bound(m, lmax, lnfact);
    double x[R], is2[R], xis2[R], l0[R], l1[R];
    int k[R];
    bool any = false;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const i64 pl = base + (i64)r * LEG_TPB;
        double s = 1.0, v = 0.0;
        x[r] = 0.0;
        k[r] = 0;
        if (pl < np) {
            x[r] = pair_x[p0 + pl];
            s = pair_s[p0 + pl];
            start_value(s, m, norms[m], lb, v, k[r]);
        }
        is2[r] = 1.0 / (s * s);
        xis2[r] = x[r] * is2[r];
        l0[r] = 0.0;
        l1[r] = v;
        any |= v != 0.0;
    }

    double acc0[R][NS0 > 0 ? NS0 : 1][2][2];
    double acc2[R][POL ? 2 : 1][8];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int c = 0; c < NS0; ++c)
#pragma unroll
            for (int p = 0; p < 2; ++p) acc0[r][c][p][0] = acc0[r][c][p][1] = 0.0;
        if (POL)
#pragma unroll
            for (int p = 0; p < 2; ++p)
#pragma unroll
                for (int i = 0; i < 8; ++i) acc2[r][p][i] = 0.0;
    }

    // index of a_{0 m}: a_lm is at mstart + l
    const i64 mstart = moff[col] - m;
    constexpr int ncomp = NS0 + (POL ? 2 : 0);
    if (__syncthreads_or(any)) {
        bool fast = false;
        for (int lc = m; lc <= lmax; lc += LEG_TPB) {
            __syncthreads();  // the previous tile's readers are done
            coef_tile<POL>(lc, m, lmax, sA, sC, sq);
            const int l = lc + threadIdx.x;
#pragma unroll
            for (int cc = 0; cc < ncomp; ++cc) {
                double re = 0.0, im = 0.0;
                if (l <= lmax) {
                    const double* a = pick(a0, a1, a2, cc) + 2 * (mstart + l);
                    re = a[0];
                    im = a[1];
                }
                sa[cc][0][threadIdx.x] = re;
                sa[cc][1][threadIdx.x] = im;
            }
            __syncthreads();
            const int lend = min(lc + LEG_TPB, lmax + 1);
            for (int lt = lc; lt < lend; lt += SHT_LT) {
                if (!fast) {
                    // once every ring of the block is in range and past l = m, the sub-tiles
                    // need no rescaling or range checks
                    bool scaled = lt == m;
#pragma unroll
                    for (int r = 0; r < R; ++r) scaled |= k[r] > 0;
                    fast = !__syncthreads_or(scaled);
                }
                const int j0 = lt - lc;
                if (fast && !POL) {
#pragma unroll
                    for (int i = 0; i < SHT_LT; ++i) {
                        const int j = j0 + i, par = i & 1;
                        const double A = sA[j], C = sC[j];
#pragma unroll
                        for (int r = 0; r < R; ++r) {
                            const double l2 = leg_step(A, C, x[r], l0[r], l1[r]);
#pragma unroll
                            for (int c = 0; c < NS0; ++c) {
                                acc0[r][c][par][0] = fma(sa[c][0][j], l2, acc0[r][c][par][0]);
                                acc0[r][c][par][1] = fma(sa[c][1][j], l2, acc0[r][c][par][1]);
                            }
                        }
                    }
                    continue;
                }
#pragma unroll
                for (int i = 0; i < SHT_LT; ++i) {
                    const int j = j0 + i, l = lt + i;
                    const int par = i & 1;  // lt - m is a multiple of SHT_LT (even)
                    const double A = sA[j], C = sC[j];
                    double ar[NS0 > 0 ? NS0 : 1], ai[NS0 > 0 ? NS0 : 1];
#pragma unroll
                    for (int c = 0; c < NS0; ++c) {
                        ar[c] = sa[c][0][j];
                        ai[c] = sa[c][1][j];
                    }
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        if (l > m) {
                            const double l2 = leg_step(A, C, x[r], l0[r], l1[r]);
                            if (k[r] > 0 && fabs(l2) > SHT_BIG) {
                                l0[r] *= SHT_DOWN;
                                l1[r] *= SHT_DOWN;
                                k[r] -= 1;
                            }
                        }
                        if (k[r] == 0) {
#pragma unroll
                            for (int c = 0; c < NS0; ++c) {
                                acc0[r][c][par][0] = fma(ar[c], l1[r], acc0[r][c][par][0]);
                                acc0[r][c][par][1] = fma(ai[c], l1[r], acc0[r][c][par][1]);
                            }
                            if (POL) {
                                const double* q1 = sq[0];
                                const double* q2 = sq[POL ? 1 : 0];
                                const double* q3 = sq[POL ? 2 : 0];
                                const double* q4 = sq[POL ? 3 : 0];
                                const double* q5 = sq[POL ? 4 : 0];
                                const double f1 = q3[j] * xis2[r] * l0[r] -
                                                  (q1[j] * is2[r] + q2[j]) * l1[r];
                                const double f2 = is2[r] * (q5[j] * l0[r] - q4[j] * x[r] * l1[r]);
                                const double er = sa[NS0][0][j], ei = sa[NS0][1][j];
                                const double br = sa[NS0 + 1][0][j], bi = sa[NS0 + 1][1][j];
                                double* q = acc2[r][POL ? par : 0];
                                q[0] = fma(er, f1, q[0]);
                                q[1] = fma(ei, f1, q[1]);
                                q[2] = fma(br, f2, q[2]);
                                q[3] = fma(bi, f2, q[3]);
                                q[4] = fma(br, f1, q[4]);
                                q[5] = fma(bi, f1, q[5]);
                                q[6] = fma(er, f2, q[6]);
                                q[7] = fma(ei, f2, q[7]);
                            }
                        }
                    }
                }
            }
        }
    }
    const i64 plane = 2 * np * ncol;
    auto put = [&](int c, i64 row, double re, double im) {
        double* d = phase + c * plane * 2 + 2 * (row * ncol + col);
        d[0] = re;
        d[1] = im;
    };
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const i64 pl = base + (i64)r * LEG_TPB;
        if (pl >= np) continue;
        const i64 row_n = 2 * pl, row_s = 2 * pl + 1;
#pragma unroll
        for (int c = 0; c < NS0; ++c) {
            const double(*q)[2] = acc0[r][c];
            put(c, row_n, q[0][0] + q[1][0], q[0][1] + q[1][1]);
            put(c, row_s, q[0][0] - q[1][0], q[0][1] - q[1][1]);
        }
        if (POL) {
            const double* e = acc2[r][0];
            const double* o = acc2[r][POL ? 1 : 0];
            // Q = SQ1 W + SQ2 i X, U = SU1 Y + SU2 i Z; i(a + ib) = -b + ia.
            // north: W = We + Wo, X = Xe + Xo; south: W = We - Wo, X = Xo - Xe.
            put(NS0, row_n, SQ1 * (e[0] + o[0]) - SQ2 * (e[3] + o[3]),
                SQ1 * (e[1] + o[1]) + SQ2 * (e[2] + o[2]));
            put(NS0, row_s, SQ1 * (e[0] - o[0]) - SQ2 * (o[3] - e[3]),
                SQ1 * (e[1] - o[1]) + SQ2 * (o[2] - e[2]));
            put(NS0 + 1, row_n, SU1 * (e[4] + o[4]) - SU2 * (e[7] + o[7]),
                SU1 * (e[5] + o[5]) + SU2 * (e[6] + o[6]));
            put(NS0 + 1, row_s, SU1 * (e[4] - o[4]) - SU2 * (o[7] - e[7]),
                SU1 * (e[5] - o[5]) + SU2 * (o[6] - e[6]));
        }
    }
}

// R (ring pairs per thread) must match `Group::synth_rings` in src/sht/cuda/setup.rs.
#define SYNTH_ENTRY(NAME, NS0, POL, R)                                                           \
    extern "C" __global__ void __launch_bounds__(LEG_TPB)                                      \
        NAME(const double* a0, const double* a1, const double* a2, i64 lmax, i64 mmax,         \
             const double* norms, const double* lnfact, const i64* mlist, const i64* moff,     \
             const double* pair_x, const double* pair_s, i64 p0, i64 np, double* phase) {      \
        leg_synth<NS0, POL, R>(a0, a1, a2, lmax, mmax, norms, lnfact, mlist, moff, pair_x,     \
                               pair_s, p0, np, phase);                                         \
    }

SYNTH_ENTRY(leg_synth_s1, 1, false, 4)
SYNTH_ENTRY(leg_synth_s2, 2, false, 2)
SYNTH_ENTRY(leg_synth_s3, 3, false, 2)
SYNTH_ENTRY(leg_synth_pol, 1, true, 2)
SYNTH_ENTRY(leg_synth_pol0, 0, true, 2)  // (E, B) alone: the spin-2 SHT halves

// ------------------------------------------------------------------------------------------
// Ring geometry of a chunk row: ring index (0-based) or -1 for the missing equator south ring.

__device__ __forceinline__ i64 row_ring(i64 row, i64 p0, i64 nside, i64 direct) {
    if (direct) return p0 + row;
    const i64 p = p0 + row / 2;
    if ((row & 1) == 0) return p;
    const i64 r = 4 * nside - 2 - p;
    return r == p ? -1 : r;
}

// Half spectrum of each row from its phase row: C[k] = sum over m = k (mod nphi) of
// F_m e^{i m phi0} plus, for m = -k (mod nphi), the conjugates. grid (k blocks, rows, comps).
extern "C" __global__ void fold(const double* phase, double* spec, i64 mmax, i64 nside, i64 p0,
                                i64 np, const i64* ring_nphi, const int* ring_shift, i64 direct) {
    const i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 row = blockIdx.y;
    const i64 c = blockIdx.z;
    const i64 nrow = direct ? np : 2 * np;
    const i64 H = 2 * nside + 1;
    const i64 ring = row_ring(row, p0, nside, direct);
    const i64 nphi = ring < 0 ? 4 * nside : ring_nphi[ring];
    if (k > nphi / 2) return;
    const int shift = ring < 0 ? 0 : ring_shift[ring];
    const double* F = phase + 2 * ((c * nrow + row) * (mmax + 1));
    double re = 0.0, im = 0.0;
    for (i64 m = k; m <= mmax; m += nphi) {
        if (m == 0) {
            re += F[0];
            continue;
        }
        double sn = 0.0, cs = 1.0;
        if (shift) sincospi((double)((m * shift) % (2 * nphi)) / (double)nphi, &sn, &cs);
        const double fr = F[2 * m], fi = F[2 * m + 1];
        re += fr * cs - fi * sn;
        im += fr * sn + fi * cs;
    }
    for (i64 m = (k == 0 ? nphi : nphi - k); m <= mmax; m += nphi) {
        double sn = 0.0, cs = 1.0;
        if (shift) sincospi((double)((m * shift) % (2 * nphi)) / (double)nphi, &sn, &cs);
        const double fr = F[2 * m], fi = F[2 * m + 1];
        re += fr * cs - fi * sn;
        im -= fr * sn + fi * cs;
    }
    if (k == 0 || 2 * k == nphi) im = 0.0;
    double* out = spec + 2 * ((row * gridDim.z + c) * H + k);
    out[0] = re;
    out[1] = im;
}

// rows -> map pixels. grid (j blocks, rows, comps).
extern "C" __global__ void scatter(const double* rows, double* m0, double* m1, double* m2,
                                   i64 nside, i64 p0, i64 np, const i64* ring_nphi,
                                   const i64* ring_first, i64 direct) {
    const i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 row = blockIdx.y;
    const int c = blockIdx.z;
    const i64 ring = row_ring(row, p0, nside, direct);
    if (ring < 0 || j >= ring_nphi[ring]) return;
    const i64 W = 4 * nside;
    pickm(m0, m1, m2, c)[ring_first[ring] + j] = rows[(row * gridDim.z + c) * W + j];
}

// map pixels -> rows. grid (j blocks, rows, comps).
extern "C" __global__ void gather(const double* m0, const double* m1, const double* m2,
                                  double* rows, i64 nside, i64 p0, i64 np, const i64* ring_nphi,
                                  const i64* ring_first, i64 direct) {
    const i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 row = blockIdx.y;
    const int c = blockIdx.z;
    const i64 ring = row_ring(row, p0, nside, direct);
    const i64 W = 4 * nside;
    if (j >= W) return;
    double v = 0.0;
    if (ring >= 0 && j < ring_nphi[ring]) v = pick(m0, m1, m2, c)[ring_first[ring] + j];
    rows[(row * gridDim.z + c) * W + j] = v;
}

// Half spectrum -> F_m = w e^{-i m phi0} R(m mod nphi) (conjugate for the upper half).
// grid (m blocks, rows, comps).
extern "C" __global__ void unfold(const double* spec, double* phase, i64 mmax, i64 nside, i64 p0,
                                  i64 np, const i64* ring_nphi, const int* ring_shift,
                                  const double* ring_w, i64 direct) {
    const i64 m = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 row = blockIdx.y;
    const i64 c = blockIdx.z;
    if (m > mmax) return;
    const i64 nrow = direct ? np : 2 * np;
    const i64 H = 2 * nside + 1;
    double* out = phase + 2 * ((c * nrow + row) * (mmax + 1) + m);
    const i64 ring = row_ring(row, p0, nside, direct);
    if (ring < 0) {
        out[0] = 0.0;
        out[1] = 0.0;
        return;
    }
    const i64 nphi = ring_nphi[ring];
    const i64 k = m % nphi;
    const double* S = spec + 2 * ((row * gridDim.z + c) * H);
    double re, im;
    if (k <= nphi / 2) {
        re = S[2 * k];
        im = S[2 * k + 1];
    } else {
        re = S[2 * (nphi - k)];
        im = -S[2 * (nphi - k) + 1];
    }
    double sn = 0.0, cs = 1.0;
    if (ring_shift[ring]) sincospi((double)((m * ring_shift[ring]) % (2 * nphi)) / (double)nphi, &sn, &cs);
    const double w = ring_w[ring];
    // (re + i im)(cs - i sn)
    out[0] = w * (re * cs + im * sn);
    out[1] = w * (im * cs - re * sn);
}

// ------------------------------------------------------------------------------------------
// Analysis Legendre stage. One block of LEG_TPB threads per m (blockIdx.x) looping over tiles
// of LEG_TPB * R ring pairs. Each thread sums its R rings' contributions per l and per value
// q (re/im of each component) into shared memory; every RL values of l the block sums those
// columns (8 threads per (l, q), strided so that the reads are free of bank conflicts, then 3
// shuffles) and adds them into the alm. Per l this costs a store and a load per value instead
// of a 5-level warp shuffle tree, which bounded the kernel. The column buffer is doubled, so a
// reduction needs one barrier (the next RL l write the other half), and the sum goes into the
// alm by an atomic add whose result nobody waits for: the block owns its column, so it is the
// plain a += sum, but no warp holds the next barrier on the alm's load (session 11: the two
// together 13 % of the analysis at nside 4096, the atomic add alone 8 %).

#define ANAL_PAD 8  // doubles of padding per column row: the 8-strided reads hit every bank

template <int NS0, bool POL, int R>
__device__ void leg_anal(const double* phase, double* a0, double* a1, double* a2, i64 lmax_,
                         i64 mmax_, const double* norms, const double* lnfact,
                         const i64* mlist, const i64* moff, const double* pair_x,
                         const double* pair_s, i64 p0, i64 np) {
    constexpr int NV = 2 * NS0 + (POL ? 4 : 0);
    const int lmax = (int)lmax_;
    (void)mmax_;
    const i64 col = blockIdx.x, ncol = gridDim.x;
    const int m = (int)mlist[col];
    constexpr int RL = NV <= 2 ? 8 : (NV <= 4 ? 4 : 2);  // l per reduction (two halves < 48 KB)
    constexpr int NSUM = RL * NV;                        // a multiple of 4: whole warps reduce
    __shared__ double sA[LEG_TPB], sC[LEG_TPB];
    __shared__ double sq[POL ? 5 : 1][LEG_TPB];
    __shared__ double sval[2][NSUM][LEG_TPB + ANAL_PAD];
    const i64 nrow = 2 * np;
    const i64 plane = nrow * ncol;
    const i64 mstart = moff[col] - m;
    const double lb = log2_growth_bound(m, lmax, lnfact);
    int half = 0;  // the half of sval the current RL l write

    // Sum sval[h] over the block and add it into the alm of l = l_first + sidx / NV.
    auto flush = [&](int l_first, int h) {
        __syncthreads();
        for (int u = threadIdx.x; u < NSUM * 8; u += LEG_TPB) {
            const int sidx = u / 8, c8 = u % 8;
            double sum = 0.0;
#pragma unroll
            for (int j = 0; j < LEG_TPB / 8; ++j) sum += sval[h][sidx][8 * j + c8];
#pragma unroll
            for (int o = 4; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            const int l = l_first + sidx / NV, q = sidx % NV;
            if (c8 != 0 || l > lmax) continue;
            const int comp = q / 2;
            double* a = pickm(a0, a1, a2, comp < NS0 ? comp : NS0 + (q - 2 * NS0) / 2);
            const int reim = (comp < NS0) ? (q & 1) : ((q - 2 * NS0) & 1);
            atomicAdd(a + 2 * (mstart + l) + reim, sum);
        }
    };

    for (i64 t0 = 0; t0 < np; t0 += (i64)LEG_TPB * R) {
        // per ring pair r of this thread: recurrence state and inputs
        // spin 0: in0[r][c][par][re/im] = north +- south; spin 2: in2[r][par][8] premultiplied
        double x[R], is2[R], xis2[R], l0[R], l1[R];
        int k[R];
        double in0[R][NS0 > 0 ? NS0 : 1][2][2];
        double in2[R][POL ? 2 : 1][8];
        bool any = false;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const i64 pl = t0 + (i64)r * LEG_TPB + threadIdx.x;
            double s = 1.0, v = 0.0;
            x[r] = 0.0;
            k[r] = 0;
#pragma unroll
            for (int c = 0; c < NS0; ++c)
#pragma unroll
                for (int p = 0; p < 2; ++p) in0[r][c][p][0] = in0[r][c][p][1] = 0.0;
            if (POL)
#pragma unroll
                for (int p = 0; p < 2; ++p)
#pragma unroll
                    for (int i = 0; i < 8; ++i) in2[r][p][i] = 0.0;
            if (pl < np) {
                x[r] = pair_x[p0 + pl];
                s = pair_s[p0 + pl];
                start_value(s, m, norms[m], lb, v, k[r]);
                const i64 rn = 2 * pl * ncol + col, rs = (2 * pl + 1) * ncol + col;
#pragma unroll
                for (int c = 0; c < NS0; ++c) {
                    const double* P = phase + 2 * c * plane;
                    const double nr = P[2 * rn], ni = P[2 * rn + 1];
                    const double sr = P[2 * rs], si = P[2 * rs + 1];
                    in0[r][c][0][0] = nr + sr;
                    in0[r][c][0][1] = ni + si;
                    in0[r][c][1][0] = nr - sr;
                    in0[r][c][1][1] = ni - si;
                }
                if (POL) {
                    const double* PQ = phase + 2 * NS0 * plane;
                    const double* PU = phase + 2 * (NS0 + 1) * plane;
                    const cplx qn = {PQ[2 * rn], PQ[2 * rn + 1]}, qs = {PQ[2 * rs], PQ[2 * rs + 1]};
                    const cplx un = {PU[2 * rn], PU[2 * rn + 1]}, us = {PU[2 * rs], PU[2 * rs + 1]};
                    const cplx qp = {qn.re + qs.re, qn.im + qs.im};
                    const cplx qm = {qn.re - qs.re, qn.im - qs.im};
                    const cplx up = {un.re + us.re, un.im + us.im};
                    const cplx um = {un.re - us.re, un.im - us.im};
#pragma unroll
                    for (int par = 0; par < 2; ++par) {
                        // even l-m: F1 pairs with (q+, u+), F2 with (q-, u-); odd: swapped
                        const cplx q1 = par ? qm : qp, u1 = par ? um : up;
                        const cplx q2 = par ? qp : qm, u2 = par ? up : um;
                        // E += SQ1 F1 q1 - i SU2 F2 u2 ; B += SU1 F1 u1 - i SQ2 F2 q2
                        double* d = in2[r][POL ? par : 0];
                        d[0] = SQ1 * q1.re;
                        d[1] = SU2 * u2.im;
                        d[2] = SQ1 * q1.im;
                        d[3] = -SU2 * u2.re;
                        d[4] = SU1 * u1.re;
                        d[5] = SQ2 * q2.im;
                        d[6] = SU1 * u1.im;
                        d[7] = -SQ2 * q2.re;
                    }
                }
            }
            is2[r] = 1.0 / (s * s);
            xis2[r] = x[r] * is2[r];
            l0[r] = 0.0;
            l1[r] = v;
            any |= v != 0.0;
        }
        if (!__syncthreads_or(any)) continue;
        bool fast = false;
        for (int lc = m; lc <= lmax; lc += LEG_TPB) {
            __syncthreads();  // the previous tile's readers are done
            coef_tile<POL>(lc, m, lmax, sA, sC, sq);
            __syncthreads();
            const int lend = min(lc + LEG_TPB, lmax + 1);
            for (int lt = lc; lt < lend; lt += SHT_LT) {
                if (!fast) {  // see leg_synth
                    bool scaled = lt == m;
#pragma unroll
                    for (int r = 0; r < R; ++r) scaled |= k[r] > 0;
                    fast = !__syncthreads_or(scaled);
                }
                const int j0 = lt - lc;
                if (fast && !POL) {
#pragma unroll
                    for (int i = 0; i < SHT_LT; ++i) {
                        const int par = i & 1;
                        const double A = sA[j0 + i], C = sC[j0 + i];
                        double val[NV];
#pragma unroll
                        for (int q = 0; q < NV; ++q) val[q] = 0.0;
#pragma unroll
                        for (int r = 0; r < R; ++r) {
                            const double l2 = leg_step(A, C, x[r], l0[r], l1[r]);
#pragma unroll
                            for (int c = 0; c < NS0; ++c) {
                                val[2 * c] = fma(l2, in0[r][c][par][0], val[2 * c]);
                                val[2 * c + 1] = fma(l2, in0[r][c][par][1], val[2 * c + 1]);
                            }
                        }
#pragma unroll
                        for (int q = 0; q < NV; ++q)
                            sval[half][(i % RL) * NV + q][threadIdx.x] = val[q];
                        if (i % RL == RL - 1) {
                            flush(lt + i - (RL - 1), half);
                            half ^= 1;
                        }
                    }
                    continue;
                }
#pragma unroll
                for (int i = 0; i < SHT_LT; ++i) {
                    const int j = j0 + i, l = lt + i;
                    const int par = i & 1;
                    const double A = sA[j], C = sC[j];
                    double val[NV];
#pragma unroll
                    for (int q = 0; q < NV; ++q) val[q] = 0.0;
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        if (l > m) {
                            const double l2 = leg_step(A, C, x[r], l0[r], l1[r]);
                            if (k[r] > 0 && fabs(l2) > SHT_BIG) {
                                l0[r] *= SHT_DOWN;
                                l1[r] *= SHT_DOWN;
                                k[r] -= 1;
                            }
                        }
                        const double lam = k[r] == 0 ? l1[r] : 0.0;
#pragma unroll
                        for (int c = 0; c < NS0; ++c) {
                            val[2 * c] = fma(lam, in0[r][c][par][0], val[2 * c]);
                            val[2 * c + 1] = fma(lam, in0[r][c][par][1], val[2 * c + 1]);
                        }
                        if (POL) {
                            const double* q1 = sq[0];
                            const double* q2 = sq[POL ? 1 : 0];
                            const double* q3 = sq[POL ? 2 : 0];
                            const double* q4 = sq[POL ? 3 : 0];
                            const double* q5 = sq[POL ? 4 : 0];
                            const double lamp = k[r] == 0 ? l0[r] : 0.0;
                            const double f1 =
                                q3[j] * xis2[r] * lamp - (q1[j] * is2[r] + q2[j]) * lam;
                            const double f2 = is2[r] * (q5[j] * lamp - q4[j] * x[r] * lam);
                            const double* d = in2[r][POL ? par : 0];
#pragma unroll
                            for (int q = 0; q < 4; ++q)
                                val[2 * NS0 + q] += fma(f1, d[2 * q], f2 * d[2 * q + 1]);
                        }
                    }
#pragma unroll
                    for (int q = 0; q < NV; ++q) sval[half][(i % RL) * NV + q][threadIdx.x] = val[q];
                    if (i % RL == RL - 1) {
                        flush(lt + i - (RL - 1), half);
                        half ^= 1;  // the next RL l write the other half: no second barrier
                    }
                }
            }
        }
    }
}

// R (ring pairs per thread) is a tuning constant of each entry.
#define ANAL_ENTRY(NAME, NS0, POL, R)                                                            \
    extern "C" __global__ void __launch_bounds__(LEG_TPB)                                      \
        NAME(const double* phase, double* a0, double* a1, double* a2, i64 lmax, i64 mmax,      \
             const double* norms, const double* lnfact, const i64* mlist, const i64* moff,     \
             const double* pair_x, const double* pair_s, i64 p0, i64 np) {                     \
        leg_anal<NS0, POL, R>(phase, a0, a1, a2, lmax, mmax, norms, lnfact, mlist, moff,       \
                              pair_x, pair_s, p0, np);                                         \
    }

ANAL_ENTRY(leg_anal_s1, 1, false, 4)
ANAL_ENTRY(leg_anal_s2, 2, false, 2)
ANAL_ENTRY(leg_anal_s3, 3, false, 2)
ANAL_ENTRY(leg_anal_pol, 1, true, 2)
ANAL_ENTRY(leg_anal_pol0, 0, true, 2)  // (Q, U) -> (E, B) alone: the spin-2 SHT halves

// healpy's mask_bad: |x - UNSEEN| <= 1e-8 + 1e-5 |UNSEEN|; such pixels count as 0.
__device__ __forceinline__ double unseen_to_zero(double x) {
    return fabs(x - (-1.6375e30)) <= 1e-8 + 1e-5 * 1.6375e30 ? 0.0 : x;
}

extern "C" __global__ void clean_f32(const float* in, double* out, i64 n) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        out[i] = unseen_to_zero((double)in[i]);
}

extern "C" __global__ void clean_inplace_f64(double* m, i64 n) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        m[i] = unseen_to_zero(m[i]);
}

// out[i] = a[i] - out[i]
extern "C" __global__ void sub_f64(const double* a, double* out, i64 n) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        out[i] = a[i] - out[i];
}

// out[i] += a[i]
extern "C" __global__ void add_f64(const double* a, double* out, i64 n) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        out[i] += a[i];
}
