// Exact statistics of device arrays (src/cube/stats/cuda.rs): the count of kept values, and
// the k-th smallest by radix digits of their order-preserving keys. The value mapping mirrors
// `Values::map` in src/cube/stats/mod.rs and the keys `keys::key` in src/cube/stats/keys.rs.

struct SelParams {
    double center;
    int abs_dev;
    int range;  // 0 all, 1 below centre, 2 above centre
};

__device__ __forceinline__ bool sel_map(double x, const SelParams& p, double* v) {
    if (!isfinite(x)) return false;
    const double d = x - p.center;
    if (p.range == 1 && !(d < 0.0)) return false;
    if (p.range == 2 && !(d > 0.0)) return false;
    *v = p.abs_dev ? fabs(d) : d;
    return true;
}

// Doubles as unsigned keys whose order is the numeric order (-0 before +0).
__device__ __forceinline__ unsigned long long sel_key(double v) {
    const unsigned long long b = (unsigned long long)__double_as_longlong(v);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

// out[0] += number of kept values (host initialises 0).
template <typename T>
__device__ void sel_count(const T* __restrict__ x, i64 n, SelParams p, unsigned long long* out) {
    unsigned long long cnt = 0;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        double v;
        if (sel_map((double)x[i], p, &v)) ++cnt;
    }
    for (int o = 16; o > 0; o >>= 1) cnt += __shfl_down_sync(0xffffffffu, cnt, o);
    if ((threadIdx.x & 31) == 0 && cnt > 0) atomicAdd(out, cnt);
}

#define SEL_INSTANTIATE(T, S)                                                                   \
    extern "C" __global__ void sel_count_##S(const T* x, i64 n, SelParams p,                   \
                                             unsigned long long* out) {                        \
        sel_count<T>(x, n, p, out);                                                             \
    }

SEL_INSTANTIATE(float, f32)
SEL_INSTANTIATE(double, f64)

// ---- Exact selection by radix digits of the order-preserving keys (src/cube/stats/cuda.rs,
// `select_ranks_device`): the whole selection runs on the device (a histogram pass per digit,
// then one block picks the digit), so a median costs a few passes and one round trip. Two
// ranks are followed at once (a median's two middle values): their prefixes are counted in
// the same pass, in one histogram while they agree. Keys are 64 bits (sel_key of the mapped
// double) or, for float32 values taken as they are, the 32-bit key of the float itself (the
// same order; every step in 32-bit integers).

#define RDX_BITS 12
#define RDX_BINS (1 << RDX_BITS)
// Tag of a value for the histograms: (which prefix) << RDX_BITS | digit, or RDX_NONE.
#define RDX_NONE 0xffffffffu
#define RDX_LOADS 4
// The first digit's width and its copies (RDX_COPIES << RDX_FIRST_BITS == 2 * RDX_BINS).
#define RDX_FIRST_BITS 11
#define RDX_COPIES 4

// Device state of one selection: u64 words, in this order (STATE_WORDS in cuda.rs).
struct RdxState {
    unsigned long long prefix[2];  // key bits above `shift` chosen so far, per rank
    unsigned long long rank[2];    // the rank left among the keys with that prefix
    unsigned long long missing;    // set when a rank lies past the last kept value
    unsigned long long value[2];   // the selected keys, once the last digit is chosen
    unsigned long long overflow;   // set when rdx_gather found more keys than its buffer holds
    unsigned long long hist[2][RDX_BINS];
};

__device__ __forceinline__ unsigned long long rdx_top(unsigned long long k, int shift,
                                                      int kbits) {
    return shift >= kbits ? 0ull : (k >> shift);
}

