/*
 * adag._adag: compiled DAGs. execute() takes each input as bytes or a
 * tensor (tensor.c) and copies it into its slot, returning a Ref;
 * Ref.get() copies the outputs out as bytes and releases the ref;
 * CompiledDAG.get(ref) gives a Result whose `with` block views the slots
 * themselves (SlotViews, view.c), released at block exit, or, while a view
 * is still exported (an array from np.from_dlpack or np.asarray of it),
 * when the last export goes. reserve() is in reserve.c.
 */
#include "adagpy.h"

#include <stdlib.h>
#include <string.h>

typedef SlotSetObject ResultObject;

PyObject *adagpy_dag_new(RuntimeObject *rt, adag_dag_h dag, unsigned noutputs, unsigned ninputs)
{
    DagObject *d = PyObject_New(DagObject, &Dag_Type);
    if (!d) {
        adag_dag_destroy(dag);
        return NULL;
    }
    d->rt = (RuntimeObject *)Py_NewRef(rt);
    d->dag = dag;
    d->noutputs = noutputs;
    d->ninputs = ninputs;
    d->nbusy = 0;
    d->execute_timeout_ms = -2;
    return (PyObject *)d;
}

int adagpy_dag_check(DagObject *d, const char *what)
{
    if (adagpy_check_open(d->rt, what) < 0)
        return -1;
    if (d->dag)
        return 0;
    adag_fail(ADAG_ERR_CLOSED, "%s: the DAG is closed", what);
    adagpy_raise(ADAG_ERR_CLOSED, what);
    return -1;
}

static int dag_close(DagObject *d)
{
    if (!d->dag || !d->rt->rt) {
        d->dag = NULL;
        return 0;
    }
    if (d->nbusy) {
        adag_fail(ADAG_ERR_BUSY, "CompiledDAG.close: %ld calls of other threads are still inside it",
                  d->nbusy);
        adagpy_raise(ADAG_ERR_BUSY, "CompiledDAG.close");
        return -1;
    }
    adag_dag_h dag = d->dag;
    d->dag = NULL;
    adag_status_t st;
    d->rt->nbusy++;
    Py_BEGIN_ALLOW_THREADS
    st = adag_dag_destroy(dag);
    Py_END_ALLOW_THREADS
    d->rt->nbusy--;
    if (st != ADAG_OK) {
        adagpy_raise(st, "CompiledDAG.close");
        return -1;
    }
    return 0;
}

static void Dag_dealloc(DagObject *self)
{
    if (dag_close(self) < 0)
        PyErr_WriteUnraisable((PyObject *)self);
    Py_DECREF(self->rt);
    PyObject_Free(self);
}

