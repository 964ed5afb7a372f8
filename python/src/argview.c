/*
 * adag.ArgView: an argument of a Python method as DLPack sees it, for
 * values numpy cannot view (a tensor in cuda memory: torch.from_dlpack(x))
 * and for any argument through adag.current_call().arg(i). Like the numpy
 * views a method gets, it views the channel's slot and is valid during the
 * method only: it refuses use once the method returned, and a tensor made
 * from it must not outlive the method either (copy it to keep it).
 *
 * CUDA ordering: the runtime orders an argument's data before the work of
 * the method's stream (adag.current_call().stream). A consumer that works
 * on that stream (torch.cuda.ExternalStream(call.stream), made current)
 * needs nothing more; __dlpack__ refuses another consumer stream, since
 * making it wait would need a CUDA event of the extension's own.
 */
#include "adagpy.h"
#include "dlpack.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    adag_value_t value;
    unsigned index;
    int valid; /* cleared when its method returns */
    int writable; /* an output slot (Call.output on a device) */
    void *stream; /* the method's stream (adag_call_stream), NULL without a device */
} ArgViewObject;

typedef struct {
    DLManagedTensorVersioned versioned;
    DLManagedTensor legacy;
    int64_t shape[ADAG_MAX_DIMS];
    int64_t strides[ADAG_MAX_DIMS];
} arg_export_t;

static void free_versioned(DLManagedTensorVersioned *m)
{
    free(m->manager_ctx);
}

static void free_legacy(DLManagedTensor *m)
{
    free(m->manager_ctx);
}

static void arg_capsule_free(PyObject *cap)
{
    const char *name = PyCapsule_GetName(cap);
    if (!name || strncmp(name, "used_", 5) == 0)
        return;
    void *p = PyCapsule_GetPointer(cap, name);
    if (!p) {
        PyErr_Clear();
        return;
    }
    if (strcmp(name, "dltensor_versioned") == 0)
        free_versioned(p);
    else
        free_legacy(p);
}

PyObject *adagpy_argview_new(const adag_value_t *v, unsigned index, void *stream, int writable)
{
    ArgViewObject *a = PyObject_New(ArgViewObject, &ArgView_Type);
    if (!a)
        return NULL;
    a->value = *v;
    a->index = index;
    a->valid = 1;
    a->stream = stream;
    a->writable = writable;
    return (PyObject *)a;
}

void adagpy_argview_end(PyObject *o)
{
    ((ArgViewObject *)o)->valid = 0;
}

static int arg_check(ArgViewObject *self)
{
    if (self->valid)
        return 0;
    PyErr_Format(PyExc_ValueError,
                 "adag.ArgView: %s %u was used after its method returned (it views the "
                 "channel's slot during the method only)", self->writable ? "return" : "argument",
                 self->index);
    return -1;
}

static PyObject *Arg_dlpack_device(ArgViewObject *self, PyObject *unused)
{
    (void)unused;
    DLDevice d;
    adagpy_dl_device(self->value.device, &d);
    return Py_BuildValue("(ii)", (int)d.device_type, (int)d.device_id);
}

