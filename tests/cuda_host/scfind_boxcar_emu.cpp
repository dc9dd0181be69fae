// Host run of kernels/scfind.cu's fused boxcars (SoFiA-2's boxcar arithmetic) in
// src/cube/scfind/cuda.rs's order for `Plan::exact`: per slab (top slab first) the x boxcars
// (sofia2_boxcar_rows over the rows, or, for a radius too wide for its ring, sofia2_boxcars
// on the planes transposed by sc_transpose, and back), the y boxcars, then the spectral
// running mean carried from the slab above. Slabs hold planes z0-lo .. z1+hi-1 (zero planes
// outside the cube, the constant boundary). Usage:
// scfind_boxcar_emu DIR [fixed]; with `fixed`, the chains the register-ring kernels take
// (sofia2_boxcar_{rows,lines}_fixed, cut into launches as fixed_groups in cuda.rs: runs of one
// radius, at most SC_MAX_BOXCARS passes a launch, whole lines without a carry in) run in them,
// the rest as without it. Reads DIR/cube.bin (float32 or float64), DIR/mask.bin (uint8, the
// mask bits), DIR/replace.bin (f64: the replacement kind and value, the element size in bytes),
// DIR/params.bin (i64: nz ny nx rz
// nslabs, the count then the radii of the x boxcars, the same for y, then z0 z1 lo hi per slab
// in ascending z), writes DIR/out.bin (the cube's type: the smoothed cube's interior planes). The
// values are prepared first (prepare, or folded into the first transpose), as the engine does.
#include "simt.hpp"
#include "emu_io.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "common.cuh"
#include "scfind.cu"

template <typename T>
static std::vector<T> load(const std::string& path) {
    return read_bin<T>(path);
}

// The kernels for element type T (the f32/f64 entry points of the .cu file, suffix SFX).
template <typename T>
struct K;
#define SC_EMU_ENTRY_POINTS(T, SFX)                                                          \
    template <>                                                                              \
    struct K<T> {                                                                            \
        static void boxcars(const T* s, T* d, ScBoxcars p, const T* ci, T* co) {             \
            sofia2_boxcars_##SFX(s, d, p, ci, co);                                           \
        }                                                                                    \
        static void rows(const T* s, const unsigned char* m, T* d, ScBoxcars p) {            \
            sofia2_boxcar_rows_##SFX(s, m, d, p);                                            \
        }                                                                                    \
        static void transpose(const T* s, const unsigned char* m, T* d, i64 pl, i64 r, i64 c, \
                              int prep, int kind, double value) {                            \
            sc_transpose_##SFX(s, m, d, pl, r, c, prep, kind, value);                        \
        }                                                                                    \
        static void prepare(const T* x, const unsigned char* m, T* o, i64 n, int kind,       \
                            double value) {                                                  \
            prepare_##SFX(x, m, o, n, kind, value);                                          \
        }                                                                                    \
    };
SC_EMU_ENTRY_POINTS(float, f32)
SC_EMU_ENTRY_POINTS(double, f64)
#undef SC_EMU_ENTRY_POINTS

static bool g_fixed = false;

