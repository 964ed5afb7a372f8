/*
 * adag._adag: SlotView, one slot of a slot set (a Result's output, a
 * Reservation's input) seen in place, by the buffer protocol and by DLPack
 * (__dlpack__, __dlpack_device__), with the value's dtype, shape and
 * device. The set's lifetime rules are in adagpy.h (SlotSetObject).
 *
 * Buffer exports: a consumer that asks for a format and shape (memoryview,
 * np.asarray) gets the tensor's (bf16 as "H", its bits: the struct module
 * has no bf16); one that asks for neither (np.frombuffer, bytes()) gets the
 * bytes. DLPack exports: the slot in place, the view's dtype and shape
 * (bytes: uint8, 1-D), read-only in the versioned flags for outputs.
 *
 * Devices: host and emulated ("emu:N") slots are host memory (the emulated
 * device maps its memory into the process: device pointers are host
 * addresses, and no DLPack device type names it), exported as kDLCPU once
 * the DAG's stream was synchronized (Result.__enter__ does it, so the
 * device's copies have landed). CUDA slots are exported by DLPack only, as
 * kDLCUDA with the device pointer; for a consumer stream (any `stream` but
 * -1) the export first waits on the host for the DAG's stream
 * (adag_dag_stream_sync, once per result): the C API offers no event to
 * make another stream wait on the device, and after the host wait the data
 * is ready for every stream.
 */
#include "adagpy.h"
#include "dlpack.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    SlotSetObject *set; /* holds the slot */
    unsigned i;
    int open;           /* usable: the set is open, or an export of this view is alive */
    long exports;       /* live exports of this view */
} SlotViewObject;

/* ---- the set ---- */

void adagpy_slots_finish(SlotSetObject *s)
{
    if (!s->held)
        return;
    s->held = 0;
    if (!s->dag->dag || !s->dag->rt->rt)
        return; /* closing the DAG gave everything back */
    adag_status_t st = s->writable ? adag_dag_cancel(s->dag->dag, s->ref)
                                   : adag_dag_release(s->dag->dag, s->ref);
    if (st != ADAG_OK) {
        /* reported as unraisable: this runs where an exception may be on
         * its way (a block left by one), which is kept */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        adagpy_raise(st, s->writable ? "Reservation: cancel" : "Result: release");
        PyErr_WriteUnraisable((PyObject *)s);
        PyErr_Restore(et, ev, tb);
    }
}

static SlotViewObject *view_new(SlotSetObject *s, unsigned i)
{
    SlotViewObject *v = PyObject_GC_New(SlotViewObject, &SlotView_Type);
    if (!v)
        return NULL;
    v->set = (SlotSetObject *)Py_NewRef(s);
    v->i = i;
    v->open = 1;
    v->exports = 0;
    PyObject_GC_Track(v);
    return v;
}

PyObject *adagpy_views(SlotSetObject *s)
{
    if (s->views)
        return Py_NewRef(s->views);
    PyObject *views = PyTuple_New(s->n);
    for (unsigned i = 0; views && i < s->n; i++) {
        SlotViewObject *v = view_new(s, i);
        if (!v)
            Py_CLEAR(views);
        else
            PyTuple_SET_ITEM(views, i, (PyObject *)v);
    }
    s->views = views;
    return views ? Py_NewRef(views) : NULL;
}

int adagpy_views_close(SlotSetObject *s)
{
    s->open = 0;
    s->closed = 1;
    PyObject *views = s->views;
    s->views = NULL;
    for (Py_ssize_t i = 0; views && i < PyTuple_GET_SIZE(views); i++) {
        SlotViewObject *v = (SlotViewObject *)PyTuple_GET_ITEM(views, i);
        if (!v->exports)
            v->open = 0;
    }
    Py_XDECREF(views);
    if (s->nexports)
        return 1;
    adagpy_slots_finish(s);
    return 0;
}

/* An export of v ended (GIL held). */
static void view_export_done(SlotViewObject *v)
{
    SlotSetObject *s = v->set;
    v->exports--;
    s->nexports--;
    if (!s->open && !v->exports)
        v->open = 0;
    if (!s->open && !s->nexports)
        adagpy_slots_finish(s);
}

