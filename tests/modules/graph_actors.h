#ifndef ADAG_TEST_GRAPH_ACTORS_H
#define ADAG_TEST_GRAPH_ACTORS_H
#include <adag.h>

/* "graphactor": capturable methods for device graphs
 * (adag_compile_params_t.graphs; tests/test_graph_capture.c). Compiled
 * into adag-tests (thread actors) and exported by libdevice_actors.so
 * (process actors). Every method takes one argument: x, an int64, or t.
 *   chain(x)    -> f32 tensor [GRAPH_ACTOR_N] (declare it), written by
 *                  GRAPH_ACTOR_KERNELS kernels: the first y[i] = (x + i) / 2
 *                  read from the input slot, each next one y = y * 0.75 +
 *                  k / 8 (graph_actor_reference computes the same);
 *                  capturable
 *   host_set(x) -> x, set with adag_call_set_output after an empty kernel:
 *                  declared capturable, which its host bytes are not
 *   calls(x)    -> how many times the actor's methods were called
 *   slow_chain(x) chain(x) after 20 ms of host work (sleeping); capturable
 *   sum(t)      -> f32 tensor [1] (declare it): the sum of t, an f32
 *                  tensor [GRAPH_ACTOR_N], by one kernel; not capturable
 *   scale(t)    -> f32 tensor [GRAPH_ACTOR_N] (declare it): 2 t + 1, then
 *                  + 0.25 three times, by four kernels
 *                  (graph_actor_scale_reference); capturable */
#define GRAPH_ACTOR_N 256
#define GRAPH_ACTOR_KERNELS 50
extern const adag_class_def_t test_graph_class;
/* What chain(x) returns. */
void graph_actor_reference(int64_t x, float *y);
/* What scale(t) returns. */
void graph_actor_scale_reference(const float *x, float *y);
#endif
