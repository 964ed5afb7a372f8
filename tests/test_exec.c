/*
 * Suite "exec": compiled DAGs run and give the right values, for thread and
 * process actors alike. Each scenario is a function of the placement with
 * one Test() per placement.
 */
#include "helpers.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BOTH(fn, to)                                                                    \
    Test(exec, fn##_thread, .timeout = (to)) { fn(ADAG_PLACEMENT_THREAD); }             \
    Test(exec, fn##_process, .timeout = (to)) { fn(ADAG_PLACEMENT_PROCESS); }


/* ---------------------------------------------------------------- */

static void chain4(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    int64_t off[4] = {1, 10, 100, 1000};
    adag_actor_h a[4];
    h_counters(rt, pl, "c", 4, off, a);
    adag_graph_h g = h_chain_graph(rt, a, 4, "add");
    adag_dag_h dag = h_compile(g, 0, 0);
    ASSERT_OK(adag_graph_destroy(g));
    for (int64_t x = -3; x < 20; x++)
        cr_assert_eq(h_roundtrip(dag, x), x + 1111, "chain(%lld)", (long long)x);
    cr_assert_eq(h_roundtrip(dag, INT64_MAX - 2000), INT64_MAX - 889);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
BOTH(chain4, 30)

/* Each actor runs where its placement says. */
static void placement(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "pa", 5);
    adag_actor_h b = h_counter(rt, pl, "pb", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h outs[3];
    outs[0] = h_bind1(g, a, "add", h_input(g, 0));
    outs[1] = h_bind(g, a, "pid", NULL, 0);
    outs[2] = h_bind(g, b, "pid", NULL, 0);
    ASSERT_OK(adag_graph_output(g, outs, 3));
    adag_dag_h dag = h_compile(g, 0, 0);
    int64_t x = 1, r[3];
    h_run_i64(dag, &x, 1, r, 3);
    cr_assert_eq(r[0], 6);
    if (pl == ADAG_PLACEMENT_THREAD) {
        cr_assert_eq(r[1], getpid());
        cr_assert_eq(r[2], getpid());
    } else {
        cr_assert_eq(r[1], adag_actor_pid(a));
        cr_assert_eq(r[2], adag_actor_pid(b));
        cr_assert_neq(r[1], r[2]);
        cr_assert_neq(r[1], getpid());
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(placement, 30)

/* One input to 4 actors' add (4 outputs), plus a gather of two of them. */
static void scatter_gather(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    int64_t off[5] = {1, 2, 3, 4, 1000};
    adag_actor_h a[5];
    h_counters(rt, pl, "s", 5, off, a);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0);
    adag_node_h outs[5];
    for (int i = 0; i < 4; i++)
        outs[i] = h_bind1(g, a[i], "add", in);
    adag_node_h pair[2] = {outs[0], outs[3]};
    outs[4] = h_bind(g, a[4], "sum2", pair, 2);
    ASSERT_OK(adag_graph_output(g, outs, 5));
    adag_dag_h dag = h_compile(g, 0, 0);
    for (int64_t x = 0; x < 10; x++) {
        int64_t r[5];
        h_run_i64(dag, &x, 1, r, 5);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(r[i], x + off[i], "output %d of input %lld", i, (long long)x);
        cr_assert_eq(r[4], (x + 1) + (x + 4) + 1000);
    }
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
BOTH(scatter_gather, 30)

/* Outputs from several levels of a chain, in an order unlike bind order,
 * and two input fields. */
static void several_outputs(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    int64_t off[3] = {1, 20, 300};
    adag_actor_h a[3];
    h_counters(rt, pl, "m", 3, off, a);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in0 = h_input(g, 0), in1 = h_input(g, 1);
    adag_node_h x = h_bind1(g, a[0], "add", in0);
    adag_node_h y = h_bind1(g, a[1], "add", x);
    adag_node_h args[2] = {y, in1};
    adag_node_h z = h_bind(g, a[2], "sum2", args, 2);
    adag_node_h outs[3] = {z, x, y};
    ASSERT_OK(adag_graph_output(g, outs, 3));
    adag_dag_h dag = h_compile(g, 0, 0);
    for (int64_t i = 0; i < 5; i++) {
        int64_t in[2] = {i, 1000 * i}, r[3];
        h_run_i64(dag, in, 2, r, 3);
        cr_assert_eq(r[1], i + 1);
        cr_assert_eq(r[2], i + 21);
        cr_assert_eq(r[0], i + 21 + 1000 * i + 300);
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(several_outputs, 30)

/* split -> 3 outputs; two of them into another actor's sum2. */
static void multi_return(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "splitter", 0);
    adag_actor_h b = h_counter(rt, pl, "summer", 7);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h s = h_bind1(g, a, "split", h_input(g, 0));
    adag_node_h s0, s1, s2;
    ASSERT_OK(adag_node_output(s, 0, &s0));
    ASSERT_OK(adag_node_output(s, 1, &s1));
    ASSERT_OK(adag_node_output(s, 2, &s2));
    adag_node_h again;
    ASSERT_OK(adag_node_output(s, 1, &again));
    cr_assert_eq(again, s1, "adag_node_output gives a different node for the same index");
    adag_node_h args[2] = {s1, s2};
    adag_node_h t = h_bind(g, b, "sum2", args, 2);
    adag_node_h outs[4] = {s0, s1, s2, t};
    ASSERT_OK(adag_graph_output(g, outs, 4));
    adag_dag_h dag = h_compile(g, 0, 0);
    for (int64_t x = -2; x < 6; x++) {
        int64_t r[4];
        h_run_i64(dag, &x, 1, r, 4);
        cr_assert_eq(r[0], x);
        cr_assert_eq(r[1], -x);
        cr_assert_eq(r[2], 2 * x);
        cr_assert_eq(r[3], -x + 2 * x + 7);
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(multi_return, 30)

/* Two DAGs over the same two actors: the same state (calls counters) is
 * seen by both. */
static void two_dags_shared_actors(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h A = h_counter(rt, pl, "A", 10);
    adag_actor_h B = h_counter(rt, pl, "B", 100);

    /* d1: x -> A.add -> B.add; outputs (B.add, A.calls) */
    adag_graph_h g1 = NULL;
    ASSERT_OK(adag_graph_create(rt, &g1));
    adag_node_h a1 = h_bind1(g1, A, "add", h_input(g1, 0));
    adag_node_h b1 = h_bind1(g1, B, "add", a1);
    adag_node_h o1[2] = {b1, h_bind(g1, A, "calls", NULL, 0)};
    ASSERT_OK(adag_graph_output(g1, o1, 2));
    adag_dag_h d1 = h_compile(g1, 4, 0);

    /* d2: x -> A.add -> B.sum2(A.add, x); outputs (B.sum2, B.calls) */
    adag_graph_h g2 = NULL;
    ASSERT_OK(adag_graph_create(rt, &g2));
    adag_node_h in2 = h_input(g2, 0);
    adag_node_h a2 = h_bind1(g2, A, "add", in2);
    adag_node_h args[2] = {a2, in2};
    adag_node_h b2 = h_bind(g2, B, "sum2", args, 2);
    adag_node_h o2[2] = {b2, h_bind(g2, B, "calls", NULL, 0)};
    ASSERT_OK(adag_graph_output(g2, o2, 2));
    adag_dag_h d2 = h_compile(g2, 4, 0);

    /* serial interleaving: counters are exact */
    int64_t calls = 0;
    for (int64_t i = 0; i < 10; i++) {
        int64_t r[2];
        h_run_i64(d1, &i, 1, r, 2);
        calls++;
        cr_assert_eq(r[0], i + 110);
        cr_assert_eq(r[1], calls, "A.calls = %lld after %lld calls over both DAGs",
                     (long long)r[1], (long long)calls);
        h_run_i64(d2, &i, 1, r, 2);
        calls++;
        cr_assert_eq(r[0], i + 10 + i + 100);
        cr_assert_eq(r[1], calls, "B.calls = %lld after %lld calls over both DAGs",
                     (long long)r[1], (long long)calls);
    }

    /* both DAGs in flight at once */
    adag_ref_t r1[3], r2[3];
    int64_t xs[3] = {1000, 2000, 3000};
    for (int i = 0; i < 3; i++) {
        adag_value_t v = h_i64v(&xs[i]);
        ASSERT_OK(adag_dag_execute(d1, &v, 1, 0, &r1[i]));
        ASSERT_OK(adag_dag_execute(d2, &v, 1, 0, &r2[i]));
    }
    int64_t last_a = 0, last_b = 0;
    for (int i = 0; i < 3; i++) {
        adag_value_t out[2];
        ASSERT_OK(adag_dag_get(d2, r2[i], out, 2, 10000));
        cr_assert_eq(h_val_i64(out[0]), 2 * xs[i] + 110);
        int64_t cb = h_val_i64(out[1]);
        cr_assert(cb > last_b && cb <= calls + 6, "B.calls %lld", (long long)cb);
        last_b = cb;
        ASSERT_OK(adag_dag_release(d2, r2[i]));
        ASSERT_OK(adag_dag_get(d1, r1[i], out, 2, 10000));
        cr_assert_eq(h_val_i64(out[0]), xs[i] + 110);
        int64_t ca = h_val_i64(out[1]);
        cr_assert(ca > last_a && ca <= calls + 6, "A.calls %lld", (long long)ca);
        last_a = ca;
        ASSERT_OK(adag_dag_release(d1, r1[i]));
    }
    calls += 6;
    int64_t r[2], x = 0;
    h_run_i64(d1, &x, 1, r, 2);
    cr_assert_eq(r[1], calls + 1, "A.calls %lld, expected %lld", (long long)r[1],
                 (long long)calls + 1);

    /* destroying one DAG leaves the other working */
    ASSERT_OK(adag_dag_destroy(d1));
    h_run_i64(d2, &x, 1, r, 2);
    cr_assert_eq(r[0], 110);
    cr_assert_eq(r[1], calls + 2);
    ASSERT_OK(adag_dag_destroy(d2));
    ASSERT_OK(adag_graph_destroy(g1));
    ASSERT_OK(adag_graph_destroy(g2));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
BOTH(two_dags_shared_actors, 30)

/* Many executions, up to max_inflight (8) in flight, results in order. */
static void pipelined(adag_placement_t pl, unsigned nstages, unsigned n)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    int64_t off[4] = {1, 20, 300, 4000}, total = 0;
    adag_actor_h a[4];
    h_counters(rt, pl, "p", nstages, off, a);
    for (unsigned i = 0; i < nstages; i++)
        total += off[i];
    adag_graph_h g = h_chain_graph(rt, a, nstages, "add");
    adag_dag_h dag = h_compile(g, 8, 64);
    ASSERT_OK(adag_graph_destroy(g));

    enum { WINDOW = 8 };
    adag_ref_t refs[WINDOW];
    int64_t xs[WINDOW];
    unsigned head = 0, count = 0, done = 0;
    adag_ref_t last = 0;
    int have_last = 0;
    for (unsigned i = 0; i < n + WINDOW; i++) {
        if (count == WINDOW || (i >= n && count > 0)) {
            adag_value_t out;
            unsigned k = head % WINDOW;
            ASSERT_OK(adag_dag_get(dag, refs[k], &out, 1, 10000));
            int64_t got = h_val_i64(out);
            cr_assert_eq(got, xs[k] + total, "execution %u: got %lld, expected %lld", done,
                         (long long)got, (long long)(xs[k] + total));
            ASSERT_OK(adag_dag_release(dag, refs[k]));
            done++;
            head++;
            count--;
        }
        if (i >= n)
            continue;
        unsigned k = (head + count) % WINDOW;
        xs[k] = (int64_t)i * 7919 - 1000000;
        adag_value_t v = h_i64v(&xs[k]);
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k]));
        if (have_last)
            cr_assert(refs[k] > last, "ref %llu after %llu", (unsigned long long)refs[k],
                      (unsigned long long)last);
        last = refs[k];
        have_last = 1;
        count++;
    }
    cr_assert_eq(count, 0);
    cr_assert_eq(done, n);
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.executed, n);
    cr_assert_eq(st.completed, n);
    cr_assert_eq(st.released, n);
    cr_assert_eq(st.failed, 0);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
Test(exec, pipelined_10000_thread, .timeout = 120)
{
    pipelined(ADAG_PLACEMENT_THREAD, 4, 10000);
}
Test(exec, pipelined_10000_process, .timeout = 120)
{
    pipelined(ADAG_PLACEMENT_PROCESS, 4, 10000);
}

/* Gets in reverse order, releases in yet another order, several rounds
 * so that slots wrap. */
static void get_any_order(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    int64_t off[2] = {3, 30};
    adag_actor_h a[2];
    h_counters(rt, pl, "o", 2, off, a);
    adag_graph_h g = h_chain_graph(rt, a, 2, "add");
    adag_dag_h dag = h_compile(g, 4, 0);
    static const int release_order[4] = {1, 3, 0, 2};
    for (int round = 0; round < 4; round++) {
        adag_ref_t refs[4];
        int64_t xs[4];
        for (int i = 0; i < 4; i++) {
            xs[i] = round * 100 + i;
            adag_value_t v = h_i64v(&xs[i]);
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[i]));
        }
        for (int i = 3; i >= 0; i--) {
            adag_value_t out;
            ASSERT_OK(adag_dag_get(dag, refs[i], &out, 1, 10000));
            cr_assert_eq(h_val_i64(out), xs[i] + 33, "round %d ref %d", round, i);
        }
        /* a second get of the same (unreleased) ref gives the same value */
        adag_value_t again;
        ASSERT_OK(adag_dag_get(dag, refs[2], &again, 1, 0));
        cr_assert_eq(h_val_i64(again), xs[2] + 33);
        for (int j = 0; j < 4; j++) {
            int i = release_order[(j + round) % 4];
            ASSERT_OK(adag_dag_release(dag, refs[i]));
        }
    }
    cr_assert_eq(h_roundtrip(dag, 1), 34);
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(get_any_order, 30)

/* A.add -> A.add (same actor: a self edge) -> B.add (an shm edge). */
static void same_actor_consecutive(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h A = h_counter(rt, pl, "actor_a", 5);
    adag_actor_h B = h_counter(rt, pl, "actor_b", 1000);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h x = h_bind1(g, A, "add", h_input(g, 0));
    adag_node_h y = h_bind1(g, A, "add", x);
    adag_node_h z = h_bind1(g, B, "add", y);
    ASSERT_OK(adag_graph_output(g, &z, 1));
    adag_dag_h dag = h_compile(g, 0, 0);
    for (int64_t i = 0; i < 5; i++)
        cr_assert_eq(h_roundtrip(dag, i), i + 1010);

    char *dot = h_dot(dag);
    cr_assert(strstr(dot, "digraph") != NULL, "not DOT:\n%s", dot);
    cr_assert(strstr(dot, "\\nself") != NULL, "no self edge in:\n%s", dot);
    cr_assert(strstr(dot, "shm") != NULL, "no shm edge in:\n%s", dot);
    cr_assert(strstr(dot, "READ") != NULL, "no READ in:\n%s", dot);
    cr_assert(strstr(dot, "COMPUTE") != NULL, "no COMPUTE in:\n%s", dot);
    cr_assert(strstr(dot, "WRITE") != NULL, "no WRITE in:\n%s", dot);
    cr_assert(strstr(dot, "actor_a") != NULL, "no actor_a in:\n%s", dot);
    cr_assert(strstr(dot, "actor_b") != NULL, "no actor_b in:\n%s", dot);
    free(dot);

    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    /* one channel per produced value: input field 0, x, y, z */
    cr_assert_eq(st.nchannels, 4, "nchannels = %u", st.nchannels);

    /* a DAG with only cross-actor edges has no local channel */
    adag_actor_h ab[2] = {A, B};
    adag_graph_h g2 = h_chain_graph(rt, ab, 2, "add");
    adag_dag_h dag2 = h_compile(g2, 0, 0);
    cr_assert_eq(h_roundtrip(dag2, 1), 1006);
    dot = h_dot(dag2);
    cr_assert(strstr(dot, "\\nself") == NULL, "a self edge in a DAG without one:\n%s", dot);
    cr_assert(strstr(dot, "shm") != NULL, "no shm edge in:\n%s", dot);
    free(dot);
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(same_actor_consecutive, 30)

/* A method without arguments runs as part of the execution that execute()
 * starts, not ahead of it: calls() bound first on its actor still sees the
 * adds made by another DAG before this execution was started. */
static void zero_arg_method_waits_for_execute(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "za", 0);
    adag_graph_h g1 = h_chain_graph(rt, &a, 1, "add");
    adag_dag_h dadd = h_compile(g1, 0, 0);
    adag_graph_h g2 = NULL;
    ASSERT_OK(adag_graph_create(rt, &g2));
    adag_node_h po[2];
    po[0] = h_bind(g2, a, "calls", NULL, 0);
    po[1] = h_bind1(g2, a, "echo", h_input(g2, 0));
    ASSERT_OK(adag_graph_output(g2, po, 2));
    adag_dag_h probe = h_compile(g2, 0, 0);
    h_sleep_ms(50);
    for (int64_t round = 1; round <= 3; round++) {
        for (int i = 0; i < 3; i++)
            (void)h_roundtrip(dadd, i);
        h_sleep_ms(20);
        int64_t x = 0, pr[2];
        h_run_i64(probe, &x, 1, pr, 2);
        cr_assert_eq(pr[0], 3 * round,
                     "calls() executed after %lld adds returned %lld: it ran before its "
                     "execution was started",
                     (long long)(3 * round), (long long)pr[0]);
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(zero_arg_method_waits_for_execute, 30)

/* A method fails: get reports it, the downstream method does not run, the
 * DAG keeps working. */
static void failing_method(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h gate = h_counter(rt, pl, "gate", 0);
    adag_actor_h down = h_counter(rt, pl, "down", 1000);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h f = h_bind1(g, gate, "fail_if_negative", h_input(g, 0));
    adag_node_h d = h_bind1(g, down, "add", f);
    ASSERT_OK(adag_graph_output(g, &d, 1));
    adag_dag_h dag = h_compile(g, 4, 0);

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

    int64_t neg = -5;
    adag_value_t v = h_i64v(&neg), out;
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
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
    for (int i = 0; i < 4; i++) {
        v = h_i64v(&xs[i]);
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[i]));
    }
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
BOTH(failing_method, 30)

/* A method writes more than the slot holds. */
static void output_too_large(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "grower", 0);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "grow");
    adag_dag_h dag = h_compile(g, 2, 4096);
    int64_t n = 5000;
    adag_value_t v = h_i64v(&n), out;
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 10000), ADAG_ERR_TOO_LARGE);
    ASSERT_MSG_HAS("5000");
    ASSERT_MSG_HAS("4096");
    ASSERT_OK(adag_dag_release(dag, ref));
    for (int i = 0; i < 3; i++) {
        n = i == 0 ? 4096 : 100 + i;
        v = h_i64v(&n);
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
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
BOTH(output_too_large, 30)

/* An input larger than the slot is refused by execute. */
static void input_too_large(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "echoer", 0);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "echo");
    adag_dag_h dag = h_compile(g, 2, 4096);
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
BOTH(input_too_large, 30)

/* get times out while the method sleeps; the ref stays valid. */
static void get_timeout(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "sleeper", 0);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "sleep_ms");
    adag_dag_h dag = h_compile(g, 0, 0);
    int64_t ms = 500;
    adag_value_t v = h_i64v(&ms), out;
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    double t0 = h_now_ms();
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 50), ADAG_ERR_TIMEOUT);
    double waited = h_now_ms() - t0;
    cr_assert(waited < 450, "get(timeout 50) returned after %.0f ms", waited);
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 0), ADAG_ERR_TIMEOUT);
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
    cr_assert_eq(h_val_i64(out), 500);
    ASSERT_OK(adag_dag_release(dag, ref));
    cr_assert_eq(h_roundtrip(dag, 1), 1);
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(get_timeout, 30)

