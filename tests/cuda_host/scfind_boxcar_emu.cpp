// Host run of kernels/scfind.cu's sofia2_boxcar (SoFiA-2's boxcar arithmetic) in
// src/cube/scfind/cuda.rs's order for `Plan::exact`: per slab (top slab first) the x boxcars
// (on the planes transposed by sc_transpose, and back), the y boxcars, then the spectral running mean carried from the slab above. Slabs hold planes
// z0-lo .. z1+hi-1 (zero planes outside the cube, the constant boundary). Usage:
// scfind_boxcar_emu DIR; reads DIR/cube.bin (float32), DIR/params.bin (i64: nz ny nx rxy
// passes rz nslabs, then z0 z1 lo hi per slab in ascending z), writes DIR/out.bin (float32,
// the smoothed cube's interior planes).
#include "simt.hpp"

#include <string>
#include <vector>

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }

#include "common.cuh"
#include "scfind.cu"

template <typename T>
static std::vector<T> load(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        std::fprintf(stderr, "cannot open %s\n", path.c_str());
        std::exit(2);
    }
    std::fseek(f, 0, SEEK_END);
    long bytes = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    std::vector<T> v(bytes / sizeof(T));
    if (std::fread(v.data(), sizeof(T), v.size(), f) != v.size()) std::exit(3);
    std::fclose(f);
    return v;
}

static void pass(std::vector<float>& a, std::vector<float>& b, i64 outer, i64 n, i64 inner,
                 i64 r, i64 top, i64 bottom, std::vector<float>& cin, int has_in,
                 std::vector<float>& cout, int has_out) {
    const double inv = (double)(float)(1.0 / (double)(2 * r + 1));
    const i64 lines = outer * inner;
    const unsigned block = 64;
    const unsigned grid = (unsigned)std::min<i64>((lines + block - 1) / block, 16);
    simt::launch(grid, block, [&] {
        sofia2_boxcar_f32(a.data(), b.data(), outer, n, inner, r, inv, top, bottom, cin.data(),
                          has_in, cout.data(), has_out);
    });
    std::swap(a, b);
    if (has_out) std::swap(cin, cout);
}

static void transpose(std::vector<float>& a, std::vector<float>& b, i64 planes, i64 rows,
                      i64 cols) {
    const i64 tiles = planes * ((rows + 31) / 32) * ((cols + 31) / 32);
    const unsigned grid = (unsigned)std::min<i64>(tiles, 5);  // blocks loop over tiles
    simt::launch(grid, 256, [&] { sc_transpose_f32(a.data(), b.data(), planes, rows, cols); });
    std::swap(a, b);
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const std::string dir = argv[1];
    auto cube = load<float>(dir + "/cube.bin");
    auto p = load<i64>(dir + "/params.bin");
    const i64 nz = p[0], ny = p[1], nx = p[2], rxy = p[3], passes = p[4], rz = p[5];
    const i64 nslabs = p[6];
    const i64 plane = ny * nx;
    std::vector<float> out(nz * plane, 0.0f);
    std::vector<float> carry(plane, 0.0f), carry_next(plane, 0.0f);
    int valid = 0;
    for (i64 s = nslabs - 1; s >= 0; --s) {  // top down
        const i64 z0 = p[7 + 4 * s], z1 = p[8 + 4 * s], lo = p[9 + 4 * s], hi = p[10 + 4 * s];
        const i64 l = lo + (z1 - z0) + hi;
        std::vector<float> a(l * plane, 0.0f), b(l * plane, 0.0f);
        for (i64 k = 0; k < l; ++k) {
            const i64 z = z0 - lo + k;
            if (z < 0 || z >= nz) continue;
            for (i64 i = 0; i < plane; ++i) {
                const float v = cube[z * plane + i];
                a[k * plane + i] = std::isnan(v) ? 0.0f : v;
            }
        }
        if (rxy > 0) {
            transpose(a, b, l, ny, nx);
            for (i64 q = 0; q < passes; ++q)
                pass(a, b, l, nx, ny, rxy, nx - 1, 0, carry, 0, carry_next, 0);
            transpose(a, b, l, nx, ny);
            for (i64 q = 0; q < passes; ++q)
                pass(a, b, l, ny, nx, rxy, ny - 1, 0, carry, 0, carry_next, 0);
        }
        if (rz > 0) {
            pass(a, b, 1, l, plane, rz, lo + (z1 - z0) - 1, lo, carry, valid, carry_next, 1);
            valid = 1;
        }
        for (i64 z = z0; z < z1; ++z)
            for (i64 i = 0; i < plane; ++i) out[z * plane + i] = a[(z - z0 + lo) * plane + i];
    }
    FILE* f = std::fopen((dir + "/out.bin").c_str(), "wb");
    std::fwrite(out.data(), sizeof(float), out.size(), f);
    std::fclose(f);
    return 0;
}
