// Host run of kernels/filters.cu's whole-axis kernels in the SIMT emulator: correlate_whole<C>
// (an inner axis, C = 8, 16, 32 columns a block) and correlate_lines<L> (the last axis, L = 1,
// 2, 8 lines a block), with plain stores and with the à trous split fused into them, beside the
// per-tap kernel correlate_axis (and, for the split, correlate_axis then sc_atrous_split) that
// they must equal to the bit.
// Usage: filters_emu DIR TYPE KIND OUTER N INNER TAPS OFFSET STEP MODE CVAL SCALE, with TYPE f32
// or f64 and KIND whole or lines; reads DIR/in.bin, DIR/c.bin, DIR/data.bin (TYPE) and
// DIR/w.bin (float64 weights); writes DIR/<name>.bin (TYPE) for name = axis, axis_split_w,
// axis_split_c and, for each K whose tile fits the 48 KB of shared memory a block has here,
// <kind>K, <kind>K_split_w, <kind>K_split_c; prints the names of the K that ran.
#include "simt.hpp"
#include "emu_io.hpp"

#include <algorithm>
#include <string>

#define __ldg(p) (*(p))

#include "common.cuh"
#include "filters.cu"

static std::string g_dir;

template <typename T>
static void save(const std::string& name, const std::vector<T>& v) {
    write_bin(g_dir + "/" + name + ".bin", v);
}

struct Pass {
    i64 outer, n, inner;
    int taps;
    i64 offset, step;
    int mode;
    double cval, scale;
    const double* w;
};

// The shared bytes a whole-axis tile takes (as src/cube/filters/cuda.rs counts them).
static i64 tile_bytes(const Pass& p, bool lines, int k, int elem) {
    const i64 hl = std::max<i64>(0, -p.offset);
    const i64 hr = std::max<i64>(0, p.offset + (p.taps - 1) * p.step);
    const i64 weights = 8 * ((p.taps + 1) / 2) * 2;
    return weights + (lines ? (p.n + hl + hr + 2) * k * 8 : (p.n + hl + hr) * k * elem);
}

template <typename T, class Store>
static void run_tile(const Pass& p, bool lines, int k, const T* in, T* out, Store store) {
    const i64 items = lines ? (p.outer + k - 1) / k : p.outer * ((p.inner + k - 1) / k);
    // fewer blocks than items: the kernels' loops past the grid run too
    const unsigned grid = (unsigned)std::min<i64>(items, 3);
    auto body = [&] {
        const i64 a = lines ? p.outer : p.n, b = lines ? p.n : p.inner;
#define FILTERS_EMU_ARGS in, out, a, b, p.w, p.taps, p.offset, p.step, p.scale, p.mode, p.cval, 0, items, store
        if (lines && k == 1) correlate_lines<T, 1>(FILTERS_EMU_ARGS);
        if (lines && k == 2) correlate_lines<T, 2>(FILTERS_EMU_ARGS);
        if (lines && k == 8) correlate_lines<T, 8>(FILTERS_EMU_ARGS);
        if (!lines && k == 8) correlate_whole<T, 8>(FILTERS_EMU_ARGS);
        if (!lines && k == 16) correlate_whole<T, 16>(FILTERS_EMU_ARGS);
        if (!lines && k == 32) correlate_whole<T, 32>(FILTERS_EMU_ARGS);
#undef FILTERS_EMU_ARGS
    };
    simt::launch(grid, 256, body);
}

template <typename T>
static int run(const Pass& p, bool lines) {
    auto in = read_bin<T>(g_dir + "/in.bin");
    const auto c0 = read_bin<T>(g_dir + "/c.bin");
    const auto data = read_bin<T>(g_dir + "/data.bin");
    const size_t total = (size_t)(p.outer * p.n * p.inner);
    if (in.size() != total || c0.size() != total || data.size() != total) return 4;
    // the per-tap kernel over the whole view, then the split of its output
    std::vector<T> ref(total), w(total), c = c0;
    const bool last = p.inner == 1;
    const i64 fdim = last ? p.n : p.inner, sdim = last ? p.outer : p.outer * p.n;
    simt::launch((unsigned)((fdim + 255) / 256), 256, [&] {
        correlate_axis<T>(in.data(), ref.data(), p.outer, p.n, p.inner, p.n, 0, 0, p.n, p.w,
                          p.taps, p.offset, p.step, p.scale, p.mode, p.cval, 0, sdim, 0, fdim);
    });
    save("axis", ref);
    for (size_t i = 0; i < total; ++i) sc_atrous_split<T>(data[i], c[i], ref[i], &w[i], &c[i]);
    save("axis_split_w", w);
    save("axis_split_c", c);
    const std::string kind = lines ? "lines" : "whole";
    for (int k : lines ? std::vector<int>{1, 2, 8} : std::vector<int>{8, 16, 32}) {
        if (tile_bytes(p, lines, k, (int)sizeof(T)) > 48 * 1024) continue;
        const std::string name = kind + std::to_string(k);
        std::vector<T> out(total, (T)-7);  // a value no output has: a missed store shows
        run_tile<T>(p, lines, k, in.data(), out.data(), StorePlain<T>());
        save(name, out);
        std::vector<T> ws(total, (T)-7), cs = c0;
        run_tile<T>(p, lines, k, in.data(), ws.data(), StoreSplit<T>{cs.data(), data.data()});
        save(name + "_split_w", ws);
        save(name + "_split_c", cs);
        std::printf("%s\n", name.c_str());
    }
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 13) return 2;
    g_dir = argv[1];
    const std::string type = argv[2], kind = argv[3];
    const auto weights = read_bin<double>(g_dir + "/w.bin");
    Pass p{std::atoll(argv[4]), std::atoll(argv[5]), std::atoll(argv[6]), std::atoi(argv[7]),
           std::atoll(argv[8]), std::atoll(argv[9]), std::atoi(argv[10]), std::atof(argv[11]),
           std::atof(argv[12]), weights.data()};
    if ((int)weights.size() != p.taps || (kind == "lines") != (p.inner == 1)) return 2;
    return type == "f32" ? run<float>(p, kind == "lines") : run<double>(p, kind == "lines");
}
