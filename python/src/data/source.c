/*
 * adag._data: a data source (adag_data_open) and its batches, the errors,
 * the module. adag/data.py builds the Python API on it (adag.data.Source):
 * here a batch is a _Batch object, an exporter of the batch's memory
 * through the buffer protocol, which the package views as numpy arrays.
 *
 * A batch's memory is the source's: it holds the next batch once this one
 * is released (the next next(), release() or close()). A _Batch keeps
 * the source object alive, and the source's memory with it: close() while
 * _Batch objects are alive (numpy arrays viewing a batch keep theirs) stops
 * handing out batches at once, and the source is closed (adag_data_close:
 * threads stopped, memory freed) when the last of them goes, so an array
 * never views freed memory. A released _Batch refuses new exports.
 */
#include "datapy.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- errors and the DAG type, from adag._adag through _setup() ---- */

static PyObject *errors_by_status; /* dict: status (int) -> class */
static PyObject *error_base;       /* adag.Error */
static PyObject *dag_type;         /* adag.CompiledDAG */

PyObject *datapy_raise(adag_status_t st, const char *what)
{
    const char *msg = adag_last_error();
    if (!error_base) {
        PyErr_Format(PyExc_RuntimeError, "adag._data: _setup() was not called (%s)",
                     msg && msg[0] ? msg : what);
        return NULL;
    }
    PyObject *code = PyLong_FromLong(st), *cls = NULL, *exc = NULL;
    if (!code)
        return NULL;
    cls = PyDict_GetItemWithError(errors_by_status, code);
    if (!cls && PyErr_Occurred())
        goto out;
    if (!cls)
        cls = error_base;
    exc = PyObject_CallFunction(cls, "s", msg && msg[0] ? msg : what);
    if (!exc || PyObject_SetAttrString(exc, "status", code) < 0)
        goto out;
    PyErr_SetObject(cls, exc);
out:
    Py_XDECREF(exc);
    Py_DECREF(code);
    return NULL;
}

PyObject *datapy_fail(adag_status_t st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    adag_fail(st, "%s", msg);
    return datapy_raise(st, msg);
}

PyTypeObject *datapy_dag_type(void)
{
    return (PyTypeObject *)dag_type;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int datapy_wait(adag_status_t (*call)(void *arg, int ms), void *arg, int ms, adag_status_t *st)
{
    double t0 = now_ms();
    for (;;) {
        int slice = DATAPY_SLICE_MS;
        double left = ms < 0 ? slice : ms - (now_ms() - t0);
        if (left < slice)
            slice = left > 0 ? (int)left : 0;
        Py_BEGIN_ALLOW_THREADS
        *st = call(arg, slice);
        Py_END_ALLOW_THREADS
        if (*st != ADAG_ERR_TIMEOUT || (ms >= 0 && now_ms() - t0 >= ms))
            return 0;
        if (PyErr_CheckSignals() < 0) /* Ctrl-C: KeyboardInterrupt from the handler */
            return -1;
    }
}

/* ---- keyword values ---- */

/* An integer keyword in [0, max] into *out; 1 when given (not None), 0
 * when absent, -1 with ValueError or TypeError. */
static int opt_uint(PyObject *o, const char *name, unsigned long long max, unsigned long long *out)
{
    if (!o || o == Py_None)
        return 0;
    if (PyBool_Check(o) && max != 1) {
        PyErr_Format(PyExc_TypeError, "Source(%s=%R): an integer, not a bool", name, o);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "Source(%s=%R): an integer, not %.80s", name, o,
                         Py_TYPE(o)->tp_name);
        }
        return -1;
    }
    unsigned long long u = 0;
    if (overflow > 0) {
        u = PyLong_AsUnsignedLongLong(o);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            overflow = 2;
        }
    } else if (!overflow && v >= 0) {
        u = (unsigned long long)v;
    }
    if (overflow < 0 || overflow == 2 || (!overflow && v < 0) || u > max) {
        PyErr_Format(PyExc_ValueError, "Source(%s=%R): not in [0, %llu]", name, o, max);
        return -1;
    }
    *out = u;
    return 1;
}