/* With max_inflight unreleased refs: non-blocking execute says AGAIN,
 * blocking execute times out naming release. */
static void window_full(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "w", 1);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
    adag_compile_params_t cp = h_compile_params(2, 0, 100, 0);
    adag_dag_h dag = NULL;
    ASSERT_OK(adag_graph_compile(g, &cp, &dag));
    int64_t x = 10;
    adag_value_t v = h_i64v(&x), out;
    adag_ref_t r0, r1, r2;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &r0));
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &r1));
    ASSERT_OK(adag_dag_get(dag, r0, &out, 1, 10000));
    cr_assert_eq(h_val_i64(out), 11);
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
    ASSERT_OK(adag_dag_get(dag, r0, &out, 1, 0));
    cr_assert_eq(h_val_i64(out), 11);
    /* one release makes room for one */
    ASSERT_OK(adag_dag_release(dag, r0));
    x = 20;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, ADAG_EXECUTE_NONBLOCK, &r2));
    ASSERT_ST(adag_dag_execute(dag, &v, 1, ADAG_EXECUTE_NONBLOCK, &r0), ADAG_ERR_AGAIN);
    ASSERT_OK(adag_dag_get(dag, r2, &out, 1, 10000));
    cr_assert_eq(h_val_i64(out), 21);
    ASSERT_OK(adag_dag_release(dag, r1));
    ASSERT_OK(adag_dag_release(dag, r2));
    cr_assert_eq(h_roundtrip(dag, 2), 3);
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(window_full, 30)

