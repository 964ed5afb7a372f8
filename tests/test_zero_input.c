/* Suite "zero_input": DAGs whose methods take no argument, and DAGs that
 * take no input at all (adag_dag_execute(dag, NULL, 0, ...)), through
 * every way of starting an execution: execute, reserve/commit/cancel (a
 * commit on another thread too), several threads at once, the window full of
 * executions in flight; and seeded random graphs that mix methods of 0-3
 * arguments over 1-4 actors, every output checked against a reference. */
#include "helpers.h"
#include "remote_rig.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* input-less: a.tick() -> output (tick n returns n) */
static adag_dag_h tick_dag(adag_runtime_h rt, adag_placement_t pl, unsigned inflight,
                           adag_actor_h *actor)
{
    adag_actor_h a = h_counter(rt, pl, "ticker", 0);
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h t = h_bind(g, a, "tick", NULL, 0);
    ASSERT_OK(adag_graph_output(g, &t, 1));
    adag_compile_params_t cp = h_compile_params(inflight, 64, 5000, 0);
    adag_dag_h dag = h_compile_with(g, &cp);
    if (actor)
        *actor = a;
    return dag;
}

static int64_t get_release(adag_dag_h dag, adag_ref_t ref)
{
    int64_t y = h_get_i64(dag, ref, 5000);
    ASSERT_OK(adag_dag_release(dag, ref));
    return y;
}

