/* pullback's runtime library of large float products (pb_gemm_packed_*), built once
 * per compiler and flags (with -ffp-contract=fast, as kernels.c) and linked by each module
 * that has them, beside OpenBLAS: they run where measured faster than it.
 *
 * They run by the classic blocked algorithm over blocks of A (PB_MC rows, PB_KC columns)
 * and of B (PB_KC rows, PB_NC columns): a register tile of up to PB_MR rows of A by two
 * vectors of B's columns (24 of the 32 vector registers AVX-512 has) accumulates over
 * the block's depth, each A element broadcast against a row of B's panel.  A tile has
 * its panel's rows rounded up to a multiple of 4 (32 rows: tiles of 12, 12 and 8, not a
 * third tile of 12 with 4 rows of zeros).  A's panels of 4, 8 or 12 rows are read where
 * they lie, only a last panel of another height packed, zero-padded: on AMD EPYC Zen 5
 * that is as fast for tall blocks and up to 20% faster where B has a few panels (2048 x
 * 128 x 1024: 2.83 -> 2.29 ms), each of whose A panels packing had copied for a few
 * tiles.  B's panels two vectors wide are read where they lie where they are B's own
 * rows and fewer than two blocks of A read them, else packed (zero-padded), and shared
 * by the threads.  The packing buffers are kept per thread; the products return nonzero
 * when those cannot be allocated. */

#include "kernels.h"

/* Whether modules call these kernels (runtime.h's pb_packed_gemm), for products of few
 * rows by a large B and for the rest: set by the tuning's measurement (build/tuning.py),
 * once per process, before any module calls. */
int pb_gemm_packed_chosen = 0, pb_gemm_packed_few_chosen = 0;

#define PB_MR 12
#define PB_KC 256
#define PB_MC 120
#define PB_NC 2048

/* A buffer of at least n bytes, kept for the thread's later calls. */
static void *pb_scratch(void **slot, size_t *have, size_t n) {
    if (*have < n) {
        free(*slot);
        *have = 0;
        if (posix_memalign(slot, 64, n) != 0) {
            *slot = NULL;
            return NULL;
        }
        *have = n;
    }
    return *slot;
}

