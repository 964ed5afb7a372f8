/*
 * The per-process DAG context (suite "ctx", dag/exec/context.c): the abort word
 * (first status wins, wakes every endpoint of every backend), domains laid
 * out for mixed kinds, and the import of a peer's domain list, which must
 * refuse anything malformed and close every fd it was given.
 */
#include "chan_rig.h"

#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* ---- abort ---- */

Test(ctx, abort_first_status_wins, .timeout = 30)
{
    adag_dag_ctx_t ctx;
    adag__ctx_init(&ctx);
    cr_assert(!adag__ctx_aborted(&ctx));
    cr_assert_eq(adag__ctx_abort(&ctx, ADAG_ERR_ACTOR_DIED), 1, "the first abort sets the word");
    cr_assert(adag__ctx_aborted(&ctx));
    cr_assert_eq(atomic_load(&ctx.abort), (uint32_t)-ADAG_ERR_ACTOR_DIED);
    cr_assert_eq(adag__ctx_abort(&ctx, ADAG_ERR_TIMEOUT), 0, "a second abort does not");
    cr_assert_eq(adag__ctx_abort(&ctx, ADAG_ERR_ACTOR_DIED), 0);
    cr_assert_eq(atomic_load(&ctx.abort), (uint32_t)-ADAG_ERR_ACTOR_DIED, "first status wins");
    adag__ctx_destroy(&ctx);
}

#define RACE_CTXS 20000

typedef struct {
    adag_dag_ctx_t *ctxs;
    adag_status_t status;
    pthread_barrier_t *start;
    unsigned char won[RACE_CTXS];
} racer_t;

static void *racer_main(void *p)
{
    racer_t *r = p;
    pthread_barrier_wait(r->start);
    for (unsigned i = 0; i < RACE_CTXS; i++)
        r->won[i] = (unsigned char)adag__ctx_abort(&r->ctxs[i], r->status);
    return NULL;
}

/* Threads abort the same contexts, in the same order, with different
 * statuses: for each context exactly one call reports that it set the
 * word, and the word holds that call's status. */
Test(ctx, abort_race_has_one_winner, .timeout = 60)
{
    enum { NR = 3 };
    adag_dag_ctx_t *ctxs = calloc(RACE_CTXS, sizeof(*ctxs));
    racer_t *r = calloc(NR, sizeof(*r));
    pthread_t th[NR];
    pthread_barrier_t start;
    cr_assert(ctxs && r);
    pthread_barrier_init(&start, NULL, NR);
    for (unsigned i = 0; i < RACE_CTXS; i++)
        adag__ctx_init(&ctxs[i]);
    for (int i = 0; i < NR; i++) {
        r[i].ctxs = ctxs;
        r[i].status = (adag_status_t)(-1 - i);
        r[i].start = &start;
        cr_assert_eq(pthread_create(&th[i], NULL, racer_main, &r[i]), 0);
    }
    for (int i = 0; i < NR; i++)
        pthread_join(th[i], NULL);
    for (unsigned c = 0; c < RACE_CTXS; c++) {
        int winners = 0;
        for (int i = 0; i < NR; i++) {
            cr_assert(r[i].won[c] <= 1);
            if (r[i].won[c]) {
                winners++;
                cr_assert_eq(atomic_load(&ctxs[c].abort), (uint32_t)-r[i].status);
            }
        }
        cr_assert_eq(winners, 1, "context %u: %d calls set the word", c, winners);
        adag__ctx_destroy(&ctxs[c]);
    }
    pthread_barrier_destroy(&start);
    free(ctxs);
    free(r);
}

/* Two channels of every backend in one context, laid out in one call:
 * every blocked writer and reader (CAP_RING) wakes with ADAG_ERR_CLOSED,
 * and a backend where nothing blocks keeps working. */
