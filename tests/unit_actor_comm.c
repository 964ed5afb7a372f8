/* Unit tests (suite "actor_comm"): an actor's communicator table
 * (dag/exec/actor_comm.h) with two "actors" in one process, each its own table
 * and emulated device: joins start at once and are awaited later; a known
 * key is reused (the same communicator, no second join); a key asked with
 * another rank is refused; a dropped or aborted key is gone; a join whose
 * peer never comes times out; nothing is left afterwards. */
#include "common/clock.h"
#include "common/settings.h"
#include "dag/exec/actor_comm.h"
#include "dag/exec/actor_device.h"
#include "gpu/comm.h"

#include <criterion/criterion.h>
#include <string.h>

typedef struct {
    adag_actor_device_t *dev;
    adag_actor_comms_t comms;
} fake_actor_t;

/* The table's defaults, as a runtime's settings. */
static const adag_settings_t *defaults(void)
{
    static adag_settings_t s;
    static int made;
    if (!made) {
        cr_assert_eq(adag__settings_defaults(&s), ADAG_OK);
        made = 1;
    }
    return &s;
}

static void actor_open(fake_actor_t *a, unsigned index)
{
    cr_assert_eq(adag__actor_device_open(ADAG_DEV_EMULATED, index, defaults(), &a->dev),
                 ADAG_OK, "%s", adag_last_error());
    adag__actor_comms_init(&a->comms, defaults());
}

static void actor_close(fake_actor_t *a)
{
    adag__actor_comms_destroy(&a->comms);
    cr_assert_eq(adag__actor_device_close(a->dev, "test", adag__deadline_ms(5000)), ADAG_OK);
}

static adag_comm_spec_t spec_of(uint64_t key, const adag_comm_id_t *id, unsigned rank)
{
    adag_comm_spec_t s = {.key = key, .kind = ADAG_COMM_KIND_HOST, .nranks = 2, .rank = rank};
    s.id = *id;
    return s;
}

static void counts_zero(void)
{
    adag_comm_counts_t c;
    adag__comm_backend(ADAG_COMM_KIND_HOST)->counts(&c);
    cr_assert_eq(c.comms, 0, "%llu communicators left", (unsigned long long)c.comms);
    cr_assert_eq(c.ids, 0);
    cr_assert_eq(adag__actor_comm_live(), 0, "%u table entries left", adag__actor_comm_live());
}

