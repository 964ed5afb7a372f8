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
        c->args = NULL;
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
        int32_t dev = adag_call_output_device(self->call, i);
        if (ADAG_DEVICE_KIND(dev) == ADAG_DEV_CUDA) {
            /* a return declared a tensor of a cuda actor is in device
             * memory, which numpy cannot view: DLPack */
            adag_value_t v = adag_value_tensor(buf, dt, nd, dims);
            v.device = dev;
            view = adagpy_argview_new(&v, i, adag_call_stream(self->call), 1);
        } else {
            view = adagpy_array_view(buf, size, dt, nd, dims, 1);
        }
    }
    if (!view)
        return NULL;
    self->written |= 1u << i;
    Py_XSETREF(self->views[i], Py_NewRef(view));
    return view;
}

/* arg(i): argument i as an ArgView (DLPack), valid during the method. */
static PyObject *Call_arg(CallObject *self, PyObject *arg)
{
    unsigned long i = PyLong_AsUnsignedLong(arg);
    if ((i == (unsigned long)-1 && PyErr_Occurred()) || !call_check(self))
        return NULL;
    adag_value_t v;
    adag_status_t st = adag_call_arg(self->call, (unsigned)i, &v);
    if (st != ADAG_OK)
        return adagpy_raise(st, "Call.arg");
    if (!self->args && !(self->args = PyList_New(0)))
        return NULL;
    PyObject *a = adagpy_argview_new(&v, (unsigned)i, adag_call_stream(self->call), 0);
    if (a && PyList_Append(self->args, a) < 0)
        Py_CLEAR(a);
    return a;
}

/* output_device(i): where return i's slot is ("host", "emu:0", "cuda:1"). */
static PyObject *Call_output_device(CallObject *self, PyObject *arg)
{
    unsigned long i = PyLong_AsUnsignedLong(arg);
    if ((i == (unsigned long)-1 && PyErr_Occurred()) || !call_check(self))
        return NULL;
    return adagpy_device_str(adag_call_output_device(self->call, (unsigned)i));
}

/* The method returned: what it was given stops being valid. */
void adagpy_call_end(CallObject *self)
{
    self->call = NULL;
    for (unsigned i = 0; i < ADAG_MAX_RETURNS; i++) {
        if (self->views[i] && Py_IS_TYPE(self->views[i], &ArgView_Type))
            adagpy_argview_end(self->views[i]);
        Py_CLEAR(self->views[i]);
    }
    for (Py_ssize_t i = 0; self->args && i < PyList_GET_SIZE(self->args); i++)
        adagpy_argview_end(PyList_GET_ITEM(self->args, i));
    Py_CLEAR(self->args);
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
    Py_XDECREF(self->args);
    PyObject_Free(self);
}

static PyMethodDef Call_methods[] = {
    {"output", (PyCFunction)(void (*)(void))Call_output, METH_VARARGS | METH_KEYWORDS,
     "output(index, shape, dtype=None): a writable view of return `index`'s slot"},
    {"output_device", (PyCFunction)Call_output_device, METH_O,
     "output_device(index) -> str: where return `index`'s slot is (\"host\", \"cuda:0\", ...)"},
    {"arg", (PyCFunction)Call_arg, METH_O,
     "arg(index) -> ArgView: argument `index` by DLPack (torch.from_dlpack), during the method"},
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
