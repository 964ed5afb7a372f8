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

#include <stdlib.h>

/* ---- _Batch: one batch's memory ---- */

typedef struct {
    PyObject_HEAD
    SourceObject *source;
    void *data;
    Py_ssize_t size;
    int released;
} BatchObject;

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

PyTypeObject Batch_Type = {
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

/* ClosedError unless the source is open; with `alone`, BusyError while
 * another thread waits in next() (which writes the batch held). Stats and
 * the like may be read meanwhile: the library locks them. */
static int source_check(SourceObject *s, const char *what, int alone)
{
    if (!s->src || s->closing) {
        datapy_fail(ADAG_ERR_CLOSED, "%s: the source is closed", what);
        return -1;
    }
    if (alone && s->busy) {
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
    if (!datapy_dag_type()) {
        PyErr_SetString(PyExc_RuntimeError, "adag._data: _setup() was not called");
        return NULL;
    }
    adag_data_params_t p = {0};
    datapy_keep_t keep = {0};
    SourceObject *s = NULL;
    if (datapy_params(o, &p, &keep) < 0)
        goto out;
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
    datapy_keep_free(&keep);
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
    if (source_check(self, "Source.next", 1) < 0)
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
    if (source_check(self, "Source.release", 1) < 0 ||
        release_current(self, "Source.release") < 0)
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
    if (source_check(s, what, 0) < 0)
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
    if (source_check(self, "Source.stats", 0) < 0)
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
    if (source_check(self, "Source.cpus", 0) < 0)
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

PyTypeObject Source_Type = {
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
