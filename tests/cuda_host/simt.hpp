// A small SIMT emulator so that kernels/*.cu can run on a machine without a GPU (for tests).
//
// Every CUDA thread of a block is a fiber (ucontext) on one OS thread; blocks run one after
// another. Between synchronisation points the fibers of a block run in a pseudo-random order
// (seeded by simt::seed), so a kernel whose result depends on the interleaving of threads shows
// it when run twice with different seeds. Supported: threadIdx/blockIdx/blockDim/gridDim (.x, .y, .z),
// __shared__ (static storage: blocks do not overlap), __syncthreads, __syncwarp, and the
// full-warp collectives __shfl_sync, __shfl_down_sync, __shfl_up_sync, __ballot_sync, __match_any_sync; atomics
// (trivially atomic: one fiber runs at a time); asynchronous copies to shared memory (cp.async:
// simt::async_copy, landing at random, at once or at the thread's next simt::async_wait). A
// warp collective with a lane that has exited, lanes of one warp waiting at different
// collectives, a mask other than 0xffffffff and a
// deadlock all abort with a message, as they are undefined or wrong on a GPU.
//
// Include this before the .cu file; launch with simt::launch(grid, block, [&] { kernel(args); }).
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

using std::isfinite;
using std::isnan;

#define __device__
#define __host__
#define __forceinline__ inline
#define __global__
#define __shared__ static
#define __launch_bounds__(...)

// CUDA's 16-byte vector types, as the kernels use them (whole-word copies).
struct alignas(16) uint4 {
    unsigned int x, y, z, w;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) double2 {
    double x, y;
};
inline double2 make_double2(double x, double y) { return {x, y}; }

namespace simt {

struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};

enum Wait { RUN = 0, BAR, WARP, DONE };
enum Op { SHFL, SHFL_DOWN, SHFL_UP, BALLOT, MATCH_ANY, SYNCWARP };

// Context switch. On x86-64 a few instructions (callee-saved registers and the stack pointer);
// elsewhere ucontext, whose swapcontext also saves the signal mask with a system call (slow).
#if defined(__x86_64__)
extern "C" void simt_switch(void** save_sp, void* load_sp);
asm(R"(
.text
.globl simt_switch
.type simt_switch, @function
simt_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size simt_switch, .-simt_switch
)");
struct Ctx {
    void* sp = nullptr;
};
#else
struct Ctx {
    ucontext_t uc;
};
#endif

struct Fiber {
    Ctx ctx;
    std::vector<char> stack;
    Dim3 idx;
    int wait = RUN;
    int op = 0;
    uint64_t val = 0;  // value given to a collective
    int arg = 0;       // source lane / delta
    uint64_t res = 0;  // result of the collective
    // asynchronous copies not landed yet: destination, source, bytes read, bytes written
    struct Copy {
        void* dst;
        const void* src;
        unsigned n, size;
    };
    std::vector<Copy> pending;
};

inline Dim3 g_block, g_bdim, g_gdim;
inline std::vector<Fiber> g_fib;
inline unsigned g_nthreads = 0;
inline Fiber* g_cur = nullptr;
inline Ctx g_sched;
inline const std::function<void()>* g_body = nullptr;
inline uint64_t seed = 1;
inline uint64_t g_rng = 1;

[[noreturn]] inline void fail(const char* what) {
    const Dim3 t = g_cur ? g_cur->idx : Dim3{0, 0, 0};
    std::fprintf(stderr, "simt: %s (block %u,%u,%u, thread %u,%u,%u)\n", what, g_block.x,
                 g_block.y, g_block.z, t.x, t.y, t.z);
    std::abort();
}

inline uint64_t next_rand() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

// Save the running context in `from` and continue `to`.
inline void switch_to(Ctx& from, Ctx& to) {
#if defined(__x86_64__)
    simt_switch(&from.sp, to.sp);
#else
    swapcontext(&from.uc, &to.uc);
#endif
}

inline void entry() {
    (*g_body)();
    if (!g_cur->pending.empty()) fail("asynchronous copies never waited for");
    g_cur->wait = DONE;
    switch_to(g_cur->ctx, g_sched);
    fail("a finished fiber was resumed");
}

// A fresh context that starts entry() on `stack`.
inline void make_context(Ctx& c, std::vector<char>& stack) {
#if defined(__x86_64__)
    uintptr_t top = ((uintptr_t)(stack.data() + stack.size())) & ~(uintptr_t)15;
    void** sp = (void**)top;
    *--sp = nullptr;                  // entry's (never used) return address
    *--sp = (void*)&entry;            // where simt_switch's `ret` goes
    for (int k = 0; k < 6; ++k) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
    c.sp = sp;
#else
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack.data();
    c.uc.uc_stack.ss_size = stack.size();
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, (void (*)())entry, 0);
#endif
}

