/*
 * Actor classes used by the tests: exported as a module (process actors)
 * and compiled into the test binary too (thread actors, see
 * test_actors.h). The echo method is shared with adag-bench
 * (shared_methods.c is compiled into both).
 */
#include "test_actors.h"
#include "shared_methods.h"
#include "tensor_actors.h"
#include "gpu_stage.h"
#include "probe_actors.h"
#include "geom_actors.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* state: an int64 offset given by init (8 bytes, or 0 if none) */
typedef struct {
    int64_t offset;
    uint64_t calls;
    int64_t ticks; /* tick() calls */
} counter_state_t;

static adag_status_t counter_init(void *state, const void *data, size_t size)
{
    counter_state_t *s = state;
    if (size != 0 && size != sizeof(int64_t))
        return ADAG_ERR_INVALID;
    if (size)
        memcpy(&s->offset, data, sizeof(int64_t));
    return ADAG_OK;
}

static int read_i64(adag_call_h call, unsigned i, int64_t *v)
{
    adag_value_t in;
    if (adag_call_arg(call, i, &in) != ADAG_OK || in.size != sizeof(int64_t))
        return -1;
    memcpy(v, in.data, sizeof(*v));
    return 0;
}

/* add(x) -> x + offset */
static adag_status_t counter_add(void *state, adag_call_h call)
{
    counter_state_t *s = state;
    int64_t x;
    if (read_i64(call, 0, &x))
        return adag_call_fail(call, "add expects one int64");
    x += s->offset;
    s->calls++;
    return adag_call_set_output(call, 0, &x, sizeof(x));
}

/* sum2(a, b) -> a + b + offset */
static adag_status_t counter_sum2(void *state, adag_call_h call)
{
    counter_state_t *s = state;
    int64_t a, b;
    if (read_i64(call, 0, &a) || read_i64(call, 1, &b))
        return adag_call_fail(call, "sum2 expects two int64");
    a += b + s->offset;
    s->calls++;
    return adag_call_set_output(call, 0, &a, sizeof(a));
}

/* split(x) -> (x, -x, x * 2) */
static adag_status_t counter_split(void *state, adag_call_h call)
{
    (void)state;
    int64_t x;
    if (read_i64(call, 0, &x))
        return adag_call_fail(call, "split expects one int64");
    int64_t outs[3] = {x, -x, x * 2};
    for (unsigned i = 0; i < 3; i++) {
        adag_status_t st = adag_call_set_output(call, i, &outs[i], sizeof(outs[i]));
        if (st != ADAG_OK)
            return st;
    }
    return ADAG_OK;
}

/* calls() -> number of add/sum2 calls so far on this actor */
static adag_status_t counter_calls(void *state, adag_call_h call)
{
    counter_state_t *s = state;
    return adag_call_set_output(call, 0, &s->calls, sizeof(s->calls));
}

/* tick() -> how many times tick() ran on this actor, this call included */
static adag_status_t counter_tick(void *state, adag_call_h call)
{
    counter_state_t *s = state;
    s->ticks++;
    return adag_call_set_output(call, 0, &s->ticks, sizeof(s->ticks));
}

/* base() -> offset */
static adag_status_t counter_base(void *state, adag_call_h call)
{
    counter_state_t *s = state;
    return adag_call_set_output(call, 0, &s->offset, sizeof(s->offset));
}

/* sum3(a, b, c) -> a + b + c + offset */
static adag_status_t counter_sum3(void *state, adag_call_h call)
{
    counter_state_t *s = state;
    int64_t a, b, c;
    if (read_i64(call, 0, &a) || read_i64(call, 1, &b) || read_i64(call, 2, &c))
        return adag_call_fail(call, "sum3 expects three int64");
    int64_t y = a + b + c + s->offset;
    return adag_call_set_output(call, 0, &y, sizeof(y));
}

/* fail_if_negative(x) -> x, fails when x < 0 */
static adag_status_t counter_fail_if_negative(void *state, adag_call_h call)
{
    (void)state;
    int64_t x;
    if (read_i64(call, 0, &x))
        return adag_call_fail(call, "expects one int64");
    if (x < 0)
        return adag_call_fail(call, "negative input %lld", (long long)x);
    return adag_call_set_output(call, 0, &x, sizeof(x));
}

