/* pullback's glue library: what every compiled module does alike between Python and its
 * C (reading NumPy arguments, making results, the memory of big results), built once
 * per compiler, flags, Python and NumPy, and linked by each module, which so compiles
 * only its own code.  pb_glue_init must run (in the module's init) before the rest. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION /* PyDataMem_SetHandler */
#include <numpy/arrayobject.h>
#include <stdint.h>

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
    return malloc(n ? n : 1);
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
PyObject *pb_kept_capsule = NULL;

/* NumPy's C API for this library, and the handler's capsule (once per process). */
int pb_glue_init(void) {
    if (PyArray_API == NULL && _import_array() < 0) return -1;
    if (pb_kept_capsule == NULL)
        pb_kept_capsule = PyCapsule_New(&pb_kept_handler, "mem_handler", NULL);
    return pb_kept_capsule == NULL ? -1 : 0;
}

/* An argument's data when it is an aligned, native-order C-contiguous array of exactly
   this type and shape, else NULL. */
void *pb_array_in(PyObject *o, int type, int nd, const npy_intp *dims) {
    if (!PyArray_Check(o)) return NULL;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != type || PyArray_NDIM(a) != nd || !PyArray_ISCARRAY_RO(a) ||
        !PyArray_ISNOTSWAPPED(a)) return NULL;
    const npy_intp *have = PyArray_DIMS(a);
    for (int d = 0; d < nd; d++) if (have[d] != dims[d]) return NULL;
    return PyArray_DATA(a);
}

/* A 0-d argument's value into v when it is a NumPy scalar of exactly this type. */
int pb_scalar_in(PyObject *o, int type, void *v) {
    PyArray_Descr *descr = PyArray_DescrFromType(type);
    int ok = (PyObject *)Py_TYPE(o) == (PyObject *)descr->typeobj;
    Py_DECREF(descr);
    if (ok) PyArray_ScalarAsCtype(o, v);
    return ok;
}

/* A 0-d result as the form asks: a 0-d array, a NumPy scalar or a Python scalar. */
PyObject *pb_scalar_out(const void *v, int type, unsigned char code) {
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
PyObject *pb_results(PyObject **r, int n, unsigned char shape) {
    if (shape == 1) return r[0];
    PyObject *out = shape == 2 ? PyTuple_New(n) : PyList_New(n);
    for (int k = 0; k < n; k++) {
        if (shape == 2) PyTuple_SET_ITEM(out, k, r[k]);
        else PyList_SET_ITEM(out, k, r[k]);
    }
    return out;
}
