#include "transport/shm_ring.h"

#include "common/error.h"
#include "common/event.h"
#include "common/fd.h"

#include <errno.h>
#include <stdalign.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHAN_MAGIC 0x6164616763683031ull /* "adagch01" */
#define CURSOR_STRIDE 64
#define SLOT_HDR_SIZE 512

struct adag_shm_chan_hdr {
    /* written by the writer, read by readers */
    alignas(64) _Atomic uint64_t written; /* seqs published */
    adag_event_t data_ev;                 /* readers sleep here */
    /* written by readers, read by the writer */
    alignas(64) adag_event_t space_ev;    /* the writer sleeps here */
    /* geometry, set once at init */
    alignas(64) uint64_t magic;
    uint32_t nslots;
    uint32_t nreaders;
    uint64_t capacity;
    uint64_t stride; /* bytes per slot, header included */
};

typedef struct {
    uint64_t seq;
    uint64_t size;
    int32_t status;
    uint32_t err_len;
    char err[ADAG_SLOT_ERR_MAX];
} slot_hdr_t;

_Static_assert(sizeof(slot_hdr_t) <= SLOT_HDR_SIZE, "slot header too large");
_Static_assert(sizeof(struct adag_shm_chan_hdr) % 64 == 0, "header not cache aligned");

static size_t round64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

static size_t slot_stride(size_t capacity)
{
    return SLOT_HDR_SIZE + round64(capacity);
}

size_t adag_shm_chan_size(unsigned nslots, unsigned nreaders, size_t capacity)
{
    /* Saturates at SIZE_MAX instead of wrapping: the geometry may come from a
     * peer's program, and a wrapped size would pass "fits in the segment". */
    size_t fixed = sizeof(struct adag_shm_chan_hdr) + (size_t)nreaders * CURSOR_STRIDE;
    if (capacity > SIZE_MAX - SLOT_HDR_SIZE - 63)
        return SIZE_MAX;
    size_t stride = slot_stride(capacity);
    if (nslots && stride > (SIZE_MAX - fixed) / nslots)
        return SIZE_MAX;
    return fixed + (size_t)nslots * stride;
}

static _Atomic uint64_t *cursor(struct adag_shm_chan_hdr *hdr, unsigned reader)
{
    return (_Atomic uint64_t *)((char *)(hdr + 1) + (size_t)reader * CURSOR_STRIDE);
}

static slot_hdr_t *slot_of(adag_chan_t *ch, uint64_t seq)
{
    return (slot_hdr_t *)(ch->u.shm.slots + (seq % ch->nslots) * ch->u.shm.hdr->stride);
}

void adag_shm_chan_init(void *base, unsigned nslots, unsigned nreaders, size_t capacity)
{
    struct adag_shm_chan_hdr *hdr = base;
    hdr->magic = CHAN_MAGIC;
    hdr->nslots = nslots;
    hdr->nreaders = nreaders;
    hdr->capacity = capacity;
    hdr->stride = slot_stride(capacity);
    atomic_store_explicit(&hdr->written, 0, memory_order_relaxed);
    for (unsigned r = 0; r < nreaders; r++)
        atomic_store_explicit(cursor(hdr, r), 0, memory_order_relaxed);
}

void adag_shm_chan_wake_all(void *base)
{
    struct adag_shm_chan_hdr *hdr = base;
    adag_event_notify(&hdr->data_ev);
    adag_event_notify(&hdr->space_ev);
}

/* ---- writer ---- */

typedef struct {
    struct adag_shm_chan_hdr *hdr;
    uint64_t need; /* every reader must have released at least this many */
} space_arg_t;

static int space_ready(const void *p)
{
    const space_arg_t *a = p;
    for (uint32_t r = 0; r < a->hdr->nreaders; r++)
        if (atomic_load_explicit(cursor(a->hdr, r), memory_order_seq_cst) < a->need)
            return 0;
    return 1;
}

static adag_status_t shm_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf)
{
    struct adag_shm_chan_hdr *hdr = ch->u.shm.hdr;
    space_arg_t arg = {hdr, seq >= ch->nslots ? seq - ch->nslots + 1 : 0};
    adag_status_t st =
        adag_event_wait(&hdr->space_ev, space_ready, &arg, ch->abort, deadline, &ch->spin);
    if (st != ADAG_OK)
        return st;
    *buf = (char *)slot_of(ch, seq) + SLOT_HDR_SIZE;
    return ADAG_OK;
}

static void shm_publish(adag_chan_t *ch, uint64_t seq, size_t size, adag_status_t status,
                        const char *err)
{
    struct adag_shm_chan_hdr *hdr = ch->u.shm.hdr;
    slot_hdr_t *slot = slot_of(ch, seq);
    slot->seq = seq;
    slot->size = size <= ch->capacity ? size : 0;
    slot->status = status;
    size_t n = status != ADAG_OK && err ? strnlen(err, ADAG_SLOT_ERR_MAX - 1) : 0;
    if (n)
        memcpy(slot->err, err, n);
    slot->err[n] = '\0';
    slot->err_len = (uint32_t)n;
    /* seq_cst (a release, and part of the event handshake): the slot's contents
     * happen-before any reader's load of written */
    atomic_store_explicit(&hdr->written, seq + 1, memory_order_seq_cst);
    adag_event_notify(&hdr->data_ev);
}

/* ---- reader ---- */

typedef struct {
    struct adag_shm_chan_hdr *hdr;
    uint64_t seq;
} data_arg_t;

static int data_ready(const void *p)
{
    const data_arg_t *a = p;
    return atomic_load_explicit(&a->hdr->written, memory_order_seq_cst) > a->seq;
}

