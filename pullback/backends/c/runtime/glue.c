/* pullback's glue library: the Python side of every compiled module's calls (reading
 * NumPy arguments, making results, raising faults, the memory of big results), built
 * once per compiler, flags, Python and NumPy, and linked by each module, which so
 * compiles only its own code and the description of its entry (pb_entry, runtime.h):
 * no Python or NumPy header is parsed per module. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION /* PyDataMem_SetHandler */
#include <numpy/arrayobject.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <time.h> /* nanosleep, clock_gettime */
#include <sys/mman.h> /* madvise */
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

#include "runtime.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

_Static_assert(sizeof(npy_intp) == sizeof(int64_t), "NumPy's sizes are 64-bit");

/* Memory of big result arrays, kept when NumPy frees it and handed to the next call's
   results of that size: writing a fresh mapping faults its pages in, which the kernel
   zeroes first (about half the time of a 40 MB element-wise gradient).  At most
   PB_KEPT_BYTES stay kept; a result array carries this handler, so its memory comes back
   here whichever module or thread frees it. */
#define PB_BIG ((size_t)1 << 20)
#define PB_KEPT_SLOTS 16
#define PB_KEPT_BYTES ((size_t)256 << 20)
static struct { void *p; size_t n; } pb_kept[PB_KEPT_SLOTS];
static size_t pb_kept_bytes;
static char pb_kept_lock;

/* Fresh memory of at least PB_HUGE bytes is asked to be backed by huge pages, as NumPy
   asks for its arrays of 4 MiB and more: a fault then maps 2 MiB at once instead of 4
   KiB (a program keeping its results alive writes fresh pages on every call), and the
   TLB holds 512 times as much of it.  Only whole pages inside the block are advised. */
#define PB_HUGE ((size_t)4 << 20)

static void pb_advise_huge(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    if (p && n >= PB_HUGE) {
        const uintptr_t page = 4096, lo = ((uintptr_t)p + page - 1) & ~(page - 1);
        madvise((void *)lo, (uintptr_t)p + n - lo, MADV_HUGEPAGE);
    }
#else
    (void)p;
    (void)n;
#endif
}

static void pb_lock(void) { while (__atomic_test_and_set(&pb_kept_lock, __ATOMIC_ACQUIRE)) ; }
static void pb_unlock(void) { __atomic_clear(&pb_kept_lock, __ATOMIC_RELEASE); }

static void *pb_kept_malloc(void *ctx, size_t n) {
    (void)ctx;
    if (n >= PB_BIG) {
        pb_lock();
        for (int k = 0; k < PB_KEPT_SLOTS; k++) {
            if (pb_kept[k].p && pb_kept[k].n == n) {
                void *p = pb_kept[k].p;
                pb_kept[k].p = NULL;
                pb_kept_bytes -= n;
                pb_unlock();
                return p;
            }
        }
        pb_unlock();
    }
    void *p = malloc(n ? n : 1);
    pb_advise_huge(p, n);
    return p;
}

static void *pb_kept_calloc(void *ctx, size_t m, size_t n) { (void)ctx; return calloc(m, n); }
static void *pb_kept_realloc(void *ctx, void *p, size_t n) { (void)ctx; return realloc(p, n); }

static void pb_kept_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    if (p && n >= PB_BIG) {
        pb_lock();
        for (int k = 0; k < PB_KEPT_SLOTS && pb_kept_bytes + n <= PB_KEPT_BYTES; k++) {
            if (!pb_kept[k].p) {
                pb_kept[k].p = p;
                pb_kept[k].n = n;
                pb_kept_bytes += n;
                pb_unlock();
                return;
            }
        }
        pb_unlock();
    }
    free(p);
}

static PyDataMem_Handler pb_kept_handler = {
    "pullback_kept", 1,
    {NULL, pb_kept_malloc, pb_kept_calloc, pb_kept_realloc, pb_kept_free}};
static PyObject *pb_kept_capsule = NULL;

/* -- threads and fork --------------------------------------------------------------- */

/* PULLBACK_NUM_THREADS as limits.py checked it (0: OpenMP's own default), set on the
 * calling thread before each call: OpenMP keeps the count per thread, so setting it once
 * would cover only the thread that did. */
static int pb_threads;
/* Whether this thread has run a call (its OpenMP team may have started threads), and
 * whether it has forked since: libgomp's threads do not survive fork, and a forked
 * child's next parallel loop on that thread would wait for them forever, so there it
 * runs its loops alone.  Threads the child starts make teams of their own. */
static _Thread_local int pb_ran_here, pb_forked_here;

static void pb_threads_for_call(void) {
#ifdef _OPENMP
    const int want = pb_forked_here ? 1 : __atomic_load_n(&pb_threads, __ATOMIC_RELAXED);
    if (want > 0 && omp_get_max_threads() != want) omp_set_num_threads(want);
#endif
    pb_ran_here = 1;
}

/* Around fork: the lock of kept result memory is held across it, so the child never
 * inherits it held by a thread that does not exist there. */
static void pb_before_fork(void) { pb_lock(); }
static void pb_after_fork_in_parent(void) { pb_unlock(); }
static void pb_after_fork_in_child(void) {
    pb_unlock();
    pb_forked_here |= pb_ran_here;
}

/* -- OpenBLAS's threads -------------------------------------------------------------- */

