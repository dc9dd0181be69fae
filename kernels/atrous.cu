// Element-wise steps and per-unit statistics of the à trous reconstruction
// (src/cube/atrous/cuda.rs). Blank voxels are the non-finite input values. Arithmetic is done
// in double and rounded once to T, exactly as the CPU engine does it.
//
// Units: voxel i belongs to unit (i / unit_div) % units; element k of unit u sits at
// u * unit_stride + k * elem_stride.

__device__ __forceinline__ i64 at_unit(i64 i, i64 unit_div, i64 units) {
    return (i / unit_div) % units;
}

// c = input - output (blank at blanks: 0, or DUCHAMP's BLANK value in its 2-D quirk).
template <typename T>
__device__ void at_start(const T* __restrict__ in, const T* __restrict__ out, T* __restrict__ c,
                         double blank, i64 n) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        const double x = (double)in[i];
        c[i] = sc_finite(x) ? (T)(x - (double)out[i]) : (T)blank;
    }
}

// w = c - s, c = c - w (blanks: w = NaN, c keeps the value at_start gave it).
template <typename T>
__device__ void at_split(const T* __restrict__ in, T* __restrict__ c, const T* __restrict__ s,
                         T* __restrict__ w, i64 n) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x)
        sc_atrous_split<T>(in[i], c[i], s[i], w + i, c + i);
}

// Whether a wavelet coefficient is added to the output: |w| > thr (NaN w never is).
__device__ __forceinline__ bool at_passes(double wi, double thr) { return fabs(wi) > thr; }

// out += w where the unit is active and w passes thr[unit].
template <typename T>
__device__ void at_add(const T* __restrict__ w, T* __restrict__ out,
                       const double* __restrict__ thr, const int* __restrict__ active, i64 n,
                       i64 unit_div, i64 units) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        const i64 u = at_unit(i, unit_div, units);
        const double wi = (double)w[i];
        if (active[u] && at_passes(wi, thr[u])) out[i] = (T)((double)out[i] + wi);
    }
}

// The iteration's end in active units: out += each kept plane ws[j] where |ws[j]| > thr[j·units
// + unit], in scale order (the adds the host deferred: each plane and out read once, not once a
// scale; the same roundings as at_add, so the same bits), then out += c; r = input - out (NaN
// at blanks). r may be ws[k - 1]: each voxel's planes are read before its r is written.
template <typename T>
__device__ void at_finish(const T* __restrict__ in, const T* __restrict__ c, T* __restrict__ out,
                          T* r, const unsigned long long* __restrict__ ws, int k,
                          const double* __restrict__ thr, const int* __restrict__ active, i64 n,
                          i64 unit_div, i64 units) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        // in, out and c loaded together (not out and c after the test of in)
        const T xi = in[i], oi = out[i], ci = c[i];
        const double x = (double)xi;
        if (sc_finite(x)) {
            T o = oi;
            const i64 u = at_unit(i, unit_div, units);
            if (active[u]) {
                // Four planes' values loaded before their adds (each add waits on the last).
                int j = 0;
                for (; j + 4 <= k; j += 4) {
                    T v[4];
#pragma unroll
                    for (int q = 0; q < 4; ++q) v[q] = ((const T*)ws[j + q])[i];
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        const double wi = (double)v[q];
                        if (at_passes(wi, thr[(j + q) * units + u])) o = (T)((double)o + wi);
                    }
                }
                for (; j < k; ++j) {
                    const double wi = (double)((const T*)ws[j])[i];
                    if (at_passes(wi, thr[j * units + u])) o = (T)((double)o + wi);
                }
                o = (T)((double)o + (double)ci);
                out[i] = o;
            }
            r[i] = (T)(x - (double)o);
        } else {
            r[i] = (T)nan("");
        }
    }
}

// out = input at blanks.
template <typename T>
__device__ void at_blank(const T* __restrict__ in, T* __restrict__ out, i64 n) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        const T x = in[i];
        if (!sc_finite((double)x)) out[i] = x;
    }
}

// Order-preserving map of a double to an unsigned 64-bit key, and back.
__device__ __forceinline__ unsigned long long at_key(double v) {
    const unsigned long long b = (unsigned long long)__double_as_longlong(v);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}
__device__ __forceinline__ double at_unkey(unsigned long long k) {
    const unsigned long long b = (k >> 63) ? (k & 0x7fffffffffffffffull) : ~k;
    return __longlong_as_double((long long)b);
}

// The value a statistic sees: x, or |x - center| when abs; false for non-finite x.
__device__ __forceinline__ bool at_value(double x, int abs, double center, double* v) {
    if (!sc_finite(x)) return false;
    *v = abs ? fabs(x - center) : x;
    return true;
}

