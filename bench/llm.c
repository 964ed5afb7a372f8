/*
 * The llm rows: steady decode of the sharded transformer of examples/llm
 * (serve_graph.h) over process actors, TP-1xPP-1, TP-2xPP-1, TP-1xPP-2 and
 * TP-2xPP-2, at several bucket sizes (rows per step), split into what the
 * actors compute, what the collectives cost and what is left: adag's
 * orchestration per step.
 *
 * Setup. One runtime, traced (ADAG_TRACE_SPANS in its config, so the
 * loops time every op, include/adag/stats.h), holds the actors of every
 * configuration (tp x pp "llm_shard" actors of
 * build/examples/llm/libllm_shard.so each, named llm<tp><pp>_s<S>r<R>);
 * per configuration and bucket, one step DAG of exactly `bucket` rows
 * (llm_serve_compile, max_inflight pp). A second, untraced runtime holds a
 * twin of TP-2xPP-2 (full runs only): its steps against the traced ones
 * give what tracing costs. The model is small_config's (below) unless
 * --llm-model default (llm_config_default, about 4x the compute).
 *
 * Decode. Every row is a request of its own with its own blocks (4 blocks
 * of 16 positions each); a step's token is the request's last greedy pick
 * and its position the next one (from 0, wrapping at 64: the cache before a
 * position is always written). A variant is (configuration, bucket,
 * in flight): in flight pp (its pp micro-batches of `bucket` requests
 * each in flight: stage s works on one while stage s+1 works on the
 * other; a micro-batch's next step starts when its last one is back) and,
 * with pp > 1, in flight 1 (the step's latency). Requests of one variant
 * use blocks 0.., shared with the other variants of the configuration:
 * what matters is that the reference below does the same.
 *
 * A round runs, per bucket: the allreduce of that bucket's size called
 * directly (below); then per configuration and variant, a segment of
 * steps on the actors, then the same steps single-process (llm_ref_step,
 * the same tp, a KV cache per configuration with the same block ids,
 * every variant replayed in the same order), whose tokens must equal the
 * actors' (bit-identical for tp <= 2, examples/llm/README.md): every
 * result is checked. Round 0 (4 steps a variant) warms up and is not
 * counted; then LLM_ROUNDS rounds (--quick: 2, buckets 1 and 8).
 *
 * Per variant and round:
 *   step:     (last completion - first completion) / (steps - 1), wall;
 *   compute:  the actors' method times (traced op stats, the difference
 *             of snapshots taken before and after the segment: per op
 *             compute / count). Per stage, each rank's methods summed,
 *             the slowest rank; the path of one step: the stages summed
 *             (in flight 1), the bottleneck stage (in flight pp);
 *   collective: 2 allreduces per layer on that path (tp 2) times the
 *             host communicator's allreduce of f32 [bucket, d_model]
 *             called directly by 2 forked processes on emu:0 and emu:1
 *             (run_allreduce, bench/collective.c), measured in this
 *             round: the median call, the slowest rank's time;
 *   single:   the reference's time per step.
 *   overhead: step - compute - collective of the round.
 * Reported: the median of the rounds of each figure (the overhead's: of
 * the rounds' own differences, so that a round the machine slowed is
 * compared with itself; it may differ from the difference of the medians
 * by the rounds' spread), and how many CPUs other processes of the
 * machine took while the segments ran (its busy ticks, /proc/stat, less
 * this process's and the actors', /proc/<pid>/stat, over the wall time):
 * where they leave fewer CPUs than actors and driver, the overhead is
 * mostly waiting for a CPU, not adag. Also reported: the allreduce ops'
 * own time inside the DAG on the same path as collective (their op time:
 * the agreement, the wait for the peer and the call). Each variant's
 * rounds go to stderr, and the load average before and after.
 */
#include "bench.h"

#include "examples/llm/model.h"
#include "examples/llm/serve_graph.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LLM_SEED 0x11a5eedull
#define LLM_BPR 4                       /* blocks per request */
#define LLM_PMAX (LLM_BPR * LLM_KV_BLOCK) /* positions wrap here */
#define LLM_ROUNDS 7
#define LLM_QUICK_ROUNDS 2
#define LLM_MAX_ROUNDS 8 /* the warm-up round and the counted ones */
_Static_assert(LLM_ROUNDS + 1 <= LLM_MAX_ROUNDS && LLM_QUICK_ROUNDS <= LLM_ROUNDS,
               "LLM_MAX_ROUNDS holds the warm-up and every counted round");
