/*
 * adag._data: what a source runs on each sample besides copying it. The
 * built-in image transform (adag_data_image_map, its adag_data_image_t from
 * the `image` keyword), or a Python callable as the map, and Python
 * callables as steps after it (ADAG_DATA_PARAM_STEPS).
 *
 * A Python callback runs on the source's decoding threads: each call takes
 * the GIL (PyGILState_Ensure), so Python callbacks run one at a time
 * (what they call that releases the GIL, e.g. numpy or PIL decoding, runs in
 * parallel), and every libadag-data call of the consumer that may wait for
 * the threads runs with the GIL released (source.c). It gets a _Sample
 * (index, shard, key, data, fields, rand()) and `out`, a writable memoryview
 * of the sample's place in the batch; both are valid during the call only
 * (released after it). An exception fails the sample: adag_data_fail with
 * its type and text (with bad="skip" the sample is counted and replaced),
 * and the first such exception becomes the __cause__ of the error the
 * consumer gets.
 */
#include "datapy.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    datapy_calls_t *calls;
    PyObject *fn;
    char name[32];
} pyfn_t;

struct datapy_calls {
    adag_data_image_t image; /* the map_arg of adag_data_image_map */
    pyfn_t fns[1 + ADAG_DATA_MAX_STEPS]; /* [0] the map, [1..] the steps */
    adag_data_step_t steps[ADAG_DATA_MAX_STEPS];
    PyObject *error; /* the first exception a callback raised (changed with the GIL) */
};

/* ---- the sample handed to a Python callback ---- */

typedef struct {
    PyObject_HEAD
    uint64_t *rng; /* NULL once the call returned */
    unsigned long long index;
    PyObject *shard, *key, *data, *fields;
} SampleObject;

static PyObject *Sample_rand(SampleObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->rng) {
        PyErr_SetString(PyExc_ValueError,
                        "adag.data sample: rand() after the callback returned");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(adag_data_rand(self->rng));
}

static void Sample_dealloc(SampleObject *self)
{
    Py_XDECREF(self->shard);
    Py_XDECREF(self->key);
    Py_XDECREF(self->data);
    Py_XDECREF(self->fields);
    PyObject_Free(self);
}

static PyMethodDef Sample_methods[] = {
    {"rand", (PyCFunction)Sample_rand, METH_NOARGS,
     "The next 64 random bits of the sample's state (adag_data_rand): a pure function of "
     "(seed, epoch, sample)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Sample_members[] = {
    {"index", T_ULONGLONG, offsetof(SampleObject, index), READONLY,
     "its position in the epoch's sample order"},
    {"shard", T_OBJECT, offsetof(SampleObject, shard), READONLY, "the file it came from"},
    {"key", T_OBJECT, offsetof(SampleObject, key), READONLY, "WebDataset: its key, else None"},
    {"data", T_OBJECT, offsetof(SampleObject, data), READONLY,
     "its bytes, a read-only memoryview valid during the call (WebDataset: the first field's)"},
    {"fields", T_OBJECT, offsetof(SampleObject, fields), READONLY,
     "WebDataset: {extension: memoryview} in the order of `fields`; else {}"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject Sample_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.data.Sample",
    .tp_basicsize = sizeof(SampleObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One sample handed to a Python map or step (adag_data_sample_t).",
    .tp_dealloc = (destructor)Sample_dealloc,
    .tp_methods = Sample_methods,
    .tp_members = Sample_members,
};

static PyObject *view_of(const void *p, size_t n, int flags)
{
    static char empty;
    return PyMemoryView_FromMemory(n ? (char *)p : &empty, (Py_ssize_t)n, flags);
}

static SampleObject *sample_new(const adag_data_sample_t *sm, uint64_t *rng)
{
    SampleObject *o = PyObject_New(SampleObject, &Sample_Type);
    if (!o)
        return NULL;
    o->rng = rng;
    o->index = sm->index;
    o->shard = PyUnicode_DecodeFSDefault(sm->shard ? sm->shard : "");
    o->key = sm->key ? PyUnicode_FromString(sm->key) : Py_NewRef(Py_None);
    o->data = view_of(sm->data, sm->size, PyBUF_READ);
    o->fields = PyDict_New();
    for (unsigned i = 0; o->fields && i < sm->nfields; i++) {
        PyObject *v = view_of(sm->fields[i].data, sm->fields[i].size, PyBUF_READ);
        if (!v || PyDict_SetItemString(o->fields, sm->fields[i].ext, v) < 0)
            Py_CLEAR(o->fields);
        Py_XDECREF(v);
    }
    if (!o->shard || !o->key || !o->data || !o->fields) {
        Py_DECREF(o);
        return NULL;
    }
    return o;
}

/* Releases a memoryview handed to a callback (its memory is the source's). */
static void view_release(PyObject *mv)
{
    PyObject *r = PyObject_CallMethod(mv, "release", NULL);
    if (!r)
        PyErr_Clear(); /* still exported: the export keeps the view, documented */
    Py_XDECREF(r);
}

static void sample_end(SampleObject *o)
{
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    o->rng = NULL;
    view_release(o->data);
    while (PyDict_Next(o->fields, &pos, &k, &v))
        view_release(v);
}

/* The callback's exception as "Type: text" into buf; the first one is kept. */
static void take_error(datapy_calls_t *c, char *buf, size_t len)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb && v)
        PyException_SetTraceback(v, tb);
    PyObject *s = v ? PyObject_Str(v) : NULL;
    const char *text = s ? PyUnicode_AsUTF8(s) : NULL;
    if (!text)
        PyErr_Clear();
    snprintf(buf, len, "%s: %s", t ? ((PyTypeObject *)t)->tp_name : "error", text ? text : "?");
    Py_XDECREF(s);
    if (!c->error && v)
        c->error = Py_NewRef(v);
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
}

static adag_status_t py_callback(void *arg, const adag_data_sample_t *sample, uint64_t *rng,
                                 void *out, size_t out_size)
{
    pyfn_t *f = arg;
    adag_status_t st = ADAG_OK;
    char why[512];
    PyGILState_STATE g = PyGILState_Ensure();
    SampleObject *so = sample_new(sample, rng);
    PyObject *o = so ? view_of(out, out_size, PyBUF_WRITE) : NULL;
    PyObject *r = o ? PyObject_CallFunctionObjArgs(f->fn, (PyObject *)so, o, NULL) : NULL;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb); /* the views are released with no exception set */
    if (so)
        sample_end(so);
    if (o)
        view_release(o);
    PyErr_Restore(t, v, tb);
    if (!r) {
        take_error(f->calls, why, sizeof(why));
        st = adag_data_fail(sample, "%s: %s", f->name, why);
    }
    Py_XDECREF(r);
    Py_XDECREF(o);
    Py_XDECREF((PyObject *)so);
    PyGILState_Release(g);
    return st;
}