/* OpenBLAS runs a threaded routine as `count` jobs that wait for each other's packed
 * panels, so all must run at once.  Its own threads (pthreads) would be a second pool on
 * the cores OpenMP's threads share, each spinning while the other works (idle OpenMP
 * threads spin unless OMP_WAIT_POLICY=PASSIVE reached the OpenMP runtime before it
 * started, as it does not where torch loaded it first: a CNN training step on two
 * threads took 4 to 7 times its time alone).  pb_blas_jobs, OpenBLAS's thread callback
 * (limits.py sets it), runs the jobs on the calling thread's OpenMP team instead: one
 * pool.  Where that team cannot be `count` threads (inside a parallel region, in a forked
 * child's thread, a dynamic or limited team), each job beyond the first gets a thread of
 * its own.  OpenBLAS gives every call the same per-job buffers: one call at a time.
 * Only where idle OpenMP threads spin: where they sleep at once, waking one per product
 * cost more than OpenBLAS's own threads, which spin on their own (an LSTM step of many
 * small products on two busy cores: 2.4 s on the team, 0.79 s on OpenBLAS's threads;
 * with torch loaded first, 0.46 s on the team, 0.98 s on OpenBLAS's). */
typedef void (*pb_blas_job)(int thread, void *job, int data);
typedef struct {
    pb_blas_job run;
    void *job;
    int index, data;
} pb_blas_task;

static pthread_mutex_t pb_blas_lock = PTHREAD_MUTEX_INITIALIZER;

static void *pb_blas_task_main(void *p) {
    const pb_blas_task *t = p;
    t->run(t->index, t->job, t->data);
    return NULL;
}

static void pb_blas_jobs(int sync, pb_blas_job run, int count, size_t size, void *jobs,
                         int data) {
    (void)sync; /* OpenBLAS waits for the jobs: they are done when this returns */
    pthread_mutex_lock(&pb_blas_lock);
#ifdef _OPENMP
    if (!pb_forked_here && !omp_in_parallel() && !omp_get_dynamic() &&
        count <= omp_get_thread_limit()) {
#pragma omp parallel num_threads(count)
        run(omp_get_thread_num(), (char *)jobs + (size_t)omp_get_thread_num() * size, data);
        pthread_mutex_unlock(&pb_blas_lock);
        return;
    }
#endif
    pb_blas_task tasks[count];
    pthread_t threads[count];
    int started[count];
    for (int i = 0; i < count; i++) {
        tasks[i] = (pb_blas_task){run, (char *)jobs + (size_t)i * size, i, data};
        /* a job without a thread runs here after the first: it may wait forever for a
           job after it, but only where no thread can be made at all */
        started[i] = i > 0 && pthread_create(&threads[i], NULL, pb_blas_task_main,
                                             &tasks[i]) == 0;
    }
    for (int i = 0; i < count; i++)
        if (!started[i]) pb_blas_task_main(&tasks[i]);
    for (int i = 1; i < count; i++)
        if (started[i]) pthread_join(threads[i], NULL);
    pthread_mutex_unlock(&pb_blas_lock);
}

/* NumPy's C API for this library, the handler's capsule and the fork handlers (once
 * per process). */
static int pb_glue_init(void) {
    static int forks_handled;
    if (PyArray_API == NULL && _import_array() < 0) return -1;
    if (!forks_handled && pthread_atfork(pb_before_fork, pb_after_fork_in_parent,
                                         pb_after_fork_in_child) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pullback: pthread_atfork failed");
        return -1;
    }
    forks_handled = 1;
    if (pb_kept_capsule == NULL)
        pb_kept_capsule = PyCapsule_New(&pb_kept_handler, "mem_handler", NULL);
    return pb_kept_capsule == NULL ? -1 : 0;
}

/* An argument's data when it is an aligned, native-order C-contiguous array of exactly
   this type and shape, else NULL.  Not a subclass (np.matrix, masked arrays): their
   operations differ, and the general path refuses them. */
static void *pb_array_in(PyObject *o, int type, int nd, const int64_t *dims) {
    if (!PyArray_CheckExact(o)) return NULL;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != type || PyArray_NDIM(a) != nd || !PyArray_ISCARRAY_RO(a) ||
        !PyArray_ISNOTSWAPPED(a)) return NULL;
    const npy_intp *have = PyArray_DIMS(a);
    for (int d = 0; d < nd; d++) if (have[d] != dims[d]) return NULL;
    return PyArray_DATA(a);
}

/* A 0-d argument's value into v when it is a NumPy scalar of exactly this type. */
static int pb_scalar_in(PyObject *o, int type, void *v) {
    PyArray_Descr *descr = PyArray_DescrFromType(type);
    int ok = (PyObject *)Py_TYPE(o) == (PyObject *)descr->typeobj;
    Py_DECREF(descr);
    if (ok) PyArray_ScalarAsCtype(o, v);
    return ok;
}

/* A 0-d result as the form asks: a 0-d array, a NumPy scalar or a Python scalar. */
static PyObject *pb_scalar_out(const void *v, int type, unsigned char code) {
    if (code == 2) {
        switch (type) {
        case NPY_BOOL: return PyBool_FromLong(*(const uint8_t *)v);
        case NPY_INT32: return PyLong_FromLong(*(const int32_t *)v);
        case NPY_INT64: return PyLong_FromLongLong(*(const int64_t *)v);
        case NPY_FLOAT32: return PyFloat_FromDouble(*(const float *)v);
        default: return PyFloat_FromDouble(*(const double *)v);
        }
    }
    PyArray_Descr *descr = PyArray_DescrFromType(type);
    if (code == 1) {
        PyObject *s = PyArray_Scalar((void *)v, descr, NULL);
        Py_DECREF(descr);
        return s;
    }
    PyObject *a = PyArray_NewFromDescr(&PyArray_Type, descr, 0, NULL, NULL, NULL, 0, NULL);
    if (a) memcpy(PyArray_DATA((PyArrayObject *)a), v, PyArray_ITEMSIZE((PyArrayObject *)a));
    return a;
}

