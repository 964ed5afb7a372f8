#include "builders.h"

#include <string.h>

adag_actor_params_t h_actor_params(const char *class_name, adag_placement_t pl)
{
    adag_actor_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_PLACEMENT;
    p.class_name = class_name;
    p.placement = pl;
    if (pl == ADAG_PLACEMENT_PROCESS) {
        p.field_mask |= ADAG_ACTOR_PARAM_MODULE;
        p.module_path = ADAG_TEST_MODULE;
    }
    return p;
}

adag_actor_params_t h_actor_params_init(const char *class_name, adag_placement_t pl,
                                        const char *name, const void *init, size_t init_size)
{
    adag_actor_params_t p = h_actor_params(class_name, pl);
    if (name) {
        p.field_mask |= ADAG_ACTOR_PARAM_NAME;
        p.name = name;
    }
    if (init) {
        p.field_mask |= ADAG_ACTOR_PARAM_INIT;
        p.init_data = init;
        p.init_size = init_size;
    }
    return p;
}

adag_compile_params_t h_compile_params(unsigned max_inflight, size_t cap, int exec_timeout,
                                       int teardown_timeout)
{
    adag_compile_params_t cp;
    memset(&cp, 0, sizeof(cp));
    if (max_inflight) {
        cp.field_mask |= ADAG_COMPILE_PARAM_MAX_INFLIGHT;
        cp.max_inflight = max_inflight;
    }
    if (cap) {
        cp.field_mask |= ADAG_COMPILE_PARAM_SLOT_CAPACITY;
        cp.slot_capacity = cap;
    }
    if (exec_timeout) {
        cp.field_mask |= ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT;
        cp.execute_timeout_ms = exec_timeout;
    }
    if (teardown_timeout) {
        cp.field_mask |= ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT;
        cp.teardown_timeout_ms = teardown_timeout;
    }
    return cp;
}

adag_status_t h_try_chain(adag_runtime_h rt, const h_stage_t *st, unsigned n,
                          const adag_compile_params_t *cp, adag_graph_h *g, adag_dag_h *dag,
                          const char **step)
{
    const char *unused;
    adag_node_h cur = NULL;
    adag_status_t s;
    if (!step)
        step = &unused;
    *g = NULL;
    *step = "adag_graph_create";
    if ((s = adag_graph_create(rt, g)) != ADAG_OK)
        return s;
    *step = "adag_graph_input";
    if ((s = adag_graph_input(*g, 0, &cur)) != ADAG_OK)
        return s;
    *step = "adag_graph_bind";
    for (unsigned i = 0; i < n; i++)
        if ((s = adag_graph_bind(*g, st[i].actor, st[i].method, &cur, 1, &cur)) != ADAG_OK)
            return s;
    *step = "adag_graph_output";
    if ((s = adag_graph_output(*g, &cur, 1)) != ADAG_OK)
        return s;
    if (!dag)
        return ADAG_OK;
    *step = "adag_graph_compile";
    return adag_graph_compile(*g, cp, dag);
}
