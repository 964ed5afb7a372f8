/* Modules that make their classes when asked (ADAG_MODULE_RESOLVER):
 * tests/modules/resolver_actors.c, run by adag-worker. */
#include "helpers.h"

#include <stdint.h>

#define ATEST(name) Test(module_resolver, name, .timeout = 60)
#define MODULE_DIR ADAG_TEST_BUILD_DIR "/tests/modules/"
#define RESOLVER_MODULE MODULE_DIR "libresolver_actors.so"

static adag_status_t resolved_actor(adag_runtime_h rt, const char *cls, const void *init,
                                    size_t init_size, adag_actor_h *a)
{
    adag_actor_params_t p = h_actor_params(cls, ADAG_PLACEMENT_PROCESS);
    p.module_path = RESOLVER_MODULE;
    p.field_mask |= init ? ADAG_ACTOR_PARAM_INIT : 0;
    p.init_data = init;
    p.init_size = init_size;
    *a = NULL;
    return adag_actor_create(rt, &p, a);
}

/* Two actors of two made classes, each its own worker: the class's name
 * made it (k), the init bytes reach its init (b). */
ATEST(resolver_makes_the_class_asked_for)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a, b;
    int64_t off = 1000;
    ASSERT_OK(resolved_actor(rt, "scale3", NULL, 0, &a));
    ASSERT_OK(resolved_actor(rt, "scale5", &off, sizeof(off), &b));
    adag_actor_h chain[2] = {a, b};
    adag_graph_h g = h_chain_graph(rt, chain, 2, "mul");
    adag_dag_h dag = h_compile(g, 0, 0);
    /* (7 * 3) * 5 + 1000 */
    cr_assert_eq(h_roundtrip(dag, 7), 1105);
    cr_assert_eq(h_roundtrip(dag, -2), 970);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* What the resolver says is the failure: its status, its message, with
 * the module and the class named; a status without a message is named by
 * the library; a made class is checked like a listed one. The runtime
 * goes on, and no worker is left. */
ATEST(resolver_failures_reach_the_caller)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a;
    static const char why[] = "the test said so";
    ASSERT_ST(resolved_actor(rt, "refuse", why, sizeof(why) - 1, &a), ADAG_ERR_INVALID);
    cr_assert_null(a);
    ASSERT_MSG_HAS("refused because the test said so");
    ASSERT_MSG_HAS("class refuse");
    ASSERT_MSG_HAS(RESOLVER_MODULE);

    ASSERT_ST(resolved_actor(rt, "quiet", NULL, 0, &a), ADAG_ERR_IO);
    ASSERT_MSG_HAS("cannot make class quiet");

    ASSERT_ST(resolved_actor(rt, "nothing", NULL, 0, &a), ADAG_ERR_NOT_FOUND);
    ASSERT_MSG_HAS("no class nothing here");

    ASSERT_ST(resolved_actor(rt, "empty", NULL, 0, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("class empty has no methods");

    /* a made class's init failing is reported as any init's */
    ASSERT_ST(resolved_actor(rt, "scale2", "xyz", 3, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("init: 8 bytes (an int64) or none, got 3");

    ASSERT_OK(resolved_actor(rt, "scale2", NULL, 0, &a));
    adag_graph_h g = h_chain_graph(rt, &a, 1, "mul");
    cr_assert_eq(h_roundtrip(h_compile(g, 0, 0), 21), 42);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
