// Runs kernels/grid.cu's whole device pipeline in the SIMT emulator (simt.hpp), in the order
// src/grid/cuda/ launches it: the plan built on the "device" (prep, radix sort, ring tables),
// the scalar and spectral gathers (resident rows and packed channel blocks) and the finish
// kernel. Checks, per scenario:
//   - the device sort equals the host plan's order (src/grid/plan.rs: by key, ties by index)
//     and every table equals the host-built one;
//   - the sums equal a brute-force haversine sum with Cygrid's kernels and skyconv's NaN policy
//     to 1e-12 (relative to the largest |sum|), empty pixels identically;
//   - two runs with different thread interleavings give bit-identical results.
// Also checks the argument struct layouts: `--layout` prints "Struct.field offset size" lines
// that tests/grid/test_grid_cuda_host.py compares with the Rust structs in src/grid/cuda/args.rs.
// Exit status 0 and "all ok" when every check passes.
#include "simt.hpp"

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>

#include "common.cuh"
#include "grid.cu"

static int g_bad = 0;
#define CHECK(cond, ...)                                      \
    do {                                                      \
        if (!(cond)) {                                        \
            std::printf("  FAIL %s:%d: ", __FILE__, __LINE__); \
            std::printf(__VA_ARGS__);                         \
            std::printf("\n");                                \
            ++g_bad;                                          \
        }                                                     \
    } while (0)

// ------------------------------------------------------------------ launch shapes (as Rust)
static const unsigned THREADS = 256;
// backend::cuda::grid_stride(n, max_blocks); the emulator caps blocks low to exercise the
// grid-stride loops.
static unsigned gs(long long n, unsigned max_blocks = 3) {
    long long b = (n + THREADS - 1) / THREADS;
    if (b < 1) b = 1;
    if (b > max_blocks) b = max_blocks;
    return (unsigned)b;
}

// ------------------------------------------------------------------ host reference plan
static u64 ring_of_z_host(u64 nside, double z) {
    double ns = (double)nside, r;
    if (z > 2.0 / 3.0) r = std::round(ns * std::sqrt(3.0 * (1.0 - z)));
    else if (z < -2.0 / 3.0) r = 4.0 * ns - std::round(ns * std::sqrt(3.0 * (1.0 + z)));
    else r = std::round(ns * (2.0 - 1.5 * z));
    u64 ri = (u64)std::max(r, 1.0);
    return std::min(ri, 4 * nside - 1);
}

static u64 nside_for(double radius) {
    double want = std::min(std::max(1.5 / radius, 1.0), 65536.0);
    u64 ns = 1;
    while ((double)ns < want) ns *= 2;
    return ns;
}

struct Kern {
    int kind;
    double p0, p1, p2;  // Cygrid parameters (degrees, PA radians)
    double c[4], sigma, radius;
};

static Kern make_kernel(int kind, double p0, double p1, double p2) {
    Kern k{kind, p0, p1, p2, {0, 0, 0, 0}, 0, 0};
    double s0 = p0 * M_PI / 180;
    if (kind == 0) { k.c[0] = 0.5 / (s0 * s0); k.sigma = s0; }
    else if (kind == 1) {
        double a = s0, b = p1 * M_PI / 180;
        k.c[0] = 0.5 / (a * a); k.c[1] = 0.5 / (b * b); k.c[2] = cos(p2); k.c[3] = sin(p2);
        k.sigma = std::max(a, b);
    } else if (kind == 2) { k.c[0] = M_PI / (1.55 * s0); k.c[1] = M_PI / (2.52 * s0); k.sigma = s0; }
    else { k.c[0] = M_PI / (1.55 * s0); k.c[1] = 0.5 / (2.52 * s0 * 2.52 * s0); k.sigma = s0; }
    k.radius = 3 * k.sigma;
    return k;
}

static double cygrid_kernel(const Kern& K, double d, double br) {
    if (K.kind == 0) return exp(-d * d / (2 * K.p0 * K.p0));
    if (K.kind == 1) {
        double a = K.p0, b = K.p1;
        double ell = a * a * pow(sin(br - K.p2), 2) + b * b * pow(cos(br - K.p2), 2);
        return exp(-pow(d / a / b, 2) / 2 * ell);
    }
    if (K.kind == 2) {
        double x = M_PI * d / K.p0;
        double sn = fabs(x / 1.55) < 1e-10 ? 1 : sin(x / 1.55) / (x / 1.55);
        return sn * exp(-pow(x / 2.52, 2));
    }
    double x = M_PI * d / K.p0 / 1.55;
    double bs = x == 0 ? 0.5 : j1(x) / x;
    return bs * exp(-d * d / (2 * K.p0 * K.p0 * 2.52 * 2.52));
}

// ------------------------------------------------------------------ a scenario
enum WMode { W_NONE, W_SHARED, W_FULL };

template <typename T>
struct Scenario {
    std::string name;
    std::vector<double> lon, lat, tl, tb;
    std::vector<T> data;     // n x nchan
    std::vector<T> weights;  // n (shared) or n x nchan (full)
    int nchan = 1;
    WMode wmode = W_NONE;
    Kern K;
};

