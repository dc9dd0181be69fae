// Separable 1-D filters along one axis of an array viewed as (outer, n, inner):
//   out[o, i, k] = scale * sum_j w[j] * x[o, ext(i + offset + j*step), k]
// with f64 accumulation. Threads run along the contiguous dimension (i when inner == 1, else
// k), so every tap's loads are coalesced; neighbouring taps hit L1.
//
// Chunking along the filtered axis: the output holds global rows out_row0 .. out_row0+n_out,
// the input holds global rows in_row0 .. in_row0+n_in (enough halo for every tap), and the
// boundary extension is taken over the whole axis of length n_global.
//
// One launch covers lines s0 .. s1 of the slow dimension and f0 .. f1 of the fast one (the
// host cuts long work into launches of bounded time, so that Ctrl-C can stop it: issue 17).

template <typename T>
__device__ void correlate_axis(const T* __restrict__ in, T* __restrict__ out, i64 outer,
                               i64 n_out, i64 inner, i64 n_in, i64 out_row0, i64 in_row0,
                               i64 n_global, const double* __restrict__ w, int taps, i64 offset,
                               i64 step, double scale, int mode, double cval, i64 s0, i64 s1,
                               i64 f0, i64 f1) {
    const bool last = (inner == 1);
    const i64 f = f0 + blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (f >= f1) return;
    for (i64 s = s0 + blockIdx.y; s < s1; s += gridDim.y) {
        i64 o, i, k;
        if (last) {
            o = s;
            i = f;
            k = 0;
        } else {
            o = s / n_out;
            i = s - o * n_out;
            k = f;
        }
        const T* line = in + o * n_in * inner + k;
        const i64 p0 = out_row0 + i + offset;  // global position of the first tap
        const i64 p1 = p0 + (i64)(taps - 1) * step;
        double acc = 0.0;
        if (p0 >= 0 && p1 < n_global) {
            const T* x = line + (p0 - in_row0) * inner;
            const i64 stride = step * inner;
            for (int j = 0; j < taps; ++j) acc += __ldg(w + j) * (double)x[j * stride];
        } else {
            for (int j = 0; j < taps; ++j) {
                const i64 q = sc_extend_index(p0 + j * step, n_global, mode);
                const double v = q < 0 ? cval : (double)line[(q - in_row0) * inner];
                acc += __ldg(w + j) * v;
            }
        }
        out[(o * n_out + i) * inner + k] = (T)(acc * scale);
    }
}

#define FILTERS_INSTANTIATE(T, S)                                                              \
    extern "C" __global__ void correlate_##S(                                                  \
        const T* in, T* out, i64 outer, i64 n_out, i64 inner, i64 n_in, i64 out_row0,          \
        i64 in_row0, i64 n_global, const double* w, int taps, i64 offset, i64 step,            \
        double scale, int mode, double cval, i64 s0, i64 s1, i64 f0, i64 f1) {                 \
        correlate_axis<T>(in, out, outer, n_out, inner, n_in, out_row0, in_row0, n_global, w,  \
                          taps, offset, step, scale, mode, cval, s0, s1, f0, f1);              \
    }

// Tiled passes (filters/cuda.rs picks them when their tile fits in shared memory). A block
// stages the inputs its outputs read in shared memory as double, each converted once and with
// the boundary extension resolved once per staged element; each thread then computes R outputs
// that share taps (R consecutive outputs of one phase i mod step), keeping a window of R staged
// inputs in registers: one shared load per tap for R outputs instead of one global load per tap
// and output. Every output sums fma(w[j], x[j], acc) for j = 0 .. taps-1 from acc = 0, the order
// correlate_axis uses, so the results are the same to the bit.

// The value at global row p of a line whose chunk starts at global row in_row0.
template <typename T>
__device__ __forceinline__ double staged_value(const T* __restrict__ line, i64 p, i64 in_row0,
                                               i64 n_global, i64 inner, int mode, double cval) {
    if (p < 0 || p >= n_global) {
        p = sc_extend_index(p, n_global, mode);
        if (p < 0) return cval;
    }
    return (double)line[(p - in_row0) * inner];
}