Test(actor_comm, join_reuse_refuse_drop, .timeout = 60)
{
    const adag_comm_ops_t *ops = adag__comm_backend(ADAG_COMM_KIND_HOST);
    fake_actor_t a, b;
    actor_open(&a, 0);
    actor_open(&b, 1);
    adag_comm_id_t id;
    void *owner;
    cr_assert_eq(ops->id_create(2, &id, &owner), ADAG_OK);
    adag_comm_spec_t sa = spec_of(7, &id, 0), sb = spec_of(7, &id, 1);
    adag_actor_comm_t *ea, *eb, *ea2;
    int64_t deadline = adag__deadline_ms(10000);
    /* both begin before either waits: one thread here serves both ranks */
    cr_assert_eq(adag__actor_comm_begin(&a.comms, &sa, &a.dev->chan, "a", deadline, &ea), ADAG_OK,
                 "%s", adag_last_error());
    cr_assert_eq(adag__actor_comm_begin(&b.comms, &sb, &b.dev->chan, "b", deadline, &eb), ADAG_OK);
    adag_chan_comm_t ca, cb, ca2;
    cr_assert_eq(adag__actor_comm_finish(ea, deadline, &ca), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(adag__actor_comm_finish(eb, deadline, &cb), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(ca.key, 7);
    cr_assert(ca.comm && cb.comm && ca.stream && cb.stream && ca.stream != a.dev->chan.comm);
    cr_assert_eq(ca.comm->rank, 0);
    cr_assert_eq(cb.comm->rank, 1);

    /* it works: a send from a to b on the entries' streams */
    adag_dev_mem_t ma, mb;
    cr_assert_eq(a.dev->chan.dev->ops->mem_alloc(a.dev->chan.dev, 64, &ma), ADAG_OK);
    cr_assert_eq(b.dev->chan.dev->ops->mem_alloc(b.dev->chan.dev, 64, &mb), ADAG_OK);
    memset(ma.ptr, 0x5a, 64);
    memset(mb.ptr, 0, 64);
    cr_assert_eq(ops->send(ca.comm, ma.ptr, 64, 1, ca.stream), ADAG_OK);
    cr_assert_eq(ops->recv(cb.comm, mb.ptr, 64, 0, cb.stream), ADAG_OK);
    cr_assert_eq(b.dev->chan.dev->ops->stream_sync(cb.stream, adag__deadline_ms(5000)), ADAG_OK);
    cr_assert_eq(((unsigned char *)mb.ptr)[63], 0x5a);
    a.dev->chan.dev->ops->mem_free(a.dev->chan.dev, &ma);
    b.dev->chan.dev->ops->mem_free(b.dev->chan.dev, &mb);

    /* the same key again: the same communicator, no join (b does not begin) */
    cr_assert_eq(adag__actor_comm_begin(&a.comms, &sa, &a.dev->chan, "a", deadline, &ea2), ADAG_OK);
    cr_assert_eq(ea2, ea);
    cr_assert_eq(adag__actor_comm_finish(ea2, adag__deadline_ms(100), &ca2), ADAG_OK);
    cr_assert_eq(ca2.comm, ca.comm);
    adag__actor_comm_put(ea2);

    /* another rank under a known key */
    adag_comm_spec_t wrong = spec_of(7, &id, 1);
    adag_actor_comm_t *x;
    cr_assert_eq(adag__actor_comm_begin(&a.comms, &wrong, &a.dev->chan, "a", deadline, &x),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "joined as rank 0 of 2, now asked as rank 1 of 2"), "%s",
              adag_last_error());

    /* dropped: aborted, gone from the table; the holder's reference keeps it */
    adag__actor_comm_drop(&a.comms, 7);
    cr_assert_eq(ops->status(ca.comm), ADAG_ERR_CLOSED, "a dropped communicator is not aborted");
    cr_assert_eq(adag__actor_comm_live(), 2);
    adag__actor_comm_put(ea);
    cr_assert_eq(adag__actor_comm_live(), 1, "the last reference did not free it");
    adag__actor_comm_put(eb);
    actor_close(&a);
    actor_close(&b);
    ops->id_destroy(owner);
    counts_zero();
}

/* A rank whose peer never joins: finish says so at its deadline; the
 * actor then stops without waiting past the join's own deadline. */
Test(actor_comm, lonely_join_times_out, .timeout = 60)
{
    const adag_comm_ops_t *ops = adag__comm_backend(ADAG_COMM_KIND_HOST);
    fake_actor_t a;
    actor_open(&a, 2);
    adag_comm_id_t id;
    void *owner;
    cr_assert_eq(ops->id_create(2, &id, &owner), ADAG_OK);
    adag_comm_spec_t s = spec_of(9, &id, 1);
    adag_actor_comm_t *e;
    int64_t t0 = adag__now_ns();
    cr_assert_eq(adag__actor_comm_begin(&a.comms, &s, &a.dev->chan, "lonely",
                                       adag__deadline_ms(300), &e), ADAG_OK);
    adag_chan_comm_t c;
    adag_status_t st = adag__actor_comm_finish(e, adag__deadline_ms(5000), &c);
    cr_assert_eq(st, ADAG_ERR_TIMEOUT, "%s", adag_last_error());
    cr_assert(strstr(adag_last_error(), "actor lonely: communicator 9 (host, rank 1 of 2)"), "%s",
              adag_last_error());
    cr_assert_lt((double)(adag__now_ns() - t0) / 1e6, 4000.0);
    /* a failed join is not reused */
    adag_actor_comm_t *again;
    cr_assert_eq(adag__actor_comm_begin(&a.comms, &s, &a.dev->chan, "lonely",
                                       adag__deadline_ms(300), &again), ADAG_OK);
    cr_assert_eq(adag__actor_comm_finish(again, adag__deadline_ms(1000), &c), ADAG_ERR_TIMEOUT);
    adag__actor_comm_put(again);
    adag__actor_comm_put(e);
    actor_close(&a);
    ops->id_destroy(owner);
    counts_zero();
}

/* A device that is not the backend's: refused before anything starts. */
Test(actor_comm, wrong_device_kind, .timeout = 30)
{
    fake_actor_t a;
    actor_open(&a, 0);
    adag_comm_id_t id = {{1}, 1};
    adag_comm_spec_t s = spec_of(3, &id, 0);
    s.kind = ADAG_COMM_KIND_NCCL;
    adag_actor_comm_t *e;
    cr_assert_eq(
        adag__actor_comm_begin(&a.comms, &s, &a.dev->chan, "a", adag__deadline_ms(100), &e),
        ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "needs an actor on a cuda device"), "%s",
              adag_last_error());
    actor_close(&a);
    counts_zero();
}
