/*
 * Hand-offs by value ops (gpu/device.h, adag_dev_word_t): a device writer
 * and its device readers in other processes order their streams on words
 * of the channel's ring instead of IPC events, so a stream waits for a
 * peer's stream on the device alone (CUDA: cuStreamWaitValue64 polling a
 * word that the peer's cuStreamWriteValue64 stores) rather than through
 * an imported event.
 *
 * The words are cells of the shm ring (transport/chan_shm.h,
 * adag__shm_chan_word), so every process of the channel maps them:
 *
 *   the writer's word  seq + 1 of the latest value, stored by the writer's
 *                      compute stream after the method's work on it
 *                      (publish, an OK value); a reader's stream waits for
 *                      seq + 1 before it reads slot seq % nslots;
 *   reader r's word    seq + 1 once its streams are done with the writer's
 *                      slot of seq (zero copy: its compute stream at
 *                      release; peer copy: its communication stream after
 *                      the copy, or at the failed or skipped execution's
 *                      wait or release); the writer's compute stream waits
 *                      for seq - nslots + 1 before it writes slot seq again
 *                      (the credit).
 *
 * Both are monotonic: each endpoint stores increasing values in one
 * stream's order (done_max). Every wait is for a value whose store was
 * enqueued before the wait was (the ring's publish and release order them
 * on the host), so a wait only blocks while the storing stream has not got
 * there: a stuck or dead peer. wake_all then stores ADAG_DEV_WORD_ABORT
 * into every word of the channel, which releases every wait in every
 * process (the words are shared); what the released streams read of the
 * peer is undefined, as with event_abandon, and the ring publishes nothing
 * more (the abort word).
 *
 * A pair (the writer, a device reader) uses words when both endpoints can
 * (their devices run value ops, ADAG_DEVICE_MEMOPS is 1 and their ring is
 * registered with their device for this process): each endpoint says so
 * in its peer info (a u32 before its handles) and decides at connect; a
 * pair that cannot uses the IPC events as before, which both sides still
 * export. Communicator and host-copy roles never use words.
 */
#include "common/error.h"
#include "common/log.h"
#include "transport/chan_dev.h"
#include "transport/chan_shm.h"

#include <stdlib.h>

adag_status_t adag__chan_dev_words_open(dev_chan_t *c, adag_wbuf_t *peer_info)
{
    char why[160] = "";
    const adag_device_ops_t *ops = c->ops;
    int can = c->device->dev->tuning.memops && ops->values_supported &&
              ops->values_supported(c->device->dev, why, sizeof(why));
    if (can && !c->pin && adag__chan_dev_pin(c) != ADAG_OK) {
        ADAG_LOG_WARN("%s: hand-offs by IPC events", adag_last_error());
        can = 0;
    }
    if (can && c->role != ROLE_DEV_WRITER) {
        /* the reader's own word, which its streams store */
        unsigned r = (unsigned)c->base.reader;
        if (!(c->done_words = calloc(1, sizeof(*c->done_words))))
            return adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory",
                              c->base.name);
        adag_status_t st = ops->word_map(c->device->dev, adag__shm_chan_word(c->ring, (int)r),
                                         &c->done_words[0]);
        if (st != ADAG_OK) {
            adag__error_prefix("device channel %s: reader %u's word", c->base.name, r);
            return st;
        }
    }
    c->memops = can;
    if (can) {
        unsigned n = c->base.nslots;
        if (!(c->ahead = calloc(n, sizeof(*c->ahead))) ||
            !(c->ahead_size = calloc(n, sizeof(*c->ahead_size))))
            return adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory",
                              c->base.name);
    }
    adag__wbuf_u32(peer_info, (uint32_t)can);
    return ADAG_OK;
}

adag_status_t adag__chan_dev_words_connect(dev_chan_t *c, adag_rbuf_t *rb, unsigned r)
{
    int peer = (int)adag__rbuf_u32(rb);
    if (rb->failed || peer > 1)
        return adag__error(ADAG_ERR_PROTOCOL, "device channel %s: %s info is malformed",
                          c->base.name, c->role == ROLE_DEV_WRITER ? "a reader's" : "the writer's");
    if (!c->memops || !peer)
        return ADAG_OK;
    adag_status_t st;
    if (c->role != ROLE_DEV_WRITER) {
        if ((st = c->ops->word_map(c->device->dev, adag__shm_chan_word(c->ring, -1),
                                   &c->ready_word)) != ADAG_OK)
            goto fail;
        c->ready_by_word = 1;
        return ADAG_OK;
    }
    if (!c->done_words &&
        !(c->done_words = calloc(c->nplaces - 1, sizeof(*c->done_words))))
        return adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory",
                          c->base.name);
    if ((st = c->ops->word_map(c->device->dev, adag__shm_chan_word(c->ring, (int)r),
                               &c->done_words[r])) != ADAG_OK)
        goto fail;
    if (!c->ready_by_word &&
        (st = c->ops->word_map(c->device->dev, adag__shm_chan_word(c->ring, -1),
                               &c->ready_word)) != ADAG_OK)
        goto fail;
    c->ready_by_word = 1;
    return ADAG_OK;
fail:
    adag__error_prefix("device channel %s: the ring's words", c->base.name);
    return st;
}

adag_status_t adag__chan_dev_word_done(dev_chan_t *c, adag_dev_stream_t *s, uint64_t seq)
{
    if (seq + 1 <= c->done_max)
        return ADAG_OK;
    adag_status_t st = c->ops->stream_write_value64(s, &c->done_words[0], seq + 1);
    if (st == ADAG_OK)
        c->done_max = seq + 1;
    return st;
}

static void store_abort(dev_chan_t *c, int who)
{
    adag_dev_word_t w;
    if (c->ops->word_map(c->device->dev, adag__shm_chan_word(c->ring, who), &w) == ADAG_OK)
        c->ops->word_store(&w, ADAG_DEV_WORD_ABORT);
    else
        ADAG_LOG_WARN("%s", adag_last_error());
}

void adag__chan_dev_words_abort(dev_chan_t *c)
{
    if (!c->memops)
        return;
    /* every word of the channel, whoever stores it normally: the ring is
     * shared, so this releases the waits of every process */
    store_abort(c, -1);
    for (unsigned r = 0; r + 1 < c->nplaces; r++)
        store_abort(c, (int)r);
}
