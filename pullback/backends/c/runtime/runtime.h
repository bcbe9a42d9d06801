/* pullback's C runtime: what generated code needs besides <math.h>.
 *
 * - pb_ctx: the state of one call: the error (a Python exception name and message, or
 *   the id of the failed `check` and its operands) and every live allocation, so that an
 *   error anywhere frees everything.
 * - pb_alloc/pb_free: 64-byte aligned buffers linked into the context (defined, with
 *   the tape's growth, in the glue library glue.c: modules do not compile them).  A
 *   freed buffer goes to a pool, binned by exact size, that the next allocation of that
 *   size takes back: a loop's iterations after the first call no malloc.  The pool
 *   outlives the call (one per compiled module, taken by one call at a time), so
 *   repeated calls neither malloc nor page-fault their buffers; it keeps at most
 *   PB_POOL_KEEP bytes.
 * - pb_tape: the run-time stack of reverse-mode AD: bytes pushed and popped, in a chain
 *   of chunks (growing adds a chunk, nothing is copied; pool-sized chunks are reused
 *   by the next call without page faults).
 * - pb_enter/PB_TICK: recursion deeper than the thread's stack raises RecursionError,
 *   and loops on data and recursion poll for Ctrl-C (pb_poll, in glue.c).
 * - NumPy's semantics where C differs: floor division and remainder, float-to-int
 *   conversion, NaN-propagating max/min, sign, integer powers.
 */
#ifndef PULLBACK_RUNTIME_H
#define PULLBACK_RUNTIME_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Math functions glibc's libmvec has in vector form: declaring them `omp declare simd`
 * lets `#pragma omp simd` loops call the vector versions (within 4 ulp). */
#ifdef PB_MVEC
#define PB_SIMD_MATH(name) \
    _Pragma("omp declare simd notinbranch") double name(double); \
    _Pragma("omp declare simd notinbranch") float name##f(float);
PB_SIMD_MATH(exp) PB_SIMD_MATH(expm1) PB_SIMD_MATH(exp2) PB_SIMD_MATH(log)
PB_SIMD_MATH(log1p) PB_SIMD_MATH(log2) PB_SIMD_MATH(log10) PB_SIMD_MATH(sin)
PB_SIMD_MATH(cos) PB_SIMD_MATH(tan) PB_SIMD_MATH(asin) PB_SIMD_MATH(acos) PB_SIMD_MATH(atan)
PB_SIMD_MATH(sinh) PB_SIMD_MATH(cosh) PB_SIMD_MATH(tanh) PB_SIMD_MATH(asinh)
PB_SIMD_MATH(acosh) PB_SIMD_MATH(atanh) PB_SIMD_MATH(erf) PB_SIMD_MATH(erfc)
PB_SIMD_MATH(cbrt)
#undef PB_SIMD_MATH
#endif

typedef struct pb_block {
    struct pb_block *prev, *next; /* in the context's live list, or next in a pool bin */
    size_t bytes;                 /* the size asked for: the pool bin it returns to */
    char pad[40];
} pb_block;

/* A chunk of a tape; its bytes follow.  An item never straddles two chunks. */
typedef struct pb_chunk {
    struct pb_chunk *prev; /* the chunk before (NULL: the first) */
    size_t prev_size;      /* the bytes that one held when this one started */
    size_t cap;
    char pad[8];
} pb_chunk;

typedef struct pb_tape {
    char *data; /* the current chunk's bytes (a buffer of the context) */
    size_t size, cap;
    pb_chunk *chunk; /* the current chunk (NULL: none yet) */
    pb_chunk *spare; /* the chunk popped off last, kept for the next growth */
} pb_tape;

/* The largest chunk: from 4 KiB, chunks double up to this size, so that a long tape is
 * made of equal chunks.  The pool keeps up to PB_TAPE_KEEP bytes of those besides its
 * PB_POOL_KEEP: a tape of gigabytes (a deep recursion's residuals) costs a page fault
 * per 4 KiB when its memory is new (about 1 s per GB on some machines), so the next
 * call reuses the last one's. */
#ifndef PB_TAPE_CHUNK
#define PB_TAPE_CHUNK ((size_t)4 << 20)
#endif
#ifndef PB_TAPE_KEEP
#define PB_TAPE_KEEP ((size_t)4 << 30)
#endif

/* Free buffers by exact size: bins sorted by size, each a stack of blocks. */
typedef struct pb_bin {
    size_t bytes;
    pb_block *head;
} pb_bin;

