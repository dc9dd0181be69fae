// Host run of the CUDA à trous engine's device code (kernels/atrous.cu and the filter passes of
// kernels/filters.cu) in src/cube/atrous/cuda.rs's launch order, driven by a plain copy of the
// convergence loop of src/cube/atrous/mod.rs (State::iterate; robust statistics only).
// Usage: atrous_emu DIR; reads DIR/x.bin (float64 data), DIR/i64.bin, DIR/f64.bin (the
// parameters written by tests/test_atrous_cuda_host.py); writes DIR/out.bin and DIR/iters.bin.
#include "simt.hpp"
#include "emu_io.hpp"

#include <string>

#define __ldg(p) (*(p))

#include "common.cuh"
#include "filters.cu"
#include "atrous.cu"

static std::string g_dir;

template <typename T>
std::vector<T> load(const char* name) {
    return read_bin<T>(g_dir + "/" + name + ".bin");
}

template <typename T>
void save(const char* name, const std::vector<T>& v) {
    write_bin(g_dir + "/" + name + ".bin", v);
}

static const unsigned TPB = 256;

static unsigned blocks(i64 n) { return (unsigned)std::max<i64>(1, std::min<i64>((n + TPB - 1) / TPB, 64)); }

struct Layout {
    i64 n, units, len, unit_stride, elem_stride, unit_div;
};

// Median (or MADFM when abs) of every active unit by two at_select launches, as cuda.rs does.
static std::vector<double> medians(const std::vector<double>& data, const Layout& L,
                                   const std::vector<double>& count,
                                   const std::vector<double>& center, int abs,
                                   const std::vector<int>& active) {
    std::vector<double> lo(L.units), hi(L.units), klo(L.units), khi(L.units), out(L.units);
    for (i64 u = 0; u < L.units; ++u) {
        i64 n = (i64)count[u];
        klo[u] = (double)((n > 0 ? n - 1 : 0) / 2);
        khi[u] = (double)(n / 2);
    }
    for (int which = 0; which < 2; ++which) {
        std::vector<double>& res = which ? hi : lo;
        const std::vector<double>& k = which ? khi : klo;
        simt::launch((unsigned)L.units, TPB, [&] {
            at_select<double>(data.data(), L.len, L.unit_stride, L.elem_stride, k.data(),
                              center.data(), abs, active.data(), res.data());
        });
    }
    for (i64 u = 0; u < L.units; ++u) {
        i64 n = (i64)count[u];
        out[u] = n == 0 ? NAN : (n % 2 ? hi[u] : 0.5 * (lo[u] + hi[u]));
    }
    return out;
}