/* ---- the image transform from a dict ---- */

static int float_pair(PyObject *v, const char *key, unsigned n, float *out)
{
    PyObject *t = PySequence_Tuple(v);
    if (!t || PyTuple_GET_SIZE(t) != (Py_ssize_t)n) {
        if (t || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "Source(image=...): %s: %u numbers", key, n);
        }
        Py_XDECREF(t);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        double d = PyFloat_AsDouble(PyTuple_GET_ITEM(t, i));
        if (d == -1.0 && PyErr_Occurred()) {
            Py_DECREF(t);
            return -1;
        }
        out[i] = (float)d;
    }
    Py_DECREF(t);
    return 0;
}

static int image_from_dict(PyObject *d, adag_data_image_t *img)
{
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "Source(image=...): a dict of adag_data_image_t fields");
        return -1;
    }
    memset(img, 0, sizeof(*img));
    while (PyDict_Next(d, &pos, &k, &v)) {
        const char *key = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        unsigned long long u = 0;
        if (!key) {
            PyErr_SetString(PyExc_TypeError, "Source(image=...): keys are str");
            return -1;
        }
        if (v == Py_None)
            continue;
        int is_int = !strcmp(key, "height") || !strcmp(key, "width") || !strcmp(key, "field") ||
                     !strcmp(key, "dtype") || !strcmp(key, "max_pixels");
        if (is_int) {
            u = PyLong_AsUnsignedLongLong(v);
            if (u == (unsigned long long)-1 && PyErr_Occurred())
                return -1;
            if (strcmp(key, "max_pixels") && u > 0xffffffffull) {
                PyErr_Format(PyExc_ValueError, "Source(image=...): %s %llu", key, u);
                return -1;
            }
        }
        if (!strcmp(key, "height")) {
            img->height = (unsigned)u;
        } else if (!strcmp(key, "width")) {
            img->width = (unsigned)u;
        } else if (!strcmp(key, "field")) {
            img->field = (unsigned)u;
            img->field_mask |= ADAG_DATA_IMAGE_FIELD;
        } else if (!strcmp(key, "dtype")) {
            img->dtype = (adag_dtype_t)u;
            img->field_mask |= ADAG_DATA_IMAGE_DTYPE;
        } else if (!strcmp(key, "max_pixels")) {
            img->max_pixels = u;
            img->field_mask |= ADAG_DATA_IMAGE_MAX_PIXELS;
        } else if (!strcmp(key, "scale")) {
            float r[2];
            if (float_pair(v, key, 2, r) < 0)
                return -1;
            img->scale_min = r[0];
            img->scale_max = r[1];
            img->field_mask |= ADAG_DATA_IMAGE_SCALE;
        } else if (!strcmp(key, "ratio")) {
            float r[2];
            if (float_pair(v, key, 2, r) < 0)
                return -1;
            img->ratio_min = r[0];
            img->ratio_max = r[1];
            img->field_mask |= ADAG_DATA_IMAGE_RATIO;
        } else if (!strcmp(key, "flip")) {
            if (float_pair(v, key, 1, &img->flip) < 0) /* a number, as a 1-tuple */
                return -1;
            img->field_mask |= ADAG_DATA_IMAGE_FLIP;
        } else if (!strcmp(key, "mean") || !strcmp(key, "std")) {
            if (float_pair(v, key, 3, key[0] == 'm' ? img->mean : img->std) < 0)
                return -1;
            img->field_mask |= ADAG_DATA_IMAGE_NORMALIZE;
        } else {
            PyErr_Format(PyExc_TypeError, "Source(image=...): no field %s in adag_data_image_t",
                         key);
            return -1;
        }
    }
    return 0;
}