Test(ctx, abort_wakes_every_endpoint_of_every_backend, .timeout = 60)
{
    enum { PER = 2, MAXCH = 2 * 16 };
    adag_dag_ctx_t ctx;
    uint32_t kinds[MAXCH];
    adag_chan_geom_t geoms[MAXCH];
    adag_wbuf_t descs[MAXCH];
    const chan_backend_t *line[MAXCH];
    unsigned n = 0;
    cr_assert_leq(chan_nbackends * PER, (unsigned)MAXCH);
    for (unsigned b = 0; b < chan_nbackends; b++)
        for (unsigned i = 0; i < PER; i++) {
            int ring = chan_backends[b].caps & CAP_RING;
            line[n] = &chan_backends[b];
            kinds[n] = chan_backends[b].kind;
            geoms[n] = (adag_chan_geom_t){1 + i, ring ? 2 : 0, 64, 0, 0};
            descs[n] = (adag_wbuf_t){0};
            n++;
        }
    adag__ctx_init(&ctx);
    cr_assert_eq(adag__ctx_create_domains(&ctx, "every", kinds, geoms, NULL, n, descs), ADAG_OK,
                 "%s", adag_last_error());

    adag_chan_t *w[MAXCH], *rd[MAXCH][2];
    blocked_t calls[MAXCH * 3];
    unsigned ncalls = 0;
    _Atomic int done = 0;
    for (unsigned c = 0; c < n; c++) {
        adag_chan_open_params_t p = {.name = "every", .geom = geoms[c], .reader = -1,
                                     .desc = {descs[c].data, descs[c].len},
                                     .policy = {0, 0}}; /* no spinning: straight to sleep */
        adag_wbuf_t info[3] = {{0}, {0}, {0}};
        cr_assert_eq(adag__ctx_open(&ctx, kinds[c], &p, &info[0], &w[c]), ADAG_OK, "%s",
                     adag_last_error());
        for (unsigned r = 0; r < geoms[c].nreaders; r++) {
            p.reader = (int)r;
            cr_assert_eq(adag__ctx_open(&ctx, kinds[c], &p, &info[1 + r], &rd[c][r]), ADAG_OK);
        }
        const adag_chan_ops_t *ops = adag__chan_backend(kinds[c]);
        if (ops->connect) {
            adag_blob_t peers[3];
            for (unsigned i = 0; i <= geoms[c].nreaders; i++)
                peers[i] = (adag_blob_t){info[i].data, info[i].len};
            cr_assert_eq(ops->connect(w[c], peers, 1 + geoms[c].nreaders), ADAG_OK);
            for (unsigned r = 0; r < geoms[c].nreaders; r++)
                cr_assert_eq(ops->connect(rd[c][r], peers, 1 + geoms[c].nreaders), ADAG_OK);
        }
        for (unsigned i = 0; i < 3; i++)
            adag__wbuf_free(&info[i]);
        if (!(line[c]->caps & CAP_RING))
            continue;
        /* fill the ring, then block its writer and its readers */
        for (uint64_t s = 0; s < geoms[c].nslots; s++)
            cr_assert_eq(value_put(w[c], s, adag__deadline_ms(1000)), ADAG_OK);
        blocked_start(&calls[ncalls++], w[c], 1, geoms[c].nslots, adag__deadline_ms(10000), &done);
        for (unsigned r = 0; r < geoms[c].nreaders; r++)
            blocked_start(&calls[ncalls++], rd[c][r], 0, geoms[c].nslots,
                          adag__deadline_ms(10000), &done);
    }
    cr_assert_gt(ncalls, 0);
    usleep(100000);
    cr_assert_eq(atomic_load(&done), 0, "a call returned before the abort");
    int64_t t0 = adag__now_ns();
    cr_assert(adag__ctx_abort(&ctx, ADAG_ERR_METHOD));
    for (unsigned i = 0; i < ncalls; i++) {
        blocked_join(&calls[i]);
        cr_assert_eq(calls[i].st, ADAG_ERR_CLOSED, "call %u of %u: %s", i, ncalls,
                     adag_status_str(calls[i].st));
    }
    cr_assert_lt(ms_since(t0), PROMPT_MS);
    /* a backend without blocking waits still completes an iteration */
    for (unsigned c = 0; c < n; c++)
        if (!(line[c]->caps & CAP_RING)) {
            cr_assert_eq(value_put(w[c], 0, adag__deadline_ms(1000)), ADAG_OK);
            cr_assert_eq(value_get(w[c], 0, adag__deadline_ms(1000)), 0);
        }
    adag__ctx_destroy(&ctx);
    for (unsigned c = 0; c < n; c++)
        adag__wbuf_free(&descs[c]);
}

