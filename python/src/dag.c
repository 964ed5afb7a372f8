/*
 * adag._adag: compiled DAGs. execute() copies buffer-protocol inputs into
 * the slots and returns a Ref; Ref.get() copies the outputs out as bytes
 * and releases the ref; CompiledDAG.get(ref) gives a Result whose `with`
 * block views the slots themselves (read-only memoryviews), released at
 * block exit, or, while a view is still exported (a numpy array made from
 * it), when the last export goes.
 */
#include "adagpy.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    DagObject *dag;
    adag_ref_t ref;
    int released;
    unsigned n;
    adag_value_t *values;
    PyObject *views; /* the memoryviews handed out by __enter__ (a tuple), or NULL */
} ResultObject;

typedef struct {
    PyObject_HEAD
    ResultObject *result; /* keeps the slot (and its ref) alive */
    unsigned i;
} SlotObject;

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
    Py_buffer bufs[MAX_INPUTS];
    adag_value_t in[MAX_INPUTS];
    Py_ssize_t got = 0;
    PyObject *result = NULL;
    for (; got < n; got++) {
        PyObject *o = PyTuple_GET_ITEM(args, got);
        if (PyObject_GetBuffer(o, &bufs[got], PyBUF_C_CONTIGUOUS) < 0) {
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError,
                             "CompiledDAG.execute: input %zd is %.80s, not an object with the "
                             "buffer protocol (bytes, bytearray, memoryview, a numpy array)",
                             got, Py_TYPE(o)->tp_name);
            }
            goto out;
        }
        memset(&in[got], 0, sizeof(in[got]));
        in[got].data = bufs[got].buf;
        in[got].size = (size_t)bufs[got].len;
    }
    RefObject *r = PyObject_New(RefObject, &Ref_Type);
    if (!r)
        goto out;
    r->dag = (DagObject *)Py_NewRef(self);
    r->state = REF_RELEASED;
    self->nbusy++;
    self->rt->nbusy++;
    adag_status_t st = adagpy_dag_execute(self, n ? in : NULL, (unsigned)n, block, &r->ref);
    self->nbusy--;
    self->rt->nbusy--;
    if (st != ADAG_OK) {
        Py_DECREF(r);
        if (st != ADAGPY_RAISED)
            adagpy_raise(st, "CompiledDAG.execute");
        goto out;
    }
    r->state = REF_LIVE;
    result = (PyObject *)r;
out:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&bufs[i]);
    return result;
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
    res->dag = (DagObject *)Py_NewRef(self);
    res->released = 1;
    res->views = NULL;
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
    res->released = 0;
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

/* ---- Result and its slots ---- */

static void result_release(ResultObject *self)
{
    if (self->released)
        return;
    self->released = 1;
    if (self->dag->dag && self->dag->rt->rt)
        adag_dag_release(self->dag->dag, self->ref);
}

static PyObject *Result_enter(ResultObject *self, PyObject *unused)
{
    (void)unused;
    if (self->released) {
        PyErr_SetString(PyExc_ValueError, "Result: already released");
        return NULL;
    }
    if (self->views)
        return Py_NewRef(self->views);
    PyObject *views = PyTuple_New(self->n);
    for (unsigned i = 0; views && i < self->n; i++) {
        SlotObject *s = PyObject_GC_New(SlotObject, &Slot_Type);
        if (!s) {
            Py_CLEAR(views);
            break;
        }
        s->result = (ResultObject *)Py_NewRef(self);
        s->i = i;
        PyObject_GC_Track(s);
        PyObject *mv = PyMemoryView_FromObject((PyObject *)s);
        Py_DECREF(s);
        if (!mv)
            Py_CLEAR(views);
        else
            PyTuple_SET_ITEM(views, i, mv);
    }
    self->views = views;
    return views ? Py_NewRef(views) : NULL;
}

/* Releases the views; the slots go back now, unless a view is still
 * exported (then when the last export goes, which frees this Result). */
static PyObject *Result_exit(ResultObject *self, PyObject *args)
{
    (void)args;
    int held = 0;
    PyObject *views = self->views;
    self->views = NULL;
    for (Py_ssize_t i = 0; views && i < PyTuple_GET_SIZE(views); i++) {
        PyObject *r = PyObject_CallMethod(PyTuple_GET_ITEM(views, i), "release", NULL);
        if (!r && PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            held = 1;
        } else if (!r) {
            Py_DECREF(views);
            return NULL;
        }
        Py_XDECREF(r);
    }
    Py_XDECREF(views);
    if (!held)
        result_release(self);
    Py_RETURN_FALSE;
}

static int Result_traverse(ResultObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->views);
    return 0;
}

static int Result_clear(ResultObject *self)
{
    Py_CLEAR(self->views);
    return 0;
}

static void Result_dealloc(ResultObject *self)
{
    PyObject_GC_UnTrack(self);
    Result_clear(self);
    result_release(self);
    free(self->values);
    Py_DECREF(self->dag);
    PyObject_GC_Del(self);
}

static PyObject *Result_get_released(ResultObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->released);
}

static int Slot_getbuffer(SlotObject *self, Py_buffer *view, int flags)
{
    ResultObject *r = self->result;
    if (r->released || !r->dag->dag) {
        PyErr_SetString(PyExc_BufferError, "adag: the result was released");
        view->obj = NULL;
        return -1;
    }
    const adag_value_t *v = &r->values[self->i];
    return PyBuffer_FillInfo(view, (PyObject *)self, (void *)v->data, (Py_ssize_t)v->size, 1,
                             flags);
}

static int Slot_traverse(SlotObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->result);
    return 0;
}

static int Slot_clear(SlotObject *self)
{
    Py_CLEAR(self->result);
    return 0;
}

static void Slot_dealloc(SlotObject *self)
{
    PyObject_GC_UnTrack(self);
    Slot_clear(self);
    PyObject_GC_Del(self);
}

static PyBufferProcs Slot_as_buffer = {.bf_getbuffer = (getbufferproc)Slot_getbuffer};

PyTypeObject Slot_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag._Slot",
    .tp_basicsize = sizeof(SlotObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One output slot of a Result, exported read-only through the buffer protocol.",
    .tp_dealloc = (destructor)Slot_dealloc,
    .tp_traverse = (traverseproc)Slot_traverse,
    .tp_clear = (inquiry)Slot_clear,
    .tp_as_buffer = &Slot_as_buffer,
};

static PyMethodDef Result_methods[] = {
    {"__enter__", (PyCFunction)Result_enter, METH_NOARGS,
     "The outputs as read-only memoryviews of their slots."},
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

static PyMethodDef Dag_methods[] = {
    {"execute", (PyCFunction)(void (*)(void))Dag_execute, METH_VARARGS | METH_KEYWORDS,
     "execute(*inputs, block=True) -> Ref: each input copied into its slot"},
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