typedef struct pb_pool {
    pb_bin *bins;
    size_t n, cap;
    size_t held;      /* bytes of the buffers in the bins */
    size_t tape_held; /* of those, bytes of full-size tape chunks (PB_TAPE_KEEP) */
} pb_pool;

/* The bytes of a full-size tape chunk, header included. */
#define PB_TAPE_BLOCK (sizeof(pb_chunk) + PB_TAPE_CHUNK)

#ifndef PB_POOL_KEEP
#define PB_POOL_KEEP ((size_t)256 << 20)
#endif

#define PB_MAX_CHECK_VALUES 8

typedef struct pb_ctx {
    pb_block live;            /* sentinel of the list of live allocations */
    pb_pool *pool;            /* freed buffers for reuse (NULL: plain malloc and free) */
    const char *exc;          /* Python exception name, or NULL */
    char msg[256];
    int check_id;             /* the fault site: a failed check, or the equation whose
                                 line a fault names (-1: the message says it all) */
    int n_values;
    double fvalues[PB_MAX_CHECK_VALUES];
    int64_t ivalues[PB_MAX_CHECK_VALUES];
    /* debug_print k: hand its operands' bytes to the caller's owner (nonzero: it
     * failed); the caller sets both before the call */
    int (*print)(void *owner, int k, int n, const void **data, const size_t *bytes);
    void *owner;
    char *stack_floor; /* a recursion entered below it fails (pb_enter; at first the top) */
    int64_t ticks;     /* the work recursive entries do before the next pb_poll */
    int watching;      /* whether this call watches for SIGINT (from its first pb_poll) */
} pb_ctx;

/* Under AddressSanitizer a pooled buffer is poisoned, and so is the arena slot of a
 * buffer outside its life (PB_LIVE .. PB_DEAD), so a read after its last use is still
 * reported. */
#if defined(__SANITIZE_ADDRESS__)
#define PB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PB_ASAN 1
#endif
#endif
#ifdef PB_ASAN
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define PB_POISON(b) __asan_poison_memory_region((b) + 1, (b)->bytes)
#define PB_UNPOISON(b) __asan_unpoison_memory_region((b) + 1, (b)->bytes)
#define PB_LIVE(p, n) __asan_unpoison_memory_region((p), (n))
#define PB_DEAD(p, n) __asan_poison_memory_region((p), (n))
#else
#define PB_POISON(b) ((void)0)
#define PB_UNPOISON(b) ((void)0)
#define PB_LIVE(p, n) ((void)0)
#define PB_DEAD(p, n) ((void)0)
#endif

/* The memory of a call (the glue library's, glue.c): 64-byte aligned buffers that an
 * error anywhere frees with the rest. */
void *pb_alloc(pb_ctx *ctx, size_t bytes);
void pb_free(pb_ctx *ctx, void *p);

/* -- long runs: deep recursion and Ctrl-C (glue.c) ---------------------------------- */

/* Work (about one element operation a unit) between two polls for a pending SIGINT:
 * loops on data and recursive entries count down a budget of this much and call pb_poll
 * when it runs out, a few milliseconds apart.  The first poll of a call starts watching
 * for SIGINT; a later one that finds it arrived runs Python's handler, whose exception
 * (KeyboardInterrupt) fails the call.  Calls ending before their first poll cost
 * nothing. */
#ifndef PB_POLL_TICKS
#define PB_POLL_TICKS ((int64_t)1 << 20)
#endif
int pb_poll(pb_ctx *ctx);

/* Whether `work` more exhausts the budget `ticks` and the poll it then makes fails. */
#define PB_TICK(ctx, ticks, work) \
    (__builtin_expect(((ticks) -= (work)) < 0, 0) && ((ticks) = PB_POLL_TICKS, pb_poll(ctx)))

/* RecursionError when the calling thread's stack is nearly used up (the first call of
 * a context looks its stack's floor up). */
int pb_stack_exhausted(pb_ctx *ctx);

/* The entry of a function that may recurse: a compiled recursion deeper than the stack
 * allows raises RecursionError instead of overflowing it, and a long one (a recursion
 * need not loop) polls for Ctrl-C.  Inlined, so `here` is in the recursive function's
 * frame (an address compared as a number: no frame pointer needed). */
__attribute__((always_inline))
static inline int pb_enter(pb_ctx *ctx, int64_t work) {
    char here;
    if (__builtin_expect((uintptr_t)&here < (uintptr_t)ctx->stack_floor, 0) &&
        pb_stack_exhausted(ctx)) return 1;
    return PB_TICK(ctx, ctx->ticks, work);
}

