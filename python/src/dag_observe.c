/*
 * adag._adag: what a compiled DAG offers besides execute and get.
 *
 * - Waits that Ctrl-C interrupts: a blocking get (and a blocking execute
 *   in the main thread) waits in C with the GIL released, in slices of at
 *   most ADAGPY_SLICE_MS, and runs the signal handlers between slices, so
 *   SIGINT raises KeyboardInterrupt within a slice with the ref still
 *   live. A wait no longer than a slice is one call, as before.
 * - The hooks of asyncio (adag/aio.py): the DAG's fd, get without waiting
 *   (Ref.try_get, Ref.ready), and execute_async, Ref.wait_async and
 *   `await ref`, which call into adag.aio.
 * - Statistics as adag.DagStats (adag/stats.py), the trace as Chrome
 *   trace-event JSON, the settings the DAG runs on.
 */
#include "adagpy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ADAGPY_SLICE_MS 50
/* a blocking execute in the main thread waiting for room: it retries
 * without blocking after pauses that double from PAUSE_MIN_US up to
 * PAUSE_MAX_US (no call of the C API waits for room with a timeout) */
#define PAUSE_MIN_US 20
#define PAUSE_MAX_US 2000

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- waits that Ctrl-C interrupts ---- */

adag_status_t adagpy_dag_get(DagObject *d, adag_ref_t ref, adag_value_t *values, int ms)
{
    adag_dag_h dag = d->dag;
    adag_status_t st;
    int slice = ms >= 0 && ms <= ADAGPY_SLICE_MS ? ms : ADAGPY_SLICE_MS;
    Py_BEGIN_ALLOW_THREADS
    st = adag_dag_get(dag, ref, values, d->noutputs, slice);
    Py_END_ALLOW_THREADS
    if (st != ADAG_ERR_TIMEOUT || slice == ms)
        return st;
    /* the first slice ran out: the call began about `slice` ago (no clock
     * read on the path of a result that is in) */
    int64_t deadline = ms < 0 ? 0 : now_ns() + (int64_t)(ms - slice) * 1000000;
    for (;;) {
        /* the caller counts itself busy: no other thread frees the DAG here */
        if (PyErr_CheckSignals() < 0)
            return ADAGPY_RAISED;
        if (ms >= 0) {
            int64_t left = deadline - now_ns();
            if (left <= 0)
                return adag_fail(ADAG_ERR_TIMEOUT, "adag_dag_get: ref %llu of DAG %s not ready "
                                 "within %d ms", (unsigned long long)ref, adag_dag_name(dag), ms);
            slice = left >= ADAGPY_SLICE_MS * 1000000LL ? ADAGPY_SLICE_MS
                                                         : (int)((left + 999999) / 1000000);
        }
        Py_BEGIN_ALLOW_THREADS
        st = adag_dag_get(dag, ref, values, d->noutputs, slice);
        Py_END_ALLOW_THREADS
        if (st != ADAG_ERR_TIMEOUT)
            return st;
    }
}

/* Whether this is the interpreter's main thread, where signal handlers run. */
static int is_main_thread(void)
{
    static unsigned long main_ident; /* under the GIL */
    if (!main_ident) {
        PyObject *threading = PyImport_ImportModule("threading");
        PyObject *t = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
        PyObject *ident = t ? PyObject_GetAttrString(t, "ident") : NULL;
        main_ident = ident ? PyLong_AsUnsignedLong(ident) : 0;
        if (PyErr_Occurred())
            PyErr_Clear(); /* unknown: no slices, the plain blocking call */
        Py_XDECREF(ident);
        Py_XDECREF(t);
        Py_XDECREF(threading);
        if (!main_ident)
            return 0;
    }
    return PyThread_get_thread_ident() == main_ident;
}

/* The DAG's execute timeout in ms (-1 forever), or -2 with an exception. */
static int dag_execute_timeout(DagObject *d)
{
    if (d->execute_timeout_ms != -2)
        return d->execute_timeout_ms;
    adag_config_h config;
    char buf[32];
    adag_status_t st = adag_dag_config(d->dag, &config);
    if (st != ADAG_OK) {
        adagpy_raise(st, "CompiledDAG.execute_timeout");
        return -2;
    }
    st = adag_config_get(config, "ADAG_EXECUTE_TIMEOUT_MS", buf, sizeof(buf), NULL);
    adag_config_release(config);
    if (st != ADAG_OK) {
        adagpy_raise(st, "CompiledDAG.execute_timeout");
        return -2;
    }
    d->execute_timeout_ms = (int)strtol(buf, NULL, 10); /* checked by the config: -1 .. INT32_MAX */
    return d->execute_timeout_ms;
}