#define U32 0xffffffffull
#define U64 0xffffffffffffffffull

/* A str keyword (None: absent): the UTF-8 kept by the object. */
static int opt_str(PyObject *o, const char *name, const char **out)
{
    if (!o || o == Py_None)
        return 0;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "Source(%s=%R): a str", name, o);
        return -1;
    }
    return (*out = PyUnicode_AsUTF8(o)) ? 1 : -1;
}

/* A tuple of str into a malloc'ed array of their UTF-8 (kept by the tuple). */
static const char **str_array(PyObject *tuple, const char *name)
{
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    const char **a = calloc(n ? (size_t)n : 1, sizeof(*a));
    if (!a) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(tuple, i);
        if (!PyUnicode_Check(o) || !(a[i] = PyUnicode_AsUTF8(o))) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "Source(%s): item %zd is %.80s, not a str", name,
                             i, Py_TYPE(o)->tp_name);
            free(a);
            return NULL;
        }
    }
    return a;
}

/* ---- _Batch: one batch's memory ---- */

typedef struct {
    PyObject_HEAD
    SourceObject *source;
    void *data;
    Py_ssize_t size;
    int released;
} BatchObject;

static PyTypeObject Batch_Type;
static void source_close_now(SourceObject *s);

static int Batch_getbuffer(BatchObject *self, Py_buffer *view, int flags)
{
    if (self->released) {
        PyErr_SetString(PyExc_BufferError,
                        "adag.data: this batch was released (the source moved to the next one "
                        "or closed): its memory holds another batch now");
        view->obj = NULL;
        return -1;
    }
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 0, flags);
}

static void Batch_dealloc(BatchObject *self)
{
    SourceObject *s = self->source;
    if (s->mem == (PyObject *)self)
        s->mem = NULL;
    if (--s->nmem == 0 && s->closing)
        source_close_now(s);
    Py_DECREF(s);
    PyObject_Free(self);
}

static PyObject *Batch_get_released(BatchObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->released);
}

static PyBufferProcs Batch_as_buffer = {.bf_getbuffer = (getbufferproc)Batch_getbuffer};

static PyGetSetDef Batch_getset[] = {
    {"released", (getter)Batch_get_released, NULL, "True once the source moved on", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Batch_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.data._Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One batch's memory, exported writable through the buffer protocol until the "
              "source releases it.",
    .tp_dealloc = (destructor)Batch_dealloc,
    .tp_as_buffer = &Batch_as_buffer,
    .tp_getset = Batch_getset,
};

/* ---- the source ---- */

static int source_check(SourceObject *s, const char *what)
{
    if (!s->src || s->closing) {
        datapy_fail(ADAG_ERR_CLOSED, "%s: the source is closed", what);
        return -1;
    }
    if (s->busy) {
        datapy_fail(ADAG_ERR_BUSY, "%s: another thread is inside next() of this source", what);
        return -1;
    }
    return 0;
}

/* Gives the batch held back; its _Batch refuses new exports. */
static int release_current(SourceObject *s, const char *what)
{
    if (s->mem)
        ((BatchObject *)s->mem)->released = 1;
    if (!s->cur.data)
        return 0;
    adag_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = adag_data_release(s->src, &s->cur);
    Py_END_ALLOW_THREADS
    s->cur.data = NULL;
    if (st != ADAG_OK) {
        datapy_raise(st, what);
        return -1;
    }
    return 0;
}

static void source_close_now(SourceObject *s)
{
    adag_data_source_h src = s->src;
    s->src = NULL;
    s->closing = 0;
    if (src) {
        Py_BEGIN_ALLOW_THREADS
        adag_data_close(src); /* always ADAG_OK; the threads are joined */
        Py_END_ALLOW_THREADS
    }
    datapy_calls_free(s->calls);
    s->calls = NULL;
    if (s->dag) {
        datapy_dag_hold(s->dag, 0);
        Py_CLEAR(s->dag);
    }
}

static int source_close(SourceObject *s)
{
    if (!s->src || s->closing)
        return 0;
    if (s->busy) {
        datapy_fail(ADAG_ERR_BUSY, "Source.close: another thread is inside next() of this source");
        return -1;
    }
    int rc = release_current(s, "Source.close");
    if (s->nmem > 0)
        s->closing = 1; /* the last _Batch to go closes it */
    else
        source_close_now(s);
    return rc;
}

static PyObject *Source_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"shards", "format", "batch_size", "sample_size", "record_size",
                             "seq_len", "fields", "cache_dir", "cache_bytes", "threads", "seed",
                             "shuffle_shards", "shuffle_window", "rank", "world", "ranks_policy",
                             "budget", "prefetch", "bad_policy", "start_epoch", "start_batch",
                             "dag", "sample_dtype", "sample_shape", "cpus", "scratch_size",
                             "image", "map", "steps", "progress", NULL};
    PyObject *o[29] = {0};
    int progress = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "|$OOOOOOOOOOOOOOOOOOOOOOOOOOOOOp:_Source", kwlist, &o[0], &o[1], &o[2],
            &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &o[13],
            &o[14], &o[15], &o[16], &o[17], &o[18], &o[19], &o[20], &o[21], &o[22], &o[23],
            &o[24], &o[25], &o[26], &o[27], &o[28], &progress))
        return NULL;
    if (!error_base) {
        PyErr_SetString(PyExc_RuntimeError, "adag._data: _setup() was not called");
        return NULL;
    }
    adag_data_params_t p = {0};
    PyObject *shards = NULL, *fields = NULL;
    SourceObject *s = NULL;
    const char **shard_v = NULL, **field_v = NULL;
    unsigned long long v;
    int g;
    /* each keyword: its value, and the field bit it sets when given */