/* Release without get (also before the execution finished). */
static void release_before_get(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h s = h_counter(rt, pl, "slow", 0);
    adag_actor_h b = h_counter(rt, pl, "plus", 1000);
    /* slow.sleep_ms -> plus.add */
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h x = h_bind1(g, s, "sleep_ms", h_input(g, 0));
    adag_node_h y = h_bind1(g, b, "add", x);
    ASSERT_OK(adag_graph_output(g, &y, 1));
    adag_dag_h dag = h_compile(g, 4, 0);
    /* 10 executions released at once (more than the window) */
    for (int i = 0; i < 10; i++) {
        int64_t ms = 20 + i;
        adag_value_t v = h_i64v(&ms);
        adag_ref_t ref;
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    /* the next results are the right ones, not stale dropped ones */
    for (int64_t i = 0; i < 3; i++)
        cr_assert_eq(h_roundtrip(dag, i), i + 1000);
    /* mixed: release some finished ones without get */
    adag_ref_t refs[4];
    for (int i = 0; i < 4; i++) {
        int64_t ms = i;
        adag_value_t v = h_i64v(&ms);
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[i]));
    }
    adag_value_t out;
    ASSERT_OK(adag_dag_get(dag, refs[3], &out, 1, 10000));
    cr_assert_eq(h_val_i64(out), 1003);
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
BOTH(release_before_get, 30)