struct DevPlanHost {
    long long n_kept = 0;
    std::vector<u64> keys;
    std::vector<unsigned> order;
    std::vector<long long> ring_start;
    std::vector<double> x, y, z, zmin, zmax, lo_env, hi_env;
    long long nrings = 0;
    int passes = 0;
};

// The device plan, built exactly as DevicePlan::build in src/grid/cuda/plan.rs.
template <typename T>
static DevPlanHost build_device_plan(const Scenario<T>& s, uint64_t seed) {
    simt::seed = seed;
    const long long n = (long long)s.lon.size();
    const u64 nside = nside_for(s.K.radius);
    DevPlanHost out;
    out.nrings = 4 * (long long)nside;
    std::vector<u64> keys(n), keys2(n);
    std::vector<unsigned> vals(n), vals2(n), hist(8 * 256, 0u);
    const T* vcheck = s.nchan == 1 ? s.data.data() : nullptr;
    const T* wcheck = nullptr;
    if (s.wmode == W_SHARED || (s.wmode == W_FULL && s.nchan == 1)) wcheck = s.weights.data();
    GridPrepArgs pa{s.lon.data(), s.lat.data(), vcheck, wcheck, keys.data(), vals.data(),
                    hist.data(), n, (i64)nside};
    simt::launch(gs(n), THREADS, [&] {
        if (sizeof(T) == 4) grid_prep_f32(pa); else grid_prep_f64(pa);
    });
    long long kept = 0;
    for (int d = 0; d < 128; ++d) kept += hist[7 * 256 + d];
    std::vector<int> passes;
    for (int p = 0; p < 8; ++p) {
        unsigned mx = 0;
        for (int d = 0; d < 256; ++d) mx = std::max(mx, hist[p * 256 + d]);
        if ((long long)mx < n) passes.push_back(p);
    }
    for (int p = 0; p < 8; ++p) {
        long long tot = 0;
        for (int d = 0; d < 256; ++d) tot += hist[p * 256 + d];
        CHECK(tot == n, "%s: histogram of digit %d sums to %lld, not %lld", s.name.c_str(), p, tot, n);
    }
    out.n_kept = kept;
    out.passes = (int)passes.size();
    if (kept == 0) return out;
    const long long nblocks = (n + SC_RADIX_TILE - 1) / SC_RADIX_TILE;
    std::vector<unsigned> counts(256 * nblocks);
    u64 *kin = keys.data(), *kout = keys2.data();
    unsigned *vin = vals.data(), *vout = vals2.data();
    for (int p : passes) {
        GridRadixArgs ra{kin, vin, kout, vout, counts.data(), n, (i64)(8 * p), nblocks};
        simt::launch((unsigned)nblocks, SC_RADIX_THREADS, [&] { grid_radix_count(ra); });
        GridScanArgs sa{counts.data(), 256 * nblocks};
        // The host launches 1024 threads; a smaller block exercises the uneven split too.
        simt::launch(1, p % 2 ? 1024 : 64, [&] { grid_scan(sa); });
        simt::launch((unsigned)nblocks, SC_RADIX_THREADS, [&] { grid_radix_scatter(ra); });
        std::swap(kin, kout);
        std::swap(vin, vout);
    }
    out.keys.assign(kin, kin + kept);
    out.order.assign(vin, vin + kept);
    for (long long i = kept; i < n; ++i)
        CHECK(kin[i] == SC_DROPPED, "%s: a kept key sorted after the dropped ones", s.name.c_str());
    out.ring_start.assign(out.nrings + 1, -1);
    out.x.assign(kept, 0);
    out.y.assign(kept, 0);
    out.z.assign(kept, 0);
    out.zmin.assign(out.nrings, 0);
    out.zmax.assign(out.nrings, 0);
    out.lo_env.assign(out.nrings, 0);
    out.hi_env.assign(out.nrings, 0);
    GridRingArgs ga{out.keys.data(), out.z.data(), out.ring_start.data(), out.zmin.data(),
                    out.zmax.data(), out.lo_env.data(), out.hi_env.data(), kept, out.nrings};
    simt::launch(gs(out.nrings + 1), THREADS, [&] { grid_ring_starts(ga); });
    GridGeomArgs gg{s.lon.data(), s.lat.data(), out.order.data(), out.x.data(), out.y.data(),
                    out.z.data(), kept};
    simt::launch(gs(kept), THREADS, [&] { grid_plan_geom(gg); });
    simt::launch(gs(32 * out.nrings), THREADS, [&] { grid_ring_zspan(ga); });
    simt::launch(1, out.nrings > 4096 ? 1024 : 96, [&] { grid_envelopes(ga); });
    return out;
}