static adag_status_t shm_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                              adag_slot_view_t *view)
{
    struct adag_shm_chan_hdr *hdr = ch->u.shm.hdr;
    data_arg_t arg = {hdr, seq};
    adag_status_t st =
        adag_event_wait(&hdr->data_ev, data_ready, &arg, ch->abort, deadline, &ch->spin);
    if (st != ADAG_OK)
        return st;
    slot_hdr_t *slot = slot_of(ch, seq);
    if (slot->seq != seq || slot->size > ch->capacity || slot->err_len >= ADAG_SLOT_ERR_MAX)
        return adag_error(ADAG_ERR_PROTOCOL,
                          "shm channel: slot for execution %llu holds execution %llu "
                          "(size %llu of %zu)",
                          (unsigned long long)seq, (unsigned long long)slot->seq,
                          (unsigned long long)slot->size, ch->capacity);
    view->data = (char *)slot + SLOT_HDR_SIZE;
    view->size = slot->size;
    view->status = slot->status;
    view->err = slot->err; /* terminated by the writer; readers never write a slot */
    view->err_len = slot->err_len;
    return ADAG_OK;
}

static void shm_release(adag_chan_t *ch, uint64_t seq)
{
    struct adag_shm_chan_hdr *hdr = ch->u.shm.hdr;
    /* seq_cst (a release, and part of the event handshake): our reads of the
     * slot happen-before the writer refills it */
    atomic_store_explicit(cursor(hdr, (unsigned)ch->reader), seq + 1, memory_order_seq_cst);
    adag_event_notify(&hdr->space_ev);
}

static int shm_ready(adag_chan_t *ch, uint64_t seq)
{
    return atomic_load_explicit(&ch->u.shm.hdr->written, memory_order_seq_cst) > seq;
}

static const adag_chan_ops_t shm_ops = {
    .name = "shm",
    .acquire = shm_acquire,
    .publish = shm_publish,
    .wait = shm_wait,
    .release = shm_release,
    .ready = shm_ready,
};

adag_status_t adag_shm_chan_open(adag_chan_t *ch, void *base, size_t avail, int reader,
                                 unsigned nslots, unsigned nreaders, size_t capacity,
                                 const _Atomic uint32_t *abort, adag_wait_policy_t policy)
{
    struct adag_shm_chan_hdr *hdr = base;
    if (((uintptr_t)base & 63) || avail < adag_shm_chan_size(nslots, nreaders, capacity) ||
        hdr->magic != CHAN_MAGIC || hdr->nslots != nslots || hdr->nreaders != nreaders ||
        hdr->capacity != capacity || nslots == 0 || reader >= (int)nreaders || reader < -1)
        return adag_error(ADAG_ERR_PROTOCOL,
                          "shm channel: header does not match its geometry "
                          "(%u slots, %u readers, %zu bytes, reader %d)",
                          nslots, nreaders, capacity, reader);
    memset(ch, 0, sizeof(*ch));
    ch->ops = &shm_ops;
    ch->kind = ADAG_CHAN_SHM;
    ch->capacity = capacity;
    ch->nslots = nslots;
    ch->reader = reader;
    ch->abort = abort;
    adag_spin_init(&ch->spin, policy);
    ch->u.shm.hdr = hdr;
    ch->u.shm.slots = (char *)(hdr + 1) + (size_t)nreaders * CURSOR_STRIDE;
    return ADAG_OK;
}

/* ---- segments ---- */

adag_status_t adag_shm_segment_create(adag_shm_segment_t *seg, const char *name, size_t size)
{
    long page = sysconf(_SC_PAGESIZE);
    size = (size + (size_t)page - 1) & ~((size_t)page - 1);
    seg->fd = adag_fd_above_stdio(memfd_create(name, MFD_CLOEXEC));
    if (seg->fd < 0)
        return adag_error_errno(errno, "memfd_create(%s)", name);
    if (ftruncate(seg->fd, (off_t)size) != 0) {
        adag_status_t st = adag_error_errno(errno, "ftruncate(%s, %zu)", name, size);
        close(seg->fd);
        seg->fd = -1;
        return st;
    }
    seg->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
    if (seg->base == MAP_FAILED) {
        adag_status_t st = adag_error_errno(errno, "mmap(%s, %zu)", name, size);
        close(seg->fd);
        seg->fd = -1;
        seg->base = NULL;
        return st;
    }
    seg->size = size;
    return ADAG_OK;
}

adag_status_t adag_shm_segment_map(adag_shm_segment_t *seg, int fd, size_t size)
{
    struct stat sb;
    seg->fd = fd;
    seg->base = NULL;
    seg->size = 0;
    if (fstat(fd, &sb) != 0) {
        adag_status_t st = adag_error_errno(errno, "fstat(segment fd %d)", fd);
        close(fd);
        return st;
    }
    if ((uint64_t)sb.st_size != size) {
        close(fd);
        return adag_error(ADAG_ERR_PROTOCOL, "segment is %lld bytes, expected %zu",
                          (long long)sb.st_size, size);
    }
    seg->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (seg->base == MAP_FAILED) {
        adag_status_t st = adag_error_errno(errno, "mmap(segment, %zu)", size);
        seg->base = NULL;
        close(fd);
        return st;
    }
    seg->size = size;
    return ADAG_OK;
}

void adag_shm_segment_destroy(adag_shm_segment_t *seg)
{
    if (seg->base)
        munmap(seg->base, seg->size);
    if (seg->fd >= 0)
        close(seg->fd);
    seg->base = NULL;
    seg->fd = -1;
    seg->size = 0;
}