/* The descriptors land on the channel they belong to: a domainless kind's
 * is empty, a domain's are distinct. */
Test(ctx, create_domains_mixed_kinds, .timeout = 30)
{
    adag_dag_ctx_t ctx;
    uint32_t kinds[4] = {CHAN_SHM, CHAN_SELF, CHAN_SHM, CHAN_SELF};
    adag_chan_geom_t g[4] = {{2, 1, 64, 0, 0}, {1, 0, 64, 0, 0}, {3, 2, 128, 0, 0}, {1, 0, 32, 0, 0}};
    adag_wbuf_t d[4] = {{0}, {0}, {0}, {0}};
    adag__ctx_init(&ctx);
    cr_assert_eq(adag__ctx_create_domains(&ctx, "mixed", kinds, g, NULL, 4, d), ADAG_OK);
    for (unsigned i = 0; i < 4; i++) {
        const adag_chan_ops_t *ops = adag__chan_backend(kinds[i]);
        cr_assert_eq(d[i].len == 0, ops->domain_create == NULL, "channel %u", i);
        adag_chan_t *ch;
        adag_chan_open_params_t p = {.name = "m", .geom = g[i], .reader = -1,
                                     .desc = {d[i].data, d[i].len}};
        cr_assert_eq(adag__ctx_open(&ctx, kinds[i], &p, NULL, &ch), ADAG_OK, "channel %u: %s", i,
                     adag_last_error());
    }
    cr_assert(d[0].len != d[2].len || memcmp(d[0].data, d[2].data, d[0].len) != 0);
    cr_assert_gt(adag__ctx_domain_bytes(&ctx), 0);
    adag__ctx_destroy(&ctx);
    for (unsigned i = 0; i < 4; i++)
        adag__wbuf_free(&d[i]);
}

/* ---- import ---- */

static int is_open(int fd)
{
    return fcntl(fd, F_GETFD) != -1 || errno != EBADF;
}

/* A driver context with an shm domain (the only kind with one). */
static void driver_with_domain(adag_dag_ctx_t *drv, adag_wbuf_t *desc)
{
    uint32_t kind = CHAN_SHM;
    adag_chan_geom_t g = {2, 1, 64, 0, 0};
    adag__ctx_init(drv);
    cr_assert_eq(adag__ctx_create_domains(drv, "imp", &kind, &g, NULL, 1, desc), ADAG_OK);
}

/* Imports blob with dup'd copies of fds[0..nfds) plus `extra` eventfds;
 * checks that on failure every one of them is closed, and that the fds
 * past them in the array were not touched. */