/* sleep_ms(x) -> x after sleeping x milliseconds */
static adag_status_t counter_sleep_ms(void *state, adag_call_h call)
{
    (void)state;
    int64_t x;
    if (read_i64(call, 0, &x))
        return adag_call_fail(call, "expects one int64");
    struct timespec ts = {x / 1000, (x % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
    return adag_call_set_output(call, 0, &x, sizeof(x));
}

/* crash_if(x) -> x; the process kills itself with SIGKILL when x == 666 */
static adag_status_t counter_crash_if(void *state, adag_call_h call)
{
    (void)state;
    int64_t x;
    if (read_i64(call, 0, &x))
        return adag_call_fail(call, "expects one int64");
    if (x == 666)
        raise(SIGKILL);
    return adag_call_set_output(call, 0, &x, sizeof(x));
}

/* die_if(x) -> x; x == 11: the process segfaults; x == 7: it calls exit(7) */
static adag_status_t counter_die_if(void *state, adag_call_h call)
{
    (void)state;
    int64_t x;
    if (read_i64(call, 0, &x))
        return adag_call_fail(call, "expects one int64");
    if (x == 11) {
        volatile uintptr_t nowhere = 16; /* a real fault, not a raise() */
        *(volatile int *)nowhere = 1;
    }
    if (x == 7)
        exit(7);
    return adag_call_set_output(call, 0, &x, sizeof(x));
}

/* grow(n) -> n bytes of 0xab, n an int64 (to overflow slots) */
static adag_status_t counter_grow(void *state, adag_call_h call)
{
    (void)state;
    int64_t n;
    void *buf;
    if (read_i64(call, 0, &n) || n < 0)
        return adag_call_fail(call, "expects one non-negative int64");
    adag_status_t st = adag_call_output(call, 0, (size_t)n, &buf);
    if (st != ADAG_OK)
        return st;
    memset(buf, 0xab, (size_t)n);
    return ADAG_OK;
}

/* pid() -> the process id running the actor (int64) */
static adag_status_t counter_pid(void *state, adag_call_h call)
{
    (void)state;
    int64_t pid = getpid();
    return adag_call_set_output(call, 0, &pid, sizeof(pid));
}

/* call_lib() -> the path of the object whose adag_call_arg this module's
 * calls bind to (dladdr): libadag.so in a driver, adag-worker in a worker,
 * also when the module is linked with -ladag (tests/test_abi.c) */
static adag_status_t counter_call_lib(void *state, adag_call_h call)
{
    (void)state;
    Dl_info info;
    if (!dladdr((void *)adag_call_arg, &info) || !info.dli_fname)
        return adag_call_fail(call, "dladdr found no object for adag_call_arg");
    return adag_call_set_output(call, 0, info.dli_fname, strlen(info.dli_fname) + 1);
}

/* arg_value(x) -> the adag_value_t adag_call_arg gave for x, written over
 * 0xff bytes: the library must set every field (tests/test_abi.c) */
static adag_status_t counter_arg_value(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t v;
    memset(&v, 0xff, sizeof(v));
    adag_status_t st = adag_call_arg(call, 0, &v);
    if (st != ADAG_OK)
        return st;
    return adag_call_set_output(call, 0, &v, sizeof(v));
}

/* say(x) -> x after writing a line to stdout and to stderr (a method that
 * logs, as real methods do: with fds 0-2 closed in the driver this must not
 * land in the runtime's own descriptors) */
static adag_status_t counter_say(void *state, adag_call_h call)
{
    (void)state;
    int64_t x;
    if (read_i64(call, 0, &x))
        return adag_call_fail(call, "expects one int64");
    fprintf(stdout, "say %lld from %s\n", (long long)x, adag_call_actor_name(call));
    fflush(stdout);
    fprintf(stderr, "say %lld from %s (stderr)\n", (long long)x, adag_call_actor_name(call));
    return adag_call_set_output(call, 0, &x, sizeof(x));
}

/* ret_status(x) -> returns the status x itself (no output): a method that
 * returns ADAG_ERR_TIMEOUT, a positive value or an unknown code */
static adag_status_t counter_ret_status(void *state, adag_call_h call)
{
    (void)state;
    int64_t x;
    if (read_i64(call, 0, &x))
        return adag_call_fail(call, "expects one int64");
    if (x == 0) /* a success that wrote its output */
        return adag_call_set_output(call, 0, &x, sizeof(x));
    return (adag_status_t)x;
}

/* bad_arg(x) -> returns what adag_call_arg(call, 3, ...) returns (argument
 * 3 does not exist): a failing adag_call_* whose message must survive */
static adag_status_t counter_bad_arg(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t v;
    return adag_call_arg(call, 3, &v);
}

/* spin_ms(x) -> x after busy-looping x milliseconds (x < 0: forever) */
static adag_status_t counter_spin_ms(void *state, adag_call_h call)
{
    (void)state;
    int64_t x;
    if (read_i64(call, 0, &x))
        return adag_call_fail(call, "expects one int64");
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        int64_t ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (x >= 0 && ms >= x)
            break;
    }
    return adag_call_set_output(call, 0, &x, sizeof(x));
}

static const adag_method_def_t counter_methods[] = {
    {"add", counter_add, 1, 1},
    {"sum2", counter_sum2, 2, 1},
    {"split", counter_split, 1, 3},
    {"calls", counter_calls, 0, 1},
    {"fail_if_negative", counter_fail_if_negative, 1, 1},
    {"sleep_ms", counter_sleep_ms, 1, 1},
    {"crash_if", counter_crash_if, 1, 1},
    {"die_if", counter_die_if, 1, 1},
    {"echo", shared_echo, 1, 1}, /* the same bytes (any size) */
    {"grow", counter_grow, 1, 1},
    {"pid", counter_pid, 0, 1},
    {"say", counter_say, 1, 1},
    {"ret_status", counter_ret_status, 1, 1},
    {"bad_arg", counter_bad_arg, 1, 1},
    {"spin_ms", counter_spin_ms, 1, 1},
    {"call_lib", counter_call_lib, 0, 1},
    {"arg_value", counter_arg_value, 1, 1},
    {"tick", counter_tick, 0, 1},
    {"base", counter_base, 0, 1},
    {"sum3", counter_sum3, 3, 1},
};

const adag_class_def_t test_counter_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "counter",
    .state_size = sizeof(counter_state_t),
    .init = counter_init,
    .fini = NULL,
    .methods = counter_methods,
    .nmethods = sizeof(counter_methods) / sizeof(counter_methods[0]),
};

