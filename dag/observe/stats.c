/*
 * adag_dag_stats_take (include/adag/stats.h): every actor loop's figures
 * (dag/exec/loop_stats.h) gathered into a snapshot, the channels' from their
 * writers (the driver's inputs from its own counts), the busiest actor
 * named; adag_stats_print's tables.
 */
#include "common/log.h"
#include "common/settings.h"
#include "dag/driver/dag.h"
#include "dag/observe/observe.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct adag_stats {
    char dag_name[64];
    adag_dag_stats_t counts;
    int timed;
    unsigned nactors, nops, nchans;
    adag_actor_stats_t *actors;
    adag_op_stats_t *ops;
    adag_channel_stats_t *chans;
    /* what the strings point into */
    char (*actor_names)[ADAG_MAX_NAME];
    char (*placements)[ADAG_HOSTPORT_MAX + 16];
    char (*doings)[ADAG_MAX_NAME + 32];
    char (*op_names)[ADAG_MAX_NAME];
    char (*chan_names)[96];
    char (*unanswered)[ADAG_ERROR_MAX];
    int bottleneck; /* actor index; -1: none */
};

void adag_stats_free(adag_stats_h s)
{
    if (!s)
        return;
    free(s->actors);
    free(s->ops);
    free(s->chans);
    free(s->actor_names);
    free(s->placements);
    free(s->doings);
    free(s->op_names);
    free(s->chan_names);
    free(s->unanswered);
    free(s);
}

/* What a loop does now, in words ("computing forward"). */
static void doing_text(uint32_t doing, const adag_program_t *p, char (*op_names)[ADAG_MAX_NAME],
                       char *out, size_t len)
{
    static const char *const what[] = {"", "waiting for input", "waiting for room", "computing",
                                       "publishing"};
    unsigned part = doing & 0xff, op = doing >> 8;
    if (part == ADAG_DOING_UNKNOWN || part > ADAG_DOING_PUBLISH || op >= p->nops) {
        out[0] = '\0';
        return;
    }
    snprintf(out, len, "%s %s", what[part], op_names[op]);
}

/* Actor ai's entry: who it is, no figures yet. */
static adag_actor_stats_t *actor_entry(adag_stats_h s, adag_dag_h dag, unsigned ai)
{
    adag_actor_h a = dag->run.actors[ai].actor;
    adag_actor_stats_t *as = &s->actors[ai];
    snprintf(s->actor_names[ai], sizeof(s->actor_names[ai]), "%s", a->name);
    if (a->node[0])
        snprintf(s->placements[ai], sizeof(s->placements[ai]), "remote node %s", a->node);
    else
        snprintf(s->placements[ai], sizeof(s->placements[ai]), "%s", a->ops->name);
    as->struct_size = sizeof(*as);
    as->name = s->actor_names[ai];
    as->placement = s->placements[ai];
    as->nops = dag->run.actors[ai].prog.nops;
    as->doing = s->doings[ai];
    as->device = a->device_kind >= 0 ? ADAG_DEVICE(a->device_kind, a->device_index)
                                     : ADAG_DEVICE_HOST;
    return as;
}