adag_status_t adagpy_dag_execute(DagObject *d, const adag_value_t *in, unsigned n, int block,
                                 adag_ref_t *ref)
{
    adag_dag_h dag = d->dag;
    adag_status_t st;
    int sliced = block && is_main_thread();
    unsigned flags = block && !sliced ? 0 : ADAG_EXECUTE_NONBLOCK;
    Py_BEGIN_ALLOW_THREADS
    st = adag_dag_execute(dag, in, n, flags, ref);
    Py_END_ALLOW_THREADS
    if (st != ADAG_ERR_AGAIN || !sliced)
        return st;
    int total = dag_execute_timeout(d);
    if (total == -2)
        return ADAGPY_RAISED;
    if (total >= 0 && total <= ADAGPY_SLICE_MS) {
        Py_BEGIN_ALLOW_THREADS
        st = adag_dag_execute(dag, in, n, 0, ref);
        Py_END_ALLOW_THREADS
        return st;
    }
    int64_t deadline = total < 0 ? 0 : now_ns() + (int64_t)total * 1000000;
    long pause_us = PAUSE_MIN_US;
    for (;;) {
        if (PyErr_CheckSignals() < 0)
            return ADAGPY_RAISED;
        if (total >= 0 && now_ns() >= deadline) {
            /* the last try's message says what holds the room */
            char why[512];
            const char *msg = adag_last_error(), *p = "adag_dag_execute: ";
            snprintf(why, sizeof(why), "%s",
                     strncmp(msg, p, strlen(p)) == 0 ? msg + strlen(p) : msg);
            return adag_fail(ADAG_ERR_TIMEOUT, "adag_dag_execute: no room after %d ms: %s", total,
                             why);
        }
        Py_BEGIN_ALLOW_THREADS
        struct timespec pause = {0, pause_us * 1000};
        nanosleep(&pause, NULL); /* a signal cuts it short */
        st = adag_dag_execute(dag, in, n, ADAG_EXECUTE_NONBLOCK, ref);
        Py_END_ALLOW_THREADS
        if (st != ADAG_ERR_AGAIN)
            return st;
        pause_us = pause_us * 2 < PAUSE_MAX_US ? pause_us * 2 : PAUSE_MAX_US;
    }
}

PyObject *adagpy_dag_execute_timeout(DagObject *self, void *unused)
{
    (void)unused;
    if (adagpy_dag_check(self, "CompiledDAG.execute_timeout") < 0)
        return NULL;
    int ms = dag_execute_timeout(self);
    if (ms == -2)
        return NULL;
    return ms < 0 ? Py_NewRef(Py_None) : PyFloat_FromDouble(ms / 1000.0);
}

/* ---- asyncio: the fd, gets that do not wait, adag.aio ---- */

PyObject *adagpy_dag_fileno(DagObject *self, PyObject *unused)
{
    (void)unused;
    if (adagpy_dag_check(self, "CompiledDAG.fileno") < 0)
        return NULL;
    int fd;
    adag_status_t st = adag_dag_fd(self->dag, &fd);
    return st == ADAG_OK ? PyLong_FromLong(fd) : adagpy_raise(st, "CompiledDAG.fileno");
}

PyObject *adagpy_ref_try_get(RefObject *self, PyObject *unused)
{
    (void)unused;
    adag_value_t *values = calloc(self->dag->noutputs ? self->dag->noutputs : 1, sizeof(*values));
    if (!values)
        return PyErr_NoMemory();
    int rc = adagpy_ref_wait(self, 0, values, "Ref.try_get");
    PyObject *res = rc < 0 ? NULL : rc == 1 ? Py_NewRef(Py_None) : adagpy_ref_take(self, values);
    free(values);
    return res;
}

PyObject *adagpy_ref_ready(RefObject *self, PyObject *unused)
{
    (void)unused;
    DagObject *d = self->dag;
    if (adagpy_dag_check(d, "Ref.ready") < 0)
        return NULL;
    if (self->state != REF_LIVE)
        return PyErr_Format(PyExc_ValueError, "Ref.ready: ref %llu was %s",
                            (unsigned long long)self->ref,
                            self->state == REF_GOT ? "already got" : "released");
    adag_value_t *values = calloc(d->noutputs ? d->noutputs : 1, sizeof(*values));
    if (!values)
        return PyErr_NoMemory();
    /* a failed execution is in too: its get raises, as often as it is asked */
    adag_status_t st = adag_dag_get(d->dag, self->ref, values, d->noutputs, 0);
    free(values);
    if (st == ADAG_OK || st == ADAG_ERR_METHOD || st == ADAG_ERR_TOO_LARGE)
        Py_RETURN_TRUE;
    if (st == ADAG_ERR_TIMEOUT)
        Py_RETURN_FALSE;
    return adagpy_raise(st, "Ref.ready");
}