static adag_status_t import_with(const void *blob, size_t len, const int *src, unsigned nfds,
                                 unsigned extra)
{
    adag_dag_ctx_t ctx;
    int fds[ADAG_CTL_MAX_FDS], given[ADAG_CTL_MAX_FDS];
    unsigned n = 0;
    for (unsigned i = 0; i < nfds; i++)
        given[n++] = fds[i] = dup(src[i]);
    for (unsigned i = 0; i < extra; i++, n++)
        given[n] = fds[n] = eventfd(0, EFD_CLOEXEC);
    for (unsigned i = 0; i < n; i++)
        cr_assert_geq(given[i], 0);
    /* canaries past the fds given: never the import's to touch */
    int canary[ADAG_CTL_MAX_FDS];
    for (unsigned i = n; i < ADAG_CTL_MAX_FDS; i++)
        cr_assert_geq(canary[i] = fds[i] = eventfd(0, EFD_CLOEXEC), 0);
    adag__ctx_init(&ctx);
    adag_status_t st = adag__ctx_import_domains(&ctx, (adag_blob_t){blob, len}, fds, n);
    for (unsigned i = n; i < ADAG_CTL_MAX_FDS; i++) {
        cr_assert(is_open(canary[i]), "fd %d past the %u given was closed", canary[i], n);
        close(canary[i]);
    }
    if (st != ADAG_OK) {
        char msg[ADAG_ERROR_MAX];
        snprintf(msg, sizeof(msg), "%s", adag_last_error());
        /* fds taken by a domain that was attached are the context's until destroy */
        for (unsigned k = 0; k < adag__chan_nbackends(); k++)
            cr_assert_null(ctx.domains[k], "a domain stayed attached: %s", msg);
        for (unsigned i = 0; i < n; i++)
            cr_assert(!is_open(given[i]), "fd %u of %u (%d) left open: %s", i, n, given[i], msg);
    }
    adag__ctx_destroy(&ctx);
    for (unsigned i = 0; i < n; i++)
        cr_assert(!is_open(given[i]), "fd %d left open after destroy", given[i]);
    return st;
}

Test(ctx, import_rejects_malformed_domain_lists, .timeout = 60)
{
    adag_dag_ctx_t drv;
    adag_wbuf_t desc = {0}, blob = {0};
    int fds[ADAG_CTL_MAX_FDS];
    unsigned nfds = 0;
    driver_with_domain(&drv, &desc);
    cr_assert_eq(adag__ctx_export_domains(&drv, &blob, fds, &nfds, ADAG_CTL_MAX_FDS), ADAG_OK);
    cr_assert_geq(nfds, 1);

    /* the real list imports (and its fds are the context's afterwards) */
    cr_assert_eq(import_with(blob.data, blob.len, fds, nfds, 0), ADAG_OK, "%s",
                 adag_last_error());
    /* every strict prefix */
    for (size_t len = 0; len < blob.len; len++)
        cr_assert_eq(import_with(blob.data, len, fds, nfds, 0), ADAG_ERR_PROTOCOL,
                     "a %zu-byte prefix of %zu", len, blob.len);
    /* a trailing byte, an unused fd, a missing fd */
    char *padded = malloc(blob.len + 1);
    memcpy(padded, blob.data, blob.len);
    padded[blob.len] = 0;
    cr_assert_eq(import_with(padded, blob.len + 1, fds, nfds, 0), ADAG_ERR_PROTOCOL);
    free(padded);
    cr_assert_eq(import_with(blob.data, blob.len, fds, nfds, 1), ADAG_ERR_PROTOCOL);
    cr_assert_eq(import_with(blob.data, blob.len, fds, nfds - 1, 0), ADAG_ERR_PROTOCOL);
    /* the list is {u32 n, n x {str backend, u64 len + blob, u32 nfds}} */
    adag_rbuf_t rb = {blob.data, blob.len, 0, 0};
    cr_assert_eq(adag__rbuf_u32(&rb), 1);
    char name[ADAG_CHAN_BACKEND_NAME_MAX];
    adag__rbuf_str(&rb, name, sizeof(name));
    cr_assert_str_eq(name, "shm");
    adag_blob_t inner;
    inner.data = adag__rbuf_bytes(&rb, &inner.len);
    cr_assert_eq(adag__rbuf_u32(&rb), nfds);
    cr_assert(!rb.failed && rb.pos == rb.len);
    struct {
        uint32_t n;
        const char *kind;
        uint32_t nfds;
        const char *what;
    } bad[] = {
        {1, "foo", nfds, "an unknown backend"},
        {1, "", nfds, "an unknown backend"},
        {1, "self", nfds, "a backend without domains"},
        {2, "shm", nfds, "two domains of one backend"},
        {adag__chan_nbackends() + 1, "shm", nfds, "more domains than backends"},
        {0xffffffffu, "shm", nfds, "a huge count"},
        {1, "shm", ADAG_CHAN_DOMAIN_MAX_FDS + 1, "too many fds"},
        {1, "shm", 0xffffffffu, "too many fds"},
        {1, "shm", nfds + 1, "more fds than were sent"},
        {1, "shm", nfds - 1, "too few fds for the domain"},
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        adag_wbuf_t b = {0};
        adag__wbuf_u32(&b, bad[i].n);
        for (uint32_t k = 0; k < (bad[i].n == 2 ? 2u : 1u); k++) {
            adag__wbuf_str(&b, bad[i].kind);
            adag__wbuf_bytes(&b, inner.data, inner.len);
            adag__wbuf_u32(&b, bad[i].nfds);
        }
        unsigned give = bad[i].n == 2 ? 2 * nfds : nfds;
        int twice[2 * ADAG_CTL_MAX_FDS];
        for (unsigned j = 0; j < give; j++)
            twice[j] = fds[j % nfds];
        cr_assert_eq(import_with(b.data, b.len, twice, give, 0), ADAG_ERR_PROTOCOL, "%s (%u)",
                     bad[i].what, i);
        adag__wbuf_free(&b);
    }
    /* the domain's own blob: a segment size that is not the segment's */
    uint64_t size;
    cr_assert_eq(inner.len, sizeof(size));
    memcpy(&size, inner.data, sizeof(size));
    const uint64_t sizes[] = {size - 4096, size + 4096, 0, 63, UINT64_MAX};
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        adag_wbuf_t b = {0}, ib = {0};
        adag__wbuf_u64(&ib, sizes[i]);
        adag__wbuf_u32(&b, 1);
        adag__wbuf_u32(&b, CHAN_SHM);
        adag__wbuf_bytes(&b, ib.data, ib.len);
        adag__wbuf_u32(&b, nfds);
        cr_assert_neq(import_with(b.data, b.len, fds, nfds, 0), ADAG_OK, "segment size %llu",
                      (unsigned long long)sizes[i]);
        adag__wbuf_free(&b);
        adag__wbuf_free(&ib);
    }
    /* the fds in the wrong order: the eventfd is not a segment */
    int swapped[2] = {fds[1], fds[0]};
    cr_assert_eq(nfds, 2);
    cr_assert_neq(import_with(blob.data, blob.len, swapped, 2, 0), ADAG_OK);
    /* the driver's own fds were never given away */
    for (unsigned i = 0; i < nfds; i++)
        cr_assert(is_open(fds[i]));
    adag__wbuf_free(&blob);
    adag__wbuf_free(&desc);
    adag__ctx_destroy(&drv);
}

