/*
 * A stand-alone stress test of the channels for ThreadSanitizer (`make
 * test-tsan`): Criterion cannot run under TSan (its sandbox arena clashes
 * with TSan's memory layout), so this program has its own tiny harness.
 * Writers and readers are threads of one process, so TSan sees every access
 * to the rings: a missing happens-before edge is reported as a data race
 * and fails the run (TSAN_OPTIONS=halt_on_error=1). Any value that arrives
 * wrong, late or not at all makes it exit nonzero too.
 *
 *   channels     several shm channels of one domain at once, through the
 *                ops table (adag__chan_backend): writers in the driver's
 *                context, readers in a context that imported its export,
 *                plus a relay (reader of one channel, writer of the next)
 *   abort races  adag__ctx_abort racing with writers, readers, waits and
 *                endpoints being opened: every call ends with data or
 *                ADAG_ERR_CLOSED, never a timeout or wrong data
 *   DAGs         thread actors driven through the public API, and several
 *                driver threads executing on one DAG at once
 */
#include "tests/chan_index.h"
#include "common/clock.h"
#include "dag/exec/context.h"
#include "gpu/device.h"
#include "transport/channel.h"
#include "transport/control.h"

#include "stress.h"
#include <adag.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define DEADLINE_MS 30000

/* ---- channels of one domain, opened the real way ---- */

#define MAX_CHANS 8
#define MAX_READERS 4

typedef struct {
    adag_dag_ctx_t drv, peer; /* the writer's and the readers' processes */
    uint32_t kind;
    unsigned n;
    adag_chan_geom_t geom[MAX_CHANS];
    adag_wbuf_t desc[MAX_CHANS];
    /* every endpoint opened and its peer info (writer 0, reader r at 1 + r),
     * for a backend that connects (domain_connect) */
    adag_chan_t *eps[MAX_CHANS][1 + MAX_READERS];
    adag_wbuf_t info[MAX_CHANS][1 + MAX_READERS];
} domain_t;

static adag_chan_open_params_t params(domain_t *d, unsigned c, int reader, int yield)
{
    adag_chan_open_params_t p = {.name = "stress", .geom = d->geom[c], .reader = reader,
                                 .desc = {d->desc[c].data, d->desc[c].len},
                                 .policy = {yield ? 20000 : 1000, yield}};
    return p;
}

/* Lays out n channels of d->kind in drv and imports them into peer. */
static int domain_make_kind(domain_t *d, uint32_t kind, const adag_chan_geom_t *geom, unsigned n);

static int domain_make(domain_t *d, const adag_chan_geom_t *geom, unsigned n)
{
    return domain_make_kind(d, CHAN_SHM, geom, n);
}

static int domain_make_kind(domain_t *d, uint32_t kind, const adag_chan_geom_t *geom, unsigned n)
{
    uint32_t kinds[MAX_CHANS];
    adag_wbuf_t blob = {0};
    int fds[ADAG_CTL_MAX_FDS];
    unsigned nfds = 0;
    memset(d, 0, sizeof(*d));
    d->kind = kind;
    d->n = n;
    memcpy(d->geom, geom, n * sizeof(*geom));
    for (unsigned i = 0; i < n; i++)
        kinds[i] = kind;
    adag__ctx_init(&d->drv);
    adag__ctx_init(&d->peer);
    if (adag__ctx_create_domains(&d->drv, "stress", kinds, geom, NULL, n, d->desc) != ADAG_OK ||
        adag__ctx_export_domains(&d->drv, &blob, fds, &nfds, ADAG_CTL_MAX_FDS) != ADAG_OK) {
        EXPECT(0, "domain: %s", adag_last_error());
        return 0;
    }
    for (unsigned i = 0; i < nfds; i++)
        fds[i] = dup(fds[i]); /* as SCM_RIGHTS would */
    adag_status_t st =
        adag__ctx_import_domains(&d->peer, (adag_blob_t){blob.data, blob.len}, fds, nfds);
    adag__wbuf_free(&blob);
    EXPECT(st == ADAG_OK, "import: %s", adag_last_error());
    return st == ADAG_OK;
}

static void domain_free(domain_t *d)
{
    adag__ctx_destroy(&d->peer);
    adag__ctx_destroy(&d->drv);
    for (unsigned i = 0; i < d->n; i++) {
        adag__wbuf_free(&d->desc[i]);
        for (unsigned j = 0; j <= MAX_READERS; j++)
            adag__wbuf_free(&d->info[i][j]);
    }
}

/* CONNECT: every endpoint of a channel gets every endpoint's peer info. */
static int domain_connect(domain_t *d)
{
    const adag_chan_ops_t *ops = adag__chan_backend(d->kind);
    if (!ops->connect)
        return 1;
    for (unsigned c = 0; c < d->n; c++) {
        adag_blob_t peers[1 + MAX_READERS];
        unsigned np = 1 + d->geom[c].nreaders;
        for (unsigned j = 0; j < np; j++)
            peers[j] = (adag_blob_t){d->info[c][j].data, d->info[c][j].len};
        for (unsigned j = 0; j < np; j++)
            if (d->eps[c][j] && ops->connect(d->eps[c][j], peers, np) != ADAG_OK) {
                EXPECT(0, "connect channel %u endpoint %u: %s", c, j, adag_last_error());
                return 0;
            }
    }
    return 1;
}

