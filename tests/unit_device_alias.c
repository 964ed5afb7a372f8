/* Unit tests (suite "device_alias"): a handle imported by the process that
 * exported it (thread actors of one process) gives an alias of the
 * exporter's object (gpu/device.h), over every backend with a device here
 * (the emulated device always; cuda where a GPU exists, else "skipped:
 * <reason>"): the same address and bytes, an event whose waits order the
 * importer's stream after the exporter's, an alias that outlives the
 * exporter's free, abandon that concerns the alias only, counts back to
 * zero. */
#include "common/clock.h"
#include "device_kinds.h"
#include "gpu/device.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define ALIAS_TEST(name, tmo) DEVICE_KIND_TEST(device_alias, name, tmo)

static void assert_counts(adag_device_t *dev, uint64_t mem, uint64_t events, uint64_t imem,
                          uint64_t ievents, const char *when)
{
    adag_device_counts_t c;
    dev->ops->counts(dev, &c);
    cr_assert(c.mem == mem && c.events == events && c.imported_mem == imem &&
                  c.imported_events == ievents,
              "%s: %s: mem %llu events %llu imported %llu/%llu; want %llu %llu %llu/%llu",
              dev->ops->name, when, (unsigned long long)c.mem, (unsigned long long)c.events,
              (unsigned long long)c.imported_mem, (unsigned long long)c.imported_events,
              (unsigned long long)mem, (unsigned long long)events, (unsigned long long)imem,
              (unsigned long long)ievents);
}

/* The emulated device's memfd mappings in this process (memory and event
 * pages): an alias maps nothing. */
static int memfd_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[4096];
    int n = 0;
    cr_assert_not_null(f);
    while (fgets(line, sizeof(line), f))
        n += strstr(line, "memfd:adag-") != NULL;
    fclose(f);
    return n;
}

static _Atomic int gate;