static int fd_readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    cr_assert(r >= 0, "poll: %s", strerror(errno));
    return r > 0 && (p.revents & POLLIN);
}

/* The DAG's fd polls readable while a result is ready and not yet got. */
static void dag_fd(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "f", 0);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "sleep_ms");
    adag_dag_h dag = h_compile(g, 4, 0);
    int fd = -1, fd2 = -1;
    ASSERT_OK(adag_dag_fd(dag, &fd));
    cr_assert(fd >= 0);
    ASSERT_OK(adag_dag_fd(dag, &fd2));
    cr_assert_eq(fd, fd2, "adag_dag_fd gives a different fd each time");
    cr_assert(!fd_readable(fd, 0), "readable before any execute");

    for (int round = 0; round < 3; round++) {
        int64_t ms = 50;
        adag_value_t v = h_i64v(&ms), out;
        adag_ref_t ref;
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
        cr_assert(!fd_readable(fd, 0), "readable while the method still sleeps");
        cr_assert(fd_readable(fd, 10000), "not readable after the result was ready");
        cr_assert(fd_readable(fd, 0), "the fd is not level-triggered");
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 0));
        cr_assert_eq(h_val_i64(out), 50);
        cr_assert(!fd_readable(fd, 0), "still readable after get (round %d)", round);
        ASSERT_OK(adag_dag_release(dag, ref));
        cr_assert(!fd_readable(fd, 0), "readable after release");
    }

    /* two in flight: readable until both are got */
    int64_t ms[2] = {1, 60};
    adag_ref_t r[2];
    adag_value_t out;
    for (int i = 0; i < 2; i++) {
        adag_value_t v = h_i64v(&ms[i]);
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &r[i]));
    }
    cr_assert(fd_readable(fd, 10000));
    ASSERT_OK(adag_dag_get(dag, r[0], &out, 1, 10000));
    cr_assert(fd_readable(fd, 10000), "not readable with the second result ready");
    ASSERT_OK(adag_dag_get(dag, r[1], &out, 1, 0));
    cr_assert_eq(h_val_i64(out), 60);
    cr_assert(!fd_readable(fd, 0), "readable after both results were got");
    ASSERT_OK(adag_dag_release(dag, r[1]));
    ASSERT_OK(adag_dag_release(dag, r[0]));

    /* a ready result released without get no longer makes the fd readable */
    int64_t one = 1;
    adag_value_t v1 = h_i64v(&one);
    adag_ref_t dropped;
    ASSERT_OK(adag_dag_execute(dag, &v1, 1, 0, &dropped));
    cr_assert(fd_readable(fd, 10000));
    ASSERT_OK(adag_dag_release(dag, dropped));
    cr_assert(!fd_readable(fd, 0), "readable after the only ready ref was released unread");
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(dag_fd, 30)

