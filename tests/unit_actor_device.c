/* Unit tests (suite "actor_device"): device specs (gpu/device.c), the
 * device object of a device-bound actor (dag/exec/actor_device.c: open, the
 * stop order drain -> fini -> close, what a deadline leaves behind) and a
 * thread actor on the emulated device, whose streams (the host backend's
 * process-wide count) go back to zero when it is destroyed. */
#include "common/clock.h"
#include "common/error.h"
#include "common/settings.h"
#include "dag/exec/actor_device.h"
#include "gpu/device.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The table's defaults: the settings a device or communicator table of
 * these tests opens with (a runtime's, in the library). */
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

static uint64_t host_streams(void)
{
    adag_device_counts_t c;
    adag__device_backend(ADAG_DEV_EMULATED)->counts(NULL, &c);
    return c.streams;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static double now_ms(void)
{
    return (double)adag__now_ns() / 1e6;
}

#define HAS(needle)                                                                           \
    cr_assert(strstr(adag_last_error(), (needle)), "message \"%s\" lacks \"%s\"",              \
              adag_last_error(), (needle))

/* ---- specs ---- */

Test(actor_device, parse)
{
    static const struct {
        const char *spec;
        adag_status_t st;
        adag_device_kind_t kind;
        unsigned index;
    } cases[] = {
        {"emu:0", ADAG_OK, ADAG_DEV_EMULATED, 0},
        {"cuda:1", ADAG_OK, ADAG_DEV_CUDA, 1},
        {"emu:16777215", ADAG_OK, ADAG_DEV_EMULATED, 16777215u},
        {"emu:16777216", ADAG_ERR_INVALID, 0, 0},
        {"emu:99999999999999999999999", ADAG_ERR_INVALID, 0, 0},
        {"cuda", ADAG_ERR_INVALID, 0, 0},
        {"cuda:", ADAG_ERR_INVALID, 0, 0},
        {"cuda:-1", ADAG_ERR_INVALID, 0, 0},
        {"cuda:1x", ADAG_ERR_INVALID, 0, 0},
        {":1", ADAG_ERR_INVALID, 0, 0},
        {"", ADAG_ERR_INVALID, 0, 0},
        {"nope:0", ADAG_ERR_NOT_FOUND, 0, 0},
        {"HOST:0", ADAG_ERR_NOT_FOUND, 0, 0},
        {"host:0", ADAG_ERR_NOT_FOUND, 0, 0}, /* host memory is no device */
    };
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        adag_device_kind_t kind = 77;
        unsigned index = 77;
        adag_status_t st = adag__device_parse(cases[i].spec, &kind, &index);
        cr_assert_eq(st, cases[i].st, "\"%s\": %d, want %d (%s)", cases[i].spec, st,
                     cases[i].st, adag_last_error());
        if (st == ADAG_OK)
            cr_assert(kind == cases[i].kind && index == cases[i].index, "\"%s\": %d:%u",
                      cases[i].spec, kind, index);
        else
            cr_assert(strstr(adag_last_error(), cases[i].spec), "\"%s\": message \"%s\"",
                      cases[i].spec, adag_last_error());
    }
    char longspec[ADAG_DEVICE_SPEC_MAX + 8];
    memset(longspec, 'h', sizeof(longspec) - 3);
    memcpy(longspec + sizeof(longspec) - 3, ":0", 3);
    adag_device_kind_t kind;
    unsigned index;
    cr_assert_eq(adag__device_parse(longspec, &kind, &index), ADAG_ERR_INVALID);
    HAS("is longer than 63 bytes");
    cr_assert_eq(adag__device_parse("x:0", &kind, &index), ADAG_ERR_NOT_FOUND);
    HAS("device \"x:0\": unknown backend \"x\" (known: emu, cuda)");
}

/* ---- the device object ---- */

typedef struct {
    _Atomic int *flag;
    int64_t ms;
} set_args_t;

/* sleeps ms, then sets *flag */
static void set_kernel(void *p)
{
    set_args_t *a = p;
    sleep_ms(a->ms);
    atomic_store(a->flag, 1);
}

static void launch_set(adag_actor_device_t *d, _Atomic int *flag, int64_t ms)
{
    set_args_t args = {.flag = flag, .ms = ms};
    cr_assert_eq(d->chan.dev->ops->launch_host(d->chan.compute, set_kernel, &args, sizeof(args)),
                 ADAG_OK, "%s", adag_last_error());
}

Test(actor_device, open_and_close)
{
    adag_actor_device_t *d = NULL;
    cr_assert_eq(host_streams(), 0);
    cr_assert_eq(adag__actor_device_open(ADAG_DEV_EMULATED, 1, defaults(), &d), ADAG_OK,
                 "%s", adag_last_error());
    cr_assert(d->chan.kind == ADAG_DEV_EMULATED && d->chan.dev->index == 1);
    cr_assert(d->chan.compute && d->chan.comm && d->chan.compute != d->chan.comm);
    adag_device_counts_t c;
    d->chan.dev->ops->counts(d->chan.dev, &c);
    cr_assert_eq(c.streams, 2, "the device has %llu streams, want compute + comm",
                 (unsigned long long)c.streams);
    cr_assert_eq(host_streams(), 2);
    /* close waits for the work */
    static _Atomic int done;
    launch_set(d, &done, 50);
    cr_assert_eq(adag__actor_device_close(d, "a", adag__deadline_ms(5000)), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(atomic_load(&done), 1, "close returned before the work was done");
    cr_assert_eq(host_streams(), 0);
    cr_assert_eq(adag__actor_device_close(NULL, "a", ADAG_FOREVER), ADAG_OK);
}

Test(actor_device, open_a_device_that_is_not_here)
{
    adag_actor_device_t *d = (adag_actor_device_t *)0x1;
    cr_assert_eq(adag__actor_device_open(ADAG_DEV_EMULATED, 99, defaults(), &d),
                 ADAG_ERR_NOT_FOUND);
    cr_assert_null(d);
    HAS("device emu:99 does not exist here (emu: 4 devices)");
    unsigned n = adag__device_backend(ADAG_DEV_CUDA)->probe(NULL, 0);
    char want[64];
    snprintf(want, sizeof(want), "device cuda:%u does not exist here (cuda: %u device", n, n);
    cr_assert_eq(adag__actor_device_open(ADAG_DEV_CUDA, n, defaults(), &d),
                 ADAG_ERR_NOT_FOUND);
    HAS(want);
    if (n == 0)
        HAS("(cuda: 0 devices: "); /* and the probe's reason */
    cr_assert_eq(host_streams(), 0);
}

static _Atomic int seen_at_fini = -1;

static void record_fini(void *state)
{
    atomic_store(&seen_at_fini, atomic_load((_Atomic int *)state));
}

/* stop: the work is done before fini, then the streams are gone */
Test(actor_device, stop_drains_then_fini_then_close)
{
    adag_actor_device_t *d = NULL;
    static _Atomic int done;
    cr_assert_eq(adag__actor_device_open(ADAG_DEV_EMULATED, 0, defaults(), &d), ADAG_OK);
    launch_set(d, &done, 100);
    cr_assert_eq(adag__actor_device_stop(d, "a", adag__deadline_ms(5000), record_fini, &done),
                 ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(&seen_at_fini), 1, "fini ran before the work was done");
    cr_assert_eq(host_streams(), 0);
    /* no device: fini alone */
    atomic_store(&seen_at_fini, -1);
    cr_assert_eq(adag__actor_device_stop(NULL, "a", ADAG_FOREVER, record_fini, &done), ADAG_OK);
    cr_assert_eq(atomic_load(&seen_at_fini), 1);
}

/* Work that outlives the deadline: stop returns by it, fini does not run,
 * the streams are left (work still runs on them). The same for close. */
Test(actor_device, stuck_work_is_left_at_the_deadline)
{
    adag_actor_device_t *d = NULL, *e = NULL;
    static _Atomic int done;
    setenv("ADAG_LOG_LEVEL", "0", 1); /* the leaks are logged: not in the test's output */
    cr_assert_eq(adag__actor_device_open(ADAG_DEV_EMULATED, 0, defaults(), &d), ADAG_OK);
    cr_assert_eq(adag__actor_device_open(ADAG_DEV_EMULATED, 1, defaults(), &e), ADAG_OK);
    launch_set(d, &done, 3000);
    launch_set(e, &done, 3000);
    double t0 = now_ms();
    cr_assert_eq(adag__actor_device_stop(d, "stuck", adag__deadline_ms(100), record_fini, &done),
                 ADAG_ERR_TIMEOUT);
    HAS("actor stuck: device emu:0, compute stream");
    cr_assert_eq(atomic_load(&seen_at_fini), -1, "fini ran while the work still runs");
    cr_assert_eq(adag__actor_device_close(e, "stuck2", adag__deadline_ms(100)), ADAG_ERR_TIMEOUT);
    HAS("actor stuck2: device emu:1, compute stream");
    double took = now_ms() - t0;
    cr_assert(took < 2000, "stop and close took %.0f ms, past their deadlines", took);
    cr_assert_eq(host_streams(), 4, "streams with work still running were destroyed");
}

/* ---- a thread actor on the emulated device ---- */

#include "dag/driver/dag.h"

typedef struct {
    _Atomic int kernels_done;
} kick_state_t;

typedef struct {
    kick_state_t *s;
    int64_t ms;
} kick_args_t;

static _Atomic int fini_saw = -1;

static void kick_kernel(void *p)
{
    kick_args_t *a = p;
    sleep_ms(a->ms);
    atomic_fetch_add(&a->s->kernels_done, 1);
}

/* kick(ms) -> 1: enqueues a kernel that sleeps ms, then counts itself */
static adag_status_t kick(void *state, adag_call_h call)
{
    kick_args_t args = {.s = state};
    adag_value_t v;
    adag_status_t st = adag_call_arg(call, 0, &v);
    if (st != ADAG_OK)
        return st;
    memcpy(&args.ms, v.data, sizeof(args.ms));
    if ((st = adag_call_enqueue(call, kick_kernel, &args, sizeof(args))) != ADAG_OK)
        return st;
    int64_t one = 1;
    return adag_call_set_output(call, 0, &one, sizeof(one));
}

static void kick_fini(void *state)
{
    kick_state_t *s = state;
    atomic_store(&fini_saw, atomic_load(&s->kernels_done));
}

static const adag_method_def_t kick_methods[] = {
    {.name = "kick", .fn = kick, .nargs = 1, .nreturns = 1},
};

static const adag_class_def_t kick_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "kicker",
    .state_size = sizeof(kick_state_t),
    .fini = kick_fini,
    .methods = kick_methods,
    .nmethods = 1,
};

/* A thread actor "kicker" on emu:2 (its streams: two) and a DAG that
 * enqueues n kernels of ms each, then is destroyed (the streams stay with
 * the actor), in a runtime whose ADAG_TEARDOWN_TIMEOUT_MS is teardown_ms
 * (NULL: the environment's). Returns the runtime and the actor. */
static adag_actor_h run_kicker(int64_t n, int64_t ms, const char *teardown_ms,
                               adag_runtime_h *out_rt)
{
    adag_runtime_h rt = NULL;
    adag_actor_h a = NULL;
    adag_graph_h g = NULL;
    adag_dag_h dag = NULL;
    adag_node_h in, node;
    adag_runtime_params_t rp = {.field_mask = ADAG_RUNTIME_PARAM_CONFIG};
    if (teardown_ms) {
        cr_assert_eq(adag_config_read(&rp.config), ADAG_OK);
        cr_assert_eq(adag_config_modify(rp.config, "ADAG_TEARDOWN_TIMEOUT_MS", teardown_ms),
                     ADAG_OK, "%s", adag_last_error());
    }
    cr_assert_eq(adag_runtime_create(teardown_ms ? &rp : NULL, &rt), ADAG_OK);
    if (rp.config)
        cr_assert_eq(adag_config_release(rp.config), ADAG_OK);
    cr_assert_eq(adag_class_register(rt, &kick_class), ADAG_OK);
    adag_actor_params_t p = {
        .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_DEVICE,
        .class_name = "kicker",
        .device = "emu:2",
    };
    cr_assert_eq(adag_actor_create(rt, &p, &a), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(a->device_kind, ADAG_DEV_EMULATED, "the driver records the device");
    cr_assert_eq(a->device_index, 2);
    cr_assert_eq(host_streams(), 2);
    cr_assert_eq(adag_graph_create(rt, &g), ADAG_OK);
    cr_assert_eq(adag_graph_input(g, 0, &in), ADAG_OK);
    cr_assert_eq(adag_graph_bind(g, a, "kick", &in, 1, &node), ADAG_OK);
    cr_assert_eq(adag_graph_output(g, &node, 1), ADAG_OK);
    cr_assert_eq(adag_graph_compile(g, NULL, &dag), ADAG_OK, "%s", adag_last_error());
    for (int64_t i = 0; i < n; i++) {
        adag_value_t v = {.data = &ms, .size = sizeof(ms)}, out;
        adag_ref_t ref;
        cr_assert_eq(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_OK);
        cr_assert_eq(adag_dag_get(dag, ref, &out, 1, 10000), ADAG_OK, "%s", adag_last_error());
        cr_assert_eq(adag_dag_release(dag, ref), ADAG_OK);
    }
    cr_assert_eq(adag_dag_destroy(dag), ADAG_OK);
    cr_assert_eq(adag_graph_destroy(g), ADAG_OK);
    cr_assert_eq(host_streams(), 2, "the actor's streams went with its DAG");
    *out_rt = rt;
    return a;
}

Test(actor_device, thread_actor_streams_back_to_zero, .timeout = 30)
{
    adag_runtime_h rt;
    adag_actor_h a = run_kicker(3, 100, NULL, &rt);
    cr_assert_eq(adag_actor_destroy(a), ADAG_OK);
    cr_assert_eq(atomic_load(&fini_saw), 3,
                 "fini saw %d kernels done, want 3 (it ran before the work was done)",
                 atomic_load(&fini_saw));
    cr_assert_eq(host_streams(), 0, "%llu streams left after the actor was destroyed",
                 (unsigned long long)host_streams());
    /* one that cannot have its device leaves none */
    adag_actor_params_t p = {
        .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_DEVICE,
        .class_name = "kicker",
        .device = "emu:99",
    };
    cr_assert_eq(adag_actor_create(rt, &p, &a), ADAG_ERR_NOT_FOUND);
    cr_assert_eq(host_streams(), 0);
    cr_assert_eq(adag_runtime_destroy(rt), ADAG_OK);
}

/* A kernel that outlives the runtime's ADAG_TEARDOWN_TIMEOUT_MS: the DAG
 * and the actor go by the deadlines, fini does not run and the streams are
 * left. */
Test(actor_device, thread_actor_with_stuck_work, .timeout = 30)
{
    setenv("ADAG_LOG_LEVEL", "0", 1); /* the leak is logged: not in the test's output */
    adag_runtime_h rt;
    double t0 = now_ms();
    adag_actor_h a = run_kicker(1, 5000, "200", &rt);
    cr_assert_eq(adag_actor_destroy(a), ADAG_OK);
    cr_assert_eq(adag_runtime_destroy(rt), ADAG_OK);
    double took = now_ms() - t0;
    cr_assert(took < 3000, "teardown took %.0f ms; the kernel takes 5000, the deadline 200",
              took);
    cr_assert_eq(atomic_load(&fini_saw), -1, "fini ran while the kernel still runs");
    cr_assert_eq(host_streams(), 2, "the streams of a kernel still running were destroyed");
}
