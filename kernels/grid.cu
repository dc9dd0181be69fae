// Convolution gridding on the GPU (src/grid/cuda/ launches these): the lookup is built on the
// device, then one warp per target pixel gathers its candidates.
//
// Lookup (the same structure as src/grid/plan.rs builds on the host): every sample gets the sort
// key ring << 44 | phi_key(phi), with `ring` the iso-latitude HEALPix ring (of the bucketing
// nside) nearest to its z = sin(lat); dropped samples (NaN coordinate, NaN shared weight, NaN
// value with one channel) get SC_DROPPED and sort last. A stable LSD radix sort of (key, index)
// (8-bit digits; passes whose digit is the same for every key are skipped, decided on the host
// from one histogram of all 8 digits) gives exactly the host plan's order: by key, ties by
// index. Then per-ring start tables (binary search), unit vectors in sorted order, the z span of
// each ring's samples and the monotone envelopes of those spans.
//
// Gather: `for_each_run` reproduces Plan::candidates: for one target it yields the runs of
// sorted samples that may lie within the sphere radius; the exact test (great-circle distance <
// radius) is done per pair. One channel: one warp per target pixel. Several channels: a block
// per run of neighbouring targets, each value read once per block (grid_spectral). No atomics
// on sums, each sum in a fixed order, so results are deterministic. Sums are f64.
//
// Every kernel takes one argument, a struct of 8-byte fields (pointers, i64, double) mirrored by
// a #[repr(C)] struct in src/grid/cuda/args.rs; tests/test_grid_cuda_host.py checks that the two
// layouts agree and runs these kernels in a host emulator (tests/cuda_host/).

#define SC_PHI_BITS 44
#define SC_RING_MASK ((1ULL << 19) - 1)
#define SC_DROPPED (1ULL << 63)
#define SC_TWO_PI 6.283185307179586
#define SC_PI 3.141592653589793
#define SC_HALF_PI 1.5707963267948966
#define SC_DEG2RAD (3.141592653589793 / 180.0)
#define SC_FULL 0xffffffffu
// Radix sort: blocks of SC_RADIX_THREADS threads (8 warps), each warp SC_RADIX_ITEMS rounds of
// 32 consecutive keys, so a block owns a tile of SC_RADIX_TILE consecutive keys.
#define SC_RADIX_THREADS 256
#define SC_RADIX_ITEMS 16
#define SC_RADIX_TILE (SC_RADIX_THREADS * SC_RADIX_ITEMS)

typedef unsigned long long u64;

__device__ __forceinline__ double sc_grid_inf() {
    return __longlong_as_double(0x7ff0000000000000LL);
}
__device__ __forceinline__ double sc_grid_nan() {
    return __longlong_as_double(0x7ff8000000000000LL);
}

// The device plan: samples in sorted order (see the top of this file).
struct GridPlan {
    const double* x;  // unit vectors of the n kept samples, sorted
    const double* y;
    const double* z;
    const u64* keys;         // their sort keys (ascending)
    i64 n;                   // kept samples
    const i64* ring_start;   // nrings + 1: ring r holds sorted samples ring_start[r]..[r + 1]
    const double* zmin;      // nrings: smallest / largest z of ring r's samples (+-inf: empty)
    const double* zmax;
    const double* lo_env;    // nrings: min of zmin[..=r]
    const double* hi_env;    // nrings: max of zmax[r..]
    i64 nrings;              // 4 nside
};