/* Actor ai's figures into the snapshot: its ops from s->nops on. */
static adag_status_t add_actor(adag_stats_h s, adag_dag_h dag, unsigned ai,
                               const adag_loop_figures_t *f)
{
    adag_actor_h a = dag->run.actors[ai].actor;
    const adag_program_t *p = &dag->run.actors[ai].prog;
    if (f->nops != p->nops)
        return adag__error(ADAG_ERR_PROTOCOL, "actor %s: figures of %u ops for a schedule of %u",
                          a->name, f->nops, p->nops);
    adag_actor_stats_t *as = actor_entry(s, dag, ai);
    as->elapsed_ns = f->elapsed_ns;
    as->idle_ns = f->idle_ns;
    for (uint32_t i = 0; i < p->nops; i++) {
        const adag_op_figures_t *o = &f->ops[i];
        const adag_prog_op_t *po = &p->ops[i];
        adag_op_stats_t *os = &s->ops[s->nops];
        if (po->kind == ADAG_OP_CALL && po->method < a->nmethods)
            snprintf(s->op_names[s->nops], ADAG_MAX_NAME, "%s", a->methods[po->method].name);
        else
            snprintf(s->op_names[s->nops], ADAG_MAX_NAME, "%s",
                     adag__coll_kind_name((adag_coll_kind_t)po->coll_kind));
        *os = (adag_op_stats_t){
            .struct_size = sizeof(*os),
            .actor = as->name,
            .name = s->op_names[s->nops],
            .index = i,
            .count = o->count,
            .compute_ns = o->compute_ns,
            .compute_mean_ns = o->count ? o->compute_ns / o->count : 0,
            .compute_p50_ns = o->compute_p50_ns,
            .compute_p99_ns = o->compute_p99_ns,
            .compute_max_ns = o->compute_max_ns,
            .wait_input_ns = o->wait_input_ns,
            .wait_room_ns = o->wait_room_ns,
            .publish_ns = o->publish_ns,
        };
        s->nops++;
        as->busy_ns += o->compute_ns + o->publish_ns;
        as->wait_input_ns += o->wait_input_ns;
        as->wait_room_ns += o->wait_room_ns;
        as->count = o->count;
    }
    as->busy = as->elapsed_ns ? (double)as->busy_ns / (double)as->elapsed_ns : 0;
    doing_text(f->doing, p, s->op_names + (s->nops - p->nops), s->doings[ai],
               sizeof(s->doings[ai]));
    if (as->busy > 1)
        as->busy = 1;
    /* the channels it writes */
    for (uint32_t k = 0; k < f->nchans; k++) {
        const adag_chan_figures_t *cf = &f->chans[k];
        if (cf->chan >= p->nchans || p->chans[cf->chan].id >= dag->plan.nchans)
            return adag__error(ADAG_ERR_PROTOCOL, "actor %s: figures of channel %u of %u",
                              a->name, cf->chan, p->nchans);
        adag_channel_stats_t *cs = &s->chans[p->chans[cf->chan].id];
        cs->values = cf->values;
        cs->bytes = cf->bytes;
        cs->in_use = cf->in_use == UINT32_MAX ? -1 : (int)cf->in_use;
    }
    return ADAG_OK;
}

/* Every actor's figures, asked at once by ADAG_STATS_TIMEOUT_MS; an actor
 * that did not answer (or whose answer does not fit its schedule) is
 * named with why, its figures left out. */
static adag_status_t ask_actors(adag_dag_h dag, adag_stats_h s)
{
    adag_answers_t as;
    adag_status_t st =
        adag__actors_ask(&dag->run, ADAG_ASK_FIGURES, dag->run.rt->settings.stats_timeout_ms, &as);
    if (st != ADAG_OK)
        return st;
    for (unsigned ai = 0; ai < as.n; ai++) {
        if (as.st[ai] == ADAG_OK && add_actor(s, dag, ai, &as.ans[ai].figures) != ADAG_OK) {
            as.st[ai] = ADAG_ERR_PROTOCOL;
            snprintf(as.why[ai], sizeof(as.why[ai]), "%s", adag_last_error());
        }
        if (as.st[ai] == ADAG_OK)
            continue;
        snprintf(s->unanswered[ai], sizeof(s->unanswered[ai]), "%s", as.why[ai]);
        actor_entry(s, dag, ai)->unanswered = s->unanswered[ai];
        ADAG_LOG_DEBUG("DAG %s: no figures of actor %s: %s", dag->run.name,
                       dag->run.actors[ai].actor->name, as.why[ai]);
    }
    adag__answers_free(&as);
    return ADAG_OK;
}

