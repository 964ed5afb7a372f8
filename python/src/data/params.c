/*
 * adag._data: the keywords of _Source (adag_data_params_t's fields, named
 * as in C; adag/data.py maps Python's names onto them) into the params
 * struct. A keyword absent or None leaves its field bit unset (the
 * library's default); a value that cannot be the field's is ValueError or
 * TypeError here, one the library refuses is its own error at open.
 */
#include "datapy.h"

#include <stdlib.h>

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

int datapy_params(PyObject *const *o, adag_data_params_t *p, datapy_keep_t *k)
{
    unsigned long long v;
    int g;
    /* each keyword: its value, and the field bit it sets when given */
#define UINT(i, name, max, dst, bit)                                                               \
    do {                                                                                           \
        if ((g = opt_uint(o[i], name, max, &v)) < 0)                                               \
            return -1;                                                                             \
        if (g) {                                                                                   \
            dst = v;                                                                               \
            p->field_mask |= bit;                                                                  \
        }                                                                                          \
    } while (0)
    if (!o[0] || !(k->shards = PySequence_Tuple(o[0])) ||
        !(k->shard_v = str_array(k->shards, "shards"))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_Source(shards=[...]): the shards are required");
        return -1;
    }
    p->shards = k->shard_v;
    p->nshards = (unsigned)PyTuple_GET_SIZE(k->shards);
    UINT(1, "format", U32, p->format, 0);
    UINT(2, "batch_size", U32, p->batch_size, 0);
    UINT(3, "sample_size", U64, p->sample_size, 0);
    UINT(4, "record_size", U64, p->record_size, ADAG_DATA_PARAM_RECORD_SIZE);
    UINT(5, "seq_len", U32, p->seq_len, ADAG_DATA_PARAM_SEQ_LEN);
    if (o[6] && o[6] != Py_None) {
        if (!(k->fields = PySequence_Tuple(o[6])) || !(k->field_v = str_array(k->fields, "fields")))
            return -1;
        p->fields = k->field_v;
        p->nfields = (unsigned)PyTuple_GET_SIZE(k->fields);
        p->field_mask |= ADAG_DATA_PARAM_FIELDS;
    }
    if ((g = opt_str(o[7], "cache_dir", &p->cache_dir)) < 0)
        return -1;
    p->field_mask |= g ? ADAG_DATA_PARAM_CACHE : 0u;
    UINT(8, "cache_bytes", U64, p->cache_bytes, ADAG_DATA_PARAM_CACHE);
    UINT(9, "threads", U32, p->threads, ADAG_DATA_PARAM_THREADS);
    UINT(10, "seed", U64, p->seed, ADAG_DATA_PARAM_SEED);
    UINT(11, "shuffle_shards", 1, p->shuffle_shards, ADAG_DATA_PARAM_SHUFFLE);
    UINT(12, "shuffle_window", U32, p->shuffle_window, ADAG_DATA_PARAM_SHUFFLE);
    p->world = 1;
    UINT(13, "rank", U32, p->rank, ADAG_DATA_PARAM_RANKS);
    UINT(14, "world", U32, p->world, ADAG_DATA_PARAM_RANKS);
    UINT(15, "ranks_policy", U32, p->ranks_policy, ADAG_DATA_PARAM_RANKS);
    if (!(p->field_mask & ADAG_DATA_PARAM_RANKS))
        p->world = 0;
    UINT(16, "budget", U64, p->budget, ADAG_DATA_PARAM_BUDGET);
    UINT(17, "prefetch", U32, p->prefetch, ADAG_DATA_PARAM_PREFETCH);
    UINT(18, "bad_policy", U32, p->bad_policy, ADAG_DATA_PARAM_BAD_POLICY);
    UINT(19, "start_epoch", U64, p->start_epoch, ADAG_DATA_PARAM_START);
    UINT(20, "start_batch", U64, p->start_batch, ADAG_DATA_PARAM_START);
    if (o[21] && o[21] != Py_None) {
        if (!PyObject_TypeCheck(o[21], datapy_dag_type())) {
            PyErr_Format(PyExc_TypeError, "Source(dag=...): a CompiledDAG, not %.80s",
                         Py_TYPE(o[21])->tp_name);
            return -1;
        }
        DagObject *d = (DagObject *)o[21];
        if (!d->dag || !d->rt->rt) {
            datapy_fail(ADAG_ERR_CLOSED, "Source(dag=...): DAG %s is closed",
                        d->dag ? adag_dag_name(d->dag) : "");
            return -1;
        }
        p->dag = d->dag;
        p->field_mask |= ADAG_DATA_PARAM_DAG;
    }
    UINT(22, "sample_dtype", U32, p->sample_dtype, ADAG_DATA_PARAM_TENSOR);
    if (o[23] && o[23] != Py_None) {
        PyObject *shape = PySequence_Tuple(o[23]);
        if (!shape)
            return -1;
        Py_ssize_t n = PyTuple_GET_SIZE(shape);
        if (n >= ADAG_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "Source: a sample of %zd dimensions, at most %d", n,
                         ADAG_MAX_DIMS - 1);
            Py_DECREF(shape);
            return -1;
        }
        for (Py_ssize_t d = 0; d < n; d++) {
            if ((g = opt_uint(PyTuple_GET_ITEM(shape, d), "shape", (U64 >> 1), &v)) <= 0) {
                if (!g)
                    PyErr_SetString(PyExc_TypeError, "Source(shape=...): integers, not None");
                Py_DECREF(shape);
                return -1;
            }
            p->sample_shape[d] = (int64_t)v;
        }
        Py_DECREF(shape);
        p->sample_ndim = (unsigned)n;
        p->field_mask |= ADAG_DATA_PARAM_TENSOR;
    }
    if ((g = opt_str(o[24], "cpus", &p->cpus)) < 0)
        return -1;
    p->field_mask |= g ? ADAG_DATA_PARAM_CPUS : 0;
    UINT(25, "scratch_size", U64, p->scratch_size, ADAG_DATA_PARAM_SCRATCH);
#undef UINT
    return 0;
}

void datapy_keep_free(datapy_keep_t *k)
{
    free(k->shard_v);
    free(k->field_v);
    Py_XDECREF(k->shards);
    Py_XDECREF(k->fields);
}