/* An export that does not fit the fds the caller has room for is refused;
 * a context without domains exports an empty list that imports. */
Test(ctx, export_limits_and_empty_list, .timeout = 30)
{
    adag_dag_ctx_t drv, empty;
    adag_wbuf_t desc = {0}, blob = {0};
    int fds[ADAG_CTL_MAX_FDS];
    unsigned nfds = 0;
    driver_with_domain(&drv, &desc);
    cr_assert_eq(adag__ctx_export_domains(&drv, &blob, fds, &nfds, 1), ADAG_ERR_INVALID);
    adag__wbuf_free(&blob);
    adag__ctx_init(&empty);
    nfds = 0;
    blob = (adag_wbuf_t){0};
    cr_assert_eq(adag__ctx_export_domains(&empty, &blob, fds, &nfds, ADAG_CTL_MAX_FDS), ADAG_OK);
    cr_assert_eq(nfds, 0);
    cr_assert_eq(import_with(blob.data, blob.len, fds, 0, 0), ADAG_OK);
    cr_assert_eq(import_with(blob.data, blob.len, fds, 0, 2), ADAG_ERR_PROTOCOL, "unused fds");
    adag__wbuf_free(&blob);
    adag__ctx_destroy(&empty);
    adag__wbuf_free(&desc);
    adag__ctx_destroy(&drv);
}
