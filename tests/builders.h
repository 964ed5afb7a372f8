/*
 * Builders of params, actors and DAGs for the test actor classes, without
 * Criterion: they return statuses and assert nothing, so a forked child
 * driver (which must not use Criterion's asserts) and the fault matrix (a
 * plain program) use them too. helpers.h wraps them with assertions.
 */
#ifndef ADAG_TESTS_BUILDERS_H
#define ADAG_TESTS_BUILDERS_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

#include "test_actors.h"

#ifndef ADAG_TEST_MODULE
#error "ADAG_TEST_MODULE must be defined by the build"
#endif

/* Actor params for a class with the given placement (module path set for
 * process actors), no name, no init bytes. */
adag_actor_params_t h_actor_params(const char *class_name, adag_placement_t pl);

/* The same with a name (NULL: none, the default name) and init bytes (NULL:
 * none). */
adag_actor_params_t h_actor_params_init(const char *class_name, adag_placement_t pl,
                                        const char *name, const void *init, size_t init_size);

/* Compile params with the given fields set (0 = default for that field). */
adag_compile_params_t h_compile_params(unsigned max_inflight, size_t cap, int exec_timeout,
                                       int teardown_timeout);

/* One stage of a chain: actor.method. */
typedef struct {
    adag_actor_h actor;
    const char *method;
} h_stage_t;

/* Builds input 0 -> st[0] -> st[1] -> ... -> st[n-1] -> output (each method
 * takes one argument) into *g and, if dag is not NULL, compiles it with cp
 * (NULL: defaults) into *dag. Stops at the first call that fails and
 * returns its status, *step (if not NULL) naming that call; *g is the graph
 * if it was created (else NULL), left to the caller. */
adag_status_t h_try_chain(adag_runtime_h rt, const h_stage_t *st, unsigned n,
                          const adag_compile_params_t *cp, adag_graph_h *g, adag_dag_h *dag,
                          const char **step);

#endif