static int pb_fail(pb_ctx *ctx, const char *exc, const char *msg) {
    ctx->exc = exc;
    snprintf(ctx->msg, sizeof ctx->msg, "%s", msg);
    return 1;
}

static void *pb_copy(pb_ctx *ctx, const void *src, size_t bytes) {
    void *p = pb_alloc(ctx, bytes);
    if (p) memcpy(p, src, bytes);
    return p;
}

/* -- the tape ------------------------------------------------------------------------ */

/* A new tape, and a push's new chunk or a pop's return to the chunk before (out of
 * line, in the glue library: a push inlines to a compare, a store and an add). */
pb_tape *pb_tape_new(pb_ctx *ctx);
int pb_tape_grow(pb_ctx *ctx, pb_tape *t, size_t bytes);
int pb_tape_shrink(pb_ctx *ctx, pb_tape *t, size_t bytes);

__attribute__((always_inline))
static inline int pb_tape_push(pb_ctx *ctx, pb_tape *t, const void *src, size_t bytes) {
    if (__builtin_expect(t->size + bytes > t->cap, 0) && pb_tape_grow(ctx, t, bytes)) return 1;
    memcpy(t->data + t->size, src, bytes);
    t->size += bytes;
    return 0;
}

__attribute__((always_inline))
static inline int pb_tape_pop(pb_ctx *ctx, pb_tape *t, void *dst, size_t bytes) {
    if (__builtin_expect(t->size < bytes, 0) && pb_tape_shrink(ctx, t, bytes)) return 1;
    t->size -= bytes;
    memcpy(dst, t->data + t->size, bytes);
    return 0;
}

/* -- NumPy's arithmetic ------------------------------------------------------------- */

/* log2 in scalar code: an exact power of two (a one-bit mask's bit index, the depth of
 * a halving) is its exponent, exactly what libm returns, with no call; others by libm. */
static inline double pb_log2(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    uint64_t e = b >> 52; /* sign and exponent: positive normal numbers only */
    if ((b & ((UINT64_C(1) << 52) - 1)) == 0 && e - 1 < 0x7FE) return (double)((int64_t)e - 1023);
    return log2(x);
}

static inline float pb_log2f(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    uint32_t e = b >> 23;
    if ((b & ((UINT32_C(1) << 23) - 1)) == 0 && e - 1 < 0xFE) return (float)((int32_t)e - 127);
    return log2f(x);
}

/* sin and cos of doubles in scalar code, three times as fast as libm's (a scalar loop
 * driven by sin(t) is bound by it): x less k pi/2 in three parts (each product exact for
 * |k| < 2^19), then the Taylor polynomials of degree 15 and 16 (their truncation is below
 * 2^-53 on [-pi/4, pi/4]); within 2 ulp of libm.  Large arguments, reductions cancelling
 * to near zero, infinities and NaNs go to libm.  (SIMD loops use libmvec's.) */
static inline double pb_sincos_poly_(double r, int cosine) {
    const double z = r * r;
    if (cosine) {
        double p = fma(z, 0x1.ae7f3e733b81fp-45, -0x1.93974a8c07c9dp-37);
        p = fma(z, p, 0x1.1eed8eff8d898p-29);
        p = fma(z, p, -0x1.27e4fb7789f5cp-22);
        p = fma(z, p, 0x1.a01a01a01a01ap-16);
        p = fma(z, p, -0x1.6c16c16c16c17p-10);
        p = fma(z, p, 0x1.5555555555555p-5);
        return 1.0 - fma(-z * z, p, 0.5 * z);
    }
    double p = fma(z, -0x1.ae7f3e733b81fp-41, 0x1.6124613a86d09p-33);
    p = fma(z, p, -0x1.ae64567f544e4p-26);
    p = fma(z, p, 0x1.71de3a556c734p-19);
    p = fma(z, p, -0x1.a01a01a01a01ap-13);
    p = fma(z, p, 0x1.1111111111111p-7);
    p = fma(z, p, -0x1.5555555555555p-3);
    return fma(r * z, p, r);
}

