// Convolution gridding, gather per target pixel (src/grid/cuda.rs launches these).
//
// The plan is built on the host (src/grid/plan.rs): samples sorted by HEALPix ring then by
// quantised longitude, per-ring start tables, the z span of each ring's samples and monotone
// envelopes of those spans. `for_each_run` reproduces Plan::candidates: for one target it
// yields the runs of sorted samples that may lie within the sphere radius; the exact test
// (great-circle distance < radius) is done per pair. One warp per target pixel, grid-stride
// over targets, no atomics. Sums are f64.

#define SC_PHI_BITS 44
#define SC_TWO_PI 6.283185307179586
#define SC_PI 3.141592653589793
#define SC_HALF_PI 1.5707963267948966
#define SC_DEG2RAD (3.141592653589793 / 180.0)
#define SC_FULL 0xffffffffu

typedef unsigned long long u64;

struct GridPlan {
    const double* x;
    const double* y;
    const double* z;
    const u64* keys;
    i64 n;
    const i64* ring_start;
    const double* zmin;
    const double* zmax;
    const double* lo_env;
    const double* hi_env;
    int nrings;
};

struct GridKernel {
    int kind;  // 0 gauss1d, 1 gauss2d, 2 tapered_sinc, 3 gaussbessel (Rust `Kind`)
    double c0, c1, c2, c3;
    double radius;  // radians
    double c2_cut;  // chord² pre-filter, with margin
};

struct GridTarget {
    double lon, lat;
    double t[3], east[3], north[3];
};

__device__ __forceinline__ GridTarget sc_target(double lon_deg, double lat_deg) {
    GridTarget g;
    g.lon = lon_deg * SC_DEG2RAD;
    g.lat = lat_deg * SC_DEG2RAD;
    double sl, cl, sb, cb;
    sincos(g.lon, &sl, &cl);
    sincos(g.lat, &sb, &cb);
    g.t[0] = cb * cl;
    g.t[1] = cb * sl;
    g.t[2] = sb;
    g.east[0] = -sl;
    g.east[1] = cl;
    g.east[2] = 0.0;
    g.north[0] = -sb * cl;
    g.north[1] = -sb * sl;
    g.north[2] = cb;
    return g;
}

__device__ __forceinline__ double sc_hav(double x) {
    double s = sin(0.5 * x);
    return s * s;
}

__device__ __forceinline__ u64 sc_phi_key(double phi) {
    const double scale = (double)(1ULL << SC_PHI_BITS) / SC_TWO_PI;
    const u64 maxk = (1ULL << SC_PHI_BITS) - 1;
    u64 k = (u64)(phi * scale);
    return k < maxk ? k : maxk;
}

// First index in [a, b) with keys[i] >= v (or > v when `upper`).
__device__ __forceinline__ i64 sc_search(const u64* keys, i64 a, i64 b, u64 v, bool upper) {
    while (a < b) {
        i64 m = a + ((b - a) >> 1);
        u64 k = keys[m];
        bool left = upper ? (k <= v) : (k < v);
        if (left) a = m + 1; else b = m;
    }
    return a;
}

// Calls f(s, e) for each run of candidate samples of the target at (lon, lat) radians.
template <typename F>
__device__ void for_each_run(const GridPlan& p, double lon, double lat, double radius, F f) {
    if (p.n == 0 || !isfinite(lon) || !isfinite(lat)) return;
    const double lat_lo = lat - radius, lat_hi = lat + radius;
    const bool pole = lat_lo <= -SC_HALF_PI || lat_hi >= SC_HALF_PI;
    const double z_lo = sin(fmax(lat_lo, -SC_HALF_PI)) - 1e-12;
    const double z_hi = sin(fmin(lat_hi, SC_HALF_PI)) + 1e-12;
    // r0: first ring with lo_env <= z_hi; r1: first ring with hi_env < z_lo.
    int a = 0, b = p.nrings;
    while (a < b) { int m = (a + b) >> 1; if (p.lo_env[m] > z_hi) a = m + 1; else b = m; }
    const int r0 = a;
    a = 0; b = p.nrings;
    while (a < b) { int m = (a + b) >> 1; if (p.hi_env[m] >= z_lo) a = m + 1; else b = m; }
    const int r1 = a;
    if (r0 >= r1) return;
    double phi = fmod(lon, SC_TWO_PI);
    if (phi < 0) phi += SC_TWO_PI;
    const double hav_r = sc_hav(radius);
    const double cos_lat = cos(lat);
    const double lat_w = pole ? 0.0 : asin(fmin(fmax(sin(lat) / cos(radius), -1.0), 1.0));
    for (int r = r0; r < r1; ++r) {
        const i64 ra = p.ring_start[r], rb = p.ring_start[r + 1];
        if (ra == rb || p.zmax[r] < z_lo || p.zmin[r] > z_hi) continue;
        double half = SC_PI;
        if (!pole) {
            const double ba = asin(fmin(fmax(fmax(p.zmin[r], z_lo), -1.0), 1.0));
            const double bb = fmax(asin(fmin(fmax(fmin(p.zmax[r], z_hi), -1.0), 1.0)), ba);
            const double bw = fmin(fmax(lat_w, ba), bb);
            const double den = cos(bw) * cos_lat;
            const double h = (hav_r - sc_hav(bw - lat)) / den;
            if (!(isnan(h) || h >= 1.0 || den <= 0.0))
                half = 2.0 * asin(sqrt(fmax(h, 0.0))) * (1.0 + 1e-9) + 1e-12;
        }
        const u64 ring_key = ((u64)r) << SC_PHI_BITS;
        auto run = [&](double lo, double hi) {
            const u64 klo = ring_key | sc_phi_key(fmax(lo, 0.0));
            const u64 khi = ring_key | sc_phi_key(fmin(hi, SC_TWO_PI));
            const i64 s = sc_search(p.keys, ra, rb, klo, false);
            const i64 e = sc_search(p.keys, ra, rb, khi, true);
            if (s < e) f(s, e);
        };
        if (half >= SC_PI) {
            f(ra, rb);
        } else if (phi - half < 0.0) {
            run(0.0, phi + half);
            run(phi - half + SC_TWO_PI, SC_TWO_PI);
        } else if (phi + half >= SC_TWO_PI) {
            run(0.0, phi + half - SC_TWO_PI);
            run(phi - half, SC_TWO_PI);
        } else {
            run(phi - half, phi + half);
        }
    }
}

