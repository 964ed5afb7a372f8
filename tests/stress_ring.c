/*
 * A stand-alone stress test of the channels for ThreadSanitizer (`make
 * test-tsan`): Criterion cannot run under TSan (its sandbox arena clashes
 * with TSan's memory layout), so this program has its own tiny harness
 * (tests/stress.h). Writers and readers are threads of one process, so
 * TSan sees every access to the rings: a missing happens-before edge is
 * reported as a data race and fails the run (TSAN_OPTIONS=halt_on_error=1).
 * Any value that arrives wrong, late or not at all makes it exit nonzero
 * too.
 *
 *   channels     several shm (and ucx) channels of one domain at once,
 *                through the ops table (adag__chan_backend): writers in
 *                the driver's context, readers in a context that imported
 *                its export, plus a relay (reader of one channel, writer
 *                of the next)
 *   abort races  adag__ctx_abort racing with writers, readers, waits and
 *                endpoints being opened: every call ends with data or
 *                ADAG_ERR_CLOSED, never a timeout or wrong data
 *
 * Whole DAGs under TSan: tests/stress_dag.c; the emulated device's
 * streams: tests/stress_device.c.
 */
#include "tests/chan_index.h"
#include "common/clock.h"
#include "dag/exec/context.h"
#include "transport/channel.h"
#include "transport/control.h"

#include "stress.h"
#include <adag.h>

#include <errno.h>
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

int main(void)
{
    static const stress_part_t parts[] = {
        {"shm channels through the ops table", run_channels},
        {"ucx channels through the ops table", run_ucx_channels},
        {"abort racing with waits", run_abort_races},
    };
    return stress_run_parts("stress_ring", parts, sizeof(parts) / sizeof(parts[0]));
}