struct GridKernel {
    i64 kind;       // 0 gauss1d, 1 gauss2d, 2 tapered_sinc, 3 gaussbessel (Rust `Kind`)
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

// Calls f(s, e) for each run of candidate samples of the target at (lon, lat) radians, in
// ascending sorted order. Only rings in [rlo, rhi) are visited; `span`, when given, receives the
// target's whole ring range [r0, r1) (empty: r0 >= r1).
template <typename F>
__device__ void for_each_run(const GridPlan& p, double lon, double lat, double radius, F f,
                             int rlo = 0, int rhi = 1 << 30, int* span = nullptr) {
    if (span) span[0] = span[1] = 0;
    if (p.n == 0 || !isfinite(lon) || !isfinite(lat)) return;
    const double lat_lo = lat - radius, lat_hi = lat + radius;
    const bool pole = lat_lo <= -SC_HALF_PI || lat_hi >= SC_HALF_PI;
    const double z_lo = sin(fmax(lat_lo, -SC_HALF_PI)) - 1e-12;
    const double z_hi = sin(fmin(lat_hi, SC_HALF_PI)) + 1e-12;
    // r0: first ring with lo_env <= z_hi; r1: first ring with hi_env < z_lo.
    int a = 0, b = (int)p.nrings;
    while (a < b) { int m = (a + b) >> 1; if (p.lo_env[m] > z_hi) a = m + 1; else b = m; }
    const int r0 = a;
    a = 0; b = (int)p.nrings;
    while (a < b) { int m = (a + b) >> 1; if (p.hi_env[m] >= z_lo) a = m + 1; else b = m; }
    const int r1 = a;
    if (span) {
        span[0] = r0;
        span[1] = r1;
    }
    if (r0 >= r1 || rlo >= rhi) return;
    double phi = fmod(lon, SC_TWO_PI);
    if (phi < 0) phi += SC_TWO_PI;
    const double hav_r = sc_hav(radius);
    const double cos_lat = cos(lat);
    const double lat_w = pole ? 0.0 : asin(fmin(fmax(sin(lat) / cos(radius), -1.0), 1.0));
    const int re = r1 < rhi ? r1 : rhi;
    for (int r = r0 > rlo ? r0 : rlo; r < re; ++r) {
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

// ------------------------------------------------------------------------------------------
// Building the plan on the device. Launch order (src/grid/cuda/plan.rs, DevicePlan::build):
//   zero hist; grid_prep_T; [host: passes and kept count from hist]; per pass: grid_radix_count,
//   grid_scan, grid_radix_scatter; grid_ring_starts; grid_plan_geom; grid_ring_zspan;
//   grid_envelopes; grid_gather_T.

// The iso-latitude ring (1..=4 nside - 1) whose centre is nearest to z (src/grid/plan.rs
// ring_of_z; round() rounds halves away from zero as Rust's f64::round).
__device__ __forceinline__ u64 sc_ring_of_z(i64 nside, double z) {
    const double ns = (double)nside;
    double r;
    if (z > 2.0 / 3.0) {
        r = round(ns * sqrt(3.0 * (1.0 - z)));
    } else if (z < -2.0 / 3.0) {
        r = 4.0 * ns - round(ns * sqrt(3.0 * (1.0 + z)));
    } else {
        r = round(ns * (2.0 - 1.5 * z));
    }
    const i64 ri = (i64)fmax(r, 1.0);
    const i64 top = 4 * nside - 1;
    return (u64)(ri < top ? ri : top);
}

// phi in [0, 2pi) and the unit vector of a sample at (lon, lat) degrees (src/grid/plan.rs).
__device__ __forceinline__ void sc_sample(double lon_deg, double lat_deg, double* phi,
                                          double* v) {
    double p = fmod(lon_deg * SC_DEG2RAD, SC_TWO_PI);
    if (p < 0.0) p += SC_TWO_PI;
    if (p >= SC_TWO_PI) p = 0.0;
    double sl, cl, sb, cb;
    sincos(p, &sl, &cl);
    sincos(lat_deg * SC_DEG2RAD, &sb, &cb);
    v[0] = cb * cl;
    v[1] = cb * sl;
    v[2] = sb;
    *phi = p;
}

struct GridPrepArgs {
    const double* lon;   // n sample longitudes, degrees
    const double* lat;   // n latitudes, degrees
    const void* vcheck;  // T[n]: a NaN here drops the sample (the values, one channel), or null
    const void* wcheck;  // T[n]: a NaN here drops the sample (the shared weights), or null
    u64* keys;           // out, n: sort key, SC_DROPPED for dropped samples
    unsigned* vals;      // out, n: 0, 1, ..., n - 1
    unsigned* hist;      // in/out, 8 x 256, zeroed before: hist[p * 256 + d] counts the keys
                         // whose digit p ((key >> 8p) & 255) is d
    i64 n;               // samples
    i64 nside;           // bucketing resolution
};

// Any grid-stride launch; blockDim.x a multiple of 32.
template <typename T>
__device__ void grid_prep(const GridPrepArgs& a) {
    __shared__ unsigned h[8 * 256];
    for (int k = threadIdx.x; k < 8 * 256; k += blockDim.x) h[k] = 0u;
    __syncthreads();
    const T* vcheck = (const T*)a.vcheck;
    const T* wcheck = (const T*)a.wcheck;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
        const double lo = a.lon[i], la = a.lat[i];
        bool keep = isfinite(lo) && isfinite(la) && fabs(la) <= 90.0;
        if (keep && wcheck) keep = !isnan((double)wcheck[i]);
        if (keep && vcheck) keep = !isnan((double)vcheck[i]);
        u64 key = SC_DROPPED;
        if (keep) {
            double phi, v[3];
            sc_sample(lo, la, &phi, v);
            key = (sc_ring_of_z(a.nside, v[2]) << SC_PHI_BITS) | sc_phi_key(phi);
        }
        a.keys[i] = key;
        a.vals[i] = (unsigned)i;
        for (int p = 0; p < 8; ++p) atomicAdd(&h[p * 256 + (int)((key >> (8 * p)) & 255)], 1u);
    }
    __syncthreads();
    for (int k = threadIdx.x; k < 8 * 256; k += blockDim.x)
        if (h[k] != 0u) atomicAdd(&a.hist[k], h[k]);
}

extern "C" __global__ void grid_prep_f32(const GridPrepArgs a) { grid_prep<float>(a); }
extern "C" __global__ void grid_prep_f64(const GridPrepArgs a) { grid_prep<double>(a); }

struct GridRadixArgs {
    const u64* keys_in;      // n keys in the current order
    const unsigned* vals_in; // n values (sample indices) in the current order
    u64* keys_out;           // out, n: stably sorted by digit (key >> shift) & 255
    unsigned* vals_out;      // out, n
    unsigned* counts;        // 256 x nblocks, digit-major: counts[d * nblocks + b] is the
                             // number of keys of tile b with digit d (grid_radix_count); after
                             // grid_scan, where tile b's first key of digit d goes
    i64 n;
    i64 shift;               // 0, 8, ..., 56
    i64 nblocks;             // ceil(n / SC_RADIX_TILE), the grid size of count and scatter
};

// grid = nblocks, block = SC_RADIX_THREADS (exactly: one thread per digit).
extern "C" __global__ void __launch_bounds__(SC_RADIX_THREADS)
    grid_radix_count(const GridRadixArgs a) {
    __shared__ unsigned h[256];
    h[threadIdx.x] = 0u;
    __syncthreads();
    const i64 t0 = (i64)blockIdx.x * SC_RADIX_TILE;
    const i64 t1 = t0 + SC_RADIX_TILE < a.n ? t0 + SC_RADIX_TILE : a.n;
    for (i64 i = t0 + threadIdx.x; i < t1; i += SC_RADIX_THREADS)
        atomicAdd(&h[(int)((a.keys_in[i] >> a.shift) & 255)], 1u);
    __syncthreads();
    a.counts[(i64)threadIdx.x * a.nblocks + blockIdx.x] = h[threadIdx.x];
}

struct GridScanArgs {
    unsigned* data;  // in/out: replaced by its exclusive prefix sum
    i64 len;
};

// One block (1024 threads from the host; any multiple of 32 up to 1024 works): thread t sums a
// contiguous part, thread 0 scans the partial sums, each thread rewrites its part.
extern "C" __global__ void __launch_bounds__(1024) grid_scan(const GridScanArgs a) {
    __shared__ unsigned part[1024];
    const i64 nt = blockDim.x;
    const i64 per = (a.len + nt - 1) / nt;
    i64 lo = (i64)threadIdx.x * per;
    if (lo > a.len) lo = a.len;
    const i64 hi = lo + per < a.len ? lo + per : a.len;
    unsigned s = 0u;
    for (i64 i = lo; i < hi; ++i) s += a.data[i];
    part[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned run = 0u;
        for (i64 k = 0; k < nt; ++k) {
            const unsigned v = part[k];
            part[k] = run;
            run += v;
        }
    }
    __syncthreads();
    unsigned run = part[threadIdx.x];
    for (i64 i = lo; i < hi; ++i) {
        const unsigned v = a.data[i];
        a.data[i] = run;
        run += v;
    }
}

// Stable scatter of one radix pass. grid = nblocks, block = SC_RADIX_THREADS (exactly). Warp w
// of block b owns keys b * TILE + w * 32 * ITEMS + [0, 32 * ITEMS), read in rounds of 32; lanes
// with equal digits find each other with __match_any_sync, so a key's rank among equal digits is
// (earlier warps of the tile) + (earlier rounds of its warp) + (lower lanes of its round): the
// order of equal digits is kept.
extern "C" __global__ void __launch_bounds__(SC_RADIX_THREADS)
    grid_radix_scatter(const GridRadixArgs a) {
    __shared__ unsigned cnt[8 * 256];  // [warp][digit]: counts, then next output position
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned below = (1u << lane) - 1u;  // lanes lower than this one
    for (int k = threadIdx.x; k < 8 * 256; k += SC_RADIX_THREADS) cnt[k] = 0u;
    __syncthreads();
    const i64 base = (i64)blockIdx.x * SC_RADIX_TILE + (i64)warp * (32 * SC_RADIX_ITEMS);
    for (int r = 0; r < SC_RADIX_ITEMS; ++r) {
        const i64 i = base + 32 * r + lane;
        const unsigned d = i < a.n ? (unsigned)((a.keys_in[i] >> a.shift) & 255) : 256u;
        const unsigned peers = __match_any_sync(SC_FULL, d);
        if (d < 256u && (peers & below) == 0u) cnt[warp * 256 + d] += (unsigned)__popc(peers);
        __syncwarp();
    }
    __syncthreads();
    {
        const int d = threadIdx.x;
        unsigned run = a.counts[(i64)d * a.nblocks + blockIdx.x];
        for (int w = 0; w < 8; ++w) {
            const unsigned c = cnt[w * 256 + d];
            cnt[w * 256 + d] = run;
            run += c;
        }
    }
    __syncthreads();
    for (int r = 0; r < SC_RADIX_ITEMS; ++r) {
        const i64 i = base + 32 * r + lane;
        u64 key = 0;
        unsigned d = 256u;
        if (i < a.n) {
            key = a.keys_in[i];
            d = (unsigned)((key >> a.shift) & 255);
        }
        const unsigned peers = __match_any_sync(SC_FULL, d);
        unsigned pos = 0u;
        if (d < 256u) pos = cnt[warp * 256 + d] + (unsigned)__popc(peers & below);
        __syncwarp();
        if (d < 256u) {
            a.keys_out[pos] = key;
            a.vals_out[pos] = a.vals_in[i];
            if ((peers & below) == 0u) cnt[warp * 256 + d] += (unsigned)__popc(peers);
        }
        __syncwarp();
    }
}

struct GridRingArgs {
    const u64* keys;   // n sorted keys of the kept samples
    const double* z;   // n sorted z (grid_plan_geom), for grid_ring_zspan
    i64* ring_start;   // nrings + 1
    double* zmin;      // nrings
    double* zmax;
    double* lo_env;
    double* hi_env;
    i64 n;             // kept samples (>= 1)
    i64 nrings;
};

// ring_start[r] = first sorted position whose ring is >= r, for r = 0..=nrings. Any grid-stride
// launch over nrings + 1.
extern "C" __global__ void grid_ring_starts(const GridRingArgs a) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r <= a.nrings; r += stride) {
        const u64 v = ((u64)r) << SC_PHI_BITS;
        i64 lo = 0, hi = a.n;
        while (lo < hi) {
            const i64 m = lo + ((hi - lo) >> 1);
            if (a.keys[m] < v) lo = m + 1; else hi = m;
        }
        a.ring_start[r] = lo;
    }
}

