/*
 * adag._adag: tensors. The dtype names and formats of both directions, and
 * execute()'s inputs taken from Python objects:
 *
 *   - bytes, bytearray, a 1-D memoryview of unsigned bytes ("B"): bytes
 *     (ADAG_VALUE_BYTES), as before tensors existed;
 *   - any other object with the buffer protocol (a numpy array, a numpy
 *     scalar, array.array): a host tensor of the buffer's format and
 *     shape; a format with no adag dtype (uint16..uint64, complex, structs,
 *     a byte order not the host's) is refused (memoryview(x).cast("B")
 *     sends its bytes);
 *   - an object with __dlpack__ (a torch tensor, a cupy array, an adag
 *     SlotView): the DLPack tensor, taken by its versioned capsule when the
 *     producer offers one (max_version=(1, 0)), else the legacy one; host
 *     memory (kDLCPU, kDLCUDAHost) is a host tensor, kDLCUDA a tensor on
 *     cuda:<id>, which execute accepts on a DAG whose driver device it is.
 *
 * The memory is held (the buffer export, the managed tensor) until execute
 * has copied it into the slot; a device input's copy runs on the DAG's
 * stream, so execute synchronizes that stream before giving a DLPack
 * tensor back to its producer (Dag_execute).
 */
#include "adagpy.h"
#include "dlpack.h"

#include <string.h>

/* ---- dtypes ---- */

static const struct {
    adag_dtype_t dtype;
    const char *numpy;  /* numpy's (ml_dtypes' for bfloat16) name */
    const char *format; /* the buffer protocol's */
} dtypes[] = {
    {ADAG_DTYPE_U8, "uint8", "B"},     {ADAG_DTYPE_I8, "int8", "b"},
    {ADAG_DTYPE_I16, "int16", "h"},    {ADAG_DTYPE_I32, "int32", "i"},
    {ADAG_DTYPE_I64, "int64", "q"},    {ADAG_DTYPE_F16, "float16", "e"},
    {ADAG_DTYPE_BF16, "bfloat16", "H"}, {ADAG_DTYPE_F32, "float32", "f"},
    {ADAG_DTYPE_F64, "float64", "d"},  {ADAG_DTYPE_BOOL, "bool", "?"},
};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

const char *adagpy_dtype_numpy(adag_dtype_t dtype)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtypes[i].dtype == dtype)
            return dtypes[i].numpy;
    return NULL;
}

const char *adagpy_dtype_format(adag_dtype_t dtype)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtypes[i].dtype == dtype)
            return dtypes[i].format;
    return "B";
}

/* A name: numpy's ("float32"), adag's ("f32"), or torch's ("torch.float32",
 * "torch.bool"); 0 when unknown. */
static adag_dtype_t dtype_by_name(const char *s)
{
    if (strncmp(s, "torch.", 6) == 0)
        s += 6;
    if (strcmp(s, "bool_") == 0) /* numpy 1's np.bool_ */
        return ADAG_DTYPE_BOOL;
    for (size_t i = 0; i < NDTYPES; i++)
        if (strcmp(s, dtypes[i].numpy) == 0 || strcmp(s, adag_dtype_name(dtypes[i].dtype)) == 0)
            return dtypes[i].dtype;
    return ADAG_DTYPE_BYTES;
}

int adagpy_dtype_parse(PyObject *o, adag_dtype_t *out, const char *what)
{
    static const char *attrs[] = {"name", "__name__"};
    PyObject *name = NULL;
    if (PyUnicode_Check(o)) {
        name = Py_NewRef(o);
    } else {
        for (size_t i = 0; !name && i < 2; i++) {
            name = PyObject_GetAttrString(o, attrs[i]);
            if (name && !PyUnicode_Check(name))
                Py_CLEAR(name);
            if (!name)
                PyErr_Clear();
        }
        if (!name && !(name = PyObject_Str(o)))
            return -1;
    }
    const char *s = PyUnicode_AsUTF8(name);
    adag_dtype_t dt = s ? dtype_by_name(s) : ADAG_DTYPE_BYTES;
    Py_DECREF(name);
    if (!s)
        return -1;
    if (dt == ADAG_DTYPE_BYTES) {
        PyErr_Format(PyExc_ValueError,
                     "%s: dtype %R: one of uint8 int8 int16 int32 int64 float16 bfloat16 float32 "
                     "float64 bool (or u8 ... bf16, f32, ...)",
                     what, o);
        return -1;
    }
    *out = dt;
    return 0;
}

