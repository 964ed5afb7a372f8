/*
 * adag: static DAGs of worker methods, compiled once into channels and
 * executed many times.
 *
 * A driver program creates a runtime, registers actor classes (or names a
 * module .so that exports them), creates actors (threads of the driver or
 * adag-worker processes), binds their methods into a graph, compiles the
 * graph once and then executes it many times:
 *
 *     adag_runtime_create(NULL, &rt);
 *     adag_class_register(rt, &my_class);
 *     adag_actor_create(rt, &actor_params, &a);
 *     adag_graph_create(rt, &g);
 *     adag_graph_input(g, 0, &in);
 *     adag_graph_bind(g, a, "step", &in, 1, &out);
 *     adag_graph_output(g, &out, 1);
 *     adag_graph_compile(g, NULL, &dag);
 *     adag_dag_execute(dag, &value, 1, 0, &ref);
 *     adag_dag_get(dag, ref, &result, 1, 1000);
 *     adag_dag_release(dag, ref);
 *
 * Conventions (shared with every later addition):
 *   - every function returns adag_status_t: ADAG_OK (0) or a negative error;
 *     adag_last_error() gives a message that says what failed and where;
 *   - out-parameters come last; handles are opaque;
 *   - every params struct starts with a field_mask: a bit per field that the
 *     caller set; fields whose bit is clear take their defaults, so new
 *     fields can be added without breaking existing callers. A field whose
 *     bit is clear must be zero (NULL, 0, all bytes zero: what a designated
 *     initializer or memset leaves): a nonzero one is refused with
 *     ADAG_ERR_INVALID naming the struct, the field and its bit
 *     ("adag_actor_params_t.device is set, but its bit
 *     ADAG_ACTOR_PARAM_DEVICE is clear in field_mask"), never ignored; so
 *     is a bit this library does not know, and a bit set for a pointer
 *     field left NULL. Fields without a bit are required (e.g. the
 *     shards of adag_data_params_t);
 *   - the other structs that cross the library boundary carry their version:
 *     adag_dag_stats_t a struct_size, adag_class_def_t an abi_version (which
 *     also covers its method table), a module its adag_module_abi_version;
 *     adag_value_t reserves room that must stay zero (see "ABI" below);
 *     adag_writer_t, a function and its context passed by value, is fixed;
 *   - nothing of the C library's stdio crosses it: what the library writes
 *     goes to a writer (an fd, a callback) or a caller's buffer;
 *   - the driver-side API (runtime, actors, graphs, DAGs) is thread-safe;
 *     adag_call_* functions are only valid inside a method, on its call.
 *
 * The declarations are in parts, by topic, each with its documentation:
 * adag/core.h (version, ABI, status codes, writers), adag/value.h,
 * adag/class.h (classes, methods, the call), adag/config.h, adag/actor.h
 * (runtime and actors), adag/graph.h, adag/dag.h (compiled DAGs),
 * adag/stats.h. Include this header, not a part.
 */
#ifndef ADAG_H
#define ADAG_H

#include "adag/core.h"
#include "adag/value.h"
#include "adag/class.h"
#include "adag/config.h"
#include "adag/actor.h"
#include "adag/graph.h"
#include "adag/dag.h"
#include "adag/stats.h"

#endif /* ADAG_H */
