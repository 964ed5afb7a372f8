/*
 * The driver's TCP connection to a remote worker (dag/proc/remote_link.c), made
 * to look like a local one: a relay thread joins the TCP socket to a Unix
 * socketpair whose other end is the actor's control socket, so the process
 * placement (dag/proc/placement_process.c) speaks to a remote worker exactly as
 * to a local one. Frames from the worker are sorted: DAG_FAILED goes to the
 * actor's event socket (the one CREATE_ACTOR carries, which the relay keeps
 * instead of sending), everything else to the control socket. A frame with
 * fds cannot cross hosts: the relay refuses it and drops the link.
 *
 * Liveness: once the connection ends (the worker exited or was killed,
 * the link went silent past the runtime's ADAG_REMOTE_TIMEOUT_MS, the
 * agent refused) the
 * link's dead fd polls readable and the control socket reads EOF.
 */
#ifndef ADAG_DAG_REMOTE_LINK_H
#define ADAG_DAG_REMOTE_LINK_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

typedef struct adag_remote_link adag_remote_link_t;

/* Connects to the agent at host ("host:port"), the link failing when
 * silent for timeout_ms (the runtime's ADAG_REMOTE_TIMEOUT_MS); *ctl is
 * the local end of the control socket (the caller's, closed by the
 * caller). */
adag_status_t adag__remote_open(const char *host, int64_t deadline, int64_t timeout_ms, int *ctl,
                               adag_remote_link_t **out);
/* Readable once the link is down. */
int adag__remote_dead_fd(const adag_remote_link_t *l);
/* 1 and how it ended, once down; 0 while it is up. */
int adag__remote_reap(adag_remote_link_t *l, char *how, size_t len);
/* Ends the connection (the worker sees EOF and exits). */
void adag__remote_kill(adag_remote_link_t *l);
/* Stops the relay and frees the link. */
void adag__remote_close(adag_remote_link_t *l);
const char *adag__remote_host(const adag_remote_link_t *l);

#endif