#define PB_DEFINE_PACKED_GEMM(S, T, I)                                                    \
    enum { PB_NR_##S = 2 * PB_VEC_BYTES / (int)sizeof(T) };                               \
    /* dst[p * ldd + j] = src[j * lds + p] for a square block of one vector's lanes: a    \
     * row of B's transpose per vector, by log2(lanes) rounds of two-vector shuffles,     \
     * each swapping the off-diagonal halves of the blocks of the round before */         \
    static inline __attribute__((always_inline)) void pb_transpose_##S(                   \
            const T *src, int64_t lds, T *dst, int64_t ldd) {                             \
        typedef I pb_idx __attribute__((vector_size(PB_VEC_BYTES)));                      \
        enum { L = PB_LANES_##S };                                                        \
        pb_vec_##S r[L];                                                                  \
        _Pragma("GCC unroll 16")                                                          \
        for (int j = 0; j < L; j++) memcpy(&r[j], src + j * lds, PB_VEC_BYTES);           \
        _Pragma("GCC unroll 4")                                                           \
        for (int h = L / 2; h >= 1; h /= 2) {                                             \
            pb_idx lo, hi;                                                                \
            _Pragma("GCC unroll 16")                                                      \
            for (int e = 0; e < L; e++) {                                                 \
                lo[e] = (e & h) ? L + e - h : e;                                          \
                hi[e] = (e & h) ? L + e : e + h;                                          \
            }                                                                             \
            _Pragma("GCC unroll 16")                                                      \
            for (int i = 0; i < L; i++)                                                   \
                if (!(i & h)) {                                                           \
                    const pb_vec_##S x = r[i], y = r[i + h];                              \
                    r[i] = __builtin_shuffle(x, y, lo);                                   \
                    r[i + h] = __builtin_shuffle(x, y, hi);                               \
                }                                                                         \
        }                                                                                 \
        _Pragma("GCC unroll 16")                                                          \
        for (int p = 0; p < L; p++) memcpy(dst + p * ldd, &r[p], PB_VEC_BYTES);           \
    }                                                                                     \
    /* A tile of R rows (a constant: 4, 8 or 12) by two vectors: element r of the A     \
     * panel's column p at ap[p * as + r * rs] (packed: as PB_MR, rs 1) */                \
    static inline __attribute__((always_inline)) void pb_micro_##S(                       \
            const int R, int64_t kc, const T *ap, int64_t as, int64_t rs, const T *bp,    \
            int64_t bs, T alpha, const T *cin, T *c, int64_t ldc, int64_t rows,           \
            int64_t cols) {                                                               \
        pb_vec_##S t[PB_MR][2] = {{{0}}};                                                 \
        for (int64_t p = 0; p < kc; p++) {                                                \
            const pb_vec_##S b0 = ((const pb_vec_##S *)(bp + p * bs))[0];                 \
            const pb_vec_##S b1 = ((const pb_vec_##S *)(bp + p * bs))[1];                 \
            _Pragma("GCC unroll 12")                                                      \
            for (int r = 0; r < R; r++) {                                                 \
                const T a = ap[p * as + r * rs];                                          \
                t[r][0] += a * b0;                                                        \
                t[r][1] += a * b1;                                                        \
            }                                                                             \
        }                                                                                 \
        if (rows == R && cols == PB_NR_##S) {                                             \
            _Pragma("GCC unroll 12")                                                      \
            for (int r = 0; r < R; r++) {                                                 \
                pb_vec_##S *cp = (pb_vec_##S *)(c + r * ldc), s0 = {0}, s1 = {0};         \
                if (cin) { /* read before the store: Cin may be C */                      \
                    s0 = ((const pb_vec_##S *)(cin + r * ldc))[0];                        \
                    s1 = ((const pb_vec_##S *)(cin + r * ldc))[1];                        \
                }                                                                         \
                cp[0] = s0 + alpha * t[r][0];                                             \
                cp[1] = s1 + alpha * t[r][1];                                             \
            }                                                                             \
            return;                                                                       \
        }                                                                                 \
        for (int64_t r = 0; r < rows; r++) {                                              \
            const T *tr = (const T *)t[r];                                                \
            for (int64_t j = 0; j < cols; j++)                                            \
                c[r * ldc + j] = cin ? cin[r * ldc + j] + alpha * tr[j] : alpha * tr[j];  \
        }                                                                                 \
    }                                                                                     \
    /* The tile of a panel of `rows` rows: as many rows, rounded up to a multiple of 4    \
     * (a packed panel's rows past the matrix are zeros; a panel read in place has 4, 8   \
     * or 12 rows) */                                                                     \
    static inline __attribute__((always_inline)) void pb_tile_##S(                        \
            int64_t kc, const T *ap, int64_t as, int64_t rs, const T *bp, int64_t bs,     \
            T alpha, const T *cin, T *c, int64_t ldc, int64_t rows, int64_t cols) {       \
        if (rows > 8)                                                                     \
            pb_micro_##S(12, kc, ap, as, rs, bp, bs, alpha, cin, c, ldc, rows, cols);     \
        else if (rows > 4)                                                                \
            pb_micro_##S(8, kc, ap, as, rs, bp, bs, alpha, cin, c, ldc, rows, cols);      \
        else                                                                              \
            pb_micro_##S(4, kc, ap, as, rs, bp, bs, alpha, cin, c, ldc, rows, cols);      \
    }                                                                                     \
    static int pb_gemm_blocked_##S(int64_t m, int64_t n, int64_t k, T alpha, const T *a,  \
                                   int ta, const T *b, int tb, const T *cin, T *c) {      \
        enum { NR = PB_NR_##S };                                                          \
        static _Thread_local void *a_buf, *b_buf;                                         \
        static _Thread_local size_t a_have, b_have;                                       \
        const int64_t ars = ta ? 1 : k, acs = ta ? m : 1, brs = tb ? 1 : n, bcs = tb ? k : 1; \
        /* B's whole panels of rows read where they lie, unless two blocks of A or more    \
         * read each: packed, they are contiguous in cache for every block (256 x 1024 x   \
         * 2048, A transposed: 6.3 -> 5.8 ms; the 128-row products as fast either way) */  \
        const int b_in_place = bcs == 1 && m < 2 * PB_MC;                                 \
        T *const abuf = (T *)pb_scratch(&a_buf, &a_have, 2 * PB_MC * PB_KC * sizeof(T));  \
        T *const bp = (T *)pb_scratch(&b_buf, &b_have, (PB_NC + NR) * PB_KC * sizeof(T)); \
        if (!abuf || !bp) return 1;                                                       \
        _Pragma("omp parallel if(m * n * k > 1 << 21)")                                   \
        for (int64_t jc = 0; jc < n; jc += PB_NC) {                                       \
            const int64_t nc = n - jc < PB_NC ? n - jc : PB_NC;                           \
            for (int64_t pc = 0; pc < k; pc += PB_KC) {                                   \
                const int64_t kc = k - pc < PB_KC ? k - pc : PB_KC;                       \
                const T *src0 = pc > 0 ? c : cin; /* what the product adds to */          \
                if (jc + pc > 0) { _Pragma("omp barrier") } /* all done with B's panels */ \
                _Pragma("omp for schedule(static)")                                       \
                for (int64_t jp = 0; jp < nc; jp += NR) {                                 \
                    T *panel = bp + jp * kc;                                              \
                    const int64_t w = nc - jp < NR ? nc - jp : NR;                        \
                    if (b_in_place && w == NR) continue; /* whole rows: read in place */ \
                    if (bcs == 1) /* read along B's rows, whichever way they run */       \
                        for (int64_t p = 0; p < kc; p++)                                  \
                            for (int64_t j = 0; j < NR; j++)                              \
                                panel[p * NR + j] = j < w ? b[(pc + p) * brs + jc + jp + j] : 0; \
                    else { /* B's transpose: whole blocks by shuffles, the rest as is */  \
                        const T *src = b + pc + (jc + jp) * bcs;                          \
                        const int64_t L = PB_LANES_##S, whole = w == NR ? kc / L * L : 0; \
                        for (int64_t p = 0; p < whole; p += L)                            \
                            for (int64_t j = 0; j < NR; j += L)                           \
                                pb_transpose_##S(src + j * bcs + p, bcs, panel + p * NR + j, NR); \
                        for (int64_t j = 0; j < NR; j++)                                  \
                            for (int64_t p = whole; p < kc; p++)                          \
                                panel[p * NR + j] = j < w ? src[p + j * bcs] : 0;         \
                    }                                                                     \
                }                                                                         \
                for (int64_t ic = 0; ic < m; ic += PB_MC) {                               \
                    const int64_t mc = m - ic < PB_MC ? m - ic : PB_MC;                   \
                    /* two A blocks in turn: a thread packing the next one has done with  \
                     * the last but one, and the packing's barrier waits for the others */ \
                    T *const ap = abuf + (ic / PB_MC % 2) * PB_MC * PB_KC;                \
                    _Pragma("omp for schedule(static)")                                   \
                    for (int64_t ip = 0; ip < mc; ip += PB_MR) {                          \
                        T *panel = ap + ip * kc;                                          \
                        const int64_t h = mc - ip < PB_MR ? mc - ip : PB_MR;              \
                        const T *src = a + (ic + ip) * ars + pc * acs;                    \
                        if (h % 4 == 0) continue; /* read in place */                    \
                        if (ars == 1)                                                     \
                            for (int64_t p = 0; p < kc; p++)                              \
                                for (int64_t r = 0; r < PB_MR; r++)                       \
                                    panel[p * PB_MR + r] = r < h ? src[p * acs + r] : 0;  \
                        else                                                              \
                            for (int64_t r = 0; r < PB_MR; r++)                           \
                                for (int64_t p = 0; p < kc; p++)                          \
                                    panel[p * PB_MR + r] = r < h ? src[r * ars + p] : 0;  \
                    }                                                                     \
                    /* every pair of panels, so that a block of a few B panels (the       \
                     * transpose of a product of few rows) still has work for each thread */ \
                    _Pragma("omp for schedule(static) collapse(2) nowait")                \
                    for (int64_t jp = 0; jp < nc; jp += NR) {                             \
                        for (int64_t ip = 0; ip < mc; ip += PB_MR) {                      \
                            const int in_place = b_in_place && nc - jp >= NR;             \
                            const T *panel = in_place ? b + pc * brs + jc + jp : bp + jp * kc; \
                            const int64_t at = (ic + ip) * n + jc + jp, bs = in_place ? brs : NR; \
                            const int64_t h = mc - ip < PB_MR ? mc - ip : PB_MR;          \
                            const int64_t w = nc - jp < NR ? nc - jp : NR;                \
                            const T *add = src0 ? src0 + at : NULL;                       \
                            if (h % 4 == 0)                                               \
                                pb_tile_##S(kc, a + (ic + ip) * ars + pc * acs, acs, ars, \
                                            panel, bs, alpha, add, c + at, n, h, w);      \
                            else                                                          \
                                pb_tile_##S(kc, ap + ip * kc, PB_MR, 1, panel, bs, alpha, \
                                            add, c + at, n, h, w);                        \
                        }                                                                 \
                    }                                                                     \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
        return 0;                                                                         \
    }                                                                                     \
    /* C as its transpose, op(B)' op(A)', whose rows run along C's columns, where that    \
     * packs less or wastes less of the tiles: a C narrower than half a register tile (a  \
     * classifier's ten outputs; the tile's rows are then what is wasted, not most of its \
     * columns), and a C of at most one tile's width of rows times a transposed B (dz W'  \
     * of a recurrent layer's step: W's rows are read where they lie, only dz is packed,  \
     * rather than W transposed into panels every step; 32 x 256 x 1024: 138 -> 89 us).  \
     * C' starts from Cin', so each element is the sum the plain product makes */        \
    int pb_gemm_packed_##S(int64_t m, int64_t n, int64_t k, T alpha, const T *a, int ta,  \
                           const T *b, int tb, const T *cin, T *c) {                      \
        static _Thread_local void *t_buf;                                                 \
        static _Thread_local size_t t_have;                                               \
        enum { NR = PB_NR_##S };                                                          \
        const int narrow = n > 0 && 2 * n <= NR && m >= NR;                              \
        const int few_rows = tb && 2 * m > NR && m <= NR && n > NR;                       \
        if (!narrow && !few_rows)                                                         \
            return pb_gemm_blocked_##S(m, n, k, alpha, a, ta, b, tb, cin, c);             \
        T *const ct = (T *)pb_scratch(&t_buf, &t_have, (size_t)(m * n) * sizeof(T));      \
        if (!ct) return 1;                                                                \
        if (cin)                                                                          \
            for (int64_t i = 0; i < m; i++)                                               \
                for (int64_t j = 0; j < n; j++) ct[j * m + i] = cin[i * n + j];           \
        if (pb_gemm_blocked_##S(n, m, k, alpha, b, !tb, a, !ta, cin ? ct : NULL, ct))     \
            return 1;                                                                     \
        for (int64_t i = 0; i < m; i++)                                                   \
            for (int64_t j = 0; j < n; j++) c[i * n + j] = ct[j * m + i];                 \
        return 0;                                                                         \
    }

#if defined(__AVX512F__)
PB_DEFINE_PACKED_GEMM(float32, float, int32_t)
PB_DEFINE_PACKED_GEMM(float64, double, int64_t)
#else
/* Without AVX-512 modules never call the packed kernels (runtime.h: their register tile
 * wants AVX-512's 32 registers, and OpenBLAS measured five times as fast on an AVX2
 * EPYC): these stand in for them, so the library modules link builds at once. */
int pb_gemm_packed_float32(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                           int ta, const float *b, int tb, const float *cin, float *c) {
    (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)ta, (void)b, (void)tb;
    (void)cin, (void)c;
    return 1;
}
int pb_gemm_packed_float64(int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                           int ta, const double *b, int tb, const double *cin, double *c) {
    (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)ta, (void)b, (void)tb;
    (void)cin, (void)c;
    return 1;
}
#endif
