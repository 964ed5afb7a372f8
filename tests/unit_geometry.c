/*
 * Each channel's own geometry in the backends (suite "geom"): the memory
 * a channel holds as its backend reports it (the figures of
 * adag_channel_stats_t), the ring of a device channel whose endpoints all
 * keep the value on devices keeping headers only (its segment shrinks by
 * the slots' bytes), and a ring opened with the other kind of slots
 * refused.
 */
#include "tests/chan_index.h"
#include "common/error.h"
#include "gpu/device.h"
#include "transport/chan_shm.h"
#include "transport/channel.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

static size_t page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static void memory_of(uint32_t kind, adag_chan_geom_t g, const adag_chan_place_t *pl,
                      size_t *host, size_t *device)
{
    const adag_chan_ops_t *ops = adag__chan_backend(kind);
    cr_assert(ops && ops->memory, "backend %s reports no memory", adag__chan_backend_name(kind));
    *host = *device = 77;
    ops->memory(&g, pl, host, device);
}

static adag_chan_place_t on(int dev)
{
    return (adag_chan_place_t){dev < 0 ? -1 : ADAG_DEV_EMULATED, dev < 0 ? 0u : (unsigned)dev,
                               "x", 0};
}

/* What each backend says a channel holds, from its own geometry. */
Test(geom, memory_per_backend, .timeout = 30)
{
    size_t host, device;
    adag_chan_geom_t g = {3, 2, MIB, 0, 0};
    /* shm: its ring in the segment, whole pages */
    memory_of(CHAN_SHM, g, NULL, &host, &device);
    cr_assert_eq(host, adag__shm_chan_span(&g));
    cr_assert(host >= 3 * MIB && host % page() == 0 && device == 0, "shm: %zu, %zu", host,
              device);
    /* self: one buffer of the writer's */
    memory_of(CHAN_SELF, (adag_chan_geom_t){1, 0, 4096, 0, 0}, NULL, &host, &device);
    cr_assert(host == 4096 && device == 0);
    /* ucx: each of the writer and 2 readers a ring of 3 page-aligned slots */
    memory_of(CHAN_UCX, (adag_chan_geom_t){3, 2, MIB + 1, 0, 0}, NULL, &host, &device);
    cr_assert_eq(host, 3 * 3 * (MIB + page()));
    memory_of(CHAN_UCX, (adag_chan_geom_t){3, 2, 4, 0, 0}, NULL, &host, &device);
    cr_assert_eq(host, 3 * 3 * 64, "small slots stay packed: %zu", host);
    /* device: device memory where an endpoint keeps slots of its own */
    adag_chan_geom_t d1 = {4, 1, 1000, 0, 0}; /* 1000 B slots: 1024 on a device */
    adag_chan_place_t same[2] = {on(0), on(0)}, peer[2] = {on(0), on(1)};
    adag_chan_place_t h2d[2] = {on(-1), on(1)}, d2h[2] = {on(1), on(-1)};
    memory_of(CHAN_DEVICE, d1, same, &host, &device);
    cr_assert_eq(device, 4 * 1024, "the reader reads the writer's slots in place: %zu", device);
    adag_chan_geom_t headers = d1;
    headers.headers_only = 1;
    cr_assert_eq(host, adag__shm_chan_span(&headers), "an all-device ring keeps headers only");
    memory_of(CHAN_DEVICE, d1, peer, &host, &device);
    cr_assert_eq(device, 2 * 4 * 1024, "a peer copy has slots of its own: %zu", device);
    memory_of(CHAN_DEVICE, d1, h2d, &host, &device);
    cr_assert(device == 4 * 1024 && host == adag__shm_chan_span(&d1),
              "copy in: the reader's slots, the bytes in the ring: %zu, %zu", device, host);
    memory_of(CHAN_DEVICE, d1, d2h, &host, &device);
    cr_assert(device == 4 * 1024 && host == adag__shm_chan_span(&d1));
    /* by communicator: every device reader receives into its own slots */
    adag_chan_geom_t c2 = {2, 2, 256, 7, 0};
    adag_chan_place_t comm[3] = {on(0), on(0), on(1)};
    memory_of(CHAN_DEVICE, c2, comm, &host, &device);
    cr_assert_eq(device, 3 * 2 * 256);
}

