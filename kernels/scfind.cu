// Element-wise steps of Smooth-and-Clip (src/cube/scfind/cuda.rs). The smoothing itself runs
// in filters.cu. Mask bytes: bit 0 MASKED (replaced before smoothing), bit 1 DETECTED, bit 7
// BLANK (input voxel is NaN; set and cleared on the device during a run).

#define SC_MASKED 1
#define SC_DETECTED 2
#define SC_BLANK 0x80

// Replacement kinds, numbered as scfind/cuda.rs.
#define SC_REPLACE_NONE 0
#define SC_REPLACE_SIGN 1
#define SC_REPLACE_COPYSIGN 2

__device__ __forceinline__ double sc_inf() { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ double sc_nan() { return __longlong_as_double(0x7ff8000000000000LL); }

#define SC_GRID_STRIDE(i, n) \
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)blockDim.x * gridDim.x)

// mask = (mask & (MASKED | DETECTED)) | (cube is NaN ? BLANK : 0)
template <typename T>
__device__ void init_blank(const T* __restrict__ cube, unsigned char* __restrict__ mask, i64 n) {
    SC_GRID_STRIDE(i, n) {
        unsigned char m = mask[i] & (SC_MASKED | SC_DETECTED);
        if (isnan((double)cube[i])) m |= SC_BLANK;
        mask[i] = m;
    }
}

// The value the smoothing sees: 0 for blanks and NaN, the replacement for masked voxels
// (copysign(value, x), or for kind SIGN ±value by the sign of x, x itself for ±0), rounded to T.
// Selects, no branches: the row kernels prepare a tile's 32 values a lane in a row. Rounding is
// symmetric, so ±(T)value and copysign((T)value, x) are the rounded ±value and copysign(value, x).
template <typename T>
__device__ __forceinline__ T sc_prepared(T x, unsigned char m, int kind, double value) {
    const T v = (T)value;
    const bool copy = kind == SC_REPLACE_COPYSIGN;
    const T signed_v = copy ? copysign(v, x) : (x < (T)0 ? -v : v);
    const bool rep = (m & SC_MASKED) && kind != SC_REPLACE_NONE && (copy || x != (T)0);
    return (m & SC_BLANK) || x != x ? (T)0 : (rep ? signed_v : x);
}

// w[4q .. 4q+3] (w 16-byte aligned for T = float: one vector load under NVRTC).
template <typename T>
__device__ __forceinline__ void sc_load4(const T* __restrict__ w, i64 q, double* v) {
    for (int k = 0; k < 4; ++k) v[k] = (double)w[4 * q + k];
}
#ifdef __CUDACC_RTC__
template <>
__device__ __forceinline__ void sc_load4<float>(const float* __restrict__ w, i64 q, double* v) {
    const float4 f = reinterpret_cast<const float4*>(w)[q];
    v[0] = f.x;
    v[1] = f.y;
    v[2] = f.z;
    v[3] = f.w;
}
#endif

// w[4q .. 4q+3] = v (w 16-byte aligned for T = float: one vector store under NVRTC).
template <typename T>
__device__ __forceinline__ void sc_store4(T* __restrict__ w, i64 q, const T* v) {
    for (int k = 0; k < 4; ++k) w[4 * q + k] = v[k];
}
#ifdef __CUDACC_RTC__
template <>
__device__ __forceinline__ void sc_store4<float>(float* __restrict__ w, i64 q, const float* v) {
    reinterpret_cast<float4*>(w)[q] = make_float4(v[0], v[1], v[2], v[3]);
}
#endif

// out = the prepared cube. Four voxels a step (one 4-byte mask word; one 16-byte load and store
// for float): a byte load a voxel kept this pass at 1.5x its floor. The three arrays are whole
// device allocations, so aligned; the last n % 4 voxels one at a time.
template <typename T>
__device__ void prepare(const T* __restrict__ cube, const unsigned char* __restrict__ mask,
                        T* __restrict__ out, i64 n, int kind, double value) {
    const i64 n4 = n / 4;
    const unsigned int* m4 = reinterpret_cast<const unsigned int*>(mask);
    SC_GRID_STRIDE(q, n4) {
        const unsigned int m = m4[q];
        double v[4];  // float -> double -> float is exact, NaN stays NaN
        sc_load4<T>(cube, q, v);
        T r[4];
        for (int k = 0; k < 4; ++k)
            r[k] = sc_prepared((T)v[k], (unsigned char)(m >> (8 * k)), kind, value);
        sc_store4<T>(out, q, r);
    }
    SC_GRID_STRIDE(j, n - 4 * n4) {
        const i64 i = 4 * n4 + j;
        out[i] = sc_prepared(cube[i], mask[i], kind, value);
    }
}

// Sample slots slot0 .. slot0+count: slot k is flat index k*c (kind 0, cadence c), the k-th
// point of the stride-c grid over (z, y, x) (kind 1), or flat index size - (k+1)*c (kind 2,
// SoFiA-2's backward walk). w holds planes from global plane zbase on.
template <typename T>
__device__ void gather(const T* __restrict__ w, const unsigned char* __restrict__ mask,
                       double* __restrict__ out, i64 slot0, i64 count, int kind, i64 c, i64 ny,
                       i64 nx, i64 zbase, i64 size) {
    const i64 plane = ny * nx;
    SC_GRID_STRIDE(j, count) {
        const i64 k = slot0 + j;
        i64 g;
        if (kind == 0) {
            g = k * c;
        } else if (kind == 2) {
            g = size - (k + 1) * c;
        } else {
            const i64 nys = (ny + c - 1) / c, nxs = (nx + c - 1) / c;
            const i64 z = k / (nys * nxs);
            const i64 r = k - z * nys * nxs;
            const i64 y = r / nxs;
            const i64 x = r - y * nxs;
            g = ((z * c) * ny + y * c) * nx + x * c;
        }
        const i64 l = g - zbase * plane;
        out[slot0 + j] = (mask[l] & SC_BLANK) ? sc_nan() : (double)w[l];
    }
}