// zmin/zmax of each ring's samples: one warp per ring, grid-stride over rings (blockDim.x a
// multiple of 32).
extern "C" __global__ void grid_ring_zspan(const GridRingArgs a) {
    const int lane = threadIdx.x & 31;
    const i64 w0 = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 nw = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 r = w0; r < a.nrings; r += nw) {
        double lo = sc_grid_inf(), hi = -sc_grid_inf();
        const i64 e = a.ring_start[r + 1];
        for (i64 i = a.ring_start[r] + lane; i < e; i += 32) {
            lo = fmin(lo, a.z[i]);
            hi = fmax(hi, a.z[i]);
        }
        for (int o = 16; o > 0; o >>= 1) {
            lo = fmin(lo, __shfl_down_sync(SC_FULL, lo, o));
            hi = fmax(hi, __shfl_down_sync(SC_FULL, hi, o));
        }
        if (lane == 0) {
            a.zmin[r] = lo;
            a.zmax[r] = hi;
        }
    }
}

// lo_env[r] = min(zmin[0..=r]), hi_env[r] = max(zmax[r..nrings]). One block (1024 threads from
// the host; any multiple of 32 up to 1024 works), as grid_scan.
extern "C" __global__ void __launch_bounds__(1024) grid_envelopes(const GridRingArgs a) {
    __shared__ double plo[1024], phi[1024];
    const i64 nt = blockDim.x, t = threadIdx.x;
    const i64 per = (a.nrings + nt - 1) / nt;
    i64 lo = t * per;
    if (lo > a.nrings) lo = a.nrings;
    const i64 hi = lo + per < a.nrings ? lo + per : a.nrings;
    double m = sc_grid_inf(), M = -sc_grid_inf();
    for (i64 i = lo; i < hi; ++i) {
        m = fmin(m, a.zmin[i]);
        M = fmax(M, a.zmax[i]);
    }
    plo[t] = m;
    phi[t] = M;
    __syncthreads();
    if (t == 0) {
        double run = sc_grid_inf();
        for (i64 k = 0; k < nt; ++k) {
            const double v = plo[k];
            plo[k] = run;
            run = fmin(run, v);
        }
        run = -sc_grid_inf();
        for (i64 k = nt - 1; k >= 0; --k) {
            const double v = phi[k];
            phi[k] = run;
            run = fmax(run, v);
        }
    }
    __syncthreads();
    double run = plo[t];
    for (i64 i = lo; i < hi; ++i) {
        run = fmin(run, a.zmin[i]);
        a.lo_env[i] = run;
    }
    run = phi[t];
    for (i64 i = hi - 1; i >= lo; --i) {
        run = fmax(run, a.zmax[i]);
        a.hi_env[i] = run;
    }
}