// asin(h) for 0 <= h <= 1 (Taylor series below 0.1, as the CPU engine).
__device__ __forceinline__ double sc_asin_small(double h) {
    if (h < 0.1) {
        const double q = h * h;
        double p = 143.0 / 10240.0;
        p = p * q + 231.0 / 13312.0;
        p = p * q + 63.0 / 2816.0;
        p = p * q + 35.0 / 1152.0;
        p = p * q + 5.0 / 112.0;
        p = p * q + 3.0 / 40.0;
        p = p * q + 1.0 / 6.0;
        return h + h * q * p;
    }
    return asin(fmin(h, 1.0));
}

__device__ __forceinline__ double sc_kernel(const GridKernel& k, double d, double cb, double sb) {
    switch (k.kind) {
    case 0:
        return exp(-d * d * k.c0);
    case 1: {
        const double cr = cb * k.c2 + sb * k.c3;
        const double sr = sb * k.c2 - cb * k.c3;
        return exp(-d * d * (k.c0 * cr * cr + k.c1 * sr * sr));
    }
    case 2: {
        const double x = d * k.c0, y = d * k.c1;
        const double s = fabs(x) < 1e-10 ? 1.0 : sin(x) / x;
        return s * exp(-y * y);
    }
    default: {
        const double x = d * k.c0;
        const double b = x < 1e-8 ? 0.5 - x * x / 16.0 : j1(x) / x;
        return b * exp(-d * d * k.c1);
    }
    }
}

// Kernel weight of sorted sample i for target t, or false when it lies outside the sphere.
__device__ __forceinline__ bool sc_pair(const GridPlan& p, const GridTarget& t,
                                        const GridKernel& k, i64 i, double* w) {
    const double dx = p.x[i] - t.t[0];
    const double dy = p.y[i] - t.t[1];
    const double dz = p.z[i] - t.t[2];
    const double c2 = dx * dx + dy * dy + dz * dz;
    if (c2 >= k.c2_cut) return false;
    const double d = 2.0 * sc_asin_small(0.5 * sqrt(c2));
    if (d >= k.radius) return false;
    double cb = 1.0, sb = 0.0;
    if (k.kind == 1) {
        const double u = dx * t.east[0] + dy * t.east[1];
        const double v = dx * t.north[0] + dy * t.north[1] + dz * t.north[2];
        const double h = sqrt(u * u + v * v);
        if (h > 0.0) {
            cb = v / h;
            sb = u / h;
        }
    }
    *w = sc_kernel(k, d, cb, sb);
    return true;
}

__device__ __forceinline__ double sc_warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(SC_FULL, v, o);
    return v;
}

#define SC_PLAN_ARGS                                                                          \
    const double *px, const double *py, const double *pz, const u64 *keys, i64 n,            \
        const i64 *ring_start, const double *zmin, const double *zmax, const double *lo_env, \
        const double *hi_env, int nrings, const double *tlon, const double *tlat, i64 nt,   \
        int kind, double c0, double c1, double c2, double c3, double radius, double c2_cut