// One block per unit: the k[u]-th smallest value (exact), by 8 rounds of 8-bit radix
// histograms over the order-preserving keys. Inactive units (or k out of range) get NaN.
template <typename T>
__device__ void at_select(const T* __restrict__ data, i64 len, i64 unit_stride, i64 elem_stride,
                          const double* __restrict__ kth, const double* __restrict__ center,
                          int abs, const int* __restrict__ active, double* __restrict__ result) {
    __shared__ unsigned int hist[256];
    __shared__ unsigned long long prefix_s;
    __shared__ long long rank_s;
    __shared__ int found_s;
    const i64 u = blockIdx.x;
    if (!active[u]) {
        if (threadIdx.x == 0) result[u] = nan("");
        return;
    }
    const T* base = data + u * unit_stride;
    const double c = abs ? center[u] : 0.0;
    if (threadIdx.x == 0) {
        prefix_s = 0ull;
        rank_s = (long long)kth[u];
        found_s = 1;
    }
    unsigned long long mask = 0ull;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0u;
        __syncthreads();
        const unsigned long long prefix = prefix_s;
        for (i64 k = threadIdx.x; k < len; k += blockDim.x) {
            double v;
            if (!at_value((double)base[k * elem_stride], abs, c, &v)) continue;
            const unsigned long long key = at_key(v);
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255ull], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            long long r = rank_s;
            int b = 0;
            for (; b < 256; ++b) {
                if (r < (long long)hist[b]) break;
                r -= hist[b];
            }
            if (b == 256) {
                found_s = 0;
                b = 0;
            }
            rank_s = r;
            prefix_s = prefix | ((unsigned long long)b << shift);
        }
        mask |= 255ull << shift;
        __syncthreads();
    }
    if (threadIdx.x == 0) result[u] = found_s ? at_unkey(prefix_s) : nan("");
}

// One block per unit: count of finite values (mode 0), their sum (mode 1) or the sum of
// squared deviations from center[u] (mode 2), in double. Inactive units get NaN.
template <typename T>
__device__ void at_sum(const T* __restrict__ data, i64 len, i64 unit_stride, i64 elem_stride,
                       const double* __restrict__ center, int mode,
                       const int* __restrict__ active, double* __restrict__ result) {
    __shared__ double part[1024];
    const i64 u = blockIdx.x;
    if (!active[u]) {
        if (threadIdx.x == 0) result[u] = nan("");
        return;
    }
    const T* base = data + u * unit_stride;
    const double c = mode == 2 ? center[u] : 0.0;
    double acc = 0.0;
    for (i64 k = threadIdx.x; k < len; k += blockDim.x) {
        const double x = (double)base[k * elem_stride];
        if (!sc_finite(x)) continue;
        acc += mode == 0 ? 1.0 : (mode == 1 ? x : (x - c) * (x - c));
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) result[u] = part[0];
}

// Over the whole array, grid-stride: per-block partial sums of x (mode 1) or of
// (x - center)^2 (mode 2) over the finite values, summed in order on the host (deterministic).
template <typename T>
__device__ void at_partial(const T* __restrict__ data, i64 n, double center, int mode,
                           double* __restrict__ partial) {
    __shared__ double part[256];
    double acc = 0.0;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        const double x = (double)data[i];
        if (!sc_finite(x)) continue;
        acc += mode == 1 ? x : (x - center) * (x - center);
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = part[0];
}

#define AT_INSTANTIATE(T, S)                                                                     \
    extern "C" __global__ void atrous_start_##S(const T* in, const T* out, T* c, double blank, \
                                                i64 n) {                                         \
        at_start<T>(in, out, c, blank, n);                                                       \
    }                                                                                            \
    extern "C" __global__ void atrous_split_##S(const T* in, T* c, const T* s, T* w, i64 n) {  \
        at_split<T>(in, c, s, w, n);                                                             \
    }                                                                                            \
    extern "C" __global__ void atrous_add_##S(const T* w, T* out, const double* thr,           \
                                              const int* active, i64 n, i64 unit_div,           \
                                              i64 units) {                                       \
        at_add<T>(w, out, thr, active, n, unit_div, units);                                      \
    }                                                                                            \
    extern "C" __global__ void atrous_finish_##S(                                              \
        const T* in, const T* c, T* out, T* r, const unsigned long long* ws, int k,            \
        const double* thr, const int* active, i64 n, i64 unit_div, i64 units) {                \
        at_finish<T>(in, c, out, r, ws, k, thr, active, n, unit_div, units);                   \
    }                                                                                            \
    extern "C" __global__ void atrous_blank_##S(const T* in, T* out, i64 n) {                  \
        at_blank<T>(in, out, n);                                                                 \
    }                                                                                            \
    extern "C" __global__ void atrous_select_##S(const T* data, i64 len, i64 unit_stride,      \
                                                 i64 elem_stride, const double* kth,            \
                                                 const double* center, int abs,                 \
                                                 const int* active, double* result) {           \
        at_select<T>(data, len, unit_stride, elem_stride, kth, center, abs, active, result);     \
    }                                                                                            \
    extern "C" __global__ void atrous_partial_##S(const T* data, i64 n, double center,         \
                                                  int mode, double* partial) {                  \
        at_partial<T>(data, n, center, mode, partial);                                           \
    }                                                                                            \
    extern "C" __global__ void atrous_sum_##S(const T* data, i64 len, i64 unit_stride,         \
                                              i64 elem_stride, const double* center, int mode,  \
                                              const int* active, double* result) {              \
        at_sum<T>(data, len, unit_stride, elem_stride, center, mode, active, result);            \
    }

AT_INSTANTIATE(float, f32)
AT_INSTANTIATE(double, f64)