// Stage values src[m·stride] for m = m0, m0 + dm, ... < need into dst[m·pitch], all inside the
// array: four loads are issued before the first store, so that each thread keeps several loads
// in flight (one at a time leaves the pass waiting on memory latency).
template <typename T>
__device__ __forceinline__ void stage_rows(const T* __restrict__ src, i64 stride, int need, int m0,
                                           int dm, double* dst, int pitch) {
    int m = m0;
    for (; m + 3 * dm < need; m += 4 * dm) {
        const double a = (double)src[m * stride];
        const double b = (double)src[(m + dm) * stride];
        const double c = (double)src[(m + 2 * dm) * stride];
        const double d = (double)src[(m + 3 * dm) * stride];
        dst[m * pitch] = a;
        dst[(m + dm) * pitch] = b;
        dst[(m + 2 * dm) * pitch] = c;
        dst[(m + 3 * dm) * pitch] = d;
    }
    for (; m < need; m += dm) dst[m * pitch] = (double)src[m * stride];
}

// The filter's weights staged in shared memory by a block of 256 threads; the staged values
// start after them (at an even index: 16-byte aligned).
__device__ __forceinline__ double* stage_weights(double* sh, const double* __restrict__ w,
                                                 int taps, int tid) {
    for (int j = tid; j < taps; j += 256) sh[j] = w[j];
    return sh + ((taps + 1) & ~1);
}

// R outputs from staged inputs: output r reads at(r + j) for tap j (at: the k-th staged value
// of the window, as double).
template <int R, class At>
__device__ __forceinline__ void window_sums(At at, const double* w, int taps, double acc[R]) {
    double v[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        acc[r] = 0.0;
        v[r] = at(r);
    }
    for (int j = 0; j < taps; ++j) {
        const double wj = w[j];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = fma(wj, v[r], acc[r]);
#pragma unroll
        for (int r = 0; r + 1 < R; ++r) v[r] = v[r + 1];
        if (j + 1 < taps) v[R - 1] = at(j + R);
    }
}

// window_sums over values d apart from s[0].
template <int R>
__device__ __forceinline__ void window_sums(const double* s, int d, const double* w, int taps,
                                            double acc[R]) {
    window_sums<R>([&](int k) { return s[k * d]; }, w, taps, acc);
}

// How a tiled pass stores its outputs r (flat index at + r·stride of `out`; those with
// first + r·inc < bound): as they are, or (the à trous scale's last pass,
// src/cube/atrous/cuda.rs) as the wavelet plane
// out = c − v with c updated in place, which saves writing the smoothed plane and reading it
// back. `fetch` runs before the sums, so that the loads it issues wait behind them.
template <typename T>
struct StorePlain {
    template <int R>
    struct Ahead {};
    template <int R>
    __device__ __forceinline__ void fetch(Ahead<R>&, i64, i64, int, int, int) const {}
    template <int R>
    __device__ __forceinline__ void put(T* out, const Ahead<R>&, i64 at, i64 stride, int first,
                                        int inc, int bound, const double* acc,
                                        double scale) const {
        T* o = out + at;  // stepped, not out + at + r·stride: no 64-bit product an output
#pragma unroll
        for (int r = 0; r < R; ++r, o += stride)
            if (first + r * inc < bound) *o = (T)(acc[r] * scale);
    }
};
template <typename T>
struct StoreSplit {
    T* c;
    const T* data;
    template <int R>
    struct Ahead {
        T x[R], c[R];
    };
    template <int R>
    __device__ __forceinline__ void fetch(Ahead<R>& a, i64 at, i64 stride, int first, int inc,
                                          int bound) const {
        const T* d = data + at;
        const T* e = c + at;
#pragma unroll
        for (int r = 0; r < R; ++r, d += stride, e += stride)
            if (first + r * inc < bound) {
                a.x[r] = *d;
                a.c[r] = *e;
            }
    }
    template <int R>
    __device__ __forceinline__ void put(T* out, const Ahead<R>& a, i64 at, i64 stride, int first,
                                        int inc, int bound, const double* acc,
                                        double scale) const {
        T* o = out + at;
        T* e = c + at;
        // The smoothed value is rounded to T before the split subtracts it, as in the CPU
        // engine and the unfused passes: for double, __dmul_rn keeps acc·scale from being
        // fused into c − s (a float's cast rounds it already).
#pragma unroll
        for (int r = 0; r < R; ++r, o += stride, e += stride)
            if (first + r * inc < bound) {
                const double v = acc[r];
                const T s = sizeof(T) == 8 ? (T)__dmul_rn(v, scale) : (T)(v * scale);
                sc_atrous_split<T>(a.x[r], a.c[r], s, o, e);
            }
    }
};