static inline double pb_sincos_(double x, int cosine) {
    if (fabs(x) < 0x1p-27) return cosine ? 1.0 : x; /* -0.0 stays -0.0 */
    if (!(fabs(x) < 0x1p19)) return cosine ? cos(x) : sin(x);
    const double k = nearbyint(x * 0x1.45f306dc9c883p-1);
    if (k == 0) return pb_sincos_poly_(x, cosine);
    const double r = ((x - k * 0x1.921fb54400000p+0) - k * 0x1.0b4611a600000p-34) -
                     k * 0x1.3198a2e037073p-69;
    if (fabs(r) < 0x1p-30 && k != 0) return cosine ? cos(x) : sin(x);
    const int q = ((int)k + cosine) & 3; /* cos x = sin(x + pi/2) */
    const double v = pb_sincos_poly_(r, q & 1);
    return q & 2 ? -v : v;
}
static inline double pb_sin(double x) { return pb_sincos_(x, 0); }
static inline double pb_cos(double x) { return pb_sincos_(x, 1); }

/* NumPy's npy_divmod: floor division and a remainder with the divisor's sign. */
static double pb_fmod_np(double a, double b) {
    double mod = fmod(a, b);
    if (b == 0.0) return mod; /* nan */
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) mod += b;
    } else {
        mod = copysign(0.0, b);
    }
    return mod;
}

static double pb_floordiv_np(double a, double b) {
    if (b == 0.0) return a / b;
    double mod = fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
    double floordiv;
    if (div != 0.0) {
        floordiv = floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, a / b);
    }
    return floordiv;
}

static int64_t pb_ifloordiv(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1 && a == INT64_MIN) return INT64_MIN;
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}

static int64_t pb_imod(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

/* Integer power with wrap-around (a negative exponent was refused before). */
static int64_t pb_ipow(int64_t base, int64_t exp) {
    uint64_t b = (uint64_t)base, r = 1;
    while (exp > 0) {
        if (exp & 1) r *= b;
        b *= b;
        exp >>= 1;
    }
    return (int64_t)r;
}

/* select without a branch, both operands read: gcc does not vectorise a loop whose float
   ternaries it turns into control flow, and gcc 12's vectoriser turns `c ? x[i] : 0`
   in an unrolled loop nest into masked loads with the wrong mask (a ReLU's operand read
   as zeros).  Bit for bit what the ternary gives. */
#define PB_BLEND(name, T, U)                                   \
    static inline T name(int c, T a, T b) {                    \
        U m = -(U)(c != 0), x, y, r;                           \
        T d;                                                   \
        memcpy(&x, &a, sizeof x);                              \
        memcpy(&y, &b, sizeof y);                              \
        r = (x & m) | (y & ~m);                                \
        memcpy(&d, &r, sizeof d);                              \
        return d;                                              \
    }
PB_BLEND(pb_blend, double, uint64_t)
PB_BLEND(pb_blendf, float, uint32_t)
PB_BLEND(pb_blend_int64, int64_t, uint64_t)
PB_BLEND(pb_blend_int32, int32_t, uint32_t)
PB_BLEND(pb_blend_bool, uint8_t, uint8_t)

/* Small whole powers as products: libm's pow does not vectorise.  x*x is pow(x, 2) to
   the bit; a cube or a fourth power may differ from pow by an ulp. */
static double pb_pow2(double x) { return x * x; }
static double pb_pow3(double x) { return x * x * x; }
static double pb_pow4(double x) { double s = x * x; return s * s; }
static float pb_pow2f(float x) { return x * x; }
static float pb_pow3f(float x) { return x * x * x; }
static float pb_pow4f(float x) { float s = x * x; return s * s; }

/* NumPy's maximum and minimum: the first NaN, else the larger (smaller).  The NaN tests
   as blends: gcc turns nested ternaries into control flow where a reduction follows
   (k-means' cost: a scalar loop, 2.5x slower). */
static double pb_fmax(double a, double b) { return pb_blend(a != a, a, pb_blend(b != b, b, a > b ? a : b)); }
static double pb_fmin(double a, double b) { return pb_blend(a != a, a, pb_blend(b != b, b, a < b ? a : b)); }
static float pb_fmaxf(float a, float b) { return pb_blendf(a != a, a, pb_blendf(b != b, b, a > b ? a : b)); }
static float pb_fminf(float a, float b) { return pb_blendf(a != a, a, pb_blendf(b != b, b, a < b ? a : b)); }
/* NumPy's sign: +0.0 for both zeros, NaN for NaN. */
static double pb_sign(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : (x == 0 ? 0.0 : x)); }

/* Float to integer as NumPy does on x86: NaN and out-of-range give the minimum. */
static int64_t pb_f2i64(double x) {
    if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) return INT64_MIN;
    return (int64_t)x;
}
static int32_t pb_f2i32(double x) {
    if (!(x > -2147483649.0 && x < 2147483648.0)) return INT32_MIN;
    return (int32_t)x;
}