static void dag_stats(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h gate = h_counter(rt, pl, "gate", 0);
    adag_actor_h b = h_counter(rt, pl, "b", 1);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h f = h_bind1(g, gate, "fail_if_negative", h_input(g, 0));
    adag_node_h d = h_bind1(g, b, "add", f);
    ASSERT_OK(adag_graph_output(g, &d, 1));
    adag_dag_h dag = h_compile(g, 4, 4096);
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
    int64_t neg = -1;
    adag_value_t v = h_i64v(&neg), out;
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 10000), ADAG_ERR_METHOD);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref)); /* released without get */
    ASSERT_OK(adag_dag_release(dag, ref));
    adag_ref_t pending;
    int64_t one = 1;
    v = h_i64v(&one);
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &pending)); /* not yet released */
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.executed, 8, "executed %llu", (unsigned long long)st.executed);
    cr_assert_eq(st.completed, 5, "completed %llu", (unsigned long long)st.completed);
    cr_assert_eq(st.failed, 1, "failed %llu", (unsigned long long)st.failed);
    cr_assert_eq(st.released, 7, "released %llu", (unsigned long long)st.released);
    ASSERT_OK(adag_dag_release(dag, pending));
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(dag_stats, 30)

/* 512 KiB through two actors, byte-exact. */
static void large_payload(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2];
    h_counters(rt, pl, "e", 2, NULL, a);
    adag_graph_h g = h_chain_graph(rt, a, 2, "echo");
    adag_dag_h dag = h_compile(g, 2, 0); /* default capacity: 1 MiB */
    const size_t n = 512 * 1024;
    unsigned char *buf[2];
    adag_ref_t refs[2];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2; i++) {
            buf[i] = malloc(n);
            cr_assert_not_null(buf[i]);
            uint32_t s = (uint32_t)(round * 2 + i + 1) * 2654435761u;
            for (size_t k = 0; k < n; k++) {
                s = s * 1103515245u + 12345u;
                buf[i][k] = (unsigned char)(s >> 16);
            }
            adag_value_t v = {.data = buf[i], .size = n};
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[i]));
        }
        for (int i = 0; i < 2; i++) {
            adag_value_t out;
            ASSERT_OK(adag_dag_get(dag, refs[i], &out, 1, 10000));
            cr_assert_eq(out.size, n);
            cr_assert(memcmp(out.data, buf[i], n) == 0, "payload %d of round %d differs", i,
                      round);
            ASSERT_OK(adag_dag_release(dag, refs[i]));
            free(buf[i]);
        }
    }
    /* an empty value too */
    adag_value_t e = {.data = "", .size = 0}, out;
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &e, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
    cr_assert_eq(out.size, 0);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
