// Real DFTs of HEALPix rings of many different lengths (the polar rings) by Bluestein's chirp
// z-transform, so that every ring whose padded length is M shares one batched cuFFT call
// (src/backend/cuda/ring_fft.rs). Two real rows a and b of the same length n travel as one
// complex sequence z = a + i b.
//
// Inverse (half spectra -> rows), x_j = sum_k X_k e^{+2 pi i jk/n}, with 2jk = j² + k² - (j-k)²:
//   work[t] = Z_t w_t,  chirp[t] = conj(w_t) (wrapped), y = IFFT(FFT(work) FFT(chirp)) / M,
//   z_j = w_j y_j,  w_t = e^{+i pi t²/n};  a = Re z, b = Im z.
// Forward (rows -> half spectra) is the same with w conjugated; Z_k then splits into the two
// half spectra by Hermitian symmetry.
//
// Layout: row r of `rows` starts at r*W (f64), of `spec` at r*H (complex); job i transforms
// rows ra[i] (and rb[i] unless it is -1) of length jn[i] (<= M/2 + 1/2), through work row i
// (M complex); chirp row jc[i] holds the spectrum of its length's chirp.

// e^{sign * i pi t^2 / n}, with t^2 reduced mod 2n in integers so the angle is exact.
__device__ __forceinline__ void chirp(i64 t, i64 n, double sign, double& re, double& im) {
    const i64 q = (t * t) % (2 * n);
    double s, c;
    sincospi((double)q / (double)n, &s, &c);
    re = c;
    im = sign * s;
}

// (re, im) *= e^{sign i pi t^2/n}
__device__ __forceinline__ void rotate(i64 t, i64 n, double sign, double& re, double& im) {
    double c, s;
    chirp(t, n, sign, c, s);
    const double r = re * c - im * s;
    im = re * s + im * c;
    re = r;
}

// chirp[c][t] = e^{sign i pi t^2/n_c} for |t| < n_c (t < 0 wrapped to M + t), else 0.
// grid (M / blockDim blocks, nchirp).
extern "C" __global__ void blue_chirp(const int* cn, double* chirp_buf, i64 M, double sign) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= M) return;
    const i64 n = cn[blockIdx.y];
    const i64 d = t <= M / 2 ? t : M - t;  // distance from 0 on the circle of M points
    double re = 0.0, im = 0.0;
    if (d < n) chirp(d, n, sign, re, im);
    double* o = chirp_buf + 2 * ((i64)blockIdx.y * M + t);
    o[0] = re;
    o[1] = im;
}

// Full spectrum X_t of a real row of length n from its half spectrum (imaginary parts of the
// self-conjugate bins k = 0 and k = n/2 ignored, as a real inverse FFT does).
__device__ __forceinline__ void full_spectrum(const double* S, i64 t, i64 n, double& re,
                                              double& im) {
    const i64 k = t <= n / 2 ? t : n - t;
    re = S[2 * k];
    im = (k == 0 || 2 * k == n) ? 0.0 : S[2 * k + 1];
    if (t != k) im = -im;
}

// work[i][t] = (X_a[t] + i X_b[t]) e^{+i pi t^2/n} for t < n, 0 up to M. grid (M/bd, jobs).
extern "C" __global__ void blue_pre_inv(const double* spec, i64 H, const int* jn, const i64* ra,
                                        const i64* rb, double* work, i64 M) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= M) return;
    const i64 i = blockIdx.y;
    const i64 n = jn[i];
    double re = 0.0, im = 0.0;
    if (t < n) {
        double ar, ai, br = 0.0, bi = 0.0;
        full_spectrum(spec + 2 * ra[i] * H, t, n, ar, ai);
        if (rb[i] >= 0) full_spectrum(spec + 2 * rb[i] * H, t, n, br, bi);
        re = ar - bi;  // X_a + i X_b
        im = ai + br;
        rotate(t, n, 1.0, re, im);
    }
    double* o = work + 2 * (i * M + t);
    o[0] = re;
    o[1] = im;
}

// work[i][t] = (x_a[t] + i x_b[t]) e^{-i pi t^2/n} for t < n, 0 up to M. grid (M/bd, jobs).
extern "C" __global__ void blue_pre_fwd(const double* rows, i64 W, const int* jn, const i64* ra,
                                        const i64* rb, double* work, i64 M) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= M) return;
    const i64 i = blockIdx.y;
    const i64 n = jn[i];
    double re = 0.0, im = 0.0;
    if (t < n) {
        re = rows[ra[i] * W + t];
        im = rb[i] >= 0 ? rows[rb[i] * W + t] : 0.0;
        rotate(t, n, -1.0, re, im);
    }
    double* o = work + 2 * (i * M + t);
    o[0] = re;
    o[1] = im;
}

// work[i][t] *= chirp_spec[jc[i]][t] * scale. grid (M/bd, jobs).
extern "C" __global__ void blue_mul(double* work, const double* chirp_spec, const int* jc, i64 M,
                                    double scale) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= M) return;
    const i64 i = blockIdx.y;
    double* w = work + 2 * (i * M + t);
    const double* c = chirp_spec + 2 * ((i64)jc[i] * M + t);
    const double r = w[0] * c[0] - w[1] * c[1];
    const double m = w[0] * c[1] + w[1] * c[0];
    w[0] = r * scale;
    w[1] = m * scale;
}

// rows a, b of job i <- Re, Im of e^{+i pi j^2/n} y_j for j < n. grid (n_max/bd, jobs).
extern "C" __global__ void blue_post_inv(const double* work, double* rows, i64 W, const int* jn,
                                         const i64* ra, const i64* rb, i64 M) {
    const i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 i = blockIdx.y;
    const i64 n = jn[i];
    if (j >= n) return;
    const double* y = work + 2 * (i * M + j);
    double re = y[0], im = y[1];
    rotate(j, n, 1.0, re, im);
    rows[ra[i] * W + j] = re;
    if (rb[i] >= 0) rows[rb[i] * W + j] = im;
}

// Half spectra of rows a, b of job i from Z_k = e^{-i pi k^2/n} y_k (k <= n/2):
// X_a = (Z_k + conj Z_{n-k}) / 2, X_b = (Z_k - conj Z_{n-k}) / 2i. grid (n_max/2/bd + 1, jobs).
extern "C" __global__ void blue_post_fwd(const double* work, double* spec, i64 H, const int* jn,
                                         const i64* ra, const i64* rb, i64 M) {
    const i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 i = blockIdx.y;
    const i64 n = jn[i];
    if (k > n / 2) return;
    const i64 kc = k == 0 ? 0 : n - k;
    const double* y = work + 2 * i * M;
    double zr = y[2 * k], zi = y[2 * k + 1];
    double cr = y[2 * kc], ci = y[2 * kc + 1];
    rotate(k, n, -1.0, zr, zi);
    rotate(kc, n, -1.0, cr, ci);
    ci = -ci;  // conj Z_{n-k}
    double* a = spec + 2 * (ra[i] * H + k);
    a[0] = 0.5 * (zr + cr);
    a[1] = 0.5 * (zi + ci);
    if (rb[i] >= 0) {
        // (Z - conj Z') / 2i = (d_im - i d_re) / 2 with d = Z - conj Z'
        double* b = spec + 2 * (rb[i] * H + k);
        b[0] = 0.5 * (zi - ci);
        b[1] = -0.5 * (zr - cr);
    }
}