// The host plan (src/grid/plan.rs) for the same samples.
template <typename T>
static DevPlanHost host_plan(const Scenario<T>& s) {
    const long long n = (long long)s.lon.size();
    const u64 nside = nside_for(s.K.radius);
    DevPlanHost p;
    p.nrings = 4 * (long long)nside;
    struct KI { u64 key; unsigned idx; double x, y, z; };
    std::vector<KI> v;
    for (long long i = 0; i < n; ++i) {
        double lo = s.lon[i], la = s.lat[i];
        bool keep = std::isfinite(lo) && std::isfinite(la) && std::fabs(la) <= 90.0;
        if (keep && (s.wmode == W_SHARED || (s.wmode == W_FULL && s.nchan == 1)))
            keep = !std::isnan((double)s.weights[i]);
        if (keep && s.nchan == 1) keep = !std::isnan((double)s.data[i]);
        if (!keep) continue;
        double phi, u[3];
        sc_sample(lo, la, &phi, u);
        u64 r = ring_of_z_host(nside, u[2]);
        v.push_back({(r << SC_PHI_BITS) | sc_phi_key(phi), (unsigned)i, u[0], u[1], u[2]});
    }
    std::sort(v.begin(), v.end(), [](const KI& a, const KI& b) {
        return a.key < b.key || (a.key == b.key && a.idx < b.idx);
    });
    p.n_kept = (long long)v.size();
    for (auto& e : v) {
        p.keys.push_back(e.key);
        p.order.push_back(e.idx);
        p.x.push_back(e.x);
        p.y.push_back(e.y);
        p.z.push_back(e.z);
    }
    p.ring_start.resize(p.nrings + 1);
    for (long long r = 0; r <= p.nrings; ++r)
        p.ring_start[r] = std::lower_bound(p.keys.begin(), p.keys.end(), ((u64)r) << SC_PHI_BITS) - p.keys.begin();
    p.zmin.assign(p.nrings, INFINITY);
    p.zmax.assign(p.nrings, -INFINITY);
    for (long long r = 0; r < p.nrings; ++r)
        for (long long i = p.ring_start[r]; i < p.ring_start[r + 1]; ++i) {
            p.zmin[r] = std::min(p.zmin[r], p.z[i]);
            p.zmax[r] = std::max(p.zmax[r], p.z[i]);
        }
    p.lo_env = p.zmin;
    p.hi_env = p.zmax;
    for (long long r = 1; r < p.nrings; ++r) p.lo_env[r] = std::min(p.lo_env[r], p.lo_env[r - 1]);
    for (long long r = p.nrings - 2; r >= 0; --r) p.hi_env[r] = std::max(p.hi_env[r], p.hi_env[r + 1]);
    return p;
}

template <typename V>
static bool same_bits(const std::vector<V>& a, const std::vector<V>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(V)) == 0);
}

// ------------------------------------------------------------------ the gathers (as Rust)
// Per channel c and target t: sums u[c * nt + t], w[c * nt + t] and the finished outputs.
template <typename O>
struct Sums {
    std::vector<double> u, w;
    std::vector<O> cube, wout;
    std::vector<double> wmap;      // spectral, no per-channel weights: block 0's weight map
    std::vector<unsigned> flags;   // spectral: NaN flag of each channel block
};

enum Layout { RESIDENT, PACKED };

// Targets per gather launch: the Rust side cuts long gathers into pieces (whole runs of SC_RUN
// targets for the spectral gather); two runs here, so that most scenarios take several pieces.
static const long long PIECE = 2 * SC_RUN;