int adagpy_shape_parse(PyObject *o, int64_t *shape, unsigned *ndim, const char *what)
{
    if (PyLong_Check(o)) {
        long long x = PyLong_AsLongLong(o);
        if (x == -1 && PyErr_Occurred())
            return -1;
        if (x < 0)
            goto negative;
        shape[0] = x;
        *ndim = 1;
        return 0;
    }
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s: shape %.80s: a tuple of ints", what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > ADAG_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: shape %R has %zd dimensions, at most %d", what, o, n,
                     ADAG_MAX_DIMS);
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t d = 0; d < n; d++) {
        long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, d));
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (x < 0) {
            Py_DECREF(seq);
            goto negative;
        }
        shape[d] = x;
    }
    Py_DECREF(seq);
    *ndim = (unsigned)n;
    return 0;
negative:
    PyErr_Format(PyExc_ValueError, "%s: shape %R has a negative dimension", what, o);
    return -1;
}

PyObject *adagpy_device_str(int32_t device)
{
    if (device == ADAG_DEVICE_HOST)
        return PyUnicode_FromString("host");
    return PyUnicode_FromFormat("%s:%u", adag_device_kind_name(ADAG_DEVICE_KIND(device)),
                                ADAG_DEVICE_INDEX(device));
}

/* ---- inputs by the buffer protocol ---- */

/* The adag dtype of a struct-module format with items of itemsize bytes
 * (native or little-endian order: "@", "=", "<"); 0 if none. */
static adag_dtype_t dtype_of_format(const char *f, Py_ssize_t itemsize)
{
    if (!f)
        return itemsize == 1 ? ADAG_DTYPE_U8 : ADAG_DTYPE_BYTES;
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    else if ((*f == '>' || *f == '!') && itemsize != 1)
        return ADAG_DTYPE_BYTES; /* big-endian: not this host's order */
    else if (*f == '>' || *f == '!')
        f++;
    if (!f[0] || f[1])
        return ADAG_DTYPE_BYTES; /* a count, a struct, several fields */
    switch (f[0]) {
    case '?':
        return itemsize == 1 ? ADAG_DTYPE_BOOL : ADAG_DTYPE_BYTES;
    case 'B':
    case 'c':
        return itemsize == 1 ? ADAG_DTYPE_U8 : ADAG_DTYPE_BYTES;
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
    case 'n':
        return itemsize == 1   ? ADAG_DTYPE_I8
               : itemsize == 2 ? ADAG_DTYPE_I16
               : itemsize == 4 ? ADAG_DTYPE_I32
               : itemsize == 8 ? ADAG_DTYPE_I64
                               : ADAG_DTYPE_BYTES;
    case 'e':
        return itemsize == 2 ? ADAG_DTYPE_F16 : ADAG_DTYPE_BYTES;
    case 'f':
        return itemsize == 4 ? ADAG_DTYPE_F32 : ADAG_DTYPE_BYTES;
    case 'd':
        return itemsize == 8 ? ADAG_DTYPE_F64 : ADAG_DTYPE_BYTES;
    default:
        return ADAG_DTYPE_BYTES;
    }
}

static int is_bytes_object(PyObject *o, const Py_buffer *b)
{
    if (PyBytes_CheckExact(o) || PyByteArray_CheckExact(o))
        return 1;
    return PyMemoryView_Check(o) && b->ndim == 1 &&
           (!b->format || strcmp(b->format, "B") == 0 || strcmp(b->format, "@B") == 0);
}

