// Data passes of the exact k-th value selection (src/cube/stats): extent, histogram of one
// refinement level, and gathering of the values left. Value mapping and binning mirror
// `Values::map` and `Level::bin_of` in src/cube/stats/mod.rs exactly.

#define SEL_BINS 4096
#define SEL_MAX_LEVELS 8

struct SelParams {
    double center;
    int abs_dev;
    int range;  // 0 all, 1 below centre, 2 above centre
    int nlevels;
    int pad;
    double lo[SEL_MAX_LEVELS];
    double hi[SEL_MAX_LEVELS];
    double scale[SEL_MAX_LEVELS];
    long long bin[SEL_MAX_LEVELS];
};

__device__ __forceinline__ bool sel_map(double x, const SelParams& p, double* v) {
    if (!isfinite(x)) return false;
    const double d = x - p.center;
    if (p.range == 1 && !(d < 0.0)) return false;
    if (p.range == 2 && !(d > 0.0)) return false;
    *v = p.abs_dev ? fabs(d) : d;
    return true;
}

__device__ __forceinline__ long long sel_bin(double v, double lo, double hi, double scale) {
    if (v < lo || v > hi) return -1;
    const long long b = (long long)((v - lo) * scale);
    return b > SEL_BINS - 1 ? SEL_BINS - 1 : b;
}

__device__ __forceinline__ bool sel_inside(double v, const SelParams& p) {
    for (int l = 0; l < p.nlevels; ++l)
        if (sel_bin(v, p.lo[l], p.hi[l], p.scale[l]) != p.bin[l]) return false;
    return true;
}

// Doubles as unsigned keys whose order is the numeric order, for atomicMin/atomicMax.
__device__ __forceinline__ unsigned long long sel_key(double v) {
    const unsigned long long b = (unsigned long long)__double_as_longlong(v);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

// out[0] += count, out[1] = min key, out[2] = max key (host initialises 0, ~0, 0).
template <typename T>
__device__ void sel_extent(const T* __restrict__ x, i64 n, SelParams p,
                           unsigned long long* out) {
    unsigned long long cnt = 0, mn = ~0ull, mx = 0ull;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        double v;
        if (sel_map((double)x[i], p, &v) && sel_inside(v, p)) {
            const unsigned long long k = sel_key(v);
            ++cnt;
            mn = k < mn ? k : mn;
            mx = k > mx ? k : mx;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        cnt += __shfl_down_sync(0xffffffffu, cnt, o);
        const unsigned long long a = __shfl_down_sync(0xffffffffu, mn, o);
        const unsigned long long b = __shfl_down_sync(0xffffffffu, mx, o);
        mn = a < mn ? a : mn;
        mx = b > mx ? b : mx;
    }
    if ((threadIdx.x & 31) == 0 && cnt > 0) {
        atomicAdd(out, cnt);
        atomicMin(out + 1, mn);
        atomicMax(out + 2, mx);
    }
}

// hist[b] += number of kept values inside the chosen levels that fall in bin b of (lo, hi).
template <typename T>
__device__ void sel_histogram(const T* __restrict__ x, i64 n, SelParams p, double lo, double hi,
                              double scale, unsigned long long* hist) {
    __shared__ unsigned int local[SEL_BINS];
    for (int b = threadIdx.x; b < SEL_BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        double v;
        if (sel_map((double)x[i], p, &v) && sel_inside(v, p)) {
            const long long b = sel_bin(v, lo, hi, scale);
            if (b >= 0) atomicAdd(local + b, 1u);
        }
    }
    __syncthreads();
    for (int b = threadIdx.x; b < SEL_BINS; b += blockDim.x)
        if (local[b]) atomicAdd(hist + b, (unsigned long long)local[b]);
}

// Appends kept values inside the chosen levels to out (up to cap); count gets the total.
template <typename T>
__device__ void sel_gather(const T* __restrict__ x, i64 n, SelParams p, double* out,
                           unsigned long long* count, unsigned long long cap) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        double v;
        if (sel_map((double)x[i], p, &v) && sel_inside(v, p)) {
            const unsigned long long slot = atomicAdd(count, 1ull);
            if (slot < cap) out[slot] = v;
        }
    }
}

#define SEL_INSTANTIATE(T, S)                                                                   \
    extern "C" __global__ void sel_extent_##S(const T* x, i64 n, SelParams p,                  \
                                              unsigned long long* out) {                       \
        sel_extent<T>(x, n, p, out);                                                            \
    }                                                                                           \
    extern "C" __global__ void sel_histogram_##S(const T* x, i64 n, SelParams p, double lo,    \
                                                 double hi, double scale,                      \
                                                 unsigned long long* hist) {                   \
        sel_histogram<T>(x, n, p, lo, hi, scale, hist);                                         \
    }                                                                                           \
    extern "C" __global__ void sel_gather_##S(const T* x, i64 n, SelParams p, double* out,     \
                                              unsigned long long* count,                       \
                                              unsigned long long cap) {                        \
        sel_gather<T>(x, n, p, out, count, cap);                                                \
    }

SEL_INSTANTIATE(float, f32)
SEL_INSTANTIATE(double, f64)