// Along an axis with inner > 1: a block of 32 x 8 threads takes 32 columns (coalesced) and a
// tile of 8R outputs of one phase p (rows p + (t0 + t)·step). Grid: x the column blocks, y the
// tiles q0.. q1 of a phase, z the units u = o·step + p from s0 to s1 (each looping past the
// grid): no 64-bit division per tile, which at a few outputs a thread cost more than the sums
// (host launches cut the units, or the tiles when there is one unit). Shared memory:
// taps weights, then (8R + taps − 1) rows × 32.
template <typename T, int R, class Store>
__device__ void correlate_cols(const T* __restrict__ in, T* __restrict__ out, i64 n_out,
                               i64 inner, i64 n_in, i64 out_row0, i64 in_row0, i64 n_global,
                               const double* __restrict__ w, int taps, i64 offset, i64 step,
                               double scale, int mode, double cval, i64 s0, i64 s1, i64 q0,
                               i64 q1, Store store) {
    SC_DYNAMIC_SHARED(double, sh);
    const int TR = 8 * R;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const double* ws = sh;
    double* tile = stage_weights(sh, w, taps, ty * 32 + tx);
    const i64 k = blockIdx.x * 32 + tx;
    const bool col = k < inner;
    const int st = (int)step, rows_out = (int)n_out;  // n_out + step < 2^31 (filters/cuda.rs)
    for (i64 u = s0 + blockIdx.z; u < s1; u += gridDim.z)
    for (i64 q = q0 + blockIdx.y; q < q1; q += gridDim.y) {
        const int t0 = (int)q * TR;
        const int oi = (int)u / st;  // u < 2^31 (filters/cuda.rs)
        const int p = (int)u - oi * st;
        const i64 o = oi;
        const int left = (rows_out - p + st - 1) / st - t0;  // outputs of the phase from t0 on
        const int nt = left < TR ? left : TR;
        __syncthreads();  // the last tile's reads (and the weights) are done
        if (nt <= 0) continue;  // the same for the whole block
        const T* line = in + o * n_in * inner + k;
        const int need = nt + taps - 1;  // staged rows read by a kept output
        const i64 first = out_row0 + p + (i64)t0 * st + offset;
        if (col && first >= 0 && first + (i64)(need - 1) * st < n_global)
            stage_rows(line + (first - in_row0) * inner, step * inner, need, ty, 8, tile + tx, 32);
        else if (col)
            for (int m = ty; m < need; m += 8)
                tile[m * 32 + tx] = staged_value(line, first + (i64)m * st, in_row0, n_global,
                                                 inner, mode, cval);
        __syncthreads();
        const int t = ty * R;
        if (!col || t >= nt) continue;
        const i64 at = o * n_out * inner + k + (i64)(p + (t0 + t) * st) * inner;
        const i64 stride = (i64)st * inner;
        typename Store::template Ahead<R> ahead;
        store.template fetch<R>(ahead, at, stride, t, 1, nt);
        double acc[R];
        window_sums<R>(tile + t * 32 + tx, 32, ws, taps, acc);
        store.template put<R>(out, ahead, at, stride, t, 1, nt, acc, scale);
    }
}