static int take_buffer(PyObject *o, Py_ssize_t index, adag_value_t *v, adagpy_input_t *hold)
{
    Py_buffer *b = &hold->buf;
    if (PyObject_GetBuffer(o, b, PyBUF_RECORDS_RO) < 0)
        return -1;
    if (!PyBuffer_IsContiguous(b, 'C')) {
        PyErr_Format(PyExc_ValueError,
                     "%s %zd (%.80s) is not C-contiguous: copy it "
                     "(numpy.ascontiguousarray)",
                     hold->what, index, Py_TYPE(o)->tp_name);
        return -1;
    }
    if (is_bytes_object(o, b)) {
        v->data = b->buf;
        v->size = (size_t)b->len;
        return 0;
    }
    adag_dtype_t dt = dtype_of_format(b->format, b->itemsize);
    if (dt == ADAG_DTYPE_BYTES) {
        PyErr_Format(PyExc_ValueError,
                     "%s %zd (%.80s) has elements of format '%s' (%zd "
                     "bytes), which is no adag dtype (uint8 int8 int16 int32 int64 float16 "
                     "float32 float64 bool; bfloat16 by DLPack); memoryview(x).cast('B') sends "
                     "its bytes",
                     hold->what, index, Py_TYPE(o)->tp_name, b->format ? b->format : "B", b->itemsize);
        return -1;
    }
    if (b->ndim > ADAG_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "%s %zd has %d dimensions, at most %d", hold->what, index,
                     b->ndim, ADAG_MAX_DIMS);
        return -1;
    }
    int64_t shape[ADAG_MAX_DIMS];
    for (int d = 0; d < b->ndim; d++)
        shape[d] = b->shape ? (int64_t)b->shape[d] : (int64_t)(b->len / b->itemsize);
    *v = adag_value_tensor(b->buf, dt, (unsigned)b->ndim, shape);
    return 0;
}

/* ---- inputs by DLPack ---- */

static adag_dtype_t dtype_of_dl(DLDataType t)
{
    if (t.lanes != 1)
        return ADAG_DTYPE_BYTES;
    switch (t.code) {
    case kDLInt:
        return t.bits == 8    ? ADAG_DTYPE_I8
               : t.bits == 16 ? ADAG_DTYPE_I16
               : t.bits == 32 ? ADAG_DTYPE_I32
               : t.bits == 64 ? ADAG_DTYPE_I64
                              : ADAG_DTYPE_BYTES;
    case kDLUInt:
        return t.bits == 8 ? ADAG_DTYPE_U8 : ADAG_DTYPE_BYTES;
    case kDLFloat:
        return t.bits == 16   ? ADAG_DTYPE_F16
               : t.bits == 32 ? ADAG_DTYPE_F32
               : t.bits == 64 ? ADAG_DTYPE_F64
                              : ADAG_DTYPE_BYTES;
    case kDLBfloat:
        return t.bits == 16 ? ADAG_DTYPE_BF16 : ADAG_DTYPE_BYTES;
    case kDLBool:
        return t.bits == 8 ? ADAG_DTYPE_BOOL : ADAG_DTYPE_BYTES;
    default:
        return ADAG_DTYPE_BYTES;
    }
}

/* The stream argument for the producer: the DAG's stream for a CUDA
 * tensor (the producer orders its data before it), None otherwise. */