template <typename T, typename O>
static Sums<O> device_grid(const Scenario<T>& s, const DevPlanHost& P, Layout layout, int block_cw,
                           uint64_t seed) {
    simt::seed = seed + 17;
    const long long nt = (long long)s.tl.size(), nchan = s.nchan;
    Sums<O> out;
    out.u.assign(nchan * nt, 0.0);
    out.w.assign(nchan * nt, 0.0);
    out.cube.assign(nchan * nt, O(0));
    out.wout.assign(nchan * nt, O(0));
    auto finish = [&](long long off, long long len) {
        GridFinishArgs fa{out.u.data() + off, out.w.data() + off, out.cube.data() + off,
                          out.wout.data() + off, len};
        simt::launch(gs(len), THREADS, [&] {
            if (sizeof(O) == 4) grid_finish_f32(fa); else grid_finish_f64(fa);
        });
    };
    if (P.n_kept == 0) {
        finish(0, nchan * nt);
        return out;
    }
    GridPlan gp{P.x.data(), P.y.data(), P.z.data(), P.keys.data(), P.n_kept, P.ring_start.data(),
                P.zmin.data(), P.zmax.data(), P.lo_env.data(), P.hi_env.data(), P.nrings};
    const double cc = 2.0 * sin(std::min(0.5 * s.K.radius, M_PI / 2));
    GridKernel gk{s.K.kind, s.K.c[0], s.K.c[1], s.K.c[2], s.K.c[3], s.K.radius, cc * cc * (1 + 1e-9)};
    // Launch shape of the gathers: one warp per target (src/grid/cuda/args.rs `gather_config`), capped low.
    const unsigned gblocks = (unsigned)std::max(1LL, std::min(3LL, (nt + 7) / 8));
    const T* shared_w = nullptr;
    if (s.wmode == W_SHARED || (s.wmode == W_FULL && nchan == 1)) shared_w = s.weights.data();
    if (nchan == 1) {
        std::vector<double> wv(P.n_kept), w(P.n_kept);
        GridGatherArgs a{P.order.data(), s.data.data(), shared_w, wv.data(), w.data(), P.n_kept};
        simt::launch(gs(P.n_kept), THREADS, [&] {
            if (sizeof(T) == 4) grid_gather_f32(a); else grid_gather_f64(a);
        });
        // In pieces of PIECE targets, as the paced launches (src/grid/cuda/gather.rs `paced`):
        // every pointer offset to the piece's first target.
        for (long long t0 = 0; t0 < nt; t0 += PIECE) {
            const long long len = std::min(PIECE, nt - t0);
            GridScalarArgs sa{gp, gk, s.tl.data() + t0, s.tb.data() + t0, len, wv.data(), w.data(),
                              out.u.data() + t0, out.w.data() + t0};
            simt::launch(gblocks, THREADS, [&] { grid_scalar(sa); });
        }
        finish(0, nt);
        return out;
    }
    std::vector<double> wsh(P.n_kept);
    GridGatherArgs a{P.order.data(), nullptr, shared_w, nullptr, wsh.data(), P.n_kept};
    simt::launch(gs(P.n_kept), THREADS, [&] {
        if (sizeof(T) == 4) grid_gather_f32(a); else grid_gather_f64(a);
    });
    const long long n = (long long)s.lon.size();
    const bool full = s.wmode == W_FULL;
    std::vector<T> pd, pw;
    if (!full) out.wmap.assign(nt, -1.0);
    // Spectral launch shape (src/grid/cuda/args.rs spectral_config), capped low.
    const unsigned sblocks = (unsigned)std::max(1LL, std::min(3LL, (nt + SC_RUN - 1) / SC_RUN));
    for (long long c0 = 0; c0 < nchan; c0 += block_cw) {
        const long long cw = std::min<long long>(block_cw, nchan - c0);
        const T* dptr = s.data.data();
        const T* wptr = full ? s.weights.data() : nullptr;
        long long stride = nchan, coff = c0;
        if (layout == PACKED) {  // the host packs channels c0..c0 + cw of every row
            pd.assign(n * cw, T(0));
            pw.assign(full ? n * cw : 0, T(0));
            for (long long i = 0; i < n; ++i)
                for (long long c = 0; c < cw; ++c) {
                    pd[i * cw + c] = s.data[i * nchan + c0 + c];
                    if (full) pw[i * cw + c] = s.weights[i * nchan + c0 + c];
                }
            dptr = pd.data();
            wptr = full ? pw.data() : nullptr;
            stride = cw;
            coff = 0;
        }
        out.flags.push_back(0u);
        // In pieces of PIECE targets (whole runs of SC_RUN), as the paced launches: the target
        // pointers (and the map) offset to the piece's first target, the outputs rows of
        // ostride = nt.
        double* wmap = c0 == 0 && !full ? out.wmap.data() : nullptr;
        for (long long t0 = 0; t0 < nt; t0 += PIECE) {
            const long long len = std::min(PIECE, nt - t0);
            GridSpectralArgs sp{gp, gk, s.tl.data() + t0, s.tb.data() + t0, len, P.order.data(),
                                dptr, wptr, wsh.data(), stride, coff, cw,
                                out.u.data() + c0 * nt + t0, out.w.data() + c0 * nt + t0,
                                wmap ? wmap + t0 : nullptr, &out.flags.back(), nt};
            simt::launch(sblocks, SC_SPEC_THREADS, [&] {
                if (sizeof(T) == 4) grid_spectral_f32(sp); else grid_spectral_f64(sp);
            });
        }
        finish(c0 * nt, cw * nt);
    }
    return out;
}

// Brute force: every (target, sample) pair, haversine distance, Cygrid's kernels, NaN policy.
// bm: per target, the sum of k * shared weight over all samples in reach (NaN values or not);
// nanreach[c]: some sample in reach of some target has a NaN value or weight in channel c.
template <typename T>
static void brute(const Scenario<T>& s, std::vector<double>& bu, std::vector<double>& bw,
                  std::vector<double>& bm, std::vector<char>& nanreach) {
    const long long nt = (long long)s.tl.size(), n = (long long)s.lon.size(), nchan = s.nchan;
    bu.assign(nchan * nt, 0.0);
    bw.assign(nchan * nt, 0.0);
    bm.assign(nt, 0.0);
    nanreach.assign(nchan, 0);
    const double rdeg = s.K.radius * 180 / M_PI;
    for (long long t = 0; t < nt; ++t) {
        if (!std::isfinite(s.tl[t]) || !std::isfinite(s.tb[t])) continue;
        double l1 = s.tl[t] * M_PI / 180, b1 = s.tb[t] * M_PI / 180;
        for (long long i = 0; i < n; ++i) {
            if (!std::isfinite(s.lon[i]) || !std::isfinite(s.lat[i])) continue;
            double l2 = s.lon[i] * M_PI / 180, b2 = s.lat[i] * M_PI / 180;
            double h = pow(sin((b1 - b2) / 2), 2) + cos(b1) * cos(b2) * pow(sin((l1 - l2) / 2), 2);
            double d = 2 * asin(std::min(1.0, sqrt(h))) * 180 / M_PI;
            if (!(d < rdeg)) continue;
            double br = atan2(cos(b2) * sin(l2 - l1), cos(b1) * sin(b2) - sin(b1) * cos(b2) * cos(l2 - l1));
            double k = cygrid_kernel(s.K, d, br);
            if (s.wmode == W_SHARED && std::isnan((double)s.weights[i])) continue;
            bm[t] += k * (s.wmode == W_SHARED ? (double)s.weights[i] : 1.0);
            for (long long c = 0; c < nchan; ++c) {
                double v = (double)s.data[i * nchan + c];
                double w = 1.0;
                if (s.wmode == W_SHARED) w = (double)s.weights[i];
                if (s.wmode == W_FULL) w = (double)s.weights[i * nchan + c];
                if (std::isnan(v) || std::isnan(w)) {
                    nanreach[c] = 1;
                    continue;
                }
                bu[c * nt + t] += k * w * v;
                bw[c * nt + t] += k * w;
            }
        }
    }
}