// Along the last axis (inner == 1): a block of 256 threads takes a window of 256·R outputs of
// one line (grid: x the windows w0 .. w1 of a line, y the lines s0 .. s1, each looping past the
// grid; host launches cut the lines, or the windows of a single line) and stages
// its inputs contiguously. Thread c computes outputs c % step + (c / step · R + r)·step (step
// divides 256), or output c when R == 1 (any step). Shared memory: taps weights, then
// 256·R + (taps − 1)·step values.
template <typename T, int R, class Store>
__device__ void correlate_line(const T* __restrict__ in, T* __restrict__ out, i64 n_out, i64 n_in,
                               i64 out_row0, i64 in_row0, i64 n_global,
                               const double* __restrict__ w, int taps, i64 offset, i64 step,
                               double scale, int mode, double cval, i64 s0, i64 s1, i64 w0,
                               i64 w1, Store store) {
    SC_DYNAMIC_SHARED(double, sh);
    const int TW = 256 * R;
    const int c = threadIdx.x;
    const double* ws = sh;
    double* tile = stage_weights(sh, w, taps, c);
    const int st = (int)step;
    const int span = (taps - 1) * st;
    const int u0 = R == 1 ? c : c % st + (c / st) * R * st;
    for (i64 wi = w0 + blockIdx.x; wi < w1; wi += gridDim.x)
    for (i64 o = s0 + blockIdx.y; o < s1; o += gridDim.y) {
        const i64 i0 = wi * TW;
        const i64 left = n_out - i0;
        const int nv = left < TW ? (int)left : TW;
        const int need = nv + span;  // staged values read by a kept output
        const i64 first = out_row0 + i0 + offset;
        __syncthreads();
        const T* line = in + o * n_in;
        if (first >= 0 && first + need - 1 < n_global)
            stage_rows(line + (first - in_row0), 1, need, c, 256, tile, 1);
        else
            for (int m = c; m < need; m += 256)
                tile[m] = staged_value(line, first + m, in_row0, n_global, 1, mode, cval);
        __syncthreads();
        const i64 at = o * n_out + i0 + u0;
        typename Store::template Ahead<R> ahead;
        store.template fetch<R>(ahead, at, st, u0, st, nv);
        double acc[R];
        window_sums<R>(tile + u0, st, ws, taps, acc);
        store.template put<R>(out, ahead, at, st, u0, st, nv, acc, scale);
    }
}

// put(m, get(m)) for m = tid, tid + S, ... < count (tid < S: a group of S threads, a block's
// 256 by default), four gets issued before the first put (several loads in flight a thread, as
// stage_rows).
template <int S = 256, class Get, class Put>
__device__ __forceinline__ void stage_each(int count, int tid, Get get, Put put) {
    int m = tid;
    for (; m + 3 * S < count; m += 4 * S) {
        const auto a = get(m), b = get(m + S), c = get(m + 2 * S), d = get(m + 3 * S);
        put(m, a);
        put(m + S, b);
        put(m + 2 * S, c);
        put(m + 3 * S, d);
    }
    for (; m < count; m += S) put(m, get(m));
}

__device__ __forceinline__ bool sc_aligned16(const void* p) {
    return ((unsigned long long)p & 15ull) == 0ull;
}

// Stage `count` contiguous values (a whole line) into shared memory as D (T, or double: each
// value converted once) by a group of S threads (tid < S): in 16-byte words (uint4, or four
// floats a load) when both ends allow it (a warp moves 512 bytes a load), else value by value.
template <int S, typename T, typename D>
__device__ __forceinline__ void stage_run(D* dst, const T* __restrict__ src, int count, int tid) {
    auto one = [&](int m) { return src[m]; };
    auto put_one = [&](int m, T v) { dst[m] = (D)v; };
    if (!sc_aligned16(src) || !sc_aligned16(dst) || (count * (int)sizeof(T)) % 16 != 0) {
        stage_each<S>(count, tid, one, put_one);
    } else if (sizeof(T) == sizeof(D)) {
        const uint4* s = (const uint4*)src;
        uint4* d = (uint4*)dst;
        stage_each<S>(count * (int)sizeof(T) / 16, tid, [&](int m) { return s[m]; },
                   [&](int m, uint4 v) { d[m] = v; });
    } else {  // float → double
        const float4* s = (const float4*)src;
        double2* d = (double2*)dst;
        stage_each<S>(count / 4, tid, [&](int m) { return s[m]; }, [&](int m, float4 v) {
            d[2 * m] = make_double2(v.x, v.y);
            d[2 * m + 1] = make_double2(v.z, v.w);
        });
    }
}

// Stage `rows` rows of C contiguous values (row m at src + m·pitch) into tile[m·C ..] in
// 16-byte words: src and pitch·sizeof(T) 16-byte aligned (the caller checks). Word m of the
// tile is word m % P of row m / P.
template <typename T, int C>
__device__ __forceinline__ void stage_columns(T* tile, const T* __restrict__ src, i64 pitch,
                                              int rows, int tid) {
    constexpr int V = 16 / (int)sizeof(T), P = C / V;
    uint4* d = (uint4*)tile;
    stage_each(rows * P, tid,
               [&](int m) { return *(const uint4*)(src + (i64)(m / P) * pitch + (m % P) * V); },
               [&](int m, uint4 v) { d[m] = v; });
}

