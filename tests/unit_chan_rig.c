/* The channel rig of tests/chan_rig.h (no tests here: the unit_ prefix
 * links it into adag-unit-tests with the suites that use it). */
#define RIG_NO_WRAP
#include "chan_rig.h"

#include "common/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void free_params(struct criterion_test_params *p)
{
    cr_free(p->params);
}

struct criterion_test_params chan_backends_with(unsigned needs)
{
    chan_backend_t *a = cr_malloc(sizeof(chan_backend_t) * chan_nbackends);
    size_t n = 0;
    for (unsigned i = 0; i < chan_nbackends; i++)
        if ((chan_backends[i].caps & needs) == needs)
            a[n++] = chan_backends[i];
    return cr_make_param_array(chan_backend_t, a, n, free_params);
}

void rig_export(adag_dag_ctx_t *drv, adag_wbuf_t *blob, int *fds, unsigned *nfds)
{
    int owned[ADAG_CTL_MAX_FDS];
    *nfds = 0;
    cr_assert_eq(adag__ctx_export_domains(drv, blob, owned, nfds, ADAG_CTL_MAX_FDS), ADAG_OK,
                 "export: %s", adag_last_error());
    cr_assert(!blob->failed);
    /* what SCM_RIGHTS would do: new fds for the same files */
    for (unsigned i = 0; i < *nfds; i++) {
        fds[i] = dup(owned[i]);
        cr_assert_geq(fds[i], 0);
    }
}

static adag_chan_open_params_t params(rig_t *r, int reader)
{
    adag_chan_device_t *d = &r->devs[reader + 1];
    adag_chan_open_params_t p = {
        .name = "conf.m[0]",
        .geom = r->geom,
        .reader = reader,
        .desc = {r->desc.data, r->desc.len},
        .policy = RIG_POLICY,
        .device = d->dev ? d : NULL,
    };
    if (r->comms[reader + 1].comm) {
        p.comms = &r->comms[reader + 1];
        p.ncomms = 1;
    }
    return p;
}

/* Which device endpoint is which (for rig_wait / rig_acquire). */
#define RIG_MAX_EPS 64
static struct {
    adag_chan_t *ch;
    const adag_chan_device_t *dev;
} rig_eps[RIG_MAX_EPS];
static pthread_mutex_t rig_eps_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_endpoint(adag_chan_t *ch, const adag_chan_device_t *dev)
{
    if (!dev)
        return;
    pthread_mutex_lock(&rig_eps_lock);
    unsigned i = 0;
    while (i < RIG_MAX_EPS && rig_eps[i].ch && rig_eps[i].ch != ch)
        i++;
    cr_assert_lt(i, RIG_MAX_EPS);
    rig_eps[i].ch = ch;
    rig_eps[i].dev = dev;
    pthread_mutex_unlock(&rig_eps_lock);
}

static void forget_endpoints(const rig_t *r)
{
    pthread_mutex_lock(&rig_eps_lock);
    for (unsigned i = 0; i < RIG_MAX_EPS; i++)
        for (unsigned j = 0; j <= RIG_MAX_READERS; j++)
            if (rig_eps[i].dev == &r->devs[j])
                rig_eps[i].ch = NULL, rig_eps[i].dev = NULL;
    pthread_mutex_unlock(&rig_eps_lock);
}

static const adag_chan_device_t *device_of(adag_chan_t *ch)
{
    const adag_chan_device_t *d = NULL;
    pthread_mutex_lock(&rig_eps_lock);
    for (unsigned i = 0; i < RIG_MAX_EPS && !d; i++)
        if (rig_eps[i].ch == ch)
            d = rig_eps[i].dev;
    pthread_mutex_unlock(&rig_eps_lock);
    return d;
}