// out[j] = w[idx[j]] (NaN for a blank voxel), j < n: a Dask block's sample positions, given as
// flat indices into the block (src/cube/scfind/cuda.rs, block_sample).
template <typename T>
__device__ void gather_at(const T* __restrict__ w, const unsigned char* __restrict__ mask,
                          const i64* __restrict__ idx, double* __restrict__ out, i64 n) {
    SC_GRID_STRIDE(j, n) {
        const i64 l = idx[j];
        out[j] = (mask[l] & SC_BLANK) ? sc_nan() : (double)w[l];
    }
}

// Per-block (min, max) of the non-blank finite values of w[0..n) into partial[2*block ..].
template <typename T>
__device__ void minmax(const T* __restrict__ w, const unsigned char* __restrict__ mask, i64 n,
                       double* __restrict__ partial) {
    __shared__ double lo_s[256];
    __shared__ double hi_s[256];
    double lo = sc_inf(), hi = -sc_inf();
    SC_GRID_STRIDE(i, n) {
        const double v = (double)w[i];
        if (!(mask[i] & SC_BLANK) && isfinite(v)) {
            lo = fmin(lo, v);
            hi = fmax(hi, v);
        }
    }
    lo_s[threadIdx.x] = lo;
    hi_s[threadIdx.x] = hi;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            lo_s[threadIdx.x] = fmin(lo_s[threadIdx.x], lo_s[threadIdx.x + s]);
            hi_s[threadIdx.x] = fmax(hi_s[threadIdx.x], hi_s[threadIdx.x + s]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = lo_s[0];
        partial[2 * blockIdx.x + 1] = hi_s[0];
    }
}

// Mask bit during a run: found by the current kernel, made MASKED when the kernel is done.
#define SC_NEW 4

__device__ __forceinline__ unsigned char sc_clip_one(double w, unsigned char m, double level,
                                                     int inclusive, unsigned char bits) {
    if (m & SC_BLANK) return m;
    const double a = fabs(w);
    return (inclusive ? (a >= level) : (a > level)) ? (unsigned char)(m | bits) : m;
}

// Mark every non-blank voxel with |w| above level (>= when inclusive) with `bits` (NEW |
// DETECTED while other planes still read the mask as it was, else MASKED | DETECTED). `vec`:
// w is 16-byte and mask 4-byte aligned, and four voxels go per step (one 4-byte mask word,
// written only where it changes).
template <typename T>
__device__ void clip(const T* __restrict__ w, unsigned char* __restrict__ mask, i64 n,
                     double level, int inclusive, int bits, int vec) {
    const unsigned char b = (unsigned char)bits;
    i64 done = 0;
    if (vec) {
        const i64 n4 = n / 4;
        unsigned int* m4 = reinterpret_cast<unsigned int*>(mask);
        SC_GRID_STRIDE(q, n4) {
            const unsigned int m = m4[q];
            double v[4];
            sc_load4<T>(w, q, v);
            unsigned int r = 0;
            for (int k = 0; k < 4; ++k) {
                const unsigned char mk = (unsigned char)(m >> (8 * k));
                r |= (unsigned int)sc_clip_one(v[k], mk, level, inclusive, b) << (8 * k);
            }
            if (r != m) m4[q] = r;
        }
        done = 4 * n4;
    }
    SC_GRID_STRIDE(j, n - done) {
        const i64 i = done + j;
        const unsigned char m = mask[i];
        const unsigned char r = sc_clip_one((double)w[i], m, level, inclusive, b);
        if (r != m) mask[i] = r;
    }
}

// SoFiA-2's one-sided MAD keeps the first in-range values of its walk (src/cube/stats/
// sofia2.rs): counts[c] = in-range values among s[c*chunk .. min((c+1)*chunk, n)) (range 0:
// not NaN, 1: x < 0, 2: x > 0, as the host rule), one block per chunk; nonfinite[0] += the
// in-range infinities (the host then takes the sample itself: the device selection skips them).
__device__ __forceinline__ bool sc_in_range(double x, int range) {
    return range == 1 ? (x < 0.0) : range == 2 ? (x > 0.0) : !isnan(x);
}

extern "C" __global__ void sc_range_counts(const double* __restrict__ s, i64 n, i64 chunk,
                                           int range, unsigned int* __restrict__ counts,
                                           unsigned int* __restrict__ nonfinite) {
    __shared__ unsigned int part[256];  // blockDim.x == 256
    const i64 c0 = blockIdx.x * chunk;
    const i64 c1 = c0 + chunk < n ? c0 + chunk : n;
    unsigned int cnt = 0, inf = 0;
    for (i64 i = c0 + threadIdx.x; i < c1; i += blockDim.x) {
        const double x = s[i];
        if (sc_in_range(x, range)) {
            ++cnt;
            if (!isfinite(x)) ++inf;
        }
    }
    if (inf) atomicAdd(nonfinite, inf);
    part[threadIdx.x] = cnt;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) part[threadIdx.x] += part[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) counts[blockIdx.x] = part[0];
}

