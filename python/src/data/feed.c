/*
 * adag._data: a source feeding a compiled DAG (ADAG_DATA_PARAM_DAG). Its
 * threads write each batch straight into an execution's input slot and
 * commit it; Source.next hands out the execution started for the next
 * batch (adag_data_next_exec) as an _Execution, whose get() waits for the
 * outputs (adag_dag_get), copies them out as bytes and releases the
 * execution (adag_dag_release), like adag.Ref.get (adag/data.py wraps it
 * as adag.data.Execution, with the batch's place and timeouts in seconds).
 *
 * The source holds its DAG open: from open to close it counts itself in
 * the DagObject's nbusy and its runtime's (adagpy.h), so CompiledDAG.close
 * and Runtime.close refuse with BusyError while the source's threads use
 * the DAG (the data stage's rule: close the source before the DAG).
 */
#include "datapy.h"

#include <stdlib.h>

typedef struct {
    PyObject_HEAD
    DagObject *dag;
    adag_ref_t ref;
    int released;
} ExecutionObject;

void datapy_dag_hold(DagObject *d, int hold)
{
    d->nbusy += hold ? 1 : -1;
    d->rt->nbusy += hold ? 1 : -1;
}

typedef struct {
    SourceObject *s;
    adag_ref_t ref;
    adag_data_batch_t *b;
} next_exec_t;

static adag_status_t next_exec_call(void *arg, int ms)
{
    next_exec_t *w = arg;
    return adag_data_next_exec(w->s->src, &w->ref, w->b, ms);
}

PyObject *datapy_next_exec(SourceObject *s, int ms, adag_data_batch_t *b)
{
    ExecutionObject *ex = PyObject_New(ExecutionObject, &Execution_Type);
    if (!ex)
        return NULL;
    ex->dag = (DagObject *)Py_NewRef(s->dag);
    ex->released = 1;
    next_exec_t w = {.s = s, .b = b};
    adag_status_t st;
    s->busy = 1;
    int rc = datapy_wait(next_exec_call, &w, ms, &st);
    s->busy = 0;
    if (rc < 0 || st != ADAG_OK) {
        if (rc == 0 && st == ADAG_ERR_TIMEOUT)
            datapy_fail(st, "Source.next: no execution of DAG %s started within %d ms",
                        adag_dag_name(s->dag->dag), ms);
        else if (rc == 0)
            datapy_raise_failure(s, st, "Source.next");
        Py_DECREF(ex);
        return NULL;
    }
    ex->ref = w.ref;
    ex->released = 0;
    return (PyObject *)ex;
}

static int execution_release(ExecutionObject *ex)
{
    if (ex->released)
        return 0;
    ex->released = 1;
    if (!ex->dag->dag || !ex->dag->rt->rt)
        return 0; /* the DAG was destroyed, and its executions with it */
    adag_status_t st = adag_dag_release(ex->dag->dag, ex->ref);
    if (st != ADAG_OK) {
        datapy_raise(st, "Execution.release");
        return -1;
    }
    return 0;
}

typedef struct {
    adag_dag_h dag;
    adag_ref_t ref;
    adag_value_t *values;
    unsigned n;
} get_t;

static adag_status_t get_call(void *arg, int ms)
{
    get_t *g = arg;
    return adag_dag_get(g->dag, g->ref, g->values, g->n, ms);
}

static PyObject *Execution_get(ExecutionObject *self, PyObject *arg)
{
    long ms = PyLong_AsLong(arg);
    if (ms == -1 && PyErr_Occurred())
        return NULL;
    if (ms < -1 || ms > 0x7fffffffL) {
        PyErr_Format(PyExc_ValueError, "Execution.get: timeout %ld ms", ms);
        return NULL;
    }
    DagObject *d = self->dag;
    if (!d->dag || !d->rt->rt)
        return datapy_fail(ADAG_ERR_CLOSED, "Execution.get: the DAG is closed");
    if (self->released)
        return datapy_fail(ADAG_ERR_INVALID, "Execution.get: execution %llu was released",
                           (unsigned long long)self->ref);
    get_t g = {.dag = d->dag, .ref = self->ref, .n = d->noutputs};
    if (!(g.values = calloc(g.n ? g.n : 1, sizeof(*g.values))))
        return PyErr_NoMemory();
    adag_status_t st;
    PyObject *list = NULL;
    datapy_dag_hold(d, 1);
    int rc = datapy_wait(get_call, &g, (int)ms, &st);
    datapy_dag_hold(d, 0);
    if (rc < 0)
        goto out;
    if (st != ADAG_OK) {
        datapy_raise(st, "Execution.get");
        if (st != ADAG_ERR_TIMEOUT) { /* a failed execution is over: give it back */
            PyObject *t, *v, *tb;
            PyErr_Fetch(&t, &v, &tb);
            adag_dag_release(d->dag, self->ref);
            self->released = 1;
            PyErr_Restore(t, v, tb);
        }
        goto out;
    }
    list = PyList_New(g.n);
    for (unsigned i = 0; list && i < g.n; i++) {
        PyObject *b = PyBytes_FromStringAndSize(g.values[i].data, (Py_ssize_t)g.values[i].size);
        if (!b)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, b);
    }
    if (execution_release(self) < 0)
        Py_CLEAR(list);
out:
    free(g.values);
    return list;
}

static PyObject *Execution_release(ExecutionObject *self, PyObject *unused)
{
    (void)unused;
    return execution_release(self) < 0 ? NULL : Py_NewRef(Py_None);
}

static void Execution_dealloc(ExecutionObject *self)
{
    if (execution_release(self) < 0)
        PyErr_WriteUnraisable((PyObject *)self);
    Py_DECREF(self->dag);
    PyObject_Free(self);
}

static PyObject *Execution_repr(ExecutionObject *self)
{
    return PyUnicode_FromFormat("<adag.data._Execution %llu%s>", (unsigned long long)self->ref,
                                self->released ? " released" : "");
}

static PyObject *Execution_get_released(ExecutionObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->released);
}

static PyMethodDef Execution_methods[] = {
    {"get", (PyCFunction)Execution_get, METH_O,
     "get(timeout_ms) -> list of bytes: waits for the outputs (-1: forever), copies them, "
     "releases the execution"},
    {"release", (PyCFunction)Execution_release, METH_NOARGS, "Drops the execution's result."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Execution_members[] = {
    {"id", T_ULONGLONG, offsetof(ExecutionObject, ref), READONLY, "the adag_ref_t"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef Execution_getset[] = {
    {"released", (getter)Execution_get_released, NULL, "True once released", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Execution_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.data._Execution",
    .tp_basicsize = sizeof(ExecutionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An execution of the fed DAG started by the source with a batch as its input "
              "(adag_data_next_exec); get() its outputs, or release() it.",
    .tp_dealloc = (destructor)Execution_dealloc,
    .tp_repr = (reprfunc)Execution_repr,
    .tp_methods = Execution_methods,
    .tp_members = Execution_members,
    .tp_getset = Execution_getset,
};
