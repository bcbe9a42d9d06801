/* pullback's runtime library of LAPACK factorizations (eigh, svd, qr, cholesky, lu) and
 * of Cholesky's adjoint (in BLAS-3 calls), built once per compiler and flags and linked
 * by each module that calls them.  Each
 * routine takes a batch of `count` row-major matrices, asks LAPACK once for its workspace
 * where it needs one, and calls the routine NumPy's np.linalg calls (?syevd, ?gesdd,
 * ?geqrf + ?orgqr, ?potrf, ?getrf) on a column-major copy of each matrix, as NumPy does,
 * so that results (signs of vectors included) are those NumPy computes with the same
 * LAPACK.  LAPACK comes from scipy-openblas32: its
 * Fortran symbols carry the prefix scipy_ and its integers are 32-bit.  A nonzero
 * `info` raises LinAlgError with NumPy's message; a workspace that cannot be allocated,
 * MemoryError. */

#include "runtime.h"

#include <cblas.h>

/* Columns per block of the blocked reverse of Cholesky: wide enough for OpenBLAS's GEMM
 * to run near its peak, narrow enough that the diagonal blocks' own adjoints (3 b^3
 * flops each in small calls) stay a small part of the work. */
#define PB_CHOLESKY_BLOCK 128

typedef int32_t pb_lapack_int;

#define PB_DECLARE_LAPACK(P, T)                                                           \
    void scipy_##P##syevd_(const char *jobz, const char *uplo, const pb_lapack_int *n,    \
                           T *a, const pb_lapack_int *lda, T *w, T *work,                 \
                           const pb_lapack_int *lwork, pb_lapack_int *iwork,              \
                           const pb_lapack_int *liwork, pb_lapack_int *info, size_t,      \
                           size_t);                                                       \
    void scipy_##P##gesdd_(const char *jobz, const pb_lapack_int *m,                      \
                           const pb_lapack_int *n, T *a, const pb_lapack_int *lda, T *s,  \
                           T *u, const pb_lapack_int *ldu, T *vt,                         \
                           const pb_lapack_int *ldvt, T *work, const pb_lapack_int *lwork,\
                           pb_lapack_int *iwork, pb_lapack_int *info, size_t);            \
    void scipy_##P##geqrf_(const pb_lapack_int *m, const pb_lapack_int *n, T *a,          \
                           const pb_lapack_int *lda, T *tau, T *work,                     \
                           const pb_lapack_int *lwork, pb_lapack_int *info);              \
    void scipy_##P##orgqr_(const pb_lapack_int *m, const pb_lapack_int *n,                \
                           const pb_lapack_int *k, T *a, const pb_lapack_int *lda,        \
                           const T *tau, T *work, const pb_lapack_int *lwork,             \
                           pb_lapack_int *info);                                          \
    void scipy_##P##potrf_(const char *uplo, const pb_lapack_int *n, T *a,                \
                           const pb_lapack_int *lda, pb_lapack_int *info, size_t);        \
    void scipy_##P##getrf_(const pb_lapack_int *m, const pb_lapack_int *n, T *a,          \
                           const pb_lapack_int *lda, pb_lapack_int *ipiv,                 \
                           pb_lapack_int *info);
PB_DECLARE_LAPACK(d, double)
PB_DECLARE_LAPACK(s, float)

/* Blocks of memory the routines free however they end. */
static void *pb_lapack_alloc(pb_ctx *ctx, size_t count, size_t size, int *failed) {
    void *p = malloc((count ? count : 1) * size);
    if (!p && !*failed) {
        *failed = 1;
        pb_fail(ctx, "MemoryError", "cannot allocate LAPACK's workspace");
    }
    return p;
}

/* dst (rows x cols, row-major, row stride ld) from src column-major with leading
 * dimension lds, and back: the copies between NumPy's layout and LAPACK's. */
