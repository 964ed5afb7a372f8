/*
 * Tensors that travel by a communicator's send/recv (ADAG_TRANSPORT_COMM)
 * on the emulated devices, through the public API (suite
 * "comm_transport"): values checked element by element against the C
 * reference; the DAG's communicator is joined once and reused by the next
 * DAG over the same actors, two live DAGs get two; a failed DAG drops it;
 * a dead or stuck rank fails the DAG (never a hang); graphs that cannot use
 * a communicator, or whose ranks would wait on each other, do not compile.
 */
#include "common/clock.h"
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ELEMS = 48, INFLIGHT = 4 };

/* Host communicators a process maps (distinct segments). */
static int comms_mapped(pid_t pid)
{
    char path[64], line[512];
    unsigned long inodes[64];
    int n = 0;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    while (fgets(line, sizeof(line), f)) {
        if (!strstr(line, "memfd:adag-comm"))
            continue;
        unsigned long inode = 0;
        if (sscanf(line, "%*s %*s %*s %*s %lu", &inode) != 1)
            continue;
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= inodes[i] == inode;
        if (!seen && n < 64)
            inodes[n++] = inode;
    }
    fclose(f);
    return n;
}

static adag_actor_h *stages(adag_runtime_h rt, adag_placement_t pl, const char *const *devs,
                            unsigned n, int slow_us)
{
    static adag_actor_h a[8];
    for (unsigned s = 0; s < n; s++) {
        char name[16];
        snprintf(name, sizeof(name), "s%u", s + 1);
        a[s] = h_gpu_stage(rt, pl, name, devs[s], (int)s + 1, s == 0 ? slow_us : 0);
    }
    return a;
}

static adag_dag_h comm_chain(adag_runtime_h rt, adag_actor_h *a, unsigned n, int comm_timeout_ms)
{
    adag_compile_params_t cp = h_compile_params(INFLIGHT, 4096, 0, 0);
    if (comm_timeout_ms) {
        cp.field_mask |= ADAG_COMPILE_PARAM_COMM_TIMEOUT;
        cp.comm_timeout_ms = comm_timeout_ms;
    }
    adag_dag_h dag = NULL;
    ASSERT_OK(h_gpu_chain_via(rt, a, n, &cp, ADAG_TRANSPORT_COMM, &dag));
    return dag;
}

static void make_input(int32_t *x, uint64_t k)
{
    for (unsigned i = 0; i < ELEMS; i++)
        x[i] = (int32_t)(k * 31 + i * 7) - 500;
}

/* Runs `execs` executions, INFLIGHT at a time, checking each output
 * (stages 1..n applied in turn) against the C reference. */
static void run_checked(adag_dag_h dag, unsigned n, uint64_t execs, uint64_t salt)
{
    static int32_t in[INFLIGHT][ELEMS];
    adag_ref_t refs[INFLIGHT];
    for (uint64_t k = 0; k < execs + INFLIGHT; k++) {
        if (k >= INFLIGHT) {
            uint64_t j = k - INFLIGHT;
            adag_value_t out[2];
            ASSERT_OK(adag_dag_get(dag, refs[j % INFLIGHT], out, 2, 30000));
            cr_assert_eq(out[0].kind, ADAG_VALUE_TENSOR);
            cr_assert_eq(out[0].size, sizeof(in[0]), "execution %llu", (unsigned long long)j);
            for (unsigned i = 0; i < ELEMS; i++) {
                int32_t want = in[j % INFLIGHT][i], got;
                for (unsigned s = 1; s <= n; s++)
                    stage_apply(ADAG_DTYPE_I32, (int)s, &want, &want);
                memcpy(&got, (const char *)out[0].data + 4 * i, 4);
                cr_assert_eq(got, want, "execution %llu, element %u: %d, want %d",
                             (unsigned long long)j, i, got, want);
            }
            ASSERT_OK(adag_dag_release(dag, refs[j % INFLIGHT]));
        }
        if (k < execs) {
            make_input(in[k % INFLIGHT], k + salt);
            adag_value_t v = {.data = in[k % INFLIGHT], .size = sizeof(in[0]),
                              .kind = ADAG_VALUE_TENSOR, .dtype = ADAG_DTYPE_I32, .ndim = 1,
                              .shape = {ELEMS}};
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k % INFLIGHT]));
        }
    }
}