static PyObject *consumer_stream(DagObject *d, PyObject *o)
{
    PyObject *dev = PyObject_CallMethod(o, "__dlpack_device__", NULL);
    if (!dev) {
        /* a producer without __dlpack_device__: host memory, the default */
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    int type = 0, id = 0;
    int ok = PyArg_ParseTuple(dev, "ii", &type, &id);
    Py_DECREF(dev);
    if (!ok)
        return NULL;
    void *stream = NULL;
    if (type != kDLCUDA || !d || adag_dag_stream(d->dag, &stream) != ADAG_OK)
        return Py_NewRef(Py_None); /* without a driver device execute refuses it, saying so */
    /* DLPack's numbers: 1 is the legacy default stream (a NULL cudaStream_t) */
    return stream ? PyLong_FromVoidPtr(stream) : PyLong_FromLong(1);
}

/* Calls o.__dlpack__(stream=s, max_version=(1, 0)); a producer that does
 * not know max_version (TypeError) is asked again without it. */
static PyObject *call_dlpack(PyObject *o, PyObject *stream)
{
    PyObject *meth = PyObject_GetAttrString(o, "__dlpack__");
    if (!meth)
        return NULL;
    PyObject *kw = Py_BuildValue("{s:O,s:(ii)}", "stream", stream, "max_version",
                                 ADAGPY_DLPACK_MAJOR, ADAGPY_DLPACK_MINOR);
    PyObject *empty = PyTuple_New(0), *cap = NULL;
    if (kw && empty) {
        cap = PyObject_Call(meth, empty, kw);
        if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            if (PyDict_DelItemString(kw, "max_version") == 0)
                cap = PyObject_Call(meth, empty, kw);
        }
    }
    Py_XDECREF(kw);
    Py_XDECREF(empty);
    Py_DECREF(meth);
    return cap;
}

static int take_dlpack(DagObject *d, PyObject *o, Py_ssize_t index, adag_value_t *v,
                       adagpy_input_t *hold)
{
    PyObject *stream = consumer_stream(d, o);
    if (!stream)
        return -1;
    PyObject *cap = call_dlpack(o, stream);
    Py_DECREF(stream);
    if (!cap)
        return -1;
    DLTensor *t;
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m->version.major != ADAGPY_DLPACK_MAJOR) {
            PyErr_Format(PyExc_BufferError,
                         "%s %zd: DLPack version %u.%u, this reads %d.x",
                         hold->what, index, m->version.major, m->version.minor, ADAGPY_DLPACK_MAJOR);
            Py_DECREF(cap); /* not taken: the capsule's destructor frees it */
            return -1;
        }
        hold->versioned = 1;
        hold->managed = m;
        t = &m->dl_tensor;
        if (PyCapsule_SetName(cap, "used_dltensor_versioned") < 0)
            goto fail_untaken;
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        hold->managed = m;
        t = &m->dl_tensor;
        if (PyCapsule_SetName(cap, "used_dltensor") < 0)
            goto fail_untaken;
    } else {
        PyErr_Format(PyExc_TypeError,
                     "%s %zd: __dlpack__ of %.80s returned %.80s, not a "
                     "\"dltensor\" or \"dltensor_versioned\" capsule",
                     hold->what, index, Py_TYPE(o)->tp_name, Py_TYPE(cap)->tp_name);
        Py_DECREF(cap);
        return -1;
    }
    hold->capsule = cap; /* renamed: ours, freed by adagpy_input_drop from here on */
    adag_dtype_t dt = dtype_of_dl(t->dtype);
    if (dt == ADAG_DTYPE_BYTES) {
        PyErr_Format(PyExc_ValueError,
                     "%s %zd: DLPack dtype (code %u, %u bits, %u lanes) is "
                     "no adag dtype (int8..int64, uint8, float16/32/64, bfloat16, bool; 1 lane)",
                     hold->what, index, t->dtype.code, t->dtype.bits, t->dtype.lanes);
        return -1;
    }
    if (t->ndim < 0 || t->ndim > ADAG_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "%s %zd has %d dimensions, at most %d", hold->what, index,
                     (int)t->ndim, ADAG_MAX_DIMS);
        return -1;
    }
    if (t->ndim && !t->shape) {
        PyErr_Format(PyExc_ValueError,
                     "%s %zd: a DLPack tensor of %d dimensions without "
                     "a shape",
                     hold->what, index, (int)t->ndim);
        return -1;
    }
    int32_t device;
    switch (t->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
        device = ADAG_DEVICE_HOST;
        break;
    case kDLCUDA:
        device = ADAG_DEVICE(ADAG_DEV_CUDA, t->device.device_id);
        hold->device = 1;
        break;
    default:
        PyErr_Format(PyExc_ValueError,
                     "%s %zd is on DLPack device type %d (id %d): adag "
                     "takes host memory (kDLCPU, kDLCUDAHost) and CUDA devices (kDLCUDA)",
                     hold->what, index, (int)t->device.device_type, (int)t->device.device_id);
        return -1;
    }
    /* Contiguous: no strides, or the row-major ones (a dimension of 1, or
     * any dimension of an empty tensor, may have any stride). */
    int64_t expect = 1, count = 1;
    for (int dim = 0; dim < t->ndim; dim++)
        count *= t->shape[dim];
    for (int dim = t->ndim; t->strides && count && dim-- > 0;) {
        if (t->shape[dim] != 1 && t->strides[dim] != expect) {
            PyErr_Format(PyExc_ValueError,
                         "%s %zd (%.80s) is not C-contiguous (stride "
                         "%lld of dimension %d, %lld expected): copy it (.contiguous())",
                         hold->what, index, Py_TYPE(o)->tp_name, (long long)t->strides[dim], dim,
                         (long long)expect);
            return -1;
        }
        expect *= t->shape[dim];
    }
    *v = adag_value_tensor((const char *)t->data + t->byte_offset, dt, (unsigned)t->ndim,
                           t->shape);
    v->device = device;
    if (!t->data && v->size && v->size != SIZE_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "%s %zd: a DLPack tensor of %zu bytes at NULL", hold->what, index,
                     v->size);
        return -1;
    }
    return 0;