/* a class whose init always fails */
static adag_status_t broken_init(void *state, const void *data, size_t size)
{
    (void)state;
    (void)data;
    (void)size;
    return ADAG_ERR_INVALID;
}

const adag_class_def_t test_broken_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "broken",
    .state_size = 8,
    .init = broken_init,
    .methods = counter_methods,
    .nmethods = 1,
};

/* a class whose init says why it fails (adag_init_fail), by its init
 * bytes: "fine-after-all" records a message and returns ADAG_OK; "nomem"
 * returns ADAG_ERR_NO_MEMORY with a message; "twice" gives two messages;
 * "long" one of 1000 'x' and "END"; "silent" returns ADAG_ERR_INVALID
 * with none; anything else: "cannot use config '<bytes>'" */
static adag_status_t refusing_init(void *state, const void *data, size_t size)
{
    (void)state;
    const char *text = data ? data : "";
    int n = (int)size;
    if (size == 14 && memcmp(text, "fine-after-all", 14) == 0) {
        adag_init_fail("this message is dropped");
        return ADAG_OK;
    }
    if (size == 5 && memcmp(text, "nomem", 5) == 0) {
        adag_init_fail("no room for %d tables", 3);
        return ADAG_ERR_NO_MEMORY;
    }
    if (size == 5 && memcmp(text, "twice", 5) == 0) {
        adag_init_fail("the first reason");
        return adag_init_fail("the second reason");
    }
    if (size == 4 && memcmp(text, "long", 4) == 0) {
        char x[1001];
        memset(x, 'x', 1000);
        x[1000] = '\0';
        return adag_init_fail("%sEND", x);
    }
    if (size == 6 && memcmp(text, "silent", 6) == 0)
        return ADAG_ERR_INVALID;
    return adag_init_fail("cannot use config '%.*s'", n, text);
}

const adag_class_def_t test_refusing_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "refusing",
    .state_size = sizeof(counter_state_t), /* its add is the counter's */
    .init = refusing_init,
    .methods = counter_methods,
    .nmethods = 1,
};

/* a class whose init crashes the process: a real segfault when the init
 * bytes are "segv", exit(9) when they are "exit" (else it succeeds) */
static adag_status_t crashy_init(void *state, const void *data, size_t size)
{
    (void)state;
    if (size == 4 && memcmp(data, "segv", 4) == 0) {
        volatile uintptr_t nowhere = 16;
        *(volatile int *)nowhere = 1;
    }
    if (size == 4 && memcmp(data, "exit", 4) == 0)
        exit(9);
    return ADAG_OK;
}

const adag_class_def_t test_crashy_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "crashy",
    .state_size = 8,
    .init = crashy_init,
    .methods = counter_methods,
    .nmethods = 1,
};

ADAG_MODULE(&test_counter_class, &test_broken_class, &test_crashy_class, &test_tensor_class,
            &test_gpu_stage_class, &test_probe_class, &test_geom_class, &test_refusing_class);
