/*
 * adag._adag: zero-copy inputs. dag.reserve() reserves the next execution
 * (adag_dag_reserve) and returns a Reservation, whose writable SlotViews
 * are the input slots themselves:
 *
 *     with dag.reserve() as r:
 *         np.copyto(np.from_dlpack(r.tensor(0, "float32", (4, 8))), x)
 *         n = fill(r[1]); r.bytes(1, n)
 *     ref = r.ref
 *
 * What each input holds is declared, as adag_dag_commit needs it: a field
 * declared with a static dtype and shape (Graph.tensor) is that tensor
 * from the start; any other is declared by r.tensor(i, dtype, shape) or
 * r.bytes(i, size), before or after writing it (r[i] shows the declared
 * value, or the whole slot as bytes until then). Leaving the block
 * commits (a commit the library refuses is raised and the reservation
 * cancelled); an exception leaving it cancels (adag_dag_cancel) and goes
 * on. The views are closed after the block; one still exported at its end
 * (an array of np.asarray or np.from_dlpack alive) would let Python write
 * a slot the DAG reads, so the commit is refused (BufferError) and the
 * reservation cancelled once the last export goes.
 *
 * Inputs on the driver's device: r[i] is the pinned host staging of the
 * device slot (adag_input_view_t.data), and the commit copies it to the
 * device on the DAG's stream.
 */
#include "adagpy.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    SlotSetObject s; /* first: a Reservation is a slot set */
    PyObject *ref;   /* the Ref once committed */
    int cancelled;
} ReservationObject;

PyObject *adagpy_dag_reserve(DagObject *d, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"block", NULL};
    int block = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$p:reserve", kwlist, &block))
        return NULL;
    if (adagpy_dag_check(d, "CompiledDAG.reserve") < 0)
        return NULL;
    ReservationObject *r = PyObject_GC_New(ReservationObject, &Reservation_Type);
    if (!r)
        return NULL;
    memset((char *)r + sizeof(PyObject), 0, sizeof(*r) - sizeof(PyObject));
    SlotSetObject *s = &r->s;
    s->dag = (DagObject *)Py_NewRef(d);
    s->n = d->ninputs;
    s->writable = 1;
    PyObject_GC_Track(r);
    size_t n = s->n ? s->n : 1;
    s->values = calloc(n, sizeof(*s->values));
    s->inputs = calloc(n, sizeof(*s->inputs));
    s->declared = calloc(n, 1);
    if (!s->values || !s->inputs || !s->declared) {
        Py_DECREF(r);
        return PyErr_NoMemory();
    }
    adag_status_t st;
    adag_dag_h dag = d->dag;
    adag_input_view_t *views = s->n ? s->inputs : NULL;
    unsigned nin = s->n;
    adag_ref_t ref = 0;
    d->nbusy++;
    d->rt->nbusy++;
    Py_BEGIN_ALLOW_THREADS
    st = adag_dag_reserve(dag, block ? 0 : ADAG_EXECUTE_NONBLOCK, views, nin, &ref);
    Py_END_ALLOW_THREADS
    d->nbusy--;
    d->rt->nbusy--;
    if (st != ADAG_OK) {
        Py_DECREF(r);
        return adagpy_raise(st, "CompiledDAG.reserve");
    }
    s->ref = ref;
    s->held = 1;
    s->open = 1;
    for (unsigned i = 0; i < s->n; i++) {
        const adag_input_view_t *in = &s->inputs[i];
        adag_value_t *v = &s->values[i];
        unsigned both = ADAG_INPUT_STATIC_DTYPE | ADAG_INPUT_STATIC_SHAPE;
        if ((in->flags & both) == both) {
            *v = adag_value_tensor(in->data, in->dtype, in->ndim, in->shape);
            s->declared[i] = 1;
        } else { /* the whole slot, as bytes, until declared */
            v->data = in->data;
            v->size = in->capacity;
        }
    }
    return (PyObject *)r;
}

