#ifndef ADAG_TEST_DEVICE_ACTORS_H
#define ADAG_TEST_DEVICE_ACTORS_H
#include <adag.h>

/* "devactor": methods for device-bound actors (tests/test_device_actor.c).
 * Compiled into adag-tests (thread actors) and exported by
 * libdevice_actors.so (process actors). Every method takes one argument.
 *   device(x)      -> adag_call_device()
 *   has_stream(x)  -> 1 if adag_call_stream() is not NULL, else 0
 *   record(x)      -> x; enqueues a kernel that sleeps x ms, then appends x
 *                     to the actor's log; the method overwrites its copy of
 *                     the kernel's arguments right after enqueueing
 *   readlog(x)     -> the log (int64s, oldest first), read after the work
 *                     enqueued so far is done; then empties it
 *   slow(ms)       -> the time the method ran (CLOCK_MONOTONIC ns), set with
 *                     adag_call_set_output; enqueues a kernel that sleeps ms
 *   drain(x)       -> x, once the work enqueued so far is done
 *   try_enqueue(x) -> x; returns adag_call_enqueue's status: x 0 a valid
 *                     kernel, 1 fn NULL, 2 257 bytes of arguments
 *   late_read(x)   -> 0; enqueues a kernel that reads x in its input slot
 *                     200 ms later and appends it to the log
 *   late_stamp(ms) -> the time a kernel that first sleeps ms wrote into the
 *                     return's host buffer (adag_call_output, undeclared)
 *   affine_host(v) -> v * 3 + 1 for each int64 of v, computed by a kernel
 *                     (after 300 us) from the input slot into the host
 *                     return: host values that only the kernel touches
 *   log_late(x)    -> an i64 tensor [1] nothing writes (declare it); a kernel
 *                     appends x to the log, read from the input slot 2 ms
 *                     after the method returned */
extern const adag_class_def_t test_device_class;
#endif