// The weights of a 5-tap filter (à trous's B3 spline) in registers, for the whole-axis
// kernels: a tap loop of known length, unrolled, with no weight loads (the
// loop's index arithmetic and loads made those passes issue-bound). Same weights, same order
// of FMAs as the loop over the staged weights: the same bits.
struct Taps5 {
    double w[5];
    __device__ Taps5(const double* __restrict__ g, int taps) {
#pragma unroll
        for (int j = 0; j < 5; ++j) w[j] = j < taps ? __ldg(g + j) : 0.0;
    }
};

// The inner-axis whole kernel's unit of work: R = 5 outputs r of one phase of a staged column
// (row q at x[q·pitch]) whose first tap is row `row` and whose taps lie st rows apart (r's tap
// j at row + (r + j)·st): a window of R + taps − 1 staged values in registers, each loaded and
// converted once for R outputs (one output at a time read and converted taps values each).
// Loads past row `last` (only those of outputs past the axis's end, which are not stored) read
// row `last`. R odd: a warp's units of one phase read shared memory without bank conflicts.
// Every output sums fma(w[j], x[j], acc) for j = 0 .. taps-1 from acc = 0: the same bits as
// correlate_axis.
constexpr int SC_WINDOW_R = 5;
template <typename S>
__device__ __forceinline__ void window_taps(const S* x, int pitch, int row, int st, int last,
                                            const double* ws, int taps, const Taps5& t5,
                                            double acc[SC_WINDOW_R]) {
    constexpr int R = SC_WINDOW_R;
    auto at = [&](int k) {
        const int q = row + k * st;
        return (double)x[(q < last ? q : last) * pitch];
    };
    if (taps == 5) {
        double v[R + 4];
#pragma unroll
        for (int k = 0; k < R + 4; ++k) v[k] = at(k);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            double a = 0.0;
#pragma unroll
            for (int j = 0; j < 5; ++j) a = fma(t5.w[j], v[r + j], a);
            acc[r] = a;
        }
        return;
    }
    window_sums<R>(at, ws, taps, acc);
}

// The units of a line or column of n outputs at step st: (phase p < min(st, n), group g of R
// outputs p + (g·R + r)·st), phase fastest; a shift and a mask when the phases are a power of
// two (à trous's steps).
struct Units {
    int phases, shift, count, jump;  // jump: st·R, from a group to the next
    bool pow2;
    __device__ Units(int n, int st) {
        phases = st < n ? st : n;
        pow2 = (phases & (phases - 1)) == 0;
        shift = __ffs(phases) - 1;
        count = phases * (((n + st - 1) / st + SC_WINDOW_R - 1) / SC_WINDOW_R);
        jump = st < n ? st * SC_WINDOW_R : n;  // past the end when one group holds the phase
    }
    // The unit's first output.
    __device__ __forceinline__ int first(int u) const {
        const int g = pow2 ? u >> shift : u / phases;
        return u - g * phases + g * jump;
    }
};

// The halo of an axis staged in shared memory as rows of W values (row p at axis + p·W, p from
// −hl to nn + hr − 1), filled from its staged rows 0 .. nn − 1 by the boundary rule. Threads
// t, t + T, … each take K values of a halo row, whose source row they find once: the rule's
// index arithmetic, once a value, was most of the whole-axis kernels' fill (and is 32-bit: 2·nn
// fits an int). Where K values are whole 16-byte words (rows 16-byte aligned) they copy as such.
// `live` false: nothing to fill (a block's lines past the last); tested in the loop's condition,
// where it keeps NVRTC from unrolling the loop (unrolled, the x lines' copies of the boundary
// rule spilled; with `#pragma unroll 1` instead, their passes ran 2-3 % slower: session 30).
template <int W, int K, typename V>
__device__ __forceinline__ void fill_halo(V* axis, int nn, int hl, int hr, int mode, V cval,
                                          int t, int T, bool live) {
    constexpr int RUNS = W / K;  // a row's runs of K values
    for (int m = t; live && m < (hl + hr) * RUNS; m += T) {
        const int h = m / RUNS, c0 = (m - h * RUNS) * K;
        const int p = h < hl ? h - hl : nn + h - hl;  // the row's place along the axis
        const int q = sc_extend_index(p, nn, mode);
        V* d = axis + p * W + c0;
        if constexpr (K * sizeof(V) % 16 == 0) {
            constexpr int WORDS = K * (int)sizeof(V) / 16;
            const uint4* s = (const uint4*)(axis + q * W + c0);
#pragma unroll
            for (int k = 0; k < K; ++k)
                if (q < 0) d[k] = cval;
#pragma unroll
            for (int k = 0; k < WORDS; ++k)
                if (q >= 0) ((uint4*)d)[k] = s[k];
        } else {
#pragma unroll
            for (int k = 0; k < K; ++k) d[k] = q < 0 ? cval : axis[q * W + c0 + k];
        }
    }
}

