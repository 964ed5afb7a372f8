/*
 * The device channel by communicator (ADAG_TRANSPORT_COMM): the writer
 * sends its slot to every device reader with the communicator's send, each
 * reader receives into its own slot (transport/chan_dev.h, "A channel whose
 * geometry names a communicator"). Here: the places such a channel may
 * have, finding the communicator at connect, the sends, the recv, and what
 * the watchdog calls them.
 */
#include "common/error.h"
#include "transport/chan_dev.h"

#include <stdio.h>
#include <string.h>

int adag__chan_dev_comm_places_ok(const adag_chan_place_t *pl, unsigned nplaces, char *why,
                                 size_t len)
{
    if (!pl || !nplaces || !is_dev(pl[0])) {
        snprintf(why, len, "its writer is not on a device");
        return 0;
    }
    for (unsigned i = 0; i < nplaces; i++) {
        if (!is_dev(pl[i]))
            continue;
        const char *who = pl[i].who ? pl[i].who : "?";
        if (pl[i].comm_rank >= ADAG_COMM_MAX_RANKS) {
            snprintf(why, len, "%s %s has communicator rank %u (at most %d ranks)",
                     i ? "reader" : "writer", who, pl[i].comm_rank, ADAG_COMM_MAX_RANKS);
            return 0;
        }
        for (unsigned j = 0; j < i; j++)
            if (is_dev(pl[j]) && pl[j].comm_rank == pl[i].comm_rank) {
                snprintf(why, len, "%s and %s both have communicator rank %u",
                         pl[j].who ? pl[j].who : "?", who, pl[i].comm_rank);
                return 0;
            }
    }
    return 1;
}

adag_status_t adag__chan_dev_comm_connect(dev_chan_t *c, unsigned me)
{
    const char *name = c->base.name;
    unsigned long long key = (unsigned long long)c->comm_key;
    const adag_chan_comm_t *e = NULL;
    for (unsigned i = 0; i < c->ncomms && !e; i++)
        if (c->comms[i].key == c->comm_key)
            e = &c->comms[i];
    if (!e || !e->comm)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "device channel %s: communicator %llu was not joined by this actor",
                          name, key);
    const adag_comm_t *comm = e->comm;
    adag_chan_place_t mine = c->places[me];
    if (!e->stream || !comm->dev || (int32_t)comm->dev->ops->kind != mine.kind ||
        comm->dev->index != mine.index)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "device channel %s: this actor's communicator %llu is not on its "
                          "device %s:%u with a stream",
                          name, key, adag_device_kind_name((uint32_t)mine.kind), mine.index);
    if (comm->rank != mine.comm_rank)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "device channel %s: this endpoint is rank %u of communicator %llu, "
                          "but its actor joined it as rank %u",
                          name, mine.comm_rank, key, comm->rank);
    for (unsigned i = 0; i < c->nplaces; i++)
        if (is_dev(c->places[i]) && c->places[i].comm_rank >= comm->nranks)
            return adag__error(ADAG_ERR_PROTOCOL,
                              "device channel %s: %s is rank %u of communicator %llu, which "
                              "has %u ranks",
                              name, c->who[i], c->places[i].comm_rank, key, comm->nranks);
    c->comm = e->comm;
    c->comm_stream = e->stream;
    c->comms = NULL; /* the table need not outlive connect */
    c->ncomms = 0;
    return ADAG_OK;
}

static adag_status_t comm_fail(dev_chan_t *c, adag_status_t st, const char *what, uint64_t seq)
{
    adag__error_prefix("device channel %s: %s for execution %llu", c->base.name, what,
                      (unsigned long long)seq);
    return st;
}

adag_status_t adag__chan_dev_comm_send(dev_chan_t *c, unsigned s, uint64_t seq, size_t size)
{
    const void *slot = (const char *)c->slots.ptr + (size_t)s * c->stride;
    adag_dev_stream_t *stream = c->comm_stream;
    adag_status_t st;
    watch_arm(c->send_watch, s, seq);
    if ((st = c->ops->stream_wait_event(stream, c->ready[s])) != ADAG_OK)
        return comm_fail(c, st, "ordering the sends after the value", seq);
    /* in reader order: each reader's recvs come in seq order, so the k-th
     * send to a reader meets its k-th recv */
    for (unsigned r = 1; r < c->nplaces; r++) {
        if (!is_dev(c->places[r]))
            continue;
        if ((st = c->comm->ops->send(c->comm, slot, size, c->places[r].comm_rank, stream)) !=
            ADAG_OK) {
            adag__error_prefix("device channel %s: the send to %s for execution %llu",
                              c->base.name, c->who[r], (unsigned long long)seq);
            return st;
        }
    }
    if ((st = c->ops->event_record(c->sent[s], stream)) != ADAG_OK)
        return comm_fail(c, st, "recording the sends", seq);
    return ADAG_OK;
}

adag_status_t adag__chan_dev_comm_recv(dev_chan_t *c, uint64_t seq, adag_slot_view_t *view)
{
    unsigned s = slot_index(c, seq);
    char *local = (char *)c->local.ptr + (size_t)s * c->stride;
    adag_status_t st;
    view->device = ADAG_DEVICE(c->device->kind, c->device->dev->index);
    view->data = local;
    if (!view->size)
        return ADAG_OK; /* nothing was sent */
    /* one recv per seq (received[] is the loop thread's): a second wait for
     * seq finds it enqueued and only orders the compute stream again */
    if (c->received[s] != seq + 1) {
        adag_dev_stream_t *stream = c->comm_stream;
        watch_arm(c->watch, s, seq);
        if ((st = c->ops->stream_wait_event(stream, c->local_free[s])) != ADAG_OK)
            return comm_fail(c, st, "ordering the recv after the previous use", seq);
        if ((st = c->comm->ops->recv(c->comm, local, view->size, c->places[0].comm_rank,
                                     stream)) != ADAG_OK) {
            adag__error_prefix("device channel %s: the recv from %s for execution %llu",
                              c->base.name, c->who[0], (unsigned long long)seq);
            return st;
        }
        c->received[s] = seq + 1;
        if ((st = c->ops->event_record(c->local_ready[s], stream)) != ADAG_OK)
            return comm_fail(c, st, "recording the recv", seq);
    }
    if ((st = c->ops->stream_wait_event(c->device->compute, c->local_ready[s])) != ADAG_OK)
        return comm_fail(c, st, "ordering the value after the recv", seq);
    return ADAG_OK;
}

void adag__chan_dev_comm_describe(const dev_chan_t *c, char *what, size_t len)
{
    size_t used;
    if (c->role != ROLE_DEV_WRITER) {
        snprintf(what, len, "the recv from %s (communicator rank %u)", c->who[0],
                 c->places[0].comm_rank);
        return;
    }
    used = (size_t)snprintf(what, len, "the send to ");
    for (unsigned r = 1, n = 0; r < c->nplaces && used < len; r++) {
        if (!is_dev(c->places[r]))
            continue;
        used += (size_t)snprintf(what + used, len - used, "%s%s (communicator rank %u)",
                                 n++ ? ", " : "", c->who[r], c->places[r].comm_rank);
    }
}
