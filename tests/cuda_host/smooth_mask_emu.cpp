// Host run of kernels/smooth.cu's masked-smoothing kernels (smooth_mask_prep, then
// smooth_mask_divide) in the SIMT emulator. Usage: smooth_mask_emu DIR HAS_MASK THR; reads
// DIR/map.bin, DIR/mask.bin (when HAS_MASK), DIR/num.bin, DIR/den.bin (float64); writes
// DIR/mw.bin and DIR/w.bin (the prep of map and mask), DIR/out.bin (num / den, UNSEEN
// below THR) and DIR/out_inplace.bin (the same written over num); prints the prep's bad flag
// (a mask value outside [0, 1]).
#include "simt.hpp"
#include "emu_io.hpp"

#include <algorithm>
#include <cmath>
#include <string>

using std::isfinite;
using std::min;

inline double cospi(double x) { return std::cos(M_PI * x); }
inline void sincospi(double x, double* s, double* c) {
    *s = std::sin(M_PI * x);
    *c = std::cos(M_PI * x);
}

#include "common.cuh"
#include "smooth.cu"

static std::vector<double> load(const std::string& path) { return read_bin<double>(path); }

int main(int argc, char** argv) {
    if (argc < 4) return 2;
    const std::string dir = argv[1];
    const int has_mask = std::atoi(argv[2]);
    const double thr = std::atof(argv[3]);
    auto m = load(dir + "/map.bin");
    const i64 n = (i64)m.size();
    std::vector<double> w = has_mask ? load(dir + "/mask.bin") : std::vector<double>(n, NAN);
    // a small grid: the grid-stride loops must cover n with fewer threads than pixels
    int bad = 0;
    simt::launch(3u, 64u, [&] { smooth_mask_prep(m.data(), w.data(), has_mask, n, &bad); });
    write_bin(dir + "/mw.bin", m);
    write_bin(dir + "/w.bin", w);
    auto num = load(dir + "/num.bin");
    auto den = load(dir + "/den.bin");
    std::vector<double> out(num.size(), 0.0);
    simt::launch(2u, 32u, [&] {
        smooth_mask_divide(num.data(), den.data(), thr, (i64)num.size(), out.data());
    });
    write_bin(dir + "/out.bin", out);
    // in place (out = num), as a single beam runs it
    simt::launch(2u, 32u, [&] {
        smooth_mask_divide(num.data(), den.data(), thr, (i64)num.size(), num.data());
    });
    write_bin(dir + "/out_inplace.bin", num);
    std::printf("ok %lld pixels bad %d\n", (long long)n, bad);
    return 0;
}