static adag_chan_t *endpoint(domain_t *d, adag_dag_ctx_t *ctx, unsigned c, int reader, int yield)
{
    adag_chan_open_params_t p = params(d, c, reader, yield);
    adag_chan_t *ch = NULL;
    adag_wbuf_t info = {0};
    if (adag__ctx_open(ctx, d->kind, &p, &info, &ch) != ADAG_OK) {
        EXPECT(0, "open channel %u reader %d: %s", c, reader, adag_last_error());
        adag__wbuf_free(&info);
        return NULL;
    }
    if (!d->eps[c][reader + 1]) { /* the first endpoint of each is the one connected */
        d->eps[c][reader + 1] = ch;
        d->info[c][reader + 1] = info;
    } else {
        adag__wbuf_free(&info);
    }
    return ch;
}

/* seq's value: words of 8 bytes (the count varies with seq) */
static unsigned words_of(uint64_t seq, unsigned max)
{
    return 1 + (unsigned)(seq % max);
}

static uint64_t word(uint64_t seq, unsigned i, unsigned salt)
{
    return seq * 31 + i + ((uint64_t)salt << 48);
}

static adag_status_t put(adag_chan_t *w, uint64_t seq, unsigned max, unsigned salt)
{
    void *buf;
    adag_status_t st = adag__chan_acquire(w, seq, adag__deadline_ms(DEADLINE_MS), &buf);
    if (st != ADAG_OK)
        return st;
    unsigned n = words_of(seq, max);
    for (unsigned i = 0; i < n; i++)
        ((uint64_t *)buf)[i] = word(seq, i, salt);
    return adag__chan_publish(w, seq, n * 8, NULL, ADAG_OK, NULL);
}

/* wait + check (+ copy into out, if given) + release (held: release_held,
 * the caller publishes and flushes, as a worker loop does): ADAG_OK, a
 * wait's status, or ADAG_ERR_INTERNAL for wrong data */
static adag_status_t get(adag_chan_t *rd, uint64_t seq, unsigned max, unsigned salt,
                         uint64_t *out, int held)
{
    adag_slot_view_t v;
    adag_status_t st = adag__chan_wait(rd, seq, adag__deadline_ms(DEADLINE_MS), &v);
    if (st != ADAG_OK)
        return st;
    unsigned n = words_of(seq, max);
    if (v.status != ADAG_OK || v.size != n * 8)
        st = ADAG_ERR_INTERNAL;
    for (unsigned i = 0; st == ADAG_OK && i < n; i++)
        if (((const uint64_t *)v.data)[i] != word(seq, i, salt))
            st = ADAG_ERR_INTERNAL;
    if (out && st == ADAG_OK)
        memcpy(out, v.data, n * 8);
    if (held)
        adag__chan_release_held(rd, seq);
    else
        adag__chan_release(rd, seq);
    return st;
}

typedef struct {
    adag_chan_t *in, *out; /* reader of in; writer of out (a relay), or NULL */
    uint64_t n;
    unsigned words, salt;
    int slow;
    adag_status_t st;
    uint64_t at;
} worker_t;

static void *reader_main(void *p)
{
    worker_t *a = p;
    uint64_t copy[64];
    for (uint64_t s = 0; s < a->n; s++) {
        a->at = s;
        if ((a->st = get(a->in, s, a->words, a->salt, a->out ? copy : NULL, !!a->out)) !=
            ADAG_OK)
            return NULL;
        if (a->out) {
            /* a relay: forward the value on the next channel (same words),
             * its input released before, held for this publish */
            void *buf;
            if ((a->st = adag__chan_acquire(a->out, s, adag__deadline_ms(DEADLINE_MS), &buf)))
                return NULL;
            memcpy(buf, copy, words_of(s, a->words) * 8);
            adag__chan_publish(a->out, s, words_of(s, a->words) * 8, NULL, ADAG_OK, NULL);
            adag__chan_flush(a->in);
        }
        if (a->slow && s % 64 == 0)
            usleep(100);
    }
    return NULL;
}

static void *writer_main(void *p)
{
    worker_t *a = p;
    for (uint64_t s = 0; s < a->n; s++) {
        a->at = s;
        if ((a->st = put(a->out, s, a->words, a->salt)) != ADAG_OK)
            return NULL;
    }
    return NULL;
}

/* Every channel at once: channel i has its writer thread and readers;
 * the last two channels are a chain through a relay thread. All of it
 * over `kind`. */