static std::vector<double> sigmas(const std::vector<double>& data, const Layout& L,
                                  const std::vector<double>& count,
                                  const std::vector<int>& active) {
    std::vector<double> none(L.units, NAN);
    auto c = medians(data, L, count, none, 0, active);
    auto m = medians(data, L, count, c, 1, active);
    for (auto& v : m) v /= 0.6744888;
    return m;
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    g_dir = argv[1];
    auto x = load<double>("x");
    // i64: n, units, len, unit_stride, elem_stride, unit_div, loop_scales, taps, npasses,
    //      then npasses (outer, n, inner), then kept[1..loop_scales]
    auto I = load<i64>("i64");
    // f64: snr, convergence, blank_first, blank_later, weights[taps], factors[0..loop_scales]
    auto F = load<double>("f64");
    Layout L{I[0], I[1], I[2], I[3], I[4], I[5]};
    const i64 loop_scales = I[6], taps = I[7], npasses = I[8];
    const i64* views = I.data() + 9;
    const i64* kept = views + 3 * npasses;
    const double snr = F[0], conv = F[1], blank_first = F[2], blank_later = F[3];
    const double* w1 = F.data() + 4;
    const double* factors = w1 + taps;
    const i64 n = L.n;

    std::vector<double> out(n, 0.0), c(n), s(n), w(n);
    std::vector<std::vector<double>> planes;  // the deferred adds' planes and thresholds
    std::vector<double> plane_thr;
    std::vector<double> count(L.units, 0.0);
    for (i64 i = 0; i < n; ++i)
        if (std::isfinite(x[i])) count[(i / L.unit_div) % L.units] += 1;
    std::vector<int> active(L.units);
    for (i64 u = 0; u < L.units; ++u) active[u] = count[u] >= 1;
    auto sigma0 = sigmas(x, L, count, active);
    std::vector<double> old(L.units, INFINITY);
    std::vector<i64> iters(L.units, 0);
    const i64 hw = taps / 2;

    // One filter pass along view p with hole spacing `step`: dst = h * src (mirror edges).
    auto pass = [&](const std::vector<double>& src, std::vector<double>& dst, i64 p, i64 step) {
        const i64 outer = views[3 * p], len = views[3 * p + 1], inner = views[3 * p + 2];
        const bool last = inner == 1;
        const i64 fdim = last ? len : inner;
        simt::launch(blocks(fdim), TPB, [&] {
            // the whole pass as one piece: every line s, every position f along it
            correlate_axis<double>(src.data(), dst.data(), outer, len, inner, len, 0, 0, len, w1,
                                   (int)taps, -hw * step, step, 1.0, SC_MODE_MIRROR, 0.0, 0,
                                   last ? outer : outer * len, 0, fdim);
        });
    };

    for (int it = 1; it <= 100; ++it) {
        bool any = false;
        for (i64 u = 0; u < L.units; ++u) any = any || active[u];
        if (!any) break;
        const double blank = it == 1 ? blank_first : blank_later;
        simt::launch(blocks(n), TPB, [&] { at_start<double>(x.data(), out.data(), c.data(), blank, n); });
        for (i64 sc = 1; sc <= loop_scales; ++sc) {
            const i64 step = (i64)1 << (sc - 1);
            if (npasses == 1) {
                pass(c, s, 0, step);
            } else if (npasses == 2) {
                pass(c, w, 0, step);
                pass(w, s, 1, step);
            } else {
                pass(c, s, 0, step);
                pass(s, w, 1, step);
                pass(w, s, 2, step);
            }
            simt::launch(blocks(n), TPB, [&] { at_split<double>(x.data(), c.data(), s.data(), w.data(), n); });
            if (kept[sc - 1]) {
                std::vector<double> none(L.units, NAN);
                auto med = medians(w, L, count, none, 0, active);
                std::vector<double> thr(L.units);
                for (i64 u = 0; u < L.units; ++u) thr[u] = med[u] + snr * sigma0[u] * factors[sc];
                if (sc == 1) {  // added at once (cuda.rs with no spare left)
                    simt::launch(blocks(n), TPB, [&] {
                        at_add<double>(w.data(), out.data(), thr.data(), active.data(), n, L.unit_div, L.units);
                    });
                } else {  // deferred to the finish
                    planes.push_back(w);
                    plane_thr.insert(plane_thr.end(), thr.begin(), thr.end());
                }
            }
        }
        std::vector<unsigned long long> ptrs;
        for (auto& pl : planes) ptrs.push_back((unsigned long long)pl.data());
        ptrs.push_back(0);
        plane_thr.push_back(0.0);
        simt::launch(blocks(n), TPB, [&] {
            at_finish<double>(x.data(), c.data(), out.data(), w.data(), ptrs.data(), (int)planes.size(),
                              plane_thr.data(), active.data(), n, L.unit_div, L.units);
        });
        planes.clear();
        plane_thr.clear();
        auto sig = sigmas(w, L, count, active);
        for (i64 u = 0; u < L.units; ++u) {
            if (!active[u]) continue;
            const double rel = std::fabs(old[u] - sig[u]) / sig[u];
            iters[u] = it;
            old[u] = sig[u];
            if (!(it == 1 || rel > conv) || it >= 100) active[u] = 0;
        }
    }
    simt::launch(blocks(n), TPB, [&] { at_blank<double>(x.data(), out.data(), n); });
    save("out", out);
    save("iters", iters);
    return 0;
}