#define LLM_WARM_STEPS 4
#define LLM_NBUCKETS 4
#define LLM_NCFG 5      /* 4 traced configurations and the untraced twin */
#define LLM_MAX_OPS 256 /* ops of one DAG */
#define LLM_TRACE_SPANS "4096"
#define LLM_STEP_MS 60000

static const int bucket_sizes[LLM_NBUCKETS] = {1, 8, 32, 64};
static const struct {
    int tp, pp, traced;
} shapes[LLM_NCFG] = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {2, 2, 1}, {2, 2, 0}};
#define TWIN 4       /* shapes[TWIN]: the untraced twin of ... */
#define TWIN_OF 3    /* ... shapes[TWIN_OF] */

/* The model of the rows: llm_config_default at half the width (d_model
 * 128, 8 heads of 16, d_ff 344, 4 layers), a quarter of its compute per
 * token, so that the steps are short enough for orchestration to show. */
static void small_config(llm_config_t *cfg)
{
    llm_config_default(cfg);
    cfg->d_model = 128;
    cfg->head_dim = 16;
    cfg->d_ff = 344;
}

typedef struct {
    int tp, pp, traced;
    char prefix[16];
    llm_serve_t s;
    adag_dag_h dags[LLM_NBUCKETS];
    adag_dag_h wdag; /* work_stats of every actor (work_take) */
    llm_kv_t kvs[2]; /* the reference's caches (traced configurations) */
    int kvs_made;
} cfg_t;

typedef struct var {
    cfg_t *c;
    int bi, bucket, inflight, nreq;
    llm_shard_row_t *rows; /* nreq: the requests' next rows, tables fixed */
    int *pos, *tok, *next; /* the steps of the last segment: steps x bucket */
    int cap;               /* steps they hold */
    struct var *twin_of;   /* the twin's: the traced variant it repeats */
    double step[LLM_MAX_ROUNDS], compute[LLM_MAX_ROUNDS], coll[LLM_MAX_ROUNDS];
    double coll_dag[LLM_MAX_ROUNDS], single[LLM_MAX_ROUNDS], over[LLM_MAX_ROUNDS];
    double others[LLM_MAX_ROUNDS]; /* CPUs other processes took meanwhile */
} var_t;

/* One DAG's op figures at one time. */
typedef struct {
    unsigned n;
    struct {
        char actor[ADAG_MAX_NAME];
        unsigned index;
        int stage, rank, coll;
        uint64_t count, compute_ns;
    } op[LLM_MAX_OPS];
} snap_t;

typedef struct {
    const bench_opts_t *o;
    const char *device; /* "emu" or "host" */
    llm_config_t cfg;
    llm_model_t model;
    int model_made, nbuckets, rounds;
    adag_runtime_h rt[2]; /* traced, untraced */
    cfg_t cfgs[LLM_NCFG];
    unsigned ncfg;
    var_t vars[LLM_NCFG * LLM_NBUCKETS * 2];
    unsigned nvars;
    double ar[LLM_MAX_ROUNDS][LLM_NBUCKETS]; /* the allreduce called directly, us */
    snap_t before, after;
    uint64_t work0[LLM_SHARD_MAX_STAGES * LLM_SHARD_MAX_TP]; /* work_take before a segment */
} llm_t;

static int steps_of(const llm_t *L, int bucket)
{
    int lo = L->o->quick ? 4 : 8, hi = L->o->quick ? 16 : 128;
    int n = hi / bucket;
    n = n < lo ? lo : n > hi ? hi : n;
    return (n + 1) / 2 * 2; /* a multiple of every pp (1, 2) */
}

/* A failure of configuration c (bucket 0: not of one bucket), printed. */
static int lfail(const char *what, const cfg_t *c, int bucket)
{
    char b[32] = "";
    if (bucket > 0)
        snprintf(b, sizeof b, ", bucket %d", bucket);
    fprintf(stderr, "adag-bench: llm tp %d pp %d%s%s: %s\n", c->tp, c->pp,
            c->traced ? "" : " (untraced)", b, what);
    return -1;
}

static double median_of(const double *x, int n)
{
    double s[LLM_MAX_ROUNDS];
    for (int i = 0; i < n; i++) { /* insertion: sorted */
        int k = i;
        for (; k > 0 && s[k - 1] > x[i]; k--)
            s[k] = s[k - 1];
        s[k] = x[i];
    }
    return n == 0 ? 0 : n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* ---- setup ---- */

static int runtime_make(int traced, adag_runtime_h *rt)
{
    adag_config_h cfg = NULL;
    TRY(adag_config_read(&cfg));
    TRY(adag_config_modify(cfg, "ADAG_TRACE_SPANS", traced ? LLM_TRACE_SPANS : "0"));
    adag_runtime_params_t rp = {.field_mask = ADAG_RUNTIME_PARAM_WORKER_PATH |
                                              ADAG_RUNTIME_PARAM_CONFIG,
                                .worker_path = bench_worker_path(), .config = cfg};
    TRY(adag_runtime_create(&rp, rt));
    adag_config_release(cfg);
    return 0;
fail:
    if (cfg)
        adag_config_release(cfg);
    return -1;
}

static int cfg_make(llm_t *L, cfg_t *c, const char *module)
{
    int max_req = c->pp * bucket_sizes[L->nbuckets - 1], n_blocks = max_req * LLM_BPR;
    snprintf(c->prefix, sizeof c->prefix, "llm%d%d%s", c->tp, c->pp, c->traced ? "" : "u");
    llm_serve_params_t p = {.module = module, .placement = ADAG_PLACEMENT_PROCESS,
                            .cfg = L->cfg, .seed = LLM_SEED, .tp = c->tp, .pp = c->pp,
                            .n_blocks = n_blocks, .name = c->prefix,
                            .device = strcmp(L->device, "emu") ? NULL : "emu"};
    if (llm_serve_create(L->rt[c->traced ? 0 : 1], &p, &c->s))
        return lfail(llm_error(), c, 0);
    /* the actors' own work timers, asked by a DAG of its own */
    adag_graph_h g = NULL;
    adag_node_h out[LLM_SHARD_MAX_STAGES * LLM_SHARD_MAX_TP];
    unsigned na = (unsigned)(c->tp * c->pp);
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT, .max_inflight = 1};
    TRY(adag_graph_create(L->rt[c->traced ? 0 : 1], &g));
    for (unsigned a = 0; a < na; a++)
        TRY(adag_graph_bind(g, c->s.actors[a], "work_stats", NULL, 0, &out[a]));
    TRY(adag_graph_output(g, out, na));
    TRY(adag_graph_compile(g, &cp, &c->wdag));
    adag_graph_destroy(g);
    g = NULL;
    for (int bi = 0; bi < L->nbuckets; bi++) {
        char name[32];
        snprintf(name, sizeof name, "%s_b%d", c->prefix, bucket_sizes[bi]);
        if (llm_serve_compile(&c->s, bucket_sizes[bi], (unsigned)c->pp, name, &c->dags[bi]))
            return lfail(llm_error(), c, bucket_sizes[bi]);
    }
    if (c->traced) {
        if (llm_ref_init_kvs(&L->model, c->tp, n_blocks, c->kvs))
            return lfail(llm_error(), c, 0);
        c->kvs_made = 1;
    }
    return 0;
fail: /* TRY said what failed */
    if (g)
        adag_graph_destroy(g);
    return -1;
}

static int var_make(llm_t *L, cfg_t *c, int bi, int inflight, var_t *twin_of)
{
    var_t *v = &L->vars[L->nvars++];
    memset(v, 0, sizeof *v);
    v->c = c;
    v->bi = bi;
    v->bucket = bucket_sizes[bi];
    v->inflight = inflight;
    v->nreq = inflight * v->bucket;
    v->twin_of = twin_of;
    v->cap = steps_of(L, v->bucket);
    v->cap = v->cap < LLM_WARM_STEPS ? LLM_WARM_STEPS : v->cap;
    size_t cells = (size_t)v->cap * (size_t)v->bucket;
    v->rows = calloc((size_t)v->nreq, sizeof *v->rows);
    v->pos = malloc(cells * sizeof(int));
    v->tok = malloc(cells * sizeof(int));
    v->next = malloc(cells * sizeof(int));
    if (!v->rows || !v->pos || !v->tok || !v->next)
        return lfail("out of memory for the requests", c, v->bucket);
    for (int q = 0; q < v->nreq; q++) {
        llm_shard_row_t *r = &v->rows[q];
        r->pos = 0;
        r->token = 'a' + q % 26;
        r->n_table = LLM_BPR;
        for (int b = 0; b < LLM_BPR; b++)
            r->table[b] = q * LLM_BPR + b;
    }
    return 0;
}

static void var_free(var_t *v)
{
    free(v->rows);
    free(v->pos);
    free(v->tok);
    free(v->next);
}

/* ---- a segment on the actors ---- */

/* nsteps steps of v, v->inflight in flight (step i is micro-batch
 * i % inflight, requests [j*bucket, (j+1)*bucket)); each step's rows and
 * tokens recorded; *step_us: (last completion - first) / (nsteps - 1). */
static int run_steps(var_t *v, int nsteps, double *step_us)
{
    adag_dag_h dag = v->c->dags[v->bi];
    adag_ref_t refs[LLM_SHARD_MAX_STAGES];
    int b = v->bucket, k = v->inflight, issued = 0;
    int next[LLM_SHARD_MAX_ROWS];
    double t_first = 0, t_last = 0;
    for (; issued < k && issued < nsteps; issued++) {
        for (int x = 0; x < b; x++) {
            v->pos[issued * b + x] = v->rows[issued * b + x].pos;
            v->tok[issued * b + x] = v->rows[issued * b + x].token;
        }
        if (llm_serve_start(dag, &v->rows[issued * b], b, &refs[issued]))
            return lfail(llm_error(), v->c, b);
    }
    for (int done = 0; done < nsteps; done++) {
        int j = done % k;
        if (llm_serve_finish(dag, refs[j], b, next, LLM_STEP_MS))
            return lfail(llm_error(), v->c, b);
        t_last = bench_now_us();
        if (done == 0)
            t_first = t_last;
        for (int x = 0; x < b; x++) {
            llm_shard_row_t *r = &v->rows[j * b + x];
            v->next[done * b + x] = next[x];
            r->token = next[x];
            r->pos = (r->pos + 1) % LLM_PMAX;
        }
        if (issued < nsteps) {
            for (int x = 0; x < b; x++) {
                v->pos[issued * b + x] = v->rows[j * b + x].pos;
                v->tok[issued * b + x] = v->rows[j * b + x].token;
            }
            if (llm_serve_start(dag, &v->rows[j * b], b, &refs[j]))
                return lfail(llm_error(), v->c, b);
            issued++;
        }
    }
    *step_us = nsteps > 1 ? (t_last - t_first) / (nsteps - 1) : 0;
    return 0;
}

/* The same nsteps single-process (llm_ref_step, same tp, same block ids):
 * every token must be the actors'; *single_us per step. */
static int replay(llm_t *L, var_t *v, int nsteps, double *single_us)
{
    llm_row_t rows[LLM_SHARD_MAX_ROWS];
    int next[LLM_SHARD_MAX_ROWS], b = v->bucket;
    double t0 = bench_now_us();
    for (int i = 0; i < nsteps; i++) {
        int j = i % v->inflight;
        for (int x = 0; x < b; x++)
            rows[x] = (llm_row_t){.table = v->rows[j * b + x].table, .n_table = LLM_BPR,
                                  .pos = v->pos[i * b + x], .token = v->tok[i * b + x]};
        if (llm_ref_step(&L->model, v->c->tp, v->c->kvs, rows, b, NULL, next))
            return lfail(llm_error(), v->c, b);
        for (int x = 0; x < b; x++) {
            if (next[x] != v->next[i * b + x]) {
                char what[160];
                snprintf(what, sizeof what, "step %d, row %d (position %d): the actors picked "
                         "token %d, the reference %d", i, x, rows[x].pos, v->next[i * b + x],
                         next[x]);
                return lfail(what, v->c, b);
            }
        }
    }
    *single_us = (bench_now_us() - t0) / nsteps;
    return 0;
}

/* The twin's segment must be its traced original's, step for step. */
static int same_as_original(const var_t *t, int nsteps)
{
    const var_t *v = t->twin_of;
    for (int i = 0; i < nsteps * t->bucket; i++) {
        if (t->pos[i] != v->pos[i] || t->tok[i] != v->tok[i] || t->next[i] != v->next[i]) {
            char what[160];
            snprintf(what, sizeof what, "step %d, row %d: untraced (position %d, token %d -> "
                     "%d), traced (%d, %d -> %d)", i / t->bucket, i % t->bucket, t->pos[i],
                     t->tok[i], t->next[i], v->pos[i], v->tok[i], v->next[i]);
            return lfail(what, t->c, t->bucket);
        }
    }
    return 0;
}