static adag_status_t sync_stream(adag_chan_t *ch, adag_status_t st, int comm)
{
    const adag_chan_device_t *d = st == ADAG_OK ? device_of(ch) : NULL;
    if (d)
        cr_assert_eq(d->dev->ops->stream_sync(comm ? d->comm : d->compute,
                                              adag__deadline_ms(20000)),
                     ADAG_OK, "%s", adag_last_error());
    return st;
}

static adag_status_t sync_compute(adag_chan_t *ch, adag_status_t st)
{
    return sync_stream(ch, st, 0);
}

adag_status_t rig_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                          const adag_tensor_meta_t *meta, adag_status_t status, const char *err)
{
    return sync_stream(ch, ch->ops->publish(ch, seq, size, meta, status, err), 1);
}

adag_status_t rig_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline, adag_slot_view_t *v)
{
    return sync_compute(ch, ch->ops->wait(ch, seq, deadline, v));
}

adag_status_t rig_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf)
{
    return sync_compute(ch, ch->ops->acquire(ch, seq, deadline, buf));
}

/* An actor on emulated device `index` (-1: none): the device and its streams. */
static void device_open(adag_chan_device_t *d, int index, const chan_backend_t *be)
{
    memset(d, 0, sizeof(*d));
    if (index < 0)
        return;
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    cr_assert_eq(o->open((unsigned)index, &d->dev), ADAG_OK, "%s", adag_last_error());
    d->kind = ADAG_DEV_EMULATED;
    d->dev->tuning.memops = !(be->caps & CAP_IPC_EVENTS);
    cr_assert_eq(o->stream_create(d->dev, &d->compute), ADAG_OK);
    cr_assert_eq(o->stream_create(d->dev, &d->comm), ADAG_OK);
}

/* What the channel's endpoints allocated on this device is gone (and, if
 * with_streams, its streams too). */
static void device_assert_empty(const adag_chan_device_t *d, int with_streams)
{
    adag_device_counts_t c;
    d->dev->ops->counts(d->dev, &c);
    cr_assert_eq(c.mem + c.events + c.imported_mem + c.imported_events +
                     (with_streams ? c.streams : 0),
                 0, "device %u still has %llu memory, %llu events, %llu imports, %llu streams",
                 d->dev->index, (unsigned long long)c.mem, (unsigned long long)c.events,
                 (unsigned long long)(c.imported_mem + c.imported_events),
                 (unsigned long long)c.streams);
}

static void device_close(adag_chan_device_t *d)
{
    if (!d->dev)
        return;
    const adag_device_ops_t *o = d->dev->ops;
    o->stream_destroy(d->dev, d->compute);
    o->stream_destroy(d->dev, d->comm);
    device_assert_empty(d, 1);
    o->close(d->dev);
    memset(d, 0, sizeof(*d));
}

/* ---- the communicator of a CAP_BY_COMM line ---- */

typedef struct {
    adag_comm_id_t id;
    unsigned nranks, rank;
    adag_device_t *dev;
    adag_comm_t *comm;
    adag_status_t st;
    char err[512];
} rank_init_t;

static void *rank_init_main(void *arg)
{
    rank_init_t *a = arg;
    const adag_comm_ops_t *ops = adag__comm_backend(ADAG_COMM_KIND_HOST);
    a->st = a->dev->ops->bind_thread(a->dev);
    if (a->st == ADAG_OK)
        a->st = ops->init(&a->id, a->nranks, a->rank, a->dev, adag__deadline_ms(20000), &a->comm);
    if (a->st != ADAG_OK)
        snprintf(a->err, sizeof(a->err), "rank %u: %s", a->rank, adag_last_error());
    return NULL;
}

/* Every device endpoint joins the host communicator as the next rank, in
 * a thread of its own (init is collective), with a stream of its own. */