// The register-ring kernel of radius p.r[0] and p.passes passes (the instantiations of the .cu
// file).
template <typename T, int R, int P>
static void fixed_launch(bool rows, const T* s, const unsigned char* m, T* d, ScBoxcars p, T* co,
                         unsigned grid, unsigned block) {
    if (p.passes != P) std::abort();
    simt::launch(grid, block, [&] {
        if (rows)
            sofia2_boxcar_rows_fixed<T, R, P>(s, m, d, p);
        else
            sofia2_boxcar_lines_fixed<T, R, P>(s, d, p, co);
    });
}
template <typename T, int R>
static void fixed_passes(bool rows, const T* s, const unsigned char* m, T* d, ScBoxcars p, T* co,
                         unsigned grid, unsigned block) {
    switch (p.passes) {
    case 1: return fixed_launch<T, R, 1>(rows, s, m, d, p, co, grid, block);
    case 2: return fixed_launch<T, R, 2>(rows, s, m, d, p, co, grid, block);
    case 3: return fixed_launch<T, R, 3>(rows, s, m, d, p, co, grid, block);
    case 4: return fixed_launch<T, R, 4>(rows, s, m, d, p, co, grid, block);
    }
    std::abort();
}
template <typename T>
static void fixed(bool rows, const T* s, const unsigned char* m, T* d, ScBoxcars p, T* co,
                  unsigned grid, unsigned block) {
    switch (p.r[0]) {
    case 1: return fixed_passes<T, 1>(rows, s, m, d, p, co, grid, block);
    case 2: return fixed_passes<T, 2>(rows, s, m, d, p, co, grid, block);
    case 3: return fixed_passes<T, 3>(rows, s, m, d, p, co, grid, block);
    case 4: return fixed_passes<T, 4>(rows, s, m, d, p, co, grid, block);
    }
    if (rows) std::abort();
    switch (p.r[0]) {
    case 5: return fixed_launch<T, 5, 1>(false, s, m, d, p, co, grid, block);
    case 6: return fixed_launch<T, 6, 1>(false, s, m, d, p, co, grid, block);
    case 7: return fixed_launch<T, 7, 1>(false, s, m, d, p, co, grid, block);
    case 8: return fixed_launch<T, 8, 1>(false, s, m, d, p, co, grid, block);
    }
    std::abort();
}

// cuda.rs's fixed_cut: (radius, passes) launches, or an empty vector when a radius has no
// register-ring kernel.
static std::vector<std::pair<i64, int>> fixed_cut(const std::vector<i64>& rs, bool lines) {
    std::vector<std::pair<i64, int>> out;
    size_t start = 0;
    while (start < rs.size()) {
        const i64 r = rs[start];
        size_t end = start;
        while (end < rs.size() && rs[end] == r) ++end;
        const int m = (int)(end - start);
        const bool single = lines && m == 1 && r <= SC_FIXED_MAX_R_SINGLE;
        if (r == 0 || (r > SC_FIXED_MAX_R && !single)) return {};
        const int k = (m + SC_MAX_BOXCARS - 1) / SC_MAX_BOXCARS;
        for (int i = 0; i < k; ++i) out.push_back({r, m / k + (i < m % k ? 1 : 0)});
        start = end;
    }
    return out;
}

template <typename T>
static ScBoxcars fixed_args(i64 r, int passes) {
    ScBoxcars p{};
    for (int k = 0; k < passes; ++k) {
        p.r[k] = r;
        p.inv[k] = (double)(T)(1.0 / (double)(2 * r + 1));
    }
    p.passes = passes;
    return p;
}

template <typename T>
static const int LINE_SLOTS = SC_LINE_RING_BYTES / sizeof(T);
template <typename T>
static const int ROW_SLOTS = SC_ROW_RING_BYTES / sizeof(T);

// The launches of the passes of radii rs from index k on, as src/cube/scfind/cuda.rs groups
// them (boxcar_groups: at most SC_MAX_BOXCARS a launch, the rings of the ring-fed passes, all
// with first_fed, within slots); a carried pass runs alone.
template <typename T>
static ScBoxcars group(const std::vector<i64>& rs, size_t& k, bool first_fed, bool alone,
                       int slots) {
    ScBoxcars p{};
    int np = 0;
    i64 used = first_fed ? 2 * rs[k] + 1 : 0;
    do {
        if (np > 0) used += 2 * rs[k] + 1;
        p.r[np] = rs[k];
        p.inv[np] = (double)(T)(1.0 / (double)(2 * rs[k] + 1));
        ++np;
        ++k;
    } while (!alone && k < rs.size() && np < SC_MAX_BOXCARS &&
             used + 2 * rs[k] + 1 <= slots);
    p.passes = np;
    return p;
}