/* adag_dag_execute with no inputs: every execution runs, in order. */
static void execute_no_inputs(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = tick_dag(rt, pl, 0, NULL);
    for (int64_t i = 1; i <= 200; i++) {
        adag_ref_t ref;
        ASSERT_OK(adag_dag_execute(dag, NULL, 0, 0, &ref));
        cr_assert_eq(get_release(dag, ref), i, "execution %lld", (long long)i);
    }
    adag_dag_stats_t s = {.struct_size = sizeof(s)};
    ASSERT_OK(adag_dag_stats(dag, &s));
    cr_assert_eq(s.executed, 200);
    cr_assert_eq(s.completed, 200);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(zero_input, execute_no_inputs, 60)

/* The window full of input-less executions, gotten in order, in reverse
 * and released early; a nonblocking execute at a full window says AGAIN. */
static void window_full(adag_placement_t pl)
{
    enum { W = 4 };
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = tick_dag(rt, pl, W, NULL);
    int64_t next = 1;
    for (int round = 0; round < 30; round++) {
        adag_ref_t refs[W];
        for (int k = 0; k < W; k++)
            ASSERT_OK(adag_dag_execute(dag, NULL, 0, 0, &refs[k]));
        adag_ref_t extra;
        ASSERT_ST(adag_dag_execute(dag, NULL, 0, ADAG_EXECUTE_NONBLOCK, &extra), ADAG_ERR_AGAIN);
        if (round % 3 == 0) {
            for (int k = 0; k < W; k++)
                cr_assert_eq(get_release(dag, refs[k]), next + k, "round %d ref %d", round, k);
        } else if (round % 3 == 1) {
            for (int k = W; k-- > 0;)
                cr_assert_eq(get_release(dag, refs[k]), next + k, "round %d ref %d", round, k);
        } else {
            /* released unread: their slots come back once they complete */
            for (int k = 0; k < W - 1; k++)
                ASSERT_OK(adag_dag_release(dag, refs[k]));
            cr_assert_eq(get_release(dag, refs[W - 1]), next + W - 1, "round %d", round);
        }
        next += W;
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(zero_input, window_full, 60)

struct commit_arg {
    adag_dag_h dag;
    adag_ref_t ref;
    adag_status_t st;
};

static void *commit_elsewhere(void *p)
{
    struct commit_arg *a = p;
    a->st = adag_dag_commit(a->dag, a->ref, NULL, 0);
    return NULL;
}

/* The zero-copy family with no buffers: reserve/commit, cancel of an
 * older reservation (its method must not run) and of the newest (given
 * back), a commit from another thread. */
static void reserve_commit_cancel(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = tick_dag(rt, pl, 4, NULL);
    adag_ref_t r0, r1, r2;
    ASSERT_OK(adag_dag_reserve(dag, 0, NULL, 0, &r0));
    ASSERT_OK(adag_dag_commit(dag, r0, NULL, 0));
    cr_assert_eq(get_release(dag, r0), 1);

    /* r1 cancelled while r2 is reserved: r1 passes through as cancelled,
     * and its tick() must not run */
    ASSERT_OK(adag_dag_reserve(dag, 0, NULL, 0, &r1));
    ASSERT_OK(adag_dag_reserve(dag, 0, NULL, 0, &r2));
    ASSERT_OK(adag_dag_cancel(dag, r1));
    ASSERT_OK(adag_dag_commit(dag, r2, NULL, 0));
    cr_assert_eq(get_release(dag, r2), 2, "a cancelled execution ran its method of no argument");
    adag_value_t v;
    ASSERT_ST(adag_dag_get(dag, r1, &v, 1, 100), ADAG_ERR_INVALID);

    /* the newest cancelled: its ref is given back */
    adag_ref_t r3, r4;
    ASSERT_OK(adag_dag_reserve(dag, 0, NULL, 0, &r3));
    ASSERT_OK(adag_dag_cancel(dag, r3));
    ASSERT_OK(adag_dag_execute(dag, NULL, 0, 0, &r4));
    cr_assert_eq(r4, r3);
    cr_assert_eq(get_release(dag, r4), 3);

    /* a commit on another thread than the reserve's */
    adag_ref_t r5;
    ASSERT_OK(adag_dag_reserve(dag, 0, NULL, 0, &r5));
    pthread_t t;
    struct commit_arg ca = {dag, r5, ADAG_ERR_INTERNAL};
    cr_assert_eq(pthread_create(&t, NULL, commit_elsewhere, &ca), 0);
    pthread_join(t, NULL);
    ASSERT_OK(ca.st);
    cr_assert_eq(get_release(dag, r5), 4);
    adag_ref_t r6;
    ASSERT_OK(adag_dag_execute(dag, NULL, 0, 0, &r6));
    cr_assert_eq(get_release(dag, r6), 5);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(zero_input, reserve_commit_cancel, 60)

/* A reservation left open at destroy: destroy ends it and returns. */
static void destroy_with_reservation(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = tick_dag(rt, pl, 4, NULL);
    adag_ref_t r0, r1;
    ASSERT_OK(adag_dag_execute(dag, NULL, 0, 0, &r0));
    ASSERT_OK(adag_dag_reserve(dag, 0, NULL, 0, &r1));
    cr_assert_eq(get_release(dag, r0), 1);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(zero_input, destroy_with_reservation, 30)

#define NTHREADS 4
#define PER_THREAD 150

struct driver_thread {
    adag_dag_h dag;
    int64_t got[PER_THREAD];
    int failed;
};

static void *drive(void *arg)
{
    struct driver_thread *d = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        adag_ref_t ref;
        adag_value_t out;
        if (adag_dag_execute(d->dag, NULL, 0, 0, &ref) != ADAG_OK ||
            adag_dag_get(d->dag, ref, &out, 1, 5000) != ADAG_OK || out.size != sizeof(int64_t)) {
            d->failed = 1;
            return NULL;
        }
        memcpy(&d->got[i], out.data, sizeof(int64_t));
        if (adag_dag_release(d->dag, ref) != ADAG_OK) {
            d->failed = 1;
            return NULL;
        }
    }
    return NULL;
}

/* Several threads driving one input-less DAG: every tick comes back once. */
static void threads(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = tick_dag(rt, pl, 8, NULL);
    static struct driver_thread d[NTHREADS];
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&d[i], 0, sizeof(d[i]));
        d[i].dag = dag;
        cr_assert_eq(pthread_create(&t[i], NULL, drive, &d[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    static unsigned char seen[NTHREADS * PER_THREAD + 1];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < NTHREADS; i++) {
        cr_assert(!d[i].failed, "thread %d failed", i);
        for (int k = 0; k < PER_THREAD; k++) {
            int64_t v = d[i].got[k];
            cr_assert(v >= 1 && v <= NTHREADS * PER_THREAD && !seen[v], "tick %lld twice or out "
                      "of range", (long long)v);
            seen[v] = 1;
            if (k)
                cr_assert_gt(v, d[i].got[k - 1], "a thread's executions ran out of order");
        }
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(zero_input, threads, 60)

/* A zero-argument method at the head of a chain across actors, beside one
 * fed by an input: b.add(a.tick()) and c.sum2(b's result, c.base()). */
static void chain_from_tick(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "a", 0);
    adag_actor_h b = h_counter(rt, pl, "b", 10);
    adag_actor_h c = h_counter(rt, pl, "c", 100);
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h t = h_bind(g, a, "tick", NULL, 0);
    adag_node_h x = h_bind1(g, b, "add", t);
    adag_node_h args[2] = {x, h_bind(g, c, "base", NULL, 0)};
    adag_node_h y = h_bind(g, c, "sum2", args, 2);
    ASSERT_OK(adag_graph_output(g, &y, 1));
    adag_compile_params_t cp = h_compile_params(3, 64, 5000, 0);
    adag_dag_h dag = h_compile_with(g, &cp);
    adag_ref_t refs[3];
    int64_t n = 0;
    for (int round = 0; round < 40; round++) {
        for (int k = 0; k < 3; k++)
            ASSERT_OK(adag_dag_execute(dag, NULL, 0, 0, &refs[k]));
        for (int k = 0; k < 3; k++) {
            n++;
            cr_assert_eq(get_release(dag, refs[k]), n + 10 + 100 + 100, "execution %lld",
                         (long long)n);
        }
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(zero_input, chain_from_tick, 60)

/* ---- random graphs ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned pick(uint64_t *s, unsigned n)
{
    return (unsigned)(splitmix(s) % n);
}

#define RG_ACTORS 4
#define RG_MAX_NODES 12
#define RG_MAX_INPUTS 2

/* What a value of the random graph is: an input field or a call. */
typedef struct {
    int input;           /* >= 0: input field */
    unsigned actor;      /* a call: its actor, nargs args (values' indexes) */
    unsigned nargs;
    unsigned args[3];
    int used;
} rg_value_t;

typedef struct {
    unsigned ninputs, nvalues;
    rg_value_t v[RG_MAX_INPUTS + RG_MAX_NODES];
    unsigned nout, out[RG_MAX_INPUTS + RG_MAX_NODES];
} rg_graph_t;

static const char *const rg_methods[4] = {"base", "add", "sum2", "sum3"};

/* A random graph: 0-2 input fields, 1-12 calls of 0-3 arguments over
 * actors 0..nactors-1; every input is used (an unused field is refused);
 * the outputs are most of the values nobody reads (always the last), in
 * a random order. */
static void rg_make(uint64_t *s, unsigned nactors, rg_graph_t *g)
{
    memset(g, 0, sizeof(*g));
    g->ninputs = pick(s, RG_MAX_INPUTS + 1);
    for (unsigned i = 0; i < g->ninputs; i++)
        g->v[g->nvalues++] = (rg_value_t){.input = (int)i};
    unsigned ncalls = 1 + pick(s, RG_MAX_NODES);
    if (ncalls < g->ninputs)
        ncalls = g->ninputs;
    for (unsigned k = 0; k < ncalls; k++) {
        rg_value_t c = {.input = -1, .actor = pick(s, nactors)};
        /* the first calls take the inputs nobody read yet, so each is used */
        unsigned fresh = k < g->ninputs ? k : UINT32_MAX;
        c.nargs = g->nvalues ? pick(s, 4) : 0;
        if (fresh != UINT32_MAX && c.nargs == 0)
            c.nargs = 1;
        for (unsigned a = 0; a < c.nargs; a++)
            c.args[a] = a == 0 && fresh != UINT32_MAX ? fresh : pick(s, g->nvalues);
        for (unsigned a = 0; a < c.nargs; a++)
            g->v[c.args[a]].used = 1;
        g->v[g->nvalues++] = c;
    }
    /* a call nobody reads is an output, or (one time in three) left
     * unread: its method runs for its effect, and nothing waits for it */
    unsigned last = g->nvalues - 1;
    for (unsigned i = g->ninputs; i < g->nvalues; i++)
        if (!g->v[i].used && (i == last || pick(s, 3) != 0))
            g->out[g->nout++] = i;
    /* (the last call is never read: there is at least one output) */
    for (unsigned i = g->nout; i > 1; i--) {
        unsigned j = pick(s, i);
        unsigned t = g->out[i - 1];
        g->out[i - 1] = g->out[j];
        g->out[j] = t;
    }
}

/* The reference: value i of an execution with inputs in[]. */
static void rg_eval(const rg_graph_t *g, const int64_t *offsets, const int64_t *in, int64_t *val)
{
    for (unsigned i = 0; i < g->nvalues; i++) {
        const rg_value_t *v = &g->v[i];
        if (v->input >= 0) {
            val[i] = in[v->input];
            continue;
        }
        int64_t y = offsets[v->actor];
        for (unsigned a = 0; a < v->nargs; a++)
            y += val[v->args[a]];
        val[i] = y;
    }
}

static void rg_describe(const rg_graph_t *g, char *out, size_t n)
{
    size_t len = (size_t)snprintf(out, n, "%u inputs;", g->ninputs);
    for (unsigned i = g->ninputs; i < g->nvalues && len < n; i++) {
        const rg_value_t *v = &g->v[i];
        len += (size_t)snprintf(out + len, n - len, " v%u=a%u.%s(", i, v->actor,
                                rg_methods[v->nargs]);
        for (unsigned a = 0; a < v->nargs && len < n; a++)
            len += (size_t)snprintf(out + len, n - len, "%sv%u", a ? "," : "", v->args[a]);
        if (len < n)
            len += (size_t)snprintf(out + len, n - len, ")");
    }
}

/* Builds, compiles and runs one random graph over actors[]: rounds of
 * 1..max_inflight executions in flight, gotten in order or reversed. */
static void rg_run(adag_runtime_h rt, adag_actor_h *actors, const int64_t *offsets,
                   unsigned nactors, uint64_t seed)
{
    uint64_t s = seed;
    rg_graph_t rg;
    rg_make(&s, nactors, &rg);
    char what[1024];
    rg_describe(&rg, what, sizeof(what));

    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h node[RG_MAX_INPUTS + RG_MAX_NODES];
    for (unsigned i = 0; i < rg.nvalues; i++) {
        const rg_value_t *v = &rg.v[i];
        if (v->input >= 0) {
            node[i] = h_input(g, (unsigned)v->input);
            continue;
        }
        adag_node_h args[3];
        for (unsigned a = 0; a < v->nargs; a++)
            args[a] = node[v->args[a]];
        node[i] = h_bind(g, actors[v->actor], rg_methods[v->nargs], args, v->nargs);
    }
    adag_node_h outs[RG_MAX_INPUTS + RG_MAX_NODES];
    for (unsigned o = 0; o < rg.nout; o++)
        outs[o] = node[rg.out[o]];
    ASSERT_OK(adag_graph_output(g, outs, rg.nout));
    unsigned window = 1 + pick(&s, 4);
    adag_compile_params_t cp = h_compile_params(window, 64, 5000, 0);
    adag_dag_h dag;
    adag_status_t st = adag_graph_compile(g, &cp, &dag);
    cr_assert_eq(st, ADAG_OK, "seed %llu: compile: %s (%s)", (unsigned long long)seed,
                 adag_last_error(), what);
    ASSERT_OK(adag_graph_destroy(g));

    int64_t next_input = (int64_t)(seed % 1000) * 1000;
    for (int round = 0; round < 6; round++) {
        unsigned k = 1 + pick(&s, window);
        adag_ref_t refs[4];
        int64_t ins[4][RG_MAX_INPUTS];
        for (unsigned e = 0; e < k; e++) {
            adag_value_t iv[RG_MAX_INPUTS];
            for (unsigned i = 0; i < rg.ninputs; i++) {
                ins[e][i] = next_input++;
                iv[i] = h_i64v(&ins[e][i]);
            }
            st = adag_dag_execute(dag, rg.ninputs ? iv : NULL, rg.ninputs, 0, &refs[e]);
            cr_assert_eq(st, ADAG_OK, "seed %llu: execute: %s (%s)", (unsigned long long)seed,
                         adag_last_error(), what);
        }
        int reversed = pick(&s, 2);
        for (unsigned q = 0; q < k; q++) {
            unsigned e = reversed ? k - 1 - q : q;
            adag_value_t out[RG_MAX_INPUTS + RG_MAX_NODES];
            st = adag_dag_get(dag, refs[e], out, rg.nout, 5000);
            cr_assert_eq(st, ADAG_OK, "seed %llu: get: %s (%s)", (unsigned long long)seed,
                         adag_last_error(), what);
            int64_t val[RG_MAX_INPUTS + RG_MAX_NODES];
            rg_eval(&rg, offsets, ins[e], val);
            for (unsigned o = 0; o < rg.nout; o++) {
                cr_assert_eq(out[o].size, sizeof(int64_t), "seed %llu output %u", 
                             (unsigned long long)seed, o);
                int64_t y;
                memcpy(&y, out[o].data, sizeof(y));
                cr_assert_eq(y, val[rg.out[o]], "seed %llu: output %u (v%u) is %lld, want %lld (%s)",
                             (unsigned long long)seed, o, rg.out[o], (long long)y,
                             (long long)val[rg.out[o]], what);
            }
            ASSERT_OK(adag_dag_release(dag, refs[e]));
        }
    }
    ASSERT_OK(adag_dag_destroy(dag));
}

/* ngraphs random graphs over actors[] (offsets[]), each compiled, run and
 * destroyed while the actors live on. */
static void rg_many(adag_runtime_h rt, adag_actor_h *actors, const int64_t *offsets,
                    uint64_t seed0, unsigned ngraphs)
{
    for (unsigned k = 0; k < ngraphs; k++) {
        uint64_t s = seed0 + k;
        unsigned nactors = 1 + pick(&s, RG_ACTORS);
        rg_run(rt, actors, offsets, nactors, seed0 + k);
    }
}

static int64_t rg_offset(unsigned i)
{
    return (int64_t)(i + 1) * 1000000;
}

/* Random graphs over 4 actors (placement pl, or alternating thread and
 * process when mixed), one runtime. */
static void random_graphs(adag_placement_t pl, int mixed, uint64_t seed0, unsigned ngraphs)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h actors[RG_ACTORS];
    int64_t offsets[RG_ACTORS];
    for (unsigned i = 0; i < RG_ACTORS; i++) {
        char name[16];
        snprintf(name, sizeof(name), "rg%u", i);
        offsets[i] = rg_offset(i);
        adag_placement_t p = mixed ? (i % 2 ? ADAG_PLACEMENT_PROCESS : ADAG_PLACEMENT_THREAD) : pl;
        actors[i] = h_counter(rt, p, name, offsets[i]);
    }
    rg_many(rt, actors, offsets, seed0, ngraphs);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

Test(zero_input, random_graphs_thread, .timeout = 120)
{
    random_graphs(ADAG_PLACEMENT_THREAD, 0, 1000, 300);
}

Test(zero_input, random_graphs_process, .timeout = 120)
{
    random_graphs(ADAG_PLACEMENT_PROCESS, 0, 2000, 300);
}

Test(zero_input, random_graphs_mixed, .timeout = 120)
{
    random_graphs(ADAG_PLACEMENT_THREAD, 1, 3000, 300);
}

/* The same over a thread actor, a process actor and two remote actors on
 * an agent (loopback): the start channel and the other edges to the
 * remote actors are ucx channels. */
Test(zero_input, random_graphs_remote, .timeout = 180)
{
    h_agent_t ag;
    h_agent_start(&ag, "zero input token", 0);
    unsetenv("ADAG_TOKEN");
    setenv("ADAG_TOKEN_FILE", ag.token, 1);
    adag_runtime_h rt = h_runtime();
    adag_actor_h actors[RG_ACTORS];
    int64_t offsets[RG_ACTORS];
    for (unsigned i = 0; i < RG_ACTORS; i++) {
        char name[16];
        snprintf(name, sizeof(name), "rg%u", i);
        offsets[i] = rg_offset(i);
        if (i < 2) {
            actors[i] = h_counter(rt, i ? ADAG_PLACEMENT_PROCESS : ADAG_PLACEMENT_THREAD, name,
                                  offsets[i]);
        } else {
            adag_actor_params_t p = h_remote_params(&ag, name, &offsets[i]);
            ASSERT_OK(adag_actor_create(rt, &p, &actors[i]));
        }
    }
    rg_many(rt, actors, offsets, 4000, 80);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_agent_stop(&ag);
    h_agent_cleanup(&ag);
}