static adag_status_t take(adag_dag_h dag, adag_stats_h s)
{
    unsigned total_ops = 0;
    for (unsigned ai = 0; ai < dag->run.nactors; ai++)
        total_ops += dag->run.actors[ai].prog.nops;
    s->actors = calloc(dag->run.nactors + 1, sizeof(*s->actors));
    s->actor_names = calloc(dag->run.nactors + 1, sizeof(*s->actor_names));
    s->placements = calloc(dag->run.nactors + 1, sizeof(*s->placements));
    s->doings = calloc(dag->run.nactors + 1, sizeof(*s->doings));
    s->ops = calloc(total_ops + 1, sizeof(*s->ops));
    s->op_names = calloc(total_ops + 1, sizeof(*s->op_names));
    s->chans = calloc(dag->plan.nchans + 1, sizeof(*s->chans));
    s->chan_names = calloc(dag->plan.nchans + 1, sizeof(*s->chan_names));
    s->unanswered = calloc(dag->run.nactors + 1, sizeof(*s->unanswered));
    if (!s->actors || !s->actor_names || !s->placements || !s->doings || !s->ops || !s->op_names ||
        !s->chans || !s->chan_names || !s->unanswered)
        return adag__error(ADAG_ERR_NO_MEMORY, "out of memory");
    snprintf(s->dag_name, sizeof(s->dag_name), "%s", dag->run.name);
    s->timed = dag->trace != NULL;
    s->nactors = dag->run.nactors;
    s->nchans = dag->plan.nchans;
    for (unsigned c = 0; c < dag->plan.nchans; c++) {
        const adag_dag_chan_t *dc = &dag->plan.chans[c];
        snprintf(s->chan_names[c], sizeof(s->chan_names[c]), "%s", dc->name);
        s->chans[c] = (adag_channel_stats_t){
            .struct_size = sizeof(s->chans[c]),
            .name = s->chan_names[c],
            .kind = adag__chan_backend_name(dc->backend),
            .writer = "driver",
            .slots = dc->geom.nslots,
            .in_use = -1,
            .slot_bytes = dc->geom.capacity,
            .host_bytes = dc->host_bytes,
            .device_bytes = dc->device_bytes,
        };
    }
    adag_status_t st = ask_actors(dag, s);
    if (st != ADAG_OK)
        return st;
    for (unsigned c = 0; c < dag->plan.nchans; c++)
        if (dag->plan.chans[c].writer >= 0 && (unsigned)dag->plan.chans[c].writer < dag->run.nactors)
            s->chans[c].writer = s->actor_names[dag->plan.chans[c].writer];
    pthread_mutex_lock(&dag->lock);
    s->counts = dag->stats;
    for (unsigned i = 0; i < dag->plan.ninputs; i++) {
        adag_channel_stats_t *cs = &s->chans[dag->ends.input_chan[i]];
        cs->values = dag->ends.input_counts[i][0];
        cs->bytes = dag->ends.input_counts[i][1];
        uint32_t used = adag__chan_in_use(dag->ends.inputs[i]);
        cs->in_use = used == UINT32_MAX ? -1 : (int)used;
    }
    pthread_mutex_unlock(&dag->lock);
    s->counts.struct_size = sizeof(s->counts);
    /* the bottleneck: the actor busy the longest (not known while one did
     * not answer: a stuck one may be it) */
    s->bottleneck = -1;
    for (unsigned ai = 0; ai < s->nactors; ai++)
        if (s->actors[ai].unanswered)
            return ADAG_OK;
    for (unsigned ai = 0; s->timed && ai < s->nactors; ai++)
        if (s->actors[ai].busy_ns > 0 &&
            (s->bottleneck < 0 || s->actors[ai].busy_ns > s->actors[s->bottleneck].busy_ns))
            s->bottleneck = (int)ai;
    return ADAG_OK;
}

adag_status_t adag_dag_stats_take(adag_dag_h dag, adag_stats_h *out)
{
    static const char *fn = "adag_dag_stats_take";
    if (!dag || !out)
        return adag__error(ADAG_ERR_INVALID, "%s: dag and out must not be NULL", fn);
    *out = NULL;
    adag_status_t st = adag__dag_api_enter(dag, fn);
    if (st != ADAG_OK)
        return st;
    adag_stats_h s = calloc(1, sizeof(*s));
    st = s ? take(dag, s) : adag__error(ADAG_ERR_NO_MEMORY, "out of memory");
    adag__dag_api_leave(dag);
    if (st != ADAG_OK) {
        adag__error_prefix("%s: DAG %s", fn, dag->run.name);
        adag_stats_free(s);
        return st;
    }
    *out = s;
    return ADAG_OK;
}

/* adag_dag_stats_t's version-3 fields: the bottleneck of a snapshot. */
static void stats_bottleneck(adag_dag_h dag, adag_dag_stats_t *out)
{
    adag_stats_h s;
    out->timed = dag->trace != NULL;
    out->bottleneck[0] = '\0';
    out->bottleneck_busy = 0;
    if (!out->timed || adag_dag_stats_take(dag, &s) != ADAG_OK)
        return;
    const char *name = adag_stats_bottleneck(s, &out->bottleneck_busy);
    snprintf(out->bottleneck, sizeof(out->bottleneck), "%s", name ? name : "");
    adag_stats_free(s);
}

/* adag_dag_stats_t as first versioned: struct_size up to shm_bytes. */
#define ADAG_DAG_STATS_V1_SIZE (offsetof(adag_dag_stats_t, shm_bytes) + sizeof(size_t))