static void comm_open(rig_t *r, unsigned nplaces)
{
    const adag_comm_ops_t *ops = adag__comm_backend(ADAG_COMM_KIND_HOST);
    rank_init_t a[1 + RIG_MAX_READERS];
    pthread_t th[1 + RIG_MAX_READERS];
    unsigned nranks = 0;
    for (unsigned j = 0; j < nplaces; j++)
        if (r->devs[j].dev)
            r->places[j].comm_rank = nranks++;
    cr_assert_geq(nranks, 2, "a communicator line needs two device endpoints");
    adag_comm_id_t id;
    void *owner;
    cr_assert_eq(ops->id_create(nranks, &id, &owner), ADAG_OK, "%s", adag_last_error());
    for (unsigned j = 0; j < nplaces; j++) {
        if (!r->devs[j].dev)
            continue;
        a[j] = (rank_init_t){.id = id, .nranks = nranks, .rank = r->places[j].comm_rank,
                             .dev = r->devs[j].dev};
        cr_assert_eq(pthread_create(&th[j], NULL, rank_init_main, &a[j]), 0);
    }
    for (unsigned j = 0; j < nplaces; j++)
        if (r->devs[j].dev)
            cr_assert_eq(pthread_join(th[j], NULL), 0);
    ops->id_destroy(owner); /* every init returned */
    for (unsigned j = 0; j < nplaces; j++) {
        if (!r->devs[j].dev)
            continue;
        cr_assert_eq(a[j].st, ADAG_OK, "%s", a[j].err);
        adag_dev_stream_t *s;
        cr_assert_eq(r->devs[j].dev->ops->stream_create(r->devs[j].dev, &s), ADAG_OK);
        r->comms[j] = (adag_chan_comm_t){RIG_COMM_KEY, a[j].comm, s};
    }
}

static void comm_close(rig_t *r)
{
    for (unsigned j = 0; j <= RIG_MAX_READERS; j++) {
        adag_chan_comm_t *e = &r->comms[j];
        if (!e->comm)
            continue;
        e->comm->ops->destroy(e->comm);
        r->devs[j].dev->ops->stream_destroy(r->devs[j].dev, e->stream);
        memset(e, 0, sizeof(*e));
    }
}

adag_status_t rig_endpoint(rig_t *r, adag_dag_ctx_t *ctx, int reader, adag_chan_t **out)
{
    adag_chan_open_params_t p = params(r, reader);
    adag_wbuf_t info = {0};
    adag_status_t st = adag__ctx_open(ctx, r->be->kind, &p, &info, out);
    adag__wbuf_free(&info);
    if (st == ADAG_OK)
        note_endpoint(*out, p.device);
    return st;
}

/* An endpoint named as the compiler names them (by actor) on device dev (-1: host). */
static adag_chan_place_t place_on(int dev, const char *who)
{
    return (adag_chan_place_t){dev < 0 ? -1 : ADAG_DEV_EMULATED,
                               dev < 0 ? 0u : (uint32_t)dev, who, 0};
}