int adagpy_slots_traverse(SlotSetObject *s, visitproc visit, void *arg)
{
    Py_VISIT(s->views);
    return 0;
}

void adagpy_slots_free(SlotSetObject *s)
{
    Py_CLEAR(s->views);
    free(s->values);
    free(s->inputs);
    free(s->declared);
    s->values = NULL;
    s->inputs = NULL;
    s->declared = NULL;
}

/* ---- checks ---- */

static const char *view_what(SlotViewObject *v)
{
    return v->set->writable ? "input" : "output";
}

/* 0 when v may be used, else ValueError (or ClosedError). */
static int view_check(SlotViewObject *v)
{
    if (!v->open) {
        PyErr_Format(PyExc_ValueError,
                     "adag: the view of %s %u is closed (its with block ended)", view_what(v),
                     v->i);
        return -1;
    }
    if (!v->set->dag->dag || !v->set->dag->rt->rt) {
        adag_fail(ADAG_ERR_CLOSED, "adag: view of %s %u: its DAG is closed", view_what(v), v->i);
        adagpy_raise(ADAG_ERR_CLOSED, "view");
        return -1;
    }
    return 0;
}

static const adag_value_t *view_value(SlotViewObject *v)
{
    return &v->set->values[v->i];
}

static int host_addressable(int32_t device)
{
    return ADAG_DEVICE_KIND(device) != ADAG_DEV_CUDA;
}

/* Waits for the DAG's stream once per set (device values); 0 or -1. */
static int set_sync(SlotSetObject *s)
{
    if (s->synced)
        return 0;
    adag_status_t st;
    adag_dag_h dag = s->dag->dag;
    s->dag->nbusy++;
    s->dag->rt->nbusy++;
    Py_BEGIN_ALLOW_THREADS
    st = adag_dag_stream_sync(dag, -1);
    Py_END_ALLOW_THREADS
    s->dag->nbusy--;
    s->dag->rt->nbusy--;
    if (st != ADAG_OK) {
        adagpy_raise(st, "view: adag_dag_stream_sync");
        return -1;
    }
    s->synced = 1;
    return 0;
}

/* ---- the buffer protocol ---- */

static int View_getbuffer(SlotViewObject *self, Py_buffer *view, int flags)
{
    view->obj = NULL;
    if (view_check(self) < 0)
        return -1;
    const adag_value_t *val = view_value(self);
    if (!host_addressable(val->device)) {
        PyObject *dev = adagpy_device_str(val->device);
        PyErr_Format(PyExc_BufferError,
                     "adag: %s %u is on %S: device memory has no buffer export; take it with "
                     "DLPack (torch.from_dlpack)",
                     view_what(self), self->i, dev);
        Py_XDECREF(dev);
        return -1;
    }
    if ((flags & PyBUF_WRITABLE) && !self->set->writable) {
        PyErr_Format(PyExc_BufferError, "adag: output %u is read-only", self->i);
        return -1;
    }
    int tensor = val->kind == ADAG_VALUE_TENSOR;
    unsigned ndim = tensor ? val->ndim : 1;
    Py_ssize_t item = tensor ? (Py_ssize_t)adag_dtype_size(val->dtype) : 1;
    view->buf = (void *)val->data;
    view->len = (Py_ssize_t)val->size;
    view->readonly = !self->set->writable;
    view->itemsize = 1;
    view->format = NULL;
    view->ndim = 1;
    view->shape = NULL;
    view->strides = NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    if (flags & PyBUF_ND) {
        /* shape and strides of their own: they outlive a later re-declaration
         * of a reservation's value */
        Py_ssize_t *dims = malloc(2 * (ndim ? ndim : 1) * sizeof(*dims));
        if (!dims) {
            PyErr_NoMemory();
            return -1;
        }
        Py_ssize_t stride = item;
        for (unsigned d = ndim; d-- > 0;) {
            dims[d] = tensor ? (Py_ssize_t)val->shape[d] : (Py_ssize_t)val->size;
            dims[ndim + d] = stride;
            stride *= dims[d];
        }
        view->internal = dims;
        view->ndim = (int)ndim;
        view->shape = dims;
        view->itemsize = item;
        if ((flags & PyBUF_STRIDES) == PyBUF_STRIDES)
            view->strides = dims + ndim;
        if (flags & PyBUF_FORMAT)
            view->format = (char *)(tensor ? adagpy_dtype_format(val->dtype) : "B");
    } else if (flags & PyBUF_FORMAT) {
        view->format = "B";
    }
    view->obj = Py_NewRef(self);
    self->exports++;
    self->set->nexports++;
    return 0;
}

