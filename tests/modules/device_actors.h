#ifndef ADAG_TEST_DEVICE_ACTORS_H
#define ADAG_TEST_DEVICE_ACTORS_H
#include <adag.h>

/* "devactor": methods for device-bound actors (tests/test_device_actor.c).
 * Compiled into adag-tests (thread actors) and exported by
 * libdevice_actors.so (process actors). Every method takes one int64.
 *   device(x)      -> adag_call_device()
 *   has_stream(x)  -> 1 if adag_call_stream() is not NULL, else 0
 *   record(x)      -> x; enqueues a kernel that sleeps x ms, then appends x
 *                     to the actor's log; the method overwrites its copy of
 *                     the kernel's arguments right after enqueueing
 *   readlog(x)     -> the log (int64s, oldest first), read after the work
 *                     enqueued so far is done; then empties it
 *   slow(ms)       -> the time the method ran (CLOCK_MONOTONIC ns); enqueues a
 *                     kernel that sleeps ms
 *   drain(x)       -> x, once the work enqueued so far is done
 *   try_enqueue(x) -> x; returns adag_call_enqueue's status: x 0 a valid
 *                     kernel, 1 fn NULL, 2 257 bytes of arguments
 *   late_read(x)   -> 0; enqueues a kernel that reads x in its input slot
 *                     200 ms later and appends it to the log */
extern const adag_class_def_t test_device_class;
#endif