BOTH(large_payload, 30)

/* execute() copies its inputs: changing the caller's buffer afterwards does
 * not change the execution. */
static void inputs_copied(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2];
    h_counters(rt, pl, "ic", 2, NULL, a);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h x = h_bind1(g, a[0], "sleep_ms", h_input(g, 0));
    adag_node_h y = h_bind1(g, a[1], "add", x);
    ASSERT_OK(adag_graph_output(g, &y, 1));
    adag_dag_h dag = h_compile(g, 4, 0);
    int64_t buf = 30;
    adag_value_t v = h_i64v(&buf), out;
    adag_ref_t refs[3];
    for (int i = 0; i < 3; i++) {
        buf = 30 + i;
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[i]));
        buf = -1; /* sleep_ms(-1) would misbehave if it were read now */
    }
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(adag_dag_get(dag, refs[i], &out, 1, 10000));
        cr_assert_eq(h_val_i64(out), 30 + i);
        ASSERT_OK(adag_dag_release(dag, refs[i]));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(inputs_copied, 30)

/* A result got with get() stays intact until its release, while later
 * executions (as many as the window leaves room for) run through the
 * other slots. */
static void results_stable_until_release(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "st", 0);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "echo");
    enum { W = 8 };
    adag_dag_h dag = h_compile(g, W, 256);
    char msg[64];
    adag_value_t v = {.data = msg, .size = 0}, held, out;
    adag_ref_t first, ref;
    for (int round = 0; round < 3; round++) {
        snprintf(msg, sizeof(msg), "held result %d", round);
        v.size = strlen(msg) + 1;
        char want[64];
        memcpy(want, msg, sizeof(want));
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &first));
        ASSERT_OK(adag_dag_get(dag, first, &held, 1, 10000));
        cr_assert_str_eq((const char *)held.data, want);
        for (int i = 0; i < W - 1; i++) {
            snprintf(msg, sizeof(msg), "later result %d.%d", round, i);
            v.size = strlen(msg) + 1;
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
            ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
            cr_assert_str_eq((const char *)out.data, msg);
            cr_assert_neq(out.data, held.data, "two unreleased results share a buffer");
            ASSERT_OK(adag_dag_release(dag, ref));
            cr_assert_str_eq((const char *)held.data, want,
                             "a held result was overwritten by execution %d", i);
        }
        cr_assert_eq(held.size, strlen(want) + 1);
        ASSERT_OK(adag_dag_release(dag, first));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(results_stable_until_release, 30)