/* Where blocks of `block` elements of array p start so that every block but the first
   begins on a 64-byte line (an element count in (-block, 0]). */
static inline int64_t pb_block_start_(const void *p, int64_t size, int64_t block) {
    int64_t ahead = (int64_t)((-(uintptr_t)p & 63) / (uintptr_t)size);
    return ahead ? ahead % block - block : 0;
}
#define pb_block_start(p, block) pb_block_start_((p), sizeof *(p), (block))

static int64_t pb_clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* SplitMix64: element i of random_bits(key). */
static int64_t pb_splitmix(int64_t key, uint64_t i) {
    uint64_t z = (uint64_t)key + (i + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return (int64_t)(z ^ (z >> 31));
}

/* -- sorting and factorizations (the reference loops of ops/sort.py, ops/linalg.py) --- */

/* Whether key a goes before key b in NumPy's order: ascending by <, NaN after every
 * number (NaNs equal); descending is largest first, NaN before every number. */
#define PB_BEFORE(a, b, desc, ISNAN) \
    ((desc) ? ((a) > (b) || (ISNAN(a) && !ISNAN(b))) : ((a) < (b) || (ISNAN(b) && !ISNAN(a))))
#define PB_NEVER_NAN(x) 0

/* scipy.special's functions that <math.h> lacks (ops lgamma ... i1e), in double
 * precision (float32 operands are widened, as SciPy's loops do), within a few ulp of
 * SciPy's except next to the zeros of digamma and lgamma at negative arguments. */
extern double lgamma_r(double, int *); /* lgamma without writing the global signgam */
static inline double pb_lgamma(double x) { int sign; return lgamma_r(x, &sign); }

/* Bernoulli numbers B2 ... B20, for the asymptotic series below. */
static const double pb_bernoulli_[10] = {
    1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6,
    -3617.0 / 510, 43867.0 / 798, -174611.0 / 330};

/* digamma on [1, 2): its Taylor series about its positive zero x0 (held as the sum of
 * two doubles), which keeps relative accuracy where the value passes through zero. */
static inline double pb_digamma_near_zero_(double x) {
    static const double c[40] = {
        0.9676722454476212, -0.4427631689835921, 0.258499760955651, -0.16394270544240652,
        0.10782405069126237, -0.07219956125645471, 0.04880428816414311, -0.03316112647484736,
        0.022597648232218104, -0.01542476590494896, 0.010538791616612175, -0.007204534386356869,
        0.004926781395729853, -0.003369801655439328, 0.002305126326734928, -0.0015769367714301972,
        0.0010788252019162967, -0.0007380709389960052, 0.000504953265834602, -0.0003454680251063077,
        0.00023635601564027053, -0.00016170622091974803, 0.0001106337276874741, -7.569179582195066e-05,
        5.178575795222081e-05, -3.5430070947659604e-05, 2.424006611860132e-05, -1.6584242271854135e-05,
        1.134638458466385e-05, -7.762817668462094e-06, 5.3110609208898636e-06, -3.6336507898010456e-06,
        2.486022733129538e-06, -1.7008538854332607e-06, 1.1636675363548843e-06, -7.96142543124197e-07,
        5.446941930669446e-07, -3.7266161283438227e-07, 2.549626552021554e-07, -1.7443695117727745e-07};
    double d = (x - 1.4616321449683622) - 9.549995429965697e-17, s = 0.0;
    for (int k = 39; k >= 0; k--) s = (s + c[k]) * d;
    return s;
}

static inline double pb_digamma(double x) {
    if (x != x || x == -INFINITY) return NAN;
    if (x == INFINITY) return INFINITY;
    if (x <= 0) {
        if (x == 0) return signbit(x) ? INFINITY : -INFINITY; /* the limits from 0- and 0+ */
        double r = x - nearbyint(x);                          /* pi cot(pi x) has period 1 */
        if (r == 0) return NAN;                               /* poles at negative integers */
        return pb_digamma(1.0 - x) - 3.141592653589793 / tan(3.141592653589793 * r);  /* reflection */
    }
    if (x < 1) return pb_digamma_near_zero_(x + 1.0) - 1.0 / x;
    if (x < 2) return pb_digamma_near_zero_(x);
    if (x < 10) { /* down to [1, 2) (x - n is exact), adding 1/(x-1) + ... + 1/(x-n) */
        double n = floor(x) - 1.0, y = x - n, s = 0.0;
        for (double k = n - 1; k >= 0; k--) s += 1.0 / (y + k);
        return pb_digamma_near_zero_(y) + s;
    }
    double inv2 = 1.0 / (x * x), s = 0.0; /* log x - 1/2x - sum B2k / (2k x^2k) */
    for (int k = 7; k >= 0; k--) s = (s + pb_bernoulli_[k] / (2 * k + 2)) * inv2;
    return log(x) - 0.5 / x - s;
}

/* polygamma(n, x) = (-1)^(n+1) n! zeta(n+1, x) for n >= 1: Hurwitz's zeta as the terms
 * (x+k)^-s up to x+N >= n + 15, then the Euler-Maclaurin tail; negative x by the same
 * sum (s is an integer), with poles at the non-positive integers. */
static inline double pb_polygamma(double n, double x) {
    if (n != n || x != x || n < 0 || n != floor(n)) return NAN;
    if (n == 0) return pb_digamma(x);
    if (x <= 0 && x == floor(x)) return INFINITY;
    double s = n + 1.0, fact = 1.0, sum = 0.0, a = x;
    for (double k = 2; k <= n; k++) fact *= k;
    while (a < n + 15.0) { sum += pow(a, -s); a += 1.0; }
    double tail = pow(a, 1.0 - s) / (s - 1.0) + 0.5 * pow(a, -s);
    double rising = s, power = pow(a, -s - 1.0), fact2j = 2.0;
    for (int j = 1; j <= 10; j++) { /* B2j / (2j)! s (s+1) ... (s+2j-2) a^(-s-2j+1) */
        tail += pb_bernoulli_[j - 1] / fact2j * rising * power;
        rising *= (s + 2 * j - 1) * (s + 2 * j);
        power /= a * a;
        fact2j *= (2.0 * j + 1) * (2.0 * j + 2);
    }
    double z = fact * (sum + tail);
    return fmod(n, 2.0) == 1.0 ? z : -z;
}

/* erfinv on [-1/2, 1/2]: Newton's method on erf from three terms of its series (erf is
 * concave for y > 0, so the iterates approach the root from one side). */
static inline double pb_erfinv_central_(double x) {
    double x2 = x * x, y = 0.88622692545275801 * x * (1 + x2 * (0.26179938779914941 +
                                                                 x2 * 0.14393173084921978));
    for (int i = 0; i < 8; i++) {
        double d = (erf(y) - x) / (1.1283791670955126 * exp(-y * y));
        y -= d;
        if (fabs(d) <= 1e-17 * fabs(y)) break;
    }
    return y;
}

/* log erfc(y) for y > 0, past erfc's underflow by its asymptotic series; and
 * -d/dy log erfc(y) = (2/sqrt(pi)) exp(-y^2) / erfc(y). */
static inline double pb_log_erfc_(double y, double *slope) {
    if (y < 26.0) {
        double q = erfc(y);
        *slope = 1.1283791670955126 * exp(-y * y) / q;
        return log(q);
    }
    double t = 0.5 / (y * y), term = 1.0, sum = 1.0;
    for (int k = 1; k < 12; k++) { term *= -(2 * k - 1) * t; sum += term; }
    *slope = 2.0 * y / sum;
    return -y * y - log(y * 1.7724538509055160) + log(sum);
}

/* The y >= 0.4769 with erfc(y) == q, for 0 < q <= 1/2: Newton's method on log erfc,
 * which is concave, so that after the first step the iterates decrease to the root. */
static inline double pb_erfcinv_tail_(double q) {
    double target = log(q), y = sqrt(-target), slope;
    for (int i = 0; i < 60; i++) {
        double d = (pb_log_erfc_(y, &slope) - target) / slope;
        y += d;
        if (fabs(d) <= 1e-16 * y) break;
    }
    return y;
}

static inline double pb_erfinv(double x) {
    double a = fabs(x);
    if (!(a <= 1)) return NAN;
    if (a <= 0.5) return pb_erfinv_central_(x);
    if (a == 1) return copysign(INFINITY, x);
    return copysign(pb_erfcinv_tail_(1.0 - a), x); /* 1 - a is exact */
}

/* The inverse of the standard normal CDF: -sqrt(2) erfcinv(2p), with 2p - 1 and 1 - p
 * exact where they are used. */
static inline double pb_ndtri(double p) {
    if (!(p >= 0 && p <= 1)) return NAN;
    if (p == 0) return -INFINITY;
    if (p == 1) return INFINITY;
    if (p >= 0.25 && p <= 0.75) return 1.4142135623730951 * pb_erfinv_central_(2.0 * p - 1.0);
    if (p < 0.25) return -1.4142135623730951 * pb_erfcinv_tail_(2.0 * p);
    return 1.4142135623730951 * pb_erfcinv_tail_(2.0 * (1.0 - p));
}

/* exp(-|x|) I0(x) and exp(-|x|) I1(x): up to |x| = 20 the power series, whose terms
 * are all positive, carried in double-double (a term's k roundings would otherwise add
 * up to 9 ulp); beyond, the asymptotic series (its smallest term there is below 1e-16). */
static inline double pb_bessel_ie_(double x, int order) {
    double a = fabs(x);
    if (a != a) return a;
    if (a == INFINITY) return 0.0;
    if (a <= 20.0) {
        double qh = 0.25 * a * a, ql = 0.25 * fma(a, a, -a * a); /* (a/2)^2, exactly */
        double th = 1.0, tl = 0.0, sh = 1.0, sl = 0.0;
        for (int k = 1; k < 200 && th > 1e-17 * sh; k++) {
            double d = (double)k * (k + order);
            double p = th * qh, e = fma(th, qh, -p) + (th * ql + tl * qh); /* t q */
            double h = p + e, l = e - (h - p);
            double r = h / d, rest = (fma(-r, d, h) + l) / d; /* / k (k + order) */
            th = r + rest;
            tl = rest - (th - r);
            double s = sh + th, bv = s - sh; /* sum += t */
            double err = (sh - (s - bv)) + (th - bv) + sl + tl;
            sh = s + err;
            sl = err - (sh - s);
        }
        double scale = exp(-a);
        if (!order) return (sh + sl) * scale;
        double ph = sh * a, pe = fma(sh, a, -ph) + sl * a; /* (a/2) sum, as a double */
        return copysign(0.5 * (ph + pe) * scale, x);
    }
    double tail = 0.0, term = 1.0, mu = 4.0 * order * order; /* 1 + tail, tail small */
    for (int k = 1; k < 60 && fabs(term) > 1e-20; k++) {
        term *= ((2 * k - 1) * (2 * k - 1) - mu) / (8.0 * k * a);
        tail += term;
    }
    double sum = (1.0 + tail) / sqrt(6.283185307179586 * a);
    return order ? copysign(sum, x) : sum;
}
static inline double pb_i0e(double x) { return pb_bessel_ie_(x, 0); }
static inline double pb_i1e(double x) { return pb_bessel_ie_(x, 1); }

/* Stable bottom-up merge sort of the positions perm[0..n) by key[perm[i] * stride];
 * tmp holds n positions.  Equal keys keep their order in both directions. */
#define PB_DEFINE_SORT(NAME, T, ISNAN)                                                    \
    static void NAME(const T *key, int64_t stride, int64_t *perm, int64_t *tmp,         \
                     int64_t n, int desc) {                                               \
        for (int64_t w = 1; w < n; w *= 2) {                                              \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                                   \
                int64_t mid = lo + w < n ? lo + w : n;                                    \
                int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;                             \
                int64_t i = lo, j = mid, k = lo;                                          \
                while (i < mid && j < hi) {                                               \
                    T a = key[perm[i] * stride], b = key[perm[j] * stride];              \
                    tmp[k++] = PB_BEFORE(b, a, desc, ISNAN) ? perm[j++] : perm[i++];     \
                }                                                                         \
                while (i < mid) tmp[k++] = perm[i++];                                     \
                while (j < hi) tmp[k++] = perm[j++];                                      \
            }                                                                             \
            memcpy(perm, tmp, (size_t)n * sizeof *perm);                                  \
        }                                                                                 \
    }
