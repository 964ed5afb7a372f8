/* Unit test (suite "abort"): the DAG's abort word lives in shared memory,
 * so a stray write by any process of the DAG (a method's fprintf(stderr)
 * into a descriptor that should have been stderr) can set it. get must then
 * fail with a real error, ADAG_ERR_INTERNAL when the word holds no status,
 * and never report ADAG_OK without data. */
#include "dag/internal.h"

#include <criterion/criterion.h>
#include <string.h>

static adag_status_t add_one(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t in;
    int64_t x;
    if (adag_call_arg(call, 0, &in) != ADAG_OK || in.size != sizeof x)
        return adag_call_fail(call, "expected an int64");
    memcpy(&x, in.data, sizeof x);
    x++;
    return adag_call_set_output(call, 0, &x, sizeof x);
}

static const adag_method_def_t methods[] = {{"add_one", add_one, 1, 1}};
static const adag_class_def_t cls = {
    .abi_version = ADAG_ABI_VERSION, .name = "one", .methods = methods, .nmethods = 1};

static adag_dag_h one_actor_dag(adag_runtime_h *rt)
{
    adag_actor_h a;
    adag_graph_h g;
    adag_node_h in, out;
    adag_dag_h dag;
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "one"};
    cr_assert_eq(adag_runtime_create(NULL, rt), ADAG_OK);
    cr_assert_eq(adag_class_register(*rt, &cls), ADAG_OK);
    cr_assert_eq(adag_actor_create(*rt, &p, &a), ADAG_OK);
    cr_assert_eq(adag_graph_create(*rt, &g), ADAG_OK);
    cr_assert_eq(adag_graph_input(g, 0, &in), ADAG_OK);
    cr_assert_eq(adag_graph_bind(g, a, "add_one", &in, 1, &out), ADAG_OK);
    cr_assert_eq(adag_graph_output(g, &out, 1), ADAG_OK);
    cr_assert_eq(adag_graph_compile(g, NULL, &dag), ADAG_OK, "%s", adag_last_error());
    return dag;
}

/* Overwrites the abort word as a stray write would, then runs one execution. */
static adag_status_t run_with_abort_word(uint32_t word, char *msg, size_t len)
{
    adag_runtime_h rt;
    adag_dag_h dag = one_actor_dag(&rt);
    int64_t x = 1;
    adag_value_t v = {.data = &x, .size = sizeof x};
    adag_ref_t ref;
    cr_assert_eq(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_OK);
    adag_value_t first;
    cr_assert_eq(adag_dag_get(dag, ref, &first, 1, 5000), ADAG_OK);
    cr_assert_eq(adag_dag_release(dag, ref), ADAG_OK);
    atomic_store_explicit(&dag->hdr->abort, word, memory_order_seq_cst);
    /* the next execute notices it */
    adag_status_t st = adag_dag_execute(dag, &v, 1, 0, &ref);
    snprintf(msg, len, "%s", adag_last_error());
    cr_assert_neq(st, ADAG_OK, "execute succeeded after the abort word was overwritten");
    /* and it stays failed, with the same status */
    adag_status_t again = adag_dag_execute(dag, &v, 1, 0, &ref);
    cr_assert_eq(again, st, "a later execute returned %s", adag_status_str(again));
    cr_assert_eq(adag_runtime_destroy(rt), ADAG_OK);
    return st;
}

Test(abort, garbage_word_is_internal_error, .timeout = 30)
{
    char msg[512];
    adag_status_t st = run_with_abort_word(0x20796173u /* "say " */, msg, sizeof msg);
    cr_assert_eq(st, ADAG_ERR_INTERNAL, "got %s: %s", adag_status_str(st), msg);
    cr_assert(strstr(msg, "0x20796173") && strstr(msg, "overwritten"), "message: %s", msg);
}

Test(abort, status_word_is_that_status, .timeout = 30)
{
    char msg[512];
    adag_status_t st = run_with_abort_word((uint32_t)-ADAG_ERR_ACTOR_DIED, msg, sizeof msg);
    cr_assert_eq(st, ADAG_ERR_ACTOR_DIED, "got %s: %s", adag_status_str(st), msg);
    cr_assert(strstr(msg, "aborted with ADAG_ERR_ACTOR_DIED"), "message: %s", msg);
}

/* Overwritten while an execution is in flight: its get fails, or returns
 * the right data if the loop had already taken the input; never ADAG_OK
 * with outputs left unfilled. */
Test(abort, overwritten_in_flight, .timeout = 30)
{
    for (int round = 0; round < 20; round++) {
        adag_runtime_h rt;
        adag_dag_h dag = one_actor_dag(&rt);
        int64_t x = round;
        adag_value_t v = {.data = &x, .size = sizeof x}, out = {0};
        adag_ref_t ref;
        cr_assert_eq(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_OK);
        atomic_store_explicit(&dag->hdr->abort, 0x41414141u, memory_order_seq_cst);
        adag_status_t st = adag_dag_get(dag, ref, &out, 1, 5000);
        if (st == ADAG_OK) {
            int64_t y = 0;
            cr_assert(out.data && out.size == sizeof y, "OK without data (size %zu)", out.size);
            memcpy(&y, out.data, sizeof y);
            cr_assert_eq(y, x + 1);
        } else {
            cr_assert_eq(st, ADAG_ERR_INTERNAL, "round %d: %s", round, adag_last_error());
        }
        cr_assert_eq(adag_runtime_destroy(rt), ADAG_OK);
    }
}
