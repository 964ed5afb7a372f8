/*
 * Suite "client": what every client used to write by hand and the library
 * now owns. adag_value_tensor (a tensor value in one call, and what
 * execute says of one that cannot be); a class's init saying why it failed
 * (adag_init_fail), for thread and process actors; static tensor shapes
 * checked against the slot capacity when the graph compiles; each actor's
 * placement and device in the DOT graph.
 */
#include "helpers.h"
#include "remote_rig.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- adag_value_tensor ---- */

Test(client, value_tensor_fills_every_field)
{
    int64_t shape[3] = {4, 8, 3};
    float data[96];
    adag_value_t v = adag_value_tensor(data, ADAG_DTYPE_F32, 3, shape);
    cr_assert(v.data == data && v.size == 96 * sizeof(float) && v.kind == ADAG_VALUE_TENSOR &&
                  v.dtype == ADAG_DTYPE_F32 && v.ndim == 3 && v.device == ADAG_DEVICE_HOST,
              "size %zu kind %d dtype %d ndim %u device %d", v.size, v.kind, v.dtype, v.ndim,
              v.device);
    for (unsigned i = 0; i < ADAG_MAX_DIMS; i++)
        cr_assert_eq(v.shape[i], i < 3 ? shape[i] : 0, "shape[%u]", i);
    for (unsigned i = 0; i < 4; i++)
        cr_assert_eq(v.reserved[i], 0);
    /* a scalar is one element; a zero dimension is 0 bytes, however large the others */
    v = adag_value_tensor(data, ADAG_DTYPE_BF16, 0, NULL);
    cr_assert(v.size == 2 && v.ndim == 0);
    int64_t empty[2] = {INT64_MAX, 0};
    cr_assert_eq(adag_value_tensor(data, ADAG_DTYPE_F64, 2, empty).size, 0);
    int64_t bools[1] = {5};
    cr_assert_eq(adag_value_tensor(data, ADAG_DTYPE_BOOL, 1, bools).size, 5);
}

/* Executes v on a thread counter's arg_value (which returns the value
 * its method saw) and returns execute's status: on ADAG_OK *seen is that
 * value, else msg holds execute's message. */
static adag_status_t run_value(adag_value_t v, adag_value_t *seen, char *msg, size_t len)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .name = "t", .method = "arg_value");
    adag_ref_t ref;
    adag_status_t st = adag_dag_execute(dag, &v, 1, 0, &ref);
    snprintf(msg, len, "%s", adag_last_error());
    if (st == ADAG_OK) {
        adag_value_t out;
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
        cr_assert_eq(out.size, sizeof(*seen));
        memcpy(seen, out.data, sizeof(*seen));
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
    return st;
}

Test(client, value_tensor_is_what_execute_takes)
{
    int64_t shape[2] = {3, 5};
    int32_t data[15];
    for (int i = 0; i < 15; i++)
        data[i] = i * i;
    adag_value_t seen;
    char msg[512];
    ASSERT_OK(
        run_value(adag_value_tensor(data, ADAG_DTYPE_I32, 2, shape), &seen, msg, sizeof(msg)));
    cr_assert(seen.kind == ADAG_VALUE_TENSOR && seen.dtype == ADAG_DTYPE_I32 && seen.ndim == 2 &&
                  seen.shape[0] == 3 && seen.shape[1] == 5 && seen.size == sizeof(data),
              "the method saw kind %d dtype %d ndim %u size %zu", seen.kind, seen.dtype, seen.ndim,
              seen.size);
}

/* A tensor that cannot be: size SIZE_MAX, and execute says why. */
static void refused(adag_dtype_t dtype, unsigned ndim, const int64_t *shape, const char *why)
{
    static char data[8];
    adag_value_t v = adag_value_tensor(data, dtype, ndim, shape);
    cr_assert_eq(v.size, SIZE_MAX, "dtype %d ndim %u: size %zu", dtype, ndim, v.size);
    adag_value_t seen;
    char msg[512];
    ASSERT_ST(run_value(v, &seen, msg, sizeof(msg)), ADAG_ERR_INVALID);
    cr_assert(strstr(msg, "adag_dag_execute: input 0") && strstr(msg, why),
              "execute's message \"%s\" lacks \"%s\"", msg, why);
}

