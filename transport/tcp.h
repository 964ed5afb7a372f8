/*
 * TCP for the control plane between hosts (transport/protocol.h frames over
 * a stream socket, as over the local Unix socket, without fds), and the
 * shared token that authenticates a driver to an agent (adag-worker
 * --agent). Addresses are "host:port" (an IPv4 address or a name; port 0
 * when listening: the kernel picks one).
 */
#ifndef ADAG_TRANSPORT_TCP_H
#define ADAG_TRANSPORT_TCP_H

#include "common/settings.h"

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

#define ADAG_TOKEN_MAX 256
#define ADAG_HOSTPORT_MAX 320

/* Listens on addr; *bound gets the address actually bound ("ip:port"). */
adag_status_t adag__tcp_listen(const char *addr, int *fd, char *bound, size_t bound_len);
/* Connects to addr by the deadline. */
adag_status_t adag__tcp_connect(const char *addr, int64_t deadline, int *fd);
/* A connection that stays silent (no ACK, no keepalive answer) for about
 * timeout_ms fails: keepalive probes every second after a second idle, and
 * the same bound on data sent but not acknowledged (TCP_USER_TIMEOUT); no
 * Nagle delay. */
adag_status_t adag__tcp_tune(int fd, int64_t timeout_ms);
/* "ip:port" of the socket's peer (or "?"). */
void adag__tcp_peer_name(int fd, char *out, size_t len);

/* The token of settings s (a runtime's, or an agent's environment): the
 * contents of ADAG_TOKEN_FILE (a regular file of this user, mode 0600 or
 * 0400, a trailing newline dropped), else ADAG_TOKEN; ADAG_ERR_NOT_FOUND if
 * neither is set, ADAG_ERR_INVALID for a file others may read or a token
 * that is empty or longer than ADAG_TOKEN_MAX. */
adag_status_t adag__token_load(const adag_settings_t *s, char *out, size_t *len);
/* 1 if a and b are the same token; the time taken does not depend on where
 * they differ. */
int adag__token_equal(const void *a, size_t alen, const void *b, size_t blen);

#endif