static int run_channels_of(uint32_t kind)
{
    static const struct {
        adag_chan_geom_t g;
        uint64_t n;
    } cases[] = {{{4, 1, 32, 0, 0}, 20000}, {{3, 3, 64, 0, 0}, 10000}, {{1, 2, 16, 0, 0}, 3000},
                 {{8, 4, 8, 0, 0}, 5000},   {{2, 1, 64, 0, 0}, 5000},  {{2, 2, 64, 0, 0}, 5000}};
    enum { NC = sizeof(cases) / sizeof(cases[0]) };
    adag_chan_geom_t geoms[NC];
    domain_t d;
    pthread_t th[NC * (MAX_READERS + 1)];
    worker_t w[NC * (MAX_READERS + 1)];
    unsigned nt = 0;
    int before = atomic_load(&failures);
    for (unsigned c = 0; c < NC; c++)
        geoms[c] = cases[c].g;
    if (!domain_make_kind(&d, kind, geoms, NC))
        return 0;
    for (unsigned c = 0; c < NC; c++) {
        unsigned words = (unsigned)(cases[c].g.capacity / 8);
        if (c == NC - 1)
            continue; /* fed by the relay below */
        w[nt] = (worker_t){.out = endpoint(&d, &d.drv, c, -1, c % 2), .n = cases[c].n,
                           .words = words, .salt = c};
                nt++;
        for (unsigned r = 0; r < cases[c].g.nreaders; r++) {
            w[nt] = (worker_t){.in = endpoint(&d, &d.peer, c, (int)r, r % 2), .n = cases[c].n,
                               .words = words, .salt = c, .slow = r == 1};
            if (c == NC - 2 && r == 0) /* the relay: also the writer of the last channel */
                w[nt].out = endpoint(&d, &d.peer, NC - 1, -1, 0);
            nt++;
        }
    }
    for (unsigned r = 0; r < cases[NC - 1].g.nreaders; r++) {
        w[nt] = (worker_t){.in = endpoint(&d, &d.drv, NC - 1, (int)r, 1), .n = cases[NC - 1].n,
                           .words = (unsigned)(cases[NC - 1].g.capacity / 8), .salt = NC - 2};
        nt++;
    }
    if (!domain_connect(&d)) {
        domain_free(&d);
        return 0;
    }
    for (unsigned i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, w[i].in ? reader_main : writer_main, &w[i]);
    for (unsigned i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        EXPECT(w[i].st == ADAG_OK, "channel thread %u: %s at seq %llu", i,
               adag_status_str(w[i].st), (unsigned long long)w[i].at);
    }
    domain_free(&d);
    return atomic_load(&failures) == before;
}

static int run_channels(void)
{
    return run_channels_of(CHAN_SHM);
}

/* The same over UCX (transport/chan_ucx.c): its AM callbacks, progress
 * thread and waiters in one process, where TSan sees them all. */
static int run_ucx_channels(void)
{
    return run_channels_of(CHAN_UCX);
}

/* ---- adag__ctx_abort racing with everything ---- */

typedef struct {
    domain_t *d;
    _Atomic int *stop;
    adag_status_t st;
} opener_t;

/* Opens endpoints while the abort comes; a wait on one opened after (or
 * during) the abort must not block. */
static void *opener_main(void *p)
{
    opener_t *o = p;
    o->st = ADAG_OK;
    while (!atomic_load(o->stop)) {
        adag_chan_t *rd = endpoint(o->d, &o->d->drv, 0, 1, 0);
        adag_slot_view_t v;
        if (!rd)
            return NULL;
        if (adag__ctx_aborted(&o->d->drv)) {
            o->st = adag__chan_wait(rd, 1u << 30, adag__deadline_ms(DEADLINE_MS), &v);
            return NULL;
        }
        sched_yield();
    }
    return NULL;
}

/* Joins a thread the abort must have woken; one still blocked 10 s later
 * is a failure, reported at once (the run cannot go on past it). */
static void join_promptly(pthread_t th, unsigned round, int which)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    if (pthread_timedjoin_np(th, NULL, &until) != 0) {
        fprintf(stderr, "FAIL: round %u: thread %d still blocked 10 s after the abort\n", round,
                which);
        printf("stress_ring: abort racing with waits: FAILED\n");
        fflush(stdout);
        _exit(1);
    }
}

static int aborted_ok(adag_status_t st)
{
    return st == ADAG_OK || st == ADAG_ERR_CLOSED;
}

/* One round: a writer, two readers (one slow) and an opener run until the
 * abort; every call must end with data or ADAG_ERR_CLOSED. The second
 * context is aborted by another thread at the same time. */