static void View_releasebuffer(SlotViewObject *self, Py_buffer *view)
{
    free(view->internal);
    view->internal = NULL;
    view_export_done(self);
}

/* ---- DLPack ---- */

/* One export: the managed tensor a capsule points at, with its shape and
 * strides; holds its view (so the set and its slots) until the deleter. */
typedef struct {
    DLManagedTensorVersioned versioned;
    DLManagedTensor legacy;
    int64_t shape[ADAG_MAX_DIMS];
    int64_t strides[ADAG_MAX_DIMS];
    SlotViewObject *view; /* NULL once done */
    void *copy;           /* copy=True: the bytes, owned */
} export_t;

static void export_free(export_t *e)
{
    /* A consumer may run the deleter on any thread, without the GIL, and
     * after the interpreter is gone (then everything is left to the exit). */
    if (!Py_IsInitialized())
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    SlotViewObject *v = e->view;
    e->view = NULL;
    if (v) {
        view_export_done(v);
        Py_DECREF(v);
    }
    free(e->copy);
    free(e);
    PyGILState_Release(g);
}

static void delete_versioned(DLManagedTensorVersioned *m)
{
    export_free(m->manager_ctx);
}

static void delete_legacy(DLManagedTensor *m)
{
    export_free(m->manager_ctx);
}

/* A capsule freed before a consumer took it frees its tensor. */
static void capsule_destructor(PyObject *cap)
{
    const char *name = PyCapsule_GetName(cap);
    if (!name || strncmp(name, "used_", 5) == 0)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    void *p = PyCapsule_GetPointer(cap, name);
    if (!p)
        PyErr_WriteUnraisable(cap);
    else if (strcmp(name, "dltensor_versioned") == 0)
        delete_versioned(p);
    else
        delete_legacy(p);
    PyErr_Restore(et, ev, tb);
}

void adagpy_dl_dtype(const adag_value_t *v, DLDataType *t)
{
    t->lanes = 1;
    t->bits = (uint8_t)(8 * adag_dtype_size(v->kind == ADAG_VALUE_TENSOR ? v->dtype
                                                                         : ADAG_DTYPE_U8));
    switch (v->kind == ADAG_VALUE_TENSOR ? v->dtype : ADAG_DTYPE_U8) {
    case ADAG_DTYPE_I8:
    case ADAG_DTYPE_I16:
    case ADAG_DTYPE_I32:
    case ADAG_DTYPE_I64:
        t->code = kDLInt;
        break;
    case ADAG_DTYPE_F16:
    case ADAG_DTYPE_F32:
    case ADAG_DTYPE_F64:
        t->code = kDLFloat;
        break;
    case ADAG_DTYPE_BF16:
        t->code = kDLBfloat;
        break;
    case ADAG_DTYPE_BOOL:
        t->code = kDLBool;
        break;
    default: /* u8 and bytes */
        t->code = kDLUInt;
        break;
    }
}

void adagpy_dl_layout(const adag_value_t *v, DLTensor *t, int64_t *shape, int64_t *strides)
{
    adagpy_dl_dtype(v, &t->dtype);
    if (v->kind == ADAG_VALUE_TENSOR) {
        t->ndim = (int32_t)v->ndim;
        memcpy(shape, v->shape, ADAG_MAX_DIMS * sizeof(*shape));
    } else {
        t->ndim = 1;
        shape[0] = (int64_t)v->size;
    }
    int64_t stride = 1;
    for (int d = t->ndim; d-- > 0;) {
        strides[d] = stride;
        stride *= shape[d];
    }
    t->shape = shape;
    t->strides = strides;
    t->byte_offset = 0;
}