/* adag.aio.<name>(first, *args, **kw) */
static PyObject *aio_call(const char *name, PyObject *first, PyObject *args, PyObject *kw)
{
    static PyObject *aio; /* the module, imported once (under the GIL) */
    if (!aio && !(aio = PyImport_ImportModule("adag.aio")))
        return NULL;
    PyObject *fn = PyObject_GetAttrString(aio, name);
    if (!fn)
        return NULL;
    Py_ssize_t n = args ? PyTuple_GET_SIZE(args) : 0;
    PyObject *all = PyTuple_New(n + 1), *res = NULL;
    if (all) {
        PyTuple_SET_ITEM(all, 0, Py_NewRef(first));
        for (Py_ssize_t i = 0; i < n; i++)
            PyTuple_SET_ITEM(all, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
        res = PyObject_Call(fn, all, kw);
        Py_DECREF(all);
    }
    Py_DECREF(fn);
    return res;
}

PyObject *adagpy_dag_execute_async(DagObject *self, PyObject *args, PyObject *kw)
{
    return aio_call("execute", (PyObject *)self, args, kw);
}

PyObject *adagpy_ref_wait_async(RefObject *self, PyObject *args, PyObject *kw)
{
    return aio_call("wait", (PyObject *)self, args, kw);
}

static PyObject *Ref_await(RefObject *self)
{
    return aio_call("_await_ref", (PyObject *)self, NULL, NULL);
}

PyAsyncMethods adagpy_ref_as_async = {.am_await = (unaryfunc)Ref_await};

/* ---- statistics ---- */

/* cls(**kw) of adag.stats; steals kw */
static PyObject *stats_new(const char *cls, PyObject *kw)
{
    static PyObject *mod; /* adag.stats, imported once (under the GIL) */
    if (!kw || (!mod && !(mod = PyImport_ImportModule("adag.stats")))) {
        Py_XDECREF(kw);
        return NULL;
    }
    PyObject *c = PyObject_GetAttrString(mod, cls), *empty = PyTuple_New(0), *o = NULL;
    if (c && empty)
        o = PyObject_Call(c, empty, kw);
    Py_XDECREF(c);
    Py_XDECREF(empty);
    Py_DECREF(kw);
    return o;
}

static void device_name(int32_t device, char *buf, size_t len)
{
    if (device == ADAG_DEVICE_HOST)
        snprintf(buf, len, "host");
    else
        snprintf(buf, len, "%s:%u", adag_device_kind_name(ADAG_DEVICE_KIND(device)),
                 ADAG_DEVICE_INDEX(device));
}

static PyObject *actor_stats(adag_stats_h h, unsigned i)
{
    adag_actor_stats_t a = ADAG_ACTOR_STATS_INIT;
    adag_status_t st = adag_stats_actor(h, i, &a);
    if (st != ADAG_OK)
        return adagpy_raise(st, "CompiledDAG.stats");
    char dev[64];
    device_name(a.device, dev, sizeof(dev));
    return stats_new("ActorStats",
                     Py_BuildValue("{s:s,s:s,s:s,s:I,s:K,s:K,s:K,s:K,s:K,s:d,s:K,s:s,s:z}",
                                   "name", a.name, "placement", a.placement, "device", dev,
                                   "nops", a.nops, "count", (unsigned long long)a.count,
                                   "busy_ns", (unsigned long long)a.busy_ns, "wait_input_ns",
                                   (unsigned long long)a.wait_input_ns, "wait_room_ns",
                                   (unsigned long long)a.wait_room_ns, "elapsed_ns",
                                   (unsigned long long)a.elapsed_ns, "busy", a.busy, "idle_ns",
                                   (unsigned long long)a.idle_ns, "doing", a.doing ? a.doing : "",
                                   "unanswered", a.unanswered));
}

static PyObject *op_stats(adag_stats_h h, unsigned i)
{
    adag_op_stats_t o = ADAG_OP_STATS_INIT;
    adag_status_t st = adag_stats_op(h, i, &o);
    if (st != ADAG_OK)
        return adagpy_raise(st, "CompiledDAG.stats");
    return stats_new(
        "OpStats",
        Py_BuildValue("{s:s,s:s,s:I,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "actor", o.actor,
                      "name", o.name, "index", o.index, "count", (unsigned long long)o.count,
                      "compute_ns", (unsigned long long)o.compute_ns, "compute_mean_ns",
                      (unsigned long long)o.compute_mean_ns, "compute_p50_ns",
                      (unsigned long long)o.compute_p50_ns, "compute_p99_ns",
                      (unsigned long long)o.compute_p99_ns, "compute_max_ns",
                      (unsigned long long)o.compute_max_ns, "wait_input_ns",
                      (unsigned long long)o.wait_input_ns, "wait_room_ns",
                      (unsigned long long)o.wait_room_ns, "publish_ns",
                      (unsigned long long)o.publish_ns));
}

static PyObject *channel_stats(adag_stats_h h, unsigned i)
{
    adag_channel_stats_t c = ADAG_CHANNEL_STATS_INIT;
    adag_status_t st = adag_stats_channel(h, i, &c);
    if (st != ADAG_OK)
        return adagpy_raise(st, "CompiledDAG.stats");
    return stats_new("ChannelStats",
                     Py_BuildValue("{s:s,s:s,s:s,s:K,s:K,s:I,s:i,s:n,s:n,s:n}", "name", c.name,
                                   "kind", c.kind, "writer", c.writer, "values",
                                   (unsigned long long)c.values, "bytes",
                                   (unsigned long long)c.bytes, "slots", c.slots, "in_use",
                                   c.in_use, "slot_bytes", (Py_ssize_t)c.slot_bytes,
                                   "host_bytes", (Py_ssize_t)c.host_bytes, "device_bytes",
                                   (Py_ssize_t)c.device_bytes));
}

/* A tuple of get(h, 0..n) */
static PyObject *records(adag_stats_h h, unsigned n, PyObject *(*get)(adag_stats_h, unsigned))
{
    PyObject *t = PyTuple_New(n);
    for (unsigned i = 0; t && i < n; i++) {
        PyObject *o = get(h, i);
        if (!o)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, o);
    }
    return t;
}

