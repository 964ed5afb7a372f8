/*
 * adag._adag: the CPython extension that drives adag's C API from Python.
 * Shared between module.c (errors, runtime, actors, graphs, nodes, the
 * module), dag.c (compiled DAGs, refs, results), dag_observe.c (waits
 * that Ctrl-C interrupts, the fd and asyncio hooks, statistics, traces,
 * the DAG's settings), view.c (the views of slots: buffer protocol and
 * DLPack), tensor.c (dtypes, execute's inputs as bytes or tensors),
 * reserve.c (zero-copy inputs), collective.c (tensor and channel
 * declarations, collectives), pyactor.c, call.c and argview.c (actors
 * written in Python).
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

typedef struct {
    PyObject_HEAD
    RuntimeObject *rt;
    adag_graph_h graph;
    unsigned noutputs;
    int compiled;
    /* the actors bound in the graph: an actor left by its Python object
     * would be destroyed before the graph is compiled (a compiled DAG
     * keeps its actors in C) */
    PyObject *actors;
} GraphObject;

typedef struct {
    PyObject_HEAD
    GraphObject *graph;
    adag_node_h node;
} NodeObject;

/* The slots of one execution, seen through views (view.c): a Result's
 * outputs (read-only, dag.c) or a Reservation's inputs (writable,
 * reserve.c). Each view exports its slot by the buffer protocol and by
 * DLPack; every live export (a Py_buffer not yet released, a capsule whose
 * deleter has not run) counts in nexports and holds a reference to its
 * view, which holds the set. Leaving the `with` block closes the set:
 * views without exports refuse use from then on (ValueError); the slots
 * go back (finish: the ref released, or the reservation cancelled) once
 * the set is closed and nexports is 0, or when the set is freed. */
typedef struct {
    PyObject_HEAD
    DagObject *dag;
    adag_ref_t ref;
    unsigned n;
    int writable;    /* a Reservation's input slots; else a Result's outputs */
    int open;        /* inside the block: the views may be used */
    int closed;      /* the block ended (the views closed) */
    int held;        /* the slots are still ours (ref not released, not committed or cancelled) */
    int synced;      /* the DAG's stream was synchronized since get (device outputs) */
    long nexports;   /* live exports of all its views (GIL held to change) */
    adag_value_t *values;      /* what view i shows: values[0..n) */
    adag_input_view_t *inputs; /* a Reservation's: adag_dag_reserve's views; else NULL */
    unsigned char *declared;   /* a Reservation's: input i's value was declared */
    PyObject *views;           /* the tuple of views once made, until the block ends */
} SlotSetObject;

extern PyTypeObject Runtime_Type, Actor_Type, Graph_Type, Node_Type;
extern PyTypeObject Dag_Type, Ref_Type, Result_Type, SlotView_Type, Reservation_Type;

/* Raises the exception of status st (adag.InvalidError, ...) with
 * adag_last_error()'s message (or `what` when it is empty); returns NULL. */
PyObject *adagpy_raise(adag_status_t st, const char *what);
/* ClosedError "<what>: the runtime is closed" unless rt is open; 0 when open. */
int adagpy_check_open(RuntimeObject *rt, const char *what);
/* A timeout in seconds (None: forever, -1) as milliseconds; -2 with an exception set. */
int adagpy_timeout_ms(PyObject *timeout, const char *what);
/* A DAG object for dag, compiled from a graph of rt with n outputs and inputs. */
PyObject *adagpy_dag_new(RuntimeObject *rt, adag_dag_h dag, unsigned noutputs, unsigned ninputs);
/* 0 when the DAG (and its runtime) is open, else ClosedError naming what. */
int adagpy_dag_check(DagObject *d, const char *what);
/* A live Ref of d for ref (a committed reservation). */
PyObject *adagpy_ref_new(DagObject *d, adag_ref_t ref);

/* ---- views (view.c) ---- */
/* The tuple of s's views (made on first call), a new reference. */
PyObject *adagpy_views(SlotSetObject *s);
/* Ends the block: views without exports close; the slots go back now
 * unless an export is alive (then when the last one goes). 1 when an
 * export is still alive, else 0. */
int adagpy_views_close(SlotSetObject *s);
/* Gives the slots back now if they are still held (release or cancel). */
void adagpy_slots_finish(SlotSetObject *s);
int adagpy_slots_traverse(SlotSetObject *s, visitproc visit, void *arg);
/* Frees what a set owns (its dealloc, after finishing). */
void adagpy_slots_free(SlotSetObject *s);

/* ---- tensors (tensor.c) ---- */
/* An element type given as a name ("float32", "f32", "bfloat16", ...) or
 * an object whose .name, __name__ or str() is one (a numpy dtype, a numpy
 * scalar type, a torch dtype); -1 with ValueError naming `what`. */