// Give control back to the scheduler until this fiber is released.
inline void block_on(int wait) {
    g_cur->wait = wait;
    switch_to(g_cur->ctx, g_sched);
}

inline uint64_t collective(int op, uint64_t val, int arg, unsigned mask) {
    if (mask != 0xffffffffu) fail("only full-warp masks are emulated");
    g_cur->op = op;
    g_cur->val = val;
    g_cur->arg = arg;
    block_on(WARP);
    return g_cur->res;
}

// Resolve warp w's collective if all its lanes are waiting at it; true if released.
inline bool resolve_warp(int w) {
    int lo = 32 * w, hi = lo + 32;
    if (hi > (int)g_nthreads) fail("block size must be a multiple of 32");
    int waiting = 0, done = 0;
    for (int i = lo; i < hi; ++i) {
        if (g_fib[i].wait == WARP) ++waiting;
        if (g_fib[i].wait == DONE) ++done;
    }
    if (waiting == 0 || waiting + done < 32) return false;
    if (done > 0) {
        g_cur = &g_fib[lo];
        fail("warp collective with exited lanes");
    }
    int op = g_fib[lo].op;
    for (int i = lo; i < hi; ++i)
        if (g_fib[i].op != op) {
            g_cur = &g_fib[i];
            fail("lanes of one warp wait at different collectives");
        }
    uint64_t ballot = 0;
    for (int l = 0; l < 32; ++l) ballot |= (g_fib[lo + l].val != 0 ? 1ull : 0ull) << l;
    for (int l = 0; l < 32; ++l) {
        Fiber& f = g_fib[lo + l];
        switch (op) {
        case SHFL: f.res = g_fib[lo + (f.arg & 31)].val; break;
        case SHFL_DOWN: f.res = (l + f.arg < 32) ? g_fib[lo + l + f.arg].val : f.val; break;
        case SHFL_UP: f.res = (l >= f.arg) ? g_fib[lo + l - f.arg].val : f.val; break;
        case BALLOT: f.res = ballot; break;
        case MATCH_ANY: {
            uint64_t m = 0;
            for (int k = 0; k < 32; ++k) m |= (g_fib[lo + k].val == f.val ? 1ull : 0ull) << k;
            f.res = m;
            break;
        }
        default: f.res = 0;
        }
        f.wait = RUN;
    }
    return true;
}

// Run one block of bdim threads; thread t is (t % x, t / x % y, t / (x·y)), so that warps are
// runs of 32 in that order, as on a GPU.
inline void run_block(Dim3 bdim) {
    static const size_t STACK = 256 * 1024;
    const unsigned nthreads = bdim.x * bdim.y * bdim.z;
    // Fibers (and their stacks) are kept between launches: only the first nthreads are used.
    if (g_fib.size() < nthreads) g_fib.resize(nthreads);
    g_nthreads = nthreads;
    for (unsigned t = 0; t < nthreads; ++t) {
        Fiber& f = g_fib[t];
        if (f.stack.size() != STACK) f.stack.resize(STACK);
        f.idx = Dim3{t % bdim.x, t / bdim.x % bdim.y, t / (bdim.x * bdim.y)};
        f.wait = RUN;
        f.pending.clear();
        make_context(f.ctx, f.stack);
    }
    std::vector<unsigned> order(nthreads);
    for (;;) {
        bool progress = false;
        for (unsigned t = 0; t < nthreads; ++t) order[t] = t;
        for (unsigned t = nthreads; t > 1; --t) std::swap(order[t - 1], order[next_rand() % t]);
        for (unsigned k = 0; k < nthreads; ++k) {
            Fiber& f = g_fib[order[k]];
            if (f.wait != RUN) continue;
            g_cur = &f;
            switch_to(g_sched, f.ctx);
            progress = true;
        }
        for (unsigned w = 0; w * 32 < nthreads; ++w) progress |= resolve_warp(w);
        int bar = 0, done = 0;
        for (unsigned t = 0; t < nthreads; ++t) {
            bar += g_fib[t].wait == BAR;
            done += g_fib[t].wait == DONE;
        }
        if (done == (int)nthreads) break;
        if (bar > 0 && bar + done == (int)nthreads) {
            for (unsigned t = 0; t < nthreads; ++t)
                if (g_fib[t].wait == BAR) g_fib[t].wait = RUN;
            progress = true;
        }
        if (!progress) {
            g_cur = nullptr;
            fail("deadlock: threads wait at barriers that can never complete");
        }
    }
    g_cur = nullptr;
}

