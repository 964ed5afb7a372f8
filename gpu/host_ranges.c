/*
 * The emulated device's map of the host addresses it treats as device or
 * page-locked memory: what mem_alloc and mem_import mapped, what host_alloc
 * gave and what host_register locked. copy_async with any other host
 * address is a copy with *pageable* memory, which CUDA may run
 * synchronously (device to pageable host always is: cudaMemcpyAsync returns
 * once the stream reached the copy and did it); the emulated device makes every
 * such copy synchronous, so a path that forgot to lock its host memory
 * stalls here as it would on a GPU.
 *
 * One table per process (CUDA's registrations are per process too): a
 * sorted array of disjoint [lo, hi) ranges under a mutex, searched by
 * binary search on every copy. Registration and allocation are rare; the
 * lookup is on the copy path but takes an uncontended lock and O(log n).
 *
 * A range of device memory also keeps the memfd that holds it (its
 * gpu/memfd_handle.h name; an import keeps its owner's), so the host
 * communicator can name a buffer that its peers map and read in place
 * (adag__host_ranges_memfd).
 */
#include "common/error.h"
#include "gpu/host_impl.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uintptr_t lo, hi;
    adag_memfd_ref_t ref; /* magic 0: not in a memfd */
} range_t;

static struct {
    pthread_mutex_t lock;
    range_t *r;
    size_t n, cap;
} table = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The first range with hi > p (n if none); under the lock. */
static size_t first_above(uintptr_t p)
{
    size_t lo = 0, hi = table.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (table.r[mid].hi > p)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

adag_status_t adag__host_ranges_add(const void *ptr, size_t size, int fresh,
                                   const adag_memfd_ref_t *ref)
{
    uintptr_t lo = (uintptr_t)ptr, hi = lo + (size ? size : 1);
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&table.lock);
    size_t i = first_above(lo);
    /* memory the system just gave cannot be in use: what overlaps it was
     * left by an owner that never removed it (an endpoint leaked because
     * its stream never drained) and is gone */
    while (fresh && i < table.n && table.r[i].lo < hi) {
        memmove(&table.r[i], &table.r[i + 1], (table.n - i - 1) * sizeof(*table.r));
        table.n--;
    }
    if (i < table.n && table.r[i].lo < hi) {
        st = adag__error(ADAG_ERR_INVALID,
                        "emulated device: host_register of %zu bytes at %p: the range overlaps "
                        "memory already registered or allocated by the device",
                        size, ptr);
        goto out;
    }
    if (table.n == table.cap) {
        size_t cap = table.cap ? table.cap * 2 : 64;
        range_t *r = realloc(table.r, cap * sizeof(*r));
        if (!r) {
            st = adag__error(ADAG_ERR_NO_MEMORY,
                            "emulated device: out of memory for its memory map");
            goto out;
        }
        table.r = r;
        table.cap = cap;
    }
    memmove(&table.r[i + 1], &table.r[i], (table.n - i) * sizeof(*table.r));
    table.r[i] = (range_t){lo, hi, {0}};
    if (ref)
        table.r[i].ref = *ref;
    table.n++;
out:
    pthread_mutex_unlock(&table.lock);
    return st;
}

void adag__host_ranges_remove(const void *ptr)
{
    uintptr_t lo = (uintptr_t)ptr;
    pthread_mutex_lock(&table.lock);
    size_t i = first_above(lo);
    if (i < table.n && table.r[i].lo == lo) {
        memmove(&table.r[i], &table.r[i + 1], (table.n - i - 1) * sizeof(*table.r));
        table.n--;
    }
    if (table.n == 0) {
        free(table.r); /* nothing left: no memory held at exit */
        table.r = NULL;
        table.cap = 0;
    }
    pthread_mutex_unlock(&table.lock);
}

/* Copies the range that holds [ptr, ptr + size) into *out: 0 if none. */
static int find_range(const void *ptr, size_t size, range_t *out)
{
    uintptr_t lo = (uintptr_t)ptr, hi = lo + (size ? size : 1);
    pthread_mutex_lock(&table.lock);
    size_t i = first_above(lo);
    int in = i < table.n && table.r[i].lo <= lo && hi <= table.r[i].hi;
    if (in)
        *out = table.r[i];
    pthread_mutex_unlock(&table.lock);
    return in;
}

int adag__host_ranges_cover(const void *ptr, size_t size)
{
    range_t r;
    return find_range(ptr, size, &r);
}

int adag__host_ranges_memfd(const void *ptr, size_t size, adag_memfd_ref_t *ref, uint64_t *offset)
{
    range_t r;
    if (!find_range(ptr, size, &r) || r.ref.magic != ADAG_MEMFD_REF_MAGIC)
        return 0;
    *ref = r.ref;
    *offset = (uintptr_t)ptr - r.lo;
    return 1;
}