/* The channel itself, on the rig's devices and communicator. */
static void chan_open(rig_t *r, unsigned nslots, unsigned nreaders, size_t capacity)
{
    const chan_backend_t *be = r->be;
    r->geom = (adag_chan_geom_t){nslots, nreaders, capacity,
                                 r->comms[0].comm ? RIG_COMM_KEY : 0, 0};
    const adag_chan_place_t *places[1] = {r->places};

    /* the driver lays the channel out (a domain if the backend has them) */
    adag__ctx_init(&r->drv);
    uint32_t kind = be->kind;
    cr_assert_eq(adag__ctx_create_domains(&r->drv, "conf", &kind, &r->geom, places, 1, &r->desc),
                 ADAG_OK, "%s: create: %s", r->ops->name, adag_last_error());
    cr_assert(!r->desc.failed);

    /* a worker attaches it */
    adag__ctx_init(&r->peer);
    adag_wbuf_t blob = {0};
    int fds[ADAG_CTL_MAX_FDS];
    unsigned nfds;
    rig_export(&r->drv, &blob, fds, &nfds);
    cr_assert_eq(adag__ctx_import_domains(&r->peer, (adag_blob_t){blob.data, blob.len}, fds, nfds),
                 ADAG_OK, "%s: import: %s", r->ops->name, adag_last_error());
    adag__wbuf_free(&blob);

    /* PREPARE: every endpoint, collecting peer info */
    adag_wbuf_t info[1 + RIG_MAX_READERS] = {{0}};
    adag_chan_open_params_t p = params(r, -1);
    cr_assert_eq(adag__ctx_open(&r->drv, kind, &p, &info[0], &r->w), ADAG_OK, "%s: writer: %s",
                 r->ops->name, adag_last_error());
    note_endpoint(r->w, p.device);
    for (unsigned i = 0; i < nreaders; i++) {
        p = params(r, (int)i);
        cr_assert_eq(adag__ctx_open(r->one_ctx ? &r->drv : &r->peer, kind, &p, &info[1 + i],
                                   &r->rd[i]),
                     ADAG_OK, "%s: reader %u: %s", r->ops->name, i, adag_last_error());
        note_endpoint(r->rd[i], p.device);
    }
    r->nrd = nreaders ? nreaders : 1;
    if (!nreaders)
        r->rd[0] = r->w;

    /* CONNECT: everybody gets everybody's info */
    if (r->ops->connect) {
        adag_blob_t peers[1 + RIG_MAX_READERS];
        for (unsigned i = 0; i <= nreaders; i++)
            peers[i] = (adag_blob_t){info[i].data, info[i].len};
        cr_assert_eq(r->ops->connect(r->w, peers, 1 + nreaders), ADAG_OK, "%s",
                     adag_last_error());
        for (unsigned i = 0; i < nreaders; i++)
            cr_assert_eq(r->ops->connect(r->rd[i], peers, 1 + nreaders), ADAG_OK, "%s",
                         adag_last_error());
    }
    for (unsigned i = 0; i <= nreaders; i++)
        adag__wbuf_free(&info[i]);
}

static void chan_close(rig_t *r)
{
    adag__ctx_destroy(&r->peer);
    adag__ctx_destroy(&r->drv);
    adag__wbuf_free(&r->desc);
    forget_endpoints(r);
    r->w = NULL;
    memset(r->rd, 0, sizeof(r->rd));
}

void rig_open_at(rig_t *r, const chan_backend_t *be, unsigned nslots, unsigned nreaders,
                 size_t capacity, int flags, const int *rdevs)
{
    memset(r, 0, sizeof(*r));
    r->be = be;
    r->ops = adag__chan_backend(be->kind);
    cr_assert(r->ops, "no backend of kind %u", be->kind);
    cr_assert_leq(nreaders, RIG_MAX_READERS);
    if (!(be->caps & CAP_RING))
        nreaders = 0;
    r->one_ctx = flags & RIG_ONE_CTX;
    device_open(&r->devs[0], be->wdev, be);
    r->places[0] = place_on(be->wdev, "writer");
    for (unsigned i = 0; i < nreaders; i++) {
        int dev = rdevs ? rdevs[i] : be->rdev;
        device_open(&r->devs[1 + i], dev, be);
        r->places[1 + i] = place_on(dev, "reader");
    }
    if (be->caps & CAP_BY_COMM)
        comm_open(r, 1 + nreaders);
    chan_open(r, nslots, nreaders, capacity);
}

void rig_open(rig_t *r, const chan_backend_t *be, unsigned nslots, unsigned nreaders,
              size_t capacity, int flags)
{
    rig_open_at(r, be, nslots, nreaders, capacity, flags, NULL);
}

void rig_reopen(rig_t *r, unsigned nslots, size_t capacity)
{
    unsigned nreaders = r->geom.nreaders;
    chan_close(r);
    for (unsigned i = 0; i <= RIG_MAX_READERS; i++)
        if (r->devs[i].dev)
            device_assert_empty(&r->devs[i], 0);
    chan_open(r, nslots, nreaders, capacity);
}