fail_untaken:
    hold->managed = NULL;
    hold->versioned = 0;
    Py_DECREF(cap);
    return -1;
}

int adagpy_input_take(DagObject *d, PyObject *o, const char *what, Py_ssize_t index,
                      adag_value_t *v, adagpy_input_t *hold)
{
    int rc;
    memset(hold, 0, sizeof(*hold));
    memset(v, 0, sizeof(*v));
    hold->what = what;
    if (PyBytes_CheckExact(o)) {
        /* immutable, and held by execute's arguments: no export needed */
        v->data = PyBytes_AS_STRING(o);
        v->size = (size_t)PyBytes_GET_SIZE(o);
        return 0;
    }
    if (PyObject_CheckBuffer(o)) {
        rc = take_buffer(o, index, v, hold);
        /* an exporter whose memory has no buffer export (a SlotView of a
         * CUDA output) may still give it by DLPack */
        if (rc < 0 && !hold->buf.obj && PyErr_ExceptionMatches(PyExc_BufferError) &&
            PyObject_HasAttrString(o, "__dlpack__")) {
            PyErr_Clear();
            rc = take_dlpack(d, o, index, v, hold);
        }
    } else if (PyObject_HasAttrString(o, "__dlpack__")) {
        rc = take_dlpack(d, o, index, v, hold);
    } else {
        PyErr_Format(PyExc_TypeError,
                     "%s %zd is %.80s, not an object with the buffer "
                     "protocol (bytes, bytearray, memoryview, a numpy array) or __dlpack__ (a "
                     "torch tensor)",
                     hold->what, index, Py_TYPE(o)->tp_name);
        rc = -1;
    }
    if (rc < 0)
        adagpy_input_drop(hold);
    return rc;
}

void adagpy_input_drop(adagpy_input_t *hold)
{
    if (hold->buf.obj)
        PyBuffer_Release(&hold->buf);
    if (hold->managed) {
        /* taken (the capsule renamed): the deleter is ours to call, once;
         * it may run Python code (numpy's drops its array), so an
         * exception being raised is kept aside meanwhile */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (hold->versioned) {
            DLManagedTensorVersioned *m = hold->managed;
            if (m->deleter)
                m->deleter(m);
        } else {
            DLManagedTensor *m = hold->managed;
            if (m->deleter)
                m->deleter(m);
        }
        PyErr_Restore(et, ev, tb);
    }
    Py_XDECREF(hold->capsule);
    memset(hold, 0, sizeof(*hold));
}
