/*
 * Suite "validation": API misuse is rejected with the documented status and
 * a message that names what is wrong; nothing crashes and nothing leaks.
 */
#include "helpers.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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
VTEST(unknown_method_thread) { unknown_method(ADAG_PLACEMENT_THREAD); }
VTEST(unknown_method_process) { unknown_method(ADAG_PLACEMENT_PROCESS); }

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
VTEST(wrong_nargs_thread) { wrong_nargs(ADAG_PLACEMENT_THREAD); }
VTEST(wrong_nargs_process) { wrong_nargs(ADAG_PLACEMENT_PROCESS); }

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

static void actor_destroyed(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "gone_actor", 0);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
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
    adag_actor_h b = h_counter(rt, pl, "gone_actor", 2);
    adag_graph_h g2 = h_chain_graph(rt, &b, 1, "add");
    adag_dag_h dag2 = h_compile(g2, 0, 0);
    cr_assert_eq(h_roundtrip(dag2, 1), 3);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
VTEST(actor_destroyed_before_compile_thread) { actor_destroyed(ADAG_PLACEMENT_THREAD); }
VTEST(actor_destroyed_before_compile_process) { actor_destroyed(ADAG_PLACEMENT_PROCESS); }

static void actor_destroyed_while_dag_uses_it(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, pl, "kept", 10);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
    adag_dag_h dag = h_compile(g, 0, 0);
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
VTEST(actor_destroyed_while_dag_uses_it_thread)
{
    actor_destroyed_while_dag_uses_it(ADAG_PLACEMENT_THREAD);
}
VTEST(actor_destroyed_while_dag_uses_it_process)
{
    actor_destroyed_while_dag_uses_it(ADAG_PLACEMENT_PROCESS);
}

VTEST(graph_already_compiled)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 1);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
    adag_dag_h dag = h_compile(g, 0, 0);
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
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
    adag_compile_params_t cp;
    adag_dag_h dag = NULL;
    memset(&cp, 0, sizeof(cp));
    cp.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT;
    cp.max_inflight = 0;
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS_CI("inflight");
    memset(&cp, 0, sizeof(cp));
    cp.field_mask = ADAG_COMPILE_PARAM_SLOT_CAPACITY;
    cp.slot_capacity = 0;
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
    adag_actor_h a = h_counter(rt, pl, "a", offset);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
    adag_dag_h dag = h_compile(g, 4, 0);
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

static void execute_wrong_n(adag_placement_t pl)
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
VTEST(execute_wrong_inputs_thread) { execute_wrong_n(ADAG_PLACEMENT_THREAD); }
VTEST(execute_wrong_inputs_process) { execute_wrong_n(ADAG_PLACEMENT_PROCESS); }

static void get_wrong_n(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = one_add_dag(rt, pl, 1);
    int64_t x = 41;
    adag_value_t in = h_i64v(&x), out[2];
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    ASSERT_ST(adag_dag_get(dag, ref, out, 2, 5000), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_get(dag, ref, out, 0, 5000), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_get(dag, ref, NULL, 1, 5000), ADAG_ERR_INVALID);
    /* the ref is still valid */
    ASSERT_OK(adag_dag_get(dag, ref, out, 1, 5000));
    cr_assert_eq(h_val_i64(out[0]), 42);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}
VTEST(get_wrong_n_thread) { get_wrong_n(ADAG_PLACEMENT_THREAD); }
VTEST(get_wrong_n_process) { get_wrong_n(ADAG_PLACEMENT_PROCESS); }

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
    int64_t x = 7;
    adag_value_t in = h_i64v(&x);
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    /* the next ref is not issued yet */
    ASSERT_ST(adag_dag_get(dag, ref + 1, &out, 1, 0), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_release(dag, ref + 1), ADAG_ERR_INVALID);
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 5000));
    cr_assert_eq(h_val_i64(out), 7);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 0), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_release(dag, ref), ADAG_ERR_INVALID);
    /* released before get, then used again */
    ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 100), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_release(dag, ref), ADAG_ERR_INVALID);
    /* still works */
    cr_assert_eq(h_roundtrip(dag, 8), 8);
    ASSERT_OK(adag_runtime_destroy(rt));
}
VTEST(bad_refs_thread) { bad_refs(ADAG_PLACEMENT_THREAD); }
VTEST(bad_refs_process) { bad_refs(ADAG_PLACEMENT_PROCESS); }