// SoFiA 1's noise histograms (src/cube/stats/sofia1.rs) over the sample where it lies:
// counts[k] += the values x with edges[k] <= x < edges[k + 1] (the last bin closed), k found as
// the host's `noise::histogram` finds it (the number of edges <= x, less one, edges ascending);
// NaN and values outside [edges[0], edges[nb]] are not counted.
extern "C" __global__ void sc_edge_histogram(const double* __restrict__ s, i64 n,
                                             const double* __restrict__ edges, int nb,
                                             unsigned long long* __restrict__ counts) {
    const double lo = edges[0], hi = edges[nb];
    SC_GRID_STRIDE(i, n) {
        const double x = s[i];
        if (!(x >= lo && x <= hi)) continue;
        int a = 0, b = nb + 1;  // the first edge > x lies in [a, b)
        while (a < b) {
            const int m = (a + b) >> 1;
            if (edges[m] <= x)
                a = m + 1;
            else
                b = m;
        }
        atomicAdd(&counts[a - 1 < nb - 1 ? a - 1 : nb - 1], 1ull);
    }
}

// Keep only the bits `keep` of every mask byte (the mask as it goes down to the host).
extern "C" __global__ void keep_bits(unsigned char* mask, i64 n, int keep) {
    SC_GRID_STRIDE(i, n) { mask[i] &= (unsigned char)keep; }
}

// SoFiA-2's boxcar arithmetic (src/cube/scfind/running.rs), one thread per line, every
// operation rounded to T (the _rn intrinsics keep NVRTC from contracting into FMAs).
__device__ __forceinline__ float sc_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double sc_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sc_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sc_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float sc_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double sc_mul(double a, double b) { return __dmul_rn(a, b); }

template <typename T>
__device__ __forceinline__ T sc_at(const T* __restrict__ s, i64 p, i64 n, i64 inner) {
    if (p < 0 || p >= n) return (T)0;
    const T v = s[p * inner];
    return v != v ? (T)0 : v;  // NaN as 0 (no conversion to double for T = float)
}

#define SC_MAX_BOXCARS 4
// Shared ring bytes per thread (2r+1 slots of T per ring-fed pass). sofia2_boxcars: 16 KB a
// block of 256, so that the SM keeps a large L1 (its second read of each value hits it);
// sofia2_boxcar_rows: 16 KB a block of 128 or 64, beside its 16.5 KB of tiles.
#define SC_LINE_RING_BYTES 64
#define SC_ROW_RING_BYTES 128
// Steps whose loads are issued together (they do not depend on the running means).
#define SC_CHUNK 8

// Arguments of the fused boxcar kernels, mirrored by ScBoxcars in src/cube/scfind/cuda.rs.
struct ScBoxcars {
    i64 outer, n, inner;  // line L = (o, j) holds src[(o*n + p)*inner + j], p = 0..n
    i64 top, bottom;      // planes written, top down
    i64 r[SC_MAX_BOXCARS];
    double inv[SC_MAX_BOXCARS];  // 1/(2r+1) rounded to T
    int passes;  // > 1 only for whole lines (top = n-1, bottom = 0) without carries
    int has_carry_in, has_carry_out;
    int prep;       // sofia2_boxcar_rows: prepare the values on the way in (sc_prepared)
    int kind, pad;  // the replacement kind and value for prep
    double value;
};

// `passes` boxcars of radii r[0..passes) applied one after the other to a line, in one sweep:
// the result equals that many single boxcars bit for bit (the same roundings in the same
// order) while the line is read and written once. A boxcar: values outside 0..n (and NaN)
// read as 0; m[top] from carry_in (the value at top+1, given by the piece above) or, without
// it, the window sum from its far end (top+r down to top-r); then
// m[i] = m[i+1] + (x[i-r] - x[i+r+1]) * inv; carry_out gets m[bottom]. Position q of a pass
// is plane top - q. A ring-fed pass keeps the last 2r+1 values it was fed (its x[i+r+1]) in
// shared memory, slot c of pass k at ring[(base[k] + c) * stride], and runs r planes behind
// the pass feeding it.

// Feed v, the input of pass k0 at position q, down passes k0..passes-1. Returns true when the
// last pass has an output, left in v with its position in q.
template <typename T>
__device__ __forceinline__ bool sc_cascade(const ScBoxcars& p, int k0, T* ring, int stride,
                                           int* head, const int* base, T* m, T& v, i64& q) {
#pragma unroll
    for (int k = 0; k < SC_MAX_BOXCARS; ++k) {
        if (k < k0) continue;
        if (k >= p.passes) break;
        const T u = (p.top - q < 0 || v != v) ? (T)0 : v;
        const int r = (int)p.r[k], len = 2 * r + 1;
        T& slot = ring[(base[k] + head[k]) * stride];
        const T old = slot;  // the value fed 2r+1 positions ago
        slot = u;
        head[k] = head[k] + 1 == len ? 0 : head[k] + 1;
        q -= r;
        if (q < 0) return false;
        const T inv = (T)p.inv[k];
        if (q == 0) {
            // the window top+r .. top-r, oldest first (the slots of positions above top hold 0)
            T acc = (T)0;
            for (int c = 0; c < len; ++c) {
                const int h = head[k] + c < len ? head[k] + c : head[k] + c - len;
                acc = sc_add(acc, ring[(base[k] + h) * stride]);
            }
            m[k] = sc_mul(acc, inv);
        } else {
            m[k] = sc_add(m[k], sc_mul(sc_sub(u, old), inv));
        }
        v = m[k];
    }
    return true;
}