static PyObject *Arg_dlpack(ArgViewObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_dev = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream,
                                     &max_version, &dl_dev, &copy) ||
        arg_check(self) < 0)
        return NULL;
    const adag_value_t *v = &self->value;
    DLDevice dev;
    adagpy_dl_device(v->device, &dev);
    if (copy != Py_None && PyObject_IsTrue(copy)) {
        PyErr_Format(PyExc_BufferError, "__dlpack__: argument %u is exported in place only",
                     self->index);
        return NULL;
    }
    if (dl_dev != Py_None) {
        int type, id;
        if (!PyArg_ParseTuple(dl_dev, "ii;__dlpack__: dl_device is a (type, id) tuple", &type,
                              &id))
            return NULL;
        if (type != dev.device_type || id != dev.device_id) {
            PyErr_Format(PyExc_BufferError,
                         "__dlpack__: argument %u is on DLPack device (%d, %d), not (%d, %d)",
                         self->index, (int)dev.device_type, (int)dev.device_id, type, id);
            return NULL;
        }
    }
    if (stream != Py_None) {
        long long s = PyLong_AsLongLong(stream);
        if (s == -1 && PyErr_Occurred())
            return NULL;
        /* -1: no synchronization; 1 is the legacy default stream (NULL) */
        void *want = s == 1 ? NULL : (void *)(intptr_t)s;
        if (s != -1 && dev.device_type == kDLCUDA && want != self->stream) {
            PyErr_Format(PyExc_BufferError,
                         "__dlpack__: stream %lld: argument %u is ready on the method's stream "
                         "(adag.current_call().stream, %p): make that the current stream "
                         "(torch.cuda.ExternalStream) before taking it",
                         s, self->index, self->stream);
            return NULL;
        }
    }
    int versioned = 0;
    if (max_version != Py_None) {
        long major;
        if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) != 2 ||
            ((major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0))) == -1 &&
             PyErr_Occurred())) {
            PyErr_Clear();
            return PyErr_Format(PyExc_TypeError,
                                "__dlpack__: max_version %R: a (major, minor) tuple", max_version);
        }
        versioned = major >= ADAGPY_DLPACK_MAJOR;
    }
    arg_export_t *e = calloc(1, sizeof(*e));
    if (!e)
        return PyErr_NoMemory();
    DLTensor *t = versioned ? &e->versioned.dl_tensor : &e->legacy.dl_tensor;
    t->data = (void *)v->data;
    t->device = dev;
    adagpy_dl_layout(v, t, e->shape, e->strides);
    if (versioned) {
        e->versioned.version.major = ADAGPY_DLPACK_MAJOR;
        e->versioned.version.minor = ADAGPY_DLPACK_MINOR;
        e->versioned.manager_ctx = e;
        e->versioned.deleter = free_versioned;
        e->versioned.flags = self->writable ? 0 : DLPACK_FLAG_BITMASK_READ_ONLY;
    } else {
        e->legacy.manager_ctx = e;
        e->legacy.deleter = free_legacy;
    }
    PyObject *cap = PyCapsule_New(versioned ? (void *)&e->versioned : (void *)&e->legacy,
                                  versioned ? "dltensor_versioned" : "dltensor",
                                  arg_capsule_free);
    if (!cap)
        free(e);
    return cap;
}

static PyObject *Arg_get_dtype(ArgViewObject *self, void *unused)
{
    (void)unused;
    const char *name = self->value.kind == ADAG_VALUE_TENSOR
                           ? adagpy_dtype_numpy(self->value.dtype)
                           : NULL;
    return name ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
}

static PyObject *Arg_get_shape(ArgViewObject *self, void *unused)
{
    (void)unused;
    const adag_value_t *v = &self->value;
    if (v->kind != ADAG_VALUE_TENSOR)
        return Py_BuildValue("(n)", (Py_ssize_t)v->size);
    PyObject *t = PyTuple_New(v->ndim);
    for (unsigned d = 0; t && d < v->ndim; d++)
        PyTuple_SET_ITEM(t, d, PyLong_FromLongLong(v->shape[d]));
    return t;
}

static PyObject *Arg_get_device(ArgViewObject *self, void *unused)
{
    (void)unused;
    return adagpy_device_str(self->value.device);
}

static PyObject *Arg_get_valid(ArgViewObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->valid);
}

static void Arg_dealloc(ArgViewObject *self)
{
    PyObject_Free(self);
}

static PyMethodDef Arg_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))Arg_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> capsule"},
    {"__dlpack_device__", (PyCFunction)Arg_dlpack_device, METH_NOARGS,
     "(device type, id): (1, 0) for host and emulated memory, (2, i) for cuda:i"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Arg_getset[] = {
    {"dtype", (getter)Arg_get_dtype, NULL, "numpy's name of the dtype; None for bytes", NULL},
    {"shape", (getter)Arg_get_shape, NULL, "the shape (bytes: (size,))", NULL},
    {"device", (getter)Arg_get_device, NULL, "\"host\", \"emu:0\", \"cuda:1\"", NULL},
    {"valid", (getter)Arg_get_valid, NULL, "False once its method returned", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ArgView_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.ArgView",
    .tp_basicsize = sizeof(ArgViewObject),
    .tp_dealloc = (destructor)Arg_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An argument of a Python method by DLPack, valid during the method.",
    .tp_methods = Arg_methods,
    .tp_getset = Arg_getset,
};