// Along an inner axis short enough that C columns of the whole axis and of its halo (the rows
// past either end that the taps read: hl = max(0, −offset) before, hr after) fit in shared
// memory as T: each input is read once, the halo rows are filled from the staged column by the
// boundary rule (each once; filters/cuda.rs takes another tile for a constant mode whose cval T
// does not hold exactly), so every output's taps are staged and no tap needs the boundary rule.
// A block of 256 threads takes column c = tid % C of a block of C and, in row g = tid / C of
// G = 256 / C, the units g, g + G, … (`Units`, `window_taps`): a warp's loads and stores are
// runs of C values. 1-D grid over the (slab, column block) pairs b0 .. b1, looping past the
// grid. Shared memory: taps weights, then (hl + n + hr)·C values of T.
template <typename T, int C, class Store>
__device__ void correlate_whole(const T* __restrict__ in, T* __restrict__ out, i64 n, i64 inner,
                                const double* __restrict__ w, int taps, i64 offset, i64 step,
                                double scale, int mode, double cval, i64 b0, i64 b1,
                                Store store) {
    SC_DYNAMIC_SHARED(double, sh);
    constexpr int R = SC_WINDOW_R;
    const int tid = threadIdx.x;
    const double* ws = sh;
    const Taps5 t5(w, taps);
    T* tile = (T*)stage_weights(sh, w, taps, tid);
    const int G = 256 / C;
    const int c = tid % C, g = tid / C;
    const i64 blocks = (inner + C - 1) / C;
    // (hl + n + hr)·C fits shared memory (filters/cuda.rs)
    const int nn = (int)n, st = (int)step, off = (int)offset;
    const int hl = off < 0 ? -off : 0, last = off + (taps - 1) * st, hr = last > 0 ? last : 0;
    const int last_row = hl + nn + hr - 1;
    T* axis = tile + hl * C;  // row 0 of the axis (16-byte aligned: C ≥ 8)
    const Units units(nn, st);
    for (i64 b = b0 + blockIdx.x; b < b1; b += gridDim.x) {
        const i64 o = b / blocks;
        const i64 k = (b - o * blocks) * C + c;
        const bool col = k < inner;
        const T* line = in + o * n * inner + k;
        const T* row0 = line - c;  // the block's first column
        __syncthreads();  // the last item's reads (and the weights) are done
        if ((b - o * blocks + 1) * C <= inner && sc_aligned16(row0) &&
            (inner * (i64)sizeof(T)) % 16 == 0) {
            stage_columns<T, C>(axis, row0, inner, nn, tid);
        } else if (col) {
#pragma unroll 4
            for (int m = g; m < nn; m += G) axis[m * C + c] = line[(i64)m * inner];
        }
        __syncthreads();
        fill_halo<C, 8>(axis, nn, hl, hr, mode, (T)cval, tid, 256, true);  // runs of 16-byte words
        __syncthreads();
        if (!col) continue;
        const i64 base = o * n * inner + k, stride = (i64)st * inner;
        for (int u = g; u < units.count; u += G) {
            const int i0 = units.first(u);
            if (i0 >= nn) continue;
            const i64 at = base + (i64)i0 * inner;
            typename Store::template Ahead<R> ahead;
            store.template fetch<R>(ahead, at, stride, i0, st, nn);
            double acc[R];
            const int row = i0 + off + hl;  // the unit's first tap, in staged rows
            window_taps<T>(tile + c, C, row, st, last_row, ws, taps, t5, acc);
            store.template put<R>(out, ahead, at, stride, i0, st, nn, acc, scale);
        }
    }
}