static const char *const four_devs[4] = {"emu:0", "emu:1", "emu:2", "emu:2"};

/* Four process stages on three devices, every hop by the communicator
 * (the last one between two actors of one device); the communicator is
 * kept by every rank after the DAG, reused by the next DAG (no second
 * segment), and a second DAG alive at the same time gets its own. */
Test(comm_transport, process_chain_reuse_and_two_live_dags, .timeout = 180)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h *a = stages(rt, ADAG_PLACEMENT_PROCESS, four_devs, 4, 0);
    adag_dag_h dag = comm_chain(rt, a, 4, 0);
    char *dot = h_dot(dag);
    cr_assert(strstr(dot, "host_comm send/recv emu:0 rank 0 -> emu:1 rank 1") &&
                  strstr(dot, "host_comm send/recv emu:2 rank 2 -> emu:2 rank 3"),
              "the DOT does not show the communicator edges:\n%s", dot);
    free(dot);
    run_checked(dag, 4, 1500, 0);
    for (int s = 0; s < 4; s++)
        cr_assert_eq(comms_mapped(adag_actor_pid(a[s])), 1, "s%d maps %d communicators", s + 1,
                     comms_mapped(adag_actor_pid(a[s])));
    ASSERT_OK(adag_dag_destroy(dag));
    for (int s = 0; s < 4; s++)
        cr_assert_eq(comms_mapped(adag_actor_pid(a[s])), 1,
                     "s%d dropped its communicator after a clean destroy", s + 1);

    /* the next DAG over the same actors: the same communicator */
    dag = comm_chain(rt, a, 4, 0);
    run_checked(dag, 4, 200, 7);
    for (int s = 0; s < 4; s++)
        cr_assert_eq(comms_mapped(adag_actor_pid(a[s])), 1,
                     "s%d joined a second communicator instead of reusing the first", s + 1);

    /* a second live DAG gets its own; both run, interleaved */
    adag_dag_h other = comm_chain(rt, a, 4, 0);
    for (int s = 0; s < 4; s++)
        cr_assert_eq(comms_mapped(adag_actor_pid(a[s])), 2, "s%d: %d communicators for two "
                     "live DAGs", s + 1, comms_mapped(adag_actor_pid(a[s])));
    for (int round = 0; round < 5; round++) {
        run_checked(dag, 4, 40, (uint64_t)round * 100);
        run_checked(other, 4, 40, (uint64_t)round * 100 + 50);
    }
    ASSERT_OK(adag_dag_destroy(other));
    ASSERT_OK(adag_dag_destroy(dag));
    for (int s = 0; s < 4; s++)
        ASSERT_OK(adag_actor_destroy(a[s]));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* Thread actors: the ranks join from threads of one process. */
Test(comm_transport, thread_chain, .timeout = 120)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h *a = stages(rt, ADAG_PLACEMENT_THREAD, four_devs, 4, 0);
    adag_dag_h dag = comm_chain(rt, a, 4, 0);
    run_checked(dag, 4, 800, 3);
    ASSERT_OK(adag_dag_destroy(dag));
    cr_assert_eq(comms_mapped(getpid()), 1, "the kept communicator: %d segments",
                 comms_mapped(getpid()));
    dag = comm_chain(rt, a, 4, 0);
    run_checked(dag, 4, 100, 9);
    cr_assert_eq(comms_mapped(getpid()), 1, "not reused: %d segments", comms_mapped(getpid()));
    ASSERT_OK(adag_dag_destroy(dag));
    for (int s = 0; s < 4; s++)
        ASSERT_OK(adag_actor_destroy(a[s]));
    cr_assert_eq(comms_mapped(getpid()), 0, "communicators left after the actors stopped");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* SIGKILL of a rank mid-stream: the DAG fails with ADAG_ERR_ACTOR_DIED,
 * destroy is prompt, the survivors drop the communicator, and a new DAG
 * over the survivors gets a new one and works. */