static PyObject *Dag_close(DagObject *self, PyObject *unused)
{
    (void)unused;
    return dag_close(self) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *Dag_enter(DagObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *Dag_exit(DagObject *self, PyObject *args)
{
    (void)args;
    return dag_close(self) < 0 ? NULL : Py_NewRef(Py_False);
}

#define MAX_INPUTS 64

static PyObject *Dag_execute(DagObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"block", NULL};
    int block = 1;
    PyObject *empty = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (kw && !(empty = PyTuple_New(0)))
        return NULL;
    if (kw && !PyArg_ParseTupleAndKeywords(empty, kw, "|$p:execute", kwlist, &block)) {
        Py_DECREF(empty);
        return NULL;
    }
    Py_XDECREF(empty);
    if (adagpy_dag_check(self, "CompiledDAG.execute") < 0)
        return NULL;
    if ((size_t)n != self->ninputs || n > MAX_INPUTS) {
        PyErr_Format(PyExc_TypeError, "CompiledDAG.execute: %zd inputs given, the DAG takes %u", n,
                     self->ninputs);
        return NULL;
    }
    adagpy_input_t hold[MAX_INPUTS];
    adag_value_t in[MAX_INPUTS];
    Py_ssize_t got = 0;
    int on_device = 0;
    PyObject *result = NULL;
    for (; got < n; got++) {
        if (adagpy_input_take(self, PyTuple_GET_ITEM(args, got), "CompiledDAG.execute: input", got,
                              &in[got], &hold[got]) < 0)
            goto out;
        on_device |= hold[got].device;
    }
    RefObject *r = PyObject_New(RefObject, &Ref_Type);
    if (!r)
        goto out;
    r->dag = (DagObject *)Py_NewRef(self);
    r->state = REF_RELEASED;
    adag_status_t st, synced = ADAG_OK;
    adag_dag_h dag = self->dag;
    self->nbusy++;
    self->rt->nbusy++;
    st = adagpy_dag_execute(self, n ? in : NULL, (unsigned)n, block, &r->ref);
    /* a device input is copied on the DAG's stream: its producer gets it
     * back (DLPack's deleter) only once that copy ran */
    if (st == ADAG_OK && on_device) {
        Py_BEGIN_ALLOW_THREADS
        synced = adag_dag_stream_sync(dag, -1);
        Py_END_ALLOW_THREADS
    }
    self->nbusy--;
    self->rt->nbusy--;
    if (st == ADAG_OK)
        r->state = REF_LIVE; /* freed below on a failed sync: released */
    if (st != ADAG_OK || synced != ADAG_OK) {
        if (st != ADAGPY_RAISED) /* else: raised while it waited (Ctrl-C) */
            adagpy_raise(st != ADAG_OK ? st : synced, "CompiledDAG.execute");
        Py_DECREF(r);
        goto out;
    }
    result = (PyObject *)r;
out:
    for (Py_ssize_t i = 0; i < got; i++)
        adagpy_input_drop(&hold[i]);
    return result;
}

PyObject *adagpy_ref_new(DagObject *d, adag_ref_t ref)
{
    RefObject *r = PyObject_New(RefObject, &Ref_Type);
    if (!r)
        return NULL;
    r->dag = (DagObject *)Py_NewRef(d);
    r->ref = ref;
    r->state = REF_LIVE;
    return (PyObject *)r;
}

int adagpy_ref_wait(RefObject *r, int ms, adag_value_t *values, const char *what)
{
    DagObject *d = r->dag;
    if (adagpy_dag_check(d, what) < 0)
        return -1;
    if (r->state != REF_LIVE) {
        PyErr_Format(PyExc_ValueError, "%s: ref %llu was %s", what, (unsigned long long)r->ref,
                     r->state == REF_GOT ? "already got" : "released");
        return -1;
    }
    d->nbusy++;
    d->rt->nbusy++;
    adag_status_t st = adagpy_dag_get(d, r->ref, values, ms);
    d->nbusy--;
    d->rt->nbusy--;
    if (st == ADAG_OK)
        return 0;
    if (st == ADAG_ERR_TIMEOUT)
        return 1;
    if (st == ADAGPY_RAISED)
        return -1;
    adagpy_raise(st, what);
    if (d->dag) {
        adag_dag_release(d->dag, r->ref);
        r->state = REF_RELEASED;
    }
    return -1;
}

/* adagpy_ref_wait with a timeout in seconds (None: forever); TimeoutError
 * leaves the ref live. */
static int ref_wait(RefObject *r, PyObject *timeout, adag_value_t *values, const char *what)
{
    int ms = adagpy_timeout_ms(timeout, what);
    if (ms == -2)
        return -1;
    int rc = adagpy_ref_wait(r, ms, values, what);
    if (rc == 1) {
        adagpy_raise(ADAG_ERR_TIMEOUT, what);
        return -1;
    }
    return rc;
}

static int ref_release(RefObject *r)
{
    if (r->state != REF_LIVE)
        return 0;
    r->state = REF_RELEASED;
    if (!r->dag->dag || !r->dag->rt->rt)
        return 0;
    adag_status_t st = adag_dag_release(r->dag->dag, r->ref);
    if (st != ADAG_OK) {
        adagpy_raise(st, "release");
        return -1;
    }
    return 0;
}

static PyObject *Ref_get(RefObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:get", kwlist, &timeout))
        return NULL;
    adag_value_t *values = calloc(self->dag->noutputs ? self->dag->noutputs : 1, sizeof(*values));
    if (!values)
        return PyErr_NoMemory();
    PyObject *list = ref_wait(self, timeout, values, "Ref.get") < 0 ? NULL
                                                                     : adagpy_ref_take(self, values);
    free(values);
    return list;
}

PyObject *adagpy_ref_take(RefObject *r, const adag_value_t *values)
{
    /* device outputs (a driver device): emulated memory is host memory
     * once the DAG's stream ran; CUDA memory has no host copy here */
    int on_device = 0;
    for (unsigned i = 0; i < r->dag->noutputs; i++) {
        if (ADAG_DEVICE_KIND(values[i].device) == ADAG_DEV_CUDA) {
            PyErr_Format(PyExc_BufferError,
                         "Ref.get: output %u is in CUDA memory: view it with dag.get(ref) and "
                         "DLPack (torch.from_dlpack)",
                         i);
            ref_release(r);
            return NULL;
        }
        on_device |= values[i].device != ADAG_DEVICE_HOST;
    }
    if (on_device) {
        adag_status_t st;
        adag_dag_h dag = r->dag->dag;
        r->dag->nbusy++;
        r->dag->rt->nbusy++;
        Py_BEGIN_ALLOW_THREADS
        st = adag_dag_stream_sync(dag, -1);
        Py_END_ALLOW_THREADS
        r->dag->nbusy--;
        r->dag->rt->nbusy--;
        if (st != ADAG_OK) {
            adagpy_raise(st, "Ref.get: adag_dag_stream_sync");
            ref_release(r);
            return NULL;
        }
    }
    PyObject *list = PyList_New(r->dag->noutputs);
    for (unsigned i = 0; list && i < r->dag->noutputs; i++) {
        PyObject *b = PyBytes_FromStringAndSize(values[i].data, (Py_ssize_t)values[i].size);
        if (!b)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, b);
    }
    if (ref_release(r) < 0)
        Py_CLEAR(list);
    return list;
}

