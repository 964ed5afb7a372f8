/*
 * adag_dag_write_trace: the spans of the driver and of every actor loop of
 * a DAG (common/trace.h) as Chrome trace-event JSON, which Perfetto UI and
 * chrome://tracing open. One track per actor loop and one for the driver;
 * each span a complete event ("ph":"X") with the execution's ref, the op
 * and the channel (or method) in its args. Times are the driver's
 * CLOCK_MONOTONIC, in microseconds from the first span: a remote worker's
 * clock is mapped by the offset its placement measured. Every actor is
 * asked at once (dag/proc/observe.c); one that does not answer within
 * ADAG_STATS_TIMEOUT_MS keeps an empty track named "...: no answer", and
 * otherData's "unanswered" maps its name to why.
 */
#include "common/clock.h"
#include "common/log.h"
#include "common/out.h"
#include "common/settings.h"
#include "dag/driver/dag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    adag_trace_rec_t *recs; /* as copied */
    adag_span_t *spans;     /* expanded */
    uint64_t nrecs, n, lost;
    int64_t offset_ns;
    const char *unanswered; /* the actor's records are not in: why; NULL: they are */
} track_t;

static void json_str(adag_out_t *out, const char *s)
{
    adag__out_putc(out, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            adag__out_printf(out, "\\%c", c);
        else if (c < 0x20)
            adag__out_printf(out, "\\u%04x", c);
        else
            adag__out_putc(out, (char)c);
    }
    adag__out_putc(out, '"');
}

/* One span of actor ai (-1: the driver) as a complete event. */
static void write_span(adag_out_t *out, adag_dag_h dag, int ai, const adag_span_t *s,
                       int64_t offset, uint64_t base)
{
    const adag_program_t *p = ai >= 0 ? &dag->run.actors[ai].prog : NULL;
    adag_actor_h a = ai >= 0 ? dag->run.actors[ai].actor : NULL;
    double ts = (double)((int64_t)s->start_ns + offset - (int64_t)base) / 1e3;
    double dur = s->end_ns > s->start_ns ? (double)(s->end_ns - s->start_ns) / 1e3 : 0;
    const char *what = adag__chan_span_name(s->kind);
    adag__out_printf(out, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f,\"cat\":",
                    ai + 2, ts, dur);
    json_str(out, s->kind == ADAG_SPAN_COMPUTE ? "compute" : what);
    adag__out_printf(out, ",\"name\":");
    if (s->kind == ADAG_SPAN_COMPUTE && a && p && s->op < p->nops &&
        p->ops[s->op].method < a->nmethods)
        json_str(out, a->methods[p->ops[s->op].method].name);
    else
        json_str(out, what);
    adag__out_printf(out, ",\"args\":{\"ref\":%llu", (unsigned long long)s->seq);
    if (p) {
        if (s->op != ADAG_SPAN_NO_OP)
            adag__out_printf(out, ",\"op\":%u", s->op);
        if ((s->kind == ADAG_SPAN_WAIT_INPUT || s->kind == ADAG_SPAN_WAIT_ROOM ||
             s->kind == ADAG_SPAN_PUBLISH || s->kind >= ADAG_SPAN_BACKEND) &&
            s->arg < p->nchans) {
            adag__out_printf(out, ",\"channel\":");
            json_str(out, p->chans[s->arg].name);
        }
        if (s->kind >= ADAG_SPAN_BACKEND)
            adag__out_printf(out, ",\"kind\":%u", s->kind);
    }
    adag__out_printf(out, "}}");
}