// The key of value q of a float32 array taken as it is (false: not finite).
__device__ __forceinline__ bool rdx_key32(float x, unsigned long long* k) {
    const unsigned int u = __float_as_uint(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return false;
    *k = (u >> 31) ? (unsigned long long)(~u) : (unsigned long long)(u | 0x80000000u);
    return true;
}

// A warp's RDX_LOADS values of a grid-stride pass from `base` (the warp's first index): lane
// `lane` loads base + lane + q·stride, or `fill` past n. Issued together, so that each lane
// has RDX_LOADS loads in flight.
template <typename T>
__device__ __forceinline__ void rdx_load(const T* __restrict__ x, i64 n, i64 base, int lane,
                                         i64 stride, T fill, T xv[RDX_LOADS]) {
#pragma unroll
    for (int q = 0; q < RDX_LOADS; ++q) {
        const i64 i = base + lane + q * stride;
        xv[q] = i < n ? x[i] : fill;
    }
}

// Where a histogram pass takes its keys from: the 64-bit key of each mapped value, the 32-bit
// key of each float32 value, or keys rdx_gather kept (0: an empty slot; no kept key is 0).
#define RDX_MAPPED 0
#define RDX_FLOAT32 1
#define RDX_GATHERED 2
#define RDX_GATHERED32 3  // kept 32-bit keys (of float32 values), in 64-bit slots

// Bits of a mode's keys.
template <int KEY>
__device__ __forceinline__ int rdx_kbits() {
    return KEY == RDX_FLOAT32 || KEY == RDX_GATHERED32 ? 32 : 64;
}

// The key of one value for a mode (false: the value is not kept).
template <typename T, int KEY>
__device__ __forceinline__ bool rdx_key_of(T x, const SelParams& p, unsigned long long* k) {
    if (KEY == RDX_GATHERED || KEY == RDX_GATHERED32) {
        *k = (unsigned long long)x;
        return *k != 0ull;
    }
    if (KEY == RDX_FLOAT32) return rdx_key32((float)x, k);
    double v;
    if (!sel_map((double)x, p, &v)) return false;
    *k = sel_key(v);
    return true;
}

// What a pass loads past the end: a value no mode keeps.
template <typename T, int KEY>
__device__ __forceinline__ T rdx_fill() {
    return KEY == RDX_GATHERED || KEY == RDX_GATHERED32 ? (T)0 : (T)nan("");
}

// Visits every value of x[0 .. n) once: `visit(kept, key)` for each value a lane loads, a warp
// moving as one (every lane of a warp visits at the same step, so `visit` may use warp votes),
// RDX_LOADS loads in flight a lane (the passes are memory-bound); `step()` after each round of
// loads, also in step across the warp. Past the end a lane visits rdx_fill's value (not kept).
template <typename T, int KEY, typename Visit, typename Step>
__device__ __forceinline__ void rdx_sweep(const T* __restrict__ x, i64 n, const SelParams& p,
                                          Visit visit, Step step) {
    const int lane = threadIdx.x & 31;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 base = (i64)blockIdx.x * blockDim.x + (threadIdx.x & ~31); base < n;
         base += RDX_LOADS * stride) {
        T xv[RDX_LOADS];
        rdx_load<T>(x, n, base, lane, stride, rdx_fill<T, KEY>(), xv);
#pragma unroll
        for (int q = 0; q < RDX_LOADS; ++q) {
            unsigned long long k = 0ull;
            const bool kept = rdx_key_of<T, KEY>(xv[q], p, &k);
            visit(kept, k);
        }
        step();
    }
}

// Counts the kept values whose key starts with each rank's prefix (the key bits at and above
// `shift`), by key bits [shift - bits, shift). A warp moves as one, RDX_LOADS loads in flight a
// lane (a memory-bound pass). The first digit (sign and exponent: few distinct values, whose
// shared counters would serialise) is counted in RDX_COPIES copies of its RDX_FIRST_BITS-bit
// histogram, one a lane mod RDX_COPIES; a later digit, which few values of a warp reach
// unless they tie, adds equal tags once (__match_any_sync where a lane counts a value).
template <typename T, int KEY>
__device__ void rdx_histogram(const T* __restrict__ x, i64 n, SelParams p, int shift, int bits,
                              RdxState* st) {
    __shared__ unsigned int local[2 * RDX_BINS];
    const int kbits = rdx_kbits<KEY>();
    const bool first = shift >= kbits;  // bits == RDX_FIRST_BITS (the host's rule)
    const unsigned long long p0 = st->prefix[0], p1 = st->prefix[1];
    const int two = p0 != p1;
    for (int b = threadIdx.x; b < 2 * RDX_BINS; b += blockDim.x) local[b] = 0u;
    __syncthreads();
    const int low = shift - bits, lane = threadIdx.x & 31;
    const unsigned int copy = first ? (unsigned int)(lane % RDX_COPIES) << RDX_FIRST_BITS : 0u;
    const unsigned long long digit = (1ull << bits) - 1ull;
    rdx_sweep<T, KEY>(
        x, n, p,
        [&](bool kept, unsigned long long k) {
            unsigned int tag = RDX_NONE;
            if (kept) {
                const unsigned long long top = rdx_top(k, shift, kbits);
                const unsigned int d = (unsigned int)((k >> low) & digit);
                if (top == p0)
                    tag = d;
                else if (two && top == p1)
                    tag = RDX_BINS + d;
            }
            if (first) {
                if (tag != RDX_NONE) atomicAdd(&local[copy + tag], 1u);
            } else if (__ballot_sync(0xffffffffu, tag != RDX_NONE)) {
                const unsigned int peers = __match_any_sync(0xffffffffu, tag);
                if (tag != RDX_NONE && lane == __ffs(peers) - 1)
                    atomicAdd(&local[tag], __popc(peers));
            }
        },
        [] {});
    __syncthreads();
    if (first) {
        for (int b = threadIdx.x; b < (1 << RDX_FIRST_BITS); b += blockDim.x) {
            unsigned int c = 0u;
#pragma unroll
            for (int r = 0; r < RDX_COPIES; ++r) c += local[(r << RDX_FIRST_BITS) + b];
            if (c) atomicAdd(&st->hist[0][b], (unsigned long long)c);
        }
        return;
    }
    for (int b = threadIdx.x; b < RDX_BINS; b += blockDim.x) {
        if (local[b]) atomicAdd(&st->hist[0][b], (unsigned long long)local[b]);
        if (two && local[RDX_BINS + b])
            atomicAdd(&st->hist[1][b], (unsigned long long)local[RDX_BINS + b]);
    }
}

