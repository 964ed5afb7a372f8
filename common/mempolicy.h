/* NUMA memory policy (Linux set_mempolicy / mbind), without libnuma. */
#ifndef ADAG_COMMON_MEMPOLICY_H
#define ADAG_COMMON_MEMPOLICY_H

#include <stddef.h>

/* Nodes above this are refused (the masks are one word). */
#define ADAG_MEMPOLICY_MAX_NODE 63

/* The calling thread's future allocations (and its later threads')
 * prefer node `node`. 0, or -1 with errno. */
int adag__mempolicy_thread(int node);

/* The pages of [addr, addr + len), rounded out to whole pages, prefer
 * node `node` (for a shared mapping, every process that maps them). 0, or
 * -1 with errno. */
int adag__mempolicy_range(void *addr, size_t len, int node);

/* The policy of the page at addr: its mode (MPOL_*) and the first node
 * of its mask (-1 if none). 0, or -1 with errno. */
int adag__mempolicy_of(void *addr, int *mode, int *node);

#endif