// Along the last axis, whole lines: L lines a block, each staged in shared memory as double
// with its halo (the values past either end that the taps read: hl = max(0, −offset) before,
// hr after, filled from the staged line by the boundary rule; cval is exact as double), so
// every input is read and converted once and no tap needs the boundary rule. The 256 / L
// threads of a line stage it, fill its halo and compute its outputs, one a thread in turn: a
// warp's loads, stores and shared reads are contiguous, and at L = 8 (a warp a line) the warps
// never wait for each other. 1-D grid over the groups of L lines b0 .. b1, looping past the
// grid. Shared memory: taps weights, then L lines of `pitch` doubles (filters/cuda.rs reserves
// n + hl + hr + 2 a line).
template <typename T, int L, class Store>
__device__ void correlate_lines(const T* __restrict__ in, T* __restrict__ out, i64 lines, i64 n,
                                const double* __restrict__ w, int taps, i64 offset, i64 step,
                                double scale, int mode, double cval, i64 b0, i64 b1,
                                Store store) {
    SC_DYNAMIC_SHARED(double, sh);
    constexpr int TL = 256 / L;  // threads a line
    const int tid = threadIdx.x, l = tid / TL, t = tid % TL;
    const double* ws = sh;
    const Taps5 t5(w, taps);
    double* tile = stage_weights(sh, w, taps, tid);
    const int nn = (int)n, st = (int)step, off = (int)offset;
    const int hl = off < 0 ? -off : 0, last = off + (taps - 1) * st, hr = last > 0 ? last : 0;
    const int ha = (hl + 1) & ~1, pitch = (ha + nn + hr + 1) & ~1;  // 16-byte aligned lines
    double* line = tile + l * pitch + ha;  // value 0 of this thread's line
    const double* x = line + off;          // output i's first tap at x[i]
    auto sync = [] {
        if (TL <= 32) __syncwarp();  // a line's threads are one warp
        else __syncthreads();
    };
    __syncthreads();  // the weights
    for (i64 b = b0 + blockIdx.x; b < b1; b += gridDim.x) {
        const i64 o = b * L + l;
        const bool live = o < lines;  // uniform over a line's threads
        sync();  // the last item's reads are done
        if (live) stage_run<TL, T, double>(line, in + o * n, nn, t);
        sync();
        fill_halo<1, 1>(line, nn, hl, hr, mode, cval, t, TL, live);
        sync();
        if (!live) continue;
        const i64 base = o * n;
        for (int i = t; i < nn; i += TL) {
            typename Store::template Ahead<1> ahead;
            store.template fetch<1>(ahead, base + i, 0, 0, 0, 1);
            double acc = 0.0;
            if (taps == 5) {
#pragma unroll
                for (int j = 0; j < 5; ++j) acc = fma(t5.w[j], x[i + j * st], acc);
            } else {
                for (int j = 0; j < taps; ++j) acc = fma(ws[j], x[i + j * st], acc);
            }
            store.template put<1>(out, ahead, base + i, 0, 0, 0, 1, &acc, scale);
        }
    }
}

// Each tiled kernel twice: plain stores, and (`_split`) the à trous split fused into them, with
// the smooth plane c and the data (blanks) as two more arguments.
#define FILTERS_TILED(T, S, R)                                                                 \
    extern "C" __global__ void __launch_bounds__(256)                                         \
        correlate_cols##R##_##S(const T* in, T* out, i64 n_out, i64 inner, i64 n_in,           \
                                i64 out_row0, i64 in_row0, i64 n_global, const double* w,      \
                                int taps, i64 offset, i64 step, double scale, int mode,        \
                                double cval, i64 s0, i64 s1, i64 q0, i64 q1) {                 \
        correlate_cols<T, R>(in, out, n_out, inner, n_in, out_row0, in_row0, n_global, w,     \
                             taps, offset, step, scale, mode, cval, s0, s1, q0, q1,            \
                             StorePlain<T>());                                                 \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) correlate_cols##R##_split_##S(           \
        const T* in, T* out, i64 n_out, i64 inner, i64 n_in, i64 out_row0, i64 in_row0,        \
        i64 n_global, const double* w, int taps, i64 offset, i64 step, double scale, int mode, \
        double cval, i64 s0, i64 s1, i64 q0, i64 q1, T* c, const T* data) {                    \
        correlate_cols<T, R>(in, out, n_out, inner, n_in, out_row0, in_row0, n_global, w,     \
                             taps, offset, step, scale, mode, cval, s0, s1, q0, q1,            \
                             StoreSplit<T>{c, data});                                          \
    }

