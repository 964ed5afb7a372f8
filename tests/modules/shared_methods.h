/*
 * Methods shared by the actor classes of the tests (tests/modules/test_actors.c)
 * and of adag-bench (bench/modules/bench_actors.c): compiled into both
 * modules, and into the programs that register those classes for thread
 * actors. Each is a plain adag method (adag_method_fn); a class lists it in
 * its method table under the name it wants.
 */
#ifndef ADAG_SHARED_METHODS_H
#define ADAG_SHARED_METHODS_H
#include <adag.h>

/* (bytes) -> the same bytes, any size: the smallest method that moves a
 * value on ("echo" in the tests, "pass" in the bench). Stateless. */
adag_status_t shared_echo(void *state, adag_call_h call);

#endif