Test(client, value_tensor_that_cannot_be)
{
    int64_t two[2] = {2, 2};
    refused(ADAG_DTYPE_BYTES, 2, two, "dtype 0 (bytes) is not a tensor dtype");
    refused((adag_dtype_t)99, 2, two, "dtype 99 (?) is not a tensor dtype");
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    refused(ADAG_DTYPE_U8, 9, nine, "ndim 9 exceeds ADAG_MAX_DIMS (8)");
    int64_t negative[2] = {2, -3};
    refused(ADAG_DTYPE_U8, 2, negative, "shape[1] is -3");
    int64_t huge[2] = {(int64_t)1 << 62, (int64_t)1 << 62};
    refused(ADAG_DTYPE_F32, 2, huge, "has more bytes than a size_t holds");
    int64_t wide[1] = {INT64_MAX};
    refused(ADAG_DTYPE_F64, 1, wide, "has more bytes than a size_t holds");
    refused(ADAG_DTYPE_F32, 2, NULL,
            "size is 18446744073709551615 bytes but a f32[0,0] tensor "
            "is 0 bytes");
}

/* ---- a class's init says why it failed (adag_init_fail) ---- */

#define INIT_TOKEN "init fails, and says why"

/* A "refusing" actor named name with init bytes init: adag_actor_create's status. */
static adag_status_t create_refusing(adag_runtime_h rt, adag_placement_t pl, const h_agent_t *ag,
                                     const char *name, const char *init, adag_actor_h *a)
{
    adag_actor_params_t p = h_actor_params_init("refusing", pl, name, init, strlen(init));
    if (pl == ADAG_PLACEMENT_REMOTE) {
        p.field_mask |= ADAG_ACTOR_PARAM_MODULE | ADAG_ACTOR_PARAM_NODE;
        p.module_path = ADAG_TEST_MODULE;
        p.node = ag->addr;
    }
    *a = NULL;
    return adag_actor_create(rt, &p, a);
}