struct GridGeomArgs {
    const double* lon;      // samples in input order, degrees
    const double* lat;
    const unsigned* order;  // n: sorted position -> input index
    double* x;              // out, n: unit vectors in sorted order
    double* y;
    double* z;
    i64 n;                  // kept samples
};

// Any grid-stride launch.
extern "C" __global__ void grid_plan_geom(const GridGeomArgs a) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
        const unsigned o = a.order[i];
        double phi, v[3];
        sc_sample(a.lon[o], a.lat[o], &phi, v);
        a.x[i] = v[0];
        a.y[i] = v[1];
        a.z[i] = v[2];
    }
}

struct GridGatherArgs {
    const unsigned* order;  // n: sorted position -> input index
    const void* data;       // T[]: values in input order (one channel), or null when wv is null
    const void* weight;     // T[]: shared weights in input order, or null (all 1)
    double* wv;             // out, n: weight * value in sorted order, or null (not wanted)
    double* w;              // out, n: weight in sorted order
    i64 n;                  // kept samples
};

// Per-sample values in sorted order, as f64. Any grid-stride launch.
template <typename T>
__device__ void grid_gather(const GridGatherArgs& a) {
    const T* data = (const T*)a.data;
    const T* weight = (const T*)a.weight;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
        const unsigned o = a.order[i];
        const double w = weight ? (double)weight[o] : 1.0;
        if (a.wv) a.wv[i] = w * (double)data[o];
        a.w[i] = w;
    }
}