adag_status_t adag_dag_stats(adag_dag_h dag, adag_dag_stats_t *stats)
{
    if (!dag || !stats)
        return adag__error(ADAG_ERR_INVALID, "adag_dag_stats: dag and stats must not be NULL");
    if (stats->struct_size < ADAG_DAG_STATS_V1_SIZE)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_dag_stats: stats->struct_size is %zu; set it to "
                          "sizeof(adag_dag_stats_t) (at least %zu)",
                          stats->struct_size, (size_t)ADAG_DAG_STATS_V1_SIZE);
    size_t n = stats->struct_size < sizeof(*stats) ? stats->struct_size : sizeof(*stats);
    pthread_mutex_lock(&dag->lock);
    adag_dag_stats_t s = dag->stats;
    pthread_mutex_unlock(&dag->lock);
    s.communicators = dag->plan.ncomm_leases;
    s.shared_communicators = 0;
    for (unsigned i = 0; i < dag->plan.ncomm_leases; i++)
        s.shared_communicators += adag__comm_lease_users(dag->run.rt, dag->plan.comm_leases[i]) > 1;
    if (n >= offsetof(adag_dag_stats_t, timed) + sizeof(s.timed))
        stats_bottleneck(dag, &s);
    s.struct_size = n;
    memcpy(stats, &s, n);
    return ADAG_OK;
}

const adag_dag_stats_t *adag__stats_counts(adag_stats_h s)
{
    return &s->counts;
}

const char *adag__stats_dag_name(adag_stats_h s)
{
    return s->dag_name;
}

int adag_stats_timed(adag_stats_h s)
{
    return s ? s->timed : 0;
}

unsigned adag_stats_nactors(adag_stats_h s)
{
    return s ? s->nactors : 0;
}

unsigned adag_stats_nops(adag_stats_h s)
{
    return s ? s->nops : 0;
}

unsigned adag_stats_nchannels(adag_stats_h s)
{
    return s ? s->nchans : 0;
}

/* Copies min(out's struct_size, size) bytes of element src into out. */
static adag_status_t fill(const char *fn, adag_stats_h s, unsigned i, unsigned n,
                          const void *src, size_t size, size_t first_size, void *out)
{
    size_t *out_size = out;
    if (!s || !out)
        return adag__error(ADAG_ERR_INVALID, "%s: stats and out must not be NULL", fn);
    if (i >= n)
        return adag__error(ADAG_ERR_INVALID, "%s: index %u, the snapshot has %u", fn, i, n);
    if (*out_size < first_size)
        return adag__error(ADAG_ERR_INVALID, "%s: out->struct_size is %zu; set it to the "
                          "struct's sizeof (at least %zu)", fn, *out_size, first_size);
    size_t k = *out_size < size ? *out_size : size;
    memcpy(out, src, k);
    *out_size = k;
    return ADAG_OK;
}

adag_status_t adag_stats_actor(adag_stats_h s, unsigned i, adag_actor_stats_t *out)
{
    unsigned n = s ? s->nactors : 0;
    /* a struct without `unanswered` (the version before it) is filled up to it */
    return fill("adag_stats_actor", s, i, n, i < n ? &s->actors[i] : NULL, sizeof(*out),
                offsetof(adag_actor_stats_t, unanswered), out);
}

adag_status_t adag_stats_op(adag_stats_h s, unsigned i, adag_op_stats_t *out)
{
    unsigned n = s ? s->nops : 0;
    return fill("adag_stats_op", s, i, n, i < n ? &s->ops[i] : NULL, sizeof(*out), sizeof(*out),
                out);
}

adag_status_t adag_stats_channel(adag_stats_h s, unsigned i, adag_channel_stats_t *out)
{
    unsigned n = s ? s->nchans : 0;
    /* a struct without the slot sizes (the version before them) is filled up to them */
    return fill("adag_stats_channel", s, i, n, i < n ? &s->chans[i] : NULL, sizeof(*out),
                offsetof(adag_channel_stats_t, slot_bytes), out);
}

const char *adag_stats_bottleneck(adag_stats_h s, double *busy)
{
    if (busy)
        *busy = 0;
    if (!s || s->bottleneck < 0)
        return NULL;
    if (busy)
        *busy = s->actors[s->bottleneck].busy;
    return s->actors[s->bottleneck].name;
}