static int abort_round(unsigned round)
{
    adag_chan_geom_t g = {2, 2, 64, 0, 0};
    domain_t d;
    int before = atomic_load(&failures);
    if (!domain_make(&d, &g, 1))
        return 0;
    /* readers in the driver's context too (thread actors): one abort wakes all */
    worker_t w[3] = {
        {.out = endpoint(&d, &d.drv, 0, -1, round % 2), .n = UINT64_MAX, .words = 8},
        {.in = endpoint(&d, &d.drv, 0, 0, 0), .n = UINT64_MAX, .words = 8},
        {.in = endpoint(&d, &d.drv, 0, 1, 1), .n = UINT64_MAX, .words = 8, .slow = 1},
    };
    _Atomic int stop = 0;
    opener_t o = {&d, &stop, ADAG_OK};
    pthread_t th[4];
    pthread_create(&th[0], NULL, writer_main, &w[0]);
    pthread_create(&th[1], NULL, reader_main, &w[1]);
    pthread_create(&th[2], NULL, reader_main, &w[2]);
    pthread_create(&th[3], NULL, opener_main, &o);
    usleep((round * 397) % 3000);
    adag_status_t why = round % 3 ? ADAG_ERR_ACTOR_DIED : ADAG_ERR_METHOD;
    int set = adag__ctx_abort(&d.drv, why);
    int again = adag__ctx_abort(&d.drv, ADAG_ERR_TIMEOUT);
    adag__ctx_abort(&d.peer, why);
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++)
        join_promptly(th[i], round, i);
    EXPECT(set == 1 && again == 0, "round %u: abort returned %d then %d", round, set, again);
    EXPECT(atomic_load(&d.drv.abort) == (uint32_t)-why, "round %u: abort word %u", round,
           atomic_load(&d.drv.abort));
    for (int i = 0; i < 3; i++)
        EXPECT(w[i].st == ADAG_ERR_CLOSED, "round %u: thread %d ended with %s at seq %llu", round,
               i, adag_status_str(w[i].st), (unsigned long long)w[i].at);
    EXPECT(aborted_ok(o.st), "round %u: a wait on an endpoint opened at the abort: %s", round,
           adag_status_str(o.st));
    domain_free(&d);
    return atomic_load(&failures) == before;
}

static int run_abort_races(void)
{
    int ok = 1;
    for (unsigned round = 0; round < 30; round++)
        ok &= abort_round(round);
    return ok;
}

/* ---- a whole DAG of thread actors: driver, loops and channels under TSan ---- */

static adag_status_t add_one(void *state, adag_call_h call)
{
    adag_value_t in;
    int64_t x;
    (*(int64_t *)state)++;
    if (adag_call_arg(call, 0, &in) != ADAG_OK || in.size != sizeof x)
        return adag_call_fail(call, "expected an int64");
    memcpy(&x, in.data, sizeof x);
    x += 1;
    return adag_call_set_output(call, 0, &x, sizeof x);
}

static adag_status_t sum2(void *state, adag_call_h call)
{
    adag_value_t a, b;
    int64_t x, y;
    (*(int64_t *)state)++;
    if (adag_call_arg(call, 0, &a) != ADAG_OK || adag_call_arg(call, 1, &b) != ADAG_OK)
        return adag_call_fail(call, "expected two args");
    memcpy(&x, a.data, sizeof x);
    memcpy(&y, b.data, sizeof y);
    x += y;
    return adag_call_set_output(call, 0, &x, sizeof x);
}

/* tick() -> how many methods of this actor ran, this one included */
static adag_status_t tick(void *state, adag_call_h call)
{
    int64_t x = ++*(int64_t *)state;
    return adag_call_set_output(call, 0, &x, sizeof x);
}

static const adag_method_def_t stress_methods[] = {
    {"add_one", add_one, 1, 1}, {"sum2", sum2, 2, 1}, {"tick", tick, 0, 1}};
static const adag_class_def_t stress_class = {.abi_version = ADAG_ABI_VERSION,
                                              .name = "stress", .state_size = sizeof(int64_t),
                                              .methods = stress_methods, .nmethods = 3};

/* input -> a.add_one -> {b.add_one, c.add_one} -> a.sum2 -> driver; a second
 * DAG shares actor a. Returns 1 if every value came back right. */
static int run_dag(void)
{
    adag_runtime_h rt;
    adag_actor_h a, b, c;
    adag_graph_h g, g2;
    adag_node_h in, x, y, z, out, in2, out2;
    adag_dag_h dag, dag2;
    int ok = 1;
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "stress"};
    if (adag_runtime_create(NULL, &rt) || adag_class_register(rt, &stress_class) ||
        adag_actor_create(rt, &p, &a) || adag_actor_create(rt, &p, &b) ||
        adag_actor_create(rt, &p, &c) || adag_graph_create(rt, &g) ||
        adag_graph_input(g, 0, &in) || adag_graph_bind(g, a, "add_one", &in, 1, &x) ||
        adag_graph_bind(g, b, "add_one", &x, 1, &y) || adag_graph_bind(g, c, "add_one", &x, 1, &z))
        return 0;
    adag_node_h yz[2] = {y, z};
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT, .max_inflight = 4};
    if (adag_graph_bind(g, a, "sum2", yz, 2, &out) || adag_graph_output(g, &out, 1) ||
        adag_graph_compile(g, &cp, &dag) || adag_graph_create(rt, &g2) ||
        adag_graph_input(g2, 0, &in2) || adag_graph_bind(g2, a, "add_one", &in2, 1, &out2) ||
        adag_graph_output(g2, &out2, 1) || adag_graph_compile(g2, &cp, &dag2)) {
        fprintf(stderr, "setup: %s\n", adag_last_error());
        return 0;
    }
    adag_ref_t refs[4], refs2[4];
    for (int64_t i = 0; i < 3000 + 4; i++) {
        if (i >= 4) {
            adag_value_t o;
            int64_t v;
            if (adag_dag_get(dag, refs[i % 4], &o, 1, 20000) || o.size != 8)
                return 0;
            memcpy(&v, o.data, 8);
            ok &= v == 2 * (i - 4) + 4;
            if (adag_dag_get(dag2, refs2[i % 4], &o, 1, 20000))
                return 0;
            memcpy(&v, o.data, 8);
            ok &= v == i - 4 + 1;
            adag_dag_release(dag, refs[i % 4]);
            adag_dag_release(dag2, refs2[i % 4]);
        }
        if (i < 3000) {
            adag_value_t v = {.data = &i, .size = sizeof i};
            if (adag_dag_execute(dag, &v, 1, 0, &refs[i % 4]) ||
                adag_dag_execute(dag2, &v, 1, 0, &refs2[i % 4]))
                return 0;
        }
    }
    /* teardown with work in flight */
    for (int64_t i = 0; i < 4; i++) {
        adag_value_t v = {.data = &i, .size = sizeof i};
        adag_dag_execute(dag, &v, 1, 0, &refs[i]);
    }
    return ok && adag_runtime_destroy(rt) == ADAG_OK;
}