PB_DEFINE_SORT(pb_sort_float64, double, isnan)
PB_DEFINE_SORT(pb_sort_float32, float, isnan)
PB_DEFINE_SORT(pb_sort_int64, int64_t, PB_NEVER_NAN)
PB_DEFINE_SORT(pb_sort_int32, int32_t, PB_NEVER_NAN)
PB_DEFINE_SORT(pb_sort_bool, uint8_t, PB_NEVER_NAN)

/* Products: the runtime library's kernels (kernels.c, built once and linked): small
 * products as register tiles, large float products packed. */
#define PB_DECLARE_GEMM(S, T)                                                             \
    void pb_gemm_##S(int64_t m, int64_t n, int64_t k, T alpha, const T *a, int ta,        \
                     const T *b, int tb, const T *cin, T *c);
PB_DECLARE_GEMM(float32, float)
PB_DECLARE_GEMM(float64, double)
PB_DECLARE_GEMM(int32, int32_t)
PB_DECLARE_GEMM(int64, int64_t)

/* Factorizations by LAPACK: the runtime library lapack.c (built once and linked), a
 * batch of `count` row-major matrices a call.  eigh, svd, qr: nonzero on failure, the
 * error set; cholesky: nonzero when a matrix is not positive definite;
 * cholesky_adjoint: nonzero when its workspace cannot be allocated. */