#define UINT(i, name, max, dst, bit)                                                            \
    do {                                                                                       \
        if ((g = opt_uint(o[i], name, max, &v)) < 0)                                           \
            goto out;                                                                          \
        if (g) {                                                                               \
            dst = v;                                                                           \
            p.field_mask |= bit;                                                               \
        }                                                                                      \
    } while (0)
    if (!o[0] || !(shards = PySequence_Tuple(o[0])) || !(shard_v = str_array(shards, "shards"))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_Source(shards=[...]): the shards are required");
        goto out;
    }
    p.shards = shard_v;
    p.nshards = (unsigned)PyTuple_GET_SIZE(shards);
    UINT(1, "format", U32, p.format, 0);
    UINT(2, "batch_size", U32, p.batch_size, 0);
    UINT(3, "sample_size", U64, p.sample_size, 0);
    UINT(4, "record_size", U64, p.record_size, ADAG_DATA_PARAM_RECORD_SIZE);
    UINT(5, "seq_len", U32, p.seq_len, ADAG_DATA_PARAM_SEQ_LEN);
    if (o[6] && o[6] != Py_None) {
        if (!(fields = PySequence_Tuple(o[6])) || !(field_v = str_array(fields, "fields")))
            goto out;
        p.fields = field_v;
        p.nfields = (unsigned)PyTuple_GET_SIZE(fields);
        p.field_mask |= ADAG_DATA_PARAM_FIELDS;
    }
    if ((g = opt_str(o[7], "cache_dir", &p.cache_dir)) < 0)
        goto out;
    p.field_mask |= g ? ADAG_DATA_PARAM_CACHE : 0;
    UINT(8, "cache_bytes", U64, p.cache_bytes, ADAG_DATA_PARAM_CACHE);
    UINT(9, "threads", U32, p.threads, ADAG_DATA_PARAM_THREADS);
    UINT(10, "seed", U64, p.seed, ADAG_DATA_PARAM_SEED);
    UINT(11, "shuffle_shards", 1, p.shuffle_shards, ADAG_DATA_PARAM_SHUFFLE);
    UINT(12, "shuffle_window", U32, p.shuffle_window, ADAG_DATA_PARAM_SHUFFLE);
    p.world = 1;
    UINT(13, "rank", U32, p.rank, ADAG_DATA_PARAM_RANKS);
    UINT(14, "world", U32, p.world, ADAG_DATA_PARAM_RANKS);
    UINT(15, "ranks_policy", U32, p.ranks_policy, ADAG_DATA_PARAM_RANKS);
    if (!(p.field_mask & ADAG_DATA_PARAM_RANKS))
        p.world = 0;
    UINT(16, "budget", U64, p.budget, ADAG_DATA_PARAM_BUDGET);
    UINT(17, "prefetch", U32, p.prefetch, ADAG_DATA_PARAM_PREFETCH);
    UINT(18, "bad_policy", U32, p.bad_policy, ADAG_DATA_PARAM_BAD_POLICY);
    UINT(19, "start_epoch", U64, p.start_epoch, ADAG_DATA_PARAM_START);
    UINT(20, "start_batch", U64, p.start_batch, ADAG_DATA_PARAM_START);
    if (o[21] && o[21] != Py_None) {
        if (!PyObject_TypeCheck(o[21], datapy_dag_type())) {
            PyErr_Format(PyExc_TypeError, "Source(dag=...): a CompiledDAG, not %.80s",
                         Py_TYPE(o[21])->tp_name);
            goto out;
        }
        DagObject *d = (DagObject *)o[21];
        if (!d->dag || !d->rt->rt) {
            datapy_fail(ADAG_ERR_CLOSED, "Source(dag=...): DAG %s is closed",
                        d->dag ? adag_dag_name(d->dag) : "");
            goto out;
        }
        p.dag = d->dag;
        p.field_mask |= ADAG_DATA_PARAM_DAG;
    }
    UINT(22, "sample_dtype", U32, p.sample_dtype, ADAG_DATA_PARAM_TENSOR);
    if (o[23] && o[23] != Py_None) {
        PyObject *shape = PySequence_Tuple(o[23]);
        if (!shape)
            goto out;
        Py_ssize_t n = PyTuple_GET_SIZE(shape);
        if (n >= ADAG_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "Source: a sample of %zd dimensions, at most %d", n,
                         ADAG_MAX_DIMS - 1);
            Py_DECREF(shape);
            goto out;
        }
        for (Py_ssize_t d = 0; d < n; d++) {
            if ((g = opt_uint(PyTuple_GET_ITEM(shape, d), "shape", (U64 >> 1), &v)) <= 0) {
                if (!g)
                    PyErr_SetString(PyExc_TypeError, "Source(shape=...): integers, not None");
                Py_DECREF(shape);
                goto out;
            }
            p.sample_shape[d] = (int64_t)v;
        }
        Py_DECREF(shape);
        p.sample_ndim = (unsigned)n;
        p.field_mask |= ADAG_DATA_PARAM_TENSOR;
    }
    if ((g = opt_str(o[24], "cpus", &p.cpus)) < 0)
        goto out;
    p.field_mask |= g ? ADAG_DATA_PARAM_CPUS : 0;
    UINT(25, "scratch_size", U64, p.scratch_size, ADAG_DATA_PARAM_SCRATCH);