// sofia2_boxcars over (outer, n, inner) lines, planes top..bottom.
template <typename T>
static void passes(std::vector<T>& a, std::vector<T>& b, i64 outer, i64 n, i64 inner,
                   const std::vector<i64>& rs, i64 top, i64 bottom, std::vector<T>& cin,
                   int has_in, std::vector<T>& cout, int has_out) {
    const auto cut = fixed_cut(rs, true);
    if (g_fixed && !has_in && top == n - 1 && bottom == 0 && !cut.empty() &&
        (!has_out || cut.size() == 1)) {
        for (auto [r, np] : cut) {
            ScBoxcars p = fixed_args<T>(r, np);
            p.outer = outer;
            p.n = n;
            p.inner = inner;
            p.top = top;
            p.bottom = bottom;
            p.has_carry_out = has_out;
            const i64 lines = outer * inner;
            const unsigned grid = (unsigned)std::min<i64>((lines + 63) / 64, 16);
            fixed<T>(false, a.data(), nullptr, b.data(), p, cout.data(), grid, 64);
            std::swap(a, b);
            if (has_out) std::swap(cin, cout);
        }
        return;
    }
    size_t k = 0;
    while (k < rs.size()) {
        ScBoxcars p = group<T>(rs, k, false, has_in || has_out, LINE_SLOTS<T>);
        p.outer = outer;
        p.n = n;
        p.inner = inner;
        p.top = top;
        p.bottom = bottom;
        p.has_carry_in = has_in;
        p.has_carry_out = has_out;
        const i64 lines = outer * inner;
        const unsigned block = 64;
        const unsigned grid = (unsigned)std::min<i64>((lines + block - 1) / block, 16);
        simt::launch(grid, block,
                     [&] { K<T>::boxcars(a.data(), b.data(), p, cin.data(), cout.data()); });
        std::swap(a, b);
        if (has_out) std::swap(cin, cout);
    }
}

// sofia2_boxcar_rows over rows lines of n values; the first launch prepares src (the raw
// slab, with its mask) on the way in.
template <typename T>
static void rows_passes(std::vector<T>& a, std::vector<T>& b, i64 rows, i64 n,
                        const std::vector<i64>& rs, const T* src, const unsigned char* mask,
                        int kind, double value) {
    const auto cut = fixed_cut(rs, false);
    if (g_fixed && !cut.empty()) {
        bool first = true;
        for (auto [r, np] : cut) {
            ScBoxcars p = fixed_args<T>(r, np);
            p.outer = rows;
            p.n = n;
            p.inner = 1;
            p.top = n - 1;
            p.bottom = 0;
            p.prep = first;
            p.kind = kind;
            p.value = value;
            const int warps = SC_ROW_WARPS(T);
            const i64 groups = (rows + 31) / 32;
            const unsigned grid = (unsigned)std::min<i64>((groups + warps - 1) / warps, 2);
            fixed<T>(true, first ? src : a.data(), mask, b.data(), p, nullptr, grid, 32 * warps);
            std::swap(a, b);
            first = false;
        }
        return;
    }
    size_t k = 0;
    bool first = true;
    while (k < rs.size()) {
        ScBoxcars p = group<T>(rs, k, true, false, ROW_SLOTS<T>);
        p.outer = rows;
        p.n = n;
        p.inner = 1;
        p.top = n - 1;
        p.bottom = 0;
        p.prep = first;
        p.kind = kind;
        p.value = value;
        const int warps = SC_ROW_WARPS(T);
        const i64 groups = (rows + 31) / 32;
        const unsigned grid = (unsigned)std::min<i64>((groups + warps - 1) / warps, 2);
        simt::launch(grid, 32 * warps,
                     [&] { K<T>::rows(first ? src : a.data(), mask, b.data(), p); });
        std::swap(a, b);
        first = false;
    }
}