void adagpy_dl_device(int32_t device, DLDevice *d)
{
    if (ADAG_DEVICE_KIND(device) == ADAG_DEV_CUDA) {
        d->device_type = kDLCUDA;
        d->device_id = (int32_t)ADAG_DEVICE_INDEX(device);
    } else { /* host and emulated memory: host addresses */
        d->device_type = kDLCPU;
        d->device_id = 0;
    }
}

static PyObject *View_dlpack_device(SlotViewObject *self, PyObject *unused)
{
    (void)unused;
    DLDevice d;
    adagpy_dl_device(view_value(self)->device, &d);
    return Py_BuildValue("(ii)", (int)d.device_type, (int)d.device_id);
}

/* stream == -1 (DLPack's "no synchronization"), without an error set. */
static int is_minus_one(PyObject *stream)
{
    int overflow = 0;
    return PyLong_Check(stream) && PyLong_AsLongLongAndOverflow(stream, &overflow) == -1 &&
           !overflow;
}

/* The consumer's stream for a CUDA value: wait unless it is -1. */
static int cuda_stream_wait(SlotViewObject *self, PyObject *stream)
{
    long long s = -2;
    if (stream != Py_None) {
        s = PyLong_AsLongLong(stream);
        if (s == -1 && PyErr_Occurred())
            return -1;
        if (s == 0 || s < -1) {
            PyErr_Format(PyExc_ValueError,
                         "__dlpack__: stream %lld: a CUDA stream is None, -1, 1, 2 or a "
                         "cudaStream_t's number (0 is ambiguous)",
                         s);
            return -1;
        }
    }
    return s == -1 ? 0 : set_sync(self->set);
}

static PyObject *View_dlpack(SlotViewObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_dev = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream,
                                     &max_version, &dl_dev, &copy))
        return NULL;
    if (view_check(self) < 0)
        return NULL;
    const adag_value_t *val = view_value(self);
    DLDevice dev;
    adagpy_dl_device(val->device, &dev);
    int versioned = 0, want_copy = copy != Py_None && PyObject_IsTrue(copy);
    if (want_copy < 0)
        return NULL;
    if (max_version != Py_None) {
        long major;
        if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) != 2 ||
            ((major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0))) == -1 &&
             PyErr_Occurred())) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "__dlpack__: max_version %R: a (major, minor) tuple",
                         max_version);
            return NULL;
        }
        versioned = major >= ADAGPY_DLPACK_MAJOR;
    }
    if (dl_dev != Py_None) {
        int type, id;
        if (!PyArg_ParseTuple(dl_dev, "ii;__dlpack__: dl_device is a (type, id) tuple", &type,
                              &id))
            return NULL;
        if (type != dev.device_type || id != dev.device_id) {
            PyErr_Format(PyExc_BufferError,
                         "__dlpack__: %s %u is on DLPack device (%d, %d), not (%d, %d); adag "
                         "exports in place only",
                         view_what(self), self->i, (int)dev.device_type, (int)dev.device_id,
                         type, id);
            return NULL;
        }
    }
    if (dev.device_type == kDLCUDA) {
        if (want_copy) {
            PyErr_Format(PyExc_BufferError,
                         "__dlpack__: copy=True: %s %u is device memory, exported in place only",
                         view_what(self), self->i);
            return NULL;
        }
        if (cuda_stream_wait(self, stream) < 0)
            return NULL;
    } else if (stream != Py_None && !is_minus_one(stream)) {
        PyErr_Format(PyExc_ValueError,
                     "__dlpack__: stream %R: %s %u is host memory (kDLCPU): stream is None",
                     stream, view_what(self), self->i);
        return NULL;
    }
    export_t *e = calloc(1, sizeof(*e));
    if (!e)
        return PyErr_NoMemory();
    DLTensor *t = versioned ? &e->versioned.dl_tensor : &e->legacy.dl_tensor;
    t->data = (void *)val->data;
    if (want_copy && val->size) {
        if (!(e->copy = malloc(val->size))) {
            free(e);
            return PyErr_NoMemory();
        }
        memcpy(e->copy, val->data, val->size);
        t->data = e->copy;
    }
    t->device = dev;
    adagpy_dl_layout(val, t, e->shape, e->strides);
    if (versioned) {
        e->versioned.version.major = ADAGPY_DLPACK_MAJOR;
        e->versioned.version.minor = ADAGPY_DLPACK_MINOR;
        e->versioned.manager_ctx = e;
        e->versioned.deleter = delete_versioned;
        e->versioned.flags = (self->set->writable || want_copy ? 0
                                                               : DLPACK_FLAG_BITMASK_READ_ONLY) |
                             (want_copy ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
    } else {
        e->legacy.manager_ctx = e;
        e->legacy.deleter = delete_legacy;
    }
    PyObject *cap = PyCapsule_New(versioned ? (void *)&e->versioned : (void *)&e->legacy,
                                  versioned ? "dltensor_versioned" : "dltensor",
                                  capsule_destructor);
    if (!cap) {
        free(e->copy);
        free(e);
        return NULL;
    }
    if (!want_copy) { /* a copy is the consumer's alone; in place holds the slot */
        e->view = (SlotViewObject *)Py_NewRef(self);
        self->exports++;
        self->set->nexports++;
    }
    return cap;
}

