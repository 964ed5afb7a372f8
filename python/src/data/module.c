/*
 * adag._data: the module, its errors (adag._adag's classes, handed over by
 * adag/data.py's _setup() call) and the waits that let signals through.
 */
#include "datapy.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

/* ---- errors and the DAG type, from adag._adag through _setup() ---- */

static PyObject *errors_by_status; /* dict: status (int) -> class */
static PyObject *error_base;       /* adag.Error */
static PyObject *dag_type;         /* adag.CompiledDAG */

PyObject *datapy_raise(adag_status_t st, const char *what)
{
    const char *msg = adag_last_error();
    if (!error_base) {
        PyErr_Format(PyExc_RuntimeError, "adag._data: _setup() was not called (%s)",
                     msg && msg[0] ? msg : what);
        return NULL;
    }
    PyObject *code = PyLong_FromLong(st), *cls = NULL, *exc = NULL;
    if (!code)
        return NULL;
    cls = PyDict_GetItemWithError(errors_by_status, code);
    if (!cls && PyErr_Occurred())
        goto out;
    if (!cls)
        cls = error_base;
    exc = PyObject_CallFunction(cls, "s", msg && msg[0] ? msg : what);
    if (!exc || PyObject_SetAttrString(exc, "status", code) < 0)
        goto out;
    PyErr_SetObject(cls, exc);
out:
    Py_XDECREF(exc);
    Py_DECREF(code);
    return NULL;
}

PyObject *datapy_fail(adag_status_t st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    adag_fail(st, "%s", msg);
    return datapy_raise(st, msg);
}

PyTypeObject *datapy_dag_type(void)
{
    return (PyTypeObject *)dag_type;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int datapy_wait(adag_status_t (*call)(void *arg, int ms), void *arg, int ms, adag_status_t *st)
{
    double t0 = now_ms();
    for (;;) {
        int slice = DATAPY_SLICE_MS;
        double left = ms < 0 ? slice : ms - (now_ms() - t0);
        if (left < slice)
            slice = left > 0 ? (int)left : 0;
        Py_BEGIN_ALLOW_THREADS
        *st = call(arg, slice);
        Py_END_ALLOW_THREADS
        if (*st != ADAG_ERR_TIMEOUT || (ms >= 0 && now_ms() - t0 >= ms))
            return 0;
        if (PyErr_CheckSignals() < 0) /* Ctrl-C: KeyboardInterrupt from the handler */
            return -1;
    }
}

/* ---- the module ---- */

static PyObject *mod_status_str(PyObject *m, PyObject *arg)
{
    (void)m;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(adag_status_str((adag_status_t)code));
}

static PyObject *mod_setup(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *by_status, *base, *dag;
    if (!PyArg_ParseTuple(args, "O!OO!:_setup", &PyDict_Type, &by_status, &base, &PyType_Type,
                          &dag))
        return NULL;
    Py_XSETREF(errors_by_status, Py_NewRef(by_status));
    Py_XSETREF(error_base, Py_NewRef(base));
    Py_XSETREF(dag_type, Py_NewRef(dag));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"status_str", mod_status_str, METH_O, "adag_status_str(code)"},
    {"_setup", mod_setup, METH_VARARGS,
     "_setup({status: class}, adag.Error, adag.CompiledDAG): the classes adag._adag made"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, .m_name = "adag._data",
    .m_doc = "libadag-data for Python: data sources and their batches (see adag.data).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__data(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    PyTypeObject *types[] = {&Source_Type, &Batch_Type, &Execution_Type, &Sample_Type};
    const char *names[] = {"_Source", "_Batch", "_Execution", "Sample"};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (PyType_Ready(types[i]) < 0 ||
            PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            goto fail;
    static const struct {
        const char *name;
        int value;
    } consts[] = {
        {"FORMAT_RECORDS", ADAG_DATA_FORMAT_RECORDS},
        {"FORMAT_NPY", ADAG_DATA_FORMAT_NPY},
        {"FORMAT_TOKENS", ADAG_DATA_FORMAT_TOKENS},
        {"FORMAT_WEBDATASET", ADAG_DATA_FORMAT_WEBDATASET},
        {"FORMAT_FILES", ADAG_DATA_FORMAT_FILES},
        {"RANKS_DROP", ADAG_DATA_RANKS_DROP},
        {"RANKS_PAD", ADAG_DATA_RANKS_PAD},
        {"BAD_FAIL", ADAG_DATA_BAD_FAIL},
        {"BAD_SKIP", ADAG_DATA_BAD_SKIP},
        {"DTYPE_U8", ADAG_DTYPE_U8},
        {"DTYPE_I8", ADAG_DTYPE_I8},
        {"DTYPE_I16", ADAG_DTYPE_I16},
        {"DTYPE_I32", ADAG_DTYPE_I32},
        {"DTYPE_I64", ADAG_DTYPE_I64},
        {"DTYPE_F16", ADAG_DTYPE_F16},
        {"DTYPE_BF16", ADAG_DTYPE_BF16},
        {"DTYPE_F32", ADAG_DTYPE_F32},
        {"DTYPE_F64", ADAG_DTYPE_F64},
        {"DTYPE_BOOL", ADAG_DTYPE_BOOL},
        {"MAX_FIELDS", ADAG_DATA_MAX_FIELDS},
        {"MAX_STEPS", ADAG_DATA_MAX_STEPS},
        {"SLICE_MS", DATAPY_SLICE_MS},
    };
    for (size_t i = 0; i < sizeof(consts) / sizeof(consts[0]); i++)
        if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0)
            goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
