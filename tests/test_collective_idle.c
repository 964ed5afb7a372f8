/*
 * An idle DAG on a shared communicator gives its tickets back (suite
 * "collective_idle"). Members on emulated devices whose method takes a
 * host argument and leaves its work on the stream hold that execution's
 * host inputs until the work is done, released at a later execution's
 * start; the communicator's tickets, read only by the loop, are given back
 * at once. Else a DAG that ran and went idle keeps its last ticket, and
 * its destroy (which waits for every rank to give back the tickets of its
 * executions) waits out the whole teardown timeout. The members' results
 * are checked against the C reference; each destroy must end well within
 * the teardown timeout.
 */
#include "common/clock.h"
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

enum { N = 2, ELEMS = 8, INFLIGHT = 2, TEARDOWN_MS = 4000 };

/* x (a tensor on the members' devices) and tag (host bytes) in; every
 * member's apply_with(x, tag), summed by an allreduce. */
static adag_dag_h build(adag_runtime_h rt, adag_actor_h *a)
{
    adag_graph_h g;
    adag_node_h x, tag, parts[N], sums[N];
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_graph_input(g, 1, &tag));
    ASSERT_OK(adag_node_tensor(x, NULL));
    for (unsigned m = 0; m < N; m++) {
        adag_node_h args[2] = {x, tag};
        ASSERT_OK(adag_graph_bind(g, a[m], "apply_with", args, 2, &parts[m]));
        ASSERT_OK(adag_node_tensor(parts[m], NULL));
    }
    ASSERT_OK(adag_graph_allreduce(g, parts, N, ADAG_REDUCE_SUM, sums));
    ASSERT_OK(adag_graph_output(g, sums, N));
    adag_compile_params_t cp = h_compile_params(INFLIGHT, 4096, 0, TEARDOWN_MS);
    adag_dag_h dag;
    ASSERT_OK(adag_graph_compile(g, &cp, &dag));
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

static void run(adag_dag_h dag, int runs, int32_t salt)
{
    for (int k = 0; k < runs; k++) {
        int32_t x[ELEMS];
        for (int i = 0; i < ELEMS; i++)
            x[i] = salt * 1000 + k * 10 + i;
        adag_value_t in[2] = {{.data = x, .size = sizeof(x), .kind = ADAG_VALUE_TENSOR,
                               .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {ELEMS}},
                              {.data = "tag", .size = 3}};
        adag_ref_t ref;
        adag_value_t out[N];
        ASSERT_OK(adag_dag_execute(dag, in, 2, 0, &ref));
        ASSERT_OK(adag_dag_get(dag, ref, out, N, 20000));
        for (unsigned m = 0; m < N; m++) {
            const int32_t *y = out[m].data;
            cr_assert_eq(out[m].size, sizeof x);
            for (int i = 0; i < ELEMS; i++) {
                uint32_t want = 0;
                for (int s = 1; s <= N; s++) {
                    int32_t p;
                    stage_apply(ADAG_DTYPE_I32, s, &x[i], &p);
                    want += (uint32_t)p;
                }
                cr_assert_eq((uint32_t)y[i], want, "execution %d, member %u, element %d", k, m, i);
            }
        }
        adag_dag_release(dag, ref);
    }
}

static void destroy_in_time(adag_dag_h dag, const char *what)
{
    int64_t t0 = adag__now_ns();
    ASSERT_OK(adag_dag_destroy(dag));
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    /* a held ticket waits the whole TEARDOWN_MS; a destroy that does not
     * takes milliseconds */
    cr_assert_lt(ms, TEARDOWN_MS / 2, "destroying %s took %.0f ms (teardown timeout %d ms): a rank "
                 "kept the ticket of its last execution", what, ms, TEARDOWN_MS);
}

static void idle_dags_give_tickets_back(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[N];
    for (unsigned m = 0; m < N; m++) {
        char name[16], dev[16];
        snprintf(name, sizeof(name), "m%u", m);
        snprintf(dev, sizeof(dev), "emu:%u", m);
        a[m] = h_gpu_stage(rt, pl, name, dev, (int)m + 1, 0);
    }
    /* two DAGs over the same members: their communicator is shared */
    adag_dag_h d1 = build(rt, a), d2 = build(rt, a);
    run(d1, 3, 1);
    run(d2, 2, 2);
    run(d1, 1, 3);
    destroy_in_time(d1, "the first DAG");
    run(d2, 1, 4); /* the other DAG goes on */
    destroy_in_time(d2, "the second DAG");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

Test(collective_idle, idle_dags_give_tickets_back_process, .timeout = 120)
{
    idle_dags_give_tickets_back(ADAG_PLACEMENT_PROCESS);
}

Test(collective_idle, idle_dags_give_tickets_back_thread, .timeout = 120)
{
    idle_dags_give_tickets_back(ADAG_PLACEMENT_THREAD);
}
