/* What every generated module includes, and nothing else: the runtime, CBLAS and
 * OpenMP (no Python or NumPy header: the glue library is the Python side).  One header,
 * so that the compiler precompiles it once per machine (build/compiler.py) and a module
 * compiles its own code only. */
#include "runtime.h"
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif
