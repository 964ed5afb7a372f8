/*
 * Hosts made of network namespaces for the multi-host tests
 * (tests/test_netns.c, the PMIx test, adag-bench's cross-host rows).
 *
 * h_netns_up makes n "hosts", namespaces adag<pid>h0 .. h<n-1>, each with
 * one interface eth0 (10.<a>.<b>.<i+1>/24) on a veth pair whose other end
 * is a port of bridge br0 in a namespace of its own (adag<pid>br): every
 * packet stays inside these namespaces, the host's own interfaces are never
 * touched. Needs root and `ip` (iproute2); where either is missing, or the
 * kernel refuses namespaces, it says why and the caller skips.
 */
#ifndef ADAG_TESTS_NETNS_RIG_H
#define ADAG_TESTS_NETNS_RIG_H

#include <stddef.h>

#define H_NETNS_MAX 4

typedef struct h_netns {
    unsigned n;
    char ns[H_NETNS_MAX][32];  /* the hosts' namespaces */
    char ip[H_NETNS_MAX][32];  /* their eth0 addresses */
    char bridge[32];           /* the bridge's namespace */
} h_netns_t;

/* Makes n hosts (n <= H_NETNS_MAX). Returns 0, or -1 with why (the reason
 * to skip) filled; nothing is left behind on failure. Namespaces left by
 * processes that are gone (a test killed mid-way) are removed first. */
int h_netns_up(h_netns_t *h, unsigned n, char *why, size_t why_len);
/* Removes them (processes still inside keep theirs until they exit). */
void h_netns_down(h_netns_t *h);
/* Moves the calling thread into the namespace named ns (threads it creates
 * afterwards follow). 0 or -1 (errno). */
int h_netns_join(const char *ns);
/* Cuts (up = 0) or restores host i's link: its port on the bridge goes
 * down, so its packets go nowhere (no reset: what a pulled cable does). */
void h_netns_link(const h_netns_t *h, unsigned i, int up);
/* A one-way partition: with on, host `from` drops every packet it would
 * send to host `to` (a blackhole route for to's address in from's
 * namespace; no error reaches the sockets, the packets just go nowhere),
 * while to's packets still reach from; off removes the route. */
void h_netns_blackhole(const h_netns_t *h, unsigned from, unsigned to, int on);
/* Settings every process of a netns test uses: UCX over TCP on eth0 (the
 * hosts share one kernel: without it UCX would pick shared memory). */
void h_netns_ucx_env(void);

#endif
