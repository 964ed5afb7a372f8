#ifndef ADAG_TEST_PROBE_ACTORS_H
#define ADAG_TEST_PROBE_ACTORS_H
#include <adag.h>

/* "probe": where(), page_policy(x), pass(x); see probe_actors.c */
extern const adag_class_def_t test_probe_class;
#endif