#define FILTERS_LINE(T, S, R)                                                                  \
    extern "C" __global__ void __launch_bounds__(256)                                         \
        correlate_line##R##_##S(const T* in, T* out, i64 n_out, i64 n_in, i64 out_row0,        \
                                i64 in_row0, i64 n_global, const double* w, int taps,          \
                                i64 offset, i64 step, double scale, int mode, double cval,     \
                                i64 s0, i64 s1, i64 w0, i64 w1) {                              \
        correlate_line<T, R>(in, out, n_out, n_in, out_row0, in_row0, n_global, w, taps,      \
                             offset, step, scale, mode, cval, s0, s1, w0, w1,                  \
                             StorePlain<T>());                                                 \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) correlate_line##R##_split_##S(           \
        const T* in, T* out, i64 n_out, i64 n_in, i64 out_row0, i64 in_row0, i64 n_global,     \
        const double* w, int taps, i64 offset, i64 step, double scale, int mode, double cval,  \
        i64 s0, i64 s1, i64 w0, i64 w1, T* c, const T* data) {                                 \
        correlate_line<T, R>(in, out, n_out, n_in, out_row0, in_row0, n_global, w, taps,      \
                             offset, step, scale, mode, cval, s0, s1, w0, w1,                  \
                             StoreSplit<T>{c, data});                                          \
    }

// The whole-axis kernels, plain and `_split`: KIND whole (a, b = n, inner; K columns) or lines
// (a, b = lines, n; K lines).
#define FILTERS_STAGED(KIND, T, S, K)                                                          \
    extern "C" __global__ void __launch_bounds__(256) correlate_##KIND##K##_##S(               \
        const T* in, T* out, i64 a, i64 b, const double* w, int taps, i64 offset, i64 step,    \
        double scale, int mode, double cval, i64 b0, i64 b1) {                                 \
        correlate_##KIND<T, K>(in, out, a, b, w, taps, offset, step, scale, mode, cval, b0,   \
                               b1, StorePlain<T>());                                           \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) correlate_##KIND##K##_split_##S(         \
        const T* in, T* out, i64 a, i64 b, const double* w, int taps, i64 offset, i64 step,    \
        double scale, int mode, double cval, i64 b0, i64 b1, T* c, const T* data) {            \
        correlate_##KIND<T, K>(in, out, a, b, w, taps, offset, step, scale, mode, cval, b0,   \
                               b1, StoreSplit<T>{c, data});                                    \
    }

// Every kernel of one element type T (suffix S).
#define FILTERS_ALL(T, S)                                                                      \
    FILTERS_INSTANTIATE(T, S)                                                                  \
    FILTERS_TILED(T, S, 1)                                                                     \
    FILTERS_TILED(T, S, 2)                                                                     \
    FILTERS_TILED(T, S, 4)                                                                     \
    FILTERS_TILED(T, S, 8)                                                                     \
    FILTERS_LINE(T, S, 1)                                                                      \
    FILTERS_LINE(T, S, 3)                                                                      \
    FILTERS_LINE(T, S, 5)                                                                      \
    FILTERS_STAGED(whole, T, S, 32)                                                            \
    FILTERS_STAGED(whole, T, S, 16)                                                            \
    FILTERS_STAGED(whole, T, S, 8)                                                             \
    FILTERS_STAGED(lines, T, S, 8)                                                             \
    FILTERS_STAGED(lines, T, S, 2)                                                             \
    FILTERS_STAGED(lines, T, S, 1)

// One element type a compile, so that a call compiles the half it uses (NVRTC takes seconds
// over all of them): float32, or float64 in the variant FILTERS_F64 (filters/cuda.rs).
#ifdef FILTERS_F64
FILTERS_ALL(double, f64)
#else
FILTERS_ALL(float, f32)
#endif
