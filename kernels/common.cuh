// Shared device helpers, prepended to every module in kernels/ before NVRTC compiles it.
#pragma once

typedef long long i64;

// A kernel's dynamic shared memory (sized at launch). The host emulator of tests/cuda_host has
// no launch-time size: it gives the 48 KB a launch may take without opting in.
#ifdef __CUDACC_RTC__
#define SC_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#else
#define SC_DYNAMIC_SHARED(T, name) __shared__ T name[(48 * 1024) / sizeof(T)]
#endif

__device__ __forceinline__ bool sc_finite(double x) { return isfinite(x); }

// One voxel of an à trous scale, from its data value x, its plane value c and s, the smoothed
// value of c there: w = c − s and c = c − w (in double, rounded once to T, as the CPU engine);
// blanks (non-finite x) get w = NaN and keep c. Written once for atrous.cu's split pass and for
// the filter pass of filters.cu that fuses it into its stores.
template <typename T>
__device__ __forceinline__ void sc_atrous_split(T x, T c, T s, T* w, T* c_out) {
    if (sc_finite((double)x)) {
        const T wi = (T)((double)c - (double)s);
        *w = wi;
        *c_out = (T)((double)c - (double)wi);
    } else {
        *w = (T)nan("");
    }
}

// Boundary modes, numbered as skyconv's Rust `Mode::code`.
#define SC_MODE_CONSTANT 0
#define SC_MODE_NEAREST 1
#define SC_MODE_REFLECT 2
#define SC_MODE_MIRROR 3
#define SC_MODE_WRAP 4

template <typename I>
__device__ __forceinline__ I sc_mod(I a, I m) {
    I r = a % m;
    return r < 0 ? r + m : r;
}

// Index read for position p of a line of length n, or -1 for the constant (scipy's extension,
// periodic for the symmetric modes). I: i64, or int where 2n fits (the whole-axis kernels' halo
// rows, whose 64-bit arithmetic was most of their fill).
template <typename I>
__device__ __forceinline__ I sc_extend_index(I p, I n, int mode) {
    if (p >= 0 && p < n) return p;
    // One reflection or wrap (a halo shorter than the line, every filter pass of à trous): the
    // general rule's modulo cost more than the taps of a whole-axis tile's edge outputs.
    if (p >= -n && p < 2 * n && n > 1) {
        const bool low = p < 0;
        if (mode == SC_MODE_REFLECT) return low ? -p - 1 : 2 * n - 1 - p;
        if (mode == SC_MODE_WRAP) return low ? p + n : p - n;
        if (mode == SC_MODE_MIRROR && p > -n && p < 2 * n - 1) return low ? -p : 2 * n - 2 - p;
    }
    switch (mode) {
    case SC_MODE_NEAREST:
        return p < 0 ? 0 : n - 1;
    case SC_MODE_WRAP:
        return sc_mod(p, n);
    case SC_MODE_REFLECT: {
        const I q = sc_mod(p, 2 * n);
        return q < n ? q : 2 * n - 1 - q;
    }
    case SC_MODE_MIRROR: {
        if (n == 1) return 0;
        const I q = sc_mod(p, 2 * n - 2);
        return q < n ? q : 2 * n - 2 - q;
    }
    default:
        return -1;
    }
}