/* ---- the machine's other work ---- */

/* CPU ticks the machine spent busy (/proc/stat's "cpu" line: all but
 * idle and iowait; steal counts, as the hypervisor gave the CPU to
 * others); -1 unknown. */
static int64_t machine_busy_ticks(void)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                       &v[3], &v[4], &v[5], &v[6], &v[7])
              : 0;
    if (f)
        fclose(f);
    return n == 8 ? (int64_t)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) : -1;
}

/* utime + stime of process pid, ticks (/proc/<pid>/stat fields 14, 15);
 * -1 unknown. */
static int64_t proc_ticks(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[len] = '\0';
    char *p = strrchr(buf, ')'); /* the name before it may hold anything */
    unsigned long long ut, st;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                     &st) != 2)
        return -1;
    return (int64_t)(ut + st);
}

/* The machine's busy ticks less this run's (this process, every actor). */
static int64_t others_ticks(const llm_t *L)
{
    int64_t busy = machine_busy_ticks(), ours = proc_ticks(getpid());
    for (unsigned i = 0; i < L->ncfg && busy >= 0 && ours >= 0; i++)
        for (int a = 0; a < L->cfgs[i].tp * L->cfgs[i].pp && ours >= 0; a++) {
            int64_t t = proc_ticks(adag_actor_pid(L->cfgs[i].s.actors[a]));
            ours = t < 0 ? -1 : ours + t;
        }
    return busy < 0 || ours < 0 ? -1 : busy - ours;
}

/* ---- the actors' own times ---- */

/* ns[a]: the time actor a's work took so far (its work_stats: measured
 * inside the actor, in the method on a host actor, on its stream on an
 * emulated device). */
static int work_take(const cfg_t *c, uint64_t *ns)
{
    adag_ref_t ref;
    adag_value_t v[LLM_SHARD_MAX_STAGES * LLM_SHARD_MAX_TP];
    unsigned na = (unsigned)(c->tp * c->pp);
    int rc = -1;
    TRY(adag_dag_execute(c->wdag, NULL, 0, 0, &ref));
    if (adag_dag_get(c->wdag, ref, v, na, LLM_STEP_MS) != ADAG_OK) {
        fprintf(stderr, "adag-bench: llm: work_stats: %s\n", adag_last_error());
    } else {
        rc = 0;
        for (unsigned a = 0; a < na && rc == 0; a++) {
            llm_shard_work_stats_t ws;
            if (v[a].size != sizeof ws) {
                fprintf(stderr, "adag-bench: llm: work_stats of %s: %zu bytes\n",
                        adag_actor_name(c->s.actors[a]), v[a].size);
                rc = -1;
                break;
            }
            memcpy(&ws, v[a].data, sizeof ws);
            ns[a] = ws.ns;
        }
    }
    adag_dag_release(c->wdag, ref);
    return rc;
fail:
    return -1;
}

/* The op figures of dag, whose actors are c's, now. */
static int snap_take(const cfg_t *c, adag_dag_h dag, snap_t *s)
{
    adag_stats_h h = NULL;
    size_t plen = strlen(c->prefix);
    s->n = 0;
    TRY(adag_dag_stats_take(dag, &h));
    if (!adag_stats_timed(h)) {
        fprintf(stderr, "adag-bench: llm: DAG %s's statistics are not timed\n",
                adag_dag_name(dag));
        goto fail;
    }
    for (unsigned i = 0; i < adag_stats_nactors(h); i++) {
        adag_actor_stats_t a = ADAG_ACTOR_STATS_INIT;
        TRY(adag_stats_actor(h, i, &a));
        if (a.unanswered) {
            fprintf(stderr, "adag-bench: llm: DAG %s: %s\n", adag_dag_name(dag), a.unanswered);
            goto fail;
        }
    }
    for (unsigned i = 0; i < adag_stats_nops(h); i++) {
        adag_op_stats_t op = ADAG_OP_STATS_INIT;
        TRY(adag_stats_op(h, i, &op));
        if (s->n == LLM_MAX_OPS || strncmp(op.actor, c->prefix, plen) ||
            sscanf(op.actor + plen, "_s%dr%d", &s->op[s->n].stage, &s->op[s->n].rank) != 2 ||
            s->op[s->n].stage >= c->pp || s->op[s->n].rank >= c->tp) {
            fprintf(stderr, "adag-bench: llm: DAG %s: op %u of actor %s: not one of its %d x %d "
                    "actors, or more than %d ops\n", adag_dag_name(dag), i, op.actor, c->pp,
                    c->tp, LLM_MAX_OPS);
            goto fail;
        }
        snprintf(s->op[s->n].actor, sizeof s->op[s->n].actor, "%s", op.actor);
        s->op[s->n].index = op.index;
        s->op[s->n].coll = strncmp(op.name, "allreduce", 9) == 0;
        s->op[s->n].count = op.count;
        s->op[s->n].compute_ns = op.compute_ns;
        s->n++;
    }
    adag_stats_free(h);
    return 0;
fail:
    if (h)
        adag_stats_free(h);
    return -1;
}

