/*
 * adag.Call: what a Python method can ask of the call it runs in
 * (adag.current_call()): the execution's ref, the actor's name and device,
 * the device stream, and output slots to write in place. Valid only while
 * the method runs (pyactor.c invalidates it when the method returns).
 */
#include "adagpy.h"

#include <string.h>

static CallObject *call_check(CallObject *self)
{
    if (self->call)
        return self;
    PyErr_SetString(PyExc_RuntimeError,
                    "adag.Call: used after its method returned (a Call is valid only during "
                    "the method that got it from adag.current_call())");
    return NULL;
}

static PyObject *current_call(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    if (!adagpy_cur_call) {
        PyErr_SetString(PyExc_RuntimeError,
                        "adag.current_call(): no actor method runs on this thread");
        return NULL;
    }
    if (!adagpy_cur_obj) {
        CallObject *c = PyObject_New(CallObject, &Call_Type);
        if (!c)
            return NULL;
        c->call = adagpy_cur_call;
        c->written = 0;
        memset(c->views, 0, sizeof(c->views));
        adagpy_cur_obj = c; /* the running method's reference, dropped at its end */
    }
    return Py_NewRef(adagpy_cur_obj);
}

PyMethodDef adagpy_call_functions[] = {
    {"current_call", current_call, METH_NOARGS,
     "current_call() -> Call: the call the actor method running on this thread serves."},
    {NULL, NULL, 0, NULL},
};

/* output(i, shape, dtype=None): a writable view of return i's slot. With
 * a dtype, a tensor of that shape (a numpy array); without, `shape` bytes
 * (an int; a writable memoryview). The method then returns None (or the
 * view) for that return. */
static PyObject *Call_output(CallObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"index", "shape", "dtype", NULL};
    unsigned i;
    PyObject *shape, *dtype = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "IO|O:output", kwlist, &i, &shape, &dtype) ||
        !call_check(self))
        return NULL;
    if (i >= ADAG_MAX_RETURNS) {
        PyErr_Format(PyExc_IndexError, "Call.output: return %u: at most %d returns", i,
                     ADAG_MAX_RETURNS);
        return NULL;
    }
    void *buf = NULL;
    adag_status_t st;
    PyObject *view = NULL;
    if (dtype == Py_None) {
        Py_ssize_t n = PyLong_AsSsize_t(shape);
        if (n < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "Call.output: %zd bytes", n);
            return NULL;
        }
        if ((st = adag_call_output(self->call, i, (size_t)n, &buf)) != ADAG_OK)
            return adagpy_raise(st, "Call.output");
        view = PyMemoryView_FromMemory(n ? buf : (char *)"", n, PyBUF_WRITE);
    } else {
        adag_dtype_t dt;
        int64_t dims[ADAG_MAX_DIMS];
        unsigned nd;
        if (adagpy_dtype_parse(dtype, &dt, "Call.output") < 0 ||
            adagpy_shape_parse(shape, dims, &nd, "Call.output") < 0)
            return NULL;
        if ((st = adag_call_output_tensor(self->call, i, dt, (unsigned)nd, dims, &buf)) != ADAG_OK)
            return adagpy_raise(st, "Call.output");
        size_t size = adag_dtype_size(dt);
        for (unsigned d = 0; d < nd; d++)
            size *= (size_t)dims[d];
        if (ADAG_DEVICE_KIND(adag_call_device(self->call)) == ADAG_DEV_CUDA)
            return PyErr_Format(PyExc_TypeError,
                                "Call.output: return %u is in cuda memory, which a numpy array "
                                "cannot view", i);
        view = adagpy_array_view(buf, size, dt, (unsigned)nd, dims, 1);
    }
    if (!view)
        return NULL;
    self->written |= 1u << i;
    Py_XSETREF(self->views[i], Py_NewRef(view));
    return view;
}

static PyObject *Call_get_ref(CallObject *self, void *unused)
{
    (void)unused;
    return call_check(self) ? PyLong_FromUnsignedLongLong(adag_call_ref(self->call)) : NULL;
}

static PyObject *Call_get_actor(CallObject *self, void *unused)
{
    (void)unused;
    return call_check(self) ? PyUnicode_FromString(adag_call_actor_name(self->call)) : NULL;
}

static PyObject *Call_get_device(CallObject *self, void *unused)
{
    (void)unused;
    if (!call_check(self))
        return NULL;
    return adagpy_device_str(adag_call_device(self->call));
}

static PyObject *Call_get_stream(CallObject *self, void *unused)
{
    (void)unused;
    if (!call_check(self))
        return NULL;
    void *s = adag_call_stream(self->call);
    return s ? PyLong_FromVoidPtr(s) : Py_NewRef(Py_None);
}

static void Call_dealloc(CallObject *self)
{
    for (unsigned i = 0; i < ADAG_MAX_RETURNS; i++)
        Py_XDECREF(self->views[i]);
    PyObject_Free(self);
}

static PyMethodDef Call_methods[] = {
    {"output", (PyCFunction)(void (*)(void))Call_output, METH_VARARGS | METH_KEYWORDS,
     "output(index, shape, dtype=None): a writable view of return `index`'s slot"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Call_getset[] = {
    {"ref", (getter)Call_get_ref, NULL, "the execution's ref", NULL},
    {"actor", (getter)Call_get_actor, NULL, "the actor's name", NULL},
    {"device", (getter)Call_get_device, NULL, "the actor's device: \"host\", \"emu:0\", ...",
     NULL},
    {"stream", (getter)Call_get_stream, NULL,
     "the method's device stream as an int (a cudaStream_t on cuda), None without a device",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Call_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.Call",
    .tp_basicsize = sizeof(CallObject),
    .tp_dealloc = (destructor)Call_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The call a Python actor method serves (adag.current_call()).",
    .tp_methods = Call_methods,
    .tp_getset = Call_getset,
};
