/* The "self" channel: the value is produced and consumed by the same actor
 * within one iteration of its loop, so one private buffer suffices and no
 * synchronization is needed. No domain, nothing to connect. */
#include "common/error.h"
#include "transport/channel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const adag_chan_ops_t adag_chan_self_ops;

typedef struct {
    adag_chan_t base;
    void *buf;
    size_t size;
    adag_status_t status;
    adag_tensor_meta_t meta;
    uint64_t published; /* seqs published: ready(seq) is published > seq */
    char err[ADAG_SLOT_ERR_MAX];
} self_chan_t;

static self_chan_t *self_of(adag_chan_t *ch)
{
    return (self_chan_t *)ch;
}

static adag_status_t self_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf)
{
    (void)seq;
    (void)deadline;
    *buf = self_of(ch)->buf;
    return ADAG_OK;
}

static adag_status_t self_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                                  const adag_tensor_meta_t *meta, adag_status_t status,
                                  const char *err)
{
    self_chan_t *s = self_of(ch);
    adag_status_t st = adag__chan_publish_fits(ch, seq, size, status);
    if (st != ADAG_OK)
        return st;
    s->published = seq + 1;
    s->size = status == ADAG_OK ? size : 0;
    adag__tensor_meta_store(&s->meta, status == ADAG_OK ? meta : NULL);
    s->status = status;
    s->err[0] = '\0';
    if (status != ADAG_OK && err)
        snprintf(s->err, sizeof(s->err), "%s", err);
    return ADAG_OK;
}

static adag_status_t self_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                               adag_slot_view_t *view)
{
    self_chan_t *s = self_of(ch);
    (void)seq;
    (void)deadline;
    view->data = s->buf;
    view->size = s->size;
    adag__tensor_meta_load(&view->meta, &s->meta);
    view->device = ADAG_DEVICE_HOST;
    view->status = s->status;
    view->err = s->err;
    view->err_len = strlen(s->err);
    return ADAG_OK;
}

static void self_release(adag_chan_t *ch, uint64_t seq)
{
    (void)ch;
    (void)seq;
}

static int self_ready(adag_chan_t *ch, uint64_t seq)
{
    return self_of(ch)->published > seq;
}

static void self_wake_all(adag_chan_t *ch)
{
    (void)ch; /* nobody ever waits on it */
}

static adag_status_t self_open(adag_chan_domain_t *d, const adag_chan_open_params_t *p,
                               adag_wbuf_t *peer_info, adag_chan_t **out)
{
    (void)d;
    (void)peer_info;
    if (p->reader != -1 || p->geom.nreaders != 0 || p->desc.len != 0)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "self channel %s: only its writer may open it (reader %d of %u, "
                          "descriptor of %zu bytes)",
                          p->name, p->reader, p->geom.nreaders, p->desc.len);
    self_chan_t *s = calloc(1, sizeof(*s));
    if (!s || !(s->buf = malloc(p->geom.capacity ? p->geom.capacity : 1))) {
        free(s);
        return adag__error(ADAG_ERR_NO_MEMORY, "self channel %s: cannot allocate %zu bytes",
                          p->name, p->geom.capacity);
    }
    adag__chan_init_common(&s->base, &adag_chan_self_ops, p);
    s->base.nslots = 1;
    *out = &s->base;
    return ADAG_OK;
}

static void self_close(adag_chan_t *ch)
{
    if (!ch)
        return;
    free(self_of(ch)->buf);
    free(ch);
}

static void self_memory(const adag_chan_geom_t *g, const adag_chan_place_t *places, size_t *host,
                        size_t *device)
{
    (void)places;
    *host = g->capacity ? g->capacity : 1; /* one buffer, the writer's */
    *device = 0;
}

/* One actor that reads only what it wrote, in host memory. */
static adag_chan_cost_t self_query(const adag_chan_edge_t *e, char *why, size_t why_len)
{
    if (e->nreaders || e->ends[0].actor < 0)
        snprintf(why, why_len, "%s", e->nreaders ? "other endpoints than its writer read it"
                                                 : "its writer is the driver");
    else if (adag__chan_edge_device(e))
        snprintf(why, why_len, "its value is in device memory");
    else
        return ADAG_CHAN_COST_PROCESS;
    return ADAG_CHAN_CANNOT;
}

const adag_chan_ops_t adag_chan_self_ops = {
    .name = "self",
    .query = self_query,
    .one_slot = 1,
    .memory = self_memory,
    .open = self_open,
    .close = self_close,
    .wake_all = self_wake_all,
    .acquire = self_acquire,
    .publish = self_publish,
    .wait = self_wait,
    .release = self_release,
    .ready = self_ready,
};