extern "C" __global__ void grid_gather_f32(const GridGatherArgs a) { grid_gather<float>(a); }
extern "C" __global__ void grid_gather_f64(const GridGatherArgs a) { grid_gather<double>(a); }

// ------------------------------------------------------------------------------------------
// Gathering. One warp per target pixel, grid-stride over targets (blockDim.x a multiple of 32).

struct GridScalarArgs {
    GridPlan p;
    GridKernel k;
    const double* tlon;  // nt target longitudes, degrees (NaN: no output)
    const double* tlat;
    i64 nt;
    const double* wv;    // n: weight * value, sorted order
    const double* w;     // n: weight, sorted order
    double* out_u;       // out, nt: sum of k * w * v
    double* out_w;       // out, nt: sum of k * w
};

// One channel.
extern "C" __global__ void grid_scalar(const GridScalarArgs a) {
    const GridPlan& P = a.p;
    const GridKernel& K = a.k;
    const int lane = threadIdx.x & 31;
    const i64 warp0 = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 t = warp0; t < a.nt; t += nwarps) {
        const GridTarget T = sc_target(a.tlon[t], a.tlat[t]);
        double su = 0.0, sw = 0.0;
        for_each_run(P, T.lon, T.lat, K.radius, [&](i64 s, i64 e) {
            for (i64 i = s + lane; i < e; i += 32) {
                double k;
                if (sc_pair(P, T, K, i, &k)) {
                    su += k * a.wv[i];
                    sw += k * a.w[i];
                }
            }
        });
        su = sc_warp_sum(su);
        sw = sc_warp_sum(sw);
        if (lane == 0) {
            a.out_u[t] = su;
            a.out_w[t] = sw;
        }
    }
}

