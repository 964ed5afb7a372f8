/*
 * The module adag-worker loads for an actor whose class is written in
 * Python (adag/_pyworker*.so): its resolver starts an interpreter in the
 * worker (one per worker process, no signal handlers of its own, unbuffered
 * stdout and stderr), puts the package's folder on sys.path, imports
 * adag._adag and hands the class name and the actor's init bytes to the
 * extension (pyactor.h), which imports the class and makes its adag class.
 * The methods then run on the worker's loop threads, each taking the GIL.
 *
 * Linked with libpython, which this module makes global before starting it
 * (the extensions the interpreter imports, numpy's and adag._adag, expect
 * its symbols there). The adag_* calls of adag._adag bind to adag-worker's
 * own copy (it exports them), as any module's do.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../pyactor.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <string.h>

#ifndef ADAGPY_LIBPYTHON
#error "ADAGPY_LIBPYTHON (libpython's soname) must be defined by the build"
#endif

/* The package's parent folder (this file is <root>/adag/_pyworker*.so) on sys.path. */
static int add_package_root(void)
{
    Dl_info info;
    char path[PATH_MAX];
    if (!dladdr((void *)add_package_root, &info) || !info.dli_fname ||
        snprintf(path, sizeof(path), "%s", info.dli_fname) >= (int)sizeof(path))
        return -1;
    char *root = dirname(dirname(path));
    PyObject *sys_path = PySys_GetObject("path"); /* borrowed */
    PyObject *s = PyUnicode_FromString(root);
    int rc = sys_path && s ? PyList_Insert(sys_path, 0, s) : -1;
    Py_XDECREF(s);
    return rc;
}

static adag_status_t start_python(void)
{
    if (!dlopen(ADAGPY_LIBPYTHON, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL))
        return adag_fail(ADAG_ERR_NOT_FOUND, "cannot make %s's symbols global: %s",
                         ADAGPY_LIBPYTHON, dlerror());
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0; /* the worker's own handlers stay */
    config.buffered_stdio = 0;          /* prints reach the driver's terminal as they happen */
    config.parse_argv = 0;
    PyStatus status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status))
        return adag_fail(ADAG_ERR_INTERNAL, "cannot start Python in adag-worker: %s",
                         status.err_msg ? status.err_msg : "(no message)");
    int rc = add_package_root();
    PyEval_SaveThread(); /* the GIL goes to whichever thread asks (PyGILState_Ensure) */
    if (rc < 0)
        return adag_fail(ADAG_ERR_INTERNAL, "cannot put the adag package on sys.path");
    return ADAG_OK;
}

static adag_status_t resolve(const char *class_name, const void *init, size_t init_size,
                             const adag_class_def_t **def)
{
    adag_status_t st;
    if (!Py_IsInitialized() && (st = start_python()) != ADAG_OK)
        return st;
    PyGILState_STATE gil = PyGILState_Ensure();
    const adagpy_worker_api_t *api = PyCapsule_Import(ADAGPY_WORKER_API_CAPSULE, 0);
    if (!api || api->version != ADAGPY_WORKER_API_VERSION) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        const char *s = text ? PyUnicode_AsUTF8(text) : NULL;
        st = adag_fail(ADAG_ERR_NOT_FOUND, "cannot import %s in adag-worker%s%s",
                       ADAGPY_WORKER_API_CAPSULE, s ? ": " : " (another version of adag's package)",
                       s ? s : "");
        Py_XDECREF(text);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Clear();
    } else {
        st = api->resolve(class_name, init, init_size, def);
    }
    PyGILState_Release(gil);
    return st;
}

ADAG_MODULE_RESOLVER(resolve);

/* Not a module to import: says so when someone tries. */
PyMODINIT_FUNC PyInit__pyworker(void)
{
    PyErr_SetString(PyExc_ImportError,
                    "adag._pyworker is the module adag-worker loads for Python actors, not one "
                    "to import");
    return NULL;
}