/* The results as the form asks: a list, the only one, or a tuple (steals them). */
static PyObject *pb_results(PyObject **r, int n, unsigned char shape) {
    if (shape == 1) return r[0];
    PyObject *out = shape == 2 ? PyTuple_New(n) : PyList_New(n);
    for (int k = 0; k < n; k++) {
        if (shape == 2) PyTuple_SET_ITEM(out, k, r[k]);
        else PyList_SET_ITEM(out, k, r[k]);
    }
    return out;
}


/* -- the memory of calls (runtime.h) ---------------------------------------------- */

/* The bin of `bytes` or where it would go. */
static size_t pb_bin_at(const pb_pool *pool, size_t bytes) {
    size_t lo = 0, hi = pool->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pool->bins[mid].bytes < bytes) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* Keep `b` for reuse; 0 when the pool is full or out of memory (the caller frees it). */
static int pb_pool_put(pb_pool *pool, pb_block *b) {
    int tape = b->bytes == PB_TAPE_BLOCK;
    if (!pool || (tape ? pool->tape_held + b->bytes > PB_TAPE_KEEP
                       : pool->held - pool->tape_held + b->bytes > PB_POOL_KEEP))
        return 0;
    size_t k = pb_bin_at(pool, b->bytes);
    if (k == pool->n || pool->bins[k].bytes != b->bytes) {
        if (pool->n == pool->cap) {
            size_t cap = pool->cap ? 2 * pool->cap : 16;
            pb_bin *bins = (pb_bin *)realloc(pool->bins, cap * sizeof *bins);
            if (!bins) return 0;
            pool->bins = bins;
            pool->cap = cap;
        }
        memmove(pool->bins + k + 1, pool->bins + k, (pool->n - k) * sizeof *pool->bins);
        pool->bins[k].bytes = b->bytes;
        pool->bins[k].head = NULL;
        pool->n++;
    }
    b->next = pool->bins[k].head;
    pool->bins[k].head = b;
    pool->held += b->bytes;
    if (tape) pool->tape_held += b->bytes;
    PB_POISON(b);
    return 1;
}

static pb_block *pb_pool_take(pb_pool *pool, size_t bytes) {
    if (!pool) return NULL;
    size_t k = pb_bin_at(pool, bytes);
    if (k == pool->n || pool->bins[k].bytes != bytes || !pool->bins[k].head) return NULL;
    pb_block *b = pool->bins[k].head;
    PB_UNPOISON(b);
    pool->bins[k].head = b->next;
    pool->held -= bytes;
    if (bytes == PB_TAPE_BLOCK) pool->tape_held -= bytes;
    return b;
}

static void pb_pool_destroy(pb_pool *pool) {
    for (size_t k = 0; k < pool->n; k++) {
        for (pb_block *b = pool->bins[k].head, *next; b; b = next) {
            PB_UNPOISON(b);
            next = b->next;
            free(b);
        }
    }
    free(pool->bins);
    free(pool);
}

/* Free the pool's buffers, largest first, until it holds at most `keep` bytes; the bytes
 * freed. */
static size_t pb_pool_trim(pb_pool *pool, size_t keep) {
    size_t freed = 0;
    for (size_t k = pool->n; k-- > 0 && pool->held > keep;) {
        pb_block *b;
        while (pool->held > keep && (b = pb_pool_take(pool, pool->bins[k].bytes))) {
            freed += b->bytes;
            free(b);
        }
    }
    return freed;
}

/* The bytes the pools of modules hold between calls, all together, and the most they
 * may hold (PULLBACK_KEEP_MB, limits.py; this default is its own): the end of a call
 * frees what its pool holds beyond the room left. */
static size_t pb_idle_bytes, pb_idle_limit = (size_t)256 << 20;
/* Bytes freed at once that are worth handing back to the system: glibc keeps freed
 * memory in its heap (a tape's chunks, after the first, come from there). */
#define PB_GIVE_BACK ((size_t)8 << 20)

static void pb_give_back(size_t freed) {
#ifdef __GLIBC__
    if (freed >= PB_GIVE_BACK) malloc_trim(0);
#else
    (void)freed;
#endif
}

/* A call's context, with its module's pool (the one its last call left in *kept) if no
 * other call holds it, else a new one. */
static void pb_ctx_init(pb_ctx *ctx, pb_pool **kept) {
    ctx->live.prev = ctx->live.next = &ctx->live;
    ctx->pool = __atomic_exchange_n(kept, NULL, __ATOMIC_ACQ_REL);
    if (ctx->pool) __atomic_sub_fetch(&pb_idle_bytes, ctx->pool->held, __ATOMIC_RELAXED);
    else ctx->pool = (pb_pool *)calloc(1, sizeof(pb_pool));
    ctx->exc = NULL;
    ctx->msg[0] = 0;
    ctx->check_id = -1;
    ctx->n_values = 0;
    ctx->stack_floor = (char *)UINTPTR_MAX; /* the first recursive entry looks it up */
    ctx->ticks = PB_POLL_TICKS;
    ctx->watching = 0;
}

void *pb_alloc(pb_ctx *ctx, size_t bytes) {
    pb_block *b = pb_pool_take(ctx->pool, bytes);
    if (!b) {
        if (posix_memalign((void **)&b, 64, sizeof(pb_block) + (bytes ? bytes : 1)) != 0)
            return NULL;
        pb_advise_huge(b, sizeof(pb_block) + bytes);
        b->bytes = bytes;
    }
    b->next = ctx->live.next;
    b->prev = &ctx->live;
    ctx->live.next->prev = b;
    ctx->live.next = b;
    return (void *)(b + 1);
}