#undef UINT
    if (!(s = (SourceObject *)type->tp_alloc(type, 0)))
        goto out;
    s->progress = progress;
    if (datapy_calls_init(s, o[26], o[27], o[28], &p, &s->calls) < 0)
        goto out;
    adag_status_t st;
    adag_data_source_h src = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = adag_data_open(&p, &src);
    Py_END_ALLOW_THREADS
    if (st != ADAG_OK) {
        datapy_raise(st, "Source");
        goto out;
    }
    s->src = src;
    s->batch_size = p.batch_size;
    adag_data_size(src, &s->batches_per_epoch, &s->samples_per_epoch);
    if (p.dag) {
        s->dag = (DagObject *)Py_NewRef(o[21]);
        datapy_dag_hold(s->dag, 1);
    }
out:
    free(shard_v);
    free(field_v);
    Py_XDECREF(shards);
    Py_XDECREF(fields);
    if (s && !s->src)
        Py_CLEAR(s); /* its dealloc frees the callbacks' state */
    return (PyObject *)s;
}

static void Source_dealloc(SourceObject *self)
{
    /* no _Batch is alive (each holds the source); an exception being
     * raised (a failed open) stays */
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    if (self->src && release_current(self, "Source") < 0)
        PyErr_WriteUnraisable((PyObject *)self);
    source_close_now(self);
    PyErr_Restore(t, v, tb);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static adag_status_t next_call(void *arg, int ms)
{
    SourceObject *s = arg;
    return adag_data_next(s->src, &s->cur, ms);
}

PyObject *datapy_batch_tuple(PyObject *mem, const adag_data_batch_t *b)
{
    return Py_BuildValue("(NKKKKK)", mem, (unsigned long long)b->epoch,
                         (unsigned long long)b->batch, (unsigned long long)b->epoch_batch,
                         (unsigned long long)b->next_epoch, (unsigned long long)b->next_batch);
}

/* Raises st of the source's failure, its cause the first exception a Python
 * callback raised, if one did. */
PyObject *datapy_raise_failure(SourceObject *s, adag_status_t st, const char *what)
{
    datapy_raise(st, what);
    PyObject *cause = datapy_calls_error(s->calls);
    if (cause) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        PyException_SetCause(v, cause); /* steals cause */
        PyErr_Restore(t, v, tb);
    }
    return NULL;
}