#define PB_DECLARE_LAPACK_CALLS(S, T)                                                     \
    int pb_lapack_eigh_##S(pb_ctx *ctx, int64_t count, int64_t n, const T *a, T *w, T *v, \
                           int lower, int vectors);                                       \
    int pb_lapack_svd_##S(pb_ctx *ctx, int64_t count, int64_t m, int64_t n, const T *a,   \
                          T *u, T *s, T *vh, char jobz);                                  \
    int pb_lapack_qr_##S(pb_ctx *ctx, int64_t count, int64_t m, int64_t n, const T *a,    \
                         T *q, T *r, int complete);                                       \
    int pb_lapack_cholesky_##S(int64_t count, int64_t n, const T *a, T *l);               \
    int pb_lapack_cholesky_adjoint_##S(pb_ctx *ctx, int64_t count, int64_t n, const T *l, \
                                       const T *c, T *g);                                 \
    void pb_lapack_lu_##S(int64_t count, int64_t n, T *lu, int32_t *pivots, int32_t *perm);
PB_DECLARE_LAPACK_CALLS(float32, float)
PB_DECLARE_LAPACK_CALLS(float64, double)

/* Large float products: the packed kernels of the runtime library (packed.c, built once
 * and linked), where they are built with AVX-512 and measured faster than OpenBLAS on
 * this machine, for two kinds of product apart (build/tuning.py sets the two flags before
 * any call): few rows of A (at most PB_FEW_ROWS) by a large B (PB_FEW_B elements or
 * more), which OpenBLAS packs whole on every call while the packed kernels read it in
 * place (an RNN step's h @ w_hh), and the rest.  PULLBACK_GEMM=packed or =blas decides
 * instead. */
