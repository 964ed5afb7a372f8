/* CPU sets as text: the list form Linux uses ("0-3,8,10-11"), parsed and
 * written by one pair of functions that placement, the data stage and the
 * tools share. */
#ifndef ADAG_COMMON_CPUSET_H
#define ADAG_COMMON_CPUSET_H

#include <sched.h>
#include <stddef.h>

/* Longest list adag writes for one set (CPU_SETSIZE CPUs, worst case). */
#define ADAG_CPULIST_MAX 512

/* Parses "0-3,8": CPUs below CPU_SETSIZE, ranges low-high, no spaces;
 * 0 on success, -1 (with `*bad` pointing at the offending text) on an
 * empty list, a malformed item, a range going down or a CPU too large. */
int adag__cpulist_parse(const char *text, cpu_set_t *out, const char **bad);

/* Writes the set as a list ("" for the empty set); truncated at len. */
void adag__cpulist_format(const cpu_set_t *set, char *buf, size_t len);

/* The CPUs this thread may run on (sched_getaffinity), or CPU 0 alone if
 * the call fails. */
void adag__cpus_allowed(cpu_set_t *out);

#endif