static double rel(const std::vector<double>& a, const std::vector<double>& b) {
    double scale = 0, diff = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        scale = std::max(scale, std::fabs(b[i]));
        diff = std::max(diff, std::fabs(a[i] - b[i]));
    }
    return scale > 0 ? diff / scale : diff;
}

template <typename T, typename O>
static void run(const Scenario<T>& s, int block_cw = 2) {
    const long long nt = (long long)s.tl.size(), nchan = s.nchan;
    DevPlanHost d1 = build_device_plan(s, 1), d2 = build_device_plan(s, 99);
    DevPlanHost h = host_plan(s);
    CHECK(d1.n_kept == h.n_kept, "%s: kept %lld vs host %lld", s.name.c_str(), d1.n_kept, h.n_kept);
    if (d1.n_kept == h.n_kept && h.n_kept > 0) {
        CHECK(same_bits(d1.keys, h.keys), "%s: sorted keys differ from the host plan", s.name.c_str());
        CHECK(same_bits(d1.order, h.order), "%s: sorted order differs from the host plan", s.name.c_str());
        CHECK(same_bits(d1.ring_start, h.ring_start), "%s: ring_start differs", s.name.c_str());
        CHECK(same_bits(d1.x, h.x) && same_bits(d1.y, h.y) && same_bits(d1.z, h.z), "%s: unit vectors differ", s.name.c_str());
        CHECK(same_bits(d1.zmin, h.zmin) && same_bits(d1.zmax, h.zmax), "%s: z spans differ", s.name.c_str());
        CHECK(same_bits(d1.lo_env, h.lo_env) && same_bits(d1.hi_env, h.hi_env), "%s: envelopes differ", s.name.c_str());
        CHECK(same_bits(d1.order, d2.order) && same_bits(d1.keys, d2.keys), "%s: sort not deterministic", s.name.c_str());
    }
    std::vector<double> bu, bw, bm;
    std::vector<char> nanreach;
    brute(s, bu, bw, bm, nanreach);
    for (int layout = 0; layout < (nchan > 1 ? 2 : 1); ++layout) {
        Sums<O> a = device_grid<T, O>(s, d1, (Layout)layout, block_cw, 1);
        Sums<O> b = device_grid<T, O>(s, d2, (Layout)layout, block_cw, 5);
        double eu = rel(a.u, bu), ew = rel(a.w, bw);
        CHECK(eu <= 1e-12 && ew <= 1e-12, "%s layout %d: rel err u %.2e w %.2e", s.name.c_str(), layout, eu, ew);
        long long empty_mismatch = 0;
        for (size_t i = 0; i < bw.size(); ++i) empty_mismatch += (a.w[i] == 0) != (bw[i] == 0);
        CHECK(empty_mismatch == 0, "%s: %lld pixels empty on one side only", s.name.c_str(), empty_mismatch);
        CHECK(same_bits(a.u, b.u) && same_bits(a.w, b.w) && same_bits(a.cube, b.cube), "%s: results not deterministic", s.name.c_str());
        // finish: the weights are the sums cast to O, the cube O(u) / O(w) or NaN.
        long long bad = 0;
        for (size_t i = 0; i < a.u.size(); ++i) {
            O u = (O)a.u[i], w = (O)a.w[i];
            O c = (double)w == 0.0 ? (O)NAN : (O)((double)u / (double)w);
            bool ok = a.wout[i] == w && (std::isnan((double)c) ? std::isnan((double)a.cube[i]) : a.cube[i] == c);
            bad += !ok;
        }
        CHECK(bad == 0, "%s: %lld finished outputs wrong", s.name.c_str(), bad);
        if (nchan > 1) {
            // The NaN flag of each block is set exactly when a NaN reaches a target in one of
            // its channels; a block without it has every channel's weight sums equal (bit for
            // bit) to the map, which the host then uses in their place.
            const bool full = s.wmode == W_FULL;
            CHECK(same_bits(a.flags, b.flags) || full, "%s: NaN flags not deterministic", s.name.c_str());
            for (size_t k = 0; k < a.flags.size(); ++k) {
                bool want = false;
                for (long long c = (long long)k * block_cw; c < std::min<long long>(nchan, (k + 1) * block_cw); ++c)
                    want |= nanreach[c] != 0;
                CHECK((a.flags[k] != 0) == want, "%s: block %zu NaN flag %u, want %d", s.name.c_str(), k, a.flags[k], (int)want);
                if (full || a.flags[k] != 0) continue;
                long long differ = 0;
                for (long long c = (long long)k * block_cw; c < std::min<long long>(nchan, (k + 1) * block_cw); ++c)
                    for (long long t = 0; t < nt; ++t) differ += a.w[c * nt + t] != a.wmap[t];
                CHECK(differ == 0, "%s: block %zu: %lld weight sums differ from the map", s.name.c_str(), k, differ);
            }
            if (!full) {
                double em = rel(a.wmap, bm);
                CHECK(em <= 1e-12, "%s: weight map rel err %.2e", s.name.c_str(), em);
            }
        }
        long long nonempty = 0;
        for (double v : bw) nonempty += v != 0;
        if (layout == 0)
            std::printf("%-34s n=%zu nt=%lld nchan=%lld kept=%lld passes=%d nonempty=%lld rel=%.1e/%.1e\n",
                        s.name.c_str(), s.lon.size(), nt, nchan, d1.n_kept, d1.passes, nonempty, eu, ew);
    }
}

