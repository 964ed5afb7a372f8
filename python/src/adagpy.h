/*
 * adag._adag: the CPython extension that drives adag's C API from Python.
 * Shared between module.c (errors, runtime, actors, graphs, nodes, the
 * module), dag.c (compiled DAGs, refs, results and their views) and
 * dag_observe.c (waits that Ctrl-C interrupts, the fd and asyncio hooks,
 * statistics, traces, the DAG's settings).
 *
 * Lifetimes: every object holds a strong reference to its Runtime object;
 * the runtime's handle, once closed, invalidates every handle it made, so
 * each call first checks rt->rt (ClosedError). A call that blocks (actor
 * creation, compile, execute, get, stats, write_trace, destroy) releases
 * the GIL and counts itself in rt->nbusy (and dag->nbusy), also while it
 * holds the GIL between the slices of its wait: close() refuses with BusyError
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
    int execute_timeout_ms; /* compile's execute_timeout (-1: forever), or -2: the runtime's
                               ADAG_EXECUTE_TIMEOUT_MS, read when first needed */
} DagObject;

typedef struct {
    PyObject_HEAD
    DagObject *dag;
    adag_ref_t ref;
    int state; /* REF_LIVE, REF_GOT (a Result owns it), REF_RELEASED */
} RefObject;

enum { REF_LIVE, REF_GOT, REF_RELEASED };

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
/* 0 when the DAG (and its runtime) is open, else ClosedError. */
int adagpy_dag_check(DagObject *d, const char *what);

/* ---- dag.c: refs ---- */

/* Waits up to ms (-1 forever; adagpy_dag_get's slices) for ref r's outputs
 * into values[0..noutputs): 0 when got; 1 when not ready by then (nothing
 * raised: the ref stays live); -1 with an exception: a failed execution
 * (released), a ref no longer live, or what a signal handler raised (a
 * KeyboardInterrupt: the ref stays live). */
int adagpy_ref_wait(RefObject *r, int ms, adag_value_t *values, const char *what);
/* Ref r's outputs (values, just got) copied into a list of bytes; releases r. */
PyObject *adagpy_ref_take(RefObject *r, const adag_value_t *values);

/* ---- dag_observe.c: waits that Ctrl-C interrupts ---- */

/* Not an adag_status_t: a Python exception is set and nothing was done (a
 * signal handler raised while the call waited: KeyboardInterrupt for
 * Ctrl-C). */
#define ADAGPY_RAISED ((adag_status_t)1)

/* adag_dag_get of d, GIL released, waiting in slices of at most
 * ADAGPY_SLICE_MS with the signal handlers run between them (Ctrl-C raises
 * KeyboardInterrupt in the main thread, which waits: ADAGPY_RAISED). The GIL
 * is held on entry and return. */
adag_status_t adagpy_dag_get(DagObject *d, adag_ref_t ref, adag_value_t *values, int ms);
/* adag_dag_execute of d, GIL released; blocking (block != 0) in slices in
 * the main thread, as above, up to the DAG's execute timeout. */
adag_status_t adagpy_dag_execute(DagObject *d, const adag_value_t *in, unsigned n, int block,
                                 adag_ref_t *ref);

/* ---- dag_observe.c: methods of CompiledDAG and Ref ---- */

PyObject *adagpy_dag_fileno(DagObject *self, PyObject *unused);
PyObject *adagpy_dag_execute_async(DagObject *self, PyObject *args, PyObject *kw);
PyObject *adagpy_dag_stats(DagObject *self, PyObject *args, PyObject *kw);
PyObject *adagpy_dag_write_trace(DagObject *self, PyObject *arg);
PyObject *adagpy_dag_config(DagObject *self, void *unused);
PyObject *adagpy_dag_execute_timeout(DagObject *self, void *unused);
PyObject *adagpy_ref_try_get(RefObject *self, PyObject *unused);
PyObject *adagpy_ref_ready(RefObject *self, PyObject *unused);
PyObject *adagpy_ref_wait_async(RefObject *self, PyObject *args, PyObject *kw);
extern PyAsyncMethods adagpy_ref_as_async; /* `await ref` */

#endif
