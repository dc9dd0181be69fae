// Separable 1-D filters along one axis of an array viewed as (outer, n, inner):
//   out[o, i, k] = scale * sum_j w[j] * x[o, ext(i + offset + j*step), k]
// with f64 accumulation. Threads run along the contiguous dimension (i when inner == 1, else
// k), so every tap's loads are coalesced; neighbouring taps hit L1.

template <typename T>
__device__ void correlate_axis(const T* __restrict__ in, T* __restrict__ out, i64 outer, i64 n,
                               i64 inner, const double* __restrict__ w, int taps, i64 offset,
                               i64 step, double scale, int mode, double cval) {
    const bool last = (inner == 1);
    const i64 fdim = last ? n : inner;
    const i64 sdim = last ? outer : outer * n;
    const i64 f = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (f >= fdim) return;
    for (i64 s = blockIdx.y; s < sdim; s += gridDim.y) {
        i64 o, i, k;
        if (last) {
            o = s;
            i = f;
            k = 0;
        } else {
            o = s / n;
            i = s - o * n;
            k = f;
        }
        const T* line = in + o * n * inner + k;
        const i64 p0 = i + offset;
        const i64 p1 = p0 + (i64)(taps - 1) * step;
        double acc = 0.0;
        if (p0 >= 0 && p1 < n) {
            const T* x = line + p0 * inner;
            const i64 stride = step * inner;
            for (int j = 0; j < taps; ++j) acc += __ldg(w + j) * (double)x[j * stride];
        } else {
            for (int j = 0; j < taps; ++j) {
                const i64 q = sc_extend_index(p0 + j * step, n, mode);
                const double v = q < 0 ? cval : (double)line[q * inner];
                acc += __ldg(w + j) * v;
            }
        }
        out[(o * n + i) * inner + k] = (T)(acc * scale);
    }
}

extern "C" __global__ void correlate_f32(const float* in, float* out, i64 outer, i64 n, i64 inner,
                                         const double* w, int taps, i64 offset, i64 step,
                                         double scale, int mode, double cval) {
    correlate_axis<float>(in, out, outer, n, inner, w, taps, offset, step, scale, mode, cval);
}

extern "C" __global__ void correlate_f64(const double* in, double* out, i64 outer, i64 n,
                                         i64 inner, const double* w, int taps, i64 offset,
                                         i64 step, double scale, int mode, double cval) {
    correlate_axis<double>(in, out, outer, n, inner, w, taps, offset, step, scale, mode, cval);
}