/* Several threads drive one DAG at once: plain executes, NONBLOCK ones
 * that retry on ADAG_ERR_AGAIN, and zero-copy reserve/commit (one thread
 * committing as a tensor, one as bytes with every fifth reservation
 * cancelled), while another thread polls the armed DAG fd. Every result is
 * checked; TSan checks the reservation, the ref window and the fd state. */
typedef struct {
    adag_dag_h dag;
    int mode; /* 0 execute, 1 NONBLOCK execute, 2 reserve/commit as an i64[1] tensor,
                 3 reserve/commit as bytes (every fifth reservation cancelled) */
    int64_t base;
    int ok;
} driver_thread_t;


static void *drive(void *arg)
{
    driver_thread_t *t = arg;
    t->ok = 1;
    for (int64_t i = 0; i < 1500; i++) {
        int64_t x = t->base + i;
        adag_ref_t ref;
        adag_status_t st;
        if (t->mode == 2 || t->mode == 3) {
            adag_input_view_t view;
            while ((st = adag_dag_reserve(t->dag, 0, &view, 1, &ref)) == ADAG_ERR_TIMEOUT) {
            }
            if (st != ADAG_OK)
                return (t->ok = 0, NULL);
            if (t->mode == 3 && i % 5 == 4) {
                t->ok &= adag_dag_cancel(t->dag, ref) == ADAG_OK;
                continue;
            }
            memcpy(view.data, &x, sizeof x);
            adag_value_t v = {.data = view.data, .size = sizeof x};
            if (t->mode == 2)
                v = (adag_value_t){.data = view.data, .size = sizeof x, .kind = ADAG_VALUE_TENSOR,
                                   .dtype = ADAG_DTYPE_I64, .ndim = 1, .shape = {1}};
            st = adag_dag_commit(t->dag, ref, &v, 1);
        } else {
            adag_value_t v = {.data = &x, .size = sizeof x};
            unsigned flags = t->mode == 1 ? ADAG_EXECUTE_NONBLOCK : 0;
            while ((st = adag_dag_execute(t->dag, &v, 1, flags, &ref)) == ADAG_ERR_AGAIN ||
                   st == ADAG_ERR_TIMEOUT)
                sched_yield();
        }
        adag_value_t o;
        int64_t y;
        if (st != ADAG_OK || adag_dag_get(t->dag, ref, &o, 1, 20000) != ADAG_OK ||
            o.size != sizeof y) {
            fprintf(stderr, "driver thread %d: %s\n", t->mode, adag_last_error());
            return (t->ok = 0, NULL);
        }
        memcpy(&y, o.data, sizeof y);
        t->ok &= y == x + 1;
        adag_dag_release(t->dag, ref);
    }
    return NULL;
}

static _Atomic int polling;

static void *poll_fd(void *arg)
{
    int fd = *(int *)arg;
    while (atomic_load(&polling)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 1);
    }
    return NULL;
}