// Run body() as a kernel over a grid of blocks (x fastest) of `block` threads.
inline void launch(Dim3 grid, Dim3 block, const std::function<void()>& body) {
    const unsigned n = block.x * block.y * block.z;
    if (n == 0 || n > 1024 || n % 32) fail("block size must be 32..1024, a multiple of 32");
    if (grid.x * grid.y * grid.z == 0) fail("grid size must be >= 1");
    g_rng = seed * 0x9E3779B97F4A7C15ull + 1;
    g_body = &body;
    g_gdim = grid;
    g_bdim = block;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                g_block = Dim3{x, y, z};
                run_block(block);
            }
    g_body = nullptr;
}

// The same over a 1-D grid of 1-D blocks.
inline void launch(unsigned grid, unsigned block, const std::function<void()>& body) {
    launch(Dim3{grid, 1, 1}, Dim3{block, 1, 1}, body);
}

// One copy lands: n bytes of src, then zeros up to size.
inline void land(const Fiber::Copy& c) {
    std::memcpy(c.dst, c.src, c.n);
    std::memset((char*)c.dst + c.n, 0, c.size - c.n);
}

// cp.async of `size` bytes to shared dst: the first n from src, zeros after. It lands at once or
// only at this thread's next async_wait (as late as a GPU may), at random: a read of dst before
// the wait, or a copy into memory other threads still read, then shows.
inline void async_copy(void* dst, const void* src, unsigned n, unsigned size) {
    if (n > size) fail("async copy: more bytes read than written");
    const Fiber::Copy c{dst, src, n, size};
    if (next_rand() & 1)
        land(c);
    else
        g_cur->pending.push_back(c);
}

// cp.async.wait_all: this thread's copies have landed.
inline void async_wait() {
    for (const auto& c : g_cur->pending) land(c);
    g_cur->pending.clear();
}

template <typename T>
inline uint64_t bits(T v) {
    static_assert(sizeof(T) <= 8, "collective values up to 8 bytes");
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof(T));
    return u;
}

template <typename T>
inline T unbits(uint64_t u) {
    T v;
    std::memcpy(&v, &u, sizeof(T));
    return v;
}

}  // namespace simt

#define threadIdx (simt::g_cur->idx)
#define blockIdx (simt::g_block)
#define blockDim (simt::g_bdim)
#define gridDim (simt::g_gdim)

inline void __syncthreads() { simt::block_on(simt::BAR); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    simt::collective(simt::SYNCWARP, 0, 0, mask);
}
template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src) {
    return simt::unbits<T>(simt::collective(simt::SHFL, simt::bits(v), src, mask));
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta) {
    return simt::unbits<T>(simt::collective(simt::SHFL_DOWN, simt::bits(v), (int)delta, mask));
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta) {
    return simt::unbits<T>(simt::collective(simt::SHFL_UP, simt::bits(v), (int)delta, mask));
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
    return (unsigned)simt::collective(simt::BALLOT, pred ? 1 : 0, 0, mask);
}
template <typename T>
inline unsigned __match_any_sync(unsigned mask, T v) {
    return (unsigned)simt::collective(simt::MATCH_ANY, simt::bits(v), 0, mask);
}
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
// CUDA's arithmetic that is never fused into a multiply-add (scfind.cu's exact boxcar sums,
// filters.cu's split); the volatile keeps the host compiler from fusing it either (emulators
// built with -ffp-contract=fast).
template <typename T>
inline T simt_unfused(T v) {
    volatile T r = v;
    return r;
}
inline float __fadd_rn(float a, float b) { return simt_unfused(a + b); }
inline float __fsub_rn(float a, float b) { return simt_unfused(a - b); }
inline float __fmul_rn(float a, float b) { return simt_unfused(a * b); }
inline double __dadd_rn(double a, double b) { return simt_unfused(a + b); }
inline double __dsub_rn(double a, double b) { return simt_unfused(a - b); }
inline double __dmul_rn(double a, double b) { return simt_unfused(a * b); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }

// The added value converts to the counter's type, as CUDA's overloads take it.
template <typename T>
struct simt_same {
    using type = T;
};
template <typename T>
inline T atomicAdd(T* p, typename simt_same<T>::type v) {
    T old = *p;
    *p = old + v;
    return old;
}
template <typename T>
inline T atomicMin(T* p, T v) {
    T old = *p;
    if (v < old) *p = v;
    return old;
}
template <typename T>
inline T atomicMax(T* p, T v) {
    T old = *p;
    if (v > old) *p = v;
    return old;
}

inline double __longlong_as_double(long long x) { return simt::unbits<double>((uint64_t)x); }
inline long long __double_as_longlong(double x) { return (long long)simt::bits(x); }
inline unsigned int __float_as_uint(float x) { return (unsigned int)simt::bits(x); }