// Zeroed rings (values above top read as 0) of passes k0..passes-1; returns the slots used.
template <typename T>
__device__ __forceinline__ int sc_rings(const ScBoxcars& p, int k0, T* ring, int stride,
                                        int* head, int* base, T* m) {
    int slots = 0;
#pragma unroll
    for (int k = 0; k < SC_MAX_BOXCARS; ++k) {
        m[k] = (T)0;
        head[k] = 0;
        base[k] = slots;
        if (k >= k0 && k < p.passes) slots += 2 * (int)p.r[k] + 1;
    }
    for (int c = 0; c < slots; ++c) ring[c * stride] = (T)0;
    return slots;
}

// The fused boxcars with one thread per line (neighbouring threads: neighbouring lines, for
// inner > 1). Pass 1 reads src itself (no ring: any radius, carries, halo planes above top);
// passes 2.. are ring-fed. blockDim.x <= 256.
template <typename T>
__device__ void sofia2_boxcars(const T* __restrict__ src, T* __restrict__ dst, const ScBoxcars p,
                               const T* carry_in, T* carry_out) {
    constexpr int RS = SC_LINE_RING_BYTES / sizeof(T);
    __shared__ T ring[RS][256];
    const int P = p.passes;
    const i64 n = p.n, inner = p.inner, top = p.top, r1 = p.r[0];
    const T inv1 = (T)p.inv[0];
    const i64 last = top - p.bottom;  // last output position (plane top - last)
    i64 lag = 0;  // passes 2..P run this many planes behind pass 1
#pragma unroll
    for (int k = 1; k < SC_MAX_BOXCARS; ++k) lag += k < P ? p.r[k] : 0;
    const i64 lines = p.outer * inner;
    T* my = &ring[0][threadIdx.x];
    SC_GRID_STRIDE(L, lines) {
        const i64 o = L / inner, j = L - o * inner;
        const T* s = src + o * n * inner + j;
        T* d = dst + o * n * inner + j;
        T m[SC_MAX_BOXCARS];
        int head[SC_MAX_BOXCARS], base[SC_MAX_BOXCARS];
        sc_rings(p, 1, my, 256, head, base, m);
        // pass 1 has position t in m[0]: on down the passes, the last one's output written
        auto emit = [&](i64 t) {
            T v = m[0];
            i64 q = t;
            if (!sc_cascade(p, 1, my, 256, head, base, m, v, q) || q > last) return;
            d[(top - q) * inner] = v;
            if (q == last && p.has_carry_out) carry_out[L] = v;
        };
        if (p.has_carry_in) {
            m[0] = sc_add(carry_in[L], sc_mul(sc_sub(sc_at(s, top - r1, n, inner),
                                                     sc_at(s, top + r1 + 1, n, inner)),
                                              inv1));
        } else {
            T acc = (T)0;
            for (i64 q = top + r1; q >= top - r1; --q) acc = sc_add(acc, sc_at(s, q, n, inner));
            m[0] = sc_mul(acc, inv1);
        }
        emit(0);
        const i64 end = last + lag;
        for (i64 t0 = 1; t0 <= end; t0 += SC_CHUNK) {
            T lead[SC_CHUNK], trail[SC_CHUNK];
#pragma unroll
            for (int u = 0; u < SC_CHUNK; ++u) {
                const i64 i = top - (t0 + u);
                lead[u] = sc_at(s, i - r1, n, inner);
                trail[u] = sc_at(s, i + r1 + 1, n, inner);
            }
#pragma unroll
            for (int u = 0; u < SC_CHUNK; ++u) {
                if (t0 + u > end) break;
                m[0] = sc_add(m[0], sc_mul(sc_sub(lead[u], trail[u]), inv1));
                emit(t0 + u);
            }
        }
    }
}

// An asynchronous copy (cp.async, sm_80 on) of `size` bytes to shared memory: the first n from
// global src, zeros after (n = 0 reads nothing; src must still be a valid address). Loads in
// flight hold no registers. It lands by the thread's next sc_copy_wait; before that neither dst
// may be read nor src's memory relied upon. The host emulator lands it at random up to then.
__device__ __forceinline__ void sc_copy_async(void* dst, const void* src, unsigned n,
                                              unsigned size) {
#if defined(__CUDACC_RTC__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    if (size == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(n)
                     : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(n)
                     : "memory");
#elif defined(__CUDACC_RTC__)
    for (unsigned b = 0; b < size; ++b)
        ((unsigned char*)dst)[b] = b < n ? ((const unsigned char*)src)[b] : 0;
#else
    simt::async_copy(dst, src, n, size);
#endif
}

// This thread's asynchronous copies have landed (other lanes see them after a __syncwarp).
__device__ __forceinline__ void sc_copy_wait() {
#if defined(__CUDACC_RTC__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#elif !defined(__CUDACC_RTC__)
    simt::async_wait();
#endif
}

// Mask words a lane copies for its line's 32 positions of a tile (4-byte aligned, the bytes
// wanted start at 0..3 in them).
#define SC_ROW_MASK_WORDS 9