/* Stream work that holds its stream until the gate opens. */
static void gate_fn(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

enum { N = 1 << 16 };

/* The exporter (device object x) writes N bytes through a copy behind a
 * closed gate and records ev; the importer (device object y, another
 * thread actor's) imports both handles, waits on the alias event on its
 * own stream and copies the alias's bytes out: they are the exporter's,
 * at the exporter's address, with no second mapping. */
static void same_bytes_and_order(uint32_t k, unsigned yindex)
{
    adag_device_t *x = device_open_or_skip(k, 0), *y = device_open_or_skip(k, yindex);
    const adag_device_ops_t *o = x->ops;
    adag_dev_mem_t d, hin, hout, im;
    adag_dev_stream_t *sx, *sy;
    adag_dev_event_t *ev, *iev;
    adag_dev_handle_t mh, eh;
    cr_assert_eq(o->mem_alloc(x, N, &d), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->host_alloc(x, N, &hin), ADAG_OK);
    cr_assert_eq(o->host_alloc(y, N, &hout), ADAG_OK);
    cr_assert_eq(o->stream_create(x, &sx), ADAG_OK);
    cr_assert_eq(o->stream_create(y, &sy), ADAG_OK);
    cr_assert_eq(o->event_create(x, &ev), ADAG_OK);
    for (size_t i = 0; i < N; i++)
        ((unsigned char *)hin.ptr)[i] = (unsigned char)(i * 7 + 3);
    memset(hout.ptr, 0, N);
    cr_assert_eq(o->mem_export(x, &d, &mh), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->event_export(x, ev, &eh), ADAG_OK, "%s", adag_last_error());
    int maps = memfd_maps();
    cr_assert_eq(o->mem_import(y, &mh, &im), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->event_import(y, &eh, &iev), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(im.ptr, d.ptr, "%s: the import is not the exporter's memory (%p, not %p)",
                 o->name, im.ptr, d.ptr);
    cr_assert_eq(im.size, (size_t)N);
    cr_assert_eq(memfd_maps(), maps,
                 "%s: importing in the exporting process mapped its memfds again", o->name);
    assert_counts(y, 0, 0, 1, 1, "after the imports");
    /* the exporter's copy waits behind the gate; the importer's copy out
     * must wait for the event recorded after it */
    atomic_store(&gate, 0);
    cr_assert_eq(o->host_fn(sx, gate_fn, NULL), ADAG_OK);
    cr_assert_eq(o->copy_async(sx, d.ptr, hin.ptr, N), ADAG_OK);
    cr_assert_eq(o->event_record(ev, sx), ADAG_OK);
    cr_assert_eq(o->stream_wait_event(sy, iev), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->copy_async(sy, hout.ptr, im.ptr, N), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->event_query(iev), ADAG_ERR_AGAIN, "the alias event is complete before its "
                                                      "exporter's record ran");
    cr_assert_eq(o->stream_sync(sy, adag__deadline_ms(100)), ADAG_ERR_TIMEOUT,
                 "the importer's stream did not wait for the alias event");
    atomic_store(&gate, 1);
    cr_assert_eq(o->stream_sync(sy, adag__deadline_ms(10000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->event_query(iev), ADAG_OK);
    cr_assert(memcmp(hout.ptr, hin.ptr, N) == 0, "%s: the alias's bytes differ", o->name);
    o->event_destroy(y, iev);
    o->mem_unimport(y, &im);
    assert_counts(y, 0, 0, 0, 0, "after closing the imports");
    assert_counts(x, 1, 1, 0, 0, "the exporter's, after the aliases closed");
    o->event_destroy(x, ev);
    o->mem_free(x, &d);
    o->host_free(x, &hin);
    o->host_free(y, &hout);
    o->stream_destroy(x, sx);
    o->stream_destroy(y, sy);
    assert_counts(x, 0, 0, 0, 0, "at the end");
    o->close(x);
    o->close(y);
}

/* Two thread actors on one device (two device objects of index 0). */
ALIAS_TEST(same_device_same_bytes_and_order, 60)
{
    same_bytes_and_order(*kind, 0);
}

/* ... and on two devices (index 1: skipped where there is one). */
ALIAS_TEST(two_devices_same_bytes_and_order, 60)
{
    const adag_device_ops_t *ops = adag__device_backend(*kind);
    char why[256] = "";
    if (ops && ops->probe && ops->probe(why, sizeof why) == 1)
        cr_skip_test("skipped: %s: one device here", ops->name);
    same_bytes_and_order(*kind, 1);
}

/* The exporter frees its memory and destroys its event while aliases
 * live: they stay usable (the bytes, a wait on the event) until closed,
 * the exporter's counts drop at once, the handles are stale for a new
 * import, and every count (and, on the emulated device, every memfd
 * mapping) is gone once the aliases close. */
ALIAS_TEST(alias_outlives_the_exporter, 60)
{
    adag_device_t *x = device_open_or_skip(*kind, 0), *y = device_open_or_skip(*kind, 0);
    const adag_device_ops_t *o = x->ops;
    int maps0 = memfd_maps();
    adag_dev_mem_t d, h, im, again;
    adag_dev_stream_t *sx, *sy;
    adag_dev_event_t *ev, *iev, *eagain;
    adag_dev_handle_t mh, eh, mh2, eh2;
    cr_assert_eq(o->mem_alloc(x, N, &d), ADAG_OK);
    cr_assert_eq(o->host_alloc(y, N, &h), ADAG_OK);
    cr_assert_eq(o->stream_create(x, &sx), ADAG_OK);
    cr_assert_eq(o->stream_create(y, &sy), ADAG_OK);
    cr_assert_eq(o->event_create(x, &ev), ADAG_OK);
    for (size_t i = 0; i < N; i++)
        ((unsigned char *)h.ptr)[i] = (unsigned char)(i ^ 0xa5);
    cr_assert_eq(o->copy_async(sx, d.ptr, h.ptr, N), ADAG_OK);
    cr_assert_eq(o->event_record(ev, sx), ADAG_OK);
    cr_assert_eq(o->mem_export(x, &d, &mh), ADAG_OK);
    cr_assert_eq(o->event_export(x, ev, &eh), ADAG_OK);
    mh2 = mh;
    eh2 = eh;
    cr_assert_eq(o->mem_import(y, &mh, &im), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->event_import(y, &eh, &iev), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(sx, adag__deadline_ms(10000)), ADAG_OK);
    /* the exporter lets go first */
    o->event_destroy(x, ev);
    o->mem_free(x, &d);
    o->stream_destroy(x, sx);
    assert_counts(x, 0, 0, 0, 0, "the exporter's, after its free");
    assert_counts(y, 0, 0, 1, 1, "the importer's, after the exporter's free");
    cr_assert_neq(o->mem_import(y, &mh2, &again), ADAG_OK, "freed memory was imported again");
    cr_assert_neq(o->event_import(y, &eh2, &eagain), ADAG_OK,
                  "a destroyed event was imported again");
    /* the aliases still work: wait on the event, read the bytes */
    memset(h.ptr, 0, N);
    cr_assert_eq(o->stream_wait_event(sy, iev), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->copy_async(sy, h.ptr, im.ptr, N), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(sy, adag__deadline_ms(10000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->event_sync(iev, adag__deadline_ms(10000)), ADAG_OK, "%s", adag_last_error());
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(((unsigned char *)h.ptr)[i], (unsigned char)(i ^ 0xa5),
                     "%s: byte %zu of the alias changed after the exporter's free", o->name, i);
    o->event_destroy(y, iev);
    o->mem_unimport(y, &im);
    o->host_free(y, &h);
    o->stream_destroy(y, sy);
    assert_counts(y, 0, 0, 0, 0, "the importer's, at the end");
    if (*kind == ADAG_DEV_EMULATED)
        cr_assert_eq(memfd_maps(), maps0,
                     "memfd mappings left after the last alias closed");
    o->close(x);
    o->close(y);
}

/* Abandoning an alias releases the waits on that alias only: a stream of
 * the exporter waiting on its own event keeps waiting until the record
 * runs. CUDA has no abandon (it does nothing there). */
ALIAS_TEST(abandon_concerns_the_alias_only, 60)
{
    adag_device_t *x = device_open_or_skip(*kind, 0), *y = device_open_or_skip(*kind, 0);
    const adag_device_ops_t *o = x->ops;
    if (*kind != ADAG_DEV_EMULATED)
        cr_skip_test("skipped: %s: event_abandon does nothing on this backend", o->name);
    adag_dev_stream_t *sx, *sw, *sy;
    adag_dev_event_t *ev, *iev;
    adag_dev_handle_t eh;
    cr_assert_eq(o->stream_create(x, &sx), ADAG_OK);
    cr_assert_eq(o->stream_create(x, &sw), ADAG_OK);
    cr_assert_eq(o->stream_create(y, &sy), ADAG_OK);
    cr_assert_eq(o->event_create(x, &ev), ADAG_OK);
    cr_assert_eq(o->event_export(x, ev, &eh), ADAG_OK);
    cr_assert_eq(o->event_import(y, &eh, &iev), ADAG_OK);
    atomic_store(&gate, 0);
    cr_assert_eq(o->host_fn(sx, gate_fn, NULL), ADAG_OK);
    cr_assert_eq(o->event_record(ev, sx), ADAG_OK);
    cr_assert_eq(o->stream_wait_event(sw, ev), ADAG_OK);
    cr_assert_eq(o->stream_wait_event(sy, iev), ADAG_OK);
    o->event_abandon(ev); /* the exporter's own: nothing changes */
    cr_assert_eq(o->stream_sync(sy, adag__deadline_ms(50)), ADAG_ERR_TIMEOUT);
    o->event_abandon(iev);
    cr_assert_eq(o->stream_sync(sy, adag__deadline_ms(5000)), ADAG_OK,
                 "abandoning the alias did not release the wait on it");
    cr_assert_eq(o->event_query(ev), ADAG_ERR_AGAIN, "abandoning the alias moved the event");
    cr_assert_eq(o->stream_sync(sw, adag__deadline_ms(100)), ADAG_ERR_TIMEOUT,
                 "abandoning the alias released a wait on the exporter's own event");
    atomic_store(&gate, 1);
    cr_assert_eq(o->stream_sync(sw, adag__deadline_ms(5000)), ADAG_OK);
    o->event_destroy(y, iev);
    o->event_destroy(x, ev);
    o->stream_destroy(x, sx);
    o->stream_destroy(x, sw);
    o->stream_destroy(y, sy);
    assert_counts(x, 0, 0, 0, 0, "the exporter's, at the end");
    assert_counts(y, 0, 0, 0, 0, "the importer's, at the end");
    o->close(x);
    o->close(y);
}