Test(comm_transport, killed_rank_fails_the_dag_and_drops_the_communicator, .timeout = 120)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h *a = stages(rt, ADAG_PLACEMENT_PROCESS, four_devs, 3, 0);
    adag_dag_h dag = comm_chain(rt, a, 3, 0);
    run_checked(dag, 3, 50, 0);
    int32_t x[ELEMS];
    make_input(x, 1);
    adag_value_t v = {.data = x, .size = sizeof(x), .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {ELEMS}};
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    cr_assert_eq(kill(adag_actor_pid(a[1]), SIGKILL), 0);
    adag_status_t st = ADAG_OK;
    for (int i = 0; i < 200 && st == ADAG_OK; i++) {
        adag_value_t out[2];
        st = adag_dag_get(dag, ref, out, 2, 30000);
        if (st == ADAG_OK) {
            ASSERT_OK(adag_dag_release(dag, ref));
            st = adag_dag_execute(dag, &v, 1, 0, &ref);
        }
    }
    cr_assert_eq(st, ADAG_ERR_ACTOR_DIED, "%s", adag_last_error());
    int64_t t0 = adag__now_ns();
    ASSERT_OK(adag_dag_destroy(dag));
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    cr_assert_lt(ms, 3000.0, "destroy took %.0f ms after a rank died", ms);
    cr_assert_eq(comms_mapped(adag_actor_pid(a[0])), 0, "s1 kept the failed DAG's communicator");
    cr_assert_eq(comms_mapped(adag_actor_pid(a[2])), 0, "s3 kept the failed DAG's communicator");
    adag_actor_h survivors[2] = {a[0], a[2]};
    dag = comm_chain(rt, survivors, 2, 0);
    adag_dag_h d2 = dag;
    static int32_t in[ELEMS];
    make_input(in, 5);
    adag_value_t v2 = {.data = in, .size = sizeof(in), .kind = ADAG_VALUE_TENSOR,
                       .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {ELEMS}};
    ASSERT_OK(adag_dag_execute(d2, &v2, 1, 0, &ref));
    adag_value_t out[2];
    ASSERT_OK(adag_dag_get(d2, ref, out, 2, 30000));
    for (unsigned i = 0; i < ELEMS; i++) {
        int32_t want = in[i], got;
        stage_apply(ADAG_DTYPE_I32, 1, &want, &want);
        stage_apply(ADAG_DTYPE_I32, 3, &want, &want); /* s3 is stage 3 */
        memcpy(&got, (const char *)out[0].data + 4 * i, 4);
        cr_assert_eq(got, want, "element %u", i);
    }
    ASSERT_OK(adag_dag_release(d2, ref));
    ASSERT_OK(adag_dag_destroy(d2));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* A rank stuck before its send (a 4 s kernel, comm timeout 300 ms): the
 * DAG fails with ADAG_ERR_TIMEOUT naming the transfer well before the
 * kernel ends; the communicator is dropped. */