/* Back to the pool (or to the system when the pool is full). */
void pb_free(pb_ctx *ctx, void *p) {
    if (!p) return;
    pb_block *b = (pb_block *)p - 1;
    b->prev->next = b->next;
    b->next->prev = b->prev;
    if (!pb_pool_put(ctx->pool, b)) free(b);
}

/* The end of a call: every live buffer goes to the pool, which the module keeps for its
 * next call (unless another call returned its pool first) as far as the idle pools'
 * limit leaves room; the rest goes back to the system. */
static void pb_free_all(pb_ctx *ctx, pb_pool **kept) {
    while (ctx->live.next != &ctx->live) pb_free(ctx, (void *)(ctx->live.next + 1));
    pb_pool *pool = ctx->pool, *none = NULL;
    ctx->pool = NULL;
    if (!pool) return;
    const size_t idle = __atomic_load_n(&pb_idle_bytes, __ATOMIC_RELAXED);
    const size_t limit = __atomic_load_n(&pb_idle_limit, __ATOMIC_RELAXED);
    size_t freed = pb_pool_trim(pool, idle < limit ? limit - idle : 0);
    __atomic_add_fetch(&pb_idle_bytes, pool->held, __ATOMIC_RELAXED);
    if (!__atomic_compare_exchange_n(kept, &none, pool, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        __atomic_sub_fetch(&pb_idle_bytes, pool->held, __ATOMIC_RELAXED);
        freed += pool->held;
        pb_pool_destroy(pool);
    }
    pb_give_back(freed);
}

/* The end of a compiled function: its module's pool goes back to the system. */
static void pb_release_pool(pb_pool **kept) {
    pb_pool *pool = __atomic_exchange_n(kept, NULL, __ATOMIC_ACQ_REL);
    if (!pool) return;
    const size_t held = pool->held;
    __atomic_sub_fetch(&pb_idle_bytes, held, __ATOMIC_RELAXED);
    pb_pool_destroy(pool);
    pb_give_back(held);
}

pb_tape *pb_tape_new(pb_ctx *ctx) {
    pb_tape *t = (pb_tape *)pb_alloc(ctx, sizeof(pb_tape));
    if (!t) return NULL;
    t->data = NULL;
    t->size = t->cap = 0;
    t->chunk = t->spare = NULL;
    return t;
}

/* A new chunk (the spare one if it is large enough). */
int pb_tape_grow(pb_ctx *ctx, pb_tape *t, size_t bytes) {
    pb_chunk *c = t->spare;
    if (c && c->cap >= bytes) {
        t->spare = NULL;
    } else {
        size_t cap = t->chunk ? 2 * t->chunk->cap : 4096 - sizeof(pb_chunk);
        if (cap > PB_TAPE_CHUNK) cap = PB_TAPE_CHUNK;
        if (cap < bytes) cap = bytes;
        c = (pb_chunk *)pb_alloc(ctx, sizeof(pb_chunk) + cap);
        if (!c) return pb_fail(ctx, "MemoryError", "out of memory growing the AD tape");
        c->cap = cap;
    }
    c->prev = t->chunk;
    c->prev_size = t->size;
    t->chunk = c;
    t->data = (char *)(c + 1);
    t->size = 0;
    t->cap = c->cap;
    return 0;
}

/* Back to the chunk before (the current one becomes the spare), or the error of a pop
 * from an empty stack. */
int pb_tape_shrink(pb_ctx *ctx, pb_tape *t, size_t bytes) {
    pb_chunk *c = t->chunk;
    if (t->size != 0 || !c || !c->prev || c->prev_size < bytes)
        return pb_fail(ctx, "IndexError", "pop from an empty stack");
    if (t->spare) pb_free(ctx, t->spare);
    t->spare = c;
    t->chunk = c->prev;
    t->data = (char *)(t->chunk + 1);
    t->size = c->prev_size;
    t->cap = t->chunk->cap;
    return 0;
}

/* -- long runs (runtime.h): deep recursion and Ctrl-C ------------------------------ */

/* The stack a recursion leaves unused: room for the deepest function's frame and what it
 * calls (libm, the allocator, a print's Python code), at most a quarter of a stack. */
#define PB_STACK_MARGIN ((size_t)256 << 10)

/* The lowest frame address at which this thread may still enter a recursive function. */
static char *pb_stack_floor_of_thread(void) {
    static _Thread_local char *floor;
    if (floor) return floor;
    pthread_attr_t attr;
    void *low;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        if (pthread_attr_getstack(&attr, &low, &size) == 0)
            floor = (char *)low + (size / 4 < PB_STACK_MARGIN ? size / 4 : PB_STACK_MARGIN);
        pthread_attr_destroy(&attr);
    }
    if (!floor) /* unknown: allow 1 MiB below here, less than any thread stack we make */
        floor = (char *)__builtin_frame_address(0) - ((size_t)1 << 20);
    return floor;
}

int pb_stack_exhausted(pb_ctx *ctx) {
    ctx->stack_floor = pb_stack_floor_of_thread();
    if ((char *)__builtin_frame_address(0) >= ctx->stack_floor) return 0;
    return pb_fail(ctx, "RecursionError",
                   "maximum recursion depth exceeded in compiled code (the thread's stack "
                   "is nearly full)");
}

/* SIGINT while calls run: from a call's first poll to its end our handler is installed
 * (once for all the calls watching, counted in pb_watchers); it notes the signal and
 * hands it on to the handler it replaced (Python's, which trips Python's own flag), so
 * that Python sees the signal whether or not a poll does. */
