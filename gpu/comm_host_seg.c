/*
 * The host communicator's segment (gpu/comm_host.c describes it; the types
 * are in gpu/comm_host_seg.h): its layout (the header, the rank areas'
 * mailboxes and rings, the collective area and its slots), the error
 * record and abort word every rank's waits give up on, and a rank's
 * references. The communicator's send and recv (gpu/comm_host.c) and its
 * collectives (gpu/comm_host_coll.c) both build on this file; it calls
 * neither. Memory ordering: the error record's and the abort word's, in
 * gpu/comm_host.c's comment ("error_code", "abort").
 */
#include "gpu/comm_host_seg.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/event.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

/* ---- the layout ---- */

/* 4 chunks per ring: the sender fills the next chunks while the receiver
 * copies one, with slack for stream threads that are scheduled late. A
 * 256 KiB chunk makes the per-chunk cost (a counter store and, if the peer
 * sleeps, a futex wake of a few us) small next to its copy (tens of us),
 * and keeps a pair's ring at 1 MiB. All rings of a communicator together
 * stay under 64 MiB: past 8 ranks (56 pairs) the chunk halves as needed,
 * down to 4 KiB at 64 ranks. Pages are touched only by pairs that talk. */
#define CHUNK_MAX ADAG_COMM_HOST_CHUNK_MAX
#define CHUNK_MIN ((uint64_t)4 << 10)
#define RINGS_BUDGET ((uint64_t)64 << 20)

#define SEG_MAGIC 0x67736461u /* "adsg" */

uint64_t adag__comm_host_chunk_bytes(unsigned nranks)
{
    uint64_t pairs = (uint64_t)nranks * (nranks > 0 ? nranks - 1 : 0);
    uint64_t chunk = CHUNK_MAX;
    while (chunk > CHUNK_MIN && pairs * ADAG_COMM_HOST_RING_CHUNKS * chunk > RINGS_BUDGET)
        chunk /= 2;
    return chunk;
}

/* Staging slots: 1 MiB up to 8 ranks, halved so all slots stay under
 * 48 MiB, at least 64 KiB (gpu/comm_host_coll.c says how they are used). */
#define SLOT_MAX ((uint64_t)1 << 20)
#define SLOT_MIN ((uint64_t)64 << 10)
#define SLOTS_BUDGET ((uint64_t)48 << 20)

uint64_t adag__comm_host_slot_bytes(unsigned nranks)
{
    uint64_t slot = SLOT_MAX;
    while (slot > SLOT_MIN &&
           (uint64_t)nranks * ADAG_COMM_HOST_COLL_SLOTS * slot > SLOTS_BUDGET)
        slot /= 2;
    return slot;
}

uint64_t adag__comm_host_coll_ctl_bytes(unsigned nranks)
{
    uint64_t page = ADAG_COMM_HOST_PAGE;
    return ((uint64_t)nranks * sizeof(coll_rank_t) + page - 1) / page * page;
}

coll_rank_t *adag__comm_host_coll_rank(const seg_t *g, unsigned rank)
{
    return (coll_rank_t *)((char *)g->h + g->coll_offset) + rank;
}

void adag__comm_host_seg_layout(unsigned n, seg_header_t *g)
{
    const uint64_t page = ADAG_COMM_HOST_PAGE;
    g->magic = SEG_MAGIC;
    g->version = ADAG_COMM_HOST_VERSION;
    g->nranks = n;
    g->ring_chunks = ADAG_COMM_HOST_RING_CHUNKS;
    g->chunk_bytes = adag__comm_host_chunk_bytes(n);
    g->boxes_bytes = ((uint64_t)(n - 1) * sizeof(mailbox_t) + page - 1) / page * page;
    g->area_bytes =
        g->boxes_bytes + (uint64_t)(n - 1) * ADAG_COMM_HOST_RING_CHUNKS * g->chunk_bytes;
    g->coll_offset = ADAG_COMM_HOST_HEADER_BYTES + (uint64_t)n * g->area_bytes;
    g->slot_bytes = adag__comm_host_slot_bytes(n);
    g->size = g->coll_offset + adag__comm_host_coll_ctl_bytes(n) +
              (uint64_t)n * ADAG_COMM_HOST_COLL_SLOTS * g->slot_bytes;
}

/* ---- the communicator's state: abort and the error record ---- */

static void wake_everyone(const seg_t *g)
{
    adag__event_notify(&g->h->join_wake);
    adag__event_notify(&g->h->coll_wake);
    for (unsigned r = 0; r < g->nranks; r++)
        adag__event_notify(&adag__comm_host_coll_rank(g, r)->turn_wake);
    for (unsigned dst = 0; dst < g->nranks; dst++)
        for (unsigned src = 0; src < g->nranks; src++) {
            if (src == dst)
                continue;
            mailbox_t *mb = adag__comm_host_mailbox(g, src, dst);
            adag__event_notify(&mb->recv_wake);
            adag__event_notify(&mb->send_wake);
        }
}

void adag__comm_host_fail(const seg_t *g, adag_status_t code, const char *fmt, ...)
{
    seg_header_t *h = g->h;
    int32_t none = 0;
    if (atomic_compare_exchange_strong_explicit(&h->error_code, &none, (int32_t)code,
                                                memory_order_seq_cst, memory_order_seq_cst)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(h->error_text, sizeof(h->error_text), fmt, ap);
        va_end(ap);
        atomic_store_explicit(&h->error_ready, 1, memory_order_release);
        adag__futex_wake_all(&h->error_ready);
    } else {
        /* Another failure claimed the record (two ranks often detect one
         * mismatch together): wait until its text is complete before abort
         * is stored, so that a rank which sees abort (its stream drained)
         * reads the whole text: error_ready's release store, this acquire
         * load, then the seq_cst abort store chain happens-before. The
         * writer only formats; the bound covers one killed in between. */
        int64_t deadline = adag__deadline_ms(1000);
        while (!atomic_load_explicit(&h->error_ready, memory_order_acquire) &&
               adag__now_ns() < deadline)
            adag__futex_wait(&h->error_ready, 0, deadline);
    }
    atomic_store_explicit(&h->abort, 1, memory_order_seq_cst);
    wake_everyone(g);
}

adag_status_t adag__comm_host_seg_status(seg_header_t *h, const char *who)
{
    int32_t code = atomic_load_explicit(&h->error_code, memory_order_seq_cst);
    if (code == 0)
        return ADAG_OK;
    if (!atomic_load_explicit(&h->error_ready, memory_order_acquire))
        return adag__error((adag_status_t)code, "%s: broken (%s; its message is being written)",
                          who, adag__status_name((adag_status_t)code));
    return adag__error((adag_status_t)code, "%s: %.*s", who, (int)sizeof(h->error_text),
                      h->error_text);
}

/* ---- a rank's references ---- */

_Atomic uint64_t adag__comm_host_live_comms;

/* Drops a reference; the last frees. acq_rel: every use of the
 * communicator by a dropper happens-before the unmap. */
void adag__comm_host_unref(host_comm_t *c)
{
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    adag__comm_host_peer_maps_release(c);
    munmap(c->seg.h, c->seg.size);
    pthread_mutex_destroy(&c->enqueue_lock);
    free(c);
    atomic_fetch_sub(&adag__comm_host_live_comms, 1);
}