static void init_says_why(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    h_agent_t ag;
    if (pl == ADAG_PLACEMENT_REMOTE) {
        h_agent_start(&ag, INIT_TOKEN, 0);
        unsetenv("ADAG_TOKEN");
        setenv("ADAG_TOKEN_FILE", ag.token, 1);
    }
    adag_runtime_h rt = h_runtime();
    ASSERT_OK(adag_class_register(rt, &test_refusing_class));
    adag_actor_h a;
    ASSERT_ST(create_refusing(rt, pl, &ag, "r1", "/etc/model.conf", &a), ADAG_ERR_INVALID);
    cr_assert_null(a);
    ASSERT_MSG_HAS("actor r1: init of class refusing failed: cannot use config '/etc/model.conf'");
    /* its status stays: ADAG_ERR_NO_MEMORY */
    ASSERT_ST(create_refusing(rt, pl, &ag, "r2", "nomem", &a), ADAG_ERR_NO_MEMORY);
    ASSERT_MSG_HAS("actor r2: init of class refusing failed: no room for 3 tables");
    /* the first reason counts */
    ASSERT_ST(create_refusing(rt, pl, &ag, "r3", "twice", &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("failed: the first reason");
    cr_assert_null(strstr(h_msg(), "second"), "%s", h_msg());
    /* bounded: its first 255 bytes */
    ASSERT_ST(create_refusing(rt, pl, &ag, "r4", "long", &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("actor r4: init of class refusing failed: xxxxxxxx");
    const char *x = strstr(h_msg(), "failed: ") + 8;
    cr_assert_eq(strspn(x, "x"), 255, "%zu x's kept of 1000: %s", strspn(x, "x"), h_msg());
    cr_assert_null(strstr(h_msg(), "END"));
    /* no message: the status, and nothing left over from the inits before */
    ASSERT_ST(create_refusing(rt, pl, &ag, "r5", "silent", &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("actor r5: init of class refusing returned ADAG_ERR_INVALID");
    cr_assert_null(strstr(h_msg(), "reason"), "%s", h_msg());
    /* an init that gives a message and returns ADAG_OK: created, and it works
     * (the name of a failed creation is free again) */
    ASSERT_OK(create_refusing(rt, pl, &ag, "r1", "fine-after-all", &a));
    cr_assert_not_null(a);
    adag_dag_h dag = h_compile(h_chain_graph(rt, &a, 1, "add"), 2, 64);
    cr_assert_eq(h_roundtrip(dag, 41), 41);
    ASSERT_OK(adag_runtime_destroy(rt));
    if (pl == ADAG_PLACEMENT_REMOTE) {
        h_agent_stop(&ag);
        h_agent_cleanup(&ag);
        unsetenv("ADAG_TOKEN_FILE");
    }
    h_assert_clean(&snap);
}

Test(client, init_says_why_thread, .timeout = 60)
{
    init_says_why(ADAG_PLACEMENT_THREAD);
}

Test(client, init_says_why_process, .timeout = 60)
{
    init_says_why(ADAG_PLACEMENT_PROCESS);
}

Test(client, init_says_why_remote, .timeout = 90)
{
    init_says_why(ADAG_PLACEMENT_REMOTE);
}

/* Outside an init: refused, nothing recorded for a later init. */
Test(client, init_fail_outside_an_init)
{
    ASSERT_ST(adag_init_fail("not in an init"), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("adag_init_fail: no class's init runs on this thread");
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("broken", ADAG_PLACEMENT_THREAD);
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("init of class broken returned ADAG_ERR_INVALID");
    cr_assert_null(strstr(h_msg(), "not in an init"), "%s", h_msg());
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---- static and per-execution shapes ---- */

/* Only a dtype or only a shape is static: the size is per execution, checked there. */
Test(client, partly_static_is_checked_per_execution, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "p", 0);
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h out = h_bind1(g, a, "add", h_input(g, 0));
    adag_tensor_params_t tp = {
        .field_mask = ADAG_TENSOR_PARAM_SHAPE, .ndim = 1, .shape = {1 << 20}};
    ASSERT_OK(adag_node_tensor(out, &tp));
    ASSERT_OK(adag_graph_output(g, &out, 1));
    adag_dag_h dag = h_compile(g, 2, 4096);
    ASSERT_OK(adag_runtime_destroy(rt));
    (void)dag;
}

/* ---- the DOT graph names each actor's placement and device ---- */

static adag_actor_h counter_on(adag_runtime_h rt, adag_placement_t pl, const h_agent_t *ag,
                               const char *name, const char *device)
{
    static const int64_t zero = 0;
    adag_actor_params_t p = h_actor_params_init("counter", pl, name, &zero, sizeof(zero));
    if (device) {
        p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
        p.device = device;
    }
    if (pl == ADAG_PLACEMENT_REMOTE) {
        p.field_mask |= ADAG_ACTOR_PARAM_MODULE | ADAG_ACTOR_PARAM_NODE;
        p.module_path = ADAG_TEST_MODULE;
        p.node = ag->addr;
    }
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    return a;
}

Test(client, dot_shows_placement_and_device, .timeout = 90)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    h_agent_t ag;
    h_agent_start(&ag, INIT_TOKEN, 0);
    unsetenv("ADAG_TOKEN");
    setenv("ADAG_TOKEN_FILE", ag.token, 1);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[5] = {
        counter_on(rt, ADAG_PLACEMENT_THREAD, &ag, "t0", "emu:0"),
        counter_on(rt, ADAG_PLACEMENT_PROCESS, &ag, "p1", "emu:1"),
        counter_on(rt, ADAG_PLACEMENT_THREAD, &ag, "t2", NULL),
        counter_on(rt, ADAG_PLACEMENT_REMOTE, &ag, "r3", "emu:2"),
        counter_on(rt, ADAG_PLACEMENT_PROCESS, &ag, "p4", NULL),
    };
    adag_dag_h dag = h_compile(h_chain_graph(rt, a, 5, "add"), 4, 64);
    cr_assert_eq(h_roundtrip(dag, 17), 17);
    char *dot = h_dot(dag), want[160];
    const char *labels[] = {
        "label=\"t0 (thread, device emu:0)\\l", "label=\"p1 (process, device emu:1)\\l",
        "label=\"t2 (thread, no device)\\l", NULL, "label=\"p4 (process, no device)\\l"};
    for (int i = 0; i < 5; i++) {
        if (labels[i])
            snprintf(want, sizeof(want), "%s", labels[i]);
        else
            snprintf(want, sizeof(want), "label=\"r3 (remote, node %s, device emu:2)\\l", ag.addr);
        cr_assert(strstr(dot, want), "no \"%s\" in:\n%s", want, dot);
    }
    free(dot);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_agent_stop(&ag);
    h_agent_cleanup(&ag);
    unsetenv("ADAG_TOKEN_FILE");
    h_assert_clean(&snap);
}