/* Several driver threads use one DAG at once (the API is thread-safe). */
struct driver_thread {
    adag_dag_h dag;
    int64_t base;
    int n;
    int bad;      /* executions with a wrong value */
    adag_status_t st;
    char msg[512];
};

static void *driver_thread_fn(void *arg)
{
    struct driver_thread *d = arg;
    for (int i = 0; i < d->n; i++) {
        int64_t x = d->base + i;
        adag_value_t v = {.data = &x, .size = sizeof(x)}, out;
        adag_ref_t ref;
        adag_status_t st = adag_dag_execute(d->dag, &v, 1, 0, &ref);
        if (st == ADAG_OK) {
            st = adag_dag_get(d->dag, ref, &out, 1, 10000);
            if (st == ADAG_OK) {
                int64_t r;
                if (out.size != sizeof(r))
                    d->bad++;
                else {
                    memcpy(&r, out.data, sizeof(r));
                    if (r != x + 11)
                        d->bad++;
                }
            }
            adag_status_t st2 = adag_dag_release(d->dag, ref);
            if (st == ADAG_OK)
                st = st2;
        }
        if (st != ADAG_OK) {
            d->st = st;
            snprintf(d->msg, sizeof(d->msg), "%s", adag_last_error());
            return NULL;
        }
    }
    return NULL;
}