/* From the snapshots around a segment of nsteps: per stage the slowest
 * rank's methods (comp) and allreduce ops (coll), us per step. */
static int stage_times(const var_t *v, const snap_t *a, const snap_t *z, int nsteps,
                       double comp[LLM_SHARD_MAX_STAGES], double coll[LLM_SHARD_MAX_STAGES])
{
    double per[LLM_SHARD_MAX_STAGES][LLM_SHARD_MAX_TP][2];
    memset(per, 0, sizeof per);
    if (a->n != z->n)
        return lfail("the DAG's op list changed during a segment", v->c, v->bucket);
    for (unsigned i = 0; i < z->n; i++) {
        uint64_t dn = z->op[i].count - a->op[i].count;
        if (strcmp(a->op[i].actor, z->op[i].actor) || a->op[i].index != z->op[i].index ||
            dn != (uint64_t)nsteps) {
            char what[160];
            snprintf(what, sizeof what, "op %u of %s ran %llu times in a segment of %d steps",
                     z->op[i].index, z->op[i].actor, (unsigned long long)dn, nsteps);
            return lfail(what, v->c, v->bucket);
        }
        per[z->op[i].stage][z->op[i].rank][z->op[i].coll] +=
            (double)(z->op[i].compute_ns - a->op[i].compute_ns) / (double)dn * 1e-3;
    }
    for (int s = 0; s < v->c->pp; s++) {
        comp[s] = coll[s] = 0;
        for (int r = 0; r < v->c->tp; r++) {
            comp[s] = per[s][r][0] > comp[s] ? per[s][r][0] : comp[s];
            coll[s] = per[s][r][1] > coll[s] ? per[s][r][1] : coll[s];
        }
    }
    return 0;
}