// The row kernels' tile: copies of input positions t0 .. t0+31 of the warp's 32 lines from l0
// into t (column c <- position t0 + c, plane n-1-t0-c; 0 beyond the line), issued here and
// landed (and prepared) by sc_row_tile_land; with p.prep the mask bytes of this
// lane's line into mw: word j holds bytes 4(w0 + j) .. of the mask, w0 = floor(a / 4) for a the
// byte of position t0+31; where all 32 positions are in the line and the words in the mask they
// are copied whole, else only words with bytes of the line at t0 .. top are read, and only up
// to the byte of t0 (the rest zero), so that nothing outside the mask is (mask 4-byte aligned,
// p.outer * n bytes).
template <typename T>
__device__ __forceinline__ void sc_row_tile_async(const T* __restrict__ src,
                                                  const unsigned char* __restrict__ mask,
                                                  T (*t)[33], unsigned* mw, const ScBoxcars& p,
                                                  i64 l0, int rows, i64 t0, int lane) {
    const i64 n = p.n;
    const i64 i = n - 1 - t0 - lane;
    const T* a = src + l0 * n + (i >= 0 ? i : 0);
    if (i >= 0 && rows == 32) {
        // every copy in bounds: a pointer stepped a row at a time (an address a copy, where
        // the checked form below spends a dozen instructions on each)
#pragma unroll 8
        for (int k = 0; k < 32; ++k, a += n) sc_copy_async(&t[k][lane], a, sizeof(T), sizeof(T));
    } else {
#pragma unroll 1
        for (int k = 0; k < 32; ++k) {
            const bool in = k < rows && i >= 0;
            sc_copy_async(&t[k][lane], in ? a + k * n : src, in ? sizeof(T) : 0, sizeof(T));
        }
    }
    if (p.prep) {
        const i64 line = (l0 + lane) * n, hi = line + n - 1 - t0;
        const i64 lo = line + (n - 32 - t0 > 0 ? n - 32 - t0 : 0), w0 = (line + n - 32 - t0) >> 2;
        const bool any = lane < rows && t0 < n;
        if (any && n - 32 - t0 >= 0 && w0 >= 0 && 4 * (w0 + SC_ROW_MASK_WORDS) <= p.outer * n) {
            // the 32 positions inside the line and every word inside the mask: whole words
            // (bytes of the neighbouring lines in the first and last are never used)
            const unsigned* a = (const unsigned*)mask + w0;
#pragma unroll
            for (int j = 0; j < SC_ROW_MASK_WORDS; ++j) sc_copy_async(mw + j, a + j, 4, 4);
            return;
        }
#pragma unroll
        for (int j = 0; j < SC_ROW_MASK_WORDS; ++j) {
            const i64 b = 4 * (w0 + j), m = hi + 1 - b;
            const bool in = any && b + 3 >= lo && m > 0;
            sc_copy_async(mw + j, in ? mask + b : mask, in ? (m < 4 ? (unsigned)m : 4u) : 0u, 4);
        }
    }
}

// Wait for this lane's copies of sc_row_tile_async (tile t, input positions t0 ..), then, with
// p.prep, prepare this lane's line of the tile from its mask words mw. The tile is then ready
// for every lane's steps.
template <typename T>
__device__ __forceinline__ void sc_row_tile_land(T (*t)[33], const unsigned* mw,
                                                 const ScBoxcars& p, i64 l0, i64 t0, int lane) {
    sc_copy_wait();
    __syncwarp();
    if (p.prep) {
        T* v = t[lane];
        // position c's mask byte is byte off + 31 - c of the words: positions 4j .. 4j+3 are
        // the bytes 3 .. 0 of words 7-j and 8-j shifted down by off bytes
        const int sh = 8 * (int)(((l0 + lane) * p.n + p.n - 32 - t0) & 3);
        unsigned w[SC_ROW_MASK_WORDS];
#pragma unroll
        for (int j = 0; j < SC_ROW_MASK_WORDS; ++j) w[j] = mw[j];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const unsigned q =
                (unsigned)((((unsigned long long)w[8 - j] << 32) | w[7 - j]) >> sh);
            if (q == 0) {
                // no mask bit on the 4 positions (most of a cube): the rule with the mask byte
                // a constant 0 folds to NaN -> 0
#pragma unroll
                for (int u = 0; u < 4; ++u) v[4 * j + u] = sc_prepared(v[4 * j + u], 0, p.kind, p.value);
                continue;
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int c = 4 * j + u;
                v[c] = sc_prepared(v[c], (unsigned char)(q >> (24 - 8 * u)), p.kind, p.value);
            }
        }
        __syncwarp();  // the mask words are copied over next
    }
}

// Warps a block of sofia2_boxcar_rows: the shared tiles and rings stay within 48 KB.
#define SC_ROW_WARPS(T) (16 / (int)sizeof(T))