static PyObject *Ref_release(RefObject *self, PyObject *unused)
{
    (void)unused;
    return ref_release(self) < 0 ? NULL : Py_NewRef(Py_None);
}

static void Ref_dealloc(RefObject *self)
{
    if (ref_release(self) < 0)
        PyErr_WriteUnraisable((PyObject *)self);
    Py_DECREF(self->dag);
    PyObject_Free(self);
}

static PyObject *Ref_repr(RefObject *self)
{
    static const char *states[] = {"live", "got", "released"};
    return PyUnicode_FromFormat("<adag.Ref %llu %s>", (unsigned long long)self->ref,
                                states[self->state]);
}

static PyObject *Dag_get(DagObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ref", "timeout", NULL};
    RefObject *r;
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|O:get", kwlist, &Ref_Type, &r, &timeout))
        return NULL;
    if (r->dag != self) {
        PyErr_SetString(PyExc_ValueError, "CompiledDAG.get: the ref is of another DAG");
        return NULL;
    }
    ResultObject *res = PyObject_GC_New(ResultObject, &Result_Type);
    if (!res)
        return NULL;
    memset((char *)res + sizeof(PyObject), 0, sizeof(*res) - sizeof(PyObject));
    res->dag = (DagObject *)Py_NewRef(self);
    res->n = self->noutputs;
    res->values = calloc(res->n ? res->n : 1, sizeof(*res->values));
    PyObject_GC_Track(res);
    if (!res->values) {
        Py_DECREF(res);
        return PyErr_NoMemory();
    }
    if (ref_wait(r, timeout, res->values, "CompiledDAG.get") < 0) {
        Py_DECREF(res);
        return NULL;
    }
    res->ref = r->ref;
    res->held = 1;
    r->state = REF_GOT;
    return (PyObject *)res;
}

static PyObject *Dag_release(DagObject *self, PyObject *arg)
{
    if (!PyObject_TypeCheck(arg, &Ref_Type) || ((RefObject *)arg)->dag != self) {
        PyErr_SetString(PyExc_TypeError, "CompiledDAG.release(ref): a Ref of this DAG");
        return NULL;
    }
    return Ref_release((RefObject *)arg, NULL);
}

static PyObject *Dag_dot(DagObject *self, PyObject *unused)
{
    (void)unused;
    if (adagpy_dag_check(self, "CompiledDAG.dot") < 0)
        return NULL;
    size_t need = 0;
    adag_status_t st = adag_dag_format_dot(self->dag, NULL, 0, &need);
    if (st != ADAG_ERR_TOO_LARGE && st != ADAG_OK)
        return adagpy_raise(st, "CompiledDAG.dot");
    char *buf = malloc(need ? need : 1);
    if (!buf)
        return PyErr_NoMemory();
    st = adag_dag_format_dot(self->dag, buf, need, NULL);
    PyObject *s = st == ADAG_OK ? PyUnicode_FromString(buf) : adagpy_raise(st, "CompiledDAG.dot");
    free(buf);
    return s;
}

