/*
 * adag._data: the data stage (libadag-data, include/adag/data.h) for
 * Python, a second extension beside adag._adag. Shared between module.c
 * (the module, errors, waits), params.c (keywords into the params
 * struct), source.c (the source and its batches' memory), feed.c (a
 * source feeding a compiled DAG: its executions) and map.c (Python map
 * callbacks and steps, the image transform).
 *
 * Errors are adag._adag's classes (adag.InvalidError, ...): adag/data.py
 * hands the table of them to _setup() before anything else runs, and
 * datapy_raise() raises the one of a status with adag_last_error()'s text.
 *
 * A CompiledDAG is adag._adag's DagObject (python/src/adagpy.h): its type
 * comes in through _setup() too (the two extensions share no symbols), and
 * a source feeding it counts itself in the DAG's and its runtime's nbusy
 * from open to close, so neither is destroyed under the source's threads.
 *
 * The GIL: every libadag-data call that may wait for the source's threads
 * (open, next, release, stats, close) runs with the GIL released, since the
 * threads take it to run Python callbacks (map.c).
 */
#ifndef ADAG_DATAPY_H
#define ADAG_DATAPY_H

#include "adagpy.h"

#include <adag/data.h>

/* A Python map or step (map.c): the source's callbacks' state, which
 * outlives the source (freed after adag_data_close). */
typedef struct datapy_calls datapy_calls_t;

typedef struct {
    PyObject_HEAD
    adag_data_source_h src; /* NULL once closed */
    DagObject *dag;         /* the DAG fed (ADAG_DATA_PARAM_DAG), counted busy while open */
    adag_data_batch_t cur;  /* the batch held (cur.data != NULL) */
    PyObject *mem;          /* the current batch's _Batch (borrowed; it clears this at dealloc) */
    long nmem;              /* _Batch objects alive: each keeps batch memory in use */
    int closing;            /* close() with batches viewed: adag_data_close when the last goes */
    int busy;               /* a call is inside next with the GIL released */
    int progress;           /* draw the progress bar on fd 2 after each batch */
    unsigned batch_size;
    uint64_t batches_per_epoch, samples_per_epoch;
    datapy_calls_t *calls;  /* map.c: Python callbacks and the image transform, or NULL */
} SourceObject;

/* ---- module.c ---- */
/* Raises the adag exception class of st with adag_last_error()'s text (or
 * `what` when it is empty); returns NULL. */
PyObject *datapy_raise(adag_status_t st, const char *what);
/* adag_fail(st, fmt...) and then datapy_raise: a failure found here. */
PyObject *datapy_fail(adag_status_t st, const char *fmt, ...);
/* The CompiledDAG type of adag._adag (set by _setup), NULL before. */
PyTypeObject *datapy_dag_type(void);
/* Waits in slices of this many ms, checking for signals between them. */
#define DATAPY_SLICE_MS 100
/* Runs call(arg, slice) in slices of DATAPY_SLICE_MS until it is not
 * ADAG_ERR_TIMEOUT or ms (-1: forever) ran out, the GIL released, signals
 * checked between slices (-1 with the signal handler's exception set);
 * else its status. */
int datapy_wait(adag_status_t (*call)(void *arg, int ms), void *arg, int ms, adag_status_t *st);

/* ---- params.c ---- */
/* What the params point into while the source opens. */
typedef struct {
    PyObject *shards, *fields; /* tuples of str */
    const char **shard_v, **field_v;
} datapy_keep_t;
/* The _Source keywords o[0..26) (in the order of its keyword list: shards,
 * format, ..., scratch_size) into *p; 0, or -1 with an exception. */
int datapy_params(PyObject *const *o, adag_data_params_t *p, datapy_keep_t *keep);
void datapy_keep_free(datapy_keep_t *keep);

/* ---- source.c ---- */
extern PyTypeObject Source_Type, Batch_Type;
/* The source's failure st: datapy_raise, its __cause__ the first exception
 * a Python callback raised, if one did; NULL. */
PyObject *datapy_raise_failure(SourceObject *s, adag_status_t st, const char *what);
/* (memory or Execution, epoch, batch, epoch_batch, next_epoch, next_batch);
 * steals obj. */
PyObject *datapy_batch_tuple(PyObject *obj, const adag_data_batch_t *b);

/* ---- feed.c ---- */
extern PyTypeObject Execution_Type;
/* Counts the source's hold on its DAG (open) and gives it back (close). */
void datapy_dag_hold(DagObject *d, int hold);
/* The next execution of a source feeding a DAG, waiting up to ms (-1:
 * forever) in slices that let Ctrl-C through: an Execution object, its
 * batch in *b. */
PyObject *datapy_next_exec(SourceObject *s, int ms, adag_data_batch_t *b);

/* ---- map.c ---- */
extern PyTypeObject Sample_Type;
/* Fills p's map, steps, scratch and tensor from the keywords `image`
 * (dict of adag_data_image_t fields), `map` (callable) and `steps` (list of
 * (name, callable)); the state goes to *calls (freed by datapy_calls_free
 * after the source closed). 0, or -1 with an exception. */
int datapy_calls_init(SourceObject *s, PyObject *image, PyObject *map, PyObject *steps,
                      adag_data_params_t *p, datapy_calls_t **calls);
void datapy_calls_free(datapy_calls_t *calls);
/* The first exception a callback raised (a new reference), or NULL. */
PyObject *datapy_calls_error(datapy_calls_t *calls);

#endif
