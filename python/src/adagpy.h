/*
 * adag._adag: the CPython extension that drives adag's C API from Python.
 * Shared between module.c (errors, runtime, actors, graphs, nodes, the
 * module) and dag.c (compiled DAGs, refs, results and their views).
 *
 * Lifetimes: every object holds a strong reference to its Runtime object;
 * the runtime's handle, once closed, invalidates every handle it made, so
 * each call first checks rt->rt (ClosedError). A call that blocks (actor
 * creation, compile, execute, get, destroy) releases the GIL and counts
 * itself in rt->nbusy (and dag->nbusy): close() refuses with BusyError
 * while another thread is inside such a call, so no handle is freed under
 * a thread that still uses it.
 */
#ifndef ADAGPY_H
#define ADAGPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <adag.h>

typedef struct {
    PyObject_HEAD
    adag_runtime_h rt; /* NULL once closed */
    long nbusy;        /* calls of any thread inside a blocking adag call (GIL held to change) */
    PyObject *modules; /* dict: module path -> capsule of its dlopen handle (thread actors) */
} RuntimeObject;

typedef struct {
    PyObject_HEAD
    RuntimeObject *rt;
    adag_dag_h dag;    /* NULL once closed */
    unsigned noutputs;
    unsigned ninputs;
    long nbusy;
} DagObject;

extern PyTypeObject Runtime_Type, Actor_Type, Graph_Type, Node_Type;
extern PyTypeObject Dag_Type, Ref_Type, Result_Type, Slot_Type;

/* Raises the exception of status st (adag.InvalidError, ...) with
 * adag_last_error()'s message (or `what` when it is empty); returns NULL. */
PyObject *adagpy_raise(adag_status_t st, const char *what);
/* ClosedError "<what>: the runtime is closed" unless rt is open; 0 when open. */
int adagpy_check_open(RuntimeObject *rt, const char *what);
/* A timeout in seconds (None: forever, -1) as milliseconds; -2 with an exception set. */
int adagpy_timeout_ms(PyObject *timeout, const char *what);
/* A DAG object for dag, compiled from a graph of rt with n outputs and inputs. */
PyObject *adagpy_dag_new(RuntimeObject *rt, adag_dag_h dag, unsigned noutputs, unsigned ninputs);

/* ---- Python actors (pyactor.c, call.c) ---- */

/* The call a Python method runs in, for adag.current_call(): valid only
 * during the method; a Call object made for it is invalidated at its end. */
typedef struct {
    PyObject_HEAD
    adag_call_h call; /* NULL once the method returned */
    uint32_t written;  /* outputs given a slot through output() */
    PyObject *views[ADAG_MAX_RETURNS]; /* what output() gave for each */
} CallObject;
extern PyTypeObject Call_Type;
extern PyMethodDef adagpy_call_functions[]; /* current_call() */
/* the method running on this thread (pyactor.c sets them around it) */
extern _Thread_local adag_call_h adagpy_cur_call;
extern _Thread_local CallObject *adagpy_cur_obj;

/* Fills p's class name, module path and init bytes for an actor of the
 * Python class cls (cls(*args, **kwargs)): a thread actor (its class made
 * and registered in rt once) or a process actor (adag-worker loads the
 * package's worker module). *keep holds what p points into; -1 with an
 * exception set. */
int adagpy_python_actor(RuntimeObject *rt, PyObject *cls, PyObject *args, PyObject *kwargs,
                        int thread, adag_actor_params_t *p, PyObject **keep);
/* The capsule adag._adag._worker_api (pyactor.h). */
PyObject *adagpy_worker_api_capsule(void);
/* A numpy array (a memoryview without numpy) viewing data as a tensor. */
PyObject *adagpy_array_view(void *data, size_t size, adag_dtype_t dtype, unsigned ndim,
                            const int64_t *shape, int writable);
/* A buffer format ("<f", "q") as an adag dtype; ADAG_DTYPE_BYTES if none fits. */
adag_dtype_t adagpy_format_dtype(const char *format, Py_ssize_t itemsize);

#endif
