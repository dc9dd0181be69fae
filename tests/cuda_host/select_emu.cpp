// Host run of the bracketed selection's device code (kernels/select.cu) in the launch order of
// `select_bracketed` in src/cube/stats/cuda.rs, with the sample size, margin and buffer given
// (the device's plan only brackets millions of values; here a small array takes the same path).
// Usage: select_emu DIR; reads DIR/x.bin (float32 when kind is 0 or 2, float64 when 1) and
// DIR/args.bin (i64: kind (0 mapped float32, 1 mapped float64, 2 float32 keys), n, k0, k1,
// sample, margin, cap, abs, range; then the centre as f64 bits); writes DIR/out.bin (f64:
// status (0 found, 1 a rank past the kept values, 2 the bracket missed: the host would select
// over the array), value0, value1, keys kept, keys below).
#include "simt.hpp"
#include "emu_io.hpp"

#include <string>

#include "common.cuh"
#include "select.cu"

static std::string g_dir;

template <typename T>
std::vector<T> load(const char* name) {
    return read_bin<T>(g_dir + "/" + name + ".bin");
}

static const unsigned TPB = 256;
static const i64 STATE_WORDS = 8 + 2 * RDX_BINS;

static unsigned blocks(i64 n) {
    return (unsigned)std::max<i64>(1, std::min<i64>((n + TPB - 1) / TPB, 16));
}

// Inverse of sel_key (64-bit keys) and of rdx_key32 (32-bit keys).
static double value64(unsigned long long k) {
    const unsigned long long b = (k >> 63) ? (k & ~0x8000000000000000ull) : ~k;
    return __longlong_as_double((long long)b);
}
static double value32(unsigned long long k) {
    const unsigned int u = (unsigned int)k;
    const unsigned int b = (u >> 31) ? (u & 0x7fffffffu) : ~u;
    float f;
    std::memcpy(&f, &b, 4);
    return (double)f;
}

static std::vector<unsigned long long> new_state(unsigned long long k0, unsigned long long k1) {
    std::vector<unsigned long long> st(STATE_WORDS);
    simt::launch(1, 1024, [&] { rdx_start((RdxState*)st.data(), k0, k1); });
    return st;
}

// The digits over `len` kept keys, most significant first (choose_digits with kept_pass).
static void choose_kept(std::vector<unsigned long long>& st, const std::vector<unsigned long long>& keys,
                        int kbits) {
    RdxState* s = (RdxState*)st.data();
    const i64 len = (i64)keys.size();
    SelParams p{0.0, 0, 0};
    int shift = kbits;
    while (shift > 0) {
        const int bits = shift == kbits ? RDX_FIRST_BITS : std::min(RDX_BITS, shift);
        simt::launch(blocks(len), TPB, [&] {
            if (kbits == 32)
                rdx_histogram<unsigned long long, RDX_GATHERED32>(keys.data(), len, p, shift, bits, s);
            else
                rdx_histogram<unsigned long long, RDX_GATHERED>(keys.data(), len, p, shift, bits, s);
        });
        simt::launch(1, 1024, [&] { rdx_choose(s, shift, bits, kbits); });
        shift -= bits;
    }
}

template <typename T, int KEY>
static void run(const std::vector<T>& x, const std::vector<i64>& a, double center, double* out) {
    const i64 n = a[1], k0 = a[2], k1 = a[3], S = a[4], margin = a[5], cap = a[6];
    SelParams p{center, (int)a[7], (int)a[8]};
    const int kbits = KEY == RDX_FLOAT32 ? 32 : 64;
    std::vector<unsigned long long> sample(S);
    simt::launch(blocks(S), TPB, [&] { rdx_sample<T, KEY>(x.data(), n, p, sample.data(), S); });
    auto place = [&](i64 k) { return (i64)((double)k * (double)S / (double)n); };
    const bool lo_open = place(k0) < margin, hi_open = place(k1) + margin >= S - 1;
    const i64 lo = lo_open ? 0 : place(k0) - margin, hi = hi_open ? S - 1 : place(k1) + margin;
    auto bounds = new_state((unsigned long long)lo, (unsigned long long)hi);
    choose_kept(bounds, sample, kbits);
    std::vector<unsigned long long> kept(cap, 0ull), tally(2, 0ull);
    simt::launch(blocks(n), TPB, [&] {
        rdx_bracket<T, KEY>(x.data(), n, p, (const RdxState*)bounds.data(), lo_open, hi_open,
                            kept.data(), cap, tally.data());
    });
    auto st = new_state((unsigned long long)k0, (unsigned long long)k1);
    simt::launch(1, 32, [&] { rdx_bracket_settle((RdxState*)st.data(), tally.data(), cap); });
    choose_kept(st, kept, kbits);
    const RdxState* s = (const RdxState*)st.data();
    out[3] = (double)tally[0];
    out[4] = (double)tally[1];
    if (s->overflow) {
        out[0] = 2;
    } else if (s->missing) {
        out[0] = 1;
    } else {
        out[0] = 0;
        out[1] = kbits == 32 ? value32(s->value[0]) : value64(s->value[0]);
        out[2] = kbits == 32 ? value32(s->value[1]) : value64(s->value[1]);
    }
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    g_dir = argv[1];
    auto a = load<i64>("args");
    double center;
    std::memcpy(&center, &a[9], 8);
    double out[5] = {0, 0, 0, 0, 0};
    if (a[0] == 1)
        run<double, RDX_MAPPED>(load<double>("x"), a, center, out);
    else if (a[0] == 0)
        run<float, RDX_MAPPED>(load<float>("x"), a, center, out);
    else
        run<float, RDX_FLOAT32>(load<float>("x"), a, center, out);
    write_bin(g_dir + "/out.bin", out, 5);
    return 0;
}