/* One segment of v in round r (0: the warm-up, not counted). */
static int segment(llm_t *L, var_t *v, int r)
{
    cfg_t *c = v->c;
    int nsteps = r == 0 ? LLM_WARM_STEPS : steps_of(L, v->bucket);
    double step_us = 0, single_us = 0;
    if (c->traced && (snap_take(c, c->dags[v->bi], &L->before) || work_take(c, L->work0)))
        return -1;
    int64_t others0 = others_ticks(L);
    double t0 = bench_now_us();
    if (run_steps(v, nsteps, &step_us))
        return -1;
    int64_t others1 = others_ticks(L);
    double secs = (bench_now_us() - t0) * 1e-6;
    v->others[r] = others0 < 0 || others1 < 0 || secs <= 0 ? -1
                   : others1 < others0 ? 0 /* the ticks of processes that ended */
                   : (double)(others1 - others0) / (double)sysconf(_SC_CLK_TCK) / secs;
    if (v->twin_of) {
        v->step[r] = step_us;
        return same_as_original(v, nsteps);
    }
    usleep(2000); /* the last op's times are added just after it publishes */
    double comp[LLM_SHARD_MAX_STAGES], coll_dag[LLM_SHARD_MAX_STAGES], op_comp[LLM_SHARD_MAX_STAGES];
    uint64_t work1[LLM_SHARD_MAX_STAGES * LLM_SHARD_MAX_TP];
    if (snap_take(c, c->dags[v->bi], &L->after) ||
        stage_times(v, &L->before, &L->after, nsteps, op_comp, coll_dag) || work_take(c, work1))
        return -1;
    /* compute: per stage, the slowest rank's work per step, as the actors
     * timed it (on an emulated device the methods only enqueue: their op
     * times are not the compute) */
    for (int s = 0; s < c->pp; s++) {
        comp[s] = 0;
        for (int k = 0; k < c->tp; k++) {
            int a = s * c->tp + k;
            double us = (double)(work1[a] - L->work0[a]) / (double)nsteps * 1e-3;
            comp[s] = us > comp[s] ? us : comp[s];
        }
    }
    if (replay(L, v, nsteps, &single_us))
        return -1;
    /* the path of one step: every stage (1 in flight), the bottleneck (pp) */
    int layers = L->cfg.n_layers / c->pp; /* per stage (pp divides them here) */
    double ar = c->tp > 1 ? 2.0 * layers * L->ar[r][v->bi] : 0;
    double sum_c = 0, sum_cd = 0, best = -1;
    for (int s = 0; s < c->pp; s++) {
        sum_c += comp[s];
        sum_cd += coll_dag[s];
        if (comp[s] + ar > best) {
            best = comp[s] + ar;
            v->compute[r] = comp[s];
            v->coll_dag[r] = coll_dag[s];
        }
    }
    if (v->inflight == 1) {
        v->compute[r] = sum_c;
        v->coll_dag[r] = sum_cd;
    }
    v->coll[r] = v->inflight == 1 ? ar * c->pp : ar;
    v->step[r] = step_us;
    v->single[r] = single_us;
    v->over[r] = step_us - v->compute[r] - v->coll[r];
    return 0;
}

/* ---- the run ---- */

static void llm_free(llm_t *L)
{
    for (unsigned i = 0; i < 2; i++)
        if (L->rt[i])
            adag_runtime_destroy(L->rt[i]); /* the actors and DAGs with it */
    for (unsigned i = 0; i < L->ncfg; i++)
        if (L->cfgs[i].kvs_made)
            llm_ref_free_kvs(L->cfgs[i].kvs, L->cfgs[i].tp);
    for (unsigned i = 0; i < L->nvars; i++)
        var_free(&L->vars[i]);
    if (L->model_made)
        llm_model_free(&L->model);
}

static int llm_setup(llm_t *L, const char *module)
{
    if (llm_model_init(&L->model, &L->cfg, LLM_SEED)) {
        fprintf(stderr, "adag-bench: llm: %s\n", llm_error());
        return -1;
    }
    L->model_made = 1;
    if (runtime_make(1, &L->rt[0]) || (!L->o->quick && runtime_make(0, &L->rt[1])))
        return -1;
    L->ncfg = L->o->quick ? TWIN : LLM_NCFG; /* --quick: no twin */
    for (unsigned i = 0; i < L->ncfg; i++) {
        cfg_t *c = &L->cfgs[i];
        c->tp = shapes[i].tp;
        c->pp = shapes[i].pp;
        c->traced = shapes[i].traced;
        if (cfg_make(L, c, module))
            return -1;
    }
    /* variants in the order they run in a round: bucket, configuration,
     * in flight pp then 1; the twin's right after its original */
    for (int bi = 0; bi < L->nbuckets; bi++)
        for (unsigned i = 0; i < L->ncfg; i++) {
            if (i == TWIN)
                continue;
            for (int k = L->cfgs[i].pp; k >= 1; k = k > 1 ? 1 : 0) {
                if (var_make(L, &L->cfgs[i], bi, k, NULL))
                    return -1;
                if (i == TWIN_OF && L->ncfg > TWIN &&
                    var_make(L, &L->cfgs[TWIN], bi, k, &L->vars[L->nvars - 1]))
                    return -1;
            }
        }
    return 0;
}

static int llm_round(llm_t *L, int r)
{
    for (int bi = 0; bi < L->nbuckets; bi++) {
        measure_t m;
        if (r > 0 && run_allreduce(L->o, 2, (size_t)bucket_sizes[bi] * L->cfg.d_model *
                                                sizeof(float), &m)) {
            fprintf(stderr, "adag-bench: llm: the allreduce of f32 [%d, %d] called directly "
                    "failed\n", bucket_sizes[bi], L->cfg.d_model);
            return -1;
        }
        L->ar[r][bi] = r > 0 ? m.median_us : 0;
        for (unsigned i = 0; i < L->nvars; i++)
            if (L->vars[i].bi == bi && segment(L, &L->vars[i], r))
                return -1;
    }
    return 0;
}

