/* pullback's runtime library of small products, built once per compiler, flags and
 * element type (with -ffp-contract=fast: products multiply and add in one rounding, as
 * BLAS does) and linked by each module that has products of that type; and the race of
 * its products against BLAS's that places the crossover between them. */

#include "kernels.h"

#include <time.h>

/* Small row-major products C = alpha op(A) op(B) (+ Cin) (m x n, k terms; A is k x m
 * when ta, B is n x k when tb), for shapes where a BLAS call's packing and dispatch cost more than the
 * arithmetic.  Each element sums its k products in T in order of k, as a vector lane of a
 * register tile of 4 rows by one or two vectors of columns (each A element broadcast
 * against a row of B).  A B that is not row-major, and the columns left over past the
 * last whole vector, are first copied a panel of two vectors' columns (zero-padded) and
 * PB_GEMM_DEPTH rows at a time into a row-major buffer; a narrow panel's tile goes to a
 * local buffer before its columns are stored.  Every product here computes C = alpha
 * op(A) op(B) + Cin, or alpha op(A) op(B) when Cin is NULL: Cin is a row-major m x n
 * array, C itself to accumulate, another to fuse an update such as w - lr * g. */
#define PB_GEMM_ROWS 4
#define PB_GEMM_DEPTH 256
#define PB_DEFINE_GEMM(S, T)                                                              \
    static inline __attribute__((always_inline)) void pb_gemm_tile_##S(                   \
            int64_t rows, int nv, int64_t k, const T *a, int64_t ars, int64_t acs,        \
            const T *b, int64_t bs, T alpha, const T *cin, T *c, int64_t n) {             \
        pb_vec_##S t[PB_GEMM_ROWS][2] = {{{0}}};                                          \
        for (int64_t p = 0; p < k; p++) {                                                 \
            const pb_vec_##S *bp = (const pb_vec_##S *)(b + p * bs);                      \
            for (int64_t r = 0; r < rows; r++)                                            \
                for (int v = 0; v < nv; v++) t[r][v] += a[r * ars + p * acs] * bp[v];     \
        }                                                                                 \
        for (int64_t r = 0; r < rows; r++)                                                \
            for (int v = 0; v < nv; v++) {                                                \
                pb_vec_##S *cp = (pb_vec_##S *)(c + r * n) + v;                           \
                *cp = cin ? ((const pb_vec_##S *)(cin + r * n))[v] + alpha * t[r][v]      \
                          : alpha * t[r][v];                                              \
            }                                                                             \
    }                                                                                     \
    void pb_gemm_##S(int64_t m, int64_t n, int64_t k, T alpha, const T *a, int ta,        \
                     const T *b, int tb, const T *cin, T *c) {                            \
        const int64_t ars = ta ? 1 : k, acs = ta ? m : 1, L = PB_LANES_##S;               \
        const int64_t bs = tb ? 1 : n, bjs = tb ? k : 1;                                  \
        int64_t j = 0;                                                                    \
        if (k == 0) { /* no terms: the sum is Cin, or zeros */                            \
            for (int64_t i = 0; i < m * n; i++) c[i] = cin ? cin[i] : 0;                  \
            return;                                                                       \
        }                                                                                 \
        if (!tb)                                                                          \
            for (; j + L <= n; j += (j + 2 * L <= n ? 2 : 1) * L)                         \
                for (int64_t i = 0; i < m; i += PB_GEMM_ROWS)                             \
                    pb_gemm_tile_##S(m - i < PB_GEMM_ROWS ? m - i : PB_GEMM_ROWS,         \
                                     j + 2 * L <= n ? 2 : 1, k, a + i * ars, ars, acs,    \
                                     b + j, n, alpha, cin ? cin + i * n + j : NULL,       \
                                     c + i * n + j, n);                                   \
        T panel[PB_GEMM_DEPTH * 2 * PB_LANES_##S], part[PB_GEMM_ROWS * 2 * PB_LANES_##S]; \
        for (; j < n; j += 2 * L) {                                                       \
            const int64_t w = n - j < 2 * L ? n - j : 2 * L;                              \
            for (int64_t p0 = 0; p0 < k; p0 += PB_GEMM_DEPTH) {                           \
                const int64_t d = k - p0 < PB_GEMM_DEPTH ? k - p0 : PB_GEMM_DEPTH;        \
                const T *src0 = p0 > 0 ? c : cin; /* what the product adds to */          \
                for (int64_t p = 0; p < d; p++) {                                         \
                    T *row = panel + p * 2 * L;                                           \
                    const T *src = b + (p0 + p) * bs + j * bjs;                           \
                    if (w == 2 * L)                                                       \
                        for (int64_t jj = 0; jj < 2 * L; jj++) row[jj] = src[jj * bjs];   \
                    else                                                                  \
                        for (int64_t jj = 0; jj < 2 * L; jj++) row[jj] = jj < w ? src[jj * bjs] : 0; \
                }                                                                         \
                for (int64_t i = 0; i < m; i += PB_GEMM_ROWS) {                           \
                    const int64_t rows = m - i < PB_GEMM_ROWS ? m - i : PB_GEMM_ROWS;     \
                    const T *ai = a + i * ars + p0 * acs;                                 \
                    T *ci = c + i * n + j;                                                \
                    const T *si = src0 ? src0 + i * n + j : NULL;                         \
                    if (w == 2 * L) {                                                     \
                        pb_gemm_tile_##S(rows, 2, d, ai, ars, acs, panel, 2 * L, alpha, si, \
                                         ci, n);                                          \
                        continue;                                                         \
                    }                                                                     \
                    pb_gemm_tile_##S(rows, 2, d, ai, ars, acs, panel, 2 * L, alpha, NULL, \
                                     part, 2 * L);                                        \
                    for (int64_t r = 0; r < rows; r++)                                    \
                        for (int64_t jj = 0; jj < w; jj++)                                \
                            ci[r * n + jj] = si ? si[r * n + jj] + part[r * 2 * L + jj]   \
                                                : part[r * 2 * L + jj];                   \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }
/* The element types built (build/libraries.py builds one library per type, so a module
 * of float64 products compiles a fifth of the code: PB_KERNEL_TYPES defined first). */
#ifndef PB_KERNEL_TYPES
#define PB_KERNEL_TYPES(X) X(float32, float) X(float64, double) X(int32, int32_t) \
    X(int64, int64_t)
#endif
PB_KERNEL_TYPES(PB_DEFINE_GEMM)

/* The race that places the crossover (build/tuning.py, measure_crossover): for each of
 * `count` products (m, n, k, tb: four int64 each; A row-major, B n x k where tb), the
 * fewest nanoseconds the kernel above takes for it, and `blas` (CBLAS's gemm of T, on
 * the threads OpenBLAS has), into best[2 i] and best[2 i + 1].  The products are timed
 * in turns, `rounds` times each (a busy machine's slow spells hit both), each timing
 * enough calls for PB_RACE_WORK multiply-adds after one call to warm up; the rounds
 * PB_RACE_PAUSE_NS apart, so that some fall outside a slow spell of the machine.  Nonzero
 * where its buffers cannot be allocated. */
#define PB_RACE_WORK (1 << 18)
#define PB_RACE_PAUSE_NS 20000000 /* between rounds: the machine's slow spells last long */
#define PB_DEFINE_RACE(S, T)                                                              \
    typedef void (*pb_cblas_gemm_##S)(int, int, int, int, int, int, T, const T *, int,    \
                                      const T *, int, T, T *, int);                       \
    static void pb_race_one_##S(int blas, const int64_t *s, pb_cblas_gemm_##S gemm,       \
                                const T *a, const T *b, T *c) {                           \
        const int m = (int)s[0], n = (int)s[1], k = (int)s[2], tb = (int)s[3];             \
        if (blas) /* row-major, A as it is, B as it is or transposed */                   \
            gemm(101, 111, tb ? 112 : 111, m, n, k, 1, a, k, b, tb ? k : n, 0, c, n);     \
        else                                                                              \
            pb_gemm_##S(m, n, k, 1, a, 0, b, tb, NULL, c);                                \
    }                                                                                     \
    int pb_gemm_race_##S(int64_t count, const int64_t *shapes, int64_t rounds,            \
                         pb_cblas_gemm_##S gemm, double *best) {                          \
        int64_t most = 1;                                                                 \
        for (int64_t i = 0; i < count; i++) {                                             \
            const int64_t *s = shapes + 4 * i;                                            \
            const int64_t sizes[3] = {s[0] * s[2], s[2] * s[1], s[0] * s[1]};             \
            for (int d = 0; d < 3; d++) most = sizes[d] > most ? sizes[d] : most;         \
            best[2 * i] = best[2 * i + 1] = 1e300;                                        \
        }                                                                                 \
        /* A, B and C 16 bytes past a 64-byte boundary, as NumPy's arrays are (a kernel    \
         * reading B's rows as vectors then splits loads across cache lines), in one      \
         * allocation at offsets a kilobyte apart modulo 4 KiB: where malloc puts them,    \
         * loads and stores 4 KiB apart alias, and the kernel's times moved 35% between   \
         * runs. */                                                                        \
        const size_t span = ((size_t)most * sizeof(T) / 4096 + 2) * 4096;                 \
        char *base = NULL;                                                                \
        if (posix_memalign((void **)&base, 4096, 3 * span)) return 1;                     \
        T *a = (T *)(base + 16), *b = (T *)(base + span + 1040);                          \
        T *c = (T *)(base + 2 * span + 2064);                                             \
        const struct timespec pause = {0, PB_RACE_PAUSE_NS};                              \
        for (int64_t i = 0; i < most; i++) a[i] = b[i] = (T)(i % 7) * (T)0.25 - (T)0.75;  \
        for (int64_t r = 0; r < rounds; r++) {                                            \
            if (r > 0) nanosleep(&pause, NULL);                                           \
            for (int64_t i = 0; i < count; i++)                                           \
                for (int q = 0; q < 2; q++) {                                             \
                    const int blas = (int)((q + r + i) % 2); /* each first as often */    \
                    const int64_t *s = shapes + 4 * i, work = s[0] * s[1] * s[2];          \
                    const int64_t calls = work < PB_RACE_WORK ? PB_RACE_WORK / work : 1;  \
                    struct timespec t0, t1;                                               \
                    if (r == 0) pb_race_one_##S(blas, s, gemm, a, b, c);                  \
                    clock_gettime(CLOCK_MONOTONIC, &t0);                                  \
                    for (int64_t j = 0; j < calls; j++)                                   \
                        pb_race_one_##S(blas, s, gemm, a, b, c);                          \
                    clock_gettime(CLOCK_MONOTONIC, &t1);                                  \
                    const double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 +                    \
                                       (t1.tv_nsec - t0.tv_nsec)) / calls;                \
                    if (ns < best[2 * i + blas]) best[2 * i + blas] = ns;                 \
                }                                                                         \
        }                                                                                 \
        free(base);                                                                       \
        return 0;                                                                         \
    }
/* Raced for the float types only: BLAS has no integer products. */
#define PB_RACE_float32(S, T) PB_DEFINE_RACE(S, T)
#define PB_RACE_float64(S, T) PB_DEFINE_RACE(S, T)
#define PB_RACE_int32(S, T)
#define PB_RACE_int64(S, T)
#define PB_RACE(S, T) PB_RACE_##S(S, T)
PB_KERNEL_TYPES(PB_RACE)