/* 0 when r may be written, else ValueError. */
static int reservation_check(ReservationObject *r, const char *what)
{
    if (r->s.held && r->s.open)
        return adagpy_dag_check(r->s.dag, what);
    PyErr_Format(PyExc_ValueError, "%s: the reservation of ref %llu was %s", what,
                 (unsigned long long)r->s.ref,
                 r->ref ? "committed" : r->cancelled ? "cancelled" : "closed");
    return -1;
}

static int input_index(ReservationObject *r, Py_ssize_t i, const char *what)
{
    if (i >= 0 && (size_t)i < r->s.n)
        return 0;
    PyErr_Format(PyExc_IndexError, "%s: input %zd: the DAG has %u inputs", what, i, r->s.n);
    return -1;
}

/* The view of input i (a new reference). */
static PyObject *view_at(ReservationObject *r, Py_ssize_t i)
{
    PyObject *views = adagpy_views(&r->s);
    if (!views)
        return NULL;
    PyObject *v = Py_NewRef(PyTuple_GET_ITEM(views, i));
    Py_DECREF(views);
    return v;
}

/* Sets input i's value to commit: `value`, checked against the slot. */
static PyObject *declare(ReservationObject *r, Py_ssize_t i, adag_value_t value, const char *what)
{
    const adag_input_view_t *in = &r->s.inputs[i];
    if (value.size == SIZE_MAX || value.size > in->capacity) {
        char bytes[32];
        snprintf(bytes, sizeof(bytes), value.size == SIZE_MAX ? "more than SIZE_MAX" : "%zu",
                 value.size);
        adag_fail(ADAG_ERR_TOO_LARGE,
                  "%s: input %zd of ref %llu is %s bytes, larger than its slot of %zu bytes", what,
                  i, (unsigned long long)r->s.ref, bytes, in->capacity);
        return adagpy_raise(ADAG_ERR_TOO_LARGE, what);
    }
    r->s.values[i] = value;
    r->s.declared[i] = 1;
    return view_at(r, i);
}

static PyObject *Reservation_tensor(ReservationObject *r, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"index", "dtype", "shape", NULL};
    Py_ssize_t i;
    PyObject *dtype_o = Py_None, *shape_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|OO:tensor", kwlist, &i, &dtype_o, &shape_o))
        return NULL;
    if (reservation_check(r, "Reservation.tensor") < 0 ||
        input_index(r, i, "Reservation.tensor") < 0)
        return NULL;
    const adag_input_view_t *in = &r->s.inputs[i];
    adag_dtype_t dtype = in->dtype;
    int64_t shape[ADAG_MAX_DIMS];
    unsigned ndim = in->ndim;
    memcpy(shape, in->shape, sizeof(shape));
    if (dtype_o != Py_None) {
        if (adagpy_dtype_parse(dtype_o, &dtype, "Reservation.tensor") < 0)
            return NULL;
    } else if (!(in->flags & ADAG_INPUT_STATIC_DTYPE)) {
        PyErr_Format(PyExc_TypeError,
                     "Reservation.tensor: input %zd declares no static dtype: give dtype", i);
        return NULL;
    }
    if (shape_o != Py_None) {
        if (adagpy_shape_parse(shape_o, shape, &ndim, "Reservation.tensor") < 0)
            return NULL;
    } else if (!(in->flags & ADAG_INPUT_STATIC_SHAPE)) {
        PyErr_Format(PyExc_TypeError,
                     "Reservation.tensor: input %zd declares no static shape: give shape", i);
        return NULL;
    }
    return declare(r, i, adag_value_tensor(in->data, dtype, ndim, shape), "Reservation.tensor");
}

static PyObject *Reservation_bytes(ReservationObject *r, PyObject *args)
{
    Py_ssize_t i, size;
    if (!PyArg_ParseTuple(args, "nn:bytes", &i, &size))
        return NULL;
    if (reservation_check(r, "Reservation.bytes") < 0 ||
        input_index(r, i, "Reservation.bytes") < 0)
        return NULL;
    if (size < 0) {
        PyErr_Format(PyExc_ValueError, "Reservation.bytes: input %zd: size %zd is negative", i,
                     size);
        return NULL;
    }
    adag_value_t v = {.data = r->s.inputs[i].data, .size = (size_t)size};
    return declare(r, i, v, "Reservation.bytes");
}

