/*
 * Suite "exec", continued: a method that fails, outputs and inputs larger
 * than a slot, get timeouts, a full window, releases without get, and the
 * DAG's statistics after all of these.
 */
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A method fails: get reports it, the downstream method does not run, the
 * DAG keeps working. */
static void failing_method(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2];
    adag_dag_h dag = H_DAG(rt, .pl = pl, .n = 2, .names = (const char *const[]){"gate", "down"},
                           .offsets = (const int64_t[]){0, 1000},
                           .methods = (const char *const[]){"fail_if_negative", "add"},
                           .max_inflight = 4, .actors = a);
    adag_actor_h down = a[1];

    /* probe: down.echo(input) then down.calls (bound after the echo, so it
     * runs in the execution's turn on the actor) */
    adag_graph_h gp = NULL;
    ASSERT_OK(adag_graph_create(rt, &gp));
    adag_node_h po[2];
    po[1] = h_bind1(gp, down, "echo", h_input(gp, 0));
    po[0] = h_bind(gp, down, "calls", NULL, 0);
    ASSERT_OK(adag_graph_output(gp, po, 2));
    adag_dag_h probe = h_compile(gp, 0, 0);
    int64_t zero = 0, pr[2];

    cr_assert_eq(h_roundtrip(dag, 5), 1005);
    h_run_i64(probe, &zero, 1, pr, 2);
    cr_assert_eq(pr[0], 1, "down.calls = %lld after one add (echo %lld)", (long long)pr[0],
                 (long long)pr[1]);

    adag_value_t out;
    adag_ref_t ref = h_execute(dag, -5);
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 10000), ADAG_ERR_METHOD);
    ASSERT_MSG_HAS("gate.fail_if_negative: negative input -5");
    ASSERT_MSG_HAS("actor gate");
    /* a second get reports the same failure */
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 0), ADAG_ERR_METHOD);
    ASSERT_MSG_HAS("negative input -5");
    ASSERT_OK(adag_dag_release(dag, ref));

    /* down.add did not run */
    h_run_i64(probe, &zero, 1, pr, 2);
    cr_assert_eq(pr[0], 1, "the method after a failed one ran (calls = %lld)",
                 (long long)pr[0]);

    /* the next executions work, several failures in flight too */
    cr_assert_eq(h_roundtrip(dag, 7), 1007);
    adag_ref_t refs[4];
    int64_t xs[4] = {-1, 2, -3, 4};
    for (int i = 0; i < 4; i++)
        refs[i] = h_execute(dag, xs[i]);
    for (int i = 0; i < 4; i++) {
        adag_status_t st = adag_dag_get(dag, refs[i], &out, 1, 10000);
        if (xs[i] < 0) {
            ASSERT_ST(st, ADAG_ERR_METHOD);
            char want[64];
            snprintf(want, sizeof(want), "negative input %lld", (long long)xs[i]);
            ASSERT_MSG_HAS(want);
        } else {
            ASSERT_OK(st);
            cr_assert_eq(h_val_i64(out), xs[i] + 1000);
        }
        ASSERT_OK(adag_dag_release(dag, refs[i]));
    }
    h_run_i64(probe, &zero, 1, pr, 2);
    cr_assert_eq(pr[0], 4, "down.calls = %lld, expected 4", (long long)pr[0]);

    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.failed, 3);
    cr_assert_eq(st.completed, 4);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, failing_method, 30)

/* A method writes more than the slot holds. */
static void output_too_large(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag =
        H_DAG(rt, .pl = pl, .name = "grower", .method = "grow", .max_inflight = 2, .cap = 4096);
    adag_value_t out;
    adag_ref_t ref = h_execute(dag, 5000);
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 10000), ADAG_ERR_TOO_LARGE);
    ASSERT_MSG_HAS("5000");
    ASSERT_MSG_HAS("4096");
    ASSERT_OK(adag_dag_release(dag, ref));
    for (int i = 0; i < 3; i++) {
        int64_t n = i == 0 ? 4096 : 100 + i;
        ref = h_execute(dag, n);
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
        cr_assert_eq(out.size, (size_t)n);
        for (size_t k = 0; k < out.size; k++)
            cr_assert_eq(((const unsigned char *)out.data)[k], 0xab);
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.failed, 1);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, output_too_large, 30)

/* An input larger than the slot is refused by execute. */
static void input_too_large(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag =
        H_DAG(rt, .pl = pl, .name = "echoer", .method = "echo", .max_inflight = 2, .cap = 4096);
    unsigned char *buf = malloc(5000);
    cr_assert_not_null(buf);
    for (int i = 0; i < 5000; i++)
        buf[i] = (unsigned char)(i * 31 + 7);
    adag_value_t v = {.data = buf, .size = 5000}, out;
    adag_ref_t ref;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_TOO_LARGE);
    ASSERT_MSG_HAS("5000");
    /* exactly the capacity fits */
    for (int round = 0; round < 3; round++) {
        v.size = round == 0 ? 4096 : (size_t)(10 + round);
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
        cr_assert_eq(out.size, v.size);
        cr_assert(memcmp(out.data, buf, v.size) == 0, "echo changed the bytes");
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    free(buf);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, input_too_large, 30)

