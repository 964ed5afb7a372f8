/* The "local" channel: the value is produced and consumed by the same actor
 * within one iteration of its loop, so one private buffer suffices and no
 * synchronization is needed. */
#include "common/error.h"
#include "transport/channel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static adag_status_t local_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf)
{
    (void)seq;
    (void)deadline;
    *buf = ch->u.local.buf;
    return ADAG_OK;
}

static void local_publish(adag_chan_t *ch, uint64_t seq, size_t size, adag_status_t status,
                          const char *err)
{
    (void)seq;
    ch->u.local.size = size <= ch->capacity ? size : 0;
    ch->u.local.status = status;
    ch->u.local.err[0] = '\0';
    if (status != ADAG_OK && err)
        snprintf(ch->u.local.err, sizeof(ch->u.local.err), "%s", err);
}

static adag_status_t local_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                                adag_slot_view_t *view)
{
    (void)seq;
    (void)deadline;
    view->data = ch->u.local.buf;
    view->size = ch->u.local.size;
    view->status = ch->u.local.status;
    view->err = ch->u.local.err;
    view->err_len = strlen(ch->u.local.err);
    return ADAG_OK;
}

static void local_release(adag_chan_t *ch, uint64_t seq)
{
    (void)ch;
    (void)seq;
}

static int local_ready(adag_chan_t *ch, uint64_t seq)
{
    (void)ch;
    (void)seq;
    return 1;
}

static const adag_chan_ops_t local_ops = {
    .name = "local",
    .acquire = local_acquire,
    .publish = local_publish,
    .wait = local_wait,
    .release = local_release,
    .ready = local_ready,
};

adag_status_t adag_local_chan_open(adag_chan_t *ch, size_t capacity)
{
    memset(ch, 0, sizeof(*ch));
    ch->ops = &local_ops;
    ch->kind = ADAG_CHAN_LOCAL;
    ch->capacity = capacity;
    ch->nslots = 1;
    ch->reader = -1;
    ch->u.local.buf = malloc(capacity ? capacity : 1);
    if (!ch->u.local.buf)
        return adag_error(ADAG_ERR_NO_MEMORY, "local channel: cannot allocate %zu bytes",
                          capacity);
    return ADAG_OK;
}

void adag_local_chan_close(adag_chan_t *ch)
{
    if (ch->kind == ADAG_CHAN_LOCAL) {
        free(ch->u.local.buf);
        ch->u.local.buf = NULL;
    }
}

const char *adag_chan_kind_name(adag_chan_kind_t kind)
{
    switch (kind) {
    case ADAG_CHAN_LOCAL: return "local";
    case ADAG_CHAN_SHM: return "shm";
    }
    return "?";
}
