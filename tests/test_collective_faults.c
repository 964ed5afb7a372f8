/*
 * Collectives when something goes wrong (suite "collective_faults"), on
 * emulated devices: a method that fails upstream of one member fails
 * every output of that execution and the next one runs; a member stopped
 * (SIGSTOP) before the collective or stuck inside it (a slow kernel) fails
 * the DAG within its comm timeout naming the collective and the member; a
 * member killed mid-stream fails the DAG with ADAG_ERR_ACTOR_DIED; other
 * DAGs go on; two live DAGs over one group both run. Stopped and killed
 * members also as host actors (host tensors, no device).
 */
#include "common/clock.h"
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { N = 4, ELEMS = 16 };

/* Members on emu:0..3, or host actors when members_on_host is set. */
static int members_on_host;

static void members_make(adag_runtime_h rt, adag_placement_t pl, adag_actor_h *a, unsigned n,
                         const char *prefix, int slow_member_us)
{
    for (unsigned m = 0; m < n; m++) {
        char name[16], dev[16];
        snprintf(name, sizeof(name), "%s%u", prefix, m);
        snprintf(dev, sizeof(dev), "emu:%u", m % 4);
        a[m] = h_gpu_stage(rt, pl, name, members_on_host ? NULL : dev, (int)m + 1,
                           m == 0 ? slow_member_us : 0);
    }
}

/* The allreduce of every member's stage of the input; the outputs are the
 * results of members 0..nout-1 (nout 0: all). */