static PyObject *Dag_get_name(DagObject *self, void *unused)
{
    (void)unused;
    if (adagpy_dag_check(self, "CompiledDAG.name") < 0)
        return NULL;
    return PyUnicode_FromString(adag_dag_name(self->dag));
}

static PyObject *Dag_get_closed(DagObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(!self->dag || !self->rt->rt);
}

/* ---- Result ---- */

/* The views of the outputs. Device outputs are ready in the order of the
 * DAG's stream: on the emulated device, whose memory the views export to
 * host code, the stream is synchronized first (a CUDA output is made ready
 * for its consumer's stream by its DLPack export, view.c). */
static PyObject *Result_enter(ResultObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->held || self->closed) {
        PyErr_SetString(PyExc_ValueError, "Result: already released");
        return NULL;
    }
    if (adagpy_dag_check(self->dag, "Result.__enter__") < 0)
        return NULL;
    int emulated = 0;
    for (unsigned i = 0; i < self->n; i++)
        emulated |= ADAG_DEVICE_KIND(self->values[i].device) == ADAG_DEV_EMULATED;
    if (emulated && !self->synced) {
        adag_status_t st;
        adag_dag_h dag = self->dag->dag;
        self->dag->nbusy++;
        self->dag->rt->nbusy++;
        Py_BEGIN_ALLOW_THREADS
        st = adag_dag_stream_sync(dag, -1);
        Py_END_ALLOW_THREADS
        self->dag->nbusy--;
        self->dag->rt->nbusy--;
        if (st != ADAG_OK)
            return adagpy_raise(st, "Result.__enter__: adag_dag_stream_sync");
        self->synced = 1;
    }
    self->open = 1;
    return adagpy_views(self);
}

/* Ends the block: the views close; the slots go back now, unless a view
 * is still exported (then when the last export goes). */
static PyObject *Result_exit(ResultObject *self, PyObject *args)
{
    (void)args;
    adagpy_views_close(self);
    Py_RETURN_FALSE;
}

static int Result_traverse(ResultObject *self, visitproc visit, void *arg)
{
    return adagpy_slots_traverse(self, visit, arg);
}

static int Result_clear(ResultObject *self)
{
    Py_CLEAR(self->views);
    return 0;
}

static void Result_dealloc(ResultObject *self)
{
    PyObject_GC_UnTrack(self);
    adagpy_slots_finish(self);
    adagpy_slots_free(self);
    Py_DECREF(self->dag);
    PyObject_GC_Del(self);
}

static PyObject *Result_get_released(ResultObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(!self->held);
}