/* ---- the params ---- */

static int set_fn(datapy_calls_t *c, unsigned i, PyObject *fn, const char *name)
{
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "Source: %s is %.80s, not callable", name,
                     Py_TYPE(fn)->tp_name);
        return -1;
    }
    c->fns[i].calls = c;
    c->fns[i].fn = Py_NewRef(fn);
    snprintf(c->fns[i].name, sizeof(c->fns[i].name), "%s", name);
    return 0;
}

int datapy_calls_init(SourceObject *s, PyObject *image, PyObject *map, PyObject *steps,
                      adag_data_params_t *p, datapy_calls_t **calls)
{
    (void)s;
    *calls = NULL;
    if (image == Py_None)
        image = NULL;
    if (map == Py_None)
        map = NULL;
    if (steps == Py_None)
        steps = NULL;
    if (!image && !map && !steps)
        return 0;
    if (image && map) {
        PyErr_SetString(PyExc_ValueError,
                        "Source: image= and map= both given: the image transform is the map "
                        "(add Python steps after it with steps=)");
        return -1;
    }
    datapy_calls_t *c = calloc(1, sizeof(*c));
    if (!c) {
        PyErr_NoMemory();
        return -1;
    }
    *calls = c;
    if (image) {
        if (image_from_dict(image, &c->image) < 0)
            return -1;
        size_t need = adag_data_image_size(&c->image);
        if (!need) { /* the library's words */
            datapy_raise(adag_data_image_check(&c->image), "Source(image=...)");
            return -1;
        }
        p->map = adag_data_image_map;
        p->map_arg = &c->image;
        p->scratch_size = p->scratch_size ? p->scratch_size : adag_data_image_scratch(&c->image);
        p->field_mask |= ADAG_DATA_PARAM_MAP | ADAG_DATA_PARAM_SCRATCH;
        if (!p->sample_size)
            p->sample_size = need;
        if (!(p->field_mask & ADAG_DATA_PARAM_TENSOR)) {
            p->sample_dtype = (c->image.field_mask & ADAG_DATA_IMAGE_DTYPE) ? c->image.dtype
                                                                             : ADAG_DTYPE_F32;
            p->sample_ndim = 3;
            p->sample_shape[0] = 3;
            p->sample_shape[1] = c->image.height;
            p->sample_shape[2] = c->image.width;
            p->field_mask |= ADAG_DATA_PARAM_TENSOR;
        }
    }
    if (map) {
        if (set_fn(c, 0, map, "map") < 0)
            return -1;
        p->map = py_callback;
        p->map_arg = &c->fns[0];
        p->field_mask |= ADAG_DATA_PARAM_MAP;
    }
    if (steps) {
        PyObject *t = PySequence_Tuple(steps);
        if (!t)
            return -1;
        Py_ssize_t n = PyTuple_GET_SIZE(t);
        if (n > ADAG_DATA_MAX_STEPS) {
            PyErr_Format(PyExc_ValueError, "Source: %zd steps, at most %d", n,
                         ADAG_DATA_MAX_STEPS);
            Py_DECREF(t);
            return -1;
        }
        for (Py_ssize_t k = 0; k < n; k++) {
            const char *name = NULL;
            PyObject *fn = NULL;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(t, k), "zO:step", &name, &fn) ||
                set_fn(c, 1 + (unsigned)k, fn, name ? name : "step") < 0) {
                Py_DECREF(t);
                return -1;
            }
            c->steps[k] = (adag_data_step_t){.fn = py_callback, .arg = &c->fns[1 + k],
                                             .name = c->fns[1 + k].name};
        }
        Py_DECREF(t);
        p->steps = c->steps;
        p->nsteps = (unsigned)n;
        p->field_mask |= ADAG_DATA_PARAM_STEPS;
    }
    return 0;
}

void datapy_calls_free(datapy_calls_t *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < 1 + ADAG_DATA_MAX_STEPS; i++)
        Py_XDECREF(c->fns[i].fn);
    Py_XDECREF(c->error);
    free(c);
}

PyObject *datapy_calls_error(datapy_calls_t *c)
{
    return c && c->error ? Py_NewRef(c->error) : NULL;
}
