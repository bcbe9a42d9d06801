/* What every generated module includes, and nothing else: the runtime, CBLAS and
 * OpenMP (no Python or NumPy header: the glue library is the Python side).  One header,
 * so that the compiler precompiles it once per machine (build/compiler.py) and a module
 * compiles its own code only. */
#include "runtime.h"
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* OpenBLAS on one thread while a parallel loop runs products one a thread (each too
 * small for BLAS's own threads to share): pb_blas_alone() returns the thread count
 * pb_blas_restore() sets back after the loop. */
static inline int pb_blas_alone(void) {
    const int threads = scipy_openblas_get_num_threads();
    scipy_openblas_set_num_threads(1);
    return threads;
}

static inline void pb_blas_restore(int threads) { scipy_openblas_set_num_threads(threads); }