/* A device channel between two devices: its ring in the DAG's segment
 * keeps the slots' headers and none of their bytes, so the segment is the
 * size of the headers; one with a host reader carries the bytes. */
Test(geom, device_ring_keeps_headers_only, .timeout = 30)
{
    const adag_chan_ops_t *dev = adag__chan_backend(CHAN_DEVICE);
    adag_chan_geom_t g = {4, 1, 4 * MIB, 0, 0};
    adag_chan_place_t all_dev[2] = {on(0), on(1)}, to_host[2] = {on(0), on(-1)};
    const adag_chan_place_t *pl[2] = {all_dev, to_host};
    size_t want[2];
    for (int i = 0; i < 2; i++) {
        size_t host, device;
        memory_of(CHAN_DEVICE, g, pl[i], &host, &device);
        want[i] = page() + host; /* the segment's header page, then the ring */
        adag_wbuf_t desc = {0};
        adag_chan_domain_t *d = NULL;
        cr_assert_eq(dev->domain_create("geom", &g, &pl[i], 1, &desc, &d), ADAG_OK, "%s",
                     adag_last_error());
        cr_assert_eq(dev->domain_bytes(d), want[i], "segment of %zu bytes, want %zu",
                     dev->domain_bytes(d), want[i]);
        dev->domain_destroy(d);
        adag__wbuf_free(&desc);
    }
    cr_assert_lt(want[0], MIB, "headers only: %zu bytes", want[0]);
    cr_assert_gt(want[1], 16 * MIB, "with the bytes: %zu", want[1]);
}

/* A ring's endpoint agrees with its header on whether slots keep bytes:
 * a headers-only ring opened as one with bytes (or the other way round)
 * is refused, and a headers-only writer gets no buffer to write. */
Test(geom, headers_only_ring_checked, .timeout = 30)
{
    const adag_chan_ops_t *shm = adag__chan_backend(CHAN_SHM);
    static _Atomic uint32_t abort_word;
    for (int kind = 0; kind < 2; kind++) {
        adag_chan_geom_t g = {2, 1, 4096, 0, kind};
        adag_wbuf_t desc = {0};
        adag_chan_domain_t *d = NULL;
        cr_assert_eq(shm->domain_create("geom", &g, NULL, 1, &desc, &d), ADAG_OK);
        adag_chan_open_params_t p = {.name = "c", .geom = g, .reader = -1,
                                     .desc = {desc.data, desc.len}, .abort = &abort_word};
        adag_chan_t *ch = NULL;
        p.geom.headers_only = !kind;
        cr_assert_eq(shm->open(d, &p, NULL, &ch), ADAG_ERR_PROTOCOL,
                     "a ring %s opened as one %s", kind ? "of headers" : "with bytes",
                     kind ? "with bytes" : "of headers");
        /* a ring with bytes is larger than the headers-only one laid out */
        cr_assert(strstr(adag_last_error(), kind ? "does not fit a segment"
                                                 : "does not match its geometry"),
                  "%s", adag_last_error());
        p.geom.headers_only = kind;
        cr_assert_eq(shm->open(d, &p, NULL, &ch), ADAG_OK, "%s", adag_last_error());
        void *buf = (void *)1;
        cr_assert_eq(shm->acquire(ch, 0, 0, &buf), ADAG_OK);
        cr_assert((buf == NULL) == (kind == 1), "a %s ring's buffer: %p",
                  kind ? "headers-only" : "full", buf);
        /* a headers-only ring still carries the value's size */
        cr_assert_eq(shm->publish(ch, 0, 4096, NULL, ADAG_OK, NULL), ADAG_OK);
        cr_assert_eq(shm->publish(ch, 1, 4097, NULL, ADAG_OK, NULL), ADAG_ERR_TOO_LARGE);
        shm->close(ch);
        shm->domain_destroy(d);
        adag__wbuf_free(&desc);
    }
}