// The fused boxcars along contiguous lines (inner = 1, whole lines, no carries), every pass
// ring-fed: each warp takes 32 lines, one a lane, and moves them 32 positions at a time
// through a 32x32 tile in shared memory, so that loads and stores are coalesced (no
// transposes). The tile column of an input position is overwritten by the output of the same
// column: outputs lag inputs by the sum of the radii, and the tiles are offset by it. With
// `prep`, the values are prepared on the way in (mask laid out as src). Launch: blockDim.x =
// 32 * SC_ROW_WARPS(T); the radii's rings within SC_ROW_RING_BYTES / sizeof(T) slots.
template <typename T>
__device__ void sofia2_boxcar_rows(const T* __restrict__ src,
                                   const unsigned char* __restrict__ mask, T* __restrict__ dst,
                                   const ScBoxcars p) {
    constexpr int W = SC_ROW_WARPS(T), RS = SC_ROW_RING_BYTES / sizeof(T);
    __shared__ T tile[W][32][33];
    __shared__ T ring[RS][W * 32];
    __shared__ unsigned mwords[W][32][SC_ROW_MASK_WORDS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const i64 n = p.n, lines = p.outer;
    i64 lag = 0;  // the last pass's output position trails the input's by this much
#pragma unroll
    for (int k = 0; k < SC_MAX_BOXCARS; ++k) lag += k < p.passes ? p.r[k] : 0;
    T(*t)[33] = tile[warp];
    T* my = &ring[0][threadIdx.x];
    const i64 groups = (lines + 31) / 32;
    for (i64 g = (i64)blockIdx.x * W + warp; g < groups; g += (i64)gridDim.x * W) {
        const i64 l0 = g * 32;
        const int rows = lines - l0 < 32 ? (int)(lines - l0) : 32;
        T m[SC_MAX_BOXCARS];
        int head[SC_MAX_BOXCARS], base[SC_MAX_BOXCARS];
        sc_rings(p, 0, my, W * 32, head, base, m);
        auto load = [&](i64 t0) {
            __syncwarp();  // every lane's steps are done with the tile
            sc_row_tile_async(src, mask, t, mwords[warp][lane], p, l0, rows, t0, lane);
            sc_row_tile_land(t, mwords[warp][lane], p, l0, t0, lane);
        };
        // input position t0 + c of this lane's line through the passes; the output (position
        // t0 + c - lag) replaces it in the tile
        auto run = [&](i64 t0, int cols) {
            for (int c = 0; c < cols; ++c) {
                T v = t[lane][c];
                i64 q = t0 + c;
                sc_cascade(p, 0, my, W * 32, head, base, m, v, q);
                t[lane][c] = v;
            }
        };
        load(0);
        run(0, (int)lag);  // lag < 32: no output yet
        for (i64 q0 = 0; q0 < n; q0 += 32) {
            load(q0 + lag);
            run(q0 + lag, 32);
            __syncwarp();
            const i64 i = n - 1 - q0 - lane;
            T* o = dst + l0 * n + i;
            if (i >= 0) {
#pragma unroll 8
                for (int k = 0; k < rows; ++k) o[k * n] = t[k][lane];
            }
        }
    }
}

// ---- Boxcars of one radius R with the rings in registers (compile time R) ----
// The same arithmetic as sc_cascade, in the same order, for chains of P passes that share one
// radius (SoFiA-2's spatial Gaussians: n boxcars of radius r; its spectral boxcar: one); R and
// P are compile-time, so that an unrolled step is the passes' arithmetic and nothing else (a
// kernel of more passes than the chain's, its extra results not selected, spent a quarter of a
// 3-boxcar chain's steps on a fourth pass, and three quarters of a spectral boxcar's). Every
// pass is fed in order, position t of pass 0 being pass k's position t - kR; a pass fed before
// its own start (t - kR < 0) or past the line's end (> top) reads 0, as the ring slots and
// sc_at of the generic kernels do, so the shift register of the last 2R+1 inputs (oldest
// first) holds those zeros exactly where the generic ring holds its zeroed slots. The steps of
// a chunk are unrolled (the shifts are then renamings, no moves); the few checked steps at the
// ends of a line run in a loop.
#define SC_FIXED_MAX_R 4         // radii of the fused chains (up to SC_MAX_BOXCARS passes)
#define SC_FIXED_MAX_R_SINGLE 8  // radii of a single pass along lines (the spectral boxcar)

template <typename T, int R, int P>
struct ScFixedChain {
    static constexpr int L = 2 * R + 1;
    static constexpr int LAG = P * R;  // the last pass's output trails pass 0's input
    T ring[P][L];
    T m[P];
    T inv;

    __device__ __forceinline__ void reset(const ScBoxcars& p) {
        inv = (T)p.inv[0];
#pragma unroll
        for (int k = 0; k < P; ++k) {
            m[k] = (T)0;
#pragma unroll
            for (int c = 0; c < L; ++c) ring[k][c] = (T)0;
        }
    }

    // Feed v, pass 0's input at position t, through the passes; returns the last pass's output
    // at position t - LAG (meaningful when that is >= 0). CHECK = false only where every pass
    // is past its first output (t >= LAG + 1) and t <= top.
    template <bool CHECK>
    __device__ __forceinline__ T step(T v, int t, int top) {
#pragma unroll
        for (int k = 0; k < P; ++k) {
            const int tin = t - k * R;
            T u = v != v ? (T)0 : v;
            if (CHECK && (tin < 0 || tin > top)) u = (T)0;
            const T old = ring[k][0];
#pragma unroll
            for (int c = 0; c + 1 < L; ++c) ring[k][c] = ring[k][c + 1];
            ring[k][L - 1] = u;
            if (CHECK && tin - R <= 0) {
                if (tin - R == 0) {
                    // the window -R..R, oldest first (positions above the top hold 0)
                    T acc = (T)0;
#pragma unroll
                    for (int c = 0; c < L; ++c) acc = sc_add(acc, ring[k][c]);
                    m[k] = sc_mul(acc, inv);
                }
            } else {
                m[k] = sc_add(m[k], sc_mul(sc_sub(u, old), inv));
            }
            v = m[k];
        }
        return v;
    }
};

// Steps of an unrolled chunk of sofia2_boxcar_lines_fixed: a multiple of 2R+1 (the shift
// registers end a chunk where they started), at least 8 loads in flight a thread.
template <int R>
struct ScFixedSteps {
    static constexpr int L = 2 * R + 1;
    static constexpr int U = L * ((8 + L - 1) / L);
};

// P boxcars of radius R (p.passes = P) over whole lines (top = n-1, bottom = 0) of (outer, n,
// inner), one thread per line (neighbouring threads: neighbouring lines, coalesced for inner >
// 1); no carry in, carry_out (the running mean at plane 0) with has_carry_out. Each value is
// read once (the generic kernel reads pass 1's input twice). Requires n + P*R < 2^31.
template <typename T, int R, int P>
__device__ void sofia2_boxcar_lines_fixed(const T* __restrict__ src, T* __restrict__ dst,
                                          const ScBoxcars p, T* __restrict__ carry_out) {
    constexpr int U = ScFixedSteps<R>::U;
    constexpr int lag = ScFixedChain<T, R, P>::LAG;
    const int top = (int)p.n - 1, end = top + lag;
    const i64 inner = p.inner, lines = p.outer * inner;
    SC_GRID_STRIDE(line, lines) {
        const i64 o = line / inner, j = line - o * inner;
        // position t: plane top - t
        const T* s = src + (o * p.n + top) * inner + j;
        T* d = dst + (o * p.n + top) * inner + j;
        ScFixedChain<T, R, P> ch;
        ch.reset(p);
        int t = 0;
        // checked steps while a pass has no output yet, then unrolled chunks, then the end
        const int fast = lag + 1;
        for (; t < fast && t <= end; ++t) {
            const T w = ch.template step<true>(t <= top ? s[-(i64)t * inner] : (T)0, t, top);
            const int q = t - lag;
            if (q < 0) continue;
            d[-(i64)q * inner] = w;
            if (q == top && p.has_carry_out) carry_out[line] = w;
        }
        for (; t + U - 1 <= top; t += U) {
            T v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = s[-(i64)(t + u) * inner];
#pragma unroll
            for (int u = 0; u < U; ++u)
                d[-(i64)(t + u - lag) * inner] = ch.template step<false>(v[u], t + u, top);
        }
        for (; t <= end; ++t) {
            const T w = ch.template step<true>(t <= top ? s[-(i64)t * inner] : (T)0, t, top);
            const int q = t - lag;
            d[-(i64)q * inner] = w;
            if (q == top && p.has_carry_out) carry_out[line] = w;
        }
    }
}

// sofia2_boxcar_rows for P passes (p.passes = P) of radius R, the rings in registers
// (ScFixedChain): the same tiles, launch and results. Requires n + P*R < 2^31. The tiles are
// double-buffered and copied asynchronously: a warp's next tile is in flight while it runs and
// stores the current one (loads no longer wait behind the running means). With p.prep the
// values are prepared in the tile once it has landed (each lane its own line, from the mask
// words of sc_row_tile_async); positions past the line's end may then hold anything, but the
// checked steps read them as 0. A lane's copies write its own column of a tile, which the other
// lanes read only in the steps (the __syncwarp after them orders the next copies into it).
template <typename T, int R, int P>
__device__ void sofia2_boxcar_rows_fixed(const T* __restrict__ src,
                                         const unsigned char* __restrict__ mask,
                                         T* __restrict__ dst, const ScBoxcars p) {
    constexpr int W = SC_ROW_WARPS(T);
    __shared__ T tile[2][W][32][33];
    __shared__ unsigned mwords[W][32][SC_ROW_MASK_WORDS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const i64 n = p.n, lines = p.outer;
    constexpr int lag = ScFixedChain<T, R, P>::LAG;
    const int top = (int)n - 1;
    unsigned* mw = mwords[warp][lane];
    const i64 groups = (lines + 31) / 32;
    for (i64 g = (i64)blockIdx.x * W + warp; g < groups; g += (i64)gridDim.x * W) {
        const i64 l0 = g * 32;
        const int rows = lines - l0 < 32 ? (int)(lines - l0) : 32;
        auto copy = [&](int b, int t0) {
            sc_row_tile_async(src, mask, tile[b][warp], mw, p, l0, rows, t0, lane);
        };
        // wait for tile b (input positions t0 ..), then prepare this lane's line of it
        auto land = [&](int b, int t0) { sc_row_tile_land(tile[b][warp], mw, p, l0, t0, lane); };
        ScFixedChain<T, R, P> ch;
        ch.reset(p);
        copy(0, 0);
        land(0, 0);
        copy(1, lag);
#pragma unroll 1
        for (int c = 0; c < lag; ++c) (void)ch.template step<true>(tile[0][warp][lane][c], c, top);
        int b = 1;
        for (int q0 = 0; q0 < (int)n; q0 += 32, b ^= 1) {
            const int t0 = q0 + lag;
            land(b, t0);
            if (q0 + 32 < (int)n) copy(b ^ 1, t0 + 32);
            T(*t)[33] = tile[b][warp];
            if (t0 > lag && t0 + 31 <= top) {
#pragma unroll
                for (int c = 0; c < 32; ++c)
                    t[lane][c] = ch.template step<false>(t[lane][c], t0 + c, top);
            } else {
#pragma unroll 1
                for (int c = 0; c < 32; ++c)
                    t[lane][c] = ch.template step<true>(t[lane][c], t0 + c, top);
            }
            __syncwarp();
            const i64 i = n - 1 - q0 - lane;
            T* o = dst + l0 * n + i;
            if (i >= 0) {
#pragma unroll 8
                for (int k = 0; k < rows; ++k) o[k * n] = t[k][lane];
            }
        }
    }
}

// dst (planes, cols, rows) = each plane of src (planes, rows, cols) transposed, through 32x32
// tiles in shared memory (reads and writes coalesced). With `prep`, the values are prepared on
// the way (sc_prepared with mask, laid out as src): the prepare pass folded into the first
// transpose of the x boxcars. One-dimensional launch: block b of the grid-stride loop takes
// tile b; blockDim.x a multiple of 32 (rows of the tile per step).
template <typename T>
__device__ void sc_transpose(const T* __restrict__ src, const unsigned char* __restrict__ mask,
                             T* __restrict__ dst, i64 planes, i64 rows, i64 cols, int prep,
                             int kind, double value) {
    __shared__ T tile[32][33];
    const i64 ty = (rows + 31) / 32, tx = (cols + 31) / 32;
    const i64 tiles = planes * ty * tx;
    const int lane = threadIdx.x % 32, step = blockDim.x / 32;
    for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const i64 p = t / (ty * tx), rem = t - p * ty * tx;
        const i64 r0 = (rem / tx) * 32, c0 = (rem % tx) * 32;
        for (int k = threadIdx.x / 32; k < 32; k += step) {
            const i64 r = r0 + k, c = c0 + lane;
            if (r < rows && c < cols) {
                const i64 i = (p * rows + r) * cols + c;
                tile[k][lane] = prep ? sc_prepared(src[i], mask[i], kind, value) : src[i];
            }
        }
        __syncthreads();
        for (int k = threadIdx.x / 32; k < 32; k += step) {
            const i64 c = c0 + k, r = r0 + lane;
            if (r < rows && c < cols) dst[(p * cols + c) * rows + r] = tile[lane][k];
        }
        __syncthreads();
    }
}

#define SC_INSTANTIATE(T, S)                                                                    \
    extern "C" __global__ void init_blank_##S(const T* cube, unsigned char* mask, i64 n) {       \
        init_blank<T>(cube, mask, n);                                                           \
    }                                                                                           \
    extern "C" __global__ void prepare_##S(const T* cube, const unsigned char* mask, T* out,     \
                                           i64 n, int kind, double value) {                     \
        prepare<T>(cube, mask, out, n, kind, value);                                            \
    }                                                                                           \
    extern "C" __global__ void gather_##S(const T* w, const unsigned char* mask, double* out,    \
                                          i64 slot0, i64 count, int kind, i64 c, i64 ny,        \
                                          i64 nx, i64 zbase, i64 size) {                        \
        gather<T>(w, mask, out, slot0, count, kind, c, ny, nx, zbase, size);                    \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256, 4) sofia2_boxcars_##S(                    \
        const T* src, T* dst, ScBoxcars p,                                                      \
                                                  const T* carry_in, T* carry_out) {            \
        sofia2_boxcars<T>(src, dst, p, carry_in, carry_out);                                    \
    }                                                                                           \
    extern "C" __global__ void sofia2_boxcar_rows_##S(const T* src, const unsigned char* mask,   \
                                                      T* dst, ScBoxcars p) {                    \
        sofia2_boxcar_rows<T>(src, mask, dst, p);                                               \
    }                                                                                           \
    extern "C" __global__ void sc_transpose_##S(const T* src, const unsigned char* mask, T* dst,  \
                                                i64 planes, i64 rows, i64 cols, int prep,       \
                                                int kind, double value) {                       \
        sc_transpose<T>(src, mask, dst, planes, rows, cols, prep, kind, value);                 \
    }                                                                                           \
    extern "C" __global__ void gather_at_##S(const T* w, const unsigned char* mask,             \
                                             const i64* idx, double* out, i64 n) {              \
        gather_at<T>(w, mask, idx, out, n);                                                     \
    }                                                                                           \
    extern "C" __global__ void minmax_##S(const T* w, const unsigned char* mask, i64 n,          \
                                          double* partial) {                                    \
        minmax<T>(w, mask, n, partial);                                                         \
    }                                                                                           \
    extern "C" __global__ void clip_##S(const T* w, unsigned char* mask, i64 n, double level,    \
                                        int inclusive, int bits, int vec) {                     \
        clip<T>(w, mask, n, level, inclusive, bits, vec);                                       \
    }