/* ---------------------------------------------------------------- */
/* NULL pointers                                                     */
/* ---------------------------------------------------------------- */

VTEST(null_pointers)
{
    adag_runtime_h rt = NULL;
    ASSERT_ST(adag_runtime_create(NULL, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_runtime_destroy(NULL), ADAG_ERR_INVALID);
    rt = h_runtime();

    /* classes */
    ASSERT_ST(adag_class_register(NULL, &test_counter_class), ADAG_ERR_INVALID);
    ASSERT_ST(adag_class_register(rt, NULL), ADAG_ERR_INVALID);
    adag_class_def_t def = test_counter_class;
    def.name = NULL;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    def = test_counter_class;
    def.name = "nomethods";
    def.methods = NULL;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    adag_method_def_t m = {"m", NULL, 1, 1};
    def.name = "nullfn";
    def.methods = &m;
    def.nmethods = 1;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    adag_method_def_t m2 = {NULL, test_counter_class.methods[0].fn, 1, 1};
    def.name = "nullmethodname";
    def.methods = &m2;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    adag_method_def_t m3 = {"noreturns", test_counter_class.methods[0].fn, 1, 0};
    def.name = "noreturns";
    def.methods = &m3;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    adag_method_def_t m4 = {"manyargs", test_counter_class.methods[0].fn, ADAG_MAX_ARGS + 1, 1};
    def.name = "manyargs";
    def.methods = &m4;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);

    /* actors */
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(NULL, &p, &a), ADAG_ERR_INVALID);
    ASSERT_ST(adag_actor_create(rt, NULL, &a), ADAG_ERR_INVALID);
    ASSERT_ST(adag_actor_create(rt, &p, NULL), ADAG_ERR_INVALID);
    p.class_name = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    p.field_mask &= ~(uint64_t)ADAG_ACTOR_PARAM_CLASS;
    p.class_name = "counter";
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID); /* class is required */
    p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    p.field_mask |= ADAG_ACTOR_PARAM_INIT;
    p.init_data = NULL;
    p.init_size = 8;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    p.field_mask |= ADAG_ACTOR_PARAM_PLACEMENT;
    p.placement = (adag_placement_t)77;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    cr_assert_not_null(adag_actor_name(NULL));
    cr_assert(adag_actor_pid(NULL) <= 0);
    ASSERT_ST(adag_actor_destroy(NULL), ADAG_ERR_INVALID);
    a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);

    /* graphs */
    adag_graph_h g = NULL;
    ASSERT_ST(adag_graph_create(NULL, &g), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_create(rt, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_destroy(NULL), ADAG_ERR_INVALID);
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = NULL, n = NULL;
    ASSERT_ST(adag_graph_input(NULL, 0, &in), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_input(g, 0, NULL), ADAG_ERR_INVALID);
    in = h_input(g, 0);
    ASSERT_ST(adag_graph_bind(NULL, a, "add", &in, 1, &n), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_bind(g, NULL, "add", &in, 1, &n), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_bind(g, a, NULL, &in, 1, &n), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_bind(g, a, "add", NULL, 1, &n), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_bind(g, a, "add", &in, 1, NULL), ADAG_ERR_INVALID);
    adag_node_h nulls[1] = {NULL};
    ASSERT_ST(adag_graph_bind(g, a, "add", nulls, 1, &n), ADAG_ERR_INVALID);
    adag_node_h s = h_bind1(g, a, "split", in);
    adag_node_h s0 = NULL;
    ASSERT_ST(adag_node_output(NULL, 0, &s0), ADAG_ERR_INVALID);
    ASSERT_ST(adag_node_output(s, 0, NULL), ADAG_ERR_INVALID);
    ASSERT_OK(adag_node_output(s, 0, &s0));
    adag_node_h x = h_bind1(g, a, "add", s0);
    ASSERT_ST(adag_graph_output(NULL, &x, 1), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_output(g, NULL, 1), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_output(g, nulls, 1), ADAG_ERR_INVALID);
    ASSERT_OK(adag_graph_output(g, &x, 1));
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(NULL, NULL, &dag), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_compile(g, NULL, NULL), ADAG_ERR_INVALID);
    ASSERT_OK(adag_graph_compile(g, NULL, &dag));

    /* DAGs */
    int64_t v = 5;
    adag_value_t iv = h_i64v(&v), ov;
    adag_ref_t ref = 0;
    ASSERT_ST(adag_dag_execute(NULL, &iv, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_execute(dag, NULL, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_execute(dag, &iv, 1, 0, NULL), ADAG_ERR_INVALID);
    ASSERT_OK(adag_dag_execute(dag, &iv, 1, 0, &ref));
    ASSERT_ST(adag_dag_get(NULL, ref, &ov, 1, 1000), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_get(dag, ref, NULL, 1, 1000), ADAG_ERR_INVALID);
    ASSERT_OK(adag_dag_get(dag, ref, &ov, 1, 5000));
    cr_assert_eq(h_val_i64(ov), 5);
    ASSERT_ST(adag_dag_release(NULL, ref), ADAG_ERR_INVALID);
    ASSERT_OK(adag_dag_release(dag, ref));
    int fd = -1;
    ASSERT_ST(adag_dag_fd(NULL, &fd), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_fd(dag, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_write_dot(NULL, stderr), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_write_dot(dag, NULL), ADAG_ERR_INVALID);
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_ST(adag_dag_stats(NULL, &st), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_stats(dag, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_destroy(NULL), ADAG_ERR_INVALID);

    /* call functions outside a method */
    adag_value_t cv;
    void *buf = NULL;
    ASSERT_ST(adag_call_arg(NULL, 0, &cv), ADAG_ERR_INVALID);
    ASSERT_ST(adag_call_output(NULL, 0, 8, &buf), ADAG_ERR_INVALID);
    ASSERT_ST(adag_call_set_output(NULL, 0, &v, sizeof(v)), ADAG_ERR_INVALID);
    ASSERT_FAILS(adag_call_fail(NULL, "%s", "no call"));
    (void)adag_call_ref(NULL);

    /* everything still works */
    cr_assert_eq(h_roundtrip(dag, 6), 6);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---------------------------------------------------------------- */
/* Actor creation                                                    */
/* ---------------------------------------------------------------- */

VTEST(process_actor_missing_module_path)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    p.field_mask &= ~(uint64_t)ADAG_ACTOR_PARAM_MODULE;
    p.module_path = NULL;
    adag_actor_h a = NULL;
    ASSERT_ST2(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID, ADAG_ERR_NOT_FOUND);
    ASSERT_MSG_HAS_CI("module");
    /* the bit set with a NULL path */
    p.field_mask |= ADAG_ACTOR_PARAM_MODULE;
    ASSERT_ST2(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID, ADAG_ERR_NOT_FOUND);
    ASSERT_MSG_HAS_CI("module");
    cr_assert_eq(h_wait_no_children(2000), 0, "a worker was left behind");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

VTEST(process_actor_nonexistent_module)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    p.module_path = "/nonexistent/dir/libnope_module.so";
    adag_actor_h a = NULL;
    ASSERT_ST2(adag_actor_create(rt, &p, &a), ADAG_ERR_NOT_FOUND, ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("libnope_module.so");
    cr_assert_eq(h_wait_no_children(2000), 0, "a worker was left behind");
    /* the runtime still works */
    adag_actor_h b = h_counter(rt, ADAG_PLACEMENT_PROCESS, "b", 1);
    adag_graph_h g = h_chain_graph(rt, &b, 1, "add");
    adag_dag_h dag = h_compile(g, 0, 0);
    cr_assert_eq(h_roundtrip(dag, 1), 2);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

VTEST(process_actor_unknown_class)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("no_such_class", ADAG_PLACEMENT_PROCESS);
    adag_actor_h a = NULL;
    ASSERT_ST2(adag_actor_create(rt, &p, &a), ADAG_ERR_NOT_FOUND, ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("no_such_class");
    cr_assert_eq(h_wait_no_children(2000), 0, "a worker was left behind");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

VTEST(thread_actor_unknown_class)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("no_such_class", ADAG_PLACEMENT_THREAD);
    adag_actor_h a = NULL;
    ASSERT_ST2(adag_actor_create(rt, &p, &a), ADAG_ERR_NOT_FOUND, ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("no_such_class");
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(process_actor_bad_worker_path)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_params_t rp;
    memset(&rp, 0, sizeof(rp));
    rp.field_mask = ADAG_RUNTIME_PARAM_WORKER_PATH;
    rp.worker_path = "/nonexistent/dir/no-adag-worker";
    adag_runtime_h rt = NULL;
    ASSERT_OK(adag_runtime_create(&rp, &rt));
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    adag_actor_h a = NULL;
    ASSERT_FAILS(adag_actor_create(rt, &p, &a));
    ASSERT_MSG_HAS("no-adag-worker");
    cr_assert_eq(h_wait_no_children(2000), 0, "a failed spawn left a child behind");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

static void broken_init(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("broken", pl);
    p.field_mask |= ADAG_ACTOR_PARAM_NAME;
    p.name = "broken_one";
    adag_actor_h a = NULL;
    ASSERT_FAILS(adag_actor_create(rt, &p, &a));
    ASSERT_MSG_HAS("broken");
    cr_assert_eq(h_wait_no_children(2000), 0, "the worker of a failed actor is still there");
    /* the name is not taken by the failed actor */
    adag_actor_h b = h_counter(rt, pl, "broken_one", 3);
    adag_graph_h g = h_chain_graph(rt, &b, 1, "add");
    adag_dag_h dag = h_compile(g, 0, 0);
    cr_assert_eq(h_roundtrip(dag, 1), 4);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
VTEST(broken_init_thread) { broken_init(ADAG_PLACEMENT_THREAD); }
VTEST(broken_init_process) { broken_init(ADAG_PLACEMENT_PROCESS); }

static void bad_init_bytes(adag_placement_t pl)
{
    /* counter's init rejects sizes other than 0 and 8 */
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("counter", pl);
    int32_t four = 4;
    p.field_mask |= ADAG_ACTOR_PARAM_INIT;
    p.init_data = &four;
    p.init_size = sizeof(four);
    adag_actor_h a = NULL;
    ASSERT_FAILS(adag_actor_create(rt, &p, &a));
    cr_assert_eq(h_wait_no_children(2000), 0, "the worker of a failed actor is still there");
    /* more than 16 MiB of init bytes */
    size_t big = (size_t)16 * 1024 * 1024 + 1;
    char *buf = calloc(1, big);
    cr_assert_not_null(buf);
    p.init_data = buf;
    p.init_size = big;
    ASSERT_ST2(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID, ADAG_ERR_TOO_LARGE);
    ASSERT_MSG_HAS("16777217");
    free(buf);
    cr_assert_eq(h_wait_no_children(2000), 0, "a worker was left behind");
    ASSERT_OK(adag_runtime_destroy(rt));
}
VTEST(bad_init_bytes_thread) { bad_init_bytes(ADAG_PLACEMENT_THREAD); }
VTEST(bad_init_bytes_process) { bad_init_bytes(ADAG_PLACEMENT_PROCESS); }

VTEST(duplicate_actor_name)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    (void)h_counter(rt, ADAG_PLACEMENT_THREAD, "dup_name", 0);
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    p.field_mask |= ADAG_ACTOR_PARAM_NAME;
    p.name = "dup_name";
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("dup_name");
    p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    p.field_mask |= ADAG_ACTOR_PARAM_NAME;
    p.name = "dup_name";
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("dup_name");
    cr_assert_eq(h_wait_no_children(2000), 0, "a worker was left behind");
    /* names of 64 bytes or more are rejected */
    char longname[ADAG_MAX_NAME + 8];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    p.field_mask |= ADAG_ACTOR_PARAM_NAME;
    p.name = longname;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    p.name = "";
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    /* default names are unique */
    adag_actor_h d1 = NULL, d2 = NULL;
    p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    ASSERT_OK(adag_actor_create(rt, &p, &d1));
    ASSERT_OK(adag_actor_create(rt, &p, &d2));
    cr_assert_str_neq(adag_actor_name(d1), adag_actor_name(d2));
    cr_assert(strstr(adag_actor_name(d1), "counter") != NULL, "default name \"%s\"",
              adag_actor_name(d1));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

VTEST(duplicate_class_register)
{
    adag_runtime_h rt = h_runtime(); /* registers "counter" */
    ASSERT_ST2(adag_class_register(rt, &test_counter_class), ADAG_ERR_INVALID, ADAG_ERR_BUSY);
    ASSERT_MSG_HAS("counter");
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---------------------------------------------------------------- */
/* Runtime and status                                                */
/* ---------------------------------------------------------------- */

VTEST(wrong_major_version)
{
    adag_runtime_h rt = NULL;
    ASSERT_ST(adag_runtime_create_version(ADAG_VERSION_MAJOR + 1, 0, NULL, &rt),
              ADAG_ERR_INVALID);
    /* the message names the version asked for */
    char want[32];
    snprintf(want, sizeof(want), "%d.0", ADAG_VERSION_MAJOR + 1);
    ASSERT_MSG_HAS(want);
    ASSERT_ST(adag_runtime_create_version(ADAG_VERSION_MAJOR + 100, ADAG_VERSION_MINOR, NULL,
                                          &rt),
              ADAG_ERR_INVALID);
    /* the right version works */
    ASSERT_OK(adag_runtime_create_version(ADAG_VERSION_MAJOR, ADAG_VERSION_MINOR, NULL, &rt));
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(status_strings)
{
    static const adag_status_t all[] = {
        ADAG_OK,          ADAG_ERR_INVALID,     ADAG_ERR_NO_MEMORY, ADAG_ERR_TIMEOUT,
        ADAG_ERR_AGAIN,   ADAG_ERR_METHOD,      ADAG_ERR_ACTOR_DIED, ADAG_ERR_TOO_LARGE,
        ADAG_ERR_IO,      ADAG_ERR_CLOSED,      ADAG_ERR_NOT_FOUND, ADAG_ERR_BUSY,
        ADAG_ERR_PROTOCOL,
    };
    const unsigned n = sizeof(all) / sizeof(all[0]);
    for (unsigned i = 0; i < n; i++) {
        const char *s = adag_status_str(all[i]);
        cr_assert_not_null(s, "status %d has no string", (int)all[i]);
        cr_assert(s[0] != '\0', "status %d has an empty string", (int)all[i]);
        for (unsigned j = 0; j < i; j++)
            cr_assert_str_neq(s, adag_status_str(all[j]), "statuses %d and %d share \"%s\"",
                              (int)all[i], (int)all[j], s);
    }
    /* an unknown status still gives a string */
    const char *u = adag_status_str((adag_status_t)-1000);
    cr_assert_not_null(u);
    cr_assert(u[0] != '\0');
    /* the last error is never NULL */
    cr_assert_not_null(adag_last_error());
}

static void *fail_in_thread(void *arg)
{
    (void)arg;
    /* a different failure on another thread */
    adag_status_t st = adag_runtime_create_version(ADAG_VERSION_MAJOR + 7, 0, NULL, NULL);
    static char msg[1024];
    snprintf(msg, sizeof(msg), "%s", adag_last_error());
    return st == ADAG_OK ? NULL : msg;
}

VTEST(last_error_is_per_thread)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0), n = NULL;
    ASSERT_ST(adag_graph_bind(g, a, "per_thread_marker", &in, 1, &n), ADAG_ERR_INVALID);
    char mine[1024];
    snprintf(mine, sizeof(mine), "%s", adag_last_error());
    cr_assert(strstr(mine, "per_thread_marker") != NULL, "message \"%s\"", mine);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, fail_in_thread, NULL), 0);
    void *other = NULL;
    pthread_join(t, &other);
    cr_assert_not_null(other, "the other thread's call did not fail");
    cr_assert(((const char *)other)[0] != '\0', "the other thread got no message");
    cr_assert(strstr((const char *)other, "per_thread_marker") == NULL,
              "the other thread sees this thread's message");
    cr_assert_str_eq(adag_last_error(), mine, "this thread's message changed");
    ASSERT_OK(adag_runtime_destroy(rt));
}