static PyObject *commit(ReservationObject *r)
{
    SlotSetObject *s = &r->s;
    if (reservation_check(r, "Reservation.commit") < 0)
        return NULL;
    if (s->nexports) {
        PyErr_Format(PyExc_BufferError,
                     "Reservation.commit: %ld exports of its views are alive (arrays of "
                     "np.asarray or np.from_dlpack): they could write the slots the DAG reads; "
                     "drop them first",
                     s->nexports);
        return NULL;
    }
    for (unsigned i = 0; i < s->n; i++)
        if (!s->declared[i]) {
            PyErr_Format(PyExc_ValueError,
                         "Reservation.commit: input %u was not declared: say what it holds with "
                         "r.tensor(%u, dtype, shape) or r.bytes(%u, size)",
                         i, i, i);
            return NULL;
        }
    adag_status_t st;
    adag_dag_h dag = s->dag->dag;
    adag_ref_t ref = s->ref;
    const adag_value_t *values = s->n ? s->values : NULL;
    unsigned n = s->n;
    s->dag->nbusy++;
    s->dag->rt->nbusy++;
    Py_BEGIN_ALLOW_THREADS
    st = adag_dag_commit(dag, ref, values, n);
    Py_END_ALLOW_THREADS
    s->dag->nbusy--;
    s->dag->rt->nbusy--;
    if (st != ADAG_OK)
        return adagpy_raise(st, "Reservation.commit"); /* still reserved: fix it, or cancel */
    s->held = 0;
    adagpy_views_close(s);
    if (!(r->ref = adagpy_ref_new(s->dag, ref)))
        return NULL;
    return Py_NewRef(r->ref);
}

static PyObject *Reservation_commit(ReservationObject *r, PyObject *unused)
{
    (void)unused;
    return commit(r);
}

static PyObject *Reservation_cancel(ReservationObject *r, PyObject *unused)
{
    (void)unused;
    if (!r->s.held)
        Py_RETURN_NONE;
    if (r->s.nexports) {
        PyErr_Format(PyExc_BufferError,
                     "Reservation.cancel: %ld exports of its views are alive; drop them first",
                     r->s.nexports);
        return NULL;
    }
    r->cancelled = 1;
    adagpy_views_close(&r->s); /* no export: cancels now */
    Py_RETURN_NONE;
}

static PyObject *Reservation_enter(ReservationObject *r, PyObject *unused)
{
    (void)unused;
    if (reservation_check(r, "Reservation.__enter__") < 0)
        return NULL;
    return Py_NewRef(r);
}

/* Commits, or (an exception, a refused commit) cancels; an export alive
 * at the end defers the cancel to its release. */
static PyObject *Reservation_exit(ReservationObject *r, PyObject *args)
{
    PyObject *et = PyTuple_GET_SIZE(args) ? PyTuple_GET_ITEM(args, 0) : Py_None;
    SlotSetObject *s = &r->s;
    if (!s->held)
        Py_RETURN_FALSE; /* committed or cancelled inside the block */
    if (et != Py_None || !s->open) {
        r->cancelled = 1;
        adagpy_views_close(s);
        Py_RETURN_FALSE;
    }
    PyObject *ref = commit(r);
    if (ref) {
        Py_DECREF(ref);
        Py_RETURN_FALSE;
    }
    r->cancelled = 1;
    adagpy_views_close(s);
    return NULL;
}

static PyObject *Reservation_get_ref(ReservationObject *r, void *unused)
{
    (void)unused;
    if (r->ref)
        return Py_NewRef(r->ref);
    PyErr_Format(PyExc_ValueError, "Reservation.ref: ref %llu was %s",
                 (unsigned long long)r->s.ref,
                 r->cancelled ? "cancelled" : "not committed yet (leave the block, or commit())");
    return NULL;
}