// ------------------------------------------------------------------ scenarios
static std::mt19937_64 g_rng(3);
static double U() { return std::uniform_real_distribution<double>(0, 1)(g_rng); }
static double N() { return std::normal_distribution<double>(0, 1)(g_rng); }

template <typename T>
static Scenario<T> field(const char* name, int n, int nt, int nchan, double lon0, double lat0,
                         double size, int kind = 0, double sig = 0.2) {
    Scenario<T> s;
    s.name = name;
    s.nchan = nchan;
    s.K = make_kernel(kind, sig, sig * 0.6, 0.6);
    double cl = std::max(std::cos(lat0 * M_PI / 180), 1e-3);
    for (int i = 0; i < n; ++i) {
        s.lat.push_back(std::max(-90.0, std::min(90.0, lat0 + size * (U() - .5))));
        s.lon.push_back(lon0 + size * (U() - .5) / cl);
    }
    for (int i = 0; i < nt; ++i) {
        s.tb.push_back(std::max(-90.0, std::min(90.0, lat0 + 0.9 * size * (U() - .5))));
        s.tl.push_back(lon0 + 0.9 * size * (U() - .5) / cl);
    }
    for (int i = 0; i < n * nchan; ++i) s.data.push_back((T)(N() + 3));
    return s;
}

static void print_layout() {
#define F(S, f) std::printf(#S "." #f " %zu %zu\n", offsetof(S, f), sizeof(((S*)0)->f))
#define Z(S) std::printf(#S " size %zu\n", sizeof(S))
    Z(GridPlan); F(GridPlan, x); F(GridPlan, y); F(GridPlan, z); F(GridPlan, keys); F(GridPlan, n);
    F(GridPlan, ring_start); F(GridPlan, zmin); F(GridPlan, zmax); F(GridPlan, lo_env);
    F(GridPlan, hi_env); F(GridPlan, nrings);
    Z(GridKernel); F(GridKernel, kind); F(GridKernel, c0); F(GridKernel, c1); F(GridKernel, c2);
    F(GridKernel, c3); F(GridKernel, radius); F(GridKernel, c2_cut);
    Z(GridPrepArgs); F(GridPrepArgs, lon); F(GridPrepArgs, lat); F(GridPrepArgs, vcheck);
    F(GridPrepArgs, wcheck); F(GridPrepArgs, keys); F(GridPrepArgs, vals); F(GridPrepArgs, hist);
    F(GridPrepArgs, n); F(GridPrepArgs, nside);
    Z(GridRadixArgs); F(GridRadixArgs, keys_in); F(GridRadixArgs, vals_in); F(GridRadixArgs, keys_out);
    F(GridRadixArgs, vals_out); F(GridRadixArgs, counts); F(GridRadixArgs, n); F(GridRadixArgs, shift);
    F(GridRadixArgs, nblocks);
    Z(GridScanArgs); F(GridScanArgs, data); F(GridScanArgs, len);
    Z(GridRingArgs); F(GridRingArgs, keys); F(GridRingArgs, z); F(GridRingArgs, ring_start);
    F(GridRingArgs, zmin); F(GridRingArgs, zmax); F(GridRingArgs, lo_env); F(GridRingArgs, hi_env);
    F(GridRingArgs, n); F(GridRingArgs, nrings);
    Z(GridGeomArgs); F(GridGeomArgs, lon); F(GridGeomArgs, lat); F(GridGeomArgs, order);
    F(GridGeomArgs, x); F(GridGeomArgs, y); F(GridGeomArgs, z); F(GridGeomArgs, n);
    Z(GridGatherArgs); F(GridGatherArgs, order); F(GridGatherArgs, data); F(GridGatherArgs, weight);
    F(GridGatherArgs, wv); F(GridGatherArgs, w); F(GridGatherArgs, n);
    Z(GridScalarArgs); F(GridScalarArgs, p); F(GridScalarArgs, k); F(GridScalarArgs, tlon);
    F(GridScalarArgs, tlat); F(GridScalarArgs, nt); F(GridScalarArgs, wv); F(GridScalarArgs, w);
    F(GridScalarArgs, out_u); F(GridScalarArgs, out_w);
    Z(GridSpectralArgs); F(GridSpectralArgs, p); F(GridSpectralArgs, k); F(GridSpectralArgs, tlon);
    F(GridSpectralArgs, tlat); F(GridSpectralArgs, nt); F(GridSpectralArgs, order);
    F(GridSpectralArgs, data); F(GridSpectralArgs, wfull); F(GridSpectralArgs, wsh);
    F(GridSpectralArgs, stride); F(GridSpectralArgs, c0); F(GridSpectralArgs, cw);
    F(GridSpectralArgs, out_u); F(GridSpectralArgs, out_w); F(GridSpectralArgs, wmap);
    F(GridSpectralArgs, nan_flag); F(GridSpectralArgs, ostride);
    Z(GridFinishArgs); F(GridFinishArgs, su); F(GridFinishArgs, sw); F(GridFinishArgs, cube);
    F(GridFinishArgs, weights); F(GridFinishArgs, len);
#undef F
#undef Z
}

