/*
 * How a channel's backend is chosen (transport/channel.c): every backend
 * of the registry answers a query for the channel's endpoints (actor,
 * process, node, host or device memory) and transport hint, and the
 * cheapest that can carry it wins. One table: each placement -> the
 * backend chosen, or the refusal and what it says; and the wire: a
 * program naming a backend this build lacks is refused at decode, saying
 * which.
 */
#include "common/error.h"
#include "dag/exec/program.h"
#include "tests/chan_index.h"
#include "transport/channel.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define EMU ADAG_DEV_EMULATED /* the emulated device backend */
#define HOSTMEM {-1, 0, NULL, 0}
#define ON(i) {EMU, i, NULL, 0}
#define NODE2 "10.0.0.2:7000"
#define NODE3 "10.0.0.3:7000"

typedef struct {
    const char *what;
    unsigned nreaders;
    adag_chan_end_t ends[3]; /* writer, readers */
    uint32_t transport;
    const char *want;        /* the backend chosen; NULL: refused */
    const char *says[3];     /* what the refusal says (NULL: nothing more) */
} row_t;

/* ends: {actor, process, node, place} */
#define DRV(place) {-1, 0, "", place}
#define THR(a, place) {a, 0, "", place}
#define PRC(a, place) {a, 1 + (a), "", place}
#define AT(a, node, place) {a, 1 + (a), node, place}

static const row_t rows[] = {
    {"same actor", 0, {THR(0, HOSTMEM)}, ADAG_TRANSPORT_AUTO, "self", {0}},
    {"same actor in a process of its own", 0, {PRC(2, HOSTMEM)}, ADAG_TRANSPORT_AUTO, "self",
     {0}},
    {"two threads", 1, {THR(0, HOSTMEM), THR(1, HOSTMEM)}, ADAG_TRANSPORT_AUTO, "shm", {0}},
    {"two processes", 1, {PRC(0, HOSTMEM), PRC(1, HOSTMEM)}, ADAG_TRANSPORT_AUTO, "shm", {0}},
    {"driver -> thread actor", 1, {DRV(HOSTMEM), THR(0, HOSTMEM)}, ADAG_TRANSPORT_AUTO, "shm",
     {0}},
    {"process actor -> driver", 1, {PRC(0, HOSTMEM), DRV(HOSTMEM)}, ADAG_TRANSPORT_AUTO, "shm",
     {0}},
    {"driver, read by nobody", 0, {DRV(HOSTMEM)}, ADAG_TRANSPORT_AUTO, "shm", {0}},
    {"driver -> actor on another node", 1, {DRV(HOSTMEM), AT(0, NODE2, HOSTMEM)},
     ADAG_TRANSPORT_AUTO, "ucx", {0}},
    {"actor on another node -> driver", 1, {AT(0, NODE2, HOSTMEM), DRV(HOSTMEM)},
     ADAG_TRANSPORT_AUTO, "ucx", {0}},
    {"two actors within another node", 1, {AT(0, NODE2, HOSTMEM), AT(1, NODE2, HOSTMEM)},
     ADAG_TRANSPORT_AUTO, "ucx", {0}},
    {"fan-out to this node and another", 2,
     {THR(0, HOSTMEM), PRC(1, HOSTMEM), AT(2, NODE2, HOSTMEM)}, ADAG_TRANSPORT_AUTO, "ucx", {0}},
    {"emu -> emu, one node", 1, {PRC(0, ON(0)), PRC(1, ON(1))}, ADAG_TRANSPORT_AUTO, "device",
     {0}},
    {"emu -> emu, one device", 1, {THR(0, ON(0)), THR(1, ON(0))}, ADAG_TRANSPORT_AUTO, "device",
     {0}},
    {"host -> emu, one node", 1, {DRV(HOSTMEM), PRC(0, ON(1))}, ADAG_TRANSPORT_AUTO, "device",
     {0}},
    {"emu -> host, one node", 1, {PRC(0, ON(0)), DRV(HOSTMEM)}, ADAG_TRANSPORT_AUTO, "device",
     {0}},
    {"emu, read by nobody", 0, {PRC(0, ON(0))}, ADAG_TRANSPORT_AUTO, "device", {0}},
    {"emu -> emu within another node", 1, {AT(0, NODE2, ON(0)), AT(1, NODE2, ON(1))},
     ADAG_TRANSPORT_AUTO, "device", {0}},
    {"emu -> emu across nodes", 1, {PRC(0, ON(0)), AT(1, NODE2, ON(1))}, ADAG_TRANSPORT_AUTO,
     "ucx", {0}},
    {"host -> emu across nodes", 1, {DRV(HOSTMEM), AT(0, NODE2, ON(0))}, ADAG_TRANSPORT_AUTO,
     "ucx", {0}},
    {"emu -> host across nodes", 1, {AT(0, NODE2, ON(0)), AT(1, NODE3, HOSTMEM)},
     ADAG_TRANSPORT_AUTO, "ucx", {0}},
    {"hint HOST between device actors", 1, {PRC(0, HOSTMEM), PRC(1, HOSTMEM)},
     ADAG_TRANSPORT_HOST, "shm", {0}},
    {"hint HOST across nodes", 1, {PRC(0, HOSTMEM), AT(1, NODE2, HOSTMEM)}, ADAG_TRANSPORT_HOST,
     "ucx", {0}},
    {"hint IPC, one node", 1, {PRC(0, ON(0)), PRC(1, ON(1))}, ADAG_TRANSPORT_IPC, "device",
     {0}},
    {"hint COMM, one node", 1, {PRC(0, ON(0)), PRC(1, ON(1))}, ADAG_TRANSPORT_COMM, "device",
     {0}},
    {"hint IPC across nodes", 1, {PRC(0, ON(0)), AT(1, NODE2, ON(1))}, ADAG_TRANSPORT_IPC, NULL,
     {"device: its endpoints are on more than one node (the driver's, " NODE2 ")",
      "ucx: it stages device values through host memory, and the tensor's transport is "
      "ADAG_TRANSPORT_IPC",
      "shm: its value is in device memory"}},
    {"hint COMM across nodes", 1, {AT(0, NODE2, ON(0)), AT(1, NODE3, ON(0))},
     ADAG_TRANSPORT_COMM, NULL,
     {"transport is ADAG_TRANSPORT_COMM", "self: other endpoints than its writer read it",
      NULL}},
};