struct GridSpectralArgs {
    GridPlan p;
    GridKernel k;
    const double* tlon;     // nt target longitudes, degrees
    const double* tlat;
    i64 nt;
    const unsigned* order;  // n: sorted position -> row of data / wfull
    const void* data;       // T rows: channel c of row o at data[o * stride + c0 + c]
    const void* wfull;      // T rows of per-channel weights (same indexing), or null
    const double* wsh;      // n: shared weight in sorted order (1 when wfull is given)
    i64 stride;             // elements between rows
    i64 c0;                 // first channel of this launch within a row
    i64 cw;                 // channels of this launch, 1..SC_SPEC_THREADS
    double* out_u;          // out, cw x nt: channel c of target t at [c * ostride + t]
    double* out_w;
    double* wmap;           // out, nt: sum of k * wsh over every accepted sample, or null
    unsigned* nan_flag;     // in/out: incremented when a value or weight that reaches a target
                            // is NaN (then out_w differs between channels)
    i64 ostride;            // elements between channels of out_u / out_w (>= nt): a launch may
                            // cover a piece of the call's targets (tlon, tlat, out_u, out_w and
                            // wmap offset to its first one), its outputs rows of the full arrays
};

// Targets per block (a run of consecutive targets: neighbours along a map row) and threads per
// block (one per channel of the launch; also one per candidate when evaluating the kernel).
#define SC_RUN 16
#define SC_SPEC_THREADS 256
#define SC_INFLIGHT 8
// Rings whose candidate ranges are merged at a time.
#define SC_RWIN 32