/* ---- attributes ---- */

static PyObject *View_get_dtype(SlotViewObject *self, void *unused)
{
    (void)unused;
    const adag_value_t *v = view_value(self);
    if (v->kind != ADAG_VALUE_TENSOR)
        Py_RETURN_NONE;
    return PyUnicode_FromString(adagpy_dtype_numpy(v->dtype));
}

static PyObject *View_get_shape(SlotViewObject *self, void *unused)
{
    (void)unused;
    const adag_value_t *v = view_value(self);
    if (v->kind != ADAG_VALUE_TENSOR)
        return Py_BuildValue("(n)", (Py_ssize_t)v->size);
    PyObject *t = PyTuple_New(v->ndim);
    for (unsigned d = 0; t && d < v->ndim; d++) {
        PyObject *x = PyLong_FromLongLong(v->shape[d]);
        if (!x)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, d, x);
    }
    return t;
}

static PyObject *View_get_ndim(SlotViewObject *self, void *unused)
{
    (void)unused;
    const adag_value_t *v = view_value(self);
    return PyLong_FromUnsignedLong(v->kind == ADAG_VALUE_TENSOR ? v->ndim : 1);
}

static PyObject *View_get_device(SlotViewObject *self, void *unused)
{
    (void)unused;
    return adagpy_device_str(view_value(self)->device);
}

static PyObject *View_get_nbytes(SlotViewObject *self, void *unused)
{
    (void)unused;
    return PyLong_FromSize_t(view_value(self)->size);
}

static PyObject *View_get_readonly(SlotViewObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(!self->set->writable);
}

static PyObject *View_get_closed(SlotViewObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(!self->open);
}

static Py_ssize_t View_len(SlotViewObject *self)
{
    const adag_value_t *v = view_value(self);
    if (v->kind != ADAG_VALUE_TENSOR)
        return (Py_ssize_t)v->size;
    if (v->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor view");
        return -1;
    }
    return (Py_ssize_t)v->shape[0];
}