/* get times out while the method sleeps; the ref stays valid. */
static void get_timeout(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "sleeper", .method = "sleep_ms");
    adag_value_t out;
    adag_ref_t ref = h_execute(dag, 500);
    double t0 = h_now_ms();
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 50), ADAG_ERR_TIMEOUT);
    double waited = h_now_ms() - t0;
    cr_assert(waited < 450, "get(timeout 50) returned after %.0f ms", waited);
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 0), ADAG_ERR_TIMEOUT);
    cr_assert_eq(h_get_i64(dag, ref, 10000), 500);
    ASSERT_OK(adag_dag_release(dag, ref));
    cr_assert_eq(h_roundtrip(dag, 1), 1);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, get_timeout, 30)

/* With max_inflight unreleased refs: non-blocking execute says AGAIN,
 * blocking execute times out naming release. */
static void window_full(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "w", .offset = 1, .method = "add",
                           .max_inflight = 2, .exec_timeout = 100);
    int64_t x = 10;
    adag_value_t v = h_i64v(&x), out;
    adag_ref_t r0 = h_execute(dag, x), r1 = h_execute(dag, x), r2;
    cr_assert_eq(h_get_i64(dag, r0, 10000), 11);
    ASSERT_OK(adag_dag_get(dag, r1, &out, 1, 10000));
    ASSERT_ST(adag_dag_execute(dag, &v, 1, ADAG_EXECUTE_NONBLOCK, &r2), ADAG_ERR_AGAIN);
    double t0 = h_now_ms();
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &r2), ADAG_ERR_TIMEOUT);
    double waited = h_now_ms() - t0;
    ASSERT_MSG_HAS_CI("release");
    char refstr[32];
    snprintf(refstr, sizeof(refstr), "%llu", (unsigned long long)r0);
    ASSERT_MSG_HAS(refstr);
    cr_assert(waited < 5000, "execute with a 100 ms timeout took %.0f ms", waited);
    /* the results are still valid */
    cr_assert_eq(h_get_i64(dag, r0, 0), 11);
    /* one release makes room for one */
    ASSERT_OK(adag_dag_release(dag, r0));
    x = 20;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, ADAG_EXECUTE_NONBLOCK, &r2));
    ASSERT_ST(adag_dag_execute(dag, &v, 1, ADAG_EXECUTE_NONBLOCK, &r0), ADAG_ERR_AGAIN);
    cr_assert_eq(h_get_i64(dag, r2, 10000), 21);
    ASSERT_OK(adag_dag_release(dag, r1));
    ASSERT_OK(adag_dag_release(dag, r2));
    cr_assert_eq(h_roundtrip(dag, 2), 3);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, window_full, 30)

/* Release without get (also before the execution finished). */
static void release_before_get(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    /* slow.sleep_ms -> plus.add */
    adag_dag_h dag = H_DAG(rt, .pl = pl, .n = 2, .names = (const char *const[]){"slow", "plus"},
                           .offsets = (const int64_t[]){0, 1000},
                           .methods = (const char *const[]){"sleep_ms", "add"}, .max_inflight = 4);
    /* 10 executions released at once (more than the window) */
    for (int i = 0; i < 10; i++)
        ASSERT_OK(adag_dag_release(dag, h_execute(dag, 20 + i)));
    /* the next results are the right ones, not stale dropped ones */
    for (int64_t i = 0; i < 3; i++)
        cr_assert_eq(h_roundtrip(dag, i), i + 1000);
    /* mixed: release some finished ones without get */
    adag_ref_t refs[4];
    for (int i = 0; i < 4; i++)
        refs[i] = h_execute(dag, i);
    cr_assert_eq(h_get_i64(dag, refs[3], 10000), 1003);
    for (int i = 0; i < 4; i++)
        ASSERT_OK(adag_dag_release(dag, refs[i]));
    cr_assert_eq(h_roundtrip(dag, 5), 1005);
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.executed, 18);
    cr_assert_eq(st.released, 18);
    cr_assert_eq(st.completed, 5);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, release_before_get, 30)

/* The statistics count executed, completed, failed and released executions. */
static void dag_stats(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = pl, .n = 2, .names = (const char *const[]){"gate", "b"},
                           .offsets = (const int64_t[]){0, 1},
                           .methods = (const char *const[]){"fail_if_negative", "add"},
                           .max_inflight = 4, .cap = 4096);
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.executed, 0);
    cr_assert_eq(st.completed, 0);
    cr_assert_eq(st.max_inflight, 4);
    cr_assert(st.slot_capacity >= 4096 && st.slot_capacity < 8192, "slot_capacity %zu",
              st.slot_capacity);
    cr_assert_eq(st.nchannels, 3, "nchannels %u (input, gate, b)", st.nchannels);
    cr_assert(st.shm_bytes >= (size_t)3 * 4 * 4096, "shm_bytes %zu", st.shm_bytes);

    for (int64_t i = 0; i < 5; i++)
        cr_assert_eq(h_roundtrip(dag, i), i + 1);
    adag_value_t out;
    adag_ref_t ref = h_execute(dag, -1);
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 10000), ADAG_ERR_METHOD);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_release(dag, h_execute(dag, -1))); /* released without get */
    adag_ref_t pending = h_execute(dag, 1); /* not yet released */
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.executed, 8, "executed %llu", (unsigned long long)st.executed);
    cr_assert_eq(st.completed, 5, "completed %llu", (unsigned long long)st.completed);
    cr_assert_eq(st.failed, 1, "failed %llu", (unsigned long long)st.failed);
    cr_assert_eq(st.released, 7, "released %llu", (unsigned long long)st.released);
    ASSERT_OK(adag_dag_release(dag, pending));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, dag_stats, 30)