static PyObject *Source_next(SourceObject *self, PyObject *arg)
{
    long ms = PyLong_AsLong(arg);
    if (ms == -1 && PyErr_Occurred())
        return NULL;
    if (ms < -1 || ms > 0x7fffffffL) {
        PyErr_Format(PyExc_ValueError, "Source.next: timeout %ld ms", ms);
        return NULL;
    }
    if (source_check(self, "Source.next") < 0)
        return NULL;
    if (self->dag) {
        adag_data_batch_t b;
        PyObject *ex = datapy_next_exec(self, (int)ms, &b);
        if (ex && self->progress)
            adag_data_progress(self->src, adag_writer_fd(2)); /* draws only on a terminal */
        return ex ? datapy_batch_tuple(ex, &b) : NULL;
    }
    if (release_current(self, "Source.next") < 0)
        return NULL;
    BatchObject *mem = PyObject_New(BatchObject, &Batch_Type);
    if (!mem)
        return NULL;
    mem->source = (SourceObject *)Py_NewRef(self);
    mem->data = NULL;
    mem->size = 0;
    mem->released = 1;
    self->nmem++;
    adag_status_t st;
    self->busy = 1;
    int rc = datapy_wait(next_call, self, (int)ms, &st);
    self->busy = 0;
    if (rc < 0 || st != ADAG_OK) {
        self->cur.data = NULL;
        if (rc == 0 && st == ADAG_ERR_TIMEOUT)
            datapy_fail(st, "Source.next: no batch within %ld ms", ms);
        else if (rc == 0)
            datapy_raise_failure(self, st, "Source.next");
        Py_DECREF(mem);
        return NULL;
    }
    mem->data = self->cur.data;
    mem->size = (Py_ssize_t)self->cur.size;
    mem->released = 0;
    self->mem = (PyObject *)mem;
    if (self->progress)
        adag_data_progress(self->src, adag_writer_fd(2)); /* draws only on a terminal */
    return datapy_batch_tuple((PyObject *)mem, &self->cur);
}

