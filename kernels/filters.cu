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

FILTERS_INSTANTIATE(float, f32)
FILTERS_INSTANTIATE(double, f64)