static int run_concurrent_drivers(void)
{
    adag_runtime_h rt;
    adag_actor_h a;
    adag_graph_h g;
    adag_node_h in, out;
    adag_dag_h dag;
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "stress"};
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT,
                                .max_inflight = 3, .execute_timeout_ms = 50};
    if (adag_runtime_create(NULL, &rt) || adag_class_register(rt, &stress_class) ||
        adag_actor_create(rt, &p, &a) || adag_graph_create(rt, &g) ||
        adag_graph_input(g, 0, &in) || adag_graph_bind(g, a, "add_one", &in, 1, &out) ||
        adag_graph_output(g, &out, 1) || adag_graph_compile(g, &cp, &dag)) {
        fprintf(stderr, "setup: %s\n", adag_last_error());
        return 0;
    }
    int fd;
    if (adag_dag_fd(dag, &fd) != ADAG_OK)
        return 0;
    atomic_store(&polling, 1);
    pthread_t poller, th[4];
    driver_thread_t dt[4] = {{dag, 0, 0, 0}, {dag, 1, 1000000, 0}, {dag, 2, 2000000, 0},
                             {dag, 3, 3000000, 0}};
    pthread_create(&poller, NULL, poll_fd, &fd);
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, drive, &dt[i]);
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ok &= dt[i].ok;
    }
    atomic_store(&polling, 0);
    pthread_join(poller, NULL);
    /* destroyed by the thread holding a reservation */
    adag_input_view_t view;
    adag_ref_t ref;
    ok &= adag_dag_reserve(dag, 0, &view, 1, &ref) == ADAG_OK;
    ok &= adag_dag_destroy(dag) == ADAG_OK;
    return ok && adag_runtime_destroy(rt) == ADAG_OK;
}

/* Several threads drive one DAG without inputs: b.add_one(a.tick()) ->
 * driver, and c.tick() that nobody reads (its loop may lag: the start
 * channel's slots). Plain and NONBLOCK executes, reserve/commit with every
 * fifth reservation cancelled (its tick must not run); every result is
 * a.tick + 1, each tick once. Then a thread leaves a reservation behind
 * and destroy drops it after the teardown timeout. */
#define ZI_THREADS 4
#define ZI_PER 1000

typedef struct {
    adag_dag_h dag;
    int mode; /* 0 execute, 1 NONBLOCK execute, 3 reserve/commit/cancel */
    int64_t got[ZI_PER];
    unsigned n;
    int ok;
} zi_thread_t;

static void *drive_zero_input(void *arg)
{
    zi_thread_t *t = arg;
    t->ok = 1;
    for (int i = 0; i < ZI_PER; i++) {
        adag_ref_t ref;
        adag_status_t st;
        if (t->mode == 3) {
            while ((st = adag_dag_reserve(t->dag, 0, NULL, 0, &ref)) == ADAG_ERR_TIMEOUT) {
            }
            if (st != ADAG_OK)
                return (t->ok = 0, NULL);
            if (i % 5 == 4) {
                t->ok &= adag_dag_cancel(t->dag, ref) == ADAG_OK;
                continue;
            }
            st = adag_dag_commit(t->dag, ref, NULL, 0);
        } else {
            unsigned flags = t->mode == 1 ? ADAG_EXECUTE_NONBLOCK : 0;
            while ((st = adag_dag_execute(t->dag, NULL, 0, flags, &ref)) == ADAG_ERR_AGAIN ||
                   st == ADAG_ERR_TIMEOUT)
                sched_yield();
        }
        adag_value_t o;
        if (st != ADAG_OK || adag_dag_get(t->dag, ref, &o, 1, 20000) != ADAG_OK ||
            o.size != sizeof(int64_t)) {
            fprintf(stderr, "zero-input driver thread %d: %s\n", t->mode, adag_last_error());
            return (t->ok = 0, NULL);
        }
        memcpy(&t->got[t->n], o.data, sizeof(int64_t));
        t->ok &= t->n == 0 || t->got[t->n] > t->got[t->n - 1];
        t->n++;
        adag_dag_release(t->dag, ref);
    }
    return NULL;
}

static void *reserve_and_leave(void *arg)
{
    adag_ref_t ref;
    return adag_dag_reserve(arg, 0, NULL, 0, &ref) == ADAG_OK ? arg : NULL;
}

static int run_zero_input_drivers(void)
{
    adag_runtime_h rt;
    adag_actor_h a, b, c;
    adag_graph_h g;
    adag_node_h t, u, unread;
    adag_dag_h dag;
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "stress"};
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT |
                                              ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT,
                                .max_inflight = 3, .execute_timeout_ms = 50,
                                .teardown_timeout_ms = 300};
    if (adag_runtime_create(NULL, &rt) || adag_class_register(rt, &stress_class) ||
        adag_actor_create(rt, &p, &a) || adag_actor_create(rt, &p, &b) ||
        adag_actor_create(rt, &p, &c) || adag_graph_create(rt, &g) ||
        adag_graph_bind(g, a, "tick", NULL, 0, &t) || adag_graph_bind(g, b, "add_one", &t, 1, &u) ||
        adag_graph_bind(g, c, "tick", NULL, 0, &unread) || adag_graph_output(g, &u, 1) ||
        adag_graph_compile(g, &cp, &dag)) {
        fprintf(stderr, "setup: %s\n", adag_last_error());
        return 0;
    }
    static zi_thread_t zt[ZI_THREADS];
    const int modes[ZI_THREADS] = {0, 1, 3, 3};
    pthread_t th[ZI_THREADS];
    for (int i = 0; i < ZI_THREADS; i++) {
        memset(&zt[i], 0, sizeof(zt[i]));
        zt[i].dag = dag;
        zt[i].mode = modes[i];
        pthread_create(&th[i], NULL, drive_zero_input, &zt[i]);
    }
    int ok = 1;
    unsigned total = 0;
    static unsigned char seen[ZI_THREADS * ZI_PER + 2];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < ZI_THREADS; i++) {
        pthread_join(th[i], NULL);
        ok &= zt[i].ok;
        for (unsigned k = 0; k < zt[i].n; k++) {
            int64_t v = zt[i].got[k] - 1; /* a's tick */
            ok &= v >= 1 && v <= ZI_THREADS * ZI_PER && !seen[v];
            if (v >= 1 && v <= ZI_THREADS * ZI_PER)
                seen[v] = 1;
        }
        total += zt[i].n;
    }
    /* the ticks of the executions that ran are 1..total: no cancelled one ran */
    for (unsigned v = 1; v <= total; v++)
        ok &= seen[v];
    EXPECT(ok, "zero-input DAG: a result out of place (%u executions)", total);
    pthread_t leaver;
    void *left = NULL;
    pthread_create(&leaver, NULL, reserve_and_leave, dag);
    pthread_join(leaver, &left);
    ok &= left == dag;
    ok &= adag_dag_destroy(dag) == ADAG_OK;
    return ok && adag_runtime_destroy(rt) == ADAG_OK;
}