void rig_close(rig_t *r)
{
    if (r->comms[0].comm)
        r->comms[0].comm->ops->abort(r->comms[0].comm);
    chan_close(r);
    comm_close(r);
    for (unsigned i = 0; i <= RIG_MAX_READERS; i++)
        device_close(&r->devs[i]);
    adag_comm_counts_t c;
    adag__comm_backend(ADAG_COMM_KIND_HOST)->counts(&c);
    cr_assert(c.comms == 0 && c.ids == 0, "%llu communicators and %llu ids left",
              (unsigned long long)c.comms, (unsigned long long)c.ids);
}

/* ---- values ---- */

size_t value_size(uint64_t seq, size_t capacity)
{
    return capacity ? (size_t)((seq * 37 + 5) % (capacity + 1)) : 0;
}

void value_fill(void *buf, uint64_t seq, size_t size)
{
    unsigned char *b = buf;
    for (size_t i = 0; i < size; i++)
        b[i] = (unsigned char)(seq * 131 + i * 7 + 1);
}

int value_check(const adag_slot_view_t *v, uint64_t seq, size_t size)
{
    if (v->status != ADAG_OK)
        return 1;
    if (v->size != size)
        return 2;
    const unsigned char *b = v->data;
    for (size_t i = 0; i < size; i++)
        if (b[i] != (unsigned char)(seq * 131 + i * 7 + 1))
            return 3;
    if (v->err_len != 0 || !v->err || v->err[0] != '\0')
        return 4;
    return 0;
}

adag_status_t value_put(adag_chan_t *w, uint64_t seq, int64_t deadline)
{
    void *buf;
    adag_status_t st = rig_acquire(w, seq, deadline, &buf);
    if (st != ADAG_OK)
        return st;
    size_t size = value_size(seq, w->capacity);
    value_fill(buf, seq, size);
    return rig_publish(w, seq, size, NULL, ADAG_OK, NULL);
}

int value_get(adag_chan_t *rd, uint64_t seq, int64_t deadline)
{
    adag_slot_view_t v;
    adag_status_t st = rig_wait(rd, seq, deadline, &v);
    if (st != ADAG_OK)
        return st < 0 ? st : -100;
    int rc = value_check(&v, seq, value_size(seq, rd->capacity));
    adag__chan_release(rd, seq);
    return rc;
}

int rig_ready(const chan_backend_t *be, adag_chan_t *ch, uint64_t seq)
{
    int64_t t0 = adag__now_ns();
    while (!adag__chan_ready(ch, seq)) {
        if (!(be->caps & CAP_ASYNC) || ms_since(t0) > PROMPT_MS)
            return 0;
        usleep(100);
    }
    return 1;
}

/* ---- calls that block, in threads ---- */

static void *blocked_main(void *p)
{
    blocked_t *b = p;
    int64_t t0 = adag__now_ns();
    if (b->acquire) {
        void *buf;
        b->st = rig_acquire(b->ch, b->seq, b->deadline, &buf);
    } else {
        adag_slot_view_t v;
        b->st = rig_wait(b->ch, b->seq, b->deadline, &v);
    }
    b->ms = ms_since(t0);
    atomic_fetch_add(b->done, 1);
    return NULL;
}

void blocked_start(blocked_t *b, adag_chan_t *ch, int acquire, uint64_t seq, int64_t deadline,
                   _Atomic int *done)
{
    *b = (blocked_t){.ch = ch, .acquire = acquire, .seq = seq, .deadline = deadline,
                     .done = done, .st = ADAG_ERR_INTERNAL};
    cr_assert_eq(pthread_create(&b->th, NULL, blocked_main, b), 0);
}

void blocked_join(blocked_t *b)
{
    cr_assert_eq(pthread_join(b->th, NULL), 0);
}