Test(comm_transport, stuck_send_times_out, .timeout = 120)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h *a = stages(rt, ADAG_PLACEMENT_PROCESS, four_devs, 2, 4000000);
    adag_dag_h dag = comm_chain(rt, a, 2, 300);
    int32_t x[ELEMS];
    make_input(x, 0);
    adag_value_t v = {.data = x, .size = sizeof(x), .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {ELEMS}};
    adag_ref_t ref;
    int64_t t0 = adag__now_ns();
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    adag_value_t out[2];
    ASSERT_ST(adag_dag_get(dag, ref, out, 2, 30000), ADAG_ERR_TIMEOUT);
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    cr_assert_lt(ms, 3500.0, "the stuck transfer failed after %.0f ms", ms);
    const char *msg = adag_last_error();
    cr_assert(strstr(msg, "s1") && strstr(msg, "s2") && strstr(msg, "communicator rank") &&
                  strstr(msg, "did not complete within 300 ms"),
              "the message does not name the transfer: %s", msg);
    cr_log_info("stuck transfer after %.0f ms: %s", ms, msg);
    ASSERT_OK(adag_dag_destroy(dag));
    cr_assert_eq(comms_mapped(adag_actor_pid(a[1])), 0, "s2 kept the communicator");
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* Graphs a communicator cannot serve. */
Test(comm_transport, invalid_graphs, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "a", "emu:0", 1, 0);
    adag_actor_h b = h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "b", "emu:1", 2, 0);
    adag_tensor_params_t comm = {.field_mask = ADAG_TENSOR_PARAM_TRANSPORT,
                                 .transport = ADAG_TRANSPORT_COMM};
    adag_graph_h g;
    adag_node_h x, y, z, outs[2];
    adag_dag_h dag = NULL;

    /* the driver writes it */
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, &comm));
    ASSERT_OK(adag_graph_bind(g, a, "apply", &x, 1, &y));
    ASSERT_OK(adag_graph_output(g, &y, 1));
    ASSERT_ST(adag_graph_compile(g, NULL, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("input[0] (the driver -> a) is declared with transport "
                   "ADAG_TRANSPORT_COMM, but the driver writes it");
    ASSERT_OK(adag_graph_destroy(g));

    /* only the driver reads it */
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    ASSERT_OK(adag_graph_bind(g, a, "apply", &x, 1, &y));
    ASSERT_OK(adag_node_tensor(y, &comm));
    ASSERT_OK(adag_graph_output(g, &y, 1));
    ASSERT_ST(adag_graph_compile(g, NULL, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("none of its readers is a device-bound actor");
    ASSERT_OK(adag_graph_destroy(g));

    /* a sends to b, then waits for b's; b sends to a, then waits for a's */
    adag_node_h xa, xb;
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    ASSERT_OK(adag_graph_bind(g, a, "apply", &x, 1, &xa));
    ASSERT_OK(adag_graph_bind(g, b, "apply", &x, 1, &xb));
    ASSERT_OK(adag_node_tensor(xa, &comm));
    ASSERT_OK(adag_node_tensor(xb, &comm));
    ASSERT_OK(adag_graph_bind(g, a, "apply", &xb, 1, &y));
    ASSERT_OK(adag_graph_bind(g, b, "apply", &xa, 1, &z));
    ASSERT_OK(adag_node_tensor(y, NULL));
    ASSERT_OK(adag_node_tensor(z, NULL));
    outs[0] = y;
    outs[1] = z;
    ASSERT_OK(adag_graph_output(g, outs, 2));
    ASSERT_ST(adag_graph_compile(g, NULL, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("would wait on each other");
    ASSERT_MSG_HAS("a.apply[0] (a -> b)");
    ASSERT_MSG_HAS("b.apply[0] (b -> a)");
    ASSERT_OK(adag_graph_destroy(g));

    /* the same transfers bound so that both ranks agree: it compiles and runs */
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    ASSERT_OK(adag_graph_bind(g, a, "apply", &x, 1, &xa));
    ASSERT_OK(adag_node_tensor(xa, &comm));
    ASSERT_OK(adag_graph_bind(g, b, "apply", &xa, 1, &z));
    ASSERT_OK(adag_graph_bind(g, b, "apply", &x, 1, &xb));
    ASSERT_OK(adag_node_tensor(xb, &comm));
    ASSERT_OK(adag_graph_bind(g, a, "apply", &xb, 1, &y));
    ASSERT_OK(adag_node_tensor(y, NULL));
    ASSERT_OK(adag_node_tensor(z, NULL));
    outs[0] = y;
    outs[1] = z;
    ASSERT_OK(adag_graph_output(g, outs, 2));
    ASSERT_OK(adag_graph_compile(g, NULL, &dag));
    ASSERT_OK(adag_graph_destroy(g));
    int32_t in[ELEMS];
    make_input(in, 3);
    adag_value_t v = {.data = in, .size = sizeof(in), .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {ELEMS}};
    adag_ref_t ref;
    adag_value_t out[2];
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, out, 2, 30000));
    for (unsigned i = 0; i < ELEMS; i++) {
        int32_t wy = in[i], wz = in[i], gy, gz;
        stage_apply(ADAG_DTYPE_I32, 2, &wy, &wy); /* y = a(b(x)) */
        stage_apply(ADAG_DTYPE_I32, 1, &wy, &wy);
        stage_apply(ADAG_DTYPE_I32, 1, &wz, &wz); /* z = b(a(x)) */
        stage_apply(ADAG_DTYPE_I32, 2, &wz, &wz);
        memcpy(&gy, (const char *)out[0].data + 4 * i, 4);
        memcpy(&gz, (const char *)out[1].data + 4 * i, 4);
        cr_assert_eq(gy, wy, "y element %u", i);
        cr_assert_eq(gz, wz, "z element %u", i);
    }
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}