/* ---- the emulated device: streams ordered by events, under TSan ---- */

typedef struct {
    int64_t buf[64]; /* plain memory: only the events order its accesses */
    int64_t round;
    int bad;
} relay_t;

static void relay_write(void *arg)
{
    relay_t *r = arg;
    r->round++;
    for (int i = 0; i < 64; i++)
        r->buf[i] = r->round * 64 + i;
}

static void relay_check(void *arg)
{
    relay_t *r = arg;
    for (int i = 0; i < 64; i++)
        r->bad |= r->buf[i] != r->round * 64 + i;
}

/* A writes, records; B waits, checks, records; A waits on B before the next
 * write: 2000 rounds of a two-stream ping-pong on plain memory. */
static int run_host_device(void)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev;
    adag_dev_stream_t *a, *b;
    adag_dev_event_t *ea, *eb;
    static relay_t r;
    if (o->open(0, &dev) || o->stream_create(dev, &a) || o->stream_create(dev, &b) ||
        o->event_create(dev, &ea) || o->event_create(dev, &eb)) {
        fprintf(stderr, "emulated device: %s\n", adag_last_error());
        return 0;
    }
    int ok = 1;
    for (int i = 0; i < 2000 && ok; i++) {
        ok &= o->stream_wait_event(a, eb) == ADAG_OK && o->host_fn(a, relay_write, &r) == ADAG_OK &&
              o->event_record(ea, a) == ADAG_OK && o->stream_wait_event(b, ea) == ADAG_OK &&
              o->host_fn(b, relay_check, &r) == ADAG_OK && o->event_record(eb, b) == ADAG_OK;
        if (i % 500 == 0) /* now and then the host waits too */
            ok &= o->event_sync(eb, adag__deadline_ms(10000)) == ADAG_OK;
    }
    ok &= o->stream_sync(b, adag__deadline_ms(10000)) == ADAG_OK;
    o->event_destroy(dev, ea);
    o->event_destroy(dev, eb);
    o->stream_destroy(dev, a);
    o->stream_destroy(dev, b);
    adag_device_counts_t c;
    o->counts(dev, &c);
    o->close(dev);
    return ok && !r.bad && r.round == 2000 && c.streams == 0 && c.events == 0;
}

/* Copies with pageable and registered plain memory (gpu/host_ranges.c): a
 * staged copy in, a copy out to registered memory read after an event, a
 * copy out to pageable memory read as the call returns, while another
 * thread registers and unregisters ranges of its own. 1000 rounds. */
static _Atomic int churn_stop;

static void *range_churn(void *arg)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev = arg;
    static char mine[4 * 4096] __attribute__((aligned(4096)));
    while (!atomic_load(&churn_stop)) {
        adag_dev_mem_t reg;
        if (o->host_register(dev, mine, sizeof mine, &reg) == ADAG_OK)
            o->host_unregister(dev, &reg);
    }
    return NULL;
}

