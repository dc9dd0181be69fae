// Host run of kernels/smooth.cu in src/smooth/cuda/mod.rs's launch order, on the tables the Rust
// host code builds (skyconv._core._ring_cuda_tables, written as raw arrays by
// tests/smooth/test_smooth_cuda_host.py). The ring FFTs that cuFFT and the Bluestein transform do on
// the GPU are plain DFTs here, with the same layouts (ring r's half spectrum at complex offset
// first[r]) and conventions (unnormalised; forward e^{-i}, inverse e^{+i} ignoring the imaginary
// parts of bins 0 and n/2). Usage: smooth_emu DIR; reads DIR/<name>.bin, writes DIR/out.bin.
// Block mode (src/smooth/cuda/blocked.rs; optional files): ring_in.bin / ring_out.bin (int per
// ring, 1 = forward / inverse transform it; default all) and phase.bin (i64 t0, t1: the phase
// launch's tiles; default all); map.bin then holds the block's packed rings at `first`.
#include "simt.hpp"
#include "emu_io.hpp"

#include <algorithm>
#include <string>

using std::min;

inline double cospi(double x) { return std::cos(M_PI * x); }
inline void sincospi(double x, double* s, double* c) {
    *s = std::sin(M_PI * x);
    *c = std::cos(M_PI * x);
}

#include "common.cuh"
#include "smooth.cu"

static std::string g_dir;

template <typename T>
std::vector<T> load(const char* name) {
    std::vector<T> v = read_bin<T>(g_dir + "/" + name + ".bin");
    if (v.empty()) v.push_back(T());  // never empty: kernels take .data() of every array
    return v;
}

// e^{sign 2 pi i q / n} with q reduced modulo n.
static void twiddle(i64 q, i64 n, double sign, double& c, double& s) {
    double a = 2.0 * M_PI * (double)(q % n) / (double)n;
    c = std::cos(a);
    s = sign * std::sin(a);
}

// An optional file: empty when missing.
template <typename T>
std::vector<T> load_opt(const char* name) {
    std::string path = g_dir + "/" + name + ".bin";
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return {};
    std::fclose(f);
    return load<T>(name);
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    g_dir = argv[1];
    auto first = load<i64>("first");
    auto nphi = load<int>("nphi");
    auto shifted = load<int>("shifted");
    auto factor = load<double>("factor");
    auto pairs = load<i64>("pairs");
    auto scale = load<double>("scale");
    auto tap_off = load<i64>("tap_off");
    auto tap_n = load<int>("tap_n");
    auto flags = load<int>("flags");
    auto len = load<int>("len");
    auto ab = load<double>("ab");
    auto tile_pair = load<int>("tile_pair");
    auto tile_k0 = load<int>("tile_k0");
    auto coef = load<double>("coef");
    auto chunks = load<i64>("chunks");
    auto par = load<double>("params");  // inv_h, u2_cut
    auto map = load<double>("map");
    auto ring_in = load_opt<int>("ring_in");
    auto ring_out = load_opt<int>("ring_out");
    auto phase = load_opt<i64>("phase");
    const i64 nrings = (i64)first.size();
    const i64 pt0 = phase.size() == 2 ? phase[0] : 0;
    const i64 pt1 = phase.size() == 2 ? phase[1] : (i64)tile_pair.size();
    const i64 npix = (i64)map.size();
    std::vector<double> spec_in(2 * npix, NAN), spec_out(2 * npix, NAN), out(npix, NAN);
    // forward DFTs
    for (i64 r = 0; r < nrings; ++r) {
        if (!ring_in.empty() && !ring_in[r]) continue;
        const i64 n = nphi[r];
        const double* x = map.data() + first[r];
        for (i64 k = 0; k <= n / 2; ++k) {
            double re = 0, im = 0, c, s;
            for (i64 t = 0; t < n; ++t) {
                twiddle(k * t, n, -1.0, c, s);
                re += x[t] * c;
                im += x[t] * s;
            }
            spec_in[2 * (first[r] + k)] = re;
            spec_in[2 * (first[r] + k) + 1] = im;
        }
    }
    const unsigned tpb = 128;
    if (pt1 > pt0)
        simt::launch((unsigned)(pt1 - pt0), tpb, [&] {
            smooth_phase(tile_pair.data() + pt0, tile_k0.data() + pt0, pairs.data(), first.data(),
                         nphi.data(), shifted.data(), factor.data(), spec_in.data());
        });
    const i64 ncoef = (i64)coef.size() / 4;
    for (size_t c = 0; c + 6 <= chunks.size(); c += 6) {
        const i64 e0 = chunks[c], e1 = chunks[c + 1], t0 = chunks[c + 2], t1 = chunks[c + 3];
        const i64 tap0 = chunks[c + 4], tap1 = chunks[c + 5];
        std::vector<double> taps(std::max<i64>(tap1 - tap0, 1), NAN);
        if (e1 > e0)
            simt::launch((unsigned)((e1 - e0 + 3) / 4), tpb, [&] {
                smooth_kernel_eval(tap_off.data(), tap_n.data(), flags.data(), len.data(),
                                   ab.data(), e0, e1, tap0, coef.data(), ncoef, par[0], par[1],
                                   taps.data());
            });
        if (t1 > t0)
            simt::launch((unsigned)(t1 - t0), tpb, [&] {
                smooth_products(tile_pair.data() + t0, tile_k0.data() + t0, pairs.data(),
                                scale.data(), tap_n.data(), flags.data(), tap_off.data(), tap0,
                                taps.data(), first.data(), nphi.data(), shifted.data(), nrings,
                                spec_in.data(), spec_out.data());
            });
    }
    // inverse DFTs
    for (i64 r = 0; r < nrings; ++r) {
        if (!ring_out.empty() && !ring_out[r]) continue;
        const i64 n = nphi[r];
        const double* X = spec_out.data() + 2 * first[r];
        for (i64 t = 0; t < n; ++t) {
            double acc = 0, c, s;
            for (i64 k = 0; k < n; ++k) {
                const i64 kk = k <= n / 2 ? k : n - k;
                double re = X[2 * kk], im = (kk == 0 || 2 * kk == n) ? 0.0 : X[2 * kk + 1];
                if (kk != k) im = -im;
                twiddle(k * t, n, 1.0, c, s);
                acc += re * c - im * s;
            }
            out[first[r] + t] = acc;
        }
    }
    write_bin(g_dir + "/out.bin", out);
    std::printf("ok %lld pixels\n", (long long)npix);
    return 0;
}