// Keeps the 64-bit keys of the kept values that start with either rank's prefix (the key bits
// at and above `shift`) in keys[0 .. cap) (zeroed by the host), so that the later digits are
// counted over those few instead of the whole array; more than cap sets st->overflow (the host
// then selects over the whole array again).
template <typename T>
__device__ void rdx_gather(const T* __restrict__ x, i64 n, SelParams p, int shift, RdxState* st,
                           unsigned long long* __restrict__ keys, i64 cap,
                           unsigned long long* __restrict__ count) {
    const unsigned long long p0 = st->prefix[0], p1 = st->prefix[1];
    const int lane = threadIdx.x & 31;
    rdx_sweep<T, RDX_MAPPED>(
        x, n, p,
        [&](bool kept, unsigned long long k) {
            bool keep = false;
            if (kept) {
                const unsigned long long top = rdx_top(k, shift, 64);
                keep = top == p0 || top == p1;
            }
            const unsigned int mask = __ballot_sync(0xffffffffu, keep);
            if (!mask) return;
            unsigned long long first = 0ull;
            if (lane == __ffs(mask) - 1) first = atomicAdd(count, (unsigned long long)__popc(mask));
            first = __shfl_sync(0xffffffffu, first, __ffs(mask) - 1);
            if (keep) {
                const unsigned long long at = first + __popc(mask & ((1u << lane) - 1u));
                if (at < (unsigned long long)cap)
                    keys[at] = k;
                else
                    st->overflow = 1ull;
            }
        },
        [] {});
}

// One block of 1024 threads: each rank's digit from its histogram (an exclusive scan of the
// counts), the prefixes and ranks for the next pass, the histograms cleared. After the last
// digit (shift == bits) the prefixes are the selected keys.
__device__ void rdx_choose(RdxState* st, int shift, int bits, int kbits) {
    __shared__ unsigned long long warp_sum[32];
    __shared__ unsigned long long chosen[2][2];  // (digit, count below it) per rank
    __shared__ int found[2];
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int per = RDX_BINS / 1024;
    const int two = st->prefix[0] != st->prefix[1];
    for (int j = 0; j < 2; ++j) {
        const unsigned long long* h = st->hist[two ? j : 0];
        unsigned long long c[RDX_BINS / 1024];
        unsigned long long sum = 0ull;
        for (int q = 0; q < per; ++q) {
            c[q] = h[t * per + q];
            sum += c[q];
        }
        // Exclusive scan of the threads' sums: within each warp, then over the warps.
        unsigned long long incl = sum;
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned long long y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        if (lane == 31) warp_sum[warp] = incl;
        if (t == 0) found[j] = 0;
        __syncthreads();
        if (warp == 0) {
            unsigned long long w = warp_sum[lane], wi = w;
            for (int o = 1; o < 32; o <<= 1) {
                const unsigned long long y = __shfl_up_sync(0xffffffffu, wi, o);
                if (lane >= o) wi += y;
            }
            warp_sum[lane] = wi - w;
        }
        __syncthreads();
        unsigned long long below = warp_sum[warp] + incl - sum;
        const unsigned long long r = st->rank[j];
        for (int q = 0; q < per; ++q) {
            if (below <= r && r < below + c[q]) {
                chosen[j][0] = (unsigned long long)(t * per + q);
                chosen[j][1] = below;
                found[j] = 1;
            }
            below += c[q];
        }
        __syncthreads();
    }
    for (int b = t; b < 2 * RDX_BINS; b += blockDim.x) (&st->hist[0][0])[b] = 0ull;
    if (t < 2) {
        // Both ranks' scans have read the prefixes (the syncs above) before either changes.
        const int j = t;
        if (!found[j]) {
            st->missing = 1ull;
        } else {
            const unsigned long long pre = shift >= kbits ? 0ull : st->prefix[j];
            const unsigned long long next = (pre << bits) | chosen[j][0];
            st->rank[j] -= chosen[j][1];
            st->prefix[j] = next;
            if (shift == bits) st->value[j] = next;
        }
    }
}