static PyObject *Source_release(SourceObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->src || self->closing)
        Py_RETURN_NONE;
    if (release_current(self, "Source.release") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Source_close(SourceObject *self, PyObject *unused)
{
    (void)unused;
    return source_close(self) < 0 ? NULL : Py_NewRef(Py_None);
}

typedef adag_status_t (*format_fn)(adag_data_source_h, char *, size_t, size_t *);

/* The text of a format function (adag_data_format_stats, _progress), with
 * room for figures that grow between the calls. */
static PyObject *format_text(SourceObject *s, format_fn fn, const char *what)
{
    if (source_check(s, what) < 0)
        return NULL;
    size_t need = 0;
    adag_status_t st = fn(s->src, NULL, 0, &need);
    for (int tries = 0; tries < 4 && (st == ADAG_OK || st == ADAG_ERR_TOO_LARGE); tries++) {
        size_t len = need + 256;
        char *buf = malloc(len);
        if (!buf)
            return PyErr_NoMemory();
        st = fn(s->src, buf, len, &need);
        PyObject *text = st == ADAG_OK ? PyUnicode_FromString(buf) : NULL;
        free(buf);
        if (st == ADAG_OK)
            return text;
    }
    return datapy_raise(st, what);
}

static PyObject *Source_stats(SourceObject *self, PyObject *unused)
{
    (void)unused;
    if (source_check(self, "Source.stats") < 0)
        return NULL;
    adag_data_stats_t t;
    adag_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = adag_data_stats(self->src, &t);
    Py_END_ALLOW_THREADS
    if (st != ADAG_OK)
        return datapy_raise(st, "Source.stats");
    PyObject *text = format_text(self, adag_data_format_stats, "Source.stats");
    PyObject *steps = text ? PyTuple_New(t.nsteps) : NULL;
    for (unsigned k = 0; steps && k < t.nsteps; k++)
        PyTuple_SET_ITEM(steps, k, PyFloat_FromDouble(t.step_s[1 + k]));
    if (!steps) {
        Py_XDECREF(text);
        return NULL;
    }
    return Py_BuildValue(
        "{sKsKsKsKsnsnsnsdsdsKsKsKsdsdsNsN}", "batches", (unsigned long long)t.batches,
        "samples", (unsigned long long)t.samples, "bytes_read", (unsigned long long)t.bytes_read,
        "bad_skipped", (unsigned long long)t.bad_skipped, "budget", (Py_ssize_t)t.budget,
        "bytes_held", (Py_ssize_t)t.bytes_held, "bytes_peak", (Py_ssize_t)t.bytes_peak,
        "starved_s", t.starved_s, "blocked_s", t.blocked_s, "cache_hits",
        (unsigned long long)t.cache_hits, "cache_misses", (unsigned long long)t.cache_misses,
        "bytes_fetched", (unsigned long long)t.bytes_fetched, "elapsed_s", t.elapsed_s, "map_s",
        t.step_s[0], "steps_s", steps, "text", text);
}

static PyObject *Source_progress_line(SourceObject *self, PyObject *unused)
{
    (void)unused;
    return format_text(self, adag_data_format_progress, "Source.progress_line");
}

static PyObject *Source_get_cpus(SourceObject *self, void *unused)
{
    (void)unused;
    char buf[1024];
    if (source_check(self, "Source.cpus") < 0)
        return NULL;
    adag_status_t st = adag_data_cpus(self->src, buf, sizeof(buf));
    return st == ADAG_OK ? PyUnicode_FromString(buf) : datapy_raise(st, "Source.cpus");
}

static PyObject *Source_get_closed(SourceObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(!self->src || self->closing);
}

static PyObject *Source_get_open(SourceObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->src != NULL);
}