static volatile sig_atomic_t pb_sigint;
static struct sigaction pb_sigint_before;
static pthread_mutex_t pb_watch_lock = PTHREAD_MUTEX_INITIALIZER;
static int pb_watchers, pb_watch_installed;

static void pb_on_sigint(int sig, siginfo_t *info, void *uc) {
    pb_sigint = 1;
    if (pb_sigint_before.sa_flags & SA_SIGINFO) pb_sigint_before.sa_sigaction(sig, info, uc);
    else pb_sigint_before.sa_handler(sig);
}

/* Whether `a` runs a function of Python's (not SIG_DFL, which kills the process, nor
 * SIG_IGN, nor ours). */
static int pb_runs_handler(const struct sigaction *a) {
    if (a->sa_flags & SA_SIGINFO) return a->sa_sigaction != pb_on_sigint;
    return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

static void pb_watch(void) {
    pthread_mutex_lock(&pb_watch_lock);
    struct sigaction now;
    if (pb_watchers++ == 0 && sigaction(SIGINT, NULL, &now) == 0 && pb_runs_handler(&now)) {
        struct sigaction ours = now;
        pb_sigint_before = now;
        ours.sa_sigaction = pb_on_sigint;
        ours.sa_flags |= SA_SIGINFO;
        pb_watch_installed = sigaction(SIGINT, &ours, NULL) == 0;
    }
    pthread_mutex_unlock(&pb_watch_lock);
}

/* The last watcher puts the handler it replaced back (unless someone replaced ours). */
static void pb_unwatch(void) {
    pthread_mutex_lock(&pb_watch_lock);
    struct sigaction now;
    if (--pb_watchers == 0 && pb_watch_installed) {
        if (sigaction(SIGINT, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) &&
            now.sa_sigaction == pb_on_sigint)
            sigaction(SIGINT, &pb_sigint_before, NULL);
        pb_watch_installed = 0;
    }
    pthread_mutex_unlock(&pb_watch_lock);
}

/* Python runs signal handlers on its main thread only; a call on another thread leaves
 * the signal to it. */
static int pb_on_main_thread(void) {
#ifdef __linux__
    return syscall(SYS_gettid) == getpid();
#else
    return 1; /* PyErr_CheckSignals does nothing elsewhere */
#endif
}

int pb_poll(pb_ctx *ctx) {
    if (!ctx->watching) {
        ctx->watching = 1;
        pb_watch();
        return 0;
    }
    if (!pb_sigint || !pb_on_main_thread()) return 0;
    pb_sigint = 0;
    PyGILState_STATE gil = PyGILState_Ensure();
    int raised = PyErr_CheckSignals() < 0; /* the exception stays set for the caller */
    PyGILState_Release(gil);
    return raised;
}

/* -- the modules ---------------------------------------------------------------------- */

/* NumPy's type numbers of PB_BOOL ... PB_FLOAT64 (which differ between platforms). */
static const int pb_npy[] = {NPY_BOOL, NPY_INT32, NPY_INT64, NPY_FLOAT32, NPY_FLOAT64};

/* How an argument comes in the call's form (pullback/backends/c/call/convention.py). */
enum { PB_FORM_ARRAY, PB_FORM_SCALAR, PB_FORM_FLOAT };

typedef union { uint8_t b; int32_t i32; int64_t i64; float f32; double f64; } pb_value;

/* A module's state: its entry and the Python hooks that print and build exceptions. */
typedef struct {
    const pb_entry *entry;
    PyObject *printer, *faulter;
} pb_state;

/* debug_print: the operands' bytes to the module's printer, holding the GIL. */
static int pb_print(void *owner, int k, int n, const void **data, const size_t *bytes) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *values = PyTuple_New(n);
    for (int j = 0; j < n; j++)
        PyTuple_SET_ITEM(values, j, PyBytes_FromStringAndSize(data[j], bytes[j]));
    PyObject *r = PyObject_CallFunction(((pb_state *)owner)->printer, "iN", k, values);
    int failed = r == NULL;
    if (failed) PyErr_Clear();
    Py_XDECREF(r);
    PyGILState_Release(gil);
    return failed;
}

static PyObject *pb_set_hooks(PyObject *self, PyObject *args) {
    pb_state *st = (pb_state *)PyModule_GetState(self);
    PyObject *printer, *faulter;
    if (!PyArg_ParseTuple(args, "OO", &printer, &faulter)) return NULL;
    Py_INCREF(printer);
    Py_XSETREF(st->printer, printer);
    Py_INCREF(faulter);
    Py_XSETREF(st->faulter, faulter);
    Py_RETURN_NONE;
}

/* set_limits(threads, keep): PULLBACK_NUM_THREADS (0: OpenMP's default) and the bytes
 * the pools of all modules may keep between calls (PULLBACK_KEEP_MB), for every module
 * (this library is one per process). */
static PyObject *pb_set_limits(PyObject *self, PyObject *args) {
    (void)self;
    int threads;
    Py_ssize_t keep;
    if (!PyArg_ParseTuple(args, "in", &threads, &keep)) return NULL;
    if (threads < 0 || keep < 0) {
        PyErr_SetString(PyExc_ValueError, "set_limits: negative threads or bytes");
        return NULL;
    }
    __atomic_store_n(&pb_threads, threads, __ATOMIC_RELAXED);
    __atomic_store_n(&pb_idle_limit, (size_t)keep, __ATOMIC_RELAXED);
    Py_RETURN_NONE;
}

/* release(): the memory the module's last call kept goes back to the system. */
static PyObject *pb_release(PyObject *self, PyObject *unused) {
    (void)unused;
    pb_release_pool(((const pb_state *)PyModule_GetState(self))->entry->pool);
    Py_RETURN_NONE;
}