static adag_dag_h allreduce_dag(adag_runtime_h rt, adag_actor_h *a, unsigned n,
                                const char *method, int comm_timeout_ms, unsigned nout)
{
    adag_graph_h g;
    adag_node_h x, parts[N], outs[N];
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    for (unsigned m = 0; m < n; m++) {
        ASSERT_OK(adag_graph_bind(g, a[m], method, &x, 1, &parts[m]));
        ASSERT_OK(adag_node_tensor(parts[m], NULL));
    }
    ASSERT_OK(adag_graph_allreduce(g, parts, n, ADAG_REDUCE_SUM, outs));
    ASSERT_OK(adag_graph_output(g, outs, nout ? nout : n));
    adag_compile_params_t cp = h_compile_params(2, 4096, 0, 0);
    if (comm_timeout_ms) {
        cp.field_mask |= ADAG_COMPILE_PARAM_COMM_TIMEOUT;
        cp.comm_timeout_ms = comm_timeout_ms;
    }
    adag_dag_h dag;
    ASSERT_OK(adag_graph_compile(g, &cp, &dag));
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

static adag_status_t run_outputs(adag_dag_h dag, unsigned n, unsigned nout, uint64_t k);
/* get's message in the last run_one / run_outputs */
static char last_msg[1024];

static adag_value_t input(int32_t *x, uint64_t k)
{
    for (unsigned i = 0; i < ELEMS; i++)
        x[i] = (int32_t)(k * 5 + i) - 7;
    adag_value_t v = {.data = x, .size = ELEMS * 4, .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {ELEMS}};
    return v;
}

/* One execution; checks every output is the member-order sum of the
 * stages when it succeeds. Returns get's status. */
static adag_status_t run_one(adag_dag_h dag, unsigned n, uint64_t k)
{
    return run_outputs(dag, n, n, k);
}

static adag_status_t run_outputs(adag_dag_h dag, unsigned n, unsigned nout, uint64_t k)
{
    int32_t x[ELEMS];
    adag_value_t v = input(x, k), out[N];
    adag_ref_t ref;
    adag_status_t st = adag_dag_execute(dag, &v, 1, 0, &ref);
    if (st != ADAG_OK) { /* a DAG that failed refuses new executions */
        snprintf(last_msg, sizeof(last_msg), "%s", adag_last_error());
        return st;
    }
    st = adag_dag_get(dag, ref, out, nout, 30000);
    snprintf(last_msg, sizeof(last_msg), "%s", adag_last_error());
    if (st == ADAG_OK) {
        for (unsigned m = 0; m < nout; m++)
            for (unsigned i = 0; i < ELEMS; i++) {
                int32_t want = 0, got;
                for (unsigned r = 0; r < n; r++) {
                    int32_t p;
                    stage_apply(ADAG_DTYPE_I32, (int)r + 1, &x[i], &p);
                    want = (int32_t)((uint32_t)want + (uint32_t)p);
                }
                memcpy(&got, (const char *)out[m].data + 4 * i, 4);
                cr_assert_eq(got, want, "execution %llu, member %u, element %u",
                             (unsigned long long)k, m, i);
            }
    }
    /* a failed execution's ref is released too (a failed DAG refuses it) */
    if (st == ADAG_OK || st == ADAG_ERR_METHOD)
        ASSERT_OK(adag_dag_release(dag, ref));
    return st;
}

/* Member 1 (stage 2) fails executions ref % 4 == 1: every output of those
 * fails with its message; every other execution is right. */
Test(collective_faults, method_error_reaches_every_output, .timeout = 120)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[N];
    members_make(rt, ADAG_PLACEMENT_PROCESS, a, N, "m", 0);
    /* the outputs are member 0's only: its own method never fails */
    adag_dag_h dag = allreduce_dag(rt, a, N, "apply_flaky", 0, 1);
    for (uint64_t k = 0; k < 12; k++) {
        adag_status_t st = run_outputs(dag, N, 1, k);
        if (k % 4 == 1) {
            cr_assert_eq(st, ADAG_ERR_METHOD, "execution %llu: %s", (unsigned long long)k,
                         adag_status_str(st));
            cr_assert(strstr(last_msg, "stage 2 fails execution"), "%s",
                      last_msg);
        } else {
            cr_assert_eq(st, ADAG_OK, "execution %llu: %s", (unsigned long long)k,
                         last_msg);
        }
    }
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* SIGSTOP of a member: the others wait for it (on the host if it stopped
 * before the members' agreement, on the device if after) until the comm
 * timeout, then the DAG fails naming the collective and the member;
 * another DAG over other actors goes on. */
static void stopped_member_fails_the_dag(void)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[N], b[2];
    members_make(rt, ADAG_PLACEMENT_PROCESS, a, N, "m", 0);
    members_make(rt, ADAG_PLACEMENT_PROCESS, b, 2, "other", 0);
    adag_dag_h dag = allreduce_dag(rt, a, N, "apply", 300, 0);
    adag_dag_h other = allreduce_dag(rt, b, 2, "apply", 300, 0);
    cr_assert_eq(run_one(dag, N, 0), ADAG_OK);
    cr_assert_eq(kill(adag_actor_pid(a[2]), SIGSTOP), 0);
    /* stopped before execution 1 reaches it (a member stopped after its
     * part of the collective is not a communication fault: its result is
     * just late, and get's own timeout says so) */
    for (int i = 0; i < 2000 && h_proc_state(adag_actor_pid(a[2])) != 'T'; i++)
        usleep(1000);
    cr_assert_eq(h_proc_state(adag_actor_pid(a[2])), 'T', "m2 did not stop");
    int64_t t0 = adag__now_ns();
    adag_status_t st = run_one(dag, N, 1);
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    cr_assert_eq(st, ADAG_ERR_TIMEOUT, "%s: %s", adag_status_str(st), last_msg);
    cr_assert(strstr(last_msg, "allreduce#0") && strstr(last_msg, "m2"),
              "the message names neither the collective nor the member: %s", last_msg);
    cr_assert_lt(ms, 5000.0, "the stopped member was noticed after %.0f ms", ms);
    for (uint64_t k = 0; k < 5; k++)
        cr_assert_eq(run_one(other, 2, k), ADAG_OK, "the other DAG: %s", last_msg);
    cr_assert_eq(kill(adag_actor_pid(a[2]), SIGCONT), 0);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_dag_destroy(other));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(collective_faults, stopped_member_fails_the_dag, .timeout = 120)
{
    stopped_member_fails_the_dag();
}

Test(collective_faults, stopped_host_actor_fails_the_dag, .timeout = 120)
{
    members_on_host = 1;
    stopped_member_fails_the_dag();
}

/* A member whose kernel takes 4 s: the others' collective waits on the
 * device; the watchdog fails the DAG within the timeout, naming it. */
Test(collective_faults, stuck_collective_times_out, .timeout = 120)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[N];
    members_make(rt, ADAG_PLACEMENT_PROCESS, a, N, "m", 4000000);
    adag_dag_h dag = allreduce_dag(rt, a, N, "apply", 300, 0);
    int64_t t0 = adag__now_ns();
    adag_status_t st = run_one(dag, N, 0);
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    cr_assert_eq(st, ADAG_ERR_TIMEOUT, "%s: %s", adag_status_str(st), last_msg);
    cr_assert(strstr(last_msg, "collective allreduce#0") &&
                  strstr(last_msg, "did not complete within 300 ms") &&
                  strstr(last_msg, "(waiting for m0)"),
              "%s", last_msg);
    cr_assert_lt(ms, 3500.0, "the stuck collective failed after %.0f ms", ms);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* SIGKILL of a member mid-stream: ADAG_ERR_ACTOR_DIED, prompt destroy. */
static void killed_member_fails_the_dag(void)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[N];
    members_make(rt, ADAG_PLACEMENT_PROCESS, a, N, "m", 0);
    adag_dag_h dag = allreduce_dag(rt, a, N, "apply", 0, 0);
    for (uint64_t k = 0; k < 5; k++)
        cr_assert_eq(run_one(dag, N, k), ADAG_OK);
    cr_assert_eq(kill(adag_actor_pid(a[3]), SIGKILL), 0);
    adag_status_t st = ADAG_OK;
    for (uint64_t k = 5; k < 200 && st == ADAG_OK; k++)
        st = run_one(dag, N, k);
    cr_assert_eq(st, ADAG_ERR_ACTOR_DIED, "%s", last_msg);
    int64_t t0 = adag__now_ns();
    ASSERT_OK(adag_dag_destroy(dag));
    cr_assert_lt((double)(adag__now_ns() - t0) / 1e6, 3000.0);
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(collective_faults, killed_member_fails_the_dag, .timeout = 120)
{
    killed_member_fails_the_dag();
}

Test(collective_faults, killed_host_actor_fails_the_dag, .timeout = 120)
{
    members_on_host = 1;
    killed_member_fails_the_dag();
}

/* Two live DAGs over one TP group (prefill and decode), interleaved. */
Test(collective_faults, two_dags_share_a_group, .timeout = 120)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[N];
    members_make(rt, ADAG_PLACEMENT_THREAD, a, N, "m", 0);
    adag_dag_h d1 = allreduce_dag(rt, a, N, "apply", 0, 0);
    adag_dag_h d2 = allreduce_dag(rt, a, 2, "apply", 0, 0);
    for (uint64_t k = 0; k < 30; k++) {
        cr_assert_eq(run_one(d1, N, k), ADAG_OK, "%s", last_msg);
        cr_assert_eq(run_one(d2, 2, k + 100), ADAG_OK, "%s", last_msg);
    }
    ASSERT_OK(adag_dag_destroy(d1));
    ASSERT_OK(adag_dag_destroy(d2));
    ASSERT_OK(adag_runtime_destroy(rt));
}