static PyMethodDef Source_methods[] = {
    {"next", (PyCFunction)Source_next, METH_O,
     "next(timeout_ms) -> (batch memory or Execution, epoch, batch, epoch_batch, next_epoch, "
     "next_batch): releases the batch held, waits for the next (-1: forever)"},
    {"release", (PyCFunction)Source_release, METH_NOARGS, "Gives the batch held back."},
    {"stats", (PyCFunction)Source_stats, METH_NOARGS,
     "adag_data_stats as a dict, with 'text': adag_data_format_stats"},
    {"progress_line", (PyCFunction)Source_progress_line, METH_NOARGS,
     "adag_data_format_progress: the progress line"},
    {"close", (PyCFunction)Source_close, METH_NOARGS,
     "Stops handing out batches; closes the source now, or when the last batch viewed goes"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Source_getset[] = {
    {"cpus", (getter)Source_get_cpus, NULL, "the CPUs of the source's threads (adag_data_cpus)",
     NULL},
    {"closed", (getter)Source_get_closed, NULL, "True once close() was called", NULL},
    {"open", (getter)Source_get_open, NULL,
     "True until adag_data_close ran (after close(), once no batch is viewed)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Source_members[] = {
    {"batch_size", T_UINT, offsetof(SourceObject, batch_size), READONLY, "samples a batch"},
    {"batches_per_epoch", T_ULONGLONG, offsetof(SourceObject, batches_per_epoch), READONLY,
     "this rank's batches of an epoch (adag_data_size)"},
    {"samples_per_epoch", T_ULONGLONG, offsetof(SourceObject, samples_per_epoch), READONLY,
     "the epoch's samples (adag_data_size)"},
    {"busy", T_INT, offsetof(SourceObject, busy), READONLY,
     "1 while a thread waits inside next()"},
    {"nbatches", T_LONG, offsetof(SourceObject, nmem), READONLY,
     "batch memory objects alive (the source closes once it is 0 after close())"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject Source_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.data._Source",
    .tp_basicsize = sizeof(SourceObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "adag_data_open with the params struct's fields as keywords (adag.data.Source "
              "maps Python's names onto them).",
    .tp_new = Source_new,
    .tp_dealloc = (destructor)Source_dealloc,
    .tp_methods = Source_methods,
    .tp_getset = Source_getset,
    .tp_members = Source_members,
};

/* ---- the module ---- */

static PyObject *mod_status_str(PyObject *m, PyObject *arg)
{
    (void)m;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(adag_status_str((adag_status_t)code));
}

static PyObject *mod_setup(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *by_status, *base, *dag;
    if (!PyArg_ParseTuple(args, "O!OO!:_setup", &PyDict_Type, &by_status, &base, &PyType_Type,
                          &dag))
        return NULL;
    Py_XSETREF(errors_by_status, Py_NewRef(by_status));
    Py_XSETREF(error_base, Py_NewRef(base));
    Py_XSETREF(dag_type, Py_NewRef(dag));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"status_str", mod_status_str, METH_O, "adag_status_str(code)"},
    {"_setup", mod_setup, METH_VARARGS,
     "_setup({status: class}, adag.Error, adag.CompiledDAG): the classes adag._adag made"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, .m_name = "adag._data",
    .m_doc = "libadag-data for Python: data sources and their batches (see adag.data).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__data(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    PyTypeObject *types[] = {&Source_Type, &Batch_Type, &Execution_Type, &Sample_Type};
    const char *names[] = {"_Source", "_Batch", "_Execution", "Sample"};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (PyType_Ready(types[i]) < 0 ||
            PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            goto fail;
    static const struct {
        const char *name;
        int value;
    } consts[] = {
        {"FORMAT_RECORDS", ADAG_DATA_FORMAT_RECORDS},
        {"FORMAT_NPY", ADAG_DATA_FORMAT_NPY},
        {"FORMAT_TOKENS", ADAG_DATA_FORMAT_TOKENS},
        {"FORMAT_WEBDATASET", ADAG_DATA_FORMAT_WEBDATASET},
        {"FORMAT_FILES", ADAG_DATA_FORMAT_FILES},
        {"RANKS_DROP", ADAG_DATA_RANKS_DROP},
        {"RANKS_PAD", ADAG_DATA_RANKS_PAD},
        {"BAD_FAIL", ADAG_DATA_BAD_FAIL},
        {"BAD_SKIP", ADAG_DATA_BAD_SKIP},
        {"DTYPE_U8", ADAG_DTYPE_U8},
        {"DTYPE_I8", ADAG_DTYPE_I8},
        {"DTYPE_I16", ADAG_DTYPE_I16},
        {"DTYPE_I32", ADAG_DTYPE_I32},
        {"DTYPE_I64", ADAG_DTYPE_I64},
        {"DTYPE_F16", ADAG_DTYPE_F16},
        {"DTYPE_BF16", ADAG_DTYPE_BF16},
        {"DTYPE_F32", ADAG_DTYPE_F32},
        {"DTYPE_F64", ADAG_DTYPE_F64},
        {"DTYPE_BOOL", ADAG_DTYPE_BOOL},
        {"MAX_FIELDS", ADAG_DATA_MAX_FIELDS},
        {"MAX_STEPS", ADAG_DATA_MAX_STEPS},
        {"SLICE_MS", DATAPY_SLICE_MS},
    };
    for (size_t i = 0; i < sizeof(consts) / sizeof(consts[0]); i++)
        if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0)
            goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
