// Host run of kernels/filters.cu's tiled kernels in the SIMT emulator, beside the per-tap kernel
// correlate_axis (and, for the split, correlate_axis then sc_atrous_split) that they must equal
// to the bit: along an inner axis correlate_whole<C> (C = 8, 16, 32 columns of the whole axis a
// block) and correlate_cols<R> (R = 1, 2, 4, 8 outputs of one phase a thread); along the last
// axis correlate_lines<L> (L = 1, 2, 8 whole lines a block) and correlate_line<R> (R = 1, 3, 5:
// windows of 256·R outputs); each with plain stores and with the à trous split fused into them,
// launched over the whole view as src/cube/filters/cuda.rs launches them (grids smaller than
// the work, so that every loop past the grid runs).
// Usage: filters_emu DIR TYPE OUTER N INNER TAPS OFFSET STEP MODE CVAL SCALE TILE..., with TYPE
// f32 or f64 and each TILE a kind and its K (whole16, cols4, lines8, line3: the tiles the host
// lets the pass take, `_core._filter_tile_plan`); reads DIR/in.bin, DIR/c.bin, DIR/data.bin
// (TYPE) and DIR/w.bin (float64 weights); writes DIR/<name>.bin (TYPE) for name = axis,
// axis_split_w, axis_split_c and, for each TILE, TILE, TILE_split_w, TILE_split_c.
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

struct Tile {
    std::string kind;  // whole, cols, lines, line
    int k;             // C, R, L, R
    std::string name() const { return kind + std::to_string(k); }
};

template <typename T, class Store>
static void run_tile(const Pass& p, const Tile& t, const T* in, T* out, Store store) {
    using simt::Dim3;
    const int k = t.k;
    auto few = [](i64 n) { return (unsigned)std::max<i64>(1, std::min<i64>(n, 3)); };
    if (t.kind == "whole" || t.kind == "lines") {
        const bool lines = t.kind == "lines";
        const i64 items = lines ? (p.outer + k - 1) / k : p.outer * ((p.inner + k - 1) / k);
        const i64 a = lines ? p.outer : p.n, b = lines ? p.n : p.inner;
        simt::launch(few(items), 256, [&] {
#define FILTERS_EMU_ARGS in, out, a, b, p.w, p.taps, p.offset, p.step, p.scale, p.mode, p.cval, 0, items, store
            if (lines && k == 1) correlate_lines<T, 1>(FILTERS_EMU_ARGS);
            if (lines && k == 2) correlate_lines<T, 2>(FILTERS_EMU_ARGS);
            if (lines && k == 8) correlate_lines<T, 8>(FILTERS_EMU_ARGS);
            if (!lines && k == 8) correlate_whole<T, 8>(FILTERS_EMU_ARGS);
            if (!lines && k == 16) correlate_whole<T, 16>(FILTERS_EMU_ARGS);
            if (!lines && k == 32) correlate_whole<T, 32>(FILTERS_EMU_ARGS);
#undef FILTERS_EMU_ARGS
        });
    } else if (t.kind == "cols") {
        // units: (slab, phase) pairs; tiles: 8·R outputs of a phase
        const i64 units = p.outer * p.step, qt = ((p.n + p.step - 1) / p.step + 8 * k - 1) / (8 * k);
        const Dim3 grid{(unsigned)((p.inner + 31) / 32), few(qt), few(units)};
        simt::launch(grid, Dim3{32, 8, 1}, [&] {
#define FILTERS_EMU_ARGS in, out, p.n, p.inner, p.n, 0, 0, p.n, p.w, p.taps, p.offset, p.step, p.scale, p.mode, p.cval, 0, units, 0, qt, store
            if (k == 1) correlate_cols<T, 1>(FILTERS_EMU_ARGS);
            if (k == 2) correlate_cols<T, 2>(FILTERS_EMU_ARGS);
            if (k == 4) correlate_cols<T, 4>(FILTERS_EMU_ARGS);
            if (k == 8) correlate_cols<T, 8>(FILTERS_EMU_ARGS);
#undef FILTERS_EMU_ARGS
        });
    } else {  // line: windows of 256·R outputs of a line
        const i64 nw = (p.n + 256 * k - 1) / (256 * k);
        simt::launch(Dim3{few(nw), few(p.outer), 1}, Dim3{256, 1, 1}, [&] {
#define FILTERS_EMU_ARGS in, out, p.n, p.n, 0, 0, p.n, p.w, p.taps, p.offset, p.step, p.scale, p.mode, p.cval, 0, p.outer, 0, nw, store
            if (k == 1) correlate_line<T, 1>(FILTERS_EMU_ARGS);
            if (k == 3) correlate_line<T, 3>(FILTERS_EMU_ARGS);
            if (k == 5) correlate_line<T, 5>(FILTERS_EMU_ARGS);
#undef FILTERS_EMU_ARGS
        });
    }
}

template <typename T>
static int run(const Pass& p, const std::vector<Tile>& tiles) {
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
    for (const Tile& t : tiles) {
        std::vector<T> out(total, (T)-7);  // a value no output has: a missed store shows
        run_tile<T>(p, t, in.data(), out.data(), StorePlain<T>());
        save(t.name(), out);
        std::vector<T> ws(total, (T)-7), cs = c0;
        run_tile<T>(p, t, in.data(), ws.data(), StoreSplit<T>{cs.data(), data.data()});
        save(t.name() + "_split_w", ws);
        save(t.name() + "_split_c", cs);
    }
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 12) return 2;
    g_dir = argv[1];
    const std::string type = argv[2];
    const auto weights = read_bin<double>(g_dir + "/w.bin");
    Pass p{std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5]), std::atoi(argv[6]),
           std::atoll(argv[7]), std::atoll(argv[8]), std::atoi(argv[9]), std::atof(argv[10]),
           std::atof(argv[11]), weights.data()};
    if ((int)weights.size() != p.taps) return 2;
    std::vector<Tile> tiles;
    for (int a = 12; a < argc; ++a) {
        const std::string t = argv[a];
        const size_t d = t.find_first_of("0123456789");
        if (d == std::string::npos) return 2;
        tiles.push_back({t.substr(0, d), std::atoi(t.c_str() + d)});
        const std::string& k = tiles.back().kind;
        if (k != "whole" && k != "cols" && k != "lines" && k != "line") return 2;
        if ((k == "lines" || k == "line") != (p.inner == 1)) return 2;
    }
    return type == "f32" ? run<float>(p, tiles) : run<double>(p, tiles);
}