static PyObject *stats_text(adag_stats_h h)
{
    size_t need = 0;
    adag_status_t st = adag_stats_format(h, NULL, 0, &need);
    if (st != ADAG_ERR_TOO_LARGE && st != ADAG_OK)
        return adagpy_raise(st, "CompiledDAG.stats");
    char *buf = malloc(need ? need : 1);
    if (!buf)
        return PyErr_NoMemory();
    st = adag_stats_format(h, buf, need, NULL);
    PyObject *s = st == ADAG_OK ? PyUnicode_FromString(buf) : adagpy_raise(st, "CompiledDAG.stats");
    free(buf);
    return s;
}

PyObject *adagpy_dag_stats(DagObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"take", NULL};
    int take = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:stats", kwlist, &take))
        return NULL;
    if (adagpy_dag_check(self, "CompiledDAG.stats") < 0)
        return NULL;
    adag_dag_stats_t s = ADAG_DAG_STATS_INIT;
    adag_stats_h h = NULL;
    adag_dag_h dag = self->dag;
    adag_status_t st;
    /* both may ask every actor (up to ADAG_STATS_TIMEOUT_MS) */
    self->nbusy++;
    self->rt->nbusy++;
    Py_BEGIN_ALLOW_THREADS
    st = adag_dag_stats(dag, &s);
    if (st == ADAG_OK && take)
        st = adag_dag_stats_take(dag, &h);
    Py_END_ALLOW_THREADS
    self->nbusy--;
    self->rt->nbusy--;
    if (st != ADAG_OK)
        return adagpy_raise(st, "CompiledDAG.stats");
    PyObject *actors = NULL, *ops = NULL, *chans = NULL, *text = NULL, *res = NULL;
    const char *bottleneck = s.bottleneck;
    double busy = s.bottleneck_busy;
    if (h) {
        const char *b = adag_stats_bottleneck(h, &busy);
        bottleneck = b ? b : "";
        busy = b ? busy : 0;
        if (!(actors = records(h, adag_stats_nactors(h), actor_stats)) ||
            !(ops = records(h, adag_stats_nops(h), op_stats)) ||
            !(chans = records(h, adag_stats_nchannels(h), channel_stats)) ||
            !(text = stats_text(h)))
            goto out;
    } else if (!(actors = PyTuple_New(0)) || !(ops = PyTuple_New(0)) ||
               !(chans = PyTuple_New(0))) {
        goto out;
    }
    res = stats_new(
        "DagStats",
        Py_BuildValue("{s:s,s:K,s:K,s:K,s:K,s:I,s:n,s:I,s:n,s:n,s:I,s:I,s:O,s:s,s:d,s:O,s:O,s:O,"
                      "s:O}",
                      "name", adag_dag_name(dag), "executed", (unsigned long long)s.executed,
                      "completed", (unsigned long long)s.completed, "failed",
                      (unsigned long long)s.failed, "released", (unsigned long long)s.released,
                      "max_inflight", s.max_inflight, "slot_capacity", (Py_ssize_t)s.slot_capacity,
                      "nchannels", s.nchannels, "shm_bytes", (Py_ssize_t)s.shm_bytes,
                      "device_bytes", (Py_ssize_t)s.device_bytes, "communicators",
                      s.communicators, "shared_communicators", s.shared_communicators, "timed",
                      h ? (adag_stats_timed(h) ? Py_True : Py_False)
                        : (s.timed ? Py_True : Py_False),
                      "bottleneck", bottleneck, "bottleneck_busy", busy, "actors", actors, "ops",
                      ops, "channels", chans, "text", text ? text : Py_None));