/* Whether idle OpenMP threads spin: the wait policy the runtime read when it started,
 * which may be before pullback chose one (torch loaded first).  A team thread's CPU time
 * over the 2 ms after a parallel region: a spinning thread takes some of it (all, unless
 * other processes keep it off its core: five tries), a sleeping one none.  Measured once
 * per process (not in a forked child's broken team). */
static int pb_openmp_spins(void) {
    static int spins = -1;
#ifdef _OPENMP
    for (int try = 0; spins < 0 && !pb_forked_here && try < 5; try++) {
        clockid_t clock;
        int found = 0;
#pragma omp parallel num_threads(2)
        if (omp_get_thread_num() == 1)
            found = pthread_getcpuclockid(pthread_self(), &clock) == 0;
        struct timespec before, after, pause = {0, 2000000};
        if (found && clock_gettime(clock, &before) == 0) {
            nanosleep(&pause, NULL);
            found = clock_gettime(clock, &after) == 0;
        }
        if (found && (after.tv_sec - before.tv_sec) * 1000000000L +
                             (after.tv_nsec - before.tv_nsec) > 100000)
            spins = 1;
    }
    if (spins < 0 && !pb_forked_here) spins = 0;
#endif
    return spins > 0;
}

/* blas_jobs(): (the address of pb_blas_jobs, for openblas_set_threads_callback_function;
 * whether idle OpenMP threads spin, the case it is for). */
static PyObject *pb_blas_jobs_address(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return Py_BuildValue("(NO)", PyLong_FromVoidPtr((void *)pb_blas_jobs),
                         pb_openmp_spins() ? Py_True : Py_False);
}

/* Raise the fault the context records, as the exception the module's hook builds. */
static void pb_raise(const pb_state *st, const pb_ctx *ctx) {
    PyObject *fv = PyTuple_New(ctx->n_values), *iv = PyTuple_New(ctx->n_values);
    for (int j = 0; j < ctx->n_values; j++) {
        PyTuple_SET_ITEM(fv, j, PyFloat_FromDouble(ctx->fvalues[j]));
        PyTuple_SET_ITEM(iv, j, PyLong_FromLongLong(ctx->ivalues[j]));
    }
    PyObject *e = PyObject_CallFunction(st->faulter, "ssiNN", ctx->exc ? ctx->exc : "",
                                        ctx->msg, ctx->check_id, fv, iv);
    if (e != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
    }
}

/* Whether argument j (NumPy array o, read at in[j]) can be written in place: writable,
 * and sharing no memory with any other argument (then a write to it would change what
 * the code reads as another). */
static int pb_can_hand_over(PyObject *const *obj, int j, void *const *in,
                            const pb_entry *e) {
    if (!PyArray_ISWRITEABLE((PyArrayObject *)obj[j])) return 0;
    const char *lo = (const char *)in[j];
    const char *hi = lo + PyArray_NBYTES((PyArrayObject *)obj[j]);
    for (int k = 0; k < e->n_in; k++) {
        if (k == j || e->params[k].nd == 0) continue;
        const char *a = (const char *)in[k];
        const npy_intp n = PyArray_NBYTES((PyArrayObject *)obj[k]);
        if (n > 0 && a < hi && lo < a + n) return 0;
    }
    return 1;
}

/* call(args, form), on the n arguments args: those at the places form gives, read in place; the
 * results allocated here and written by the module's code, except those that take an
 * argument over (pb_entry.donor): the argument itself comes back, updated in place, or,
 * where it cannot be written (read-only, or overlapping another argument), a copy of
 * it; NotImplemented when an argument is not of the compiled type and shape (the caller
 * converts and retries).  Inlined in its two callers (the glue builds at -O1, which
 * would call it: 20-30 ns more a call). */