#define SC_SETUP                                                                       \
    const GridPlan P = {px, py, pz, keys, n, ring_start, zmin, zmax, lo_env, hi_env, nrings}; \
    const GridKernel K = {kind, c0, c1, c2, c3, radius, c2_cut};                       \
    const int lane = threadIdx.x & 31;                                                 \
    const i64 warp0 = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5;              \
    const i64 nwarps = (gridDim.x * (i64)blockDim.x) >> 5;

// One channel: out_u[t] = Σ k·(w·v), out_w[t] = Σ k·w with (w·v, w) per sorted sample.
extern "C" __global__ void grid_scalar(SC_PLAN_ARGS, const double* wv, const double* w,
                                       double* out_u, double* out_w) {
    SC_SETUP
    for (i64 t = warp0; t < nt; t += nwarps) {
        const GridTarget T = sc_target(tlon[t], tlat[t]);
        double su = 0.0, sw = 0.0;
        for_each_run(P, T.lon, T.lat, K.radius, [&](i64 s, i64 e) {
            for (i64 i = s + lane; i < e; i += 32) {
                double k;
                if (sc_pair(P, T, K, i, &k)) {
                    su += k * wv[i];
                    sw += k * w[i];
                }
            }
        });
        su = sc_warp_sum(su);
        sw = sc_warp_sum(sw);
        if (lane == 0) {
            out_u[t] = su;
            out_w[t] = sw;
        }
    }
}

// Up to 128 channels (`cw`) of a channel chunk, data `n × cw` in plan order. Lanes first
// evaluate the kernel for 32 candidates, then every lane adds its channels for each accepted
// sample in candidate order (the CPU engine's order). Weights: `full` = 0: one weight per
// sample (`wsh`, f64) and NaN values skipped per channel; `full` = 1: per-channel weights
// `wfull` (`n × cw`, NaN pairs zeroed on the host). out_* are `cw × nt`.
template <typename T>
__device__ void grid_spectral(SC_PLAN_ARGS, const T* data, const double* wsh, const T* wfull,
                              int full, int cw, double* out_u, double* out_w) {
    SC_SETUP
    for (i64 t = warp0; t < nt; t += nwarps) {
        const GridTarget G = sc_target(tlon[t], tlat[t]);
        double au[4] = {0.0, 0.0, 0.0, 0.0};
        double aw[4] = {0.0, 0.0, 0.0, 0.0};
        for_each_run(P, G.lon, G.lat, K.radius, [&](i64 s, i64 e) {
            for (i64 base = s; base < e; base += 32) {
                const i64 i = base + lane;
                double k = 0.0;
                if (i < e) {
                    double kk;
                    if (sc_pair(P, G, K, i, &kk)) k = kk;
                }
                unsigned mask = __ballot_sync(SC_FULL, k != 0.0);
                while (mask) {
                    const int j = __ffs(mask) - 1;
                    mask &= mask - 1;
                    const double kj = __shfl_sync(SC_FULL, k, j);
                    const i64 row = (base + j) * (i64)cw;
                    if (full) {
#pragma unroll
                        for (int q = 0; q < 4; ++q) {
                            const int c = lane + 32 * q;
                            if (c < cw) {
                                const double kw = kj * (double)wfull[row + c];
                                au[q] += kw * (double)data[row + c];
                                aw[q] += kw;
                            }
                        }
                    } else {
                        const double kw = kj * wsh[base + j];
#pragma unroll
                        for (int q = 0; q < 4; ++q) {
                            const int c = lane + 32 * q;
                            if (c < cw) {
                                const double v = (double)data[row + c];
                                if (!isnan(v)) {
                                    au[q] += kw * v;
                                    aw[q] += kw;
                                }
                            }
                        }
                    }
                }
            }
        });
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int c = lane + 32 * q;
            if (c < cw) {
                out_u[c * nt + t] = au[q];
                out_w[c * nt + t] = aw[q];
            }
        }
    }
}

extern "C" __global__ void grid_spectral_f32(SC_PLAN_ARGS, const float* data, const double* wsh,
                                             const float* wfull, int full, int cw,
                                             double* out_u, double* out_w) {
    grid_spectral<float>(px, py, pz, keys, n, ring_start, zmin, zmax, lo_env, hi_env, nrings,
                         tlon, tlat, nt, kind, c0, c1, c2, c3, radius, c2_cut, data, wsh, wfull,
                         full, cw, out_u, out_w);
}

extern "C" __global__ void grid_spectral_f64(SC_PLAN_ARGS, const double* data, const double* wsh,
                                             const double* wfull, int full, int cw,
                                             double* out_u, double* out_w) {
    grid_spectral<double>(px, py, pz, keys, n, ring_start, zmin, zmax, lo_env, hi_env, nrings,
                          tlon, tlat, nt, kind, c0, c1, c2, c3, radius, c2_cut, data, wsh,
                          wfull, full, cw, out_u, out_w);
}