static void concurrent_drivers(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    int64_t off[2] = {1, 10};
    adag_actor_h a[2];
    h_counters(rt, pl, "cd", 2, off, a);
    adag_graph_h g = h_chain_graph(rt, a, 2, "add");
    adag_dag_h dag = h_compile(g, 4, 0);
    enum { T = 4 };
    struct driver_thread d[T];
    pthread_t t[T];
    for (int i = 0; i < T; i++) {
        memset(&d[i], 0, sizeof(d[i]));
        d[i].dag = dag;
        d[i].base = (int64_t)i * 1000000;
        d[i].n = 300;
        cr_assert_eq(pthread_create(&t[i], NULL, driver_thread_fn, &d[i]), 0);
    }
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < T; i++) {
        cr_assert_eq(d[i].st, ADAG_OK, "driver thread %d: %s (%s)", i, adag_status_str(d[i].st),
                     d[i].msg);
        cr_assert_eq(d[i].bad, 0, "driver thread %d got %d wrong values", i, d[i].bad);
    }
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.executed, T * 300);
    cr_assert_eq(st.completed, T * 300);
    cr_assert_eq(st.released, T * 300);
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(concurrent_drivers, 60)

/* Zero-copy inputs: prepare hands out the input slot, commit starts the
 * execution; cancel drops it; misuse is refused; a too-large size keeps the
 * execution prepared. */
typedef struct {
    adag_dag_h dag;
    adag_status_t commit, cancel;
} other_thread_t;

static void *commit_from_other_thread(void *p)
{
    other_thread_t *o = p;
    size_t size = 8;
    adag_ref_t ref;
    o->commit = adag_dag_execute_commit(o->dag, &size, 1, &ref);
    o->cancel = adag_dag_execute_cancel(o->dag);
    return NULL;
}

static void zero_copy_inputs(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "zc", 100);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
    adag_dag_h dag = h_compile(g, 2, 64);
    void *buf = NULL;
    adag_ref_t ref;
    adag_value_t out;
    int64_t x = 5, y;
    size_t size = sizeof x;

    /* nothing prepared yet */
    ASSERT_ST(adag_dag_execute_commit(dag, &size, 1, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("adag_dag_execute_prepare");
    ASSERT_ST(adag_dag_execute_cancel(dag), ADAG_ERR_INVALID);

    for (int round = 0; round < 5; round++) {
        ASSERT_OK(adag_dag_execute_prepare(dag, 0, &buf, 1));
        cr_assert_not_null(buf);
        x = round * 10;
        memcpy(buf, &x, sizeof x); /* written straight into the slot */
        ASSERT_OK(adag_dag_execute_commit(dag, &size, 1, &ref));
        cr_assert_eq(ref, (adag_ref_t)round);
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
        memcpy(&y, out.data, sizeof y);
        cr_assert_eq(y, round * 10 + 100);
        ASSERT_OK(adag_dag_release(dag, ref));
    }

    /* a commit from another thread is refused; this thread can still commit */
    ASSERT_OK(adag_dag_execute_prepare(dag, 0, &buf, 1));
    other_thread_t o = {dag, ADAG_OK, ADAG_OK};
    pthread_t t;
    pthread_create(&t, NULL, commit_from_other_thread, &o);
    pthread_join(t, NULL);
    cr_assert_eq(o.commit, ADAG_ERR_INVALID);
    cr_assert_eq(o.cancel, ADAG_ERR_INVALID);
    /* too large: refused, still prepared */
    size_t huge = 65;
    ASSERT_ST(adag_dag_execute_commit(dag, &huge, 1, &ref), ADAG_ERR_TOO_LARGE);
    ASSERT_MSG_HAS("65 bytes");
    x = 7;
    memcpy(buf, &x, sizeof x);
    ASSERT_OK(adag_dag_execute_commit(dag, &size, 1, &ref));
    cr_assert_eq(ref, 5);
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
    memcpy(&y, out.data, sizeof y);
    cr_assert_eq(y, 107);
    ASSERT_OK(adag_dag_release(dag, ref));

    /* cancel: no execution starts, the next ref follows on */
    ASSERT_OK(adag_dag_execute_prepare(dag, 0, &buf, 1));
    ASSERT_OK(adag_dag_execute_cancel(dag));
    cr_assert_eq(h_roundtrip(dag, 1), 101);
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.executed, 7, "executed %llu", (unsigned long long)st.executed);

    /* destroying with an execution prepared by this thread drops it */
    ASSERT_OK(adag_dag_execute_prepare(dag, 0, &buf, 1));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}
BOTH(zero_copy_inputs, 30)