Test(backend_query, every_placement_picks_its_backend)
{
    for (unsigned i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const row_t *row = &rows[i];
        adag_chan_end_t ends[3];
        static const char *const names[3] = {"w", "r0", "r1"};
        for (unsigned j = 0; j <= row->nreaders; j++) {
            ends[j] = row->ends[j];
            ends[j].place.who = names[j];
        }
        adag_chan_edge_t e = {"c", ends, row->nreaders, row->transport};
        uint32_t index = UINT32_MAX;
        adag_status_t st = adag__chan_choose(&e, &index);
        if (row->want) {
            cr_assert_eq(st, ADAG_OK, "%s: %s", row->what, adag_last_error());
            cr_assert_str_eq(adag__chan_backend_name(index), row->want, "%s", row->what);
            continue;
        }
        cr_assert_eq(st, ADAG_ERR_INVALID, "%s: chose %s", row->what,
                     adag__chan_backend_name(index));
        const char *msg = adag_last_error();
        cr_assert(strstr(msg, "channel c: w ("), "%s: %s", row->what, msg);
        cr_assert(strstr(msg, "no backend can carry it"), "%s: %s", row->what, msg);
        for (unsigned k = 0; k < 3; k++)
            cr_assert(!row->says[k] || strstr(msg, row->says[k]), "%s: \"%s\" lacks \"%s\"",
                      row->what, msg, row->says[k]);
    }
}

/* The refusal names both endpoints with where they keep the value and
 * their nodes. */