int adagpy_dtype_parse(PyObject *o, adag_dtype_t *out, const char *what);
/* numpy's name of a dtype ("float32", "bfloat16"); NULL for bytes. */
const char *adagpy_dtype_numpy(adag_dtype_t dtype);
/* The buffer-protocol format of a dtype's elements (bf16: "H", its bits). */
const char *adagpy_dtype_format(adag_dtype_t dtype);
/* A shape (a sequence of ints, or an int) into shape[0..*ndim); -1 with
 * an exception naming what. */
int adagpy_shape_parse(PyObject *o, int64_t *shape, unsigned *ndim, const char *what);
/* "host", "emu:0", "cuda:1". */
PyObject *adagpy_device_str(int32_t device);

/* One input of execute as taken from its Python object: what must be
 * given back once execute returned. */
typedef struct {
    Py_buffer buf;      /* a buffer-protocol export (buf.obj set), or unused */
    PyObject *capsule;  /* a DLPack capsule taken (renamed "used_..."), or NULL */
    void *managed;      /* its DLManagedTensor(Versioned) */
    int versioned;
    int device;         /* on a device: the copy runs on the DAG's stream */
    const char *what;   /* what its errors call it: "CompiledDAG.execute: input", "return" */
} adagpy_input_t;

/* Takes value `index` from o into *v (bytes, a tensor from a buffer with
 * a format, or a DLPack tensor): an input of execute (d its DAG, whose
 * stream a CUDA producer is asked to order against) or a Python method's
 * return (d NULL); *hold keeps its memory until adagpy_input_drop. -1
 * with an exception naming "<what> <index>". */
int adagpy_input_take(DagObject *d, PyObject *o, const char *what, Py_ssize_t index,
                      adag_value_t *v, adagpy_input_t *hold);
void adagpy_input_drop(adagpy_input_t *hold);

/* ---- reservations (reserve.c) ---- */
PyObject *adagpy_dag_reserve(DagObject *d, PyObject *args, PyObject *kw);

/* A Node of g (module.c). */
PyObject *adagpy_node_new(GraphObject *g, adag_node_h n);

/* ---- graph declarations and collectives (collective.c) ---- */
PyObject *adagpy_graph_tensor(GraphObject *g, PyObject *args, PyObject *kw);
PyObject *adagpy_graph_channel(GraphObject *g, PyObject *args, PyObject *kw);
PyObject *adagpy_graph_allreduce(GraphObject *g, PyObject *args, PyObject *kw);
PyObject *adagpy_graph_allgather(GraphObject *g, PyObject *args, PyObject *kw);
PyObject *adagpy_graph_reducescatter(GraphObject *g, PyObject *args, PyObject *kw);
PyObject *adagpy_graph_broadcast(GraphObject *g, PyObject *args, PyObject *kw);
extern PyMethodDef adagpy_node_methods[];

/* ---- Python actors (pyactor.c, call.c) ---- */

/* The call a Python method runs in, for adag.current_call(): valid only
 * during the method; a Call object made for it is invalidated at its end. */
typedef struct {
    PyObject_HEAD
    adag_call_h call; /* NULL once the method returned */
    uint32_t written;  /* outputs given a slot through output() */
    PyObject *views[ADAG_MAX_RETURNS]; /* what output() gave for each */
    PyObject *args;    /* the ArgViews arg() gave (a list), ended with the call */
} CallObject;
extern PyTypeObject Call_Type;
extern PyMethodDef adagpy_call_functions[]; /* current_call() */
extern PyTypeObject ArgView_Type;
/* An ArgView of argument `index` (argview.c), or of return `index`'s slot
 * when writable (Call.output on a device), valid until adagpy_argview_end. */
PyObject *adagpy_argview_new(const adag_value_t *v, unsigned index, void *stream, int writable);
void adagpy_argview_end(PyObject *argview);
/* Ends a Call when its method returned (call.c): its views and ArgViews. */
void adagpy_call_end(CallObject *call);
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

/* ---- dag.c: refs ---- */

/* Waits up to ms (-1 forever; adagpy_dag_get's slices) for ref r's outputs
 * into values[0..noutputs): 0 when got; 1 when not ready by then (nothing
 * raised: the ref stays live); -1 with an exception: a failed execution
 * (released), a ref no longer live, or what a signal handler raised (a
 * KeyboardInterrupt: the ref stays live). */
int adagpy_ref_wait(RefObject *r, int ms, adag_value_t *values, const char *what);
/* Ref r's outputs (values, just got) copied into a list of bytes (device
 * outputs synchronized first; cuda ones refused); releases r. */
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
