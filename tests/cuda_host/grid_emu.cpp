// Host build of kernels/grid.cu's per-target device logic (for_each_run, sc_pair, sc_kernel),
// run one target at a time against a brute-force haversine sum with Cygrid's kernels, so the
// GPU engine's candidate search is checked on machines without a GPU. The plan is rebuilt here
// as src/grid/plan.rs builds it. Run by tests/grid/test_grid_cuda_host.py (g++ -I kernels).
// Exit status 1 when any scenario exceeds 1e-12 (relative to the sum of |weights|).
#include "simt.hpp"

#include <algorithm>
#include <random>
#include <string>

#include "common.cuh"
#include "grid.cu"

static const double TAU = 6.283185307179586;
u64 ring_of_z(u64 nside, double z) {
    double ns = (double)nside, r;
    if (z > 2.0 / 3.0) r = std::round(ns * std::sqrt(3.0 * (1.0 - z)));
    else if (z < -2.0 / 3.0) r = 4.0 * ns - std::round(ns * std::sqrt(3.0 * (1.0 + z)));
    else r = std::round(ns * (2.0 - 1.5 * z));
    u64 ri = (u64)std::max(r, 1.0);
    return std::min(ri, 4 * nside - 1);
}

int run(const char* name, std::vector<double> lon, std::vector<double> lat,
        std::vector<double> tl, std::vector<double> tb, int kind, double p0, double p1, double p2) {
    // Kernel constants as Kernel::new (degrees -> radians).
    double c[4] = {0, 0, 0, 0}, sigma;
    double s0 = p0 * M_PI / 180;
    if (kind == 0) { c[0] = 0.5 / (s0 * s0); sigma = s0; }
    else if (kind == 1) { double a = s0, b = p1 * M_PI / 180; c[0] = 0.5 / (a * a); c[1] = 0.5 / (b * b); c[2] = cos(p2); c[3] = sin(p2); sigma = std::max(a, b); }
    else if (kind == 2) { c[0] = M_PI / (1.55 * s0); c[1] = M_PI / (2.52 * s0); sigma = s0; }
    else { c[0] = M_PI / (1.55 * s0); c[1] = 0.5 / (2.52 * s0 * 2.52 * s0); sigma = s0; }
    double radius = 3 * sigma;
    u64 nside = 1; { double want = std::min(std::max(1.5 / radius, 1.0), 65536.0); while ((double)nside < want) nside *= 2; }
    int nrings = 4 * (int)nside;
    size_t n = lon.size();
    struct S { u64 key; unsigned idx; };
    std::vector<S> v(n);
    std::vector<double> X(n), Y(n), Z(n);
    for (size_t i = 0; i < n; ++i) {
        double phi = fmod(lon[i] * M_PI / 180, TAU); if (phi < 0) phi += TAU; if (phi >= TAU) phi = 0;
        double la = lat[i] * M_PI / 180;
        X[i] = cos(la) * cos(phi); Y[i] = cos(la) * sin(phi); Z[i] = sin(la);
        u64 r = ring_of_z(nside, Z[i]);
        v[i] = {(r << SC_PHI_BITS) | sc_phi_key(phi), (unsigned)i};
    }
    std::sort(v.begin(), v.end(), [](const S& a, const S& b) { return a.key < b.key || (a.key == b.key && a.idx < b.idx); });
    std::vector<double> x(n), y(n), z(n), val(n); std::vector<u64> keys(n);
    std::vector<double> data(n);
    std::mt19937_64 g(7); std::normal_distribution<double> nd;
    for (size_t i = 0; i < n; ++i) data[i] = nd(g) + 3;
    for (size_t i = 0; i < n; ++i) { x[i] = X[v[i].idx]; y[i] = Y[v[i].idx]; z[i] = Z[v[i].idx]; keys[i] = v[i].key; val[i] = data[v[i].idx]; }
    std::vector<i64> rs(nrings + 1); std::vector<double> zmin(nrings, INFINITY), zmax(nrings, -INFINITY);
    for (int r = 0; r <= nrings; ++r) rs[r] = std::lower_bound(keys.begin(), keys.end(), ((u64)r) << SC_PHI_BITS) - keys.begin();
    for (int r = 0; r < nrings; ++r) for (i64 i = rs[r]; i < rs[r + 1]; ++i) { zmin[r] = std::min(zmin[r], z[i]); zmax[r] = std::max(zmax[r], z[i]); }
    std::vector<double> lo = zmin, hi = zmax;
    for (int r = 1; r < nrings; ++r) lo[r] = std::min(lo[r], lo[r - 1]);
    for (int r = nrings - 2; r >= 0; --r) hi[r] = std::max(hi[r], hi[r + 1]);
    GridPlan P = {x.data(), y.data(), z.data(), keys.data(), (i64)n, rs.data(), zmin.data(), zmax.data(), lo.data(), hi.data(), (i64)nrings};
    double cc = 2.0 * sin(std::min(0.5 * radius, M_PI / 2));
    GridKernel K = {(i64)kind, c[0], c[1], c[2], c[3], radius, cc * cc * (1 + 1e-9)};
    double worst = 0, scale = 0; long cand = 0, acc = 0;
    for (size_t t = 0; t < tl.size(); ++t) {
        GridTarget T = sc_target(tl[t], tb[t]);
        double su = 0, sw = 0;
        for_each_run(P, T.lon, T.lat, K.radius, [&](i64 s, i64 e) {
            cand += e - s;
            for (i64 i = s; i < e; ++i) { double k; if (sc_pair(P, T, K, i, &k)) { su += k * val[i]; sw += k; ++acc; } }
        });
        // brute force (degrees, haversine, Cygrid kernels)
        double bu = 0, bw = 0, babs = 0, buabs = 0;
        double l1 = tl[t] * M_PI / 180, b1 = tb[t] * M_PI / 180;
        for (size_t i = 0; i < n; ++i) {
            double l2 = lon[i] * M_PI / 180, b2 = lat[i] * M_PI / 180;
            double h = pow(sin((b1 - b2) / 2), 2) + cos(b1) * cos(b2) * pow(sin((l1 - l2) / 2), 2);
            double d = 2 * asin(sqrt(h)) * 180 / M_PI;
            if (!(d < 3 * sigma * 180 / M_PI)) continue;
            double k;
            if (kind == 0) k = exp(-d * d / (2 * p0 * p0));
            else if (kind == 1) { double br = atan2(cos(b2) * sin(l2 - l1), cos(b1) * sin(b2) - sin(b1) * cos(b2) * cos(l2 - l1));
                double a = p0, b = p1; double ell = a * a * pow(sin(br - p2), 2) + b * b * pow(cos(br - p2), 2);
                k = exp(-pow(d / a / b, 2) / 2 * ell); }
            else if (kind == 2) { double xx = M_PI * d / p0; double sn = fabs(xx / 1.55) < 1e-10 ? 1 : sin(xx / 1.55) / (xx / 1.55); k = sn * exp(-pow(xx / 2.52, 2)); }
            else { double xx = M_PI * d / p0 / 1.55; double bs = xx == 0 ? 0.5 : j1(xx) / xx; k = bs * exp(-d * d / (2 * p0 * p0 * 2.52 * 2.52)); }
            bu += k * data[i]; bw += k; babs += fabs(k); buabs += fabs(k * data[i]);
        }
        if ((sw == 0) != (bw == 0)) { printf("%s: target %zu empty mismatch\n", name, t); return 1; }
        if (babs > 0) { worst = std::max(worst, std::max(fabs(sw - bw) / babs, fabs(su - bu) / buabs)); }
        scale = 1;
    }
    printf("%-28s n=%zu nt=%zu nside=%llu cand=%ld acc=%ld rel=%.2e\n", name, n, tl.size(), (unsigned long long)nside, cand, acc, worst / scale);
    return worst / scale > 1e-12;
}

