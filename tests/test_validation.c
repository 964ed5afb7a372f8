/*
 * Suite "validation": API misuse is rejected with the documented status and
 * a message that names what is wrong; nothing crashes and nothing leaks.
 * Here: binding and compiling graphs, execute / get / release. NULL
 * pointers, actor creation and the runtime are in test_validation_api.c.
 */
#include "helpers.h"

#include <string.h>

#define VTEST(name) Test(validation, name, .timeout = 30)

/* The message names input field 1 (several phrasings accepted). */
static void assert_msg_names_field1(void)
{
    const char *m = h_msg();
    cr_assert(strcasestr(m, "field 1") || strcasestr(m, "input 1") || strstr(m, "[1]") ||
                  strstr(m, "#1") || strcasestr(m, "field #1") || strcasestr(m, "fields 1"),
              "message \"%s\" does not name input field 1", m);
}

/* ---------------------------------------------------------------- */
/* Binding                                                           */
/* ---------------------------------------------------------------- */

static void unknown_method(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "alpha_actor", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0);
    adag_node_h n = NULL;
    ASSERT_ST(adag_graph_bind(g, a, "no_such_method", &in, 1, &n), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("no_such_method");
    ASSERT_MSG_HAS("alpha_actor");
    /* the graph is still usable after a rejected bind */
    adag_node_h ok = h_bind1(g, a, "add", in);
    ASSERT_OK(adag_graph_output(g, &ok, 1));
    adag_dag_h dag = h_compile(g, 0, 0);
    cr_assert_eq(h_roundtrip(dag, 5), 5);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(validation, unknown_method, 30)

static void wrong_nargs(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "beta_actor", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0);
    adag_node_h args[2] = {in, in};
    adag_node_h n = NULL;
    /* add takes 1 argument */
    ASSERT_ST(adag_graph_bind(g, a, "add", args, 2, &n), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("add");
    ASSERT_MSG_HAS("beta_actor");
    ASSERT_ST(adag_graph_bind(g, a, "add", NULL, 0, &n), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("add");
    /* sum2 takes 2 */
    ASSERT_ST(adag_graph_bind(g, a, "sum2", args, 1, &n), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("sum2");
    /* calls takes none */
    ASSERT_ST(adag_graph_bind(g, a, "calls", args, 1, &n), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("calls");
    /* more than ADAG_MAX_ARGS */
    adag_node_h many[ADAG_MAX_ARGS + 1];
    for (unsigned i = 0; i <= ADAG_MAX_ARGS; i++)
        many[i] = in;
    ASSERT_ST(adag_graph_bind(g, a, "add", many, ADAG_MAX_ARGS + 1, &n), ADAG_ERR_INVALID);
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(validation, wrong_nargs, 30)

VTEST(unused_input_field)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h args[2] = {h_input(g, 0), h_input(g, 2)};
    adag_node_h s = h_bind(g, a, "sum2", args, 2);
    ASSERT_OK(adag_graph_output(g, &s, 1));
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(g, NULL, &dag), ADAG_ERR_INVALID);
    assert_msg_names_field1();
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(input_never_bound)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in0 = h_input(g, 0);
    adag_node_h in1 = h_input(g, 1);
    cr_assert_neq(in0, in1);
    /* the same node each time for the same field */
    cr_assert_eq(h_input(g, 0), in0);
    adag_node_h x = h_bind1(g, a, "add", in0);
    ASSERT_OK(adag_graph_output(g, &x, 1));
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(g, NULL, &dag), ADAG_ERR_INVALID);
    assert_msg_names_field1();
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(foreign_node)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g1 = NULL, g2 = NULL;
    ASSERT_OK(adag_graph_create(rt, &g1));
    ASSERT_OK(adag_graph_create(rt, &g2));
    adag_node_h in1 = h_input(g1, 0);
    adag_node_h in2 = h_input(g2, 0);
    adag_node_h x2 = h_bind1(g2, a, "add", in2);
    adag_node_h n = NULL;
    /* an argument from another graph */
    ASSERT_ST(adag_graph_bind(g1, a, "add", &in2, 1, &n), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_bind(g1, a, "add", &x2, 1, &n), ADAG_ERR_INVALID);
    adag_node_h mixed[2] = {in1, x2};
    ASSERT_ST(adag_graph_bind(g1, a, "sum2", mixed, 2, &n), ADAG_ERR_INVALID);
    /* an output from another graph */
    adag_node_h x1 = h_bind1(g1, a, "add", in1);
    ASSERT_ST(adag_graph_output(g1, &x2, 1), ADAG_ERR_INVALID);
    adag_node_h outs[2] = {x1, x2};
    ASSERT_ST(adag_graph_output(g1, outs, 2), ADAG_ERR_INVALID);
    /* g1 is still fine with its own node */
    ASSERT_OK(adag_graph_output(g1, &x1, 1));
    adag_dag_h dag = h_compile(g1, 0, 0);
    cr_assert_eq(h_roundtrip(dag, 3), 3);
    ASSERT_OK(adag_graph_destroy(g1));
    ASSERT_OK(adag_graph_destroy(g2));
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(foreign_node_other_runtime)
{
    adag_runtime_h rt1 = h_runtime(), rt2 = h_runtime();
    adag_actor_h a2 = h_counter(rt2, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g1 = NULL;
    ASSERT_OK(adag_graph_create(rt1, &g1));
    adag_node_h in = h_input(g1, 0);
    adag_node_h n = NULL;
    /* an actor of another runtime */
    ASSERT_ST(adag_graph_bind(g1, a2, "add", &in, 1, &n), ADAG_ERR_INVALID);
    ASSERT_OK(adag_runtime_destroy(rt1));
    ASSERT_OK(adag_runtime_destroy(rt2));
}

VTEST(empty_graph)
{
    adag_runtime_h rt = h_runtime();
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(g, NULL, &dag), ADAG_ERR_INVALID);
    /* an input alone is still empty (nothing bound) */
    (void)h_input(g, 0);
    ASSERT_ST(adag_graph_compile(g, NULL, &dag), ADAG_ERR_INVALID);
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

static void actor_destroyed_before_compile(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a;
    adag_graph_h g = H_GRAPH(rt, .pl = pl, .name = "gone_actor", .method = "add", .actors = &a);
    ASSERT_OK(adag_actor_destroy(a));
    if (pl == ADAG_PLACEMENT_PROCESS) {
        /* no compiled DAG uses it: its worker stops now */
        cr_assert_eq(h_wait_no_children(3000), 0,
                     "the worker of a destroyed actor no DAG uses is still there");
    }
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(g, NULL, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("gone_actor");
    ASSERT_OK(adag_graph_destroy(g));
    /* the name is free again */
    adag_dag_h dag2 = H_DAG(rt, .pl = pl, .name = "gone_actor", .offset = 2, .method = "add");
    cr_assert_eq(h_roundtrip(dag2, 1), 3);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(validation, actor_destroyed_before_compile, 30)

static void actor_destroyed_while_dag_uses_it(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a;
    adag_graph_h g;
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "kept", .offset = 10, .method = "add",
                           .actors = &a, .graph = &g);
    ASSERT_OK(adag_graph_destroy(g));
    /* the DAG keeps the actor alive */
    ASSERT_OK(adag_actor_destroy(a));
    for (int i = 0; i < 5; i++)
        cr_assert_eq(h_roundtrip(dag, i), i + 10);
    ASSERT_OK(adag_dag_destroy(dag));
    if (pl == ADAG_PLACEMENT_PROCESS)
        cr_assert_eq(h_wait_no_children(5000), 0,
                     "the worker outlived its last DAG after adag_actor_destroy");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(validation, actor_destroyed_while_dag_uses_it, 30)

VTEST(graph_already_compiled)
{
    adag_runtime_h rt = h_runtime();
    adag_graph_h g;
    adag_dag_h dag = H_DAG(rt, .name = "a", .offset = 1, .method = "add", .graph = &g);
    adag_dag_h dag2 = NULL;
    ASSERT_ST(adag_graph_compile(g, NULL, &dag2), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS_CI("compiled");
    /* the first DAG is unaffected */
    cr_assert_eq(h_roundtrip(dag, 1), 2);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(output_twice)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h x = h_bind1(g, a, "add", h_input(g, 0));
    ASSERT_OK(adag_graph_output(g, &x, 1));
    ASSERT_ST(adag_graph_output(g, &x, 1), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS_CI("output");
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(no_outputs)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    (void)h_bind1(g, a, "add", h_input(g, 0));
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(g, NULL, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS_CI("output");
    /* an empty output list is rejected too */
    adag_node_h none[1] = {NULL};
    ASSERT_ST(adag_graph_output(g, none, 0), ADAG_ERR_INVALID);
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(multi_return_node_as_argument)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_actor_h b = h_counter(rt, ADAG_PLACEMENT_THREAD, "b", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h s = h_bind1(g, a, "split", h_input(g, 0));
    adag_node_h n = NULL;
    ASSERT_ST(adag_graph_bind(g, b, "add", &s, 1, &n), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("split");
    /* the right way works */
    adag_node_h s1 = NULL;
    ASSERT_OK(adag_node_output(s, 1, &s1));
    adag_node_h x = h_bind1(g, b, "add", s1);
    ASSERT_OK(adag_graph_output(g, &x, 1));
    adag_dag_h dag = h_compile(g, 0, 0);
    cr_assert_eq(h_roundtrip(dag, 9), -9);
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(node_output_out_of_range)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h s = h_bind1(g, a, "split", h_input(g, 0));
    adag_node_h v = NULL;
    ASSERT_ST(adag_node_output(s, 3, &v), ADAG_ERR_INVALID);
    ASSERT_ST(adag_node_output(s, 1000, &v), ADAG_ERR_INVALID);
    ASSERT_OK(adag_node_output(s, 2, &v));
    cr_assert_not_null(v);
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(bad_compile_params)
{
    adag_runtime_h rt = h_runtime();
    adag_graph_h g = H_GRAPH(rt, .name = "a", .method = "add");
    adag_dag_h dag = NULL;
    adag_compile_params_t cp = h_compile_params(0, 0, 0, 0);
    cp.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT; /* max_inflight left 0 */
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS_CI("inflight");
    cp = h_compile_params(0, 0, 0, 0);
    cp.field_mask = ADAG_COMPILE_PARAM_SLOT_CAPACITY; /* slot_capacity left 0 */
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS_CI("capacity");
    /* a rejected compile does not consume the graph */
    dag = h_compile(g, 2, 64);
    cr_assert_eq(h_roundtrip(dag, 4), 4);
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---------------------------------------------------------------- */
/* Execute / get / release                                           */
/* ---------------------------------------------------------------- */

static adag_dag_h one_add_dag(adag_runtime_h rt, adag_placement_t pl, int64_t offset)
{
    adag_graph_h g;
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "a", .offset = offset, .method = "add",
                           .max_inflight = 4, .graph = &g);
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

static void execute_wrong_inputs(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = one_add_dag(rt, pl, 100);
    int64_t x[2] = {1, 2};
    adag_value_t v[2] = {h_i64v(&x[0]), h_i64v(&x[1])};
    adag_ref_t ref;
    ASSERT_ST(adag_dag_execute(dag, v, 2, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_execute(dag, v, 0, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_execute(dag, NULL, 1, 0, &ref), ADAG_ERR_INVALID);
    /* a value with NULL data but a size */
    adag_value_t bad = {.data = NULL, .size = 8};
    ASSERT_ST(adag_dag_execute(dag, &bad, 1, 0, &ref), ADAG_ERR_INVALID);
    /* rejected executes used no ref or slot: the window (4) is whole */
    for (int i = 0; i < 6; i++)
        cr_assert_eq(h_roundtrip(dag, i), i + 100);
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.executed, 6, "stats.executed = %llu after 6 good and 4 rejected executes",
                 (unsigned long long)st.executed);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(validation, execute_wrong_inputs, 30)

static void get_wrong_n(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = one_add_dag(rt, pl, 1);
    adag_value_t out[2];
    adag_ref_t ref = h_execute(dag, 41);
    ASSERT_ST(adag_dag_get(dag, ref, out, 2, 5000), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_get(dag, ref, out, 0, 5000), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_get(dag, ref, NULL, 1, 5000), ADAG_ERR_INVALID);
    /* the ref is still valid */
    cr_assert_eq(h_get_i64(dag, ref, 5000), 42);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(validation, get_wrong_n, 30)

static void bad_refs(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = one_add_dag(rt, pl, 0);
    adag_value_t out;
    /* never issued */
    ASSERT_ST(adag_dag_get(dag, 12345, &out, 1, 0), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_get(dag, 12345, &out, 1, 100), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_release(dag, 12345), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_get(dag, UINT64_MAX, &out, 1, 0), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_release(dag, UINT64_MAX), ADAG_ERR_INVALID);
    /* issued, got and released */
    adag_ref_t ref = h_execute(dag, 7);
    /* the next ref is not issued yet */
    ASSERT_ST(adag_dag_get(dag, ref + 1, &out, 1, 0), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_release(dag, ref + 1), ADAG_ERR_INVALID);
    cr_assert_eq(h_get_i64(dag, ref, 5000), 7);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 0), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_release(dag, ref), ADAG_ERR_INVALID);
    /* released before get, then used again */
    ref = h_execute(dag, 7);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 100), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_release(dag, ref), ADAG_ERR_INVALID);
    /* still works */
    cr_assert_eq(h_roundtrip(dag, 8), 8);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(validation, bad_refs, 30)