__device__ void rdx_start(RdxState* st, unsigned long long k0, unsigned long long k1) {
    for (int b = threadIdx.x; b < 2 * RDX_BINS; b += blockDim.x) (&st->hist[0][0])[b] = 0ull;
    if (threadIdx.x == 0) {
        st->prefix[0] = st->prefix[1] = 0ull;
        st->rank[0] = k0;
        st->rank[1] = k1;
        st->missing = 0ull;
        st->value[0] = st->value[1] = 0ull;
        st->overflow = 0ull;
    }
}

extern "C" __global__ void rdx_start_state(RdxState* st, unsigned long long k0,
                                           unsigned long long k1) {
    rdx_start(st, k0, k1);
}

extern "C" __global__ void rdx_choose_digit(RdxState* st, int shift, int bits, int kbits) {
    rdx_choose(st, shift, bits, kbits);
}

#define RDX_INSTANTIATE(T, S)                                                                   \
    extern "C" __global__ void rdx_histogram_##S(const T* x, i64 n, SelParams p, int shift,    \
                                                 int bits, RdxState* st) {                      \
        rdx_histogram<T, RDX_MAPPED>(x, n, p, shift, bits, st);                                 \
    }                                                                                           \
    extern "C" __global__ void rdx_gather_##S(const T* x, i64 n, SelParams p, int shift,       \
                                              RdxState* st, unsigned long long* keys, i64 cap,  \
                                              unsigned long long* count) {                      \
        rdx_gather<T>(x, n, p, shift, st, keys, cap, count);                                    \
    }

RDX_INSTANTIATE(float, f32)
RDX_INSTANTIATE(double, f64)

// float32 values as they are (Values::FINITE), on their 32-bit keys.
extern "C" __global__ void rdx_histogram_key32_f32(const float* x, i64 n, SelParams p, int shift,
                                                   int bits, RdxState* st) {
    rdx_histogram<float, RDX_FLOAT32>(x, n, p, shift, bits, st);
}

// The later digits over the keys rdx_gather kept.
extern "C" __global__ void rdx_histogram_gathered(const unsigned long long* keys, i64 n,
                                                  SelParams p, int shift, int bits,
                                                  RdxState* st) {
    rdx_histogram<unsigned long long, RDX_GATHERED>(keys, n, p, shift, bits, st);
}

// The later digits over kept 32-bit keys (the bracket of a float32 selection).
extern "C" __global__ void rdx_histogram_gathered32(const unsigned long long* keys, i64 n,
                                                    SelParams p, int shift, int bits,
                                                    RdxState* st) {
    rdx_histogram<unsigned long long, RDX_GATHERED32>(keys, n, p, shift, bits, st);
}

// ---- Bracketed selection (`select_bracketed` in src/cube/stats/cuda.rs). Over a large array
// the ranks' values are first bracketed by a spread sample of its keys (selected over the
// sample by the passes above); one pass over the array then counts the keys below the bracket
// and keeps those inside it, and the digits are chosen over the kept keys alone: one pass over
// the array instead of one a digit. When the sample misled the bracket (the ranks fall outside
// it, or it holds more keys than the buffer), the host selects over the whole array again.

// keys[i] (i < s) = the key of the value at a Weyl sequence's position i (spread over the
// array, never in step with its rows), or 0 when that value is not kept.
template <typename T, int KEY>
__device__ void rdx_sample(const T* __restrict__ x, i64 n, SelParams p,
                           unsigned long long* __restrict__ keys, i64 s) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < s;
         i += (i64)gridDim.x * blockDim.x) {
        const double f = (double)i * 0.6180339887498949;
        const i64 pos = (i64)((f - floor(f)) * (double)n);
        const i64 at = pos < n ? pos : n - 1;
        unsigned long long k;
        keys[i] = rdx_key_of<T, KEY>(x[at], p, &k) ? k : 0ull;
    }
}

