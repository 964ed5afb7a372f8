/* Actor class "bench" used by adag-bench: exported as a module (process
 * actors; with "bench_dev" of bench_device.c) and linked into adag-bench
 * (thread actors). Its "pass" method is the tests' "echo"
 * (tests/modules/shared_methods.c, compiled into both). */
#include "bench_actors.h"
#include "shared_methods.h"

#include <stdint.h>
#include <string.h>

/* sum2(a, b) -> 8 bytes: a[0..8) + b[0..8) as int64 (gathers two values) */
static adag_status_t bench_sum2(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t a, b;
    int64_t x = 0, y = 0;
    if (adag_call_arg(call, 0, &a) != ADAG_OK || adag_call_arg(call, 1, &b) != ADAG_OK ||
        a.size < 8 || b.size < 8)
        return adag_call_fail(call, "sum2 expects two values of at least 8 bytes");
    memcpy(&x, a.data, 8);
    memcpy(&y, b.data, 8);
    x += y;
    return adag_call_set_output(call, 0, &x, sizeof x);
}

/* check(payload) -> 8 bytes: the payload's first 8 bytes, after checking that
 * its last 8 bytes equal them (the driver stamps both ends per execution, so
 * a stale or torn slot fails); the payload itself is read in place. */
static adag_status_t bench_check(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t in;
    uint64_t head, tail;
    if (adag_call_arg(call, 0, &in) != ADAG_OK || in.size < 8)
        return adag_call_fail(call, "check expects at least 8 bytes");
    memcpy(&head, in.data, 8);
    memcpy(&tail, (const char *)in.data + in.size - 8, 8);
    if (head != tail)
        return adag_call_fail(call, "payload of %zu bytes is torn: %llu != %llu", in.size,
                              (unsigned long long)head, (unsigned long long)tail);
    return adag_call_set_output(call, 0, &head, sizeof head);
}

static const adag_method_def_t bench_methods[] = {
    {"pass", shared_echo, 1, 1}, /* x -> x: the smallest method that moves a value on */
    {"sum2", bench_sum2, 2, 1},
    {"check", bench_check, 1, 1},
};

const adag_class_def_t bench_actor_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "bench",
    .state_size = 8,
    .methods = bench_methods,
    .nmethods = sizeof(bench_methods) / sizeof(bench_methods[0]),
};

ADAG_MODULE(&bench_actor_class, &bench_device_class);