static int run_host_copies(void)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev;
    adag_dev_stream_t *s;
    adag_dev_event_t *ev;
    adag_dev_mem_t d = {0}, reg = {0};
    static int64_t in[512], out_reg[512] __attribute__((aligned(4096))), out_page[512];
    pthread_t churn;
    if (o->open(0, &dev) || o->stream_create(dev, &s) || o->event_create(dev, &ev) ||
        o->mem_alloc(dev, sizeof in, &d) || o->host_register(dev, out_reg, sizeof out_reg, &reg)) {
        fprintf(stderr, "emulated device: %s\n", adag_last_error());
        return 0;
    }
    atomic_store(&churn_stop, 0);
    int ok = pthread_create(&churn, NULL, range_churn, dev) == 0;
    for (int64_t round = 1; round <= 1000 && ok; round++) {
        for (int i = 0; i < 512; i++)
            in[i] = round * 512 + i;
        ok &= o->copy_async(s, d.ptr, in, sizeof in) == ADAG_OK; /* staged: in is free now */
        memset(in, 0, sizeof in);
        ok &= o->copy_async(s, out_reg, d.ptr, sizeof in) == ADAG_OK &&
              o->event_record(ev, s) == ADAG_OK &&
              o->copy_async(s, out_page, d.ptr, sizeof in) == ADAG_OK; /* returns once done */
        for (int i = 0; i < 512; i++)
            ok &= out_page[i] == round * 512 + i;
        ok &= o->event_sync(ev, adag__deadline_ms(10000)) == ADAG_OK;
        for (int i = 0; i < 512; i++)
            ok &= out_reg[i] == round * 512 + i;
    }
    atomic_store(&churn_stop, 1);
    pthread_join(churn, NULL);
    o->host_unregister(dev, &reg);
    o->mem_free(dev, &d);
    o->event_destroy(dev, ev);
    o->stream_destroy(dev, s);
    adag_device_counts_t c;
    o->counts(dev, &c);
    o->close(dev);
    return ok && c.streams == 0 && c.events == 0 && c.mem == 0 && c.registered == 0;
}

/* A stream of device 1 waits on an import of device 0's event whose
 * stream is held by a gate; another thread abandons the import while the
 * wait runs (and while the main thread syncs): the wait ends, the stream
 * drains, nothing races. 200 rounds. */
static _Atomic int abandon_gate;

static void gate_wait(void *arg)
{
    (void)arg;
    while (!atomic_load(&abandon_gate))
        sched_yield();
}

static void *abandoner(void *arg)
{
    adag_dev_event_t *imp = arg;
    adag__device_backend(ADAG_DEV_EMULATED)->event_abandon(imp);
    return NULL;
}

static int run_host_abandon(void)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *d0, *d1;
    adag_dev_stream_t *s0, *s1;
    int ok = 1;
    if (o->open(0, &d0) || o->open(1, &d1) || o->stream_create(d0, &s0) ||
        o->stream_create(d1, &s1)) {
        fprintf(stderr, "emulated device: %s\n", adag_last_error());
        return 0;
    }
    for (int i = 0; i < 200 && ok; i++) {
        adag_dev_event_t *ev = NULL, *imp = NULL;
        adag_dev_handle_t h;
        pthread_t th;
        atomic_store(&abandon_gate, 0);
        ok &= o->event_create(d0, &ev) == ADAG_OK && o->event_export(d0, ev, &h) == ADAG_OK &&
              o->event_import(d1, &h, &imp) == ADAG_OK;
        if (!ok)
            break;
        ok &= o->host_fn(s0, gate_wait, NULL) == ADAG_OK && o->event_record(ev, s0) == ADAG_OK &&
              o->stream_wait_event(s1, imp) == ADAG_OK;
        ok &= pthread_create(&th, NULL, abandoner, imp) == 0;
        ok &= o->stream_sync(s1, adag__deadline_ms(10000)) == ADAG_OK;
        pthread_join(th, NULL);
        atomic_store(&abandon_gate, 1);
        ok &= o->event_sync(ev, adag__deadline_ms(10000)) == ADAG_OK;
        o->event_destroy(d1, imp);
        o->event_destroy(d0, ev);
    }
    atomic_store(&abandon_gate, 1);
    o->stream_destroy(d0, s0);
    o->stream_destroy(d1, s1);
    o->close(d0);
    o->close(d1);
    adag_device_counts_t c;
    o->counts(NULL, &c);
    return ok && c.streams == 0 && c.events == 0 && c.imported_events == 0;
}

int main(void)
{
    struct {
        const char *name;
        int (*run)(void);
    } parts[] = {
        {"shm channels through the ops table", run_channels},
        {"ucx channels through the ops table", run_ucx_channels},
        {"abort racing with waits", run_abort_races},
        {"thread-actor DAG", run_dag},
        {"four threads driving one DAG (execute, NONBLOCK, reserve/commit of a tensor and of "
         "bytes, cancel)",
         run_concurrent_drivers},
        {"four threads driving a DAG without inputs; a reservation left at destroy",
         run_zero_input_drivers},
        {"emulated device: two streams ordered by events", run_host_device},
        {"emulated device: pageable and registered copies", run_host_copies},
        {"emulated device: an import abandoned while a stream waits on it", run_host_abandon},
    };
    unsigned n = sizeof(parts) / sizeof(parts[0]), passed = 0;
    for (unsigned i = 0; i < n; i++) {
        int before = atomic_load(&failures);
        int ok = parts[i].run();
        EXPECT(ok, "%s (last error: %s)", parts[i].name, adag_last_error());
        ok = ok && atomic_load(&failures) == before;
        printf("stress_ring: %s: %s\n", parts[i].name, ok ? "ok" : "FAILED");
        passed += ok;
    }
    printf("stress_ring: %u passed, %u failed\n", passed, n - passed);
    return passed == n && atomic_load(&failures) == 0 ? 0 : 1;
}