extern int pb_gemm_packed_chosen, pb_gemm_packed_few_chosen;
int pb_gemm_packed_float32(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                           int ta, const float *b, int tb, const float *cin, float *c);
int pb_gemm_packed_float64(int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                           int ta, const double *b, int tb, const double *cin, double *c);

#define PB_FEW_ROWS 128
#define PB_FEW_B 131072

/* Whether the packed kernels compute the product of A [m, k] and B [k, n]. */
static int pb_packed_gemm(int64_t m, int64_t n, int64_t k) {
#if defined(__AVX512F__)
    static int forced = -1; /* PULLBACK_GEMM: 1 packed, 0 blas, 2 as measured */
    if (forced < 0) {
        const char *choice = getenv("PULLBACK_GEMM");
        forced = choice && !strcmp(choice, "packed") ? 1
                 : choice && !strcmp(choice, "blas") ? 0 : 2;
    }
    if (forced != 2)
        return forced;
    return m <= PB_FEW_ROWS && n * k >= PB_FEW_B ? pb_gemm_packed_few_chosen
                                                 : pb_gemm_packed_chosen;
#else
    (void)m, (void)n, (void)k;
    return 0;
#endif
}

/* -- the module's entry ---------------------------------------------------------- */

/* A compiled module holds only its own code and this description of its entry; the
 * glue library (glue.c) does the Python side of every call: it checks and reads the
 * arguments, allocates the results, makes the call's context and calls `run`, which
 * computes them. */
enum { PB_BOOL, PB_INT32, PB_INT64, PB_FLOAT32, PB_FLOAT64 };

typedef struct {
    int type;             /* PB_BOOL ... PB_FLOAT64 */
    int nd;
    const int64_t *dims;  /* NULL for a 0-d value, passed by value to the function */
} pb_param;

typedef struct {
    int n_in, n_out;
    int big;                  /* a result big enough for memory NumPy freed (PB_BIG) */
    const pb_param *params;   /* the arguments, then the results */
    int (*run)(pb_ctx *ctx, void *const *in, void *const *out);
    pb_pool **pool;           /* the buffers the module's last call left, for the next */
    const int *donor;         /* per result, the argument whose buffer it is (-1: none;
                                 NULL: no result is): an argument the caller hands over */
} pb_entry;

/* The module object (a PyObject *) with the methods call and set_hooks. */
void *pb_module_new(const char *name, const pb_entry *entry);

#endif