// The radix sort alone on adversarial keys (all equal, two values, random wide keys).
static void sort_only(const char* name, std::vector<u64> keys) {
    const long long n = (long long)keys.size();
    std::vector<u64> k2(n);
    std::vector<unsigned> v(n), v2(n), counts(256 * ((n + SC_RADIX_TILE - 1) / SC_RADIX_TILE));
    for (long long i = 0; i < n; ++i) v[i] = (unsigned)i;
    std::vector<std::pair<u64, unsigned>> ref;
    for (long long i = 0; i < n; ++i) ref.push_back({keys[i], (unsigned)i});
    std::stable_sort(ref.begin(), ref.end(), [](auto& a, auto& b) { return a.first < b.first; });
    const long long nblocks = (n + SC_RADIX_TILE - 1) / SC_RADIX_TILE;
    u64 *kin = keys.data(), *kout = k2.data();
    unsigned *vin = v.data(), *vout = v2.data();
    for (int p = 0; p < 8; ++p) {  // every pass, skipping none
        GridRadixArgs ra{kin, vin, kout, vout, counts.data(), n, (i64)(8 * p), nblocks};
        simt::launch((unsigned)nblocks, SC_RADIX_THREADS, [&] { grid_radix_count(ra); });
        GridScanArgs sa{counts.data(), 256 * nblocks};
        simt::launch(1, 1024, [&] { grid_scan(sa); });
        simt::launch((unsigned)nblocks, SC_RADIX_THREADS, [&] { grid_radix_scatter(ra); });
        std::swap(kin, kout);
        std::swap(vin, vout);
    }
    long long bad = 0;
    for (long long i = 0; i < n; ++i) bad += kin[i] != ref[i].first || vin[i] != ref[i].second;
    CHECK(bad == 0, "%s: %lld elements out of place", name, bad);
    std::printf("%-34s n=%lld ok\n", name, n);
}

