#ifndef ADAG_TEST_ACTORS_H
#define ADAG_TEST_ACTORS_H
#include <adag.h>

/* "counter": state int64 offset (init bytes: 8-byte int64, optional).
 * Methods: add(x)->x+offset, sum2(a,b)->a+b+offset, split(x)->(x,-x,2x),
 * calls()->#add/sum2 calls, fail_if_negative(x), sleep_ms(x), crash_if(x)
 * (SIGKILLs itself on 666), die_if(x) (segfaults on 11, exit(7) on 7), echo(bytes), grow(n)->n bytes, pid(),
 * say(x) (prints to stdout and stderr), ret_status(x) (returns status x; 0: outputs x),
 * bad_arg(x) (returns adag_call_arg(call, 3)), spin_ms(x) (busy loop; x < 0 forever),
 * call_lib() (the path of the object adag_call_arg binds to, NUL-terminated),
 * arg_value(x) (the adag_value_t adag_call_arg filled for x, over 0xff bytes),
 * tick() (how many times tick ran on this actor, this call included), base() (the
 * offset), sum3(a,b,c)->a+b+c+offset. */
extern const adag_class_def_t test_counter_class;
/* "broken": init always fails */
extern const adag_class_def_t test_broken_class;
/* "refusing": init fails with a message (adag_init_fail) chosen by its init
 * bytes (tests/modules/test_actors.c); method add */
extern const adag_class_def_t test_refusing_class;
/* "crashy" (module only): init segfaults on init bytes "segv", exit(9) on "exit"; method add */
extern const adag_class_def_t test_crashy_class;
#endif