Test(backend_query, refusal_names_the_endpoints)
{
    adag_chan_end_t ends[2] = {{0, 1, "", {EMU, 0, "near", 0}},
                               {1, 2, NODE2, {EMU, 1, "far", 0}}};
    adag_chan_edge_t e = {"near.step[0]", ends, 1, ADAG_TRANSPORT_IPC};
    uint32_t index;
    cr_assert_eq(adag__chan_choose(&e, &index), ADAG_ERR_INVALID);
    char want[160];
    snprintf(want, sizeof(want),
             "channel near.step[0]: near (%s:0 on the driver's node) -> far (%s:1 on " NODE2 ")",
             adag_device_kind_name(EMU), adag_device_kind_name(EMU));
    cr_assert(strstr(adag_last_error(), want), "\"%s\" lacks \"%s\"", adag_last_error(), want);
}

/* Cheapest wins, whatever the table's order: a same-process edge the
 * network could also carry goes the cheaper way; and the cost classes
 * are ordered as the design says. */
Test(backend_query, cost_classes_ordered)
{
    cr_assert_lt(ADAG_CHAN_COST_PROCESS, ADAG_CHAN_COST_SHM);
    cr_assert_lt(ADAG_CHAN_COST_SHM, ADAG_CHAN_COST_DEVICE);
    cr_assert_lt(ADAG_CHAN_COST_DEVICE, ADAG_CHAN_COST_NETWORK);
    /* an edge within another node between host endpoints: only ucx answers */
    adag_chan_end_t ends[2] = {{0, 1, NODE2, HOSTMEM}, {1, 2, NODE2, HOSTMEM}};
    adag_chan_edge_t e = {"c", ends, 1, ADAG_TRANSPORT_AUTO};
    unsigned answered = 0;
    for (uint32_t i = 0; i < adag__chan_nbackends(); i++) {
        char why[160] = "";
        adag_chan_cost_t c = adag__chan_backend(i)->query(&e, why, sizeof(why));
        answered += c != ADAG_CHAN_CANNOT;
        cr_assert(c != ADAG_CHAN_CANNOT || why[0], "%s refused without a reason",
                  adag__chan_backend_name(i));
        if (c != ADAG_CHAN_CANNOT)
            cr_assert_eq(c, ADAG_CHAN_COST_NETWORK, "%s", adag__chan_backend_name(i));
    }
    cr_assert_eq(answered, 1);
}

/* A program whose channel names a backend this build does not have (a
 * worker of another build) is refused at decode, naming the channel, the
 * backend and what this build has. */
Test(backend_query, unknown_backend_refused_at_decode)
{
    adag_prog_chan_t chan = {.name = "a.m[0]", .backend = CHAN_SHM, .reader = -1,
                             .nslots = 1, .capacity = 64};
    adag_program_t p = {.dag_id = 1, .dag_name = "d", .max_inflight = 1,
                        .start_chan = ADAG_PROG_NO_CHAN, .nchans = 1, .chans = &chan};
    adag_wbuf_t wb = {0};
    adag__program_encode(&p, &wb);
    cr_assert(!wb.failed);
    /* the same program decodes as it is ... */
    adag_program_t q;
    adag_rbuf_t rb = {wb.data, wb.len, 0, 0};
    cr_assert_eq(adag__program_decode(&rb, 0, &q), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(q.chans[0].backend, CHAN_SHM);
    adag__program_free(&q);
    /* ... and with its backend named "foo" instead of "shm" it does not */
    char *at = memmem(wb.data, wb.len, "shm", 3);
    cr_assert(at, "the program does not name its channel's backend");
    cr_assert_null(memmem(at + 3, wb.len - (size_t)(at + 3 - (char *)wb.data), "shm", 3));
    memcpy(at, "foo", 3);
    adag_rbuf_t rb2 = {wb.data, wb.len, 0, 0};
    cr_assert_eq(adag__program_decode(&rb2, 0, &q), ADAG_ERR_PROTOCOL);
    cr_assert_str_eq(adag_last_error(), "channel a.m[0]: backend 'foo' is not in this build "
                                        "(have: self, shm, device, ucx)");
    adag__wbuf_free(&wb);
}