static inline __attribute__((always_inline)) PyObject *pb_call_on(
        PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *form_bytes) {
    const pb_state *st = (const pb_state *)PyModule_GetState(self);
    const pb_entry *e = st->entry;
    const int n_in = e->n_in, n_out = e->n_out;
    if (!PyBytes_Check(form_bytes) || PyBytes_GET_SIZE(form_bytes) != 1 + 3 * n_in + n_out) {
        PyErr_SetString(PyExc_TypeError, "call(args: tuple, form: bytes)");
        return NULL;
    }
    const unsigned char *form = (const unsigned char *)PyBytes_AS_STRING(form_bytes);
    if (n != n_in) Py_RETURN_NOTIMPLEMENTED;
    void *in[n_in + 1], *out[n_out + 1];
    pb_value v[n_in + n_out + 1];
    PyObject *r[n_out + 1], *obj[n_in + 1];
    for (int k = 0; k < n_in; k++) {
        const pb_param *p = &e->params[k];
        Py_ssize_t at = form[2 + 3 * k] | form[3 + 3 * k] << 8;
        if (at >= n_in) {
            PyErr_SetString(PyExc_ValueError, "call: a place beyond the arguments");
            return NULL;
        }
        PyObject *o = args[at];
        const int type = pb_npy[p->type];
        void *a = pb_array_in(o, type, p->nd, p->dims);
        if (p->nd == 0) {
            const unsigned char how = form[1 + 3 * k];
            if (how == PB_FORM_SCALAR && pb_scalar_in(o, type, &v[k])) a = &v[k];
            if (how == PB_FORM_FLOAT && p->type == PB_FLOAT64 && PyFloat_CheckExact(o)) {
                v[k].f64 = PyFloat_AS_DOUBLE(o);
                a = &v[k];
            }
        }
        if (!a) Py_RETURN_NOTIMPLEMENTED;
        in[k] = a;
        obj[k] = o;
    }
    PyObject *handler = e->big ? PyDataMem_SetHandler(pb_kept_capsule) : NULL;
    int made = 1;
    for (int k = 0; k < n_out; k++) {
        const pb_param *p = &e->params[n_in + k];
        r[k] = NULL;
        if (p->nd == 0) {
            v[n_in + k].i64 = 0;
            out[k] = &v[n_in + k];
            continue;
        }
        const int j = e->donor ? e->donor[k] : -1;
        if (j >= 0 && pb_can_hand_over(obj, j, in, e)) {
            Py_INCREF(obj[j]);
            r[k] = obj[j];
            out[k] = in[j];
            continue;
        }
        /* int64_t and npy_intp: one size (the glue builds with -fno-strict-aliasing) */
        r[k] = j >= 0 ? PyArray_NewCopy((PyArrayObject *)obj[j], NPY_CORDER)
                      : PyArray_SimpleNew(p->nd, (const npy_intp *)p->dims, pb_npy[p->type]);
        if (!r[k]) made = 0;
        else out[k] = PyArray_DATA((PyArrayObject *)r[k]);
        if (r[k] && j >= 0) in[j] = out[k];
    }
    if (e->big) {
        Py_XDECREF(PyDataMem_SetHandler(handler));
        Py_XDECREF(handler);
    }
    if (!made) goto error;
    pb_ctx ctx;
    int status;
    Py_BEGIN_ALLOW_THREADS
    pb_threads_for_call();
    pb_ctx_init(&ctx, e->pool);
    ctx.print = pb_print;
    ctx.owner = (void *)st;
    status = e->run(&ctx, in, out);
    pb_free_all(&ctx, e->pool);
    if (ctx.watching) pb_unwatch();
    Py_END_ALLOW_THREADS
    if (status) {
        if (!PyErr_Occurred()) pb_raise(st, &ctx); /* else a signal handler's exception */
        goto error;
    }
    for (int k = 0; k < n_out; k++) {
        const pb_param *p = &e->params[n_in + k];
        if (p->nd == 0 && !(r[k] = pb_scalar_out(&v[n_in + k], pb_npy[p->type],
                                                 form[1 + 3 * n_in + k])))
            goto error;
    }
    return pb_results(r, n_out, form[0]);
error:
    for (int k = 0; k < n_out; k++) Py_XDECREF(r[k]);
    return NULL;
}

static PyObject *pb_call(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 2 || !PyTuple_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "call(args: tuple, form: bytes)");
        return NULL;
    }
    return pb_call_on(self, &PyTuple_GET_ITEM(argv[0], 0), PyTuple_GET_SIZE(argv[0]),
                      argv[1]);
}

/* A module's entry bound to what a call like the last checks and reads besides its
 * arguments (pullback/backends/c/call/fast.py): called with (args, form), it checks that
 * args has size arguments, that the globals pinned (dict, name, object) are still those
 * objects and the Python scalars the code was specialised on are at their places (their
 * type, then their value), passes on the arguments at the places taken, followed by the
 * values of the globals names in the dict env, and runs the entry on them as call does;
 * NotImplemented where a global or a scalar differs or a global is gone (the caller's
 * general path says why).  In Python, this took half of a call of a small function
 * (0.4 us). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *module, *pinned, *fixed, *env, *names; /* fixed: ((place, type, value), ...) */
    Py_ssize_t size, n_taken, *taken;       /* env, names: NULL when none are read */
} pb_bound;

static PyObject *pb_bound_call(PyObject *self, PyObject *const *argv, size_t nargsf,
                               PyObject *kwnames) {
    const pb_bound *b = (const pb_bound *)self;
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames || !PyTuple_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "bound call(args: tuple, form: bytes)");
        return NULL;
    }
    PyObject *args = argv[0];
    if (PyTuple_GET_SIZE(args) != b->size) Py_RETURN_NOTIMPLEMENTED;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(b->pinned); k++) {
        PyObject *g = PyTuple_GET_ITEM(b->pinned, k);
        PyObject *now = PyDict_GetItemWithError(PyTuple_GET_ITEM(g, 0), PyTuple_GET_ITEM(g, 1));
        if (now != PyTuple_GET_ITEM(g, 2)) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NOTIMPLEMENTED;
        }
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(b->fixed); k++) {
        PyObject *f = PyTuple_GET_ITEM(b->fixed, k);
        PyObject *now = PyTuple_GET_ITEM(args, PyLong_AsSsize_t(PyTuple_GET_ITEM(f, 0)));
        if ((PyObject *)Py_TYPE(now) != PyTuple_GET_ITEM(f, 1)) Py_RETURN_NOTIMPLEMENTED;
        const int same = PyObject_RichCompareBool(now, PyTuple_GET_ITEM(f, 2), Py_EQ);
        if (same < 0) return NULL;
        if (!same) Py_RETURN_NOTIMPLEMENTED;
    }
    const Py_ssize_t n_read = b->names ? PyTuple_GET_SIZE(b->names) : 0;
    PyObject *passed[b->n_taken + n_read + 1];
    for (Py_ssize_t k = 0; k < b->n_taken; k++) passed[k] = PyTuple_GET_ITEM(args, b->taken[k]);
    Py_ssize_t k = 0;
    for (; k < n_read; k++) {
        PyObject *v = PyDict_GetItemWithError(b->env, PyTuple_GET_ITEM(b->names, k));
        if (!v) break;
        /* held: another thread may rebind the global while the code runs */
        passed[b->n_taken + k] = Py_NewRef(v);
    }
    PyObject *result = k < n_read ? NULL :
        pb_call_on(b->module, passed, b->n_taken + n_read, argv[1]);
    for (Py_ssize_t j = 0; j < k; j++) Py_DECREF(passed[b->n_taken + j]);
    if (k < n_read && !PyErr_Occurred()) Py_RETURN_NOTIMPLEMENTED;
    return result;
}