// Keys a warp stages in shared memory before one atomic claims their place in the buffer
// (room for two iterations' RDX_LOADS keys a lane), for blocks of up to RDX_STAGE_WARPS warps
// (grid_stride's 256 threads).
#define RDX_STAGE (64 * RDX_LOADS)
#define RDX_STAGE_WARPS 8

// Moves a warp's `fill` staged keys to their place in the buffer (tally[0] counts them).
__device__ __forceinline__ void rdx_flush(const unsigned long long* mine, int fill,
                                          unsigned long long* __restrict__ keys, i64 cap,
                                          unsigned long long* __restrict__ tally, int lane) {
    unsigned long long at = 0ull;
    if (lane == 0) at = atomicAdd(&tally[0], (unsigned long long)fill);
    at = __shfl_sync(0xffffffffu, at, 0);
    for (int j = lane; j < fill; j += 32)
        if (at + j < (unsigned long long)cap) keys[at + j] = mine[j];
    __syncwarp();
}

// Counts the kept keys below the bracket [lo, hi] (tally[1]) and keeps those inside it in
// keys[0 .. cap) (tally[0] counts them all, past cap too). lo and hi are the sample's
// selected keys (`sample->value`), or open: the smallest key, or the largest (also when the
// sample's upper rank lay past its kept keys).
template <typename T, int KEY>
__device__ void rdx_bracket(const T* __restrict__ x, i64 n, SelParams p,
                            const RdxState* __restrict__ sample, int lo_open, int hi_open,
                            unsigned long long* __restrict__ keys, i64 cap,
                            unsigned long long* __restrict__ tally) {
    __shared__ unsigned long long stage[RDX_STAGE_WARPS][RDX_STAGE];
    const unsigned long long lo = lo_open ? 0ull : sample->value[0];
    const unsigned long long hi = hi_open || sample->value[1] == 0ull ? ~0ull : sample->value[1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned long long* mine = stage[warp];
    int fill = 0;  // the same in every lane of a warp
    unsigned long long below = 0ull;
    rdx_sweep<T, KEY>(
        x, n, p,
        [&](bool kept, unsigned long long k) {
            below += kept && k < lo;
            const bool in = kept && k >= lo && k <= hi;
            const unsigned int m = __ballot_sync(0xffffffffu, in);
            if (in) mine[fill + __popc(m & ((1u << lane) - 1u))] = k;
            fill += __popc(m);
        },
        [&] {
            if (fill > RDX_STAGE - 32 * RDX_LOADS) {
                __syncwarp();
                rdx_flush(mine, fill, keys, cap, tally, lane);
                fill = 0;
            }
        });
    __syncwarp();
    if (fill) rdx_flush(mine, fill, keys, cap, tally, lane);
    for (int o = 16; o > 0; o >>= 1) below += __shfl_down_sync(0xffffffffu, below, o);
    if (lane == 0 && below) atomicAdd(&tally[1], below);
}

// Settles the bracket: each rank made relative to the kept keys, or st->overflow set when a
// rank lies outside them or they overflowed their buffer (the host then selects over the array).
// One warp is launched; thread 0 works.
extern "C" __global__ void rdx_bracket_settle(RdxState* st, const unsigned long long* tally,
                                              i64 cap) {
    if (threadIdx.x != 0) return;
    const unsigned long long kept = tally[0], below = tally[1];
    if (kept > (unsigned long long)cap || st->rank[0] < below || st->rank[1] >= below + kept) {
        st->overflow = 1ull;
        return;
    }
    st->rank[0] -= below;
    st->rank[1] -= below;
}

#define RDX_BRACKET_INSTANTIATE(T, S, KEY)                                                      \
    extern "C" __global__ void rdx_sample_##S(const T* x, i64 n, SelParams p,                  \
                                              unsigned long long* keys, i64 s) {               \
        rdx_sample<T, KEY>(x, n, p, keys, s);                                                   \
    }                                                                                           \
    extern "C" __global__ void rdx_bracket_##S(const T* x, i64 n, SelParams p,                 \
                                               const RdxState* sample, int lo_open,            \
                                               int hi_open, unsigned long long* keys, i64 cap, \
                                               unsigned long long* tally) {                    \
        rdx_bracket<T, KEY>(x, n, p, sample, lo_open, hi_open, keys, cap, tally);               \
    }

RDX_BRACKET_INSTANTIATE(float, f32, RDX_MAPPED)
RDX_BRACKET_INSTANTIATE(double, f64, RDX_MAPPED)
RDX_BRACKET_INSTANTIATE(float, key32_f32, RDX_FLOAT32)