static PyObject *View_tobytes(SlotViewObject *self, PyObject *unused)
{
    (void)unused;
    Py_buffer b;
    if (View_getbuffer(self, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *r = PyBytes_FromStringAndSize(b.buf, b.len);
    PyBuffer_Release(&b);
    return r;
}

/* __array__(dtype=None, copy=None): numpy's array of the slot, over a
 * memoryview of it (an export: the slot stays while the array lives). Its
 * error reaches numpy's caller (numpy makes an object array of an object
 * whose buffer export fails). */
static PyObject *View_array(SlotViewObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:__array__", kwlist, &dtype, &copy))
        return NULL;
    if (view_check(self) < 0)
        return NULL;
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np)
        return NULL;
    PyObject *mv = PyMemoryView_FromObject((PyObject *)self), *a = NULL;
    if (mv)
        a = PyObject_CallMethod(np, PyObject_IsTrue(copy) == 1 ? "array" : "asarray", "OO", mv,
                                dtype);
    Py_XDECREF(mv);
    Py_DECREF(np);
    return a;
}

static PyObject *View_numpy(SlotViewObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *empty = PyTuple_New(0);
    PyObject *a = empty ? View_array(self, empty, NULL) : NULL;
    Py_XDECREF(empty);
    return a;
}

static PyObject *View_repr(SlotViewObject *self)
{
    const adag_value_t *v = view_value(self);
    PyObject *dev = adagpy_device_str(v->device), *shape = View_get_shape(self, NULL);
    if (!dev || !shape) {
        Py_XDECREF(dev);
        Py_XDECREF(shape);
        return NULL;
    }
    PyObject *r = PyUnicode_FromFormat(
        "<adag.SlotView %s %u: %s %R on %U%s>", view_what(self), self->i,
        v->kind == ADAG_VALUE_TENSOR ? adagpy_dtype_numpy(v->dtype) : "bytes", shape, dev,
        self->open ? "" : ", closed");
    Py_DECREF(dev);
    Py_DECREF(shape);
    return r;
}

static int View_traverse(SlotViewObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->set);
    return 0;
}

static int View_clear(SlotViewObject *self)
{
    Py_CLEAR(self->set);
    return 0;
}

static void View_dealloc(SlotViewObject *self)
{
    PyObject_GC_UnTrack(self);
    View_clear(self);
    PyObject_GC_Del(self);
}

static PyBufferProcs View_as_buffer = {
    .bf_getbuffer = (getbufferproc)View_getbuffer,
    .bf_releasebuffer = (releasebufferproc)View_releasebuffer,
};

static PySequenceMethods View_as_sequence = {.sq_length = (lenfunc)View_len};

static PyMethodDef View_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))View_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> capsule: "
     "the slot in place (DLPack 1.0 when max_version >= (1, 0), else legacy)"},
    {"__dlpack_device__", (PyCFunction)View_dlpack_device, METH_NOARGS,
     "(kDLCPU, 0) for host and emulated memory, (kDLCUDA, index) for CUDA"},
    {"tobytes", (PyCFunction)View_tobytes, METH_NOARGS, "A copy of the value's bytes."},
    {"numpy", (PyCFunction)View_numpy, METH_NOARGS,
     "numpy.asarray(view): an array in the slot, of the value's dtype and shape, holding it"},
    {"__array__", (PyCFunction)(void (*)(void))View_array, METH_VARARGS | METH_KEYWORDS,
     "__array__(dtype=None, copy=None): numpy's array of the slot"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef View_getset[] = {
    {"dtype", (getter)View_get_dtype, NULL, "numpy's name of the dtype; None for bytes", NULL},
    {"shape", (getter)View_get_shape, NULL, "the tensor's shape; (size,) for bytes", NULL},
    {"ndim", (getter)View_get_ndim, NULL, "len(shape)", NULL},
    {"device", (getter)View_get_device, NULL, "\"host\", \"emu:0\", \"cuda:0\"", NULL},
    {"nbytes", (getter)View_get_nbytes, NULL, "the value's bytes", NULL},
    {"readonly", (getter)View_get_readonly, NULL, "True for outputs", NULL},
    {"closed", (getter)View_get_closed, NULL, "True once unusable (its block ended)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject SlotView_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.SlotView",
    .tp_basicsize = sizeof(SlotViewObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One slot in place: the buffer protocol and DLPack, with dtype, shape, device.",
    .tp_dealloc = (destructor)View_dealloc,
    .tp_traverse = (traverseproc)View_traverse,
    .tp_clear = (inquiry)View_clear,
    .tp_repr = (reprfunc)View_repr,
    .tp_as_buffer = &View_as_buffer,
    .tp_as_sequence = &View_as_sequence,
    .tp_methods = View_methods,
    .tp_getset = View_getset,
};