static int pb_bound_traverse(PyObject *self, visitproc visit, void *arg) {
    pb_bound *b = (pb_bound *)self;
    Py_VISIT(b->module);
    Py_VISIT(b->pinned);
    Py_VISIT(b->fixed);
    Py_VISIT(b->env);
    Py_VISIT(b->names);
    return 0;
}

static int pb_bound_clear(PyObject *self) {
    pb_bound *b = (pb_bound *)self;
    Py_CLEAR(b->module);
    Py_CLEAR(b->pinned);
    Py_CLEAR(b->fixed);
    Py_CLEAR(b->env);
    Py_CLEAR(b->names);
    return 0;
}

static void pb_bound_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    pb_bound_clear(self);
    PyMem_Free(((pb_bound *)self)->taken);
    PyObject_GC_Del(self);
}

static PyTypeObject pb_bound_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pullback.bound_entry",
    .tp_basicsize = sizeof(pb_bound),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(pb_bound, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = pb_bound_traverse,
    .tp_clear = pb_bound_clear,
    .tp_dealloc = pb_bound_dealloc,
};

/* bind(size, pinned, fixed, taken, env, names): the entry bound (pb_bound); env and
 * names None when the code reads no globals. */
static PyObject *pb_bind(PyObject *self, PyObject *args) {
    Py_ssize_t size;
    PyObject *pinned, *fixed, *taken, *env, *names;
    if (!PyArg_ParseTuple(args, "nO!O!O!OO", &size, &PyTuple_Type, &pinned, &PyTuple_Type,
                          &fixed, &PyTuple_Type, &taken, &env, &names))
        return NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(pinned); k++) {
        PyObject *g = PyTuple_GET_ITEM(pinned, k);
        if (!PyTuple_Check(g) || PyTuple_GET_SIZE(g) != 3 ||
            !PyDict_Check(PyTuple_GET_ITEM(g, 0))) {
            PyErr_SetString(PyExc_ValueError, "bind: pinned holds (dict, name, object)");
            return NULL;
        }
    }
    const int reads = env != Py_None;
    if ((reads && (!PyDict_Check(env) || !PyTuple_Check(names))) ||
        (!reads && names != Py_None)) {
        PyErr_SetString(PyExc_TypeError, "bind: env a dict and names a tuple, or both None");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(fixed); k++) {
        PyObject *f = PyTuple_GET_ITEM(fixed, k);
        Py_ssize_t at;
        if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 3 ||
            (at = PyLong_AsSsize_t(PyTuple_GET_ITEM(f, 0))) < 0 || at >= size) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "bind: fixed holds (place, type, value)");
            return NULL;
        }
    }
    if (PyType_Ready(&pb_bound_type) < 0) return NULL;
    pb_bound *b = PyObject_GC_New(pb_bound, &pb_bound_type);
    if (!b) return NULL;
    b->vectorcall = pb_bound_call;
    b->size = size;
    b->n_taken = PyTuple_GET_SIZE(taken);
    b->taken = PyMem_Malloc((b->n_taken + 1) * sizeof(Py_ssize_t));
    b->module = Py_NewRef(self);
    b->pinned = Py_NewRef(pinned);
    b->fixed = Py_NewRef(fixed);
    b->env = reads ? Py_NewRef(env) : NULL;
    b->names = reads ? Py_NewRef(names) : NULL;
    PyObject_GC_Track((PyObject *)b);
    if (!b->taken) {
        Py_DECREF(b);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < b->n_taken; k++) {
        b->taken[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(taken, k));
        if (b->taken[k] < 0 || b->taken[k] >= size) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "bind: a place beyond the arguments");
            Py_DECREF(b);
            return NULL;
        }
    }
    return (PyObject *)b;
}
static PyMethodDef pb_methods[] = {
    {"call", (PyCFunction)(void (*)(void))pb_call, METH_FASTCALL,
     "call(args, form): the results, or NotImplemented for other argument types"},
    {"bind", pb_bind, METH_VARARGS,
     "bind(size, pinned, fixed, taken, env, names): the entry, checking and reading what a "
     "call like the last does besides its arguments (its globals, its Python scalars)"},
    {"set_hooks", pb_set_hooks, METH_VARARGS,
     "set_hooks(printer(k, operand bytes), faulter(exc, msg, check, floats, ints))"},
    {"set_limits", pb_set_limits, METH_VARARGS,
     "set_limits(threads, keep): thread count (0: default), bytes idle pools keep"},
    {"release", pb_release, METH_NOARGS, "release(): free the memory kept for the next call"},
    {"blas_jobs", pb_blas_jobs_address, METH_NOARGS,
     "blas_jobs(): (OpenBLAS's thread callback's address, whether OpenMP's threads spin)"},
    {NULL, NULL, 0, NULL}};

void *pb_module_new(const char *name, const pb_entry *entry) {
    if (pb_glue_init()) return NULL;
    /* a module's definition lives as long as the process (modules are never unloaded) */
    PyModuleDef *def = (PyModuleDef *)PyMem_Calloc(1, sizeof *def);
    if (!def) return PyErr_NoMemory();
    const PyModuleDef made = {PyModuleDef_HEAD_INIT, name, NULL, sizeof(pb_state), pb_methods,
                              NULL, NULL, NULL, NULL};
    memcpy(def, &made, sizeof made);
    PyObject *m = PyModule_Create(def);
    if (m) ((pb_state *)PyModule_GetState(m))->entry = entry;
    return m;
}