// b = a's planes transposed, then swap; with prep, src = the raw slab prepared on the way.
template <typename T>
static void transpose(std::vector<T>& a, std::vector<T>& b, i64 planes, i64 rows, i64 cols,
                      const T* src = nullptr, const unsigned char* mask = nullptr, int kind = 0,
                      double value = 0.0) {
    const i64 tiles = planes * ((rows + 31) / 32) * ((cols + 31) / 32);
    const unsigned grid = (unsigned)std::min<i64>(tiles, 5);  // blocks loop over tiles
    const int prep = src != nullptr;
    simt::launch(grid, 256, [&] {
        K<T>::transpose(prep ? src : a.data(), mask, b.data(), planes, rows, cols, prep, kind,
                        value);
    });
    std::swap(a, b);
}

template <typename T>
static int run(const std::string& dir, const std::vector<i64>& p, int kind, double value) {
    auto cube = load<T>(dir + "/cube.bin");
    auto mask = load<unsigned char>(dir + "/mask.bin");
    const i64 nz = p[0], ny = p[1], nx = p[2], rz = p[3], nslabs = p[4];
    i64 at = 5;
    const std::vector<i64> rx(p.begin() + at + 1, p.begin() + at + 1 + p[at]);
    at += 1 + p[at];
    const std::vector<i64> ry(p.begin() + at + 1, p.begin() + at + 1 + p[at]);
    at += 1 + p[at];
    const i64 plane = ny * nx;
    std::vector<T> out(nz * plane, (T)0);
    std::vector<T> carry(plane, (T)0), carry_next(plane, (T)0);
    int valid = 0;
    for (i64 s = nslabs - 1; s >= 0; --s) {  // top down
        const i64* sl = &p[at + 4 * s];
        const i64 z0 = sl[0], z1 = sl[1], lo = sl[2], hi = sl[3];
        const i64 l = lo + (z1 - z0) + hi;
        std::vector<T> a(l * plane, (T)0), b(l * plane, (T)0), x(l * plane, (T)0);
        std::vector<unsigned char> m(l * plane, 0);
        for (i64 k = 0; k < l; ++k) {
            const i64 z = z0 - lo + k;
            if (z < 0 || z >= nz) continue;
            for (i64 i = 0; i < plane; ++i) {
                x[k * plane + i] = cube[z * plane + i];
                m[k * plane + i] = mask[z * plane + i];
            }
        }
        // the engine's prepare: folded into the first x launch when there are x boxcars
        if (rx.empty()) {
            simt::launch(4, 64, [&] { K<T>::prepare(x.data(), m.data(), a.data(), l * plane,
                                                    kind, value); });
        } else if (std::any_of(rx.begin(), rx.end(),
                               [](i64 r) { return 2 * r + 1 > ROW_SLOTS<T>; })) {
            transpose<T>(a, b, l, ny, nx, x.data(), m.data(), kind, value);
            passes<T>(a, b, l, nx, ny, rx, nx - 1, 0, carry, 0, carry_next, 0);
            transpose<T>(a, b, l, nx, ny);
        } else {
            rows_passes<T>(a, b, l * ny, nx, rx, x.data(), m.data(), kind, value);
        }
        if (!ry.empty()) passes<T>(a, b, l, ny, nx, ry, ny - 1, 0, carry, 0, carry_next, 0);
        if (rz > 0) {
            passes<T>(a, b, 1, l, plane, {rz}, lo + (z1 - z0) - 1, lo, carry, valid, carry_next,
                      1);
            valid = 1;
        }
        for (i64 z = z0; z < z1; ++z)
            for (i64 i = 0; i < plane; ++i) out[z * plane + i] = a[(z - z0 + lo) * plane + i];
    }
    FILE* f = std::fopen((dir + "/out.bin").c_str(), "wb");
    std::fwrite(out.data(), sizeof(T), out.size(), f);
    std::fclose(f);
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const std::string dir = argv[1];
    g_fixed = argc > 2 && std::string(argv[2]) == "fixed";
    const auto p = load<i64>(dir + "/params.bin");
    const auto rep = load<double>(dir + "/replace.bin");  // kind, value, element size
    const int kind = (int)rep[0];
    if (rep[2] == 8) return run<double>(dir, p, kind, rep[1]);
    return run<float>(dir, p, kind, rep[1]);
}