// Spectral gather, coarsened along rows. A block takes SC_RUN consecutive targets, split into
// sub-runs of neighbours (consecutive targets closer than two sphere radii; map rows end where
// the next row starts). Per sub-run and ring, the candidate ranges of its targets are merged into
// one range [min start, max end), and the merged ranges are walked in ascending sorted order,
// SC_SPEC_THREADS candidates at a time: first thread j evaluates candidate j against every
// target of the sub-run (the kernel weight of each pair is computed once per launch), then
// thread c reads channel c of each candidate that reaches any target once and adds it to every
// target it reaches. Neighbouring targets share most candidates, so each value is read once per
// block instead of once per target. Each target's sums run over its accepted samples in
// ascending sorted order (the CPU engine's order), in f64, so results are deterministic.
// A NaN value (or per-channel weight) leaves that sample out of that channel's sums. Launch:
// blockDim.x == SC_SPEC_THREADS, any grid (grid-stride over runs).
template <typename T>
__device__ void grid_spectral(const GridSpectralArgs& a) {
    __shared__ GridTarget tg[SC_RUN];
    __shared__ int good[SC_RUN];        // finite target
    __shared__ int span[SC_RUN][2];     // ring range of each target
    __shared__ i64 hlo[SC_RWIN], hhi[SC_RWIN], hoff[SC_RWIN + 1];
    __shared__ double kw[SC_SPEC_THREADS][SC_RUN];  // k * wsh of (candidate, target), 0 if out
    __shared__ unsigned reach[SC_SPEC_THREADS];     // bit p: the candidate reaches target p
    __shared__ i64 rowof[SC_SPEC_THREADS];
    const GridPlan& P = a.p;
    const GridKernel& K = a.k;
    const T* data = (const T*)a.data;
    const T* wfull = (const T*)a.wfull;
    const int tid = threadIdx.x;
    const bool chan = tid < a.cw;
    const i64 nruns = (a.nt + SC_RUN - 1) / SC_RUN;
    for (i64 g = blockIdx.x; g < nruns; g += gridDim.x) {
        const i64 t0 = g * SC_RUN;
        const int np = (int)(a.nt - t0 < SC_RUN ? a.nt - t0 : SC_RUN);
        if (tid < SC_RUN) {
            int ok = 0;
            span[tid][0] = span[tid][1] = 0;
            if (tid < np) {
                const double lo = a.tlon[t0 + tid], la = a.tlat[t0 + tid];
                ok = isfinite(lo) && isfinite(la);
                if (ok) {
                    tg[tid] = sc_target(lo, la);
                    for_each_run(P, tg[tid].lon, tg[tid].lat, K.radius, [](i64, i64) {}, 0, 0,
                                 span[tid]);
                }
            }
            good[tid] = ok;
        }
        double au[SC_RUN], aw[SC_RUN];
#pragma unroll
        for (int p = 0; p < SC_RUN; ++p) au[p] = aw[p] = 0.0;
        double wm = 0.0;
        bool nan_seen = false;
        __syncthreads();
        for (int sa = 0; sa < np;) {
            // The sub-run [sa, sb): neighbours closer than two radii (chord² < 4 c2_cut).
            int sb = sa + 1;
            while (sb < np && good[sb - 1] && good[sb]) {
                const double dx = tg[sb].t[0] - tg[sb - 1].t[0];
                const double dy = tg[sb].t[1] - tg[sb - 1].t[1];
                const double dz = tg[sb].t[2] - tg[sb - 1].t[2];
                if (dx * dx + dy * dy + dz * dz >= 4.0 * K.c2_cut) break;
                ++sb;
            }
            int rmin = 1 << 30, rmax = 0;
            for (int p = sa; p < sb; ++p)
                if (good[p] && span[p][0] < span[p][1]) {
                    rmin = span[p][0] < rmin ? span[p][0] : rmin;
                    rmax = span[p][1] > rmax ? span[p][1] : rmax;
                }
            for (int w0 = rmin; w0 < rmax; w0 += SC_RWIN) {
                if (tid < SC_RWIN) {
                    hlo[tid] = P.n;
                    hhi[tid] = 0;
                }
                __syncthreads();
                if (tid >= sa && tid < sb && good[tid]) {
                    for_each_run(
                        P, tg[tid].lon, tg[tid].lat, K.radius,
                        [&](i64 s, i64 e) {
                            const int k = (int)(P.keys[s] >> SC_PHI_BITS) - w0;
                            atomicMin(&hlo[k], s);
                            atomicMax(&hhi[k], e);
                        },
                        w0, w0 + SC_RWIN);
                }
                __syncthreads();
                if (tid == 0) {
                    i64 off = 0;
                    for (int k = 0; k < SC_RWIN; ++k) {
                        hoff[k] = off;
                        if (hhi[k] > hlo[k]) off += hhi[k] - hlo[k];
                    }
                    hoff[SC_RWIN] = off;
                }
                __syncthreads();
                const i64 total = hoff[SC_RWIN];
                for (i64 base = 0; base < total; base += SC_SPEC_THREADS) {
                    // Thread tid evaluates merged candidate base + tid.
                    const i64 f = base + tid;
                    unsigned m = 0u;
                    i64 row = 0;
                    if (f < total) {
                        int k = 0;
                        while (hoff[k + 1] <= f) ++k;
                        const i64 c = hlo[k] + (f - hoff[k]);
                        const double ws = a.wsh[c];
                        for (int p = sa; p < sb; ++p) {
                            double kk = 0.0;
                            if (good[p] && sc_pair(P, tg[p], K, c, &kk)) {
                                m |= 1u << p;
                                kk *= ws;
                            } else {
                                kk = 0.0;
                            }
                            kw[tid][p] = kk;
                        }
                        row = (i64)a.order[c] * a.stride + a.c0;
                    }
                    reach[tid] = m;
                    rowof[tid] = row;
                    __syncthreads();
                    const int nj = (int)(total - base < SC_SPEC_THREADS ? total - base
                                                                         : SC_SPEC_THREADS);
                    // SC_INFLIGHT candidates' values in flight at a time (the loop is bound
                    // by load latency, not bandwidth).
                    for (int j0 = 0; j0 < nj; j0 += SC_INFLIGHT) {
                        unsigned mq[SC_INFLIGHT];
                        double v[SC_INFLIGHT], wt[SC_INFLIGHT];
#pragma unroll
                        for (int q = 0; q < SC_INFLIGHT; ++q) {
                            const int j = j0 + q;
                            mq[q] = j < nj ? reach[j] : 0u;
                            v[q] = 0.0;
                            wt[q] = 1.0;
                            if (mq[q] && chan) {
                                v[q] = (double)data[rowof[j] + tid];
                                if (wfull) wt[q] = (double)wfull[rowof[j] + tid];
                            }
                        }
#pragma unroll
                        for (int q = 0; q < SC_INFLIGHT; ++q) {
                            const unsigned mj = mq[q];
                            if (!mj) continue;
                            const int j = j0 + q;
                            if (a.wmap && tid < SC_RUN && ((mj >> tid) & 1u)) wm += kw[j][tid];
                            const bool use = !isnan(v[q]) && !isnan(wt[q]);
                            nan_seen |= chan && !use;
                            if (!use) continue;
#pragma unroll
                            for (int p = 0; p < SC_RUN; ++p) {
                                if ((mj >> p) & 1u) {
                                    const double kt = kw[j][p] * wt[q];
                                    au[p] += kt * v[q];
                                    aw[p] += kt;
                                }
                            }
                        }
                    }
                    __syncthreads();
                }
            }
            sa = sb;
        }
        if (chan) {
#pragma unroll
            for (int p = 0; p < SC_RUN; ++p) {
                if (p < np) {
                    a.out_u[tid * a.ostride + t0 + p] = au[p];
                    a.out_w[tid * a.ostride + t0 + p] = aw[p];
                }
            }
        }
        if (a.wmap && tid < np) a.wmap[t0 + tid] = wm;
        if (nan_seen) atomicAdd(a.nan_flag, 1u);
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(SC_SPEC_THREADS)
    grid_spectral_f32(const GridSpectralArgs a) { grid_spectral<float>(a); }
extern "C" __global__ void __launch_bounds__(SC_SPEC_THREADS)
    grid_spectral_f64(const GridSpectralArgs a) { grid_spectral<double>(a); }

struct GridFinishArgs {
    const double* su;  // len: sums of k * w * v
    const double* sw;  // len: sums of k * w
    void* cube;        // out, O[len]: O(u) / O(w) (NaN where O(w) == 0), as skyconv.grid.finish
    void* weights;     // out, O[len]: O(sw)
    i64 len;
};

// Any grid-stride launch. The unweighted sums are not written: the host derives them as
// cube * weights when asked.
template <typename O>
__device__ void grid_finish(const GridFinishArgs& a) {
    O* cube = (O*)a.cube;
    O* weights = (O*)a.weights;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.len; i += stride) {
        const O u = (O)a.su[i];
        const O w = (O)a.sw[i];
        weights[i] = w;
        cube[i] = (double)w == 0.0 ? (O)sc_grid_nan() : (O)((double)u / (double)w);
    }
}

extern "C" __global__ void grid_finish_f32(const GridFinishArgs a) { grid_finish<float>(a); }
extern "C" __global__ void grid_finish_f64(const GridFinishArgs a) { grid_finish<double>(a); }