static PyMethodDef Result_methods[] = {
    {"__enter__", (PyCFunction)Result_enter, METH_NOARGS,
     "The outputs as read-only SlotViews of their slots (buffer protocol and DLPack)."},
    {"__exit__", (PyCFunction)Result_exit, METH_VARARGS, "Releases the views and the ref."},
    {"release", (PyCFunction)Result_exit, METH_VARARGS, "Same as leaving the with block."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Result_getset[] = {
    {"released", (getter)Result_get_released, NULL, "True once the slots went back", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Result_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.Result",
    .tp_basicsize = sizeof(ResultObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The outputs of one execution, in their slots (CompiledDAG.get).",
    .tp_dealloc = (destructor)Result_dealloc,
    .tp_traverse = (traverseproc)Result_traverse,
    .tp_clear = (inquiry)Result_clear,
    .tp_methods = Result_methods,
    .tp_getset = Result_getset,
};

static PyMethodDef Ref_methods[] = {
    {"get", (PyCFunction)(void (*)(void))Ref_get, METH_VARARGS | METH_KEYWORDS,
     "get(timeout=None) -> list of bytes: the outputs copied out; releases the ref"},
    {"release", (PyCFunction)Ref_release, METH_NOARGS, "Drops the execution's result."},
    {"try_get", (PyCFunction)adagpy_ref_try_get, METH_NOARGS,
     "try_get() -> list of bytes, or None when not complete yet: get without waiting"},
    {"ready", (PyCFunction)adagpy_ref_ready, METH_NOARGS,
     "ready() -> bool: whether the outputs are in (without waiting; the ref stays live)"},
    {"wait_async", (PyCFunction)(void (*)(void))adagpy_ref_wait_async,
     METH_VARARGS | METH_KEYWORDS,
     "wait_async(timeout=None): a coroutine giving get()'s list of bytes (adag.aio)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Ref_members[] = {
    {"id", T_ULONGLONG, offsetof(RefObject, ref), READONLY, "the adag_ref_t"},
    {"dag", T_OBJECT, offsetof(RefObject, dag), READONLY, "the CompiledDAG it runs on"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject Ref_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.Ref",
    .tp_basicsize = sizeof(RefObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One execution in flight (CompiledDAG.execute).",
    .tp_dealloc = (destructor)Ref_dealloc,
    .tp_repr = (reprfunc)Ref_repr,
    .tp_as_async = &adagpy_ref_as_async,
    .tp_methods = Ref_methods,
    .tp_members = Ref_members,
};

static PyObject *Dag_reserve(DagObject *self, PyObject *args, PyObject *kw)
{
    return adagpy_dag_reserve(self, args, kw);
}

static PyMethodDef Dag_methods[] = {
    {"execute", (PyCFunction)(void (*)(void))Dag_execute, METH_VARARGS | METH_KEYWORDS,
     "execute(*inputs, block=True) -> Ref: each input (bytes, or a tensor: a buffer with a "
     "format, a DLPack tensor) copied into its slot"},
    {"reserve", (PyCFunction)(void (*)(void))Dag_reserve, METH_VARARGS | METH_KEYWORDS,
     "reserve(block=True) -> Reservation: `with dag.reserve() as r:` writes the inputs in "
     "their slots; the block's exit commits (r.ref)"},
    {"get", (PyCFunction)(void (*)(void))Dag_get, METH_VARARGS | METH_KEYWORDS,
     "get(ref, timeout=None) -> Result: `with dag.get(ref) as outs:` views the slots"},
    {"release", (PyCFunction)Dag_release, METH_O, "release(ref)"},
    {"execute_async", (PyCFunction)(void (*)(void))adagpy_dag_execute_async,
     METH_VARARGS | METH_KEYWORDS,
     "execute_async(*inputs, timeout=None): a coroutine giving the outputs as bytes (adag.aio)"},
    {"fileno", (PyCFunction)adagpy_dag_fileno, METH_NOARGS,
     "The DAG's fd (adag_dag_fd): readable while a result is in and not got nor released"},
    {"stats", (PyCFunction)(void (*)(void))adagpy_dag_stats, METH_VARARGS | METH_KEYWORDS,
     "stats(take=False) -> adag.DagStats: the counts; take=True adds per actor, op, channel"},
    {"write_trace", (PyCFunction)adagpy_dag_write_trace, METH_O,
     "write_trace(path): the trace as Chrome trace-event JSON (a traced DAG)"},
    {"dot", (PyCFunction)Dag_dot, METH_NOARGS, "The compiled graph in Graphviz DOT."},
    {"close", (PyCFunction)Dag_close, METH_NOARGS, "Stops the DAG's loops, frees its channels."},
    {"__enter__", (PyCFunction)Dag_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Dag_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Dag_getset[] = {
    {"name", (getter)Dag_get_name, NULL, "the DAG's name", NULL},
    {"closed", (getter)Dag_get_closed, NULL, "True once closed", NULL},
    {"config", (getter)adagpy_dag_config, NULL,
     "the settings the DAG runs on (adag_dag_config): {\"ADAG_...\": text}", NULL},
    {"execute_timeout", (getter)adagpy_dag_execute_timeout, NULL,
     "seconds a blocking execute waits for room (None: forever)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Dag_members[] = {
    {"ninputs", T_UINT, offsetof(DagObject, ninputs), READONLY, "input fields"},
    {"noutputs", T_UINT, offsetof(DagObject, noutputs), READONLY, "outputs"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject Dag_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.CompiledDAG",
    .tp_basicsize = sizeof(DagObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled DAG (Graph.compile).",
    .tp_dealloc = (destructor)Dag_dealloc,
    .tp_methods = Dag_methods,
    .tp_getset = Dag_getset,
    .tp_members = Dag_members,
};
