/*
 * The emulated device's words (value ops, gpu/device.h): a cell's value and
 * its futex handshake; the streams' operations that store and wait on them
 * are in gpu/host_stream.c.
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/event.h"
#include "gpu/host_impl.h"

#include <stdatomic.h>
#include <stdint.h>

/* A word's cell (gpu/device.h): the value, then the futex handshake of
 * common/event.h, both in the shared mapping, so a stream or a host thread
 * of any process that maps the cell waits on it. Memory ordering: a writer
 * (a stream's OP_WRITE_VALUE, word_store) stores the value seq_cst, then
 * notifies; a waiter loads it seq_cst (the handshake's condition). The
 * seq_cst store also orders everything the writer's stream did before it
 * (its copies, its host functions) before what the released stream does. */
struct word_cell {
    _Atomic uint64_t value;
    adag_event_t wake;
};
_Static_assert(sizeof(word_cell_t) <= ADAG_DEV_WORD_BYTES, "a word's cell is too small");

word_cell_t *adag__host_word_cell(const adag_dev_word_t *w)
{
    return (word_cell_t *)(uintptr_t)w->dev;
}

typedef struct {
    const word_cell_t *cell;
    uint64_t want;
} value_arg_t;

/* CUDA's GEQ: cyclic, so a value stored at ADAG_DEV_WORD_ABORT releases. */
static int value_reached(const void *p)
{
    const value_arg_t *a = p;
    uint64_t v = atomic_load_explicit(&a->cell->value, memory_order_seq_cst);
    return (int64_t)(v - a->want) >= 0;
}

adag_status_t adag__host_cell_wait(word_cell_t *cell, uint64_t want, int64_t deadline)
{
    adag_spin_t spin;
    adag__spin_init(&spin, (adag_wait_policy_t){20000, 1});
    value_arg_t a = {cell, want};
    return adag__event_wait(&cell->wake, value_reached, &a, NULL, deadline, &spin);
}

void adag__host_cell_store(word_cell_t *cell, uint64_t v)
{
    atomic_store_explicit(&cell->value, v, memory_order_seq_cst);
    adag__event_notify(&cell->wake);
}

int adag__host_values_supported(adag_device_t *d, char *why, size_t len)
{
    (void)d, (void)why, (void)len;
    return 1;
}

/* As on CUDA, a word must be in memory the device can reach: device memory
 * or page-locked host memory (gpu/host_ranges.c), so a path that forgets to
 * register its ring fails here as it would there. */
adag_status_t adag__host_word_map(adag_device_t *d, _Atomic uint64_t *host, adag_dev_word_t *w)
{
    if ((uintptr_t)host % 64)
        return adag__error(ADAG_ERR_INVALID, "device emu:%u: word %p is not 64-byte aligned",
                          d->index, (void *)host);
    if (!adag__host_ranges_cover(host, ADAG_DEV_WORD_BYTES))
        return adag__error(ADAG_ERR_INVALID,
                          "device emu:%u: word %p is neither device memory nor registered "
                          "host memory", d->index, (void *)host);
    w->host = host;
    w->dev = (uint64_t)(uintptr_t)host;
    return ADAG_OK;
}

void adag__host_word_store(const adag_dev_word_t *w, uint64_t v)
{
    adag__host_cell_store(adag__host_word_cell(w), v);
}