// The register-ring boxcars: sofia2_boxcar_{rows,lines}_r<R>p<P>_<S> for R <= SC_FIXED_MAX_R
// and P <= SC_MAX_BOXCARS, and sofia2_boxcar_lines_r<R>p1_<S> (one pass along lines) for R up
// to SC_FIXED_MAX_R_SINGLE (the Rust side's fixed_groups picks them). The lines kernels take
// sofia2_boxcars' arguments (no carry in: whole lines).
#define SC_FIXED_LINES(T, S, R, P)                                                              \
    extern "C" __global__ void __launch_bounds__(256) sofia2_boxcar_lines_r##R##p##P##_##S(     \
        const T* src, T* dst, ScBoxcars p, const T* /* carry_in */, T* carry_out) {             \
        sofia2_boxcar_lines_fixed<T, R, P>(src, dst, p, carry_out);                             \
    }
#define SC_FIXED_ROWS(T, S, R, P)                                                               \
    extern "C" __global__ void sofia2_boxcar_rows_r##R##p##P##_##S(                             \
        const T* src, const unsigned char* mask, T* dst, ScBoxcars p) {                         \
        sofia2_boxcar_rows_fixed<T, R, P>(src, mask, dst, p);                                   \
    }
#define SC_ROWS_f32(R, P) SC_FIXED_ROWS(float, f32, R, P)
#define SC_ROWS_f64(R, P) SC_FIXED_ROWS(double, f64, R, P)
#define SC_LINES_f32(R, P) SC_FIXED_LINES(float, f32, R, P)
#define SC_LINES_f64(R, P) SC_FIXED_LINES(double, f64, R, P)

// NVRTC spends ~0.3 s a register-ring kernel and there are 72, of which a call uses a few: they
// are compiled on demand, a call's own set in a module of their own (src/cube/scfind/
// cuda_fixed.rs defines SC_FIXED_LIST as, e.g., SC_ROWS_f32(1, 3) SC_LINES_f32(7, 1)). The
// module built without SC_FIXED_LIST holds every other kernel.
#ifdef SC_FIXED_LIST
SC_FIXED_LIST
#else
SC_INSTANTIATE(float, f32)
SC_INSTANTIATE(double, f64)
#endif
