#ifndef ADAG_BENCH_ACTORS_H
#define ADAG_BENCH_ACTORS_H
#include <adag.h>
/* "bench": pass(x) -> x, sum2(a, b) -> a + b (int64), check(payload) -> 8 B */
extern const adag_class_def_t bench_actor_class;
/* "bench_dev" (bench_device.c): device-bound; copy, stamp, ends on tensors */
extern const adag_class_def_t bench_device_class;
#endif