int main(int argc, char** argv) {
    if (argc > 1 && std::string(argv[1]) == "--layout") {
        print_layout();
        return 0;
    }
    // Sort alone.
    {
        std::vector<u64> k(9000, 42);
        sort_only("sort: all keys equal", k);
        for (size_t i = 0; i < k.size(); ++i) k[i] = (i * 7919) % 3 == 0 ? SC_DROPPED : 5;
        sort_only("sort: two values", k);
        for (auto& x : k) x = g_rng();
        sort_only("sort: random 64-bit", k);
        sort_only("sort: one key", std::vector<u64>{7});
    }
    const char* kn[4] = {"gauss1d", "gauss2d", "tapered_sinc", "gaussbessel"};
    for (int kind = 0; kind < 4; ++kind) {
        auto s = field<double>((std::string("field f64 ") + kn[kind]).c_str(), 9000, 120, 1, 30, 40, 4, kind);
        run<double, double>(s);
    }
    {   // more samples than one radix tile, float32 data and output
        auto s = field<float>("field f32, 3 tiles", 10000, 150, 1, 12, 0, 3);
        run<float, float>(s);
    }
    {   // NaN coordinates, NaN values, shared weights with NaN: dropped samples sort last
        auto s = field<double>("scalar NaN policy, shared w", 3000, 100, 1, 200, -30, 3);
        for (int i = 0; i < 3000; ++i) s.weights.push_back(0.5 + U());
        s.wmode = W_SHARED;
        for (int i = 0; i < 3000; i += 13) s.lon[i] = NAN;
        for (int i = 5; i < 3000; i += 11) s.data[i] = NAN;
        for (int i = 7; i < 3000; i += 17) s.weights[i] = NAN;
        s.lat[1] = 91.0;
        run<double, double>(s);
    }
    {   // one channel, full weights (shape (n,)) with NaN
        auto s = field<double>("scalar full weights NaN", 2000, 80, 1, 100, 10, 3);
        for (int i = 0; i < 2000; ++i) s.weights.push_back(i % 9 == 0 ? NAN : 0.5 + U());
        s.wmode = W_FULL;
        run<double, float>(s);
    }
    {   // spectral, no weights, NaN values per channel, several channel blocks
        auto s = field<double>("spectral 5ch NaN", 2500, 90, 5, 12, 0, 3);
        for (int i = 0; i < 2500; i += 7) s.data[i * 5 + 1] = NAN;
        for (int i = 0; i < 2500; i += 4) s.data[i * 5 + 4] = NAN;
        run<double, double>(s, 2);
    }
    {   // spectral float32, shared weights with NaN
        auto s = field<float>("spectral f32 shared w", 2500, 90, 3, 12, 0, 3, 1);
        for (int i = 0; i < 2500; ++i) s.weights.push_back((float)(i % 13 == 0 ? NAN : 0.5 + U()));
        s.wmode = W_SHARED;
        for (int i = 0; i < 2500; i += 9) s.data[i * 3 + 2] = NAN;
        run<float, float>(s, 2);
    }
    {   // spectral, full weights with NaN in values and weights
        auto s = field<double>("spectral full w NaN", 2500, 90, 4, 300, 60, 3, 2);
        for (int i = 0; i < 2500 * 4; ++i) s.weights.push_back(i % 23 == 0 ? NAN : 0.5 + U());
        s.wmode = W_FULL;
        for (int i = 0; i < 2500 * 4; i += 19) s.data[i] = NAN;
        run<double, double>(s, 3);
    }
    {   // 258 channels: one block of SC_SPEC_THREADS and one of 2
        auto s = field<float>("spectral 258ch", 600, 40, SC_SPEC_THREADS + 2, 12, 0, 2.5);
        run<float, double>(s, SC_SPEC_THREADS);
    }
    {   // map rows (runs of neighbours, runs across row ends), NaN in one channel only: block 0
        // (channels 0, 1) keeps the map, block 1 (channels 2, 3) has per-channel weight sums
        auto s = field<double>("map rows, NaN in channel 2", 3000, 0, 4, 12, 0, 3);
        for (int y = 0; y < 9; ++y)
            for (int x = 0; x < 13; ++x) {
                s.tl.push_back(10.9 + 0.17 * x);
                s.tb.push_back(-0.8 + 0.2 * y);
            }
        s.tl[40] = NAN;
        for (int i = 0; i < 3000; i += 37) s.data[i * 4 + 2] = NAN;
        run<double, double>(s, 2);
    }
    {   // map rows, float32, shared weights, no NaN value: every block keeps the map
        auto s = field<float>("map rows f32 shared w", 4000, 0, 5, 200, -30, 3, 0, 0.12);
        for (int i = 0; i < 4000; ++i) s.weights.push_back((float)(0.5 + U()));
        s.wmode = W_SHARED;
        double cl = std::cos(-30 * M_PI / 180);
        for (int y = 0; y < 8; ++y)
            for (int x = 0; x < 21; ++x) {
                s.tl.push_back(200 + (-1.0 + 0.1 * x) / cl);
                s.tb.push_back(-30.7 + 0.1 * y);
            }
        run<float, float>(s, 3);
    }
    {   // north pole, targets on the pole
        auto s = field<double>("pole", 3000, 0, 1, 0, 90, 0.1);
        s.lon.clear(); s.lat.clear();
        for (int i = 0; i < 3000; ++i) { s.lon.push_back(360 * U()); s.lat.push_back(90 - 3 * U()); }
        s.tl = {0, 123}; s.tb = {90, 90};
        for (int i = 0; i < 100; ++i) { s.tl.push_back(360 * U()); s.tb.push_back(90 - 2.5 * U()); }
        run<double, double>(s);
    }
    {   // RA wrap, south, NaN targets
        auto s = field<double>("wrap + NaN targets", 3000, 100, 2, 0, -30, 4, 3);
        for (auto& l : s.lon) l = std::fmod(l + 360, 360);
        s.tl[3] = NAN; s.tb[7] = NAN;
        run<double, double>(s, 1);
    }
    {   // all sky, big kernel
        auto s = field<double>("all sky", 4000, 100, 1, 0, 0, 0, 0, 4.0);
        s.lon.clear(); s.lat.clear(); s.tl.clear(); s.tb.clear();
        for (int i = 0; i < 4000; ++i) { s.lon.push_back(720 * U() - 360); s.lat.push_back(asin(2 * U() - 1) * 180 / M_PI); }
        for (int i = 0; i < 100; ++i) { s.tl.push_back(360 * U()); s.tb.push_back(asin(2 * U() - 1) * 180 / M_PI); }
        run<double, double>(s);
    }
    {   // a single sample; all samples dropped; tiny kernel (fine bucketing)
        auto s = field<double>("single sample", 1, 50, 1, 12, 0, 0.3);
        run<double, double>(s);
        auto d = field<double>("all dropped", 50, 20, 2, 12, 0, 0.3);
        for (auto& l : d.lon) l = NAN;
        run<double, float>(d);
        auto f = field<double>("small kernel, nside 2048", 3000, 60, 1, 12, 0, 0.15, 0, 0.02);
        run<double, double>(f);
    }
    std::printf(g_bad ? "FAILED %d\n" : "all ok\n", g_bad);
    return g_bad != 0;
}
