/*
 * The host communicator's maps of its peers' buffers (comm_host_seg.h,
 * "peer maps"), for the collectives that read them in place
 * (gpu/comm_host_coll.c, "direct").
 *
 * A peer names a buffer by the memfd that holds it and an offset
 * (gpu/memfd_handle.h). Mapping a memfd costs an open through /proc, an
 * mmap and the page-table entries of every page touched, so a rank keeps
 * up to ADAG_COMM_HOST_PEER_MAPS mappings per peer, keyed by the memfd's
 * identity (pid, device, inode): a DAG or a training loop reuses its
 * buffers, and after the first call every lookup is a hit.
 *
 * A mapping keeps its memfd's pages alive after the owner frees them, so
 * a miss first drops the entries whose owner no longer holds that memfd
 * (its /proc fd link names another file or none), then the least recently
 * used one if the peer's entries are all taken. What a freed buffer keeps
 * is therefore bounded by the entries, and returned at the next miss or
 * when the communicator goes.
 *
 * Only the collective that holds the rank's turn uses the maps (one at a
 * time: the turn is passed with seq_cst stores and loads, which order one
 * collective's use before the next's); the last reference unmaps them.
 */
#include "common/error.h"
#include "common/fd.h"
#include "gpu/comm_host_seg.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int same_memfd(const adag_memfd_ref_t *a, const adag_memfd_ref_t *b)
{
    return a->pid == b->pid && a->dev == b->dev && a->ino == b->ino;
}

static void drop(peer_map_t *m)
{
    if (m->base)
        munmap(m->base, m->size);
    memset(m, 0, sizeof(*m));
}

/* Whether the owner still holds the memfd m maps, under the fd it named. */
static int owner_holds(const peer_map_t *m)
{
    char path[64];
    struct stat sb;
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", m->ref.pid, m->ref.fd);
    return stat(path, &sb) == 0 && (uint64_t)sb.st_dev == m->ref.dev &&
           (uint64_t)sb.st_ino == m->ref.ino;
}

unsigned char *adag__comm_host_peer_bytes(host_comm_t *c, unsigned rank,
                                         const adag_memfd_ref_t *ref, uint64_t off, uint64_t len)
{
    peer_map_t *maps = c->peer_maps[rank];
    peer_map_t *slot = NULL;
    uint64_t end = off + len;
    char who[80];
    if (end < off || ref->size > SIZE_MAX / 2 || end > ref->size) {
        adag__error(ADAG_ERR_PROTOCOL, "%s: rank %u named bytes [%llu, %llu) of a memfd of %llu",
                   c->who, rank, (unsigned long long)off, (unsigned long long)end,
                   (unsigned long long)ref->size);
        return NULL;
    }
    c->peer_clock++;
    for (unsigned i = 0; i < ADAG_COMM_HOST_PEER_MAPS; i++)
        if (maps[i].base && same_memfd(&maps[i].ref, ref) && end <= maps[i].size) {
            maps[i].used = c->peer_clock;
            return (unsigned char *)maps[i].base + off;
        }
    /* a miss: drop what is stale, then take a free entry or the oldest */
    for (unsigned i = 0; i < ADAG_COMM_HOST_PEER_MAPS; i++) {
        if (maps[i].base && (same_memfd(&maps[i].ref, ref) || !owner_holds(&maps[i])))
            drop(&maps[i]);
        if (!maps[i].base && !slot)
            slot = &maps[i];
    }
    if (!slot) {
        slot = &maps[0];
        for (unsigned i = 1; i < ADAG_COMM_HOST_PEER_MAPS; i++)
            if (maps[i].used < slot->used)
                slot = &maps[i];
        drop(slot);
    }
    adag_status_t st;
    snprintf(who, sizeof(who), "%s, reading rank %u's buffer", c->who, rank);
    int fd = adag__memfd_ref_open(ref, end, who, "memory", &st);
    if (fd < 0)
        return NULL;
    size_t size = (size_t)ref->size;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the memfd */
    if (p == MAP_FAILED) {
        adag__error_errno(errno, "%s: mapping %zu bytes", who, size);
        return NULL;
    }
    *slot = (peer_map_t){*ref, p, size, c->peer_clock};
    return (unsigned char *)p + off;
}

void adag__comm_host_peer_maps_release(host_comm_t *c)
{
    for (unsigned r = 0; r < ADAG_COMM_MAX_RANKS; r++)
        for (unsigned i = 0; i < ADAG_COMM_HOST_PEER_MAPS; i++)
            drop(&c->peer_maps[r][i]);
}

unsigned adag__comm_host_peer_maps_live(const adag_comm_t *base)
{
    const host_comm_t *c = (const host_comm_t *)base;
    unsigned n = 0;
    for (unsigned r = 0; r < ADAG_COMM_MAX_RANKS; r++)
        for (unsigned i = 0; i < ADAG_COMM_HOST_PEER_MAPS; i++)
            n += c->peer_maps[r][i].base != NULL;
    return n;
}