#define PB_DEFINE_LAPACK(S, P, T)                                                         \
    static void pb_to_columns_##S(const T *src, int64_t rows, int64_t cols, T *dst,       \
                                  int64_t ldd) {                                          \
        for (int64_t i = 0; i < rows; i++)                                                \
            for (int64_t j = 0; j < cols; j++) dst[i + j * ldd] = src[i * cols + j];      \
    }                                                                                     \
    static void pb_from_columns_##S(const T *src, int64_t lds, int64_t rows, int64_t cols,\
                                    T *dst) {                                             \
        for (int64_t i = 0; i < rows; i++)                                                \
            for (int64_t j = 0; j < cols; j++) dst[i * cols + j] = src[i + j * lds];      \
    }                                                                                     \
    static void pb_transpose_##S(T *m, int64_t n) {                                       \
        for (int64_t i = 0; i < n; i++)                                                  \
            for (int64_t j = i + 1; j < n; j++) {                                         \
                T t = m[i * n + j];                                                       \
                m[i * n + j] = m[j * n + i];                                              \
                m[j * n + i] = t;                                                         \
            }                                                                             \
    }                                                                                     \
    static void pb_identity_##S(T *dst, int64_t rows, int64_t cols) {                     \
        for (int64_t i = 0; i < rows; i++)                                                \
            for (int64_t j = 0; j < cols; j++) dst[i * cols + j] = i == j;                \
    }                                                                                     \
    /* The adjoint of one diagonal block d (b x b, row stride ld) of a factor, in place  \
     * in its cotangent db: Phi(S + S^T) with S = d^-T Phi(d^T db) d^-1 (Phi: the lower   \
     * triangle, its diagonal halved), through w (b x b). */                              \
    static void pb_cholesky_block_adjoint_##S(const T *d, T *db, int64_t ld, int64_t b,   \
                                              T *w) {                                     \
        for (int64_t i = 0; i < b; i++)                                                   \
            for (int64_t j = 0; j < b; j++) w[i * b + j] = j <= i ? db[i * ld + j] : 0;   \
        scipy_cblas_##P##trmm(CblasRowMajor, CblasLeft, CblasLower, CblasTrans,           \
                              CblasNonUnit, b, b, 1, d, ld, w, b);                        \
        for (int64_t i = 0; i < b; i++) {                                                 \
            for (int64_t j = i + 1; j < b; j++) w[i * b + j] = 0;                         \
            w[i * b + i] *= (T)0.5;                                                       \
        }                                                                                 \
        scipy_cblas_##P##trsm(CblasRowMajor, CblasLeft, CblasLower, CblasTrans,           \
                              CblasNonUnit, b, b, 1, d, ld, w, b);                        \
        scipy_cblas_##P##trsm(CblasRowMajor, CblasRight, CblasLower, CblasNoTrans,        \
                              CblasNonUnit, b, b, 1, d, ld, w, b);                        \
        for (int64_t i = 0; i < b; i++)                                                   \
            for (int64_t j = 0; j < b; j++)                                               \
                db[i * ld + j] = j < i ? w[i * b + j] + w[j * b + i]                      \
                                       : j == i ? w[i * b + i] : 0;                       \
    }                                                                                     \
                                                                                          \
    /* Eigenvalues (ascending) and, with `vectors`, eigenvectors (columns of v) of the    \
     * symmetric matrices whose lower (else upper) triangle a holds. */                   \
    int pb_lapack_eigh_##S(pb_ctx *ctx, int64_t count, int64_t n, const T *a, T *w, T *v, \
                           int lower, int vectors) {                                      \
        if (n == 0 || count == 0) return 0;                                               \
        const char jobz = vectors ? 'V' : 'N', uplo = lower ? 'L' : 'U';                  \
        const pb_lapack_int ni = (pb_lapack_int)n, query = -1;                            \
        pb_lapack_int info = 0, liwork = 0;                                               \
        T lwork_t = 0;                                                                    \
        scipy_##P##syevd_(&jobz, &uplo, &ni, NULL, &ni, NULL, &lwork_t, &query, &liwork,  \
                          &query, &info, 1, 1);                                           \
        const pb_lapack_int lwork = (pb_lapack_int)lwork_t;                               \
        int failed = 0;                                                                   \
        T *m = pb_lapack_alloc(ctx, n * n, sizeof(T), &failed);                           \
        T *work = pb_lapack_alloc(ctx, lwork, sizeof(T), &failed);                        \
        pb_lapack_int *iwork = pb_lapack_alloc(ctx, liwork, sizeof(pb_lapack_int), &failed); \
        for (int64_t q = 0; q < count && !failed; q++) {                                  \
            pb_to_columns_##S(a + q * n * n, n, n, m, n);                                 \
            scipy_##P##syevd_(&jobz, &uplo, &ni, m, &ni, w + q * n, work, &lwork, iwork,  \
                              &liwork, &info, 1, 1);                                      \
            if (info != 0) {                                                              \
                failed = pb_fail(ctx, "LinAlgError", "Eigenvalues did not converge");     \
                break;                                                                    \
            }                                                                             \
            if (vectors) pb_from_columns_##S(m, n, n, n, v + q * n * n);                  \
        }                                                                                 \
        free(m);                                                                          \
        free(work);                                                                       \
        free(iwork);                                                                      \
        return failed;                                                                    \
    }                                                                                     \
                                                                                          \
    /* Singular values (descending) of the m x n matrices a and, with jobz 'A' (full) or  \
     * 'S' (reduced), their singular vectors: u m x m or m x k, vh n x n or k x n. */     \
    int pb_lapack_svd_##S(pb_ctx *ctx, int64_t count, int64_t m, int64_t n, const T *a,   \
                          T *u, T *s, T *vh, char jobz) {                                 \
        const int64_t k = m < n ? m : n;                                                  \
        const int64_t ucols = jobz == 'A' ? m : k, vrows = jobz == 'A' ? n : k;           \
        if (count == 0) return 0;                                                         \
        if (k == 0) {                                                                     \
            for (int64_t q = 0; q < count && jobz != 'N'; q++) {                          \
                pb_identity_##S(u + q * m * ucols, m, ucols);                             \
                pb_identity_##S(vh + q * vrows * n, vrows, n);                            \
            }                                                                             \
            return 0;                                                                     \
        }                                                                                 \
        const pb_lapack_int mi = (pb_lapack_int)m, ni = (pb_lapack_int)n, query = -1;     \
        const pb_lapack_int ldu = (pb_lapack_int)m, ldvt = (pb_lapack_int)(vrows ? vrows : 1); \
        pb_lapack_int info = 0;                                                           \
        T lwork_t = 0;                                                                    \
        int failed = 0;                                                                   \
        pb_lapack_int *iwork = pb_lapack_alloc(ctx, 8 * k, sizeof(pb_lapack_int), &failed); \
        T *cm = pb_lapack_alloc(ctx, m * n, sizeof(T), &failed);                          \
        T *cu = pb_lapack_alloc(ctx, jobz == 'N' ? 1 : m * ucols, sizeof(T), &failed);    \
        T *cv = pb_lapack_alloc(ctx, jobz == 'N' ? 1 : vrows * n, sizeof(T), &failed);    \
        T *work = NULL;                                                                   \
        pb_lapack_int lwork = 0;                                                          \
        if (!failed) {                                                                    \
            scipy_##P##gesdd_(&jobz, &mi, &ni, cm, &mi, s, cu, &ldu, cv, &ldvt, &lwork_t, \
                              &query, iwork, &info, 1);                                   \
            lwork = (pb_lapack_int)lwork_t;                                               \
            work = pb_lapack_alloc(ctx, lwork, sizeof(T), &failed);                       \
        }                                                                                 \
        for (int64_t q = 0; q < count && !failed; q++) {                                  \
            pb_to_columns_##S(a + q * m * n, m, n, cm, m);                                \
            scipy_##P##gesdd_(&jobz, &mi, &ni, cm, &mi, s + q * k, cu, &ldu, cv, &ldvt,   \
                              work, &lwork, iwork, &info, 1);                             \
            if (info != 0) {                                                              \
                failed = pb_fail(ctx, "LinAlgError", "SVD did not converge");             \
                break;                                                                    \
            }                                                                             \
            if (jobz != 'N') {                                                            \
                pb_from_columns_##S(cu, m, m, ucols, u + q * m * ucols);                  \
                pb_from_columns_##S(cv, vrows, vrows, n, vh + q * vrows * n);             \
            }                                                                             \
        }                                                                                 \
        free(iwork);                                                                      \
        free(cm);                                                                         \
        free(cu);                                                                         \
        free(cv);                                                                         \
        free(work);                                                                       \
        return failed;                                                                    \
    }                                                                                     \
                                                                                          \
    /* q (m x mc) and r (mc x n) of the m x n matrices a, with mc = m when `complete`,    \
     * else min(m, n): Householder QR (?geqrf), then Q formed from its reflectors        \
     * (?orgqr) and R the upper triangle of the first mc rows. */                         \
    int pb_lapack_qr_##S(pb_ctx *ctx, int64_t count, int64_t m, int64_t n, const T *a,    \
                         T *qo, T *r, int complete) {                                     \
        const int64_t k = m < n ? m : n, mc = complete ? m : k;                           \
        if (count == 0) return 0;                                                         \
        const pb_lapack_int mi = (pb_lapack_int)m, ni = (pb_lapack_int)n;                 \
        const pb_lapack_int ki = (pb_lapack_int)k, mci = (pb_lapack_int)mc, query = -1;   \
        const pb_lapack_int lda = (pb_lapack_int)(m ? m : 1);                             \
        pb_lapack_int info = 0, lwork = 1;                                                \
        T lwork_t = 0;                                                                    \
        int failed = 0;                                                                   \
        T *cm = pb_lapack_alloc(ctx, m * n, sizeof(T), &failed);                          \
        T *cq = pb_lapack_alloc(ctx, m * mc, sizeof(T), &failed);                         \
        T *tau = pb_lapack_alloc(ctx, k, sizeof(T), &failed);                             \
        T *work = NULL;                                                                   \
        if (!failed && k > 0) {                                                           \
            scipy_##P##geqrf_(&mi, &ni, cm, &lda, tau, &lwork_t, &query, &info);          \
            lwork = (pb_lapack_int)lwork_t;                                               \
            scipy_##P##orgqr_(&mi, &mci, &ki, cq, &lda, tau, &lwork_t, &query, &info);    \
            if ((pb_lapack_int)lwork_t > lwork) lwork = (pb_lapack_int)lwork_t;           \
        }                                                                                 \
        if (!failed) work = pb_lapack_alloc(ctx, lwork, sizeof(T), &failed);              \
        for (int64_t q = 0; q < count && !failed; q++) {                                  \
            T *rq = r + q * mc * n, *qq = qo + q * m * mc;                                \
            if (k == 0) {                                                                 \
                pb_identity_##S(qq, m, mc);                                               \
                memset(rq, 0, sizeof(T) * mc * n);                                        \
                continue;                                                                 \
            }                                                                             \
            pb_to_columns_##S(a + q * m * n, m, n, cm, m);                                \
            scipy_##P##geqrf_(&mi, &ni, cm, &lda, tau, work, &lwork, &info);              \
            for (int64_t i = 0; i < mc; i++)                                              \
                for (int64_t j = 0; j < n; j++)                                           \
                    rq[i * n + j] = j >= i && i < k ? cm[i + j * m] : 0;                  \
            const int64_t reflectors = n < mc ? n : mc;                                   \
            memcpy(cq, cm, sizeof(T) * m * reflectors);                                   \
            scipy_##P##orgqr_(&mi, &mci, &ki, cq, &lda, tau, work, &lwork, &info);        \
            pb_from_columns_##S(cq, m, m, mc, qq);                                        \
        }                                                                                 \
        free(cm);                                                                         \
        free(cq);                                                                         \
        free(tau);                                                                        \
        free(work);                                                                       \
        return failed;                                                                    \
    }                                                                                  \
                                                                                          \
    /* The lower Cholesky factors l of the matrices whose lower triangles a holds (the    \
     * upper triangle of l zeroed); nonzero when one is not positive definite.  A        \
     * row-major lower triangle is a column-major upper one: ?potrf('U') on a copy. */    \
    int pb_lapack_cholesky_##S(int64_t count, int64_t n, const T *a, T *l) {              \
        const char uplo = 'U';                                                            \
        const pb_lapack_int ni = (pb_lapack_int)n, lda = (pb_lapack_int)(n ? n : 1);      \
        pb_lapack_int info = 0;                                                           \
        if (n == 0) return 0;                                                             \
        for (int64_t q = 0; q < count; q++) {                                             \
            T *lq = l + q * n * n;                                                        \
            memcpy(lq, a + q * n * n, sizeof(T) * n * n);                                 \
            scipy_##P##potrf_(&uplo, &ni, lq, &lda, &info, 1);                            \
            if (info != 0) return 1;                                                      \
            for (int64_t i = 0; i < n; i++)                                               \
                for (int64_t j = i + 1; j < n; j++) lq[i * n + j] = 0;                    \
        }                                                                                 \
        return 0;                                                                         \
    }                                                                                     \
                                                                                          \
    /* The cotangent g of the lower triangles of a = l l^T from the cotangent c of the    \
     * lower Cholesky factors l (only the lower triangles of l and c are read; the upper  \
     * one of g is zeroed): Murray's blocked reverse of a left-looking factorization      \
     * ("Differentiation of the Cholesky decomposition", 2016), in place in g, block     \
     * column by block column from the last.  With R, D, B, C the factor's blocks left   \
     * of, on, below-left of and below the diagonal block, and Rb ... their cotangents:  \
     * Cb = Cb D^-1, Bb -= Cb R, Db -= Cb^T C, Db = the diagonal block's own adjoint,    \
     * Rb -= Cb^T B + (Db + Db^T) R: about 2 n^3 / 3 flops, all in BLAS-3 calls. */       \
    int pb_lapack_cholesky_adjoint_##S(pb_ctx *ctx, int64_t count, int64_t n, const T *l, \
                                       const T *c, T *g) {                                \
        const int64_t nb = PB_CHOLESKY_BLOCK;                                             \
        int failed = 0;                                                                   \
        if (n == 0 || count == 0) return 0;                                               \
        T *w = pb_lapack_alloc(ctx, nb * nb, sizeof(T), &failed);                         \
        for (int64_t q = 0; q < count && !failed; q++) {                                  \
            const T *lq = l + q * n * n;                                                  \
            T *gq = g + q * n * n;                                                        \
            for (int64_t i = 0; i < n; i++)                                               \
                for (int64_t j = 0; j < n; j++)                                           \
                    gq[i * n + j] = j <= i ? c[q * n * n + i * n + j] : 0;                \
            for (int64_t j0 = (n - 1) / nb * nb; j0 >= 0; j0 -= nb) {                     \
                const int64_t b = n - j0 < nb ? n - j0 : nb, k1 = j0 + b, m = n - k1;     \
                const T *R = lq + j0 * n, *D = R + j0, *B = lq + k1 * n, *C = B + j0;     \
                T *Rb = gq + j0 * n, *Db = Rb + j0, *Bb = gq + k1 * n, *Cb = Bb + j0;     \
                if (m > 0) {                                                              \
                    scipy_cblas_##P##trsm(CblasRowMajor, CblasRight, CblasLower,          \
                                          CblasNoTrans, CblasNonUnit, m, b, 1, D, n, Cb, n); \
                    if (j0 > 0)                                                           \
                        scipy_cblas_##P##gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, \
                                              j0, b, -1, Cb, n, R, n, 1, Bb, n);          \
                    scipy_cblas_##P##gemm(CblasRowMajor, CblasTrans, CblasNoTrans, b, b, m, \
                                          -1, Cb, n, C, n, 1, Db, n);                     \
                }                                                                         \
                pb_cholesky_block_adjoint_##S(D, Db, n, b, w);                            \
                if (j0 > 0) {                                                             \
                    if (m > 0)                                                            \
                        scipy_cblas_##P##gemm(CblasRowMajor, CblasTrans, CblasNoTrans, b, \
                                              j0, m, -1, Cb, n, B, n, 1, Rb, n);          \
                    for (int64_t i = 0; i < b; i++)                                       \
                        for (int64_t j = 0; j <= i; j++)                                  \
                            w[i * b + j] = w[j * b + i] = Db[i * n + j] + Db[j * n + i];  \
                    scipy_cblas_##P##gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, j0, \
                                          b, -1, w, b, R, n, 1, Rb, n);                   \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
        free(w);                                                                          \
        return failed;                                                                    \
    }                                                                                     \
                                                                                          \
    /* LU with partial pivoting of the n x n matrices lu, in place (?getrf on each one    \
     * transposed in place to column-major and back): pivots[k] is the row swapped with   \
     * row k (0-based), perm the resulting row order.  A singular matrix is factored      \
     * (a zero pivot leaves its column unscaled); nothing is raised. */                   \
    void pb_lapack_lu_##S(int64_t count, int64_t n, T *lu, int32_t *pivots,               \
                          int32_t *perm) {                                                \
        const pb_lapack_int ni = (pb_lapack_int)n, lda = (pb_lapack_int)(n ? n : 1);      \
        pb_lapack_int info = 0;                                                           \
        for (int64_t q = 0; q < count && n > 0; q++) {                                    \
            T *m = lu + q * n * n;                                                        \
            int32_t *piv = pivots + q * n, *order = perm + q * n;                         \
            pb_transpose_##S(m, n);                                                       \
            scipy_##P##getrf_(&ni, &ni, m, &lda, piv, &info);                             \
            pb_transpose_##S(m, n);                                                       \
            for (int64_t i = 0; i < n; i++) order[i] = (int32_t)i;                        \
            for (int64_t k = 0; k < n; k++) {                                             \
                int32_t p = --piv[k], t = order[k];                                       \
                order[k] = order[p];                                                      \
                order[p] = t;                                                             \
            }                                                                             \
        }                                                                                 \
    }
PB_DEFINE_LAPACK(float64, d, double)
PB_DEFINE_LAPACK(float32, s, float)