static void write_track_names(adag_out_t *out, adag_dag_h dag, int ai, const track_t *t)
{
    char label[ADAG_MAX_NAME + 96];
    if (ai < 0) {
        snprintf(label, sizeof(label), "driver (pid %d)", (int)getpid());
    } else {
        adag_actor_h a = dag->run.actors[ai].actor;
        int pid = a->ops->pid ? a->ops->pid(a) : 0;
        char dev[ADAG_DEVICE_NAME_MAX + 16] = "";
        if (a->device_kind >= 0) { /* ", device emu:1" */
            char name[ADAG_DEVICE_NAME_MAX];
            snprintf(dev, sizeof(dev), ", device %s",
                     adag__device_name(ADAG_DEVICE(a->device_kind, a->device_index), name));
        }
        if (a->node[0])
            snprintf(label, sizeof(label), "actor %s (remote, node %s, pid %d%s)", a->name,
                     a->node, pid, dev);
        else if (pid)
            snprintf(label, sizeof(label), "actor %s (process, pid %d%s)", a->name, pid, dev);
        else
            snprintf(label, sizeof(label), "actor %s (thread%s)", a->name, dev);
        if (t->unanswered) /* its track is there, empty, saying so */
            snprintf(label + strlen(label), sizeof(label) - strlen(label), ": no answer");
    }
    adag__out_printf(
        out, ",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":", ai + 2);
    json_str(out, label);
    adag__out_printf(out,
                    "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":"
                    "{\"sort_index\":%d}}",
                    ai + 2, ai + 2);
    adag__out_printf(out,
                    ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":1,\"args\":{"
                    "\"name\":",
                    ai + 2);
    snprintf(label, sizeof(label), "%s of %s (%llu records lost)",
             ai < 0 ? "execute/get" : "loop", dag->run.name, (unsigned long long)t->lost);
    json_str(out, label);
    adag__out_printf(out, "}}");
}

/* Every actor's records, asked at once by ADAG_STATS_TIMEOUT_MS: an actor
 * that did not answer keeps an empty track, why[ai] saying why. */
static adag_status_t ask_actors(adag_dag_h dag, track_t *tracks, char (*why)[ADAG_ERROR_MAX])
{
    adag_answers_t as;
    adag_status_t st =
        adag__actors_ask(&dag->run, ADAG_ASK_TRACE, dag->run.rt->settings.stats_timeout_ms, &as);
    if (st != ADAG_OK) {
        adag__error_prefix("adag_dag_write_trace");
        return st;
    }
    for (unsigned ai = 0; ai < as.n; ai++) {
        track_t *t = &tracks[1 + ai];
        if (as.st[ai] == ADAG_OK) {
            t->recs = as.ans[ai].recs; /* taken */
            t->nrecs = as.ans[ai].nrecs;
            t->lost = as.ans[ai].lost;
            t->offset_ns = as.ans[ai].offset_ns;
            as.ans[ai].recs = NULL;
            continue;
        }
        snprintf(why[ai], ADAG_ERROR_MAX, "%s", as.why[ai]);
        t->unanswered = why[ai];
        ADAG_LOG_DEBUG("DAG %s: no trace of actor %s: %s", dag->run.name,
                       dag->run.actors[ai].actor->name, why[ai]);
    }
    adag__answers_free(&as);
    return ADAG_OK;
}

/* otherData's "unanswered": each actor whose records are not in, and why. */
static void write_unanswered(adag_out_t *out, adag_dag_h dag, const track_t *tracks)
{
    int first = 1;
    for (unsigned ai = 0; ai < dag->run.nactors; ai++) {
        if (!tracks[1 + ai].unanswered)
            continue;
        adag__out_printf(out, "%s", first ? ",\"unanswered\":{" : ",");
        json_str(out, dag->run.actors[ai].actor->name);
        adag__out_putc(out, ':');
        json_str(out, tracks[1 + ai].unanswered);
        first = 0;
    }
    if (!first)
        adag__out_putc(out, '}');
}

static adag_status_t write_trace(adag_dag_h dag, adag_out_t *out, track_t *tracks,
                                 char (*why)[ADAG_ERROR_MAX])
{
    /* tracks[0]: the driver; tracks[1 + ai]: actor ai */
    adag_status_t st = ADAG_OK;
    adag_trace_ring_t *r = dag->trace;
    if (!(tracks[0].recs = malloc((r->mask + 1) * sizeof(adag_trace_rec_t))))
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_dag_write_trace: out of memory");
    tracks[0].nrecs = adag__trace_ring_copy(r, tracks[0].recs, NULL);
    adag__trace_to_ns(tracks[0].recs, tracks[0].nrecs);
    /* the driver's ring is indexed by ref: what it lost is what it wrote
     * (an execute per ref, a get per ref got) less what is left */
    pthread_mutex_lock(&dag->lock);
    uint64_t wrote = dag->stats.executed + dag->stats.completed + dag->stats.failed;
    pthread_mutex_unlock(&dag->lock);
    tracks[0].lost = wrote > tracks[0].nrecs ? wrote - tracks[0].nrecs : 0;
    if ((st = ask_actors(dag, tracks, why)) != ADAG_OK)
        return st;
    for (unsigned k = 0; k <= dag->run.nactors; k++) {
        track_t *t = &tracks[k];
        if (!(t->spans = malloc((t->nrecs * ADAG_TRACE_SPANS_PER_REC + 1) * sizeof(*t->spans))))
            return adag__error(ADAG_ERR_NO_MEMORY, "adag_dag_write_trace: out of memory");
        t->n = adag__trace_expand(t->recs, t->nrecs, t->spans);
    }
    uint64_t base = UINT64_MAX;
    for (unsigned k = 0; k <= dag->run.nactors; k++)
        for (uint64_t i = 0; i < tracks[k].n; i++) {
            int64_t t = (int64_t)tracks[k].spans[i].start_ns + tracks[k].offset_ns;
            if (t >= 0 && (uint64_t)t < base)
                base = (uint64_t)t;
        }
    if (base == UINT64_MAX)
        base = 0;
    adag__out_printf(out, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"dag\":");
    json_str(out, dag->run.name);
    adag__out_printf(out, ",\"clock\":\"the driver's CLOCK_MONOTONIC in us from %llu ns\"",
                    (unsigned long long)base);
    write_unanswered(out, dag, tracks);
    adag__out_printf(out, "},\n\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"trace\",\"pid\":0,"
                         "\"args\":{}}");
    for (unsigned k = 0; k <= dag->run.nactors; k++) {
        int ai = (int)k - 1;
        write_track_names(out, dag, ai, &tracks[k]);
        for (uint64_t i = 0; i < tracks[k].n; i++)
            write_span(out, dag, ai, &tracks[k].spans[i], tracks[k].offset_ns, base);
    }
    adag__out_printf(out, "\n]}\n");
    return adag__out_end(out, "adag_dag_write_trace", NULL);
}

adag_status_t adag_dag_write_trace(adag_dag_h dag, adag_writer_t out)
{
    static const char *fn = "adag_dag_write_trace";
    if (!dag || !out.fn)
        return adag__error(ADAG_ERR_INVALID, "%s: dag and out.fn must not be NULL", fn);
    if (!dag->trace)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: DAG %s was compiled without tracing (ADAG_COMPILE_PARAM_TRACE "
                          "or ADAG_TRACE_SPANS)",
                          fn, dag->run.name);
    adag_status_t st = adag__dag_api_enter(dag, fn);
    if (st != ADAG_OK)
        return st;
    track_t *tracks = calloc(dag->run.nactors + 1, sizeof(*tracks));
    char (*why)[ADAG_ERROR_MAX] = calloc(dag->run.nactors + 1, sizeof(*why));
    adag_out_t o;
    adag__out_writer(&o, out);
    st = tracks && why ? write_trace(dag, &o, tracks, why)
                       : adag__error(ADAG_ERR_NO_MEMORY, "%s: out of memory", fn);
    for (unsigned k = 0; tracks && k <= dag->run.nactors; k++) {
        free(tracks[k].recs);
        free(tracks[k].spans);
    }
    free(tracks);
    free(why);
    adag__dag_api_leave(dag);
    return st;
}