static PyObject *Reservation_get_id(ReservationObject *r, void *unused)
{
    (void)unused;
    return PyLong_FromUnsignedLongLong(r->s.ref);
}

static PyObject *Reservation_get_capacities(ReservationObject *r, void *unused)
{
    (void)unused;
    PyObject *t = PyTuple_New(r->s.n);
    for (unsigned i = 0; t && i < r->s.n; i++) {
        PyObject *c = PyLong_FromSize_t(r->s.inputs[i].capacity);
        if (!c)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, c);
    }
    return t;
}

static PyObject *Reservation_get_state(ReservationObject *r, void *unused)
{
    (void)unused;
    return PyUnicode_FromString(r->ref         ? "committed"
                                : r->cancelled ? (r->s.held ? "cancelling" : "cancelled")
                                               : "reserved");
}

static Py_ssize_t Reservation_len(ReservationObject *r)
{
    return r->s.n;
}

static PyObject *Reservation_item(ReservationObject *r, Py_ssize_t i)
{
    if (input_index(r, i, "Reservation[i]") < 0 || reservation_check(r, "Reservation[i]") < 0)
        return NULL;
    return view_at(r, i);
}

static int Reservation_traverse(ReservationObject *r, visitproc visit, void *arg)
{
    Py_VISIT(r->ref);
    return adagpy_slots_traverse(&r->s, visit, arg);
}

static int Reservation_clear(ReservationObject *r)
{
    Py_CLEAR(r->ref);
    Py_CLEAR(r->s.views);
    return 0;
}

static void Reservation_dealloc(ReservationObject *r)
{
    PyObject_GC_UnTrack(r);
    adagpy_slots_finish(&r->s); /* never committed: cancelled */
    Reservation_clear(r);
    adagpy_slots_free(&r->s);
    Py_XDECREF(r->s.dag);
    PyObject_GC_Del(r);
}

static PySequenceMethods Reservation_as_sequence = {
    .sq_length = (lenfunc)Reservation_len,
    .sq_item = (ssizeargfunc)Reservation_item,
};

static PyMethodDef Reservation_methods[] = {
    {"tensor", (PyCFunction)(void (*)(void))Reservation_tensor, METH_VARARGS | METH_KEYWORDS,
     "tensor(i, dtype=None, shape=None) -> SlotView: input i holds this tensor (a static "
     "dtype or shape of its field by default)"},
    {"bytes", (PyCFunction)Reservation_bytes, METH_VARARGS,
     "bytes(i, size) -> SlotView: input i holds `size` bytes"},
    {"commit", (PyCFunction)Reservation_commit, METH_NOARGS,
     "commit() -> Ref: starts the execution with the inputs as written (the block's exit "
     "does it)"},
    {"cancel", (PyCFunction)Reservation_cancel, METH_NOARGS, "Drops the reservation."},
    {"__enter__", (PyCFunction)Reservation_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Reservation_exit, METH_VARARGS,
     "Commits; an exception cancels."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Reservation_getset[] = {
    {"ref", (getter)Reservation_get_ref, NULL, "the Ref, once committed", NULL},
    {"id", (getter)Reservation_get_id, NULL, "the reserved adag_ref_t", NULL},
    {"capacities", (getter)Reservation_get_capacities, NULL, "each input slot's bytes", NULL},
    {"state", (getter)Reservation_get_state, NULL,
     "\"reserved\", \"committed\", \"cancelling\" (an export alive), \"cancelled\"", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Reservation_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.Reservation",
    .tp_basicsize = sizeof(ReservationObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One reserved execution's input slots, written in place (CompiledDAG.reserve).",
    .tp_dealloc = (destructor)Reservation_dealloc,
    .tp_traverse = (traverseproc)Reservation_traverse,
    .tp_clear = (inquiry)Reservation_clear,
    .tp_as_sequence = &Reservation_as_sequence,
    .tp_methods = Reservation_methods,
    .tp_getset = Reservation_getset,
};