out:
    Py_XDECREF(actors);
    Py_XDECREF(ops);
    Py_XDECREF(chans);
    Py_XDECREF(text);
    if (h)
        adag_stats_free(h);
    return res;
}

/* ---- the trace, the settings ---- */

PyObject *adagpy_dag_write_trace(DagObject *self, PyObject *arg)
{
    PyObject *path = NULL;
    if (!PyUnicode_FSConverter(arg, &path))
        return NULL;
    PyObject *res = NULL;
    if (adagpy_dag_check(self, "CompiledDAG.write_trace") < 0)
        goto out;
    const char *p = PyBytes_AS_STRING(path);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, arg);
        goto out;
    }
    adag_status_t st;
    adag_dag_h dag = self->dag;
    self->nbusy++;
    self->rt->nbusy++;
    Py_BEGIN_ALLOW_THREADS
    st = adag_dag_write_trace(dag, adag_writer_fd(fd));
    Py_END_ALLOW_THREADS
    self->nbusy--;
    self->rt->nbusy--;
    if (close(fd) < 0 && st == ADAG_OK)
        st = adag_fail(ADAG_ERR_IO, "CompiledDAG.write_trace: closing %s: %s", p, strerror(errno));
    if (st != ADAG_OK) {
        unlink(p); /* no half a trace left behind */
        adagpy_raise(st, "CompiledDAG.write_trace");
        goto out;
    }
    res = Py_NewRef(Py_None);
out:
    Py_DECREF(path);
    return res;
}

/* The settings' names: the lines of adag_config_print's text that start
 * with one ("ADAG_SPIN_NS   = 0   (default ...)"). */
static int add_settings(PyObject *dict, adag_config_h config, char *text)
{
    for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "ADAG_", 5) != 0)
            continue;
        char name[128], value[4096];
        size_t n = strcspn(line, " =\n");
        if (n >= sizeof(name))
            continue;
        memcpy(name, line, n);
        name[n] = '\0';
        adag_status_t st = adag_config_get(config, name, value, sizeof(value), NULL);
        if (st == ADAG_ERR_INVALID) /* a secret (ADAG_TOKEN): never read back */
            continue;
        if (st != ADAG_OK) {
            adagpy_raise(st, "CompiledDAG.config");
            return -1;
        }
        PyObject *v = PyUnicode_DecodeFSDefault(value);
        if (!v || PyDict_SetItemString(dict, name, v) < 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    return 0;
}

PyObject *adagpy_dag_config(DagObject *self, void *unused)
{
    (void)unused;
    if (adagpy_dag_check(self, "CompiledDAG.config") < 0)
        return NULL;
    adag_config_h config;
    adag_status_t st = adag_dag_config(self->dag, &config);
    if (st != ADAG_OK)
        return adagpy_raise(st, "CompiledDAG.config");
    size_t need = 0;
    char *text = NULL;
    PyObject *dict = NULL;
    st = adag_config_print(config, NULL, 0, &need);
    if (st != ADAG_OK && st != ADAG_ERR_TOO_LARGE) {
        adagpy_raise(st, "CompiledDAG.config");
        goto out;
    }
    if (!(text = malloc(need ? need : 1))) {
        PyErr_NoMemory();
        goto out;
    }
    if ((st = adag_config_print(config, text, need, NULL)) != ADAG_OK) {
        adagpy_raise(st, "CompiledDAG.config");
        goto out;
    }
    if ((dict = PyDict_New()) && add_settings(dict, config, text) < 0)
        Py_CLEAR(dict);
out:
    free(text);
    adag_config_release(config);
    return dict;
}
