/*
 * Suite "exec": compiled DAGs run and give the right values, for thread and
 * process actors alike: graph shapes (chains, fan-out and gather, several
 * outputs, multiple returns, one actor twice in a row), DAGs sharing actors,
 * pipelining and gets in any order. Each scenario is a function of the
 * placement with one Test() per placement (H_BOTH). The suite goes on in
 * test_exec_errors.c and test_exec_data.c.
 */
#include "helpers.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void chain4(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    int64_t off[4] = {1, 10, 100, 1000};
    adag_graph_h g;
    adag_dag_h dag =
        H_DAG(rt, .pl = pl, .n = 4, .prefix = "c", .offsets = off, .method = "add", .graph = &g);
    ASSERT_OK(adag_graph_destroy(g));
    for (int64_t x = -3; x < 20; x++)
        cr_assert_eq(h_roundtrip(dag, x), x + 1111, "chain(%lld)", (long long)x);
    cr_assert_eq(h_roundtrip(dag, INT64_MAX - 2000), INT64_MAX - 889);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(exec, chain4, 30)

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
H_BOTH(exec, placement, 30)

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
H_BOTH(exec, scatter_gather, 30)

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
H_BOTH(exec, several_outputs, 30)

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
H_BOTH(exec, multi_return, 30)

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
        r1[i] = h_execute(d1, xs[i]);
        r2[i] = h_execute(d2, xs[i]);
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
H_BOTH(exec, two_dags_shared_actors, 30)

/* Many executions, up to max_inflight (8) in flight, results in order. */
static void pipelined(adag_placement_t pl, unsigned nstages, unsigned n)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    int64_t off[4] = {1, 20, 300, 4000}, total = 0;
    for (unsigned i = 0; i < nstages; i++)
        total += off[i];
    adag_graph_h g;
    adag_dag_h dag = H_DAG(rt, .pl = pl, .n = nstages, .prefix = "p", .offsets = off,
                           .method = "add", .max_inflight = 8, .cap = 64, .graph = &g);
    ASSERT_OK(adag_graph_destroy(g));

    enum { WINDOW = 8 };
    adag_ref_t refs[WINDOW];
    int64_t xs[WINDOW];
    unsigned head = 0, count = 0, done = 0;
    adag_ref_t last = 0;
    int have_last = 0;
    for (unsigned i = 0; i < n + WINDOW; i++) {
        if (count == WINDOW || (i >= n && count > 0)) {
            unsigned k = head % WINDOW;
            int64_t got = h_get_i64(dag, refs[k], 10000);
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
        refs[k] = h_execute(dag, xs[k]);
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
static void pipelined_10000(adag_placement_t pl)
{
    pipelined(pl, 4, 10000);
}
H_BOTH(exec, pipelined_10000, 120)

/* Gets in reverse order, releases in yet another order, several rounds
 * so that slots wrap. */
static void get_any_order(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    int64_t off[2] = {3, 30};
    adag_dag_h dag = H_DAG(rt, .pl = pl, .n = 2, .prefix = "o", .offsets = off, .method = "add",
                           .max_inflight = 4);
    static const int release_order[4] = {1, 3, 0, 2};
    for (int round = 0; round < 4; round++) {
        adag_ref_t refs[4];
        int64_t xs[4];
        for (int i = 0; i < 4; i++) {
            xs[i] = round * 100 + i;
            refs[i] = h_execute(dag, xs[i]);
        }
        for (int i = 3; i >= 0; i--)
            cr_assert_eq(h_get_i64(dag, refs[i], 10000), xs[i] + 33, "round %d ref %d", round, i);
        /* a second get of the same (unreleased) ref gives the same value */
        cr_assert_eq(h_get_i64(dag, refs[2], 0), xs[2] + 33);
        for (int j = 0; j < 4; j++) {
            int i = release_order[(j + round) % 4];
            ASSERT_OK(adag_dag_release(dag, refs[i]));
        }
    }
    cr_assert_eq(h_roundtrip(dag, 1), 34);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, get_any_order, 30)

/* A.add -> A.add (same actor: a self edge) -> B.add (an shm edge). */
static void same_actor_consecutive(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h A = h_counter(rt, pl, "actor_a", 5);
    adag_actor_h B = h_counter(rt, pl, "actor_b", 1000);
    adag_actor_h aab[3] = {A, A, B};
    adag_dag_h dag = h_compile(h_chain_graph(rt, aab, 3, "add"), 0, 0);
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
    adag_dag_h dag2 = h_compile(h_chain_graph(rt, ab, 2, "add"), 0, 0);
    cr_assert_eq(h_roundtrip(dag2, 1), 1006);
    dot = h_dot(dag2);
    cr_assert(strstr(dot, "\\nself") == NULL, "a self edge in a DAG without one:\n%s", dot);
    cr_assert(strstr(dot, "shm") != NULL, "no shm edge in:\n%s", dot);
    free(dot);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, same_actor_consecutive, 30)

/* A method without arguments runs as part of the execution that execute()
 * starts, not ahead of it: calls() bound first on its actor still sees the
 * adds made by another DAG before this execution was started. */
static void zero_arg_method_waits_for_execute(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a;
    adag_dag_h dadd = H_DAG(rt, .pl = pl, .name = "za", .method = "add", .actors = &a);
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
H_BOTH(exec, zero_arg_method_waits_for_execute, 30)