static void print_rounds(const char *what, const double *x, int n)
{
    fprintf(stderr, "%s", what);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %.1f", x[i]);
}

int run_llm(const bench_opts_t *o, bench_llm_row_t *rows, unsigned *nrows, char *why,
            size_t why_len)
{
    static llm_t L; /* large (its snapshots): not on the stack */
    char dir[PATH_MAX], module[PATH_MAX + 64];
    int rc = -1;
    *nrows = 0;
    memset(&L, 0, sizeof L);
    L.o = o;
    L.device = o->llm_device ? o->llm_device : "emu";
    L.nbuckets = o->quick ? 2 : LLM_NBUCKETS;
    L.rounds = o->quick ? LLM_QUICK_ROUNDS : LLM_ROUNDS;
    if (o->llm_default_model)
        llm_config_default(&L.cfg);
    else
        small_config(&L.cfg);
    bench_exe_dir(dir, sizeof dir);
    snprintf(module, sizeof module, "%s/examples/llm/libllm_shard.so", dir);
    if (access(module, R_OK) != 0) {
        snprintf(why, why_len, "%s is not built (make)", module);
        return 1;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double load[2][1] = {{-1}, {-1}};
    getloadavg(load[0], 1);
    fprintf(stderr, "adag-bench: llm: %s actors; d_model %d, %d layers, %d heads of %d, d_ff %d; "
            "%ld CPUs for tp x pp actors and the driver (load average %.2f); %d rounds after a "
            "warm-up\n", L.device, L.cfg.d_model, L.cfg.n_layers, L.cfg.n_heads, L.cfg.head_dim,
            L.cfg.d_ff, cpus, load[0][0], L.rounds);
    if (llm_setup(&L, module))
        goto out;
    for (int r = 0; r <= L.rounds; r++)
        if (llm_round(&L, r))
            goto out;
    for (unsigned i = 0; i < L.nvars; i++) {
        var_t *v = &L.vars[i];
        if (v->twin_of)
            continue;
        bench_llm_row_t *row = &rows[(*nrows)++];
        const double *x1 = v->step + 1;
        int n = L.rounds;
        memset(row, 0, sizeof *row);
        row->tp = v->c->tp;
        row->pp = v->c->pp;
        row->bucket = v->bucket;
        row->inflight = v->inflight;
        row->d_model = L.cfg.d_model;
        row->step_us = median_of(x1, n);
        row->compute_us = median_of(v->compute + 1, n);
        row->collective_us = median_of(v->coll + 1, n);
        row->single_us = median_of(v->single + 1, n);
        row->overhead_us = median_of(v->over + 1, n);
        row->other_cpus = median_of(v->others + 1, n);
        row->collective_dag_us = median_of(v->coll_dag + 1, n);
        row->cpus = (int)cpus;
        row->steps = (long)n * steps_of(&L, v->bucket);
        snprintf(row->device, sizeof row->device, "%s", L.device);
        for (unsigned t = 0; t < L.nvars; t++)
            if (L.vars[t].twin_of == v)
                row->untraced_step_us = median_of(L.vars[t].step + 1, n);
        char head[96];
        snprintf(head, sizeof head, "adag-bench: llm tp %d pp %d bucket %d in flight %d, rounds "
                 "(us):", row->tp, row->pp, row->bucket, row->inflight);
        fprintf(stderr, "%s\n", head);
        print_rounds("    step", x1, n);
        print_rounds("; compute", v->compute + 1, n);
        print_rounds("; collective", v->coll + 1, n);
        print_rounds("; overhead", v->over + 1, n);
        fprintf(stderr, ";\n   ");
        print_rounds(" CPUs other work took", v->others + 1, n);
        print_rounds("; in-DAG allreduce ops", v->coll_dag + 1, n);
        print_rounds("; single", v->single + 1, n);
        fprintf(stderr, "\n");
    }
    getloadavg(load[1], 1);
    fprintf(stderr, "adag-bench: llm: load average %.2f before, %.2f after (other work on "
            "the machine takes CPUs from the actors)\n", load[0][0], load[1][0]);
    rc = 0;
out:
    llm_free(&L);
    return rc;
}