int main() {
    std::mt19937_64 g(1); std::uniform_real_distribution<double> u(0, 1);
    int bad = 0;
    const char* kn[4] = {"gauss1d", "gauss2d", "tapered_sinc", "gaussbessel"};
    for (int kind = 0; kind < 4; ++kind) {
        // field at dec 40
        std::vector<double> lon, lat, tl, tb;
        for (int i = 0; i < 4000; ++i) { lat.push_back(40 + 4 * (u(g) - .5)); lon.push_back(30 + 4 * (u(g) - .5) / cos(40 * M_PI / 180)); }
        for (int i = 0; i < 300; ++i) { tb.push_back(40 + 3.6 * (u(g) - .5)); tl.push_back(30 + 3.6 * (u(g) - .5) / cos(40 * M_PI / 180)); }
        bad += run((std::string("field ") + kn[kind]).c_str(), lon, lat, tl, tb, kind, 0.2, 0.12, 0.6);
        // north pole, incl. exact pole targets
        lon.clear(); lat.clear(); tl.clear(); tb.clear();
        for (int i = 0; i < 4000; ++i) { lon.push_back(360 * u(g)); lat.push_back(90 - 3 * u(g)); }
        tl = {0, 123}; tb = {90, 90};
        for (int i = 0; i < 200; ++i) { tl.push_back(360 * u(g)); tb.push_back(90 - 2.5 * u(g)); }
        bad += run((std::string("pole ") + kn[kind]).c_str(), lon, lat, tl, tb, kind, 0.2, 0.12, 0.6);
        // RA wrap + south
        lon.clear(); lat.clear(); tl.clear(); tb.clear();
        for (int i = 0; i < 4000; ++i) { lon.push_back(fmod(4 * (u(g) - .5) + 360, 360)); lat.push_back(-30 + 4 * (u(g) - .5)); }
        for (int i = 0; i < 300; ++i) { tl.push_back(3.6 * (u(g) - .5)); tb.push_back(-30 + 3.6 * (u(g) - .5)); }
        bad += run((std::string("wrap ") + kn[kind]).c_str(), lon, lat, tl, tb, kind, 0.2, 0.12, 0.6);
        // small cos dec
        lon.clear(); lat.clear(); tl.clear(); tb.clear();
        for (int i = 0; i < 4000; ++i) { lon.push_back(360 * u(g)); lat.push_back(87 + 2.9 * u(g)); }
        for (int i = 0; i < 300; ++i) { tl.push_back(360 * u(g)); tb.push_back(87.5 + 2 * u(g)); }
        bad += run((std::string("highdec ") + kn[kind]).c_str(), lon, lat, tl, tb, kind, 0.1, 0.06, 0.6);
        // all sky, big kernel
        lon.clear(); lat.clear(); tl.clear(); tb.clear();
        for (int i = 0; i < 4000; ++i) { lon.push_back(360 * u(g)); lat.push_back(asin(2 * u(g) - 1) * 180 / M_PI); }
        for (int i = 0; i < 300; ++i) { tl.push_back(360 * u(g)); tb.push_back(asin(2 * u(g) - 1) * 180 / M_PI); }
        bad += run((std::string("allsky ") + kn[kind]).c_str(), lon, lat, tl, tb, kind, 4.0, 2.5, 0.6);
    }
    printf(bad ? "FAILED %d\n" : "all ok\n", bad);
    return bad != 0;
}
