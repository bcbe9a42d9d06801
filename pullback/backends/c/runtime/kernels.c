/* pullback's runtime library of small products, built once per compiler, flags and
 * element type (with -ffp-contract=fast: products multiply and add in one rounding, as
 * BLAS does) and linked by each module that has products of that type. */

#include "kernels.h"

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

