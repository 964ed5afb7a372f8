/*
 * Control frames: {u32 type, u32 reserved, u64 length} + payload over a
 * Unix stream socket between the driver and a worker (slow path only);
 * file descriptors (segments, eventfds) ride along with SCM_RIGHTS. The
 * messages themselves are in transport/protocol.h.
 */
#ifndef ADAG_TRANSPORT_CONTROL_H
#define ADAG_TRANSPORT_CONTROL_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

#define ADAG_CTL_MAX_PAYLOAD (64u << 20)
#define ADAG_CTL_MAX_FDS 16

typedef struct {
    uint32_t type;
    void *payload; /* malloc'd (NULL if empty); free with adag__ctl_msg_free */
    size_t len;
    int fds[ADAG_CTL_MAX_FDS];
    unsigned nfds;
} adag_ctl_msg_t;

adag_status_t adag__ctl_send(int sock, uint32_t type, const void *payload, size_t len,
                            const int *fds, unsigned nfds);

/* Sends a small frame (up to a few hundred bytes) only if the socket has
 * room now: ADAG_ERR_AGAIN otherwise; it never blocks. */
adag_status_t adag__ctl_send_nowait(int sock, uint32_t type, const void *payload, size_t len);

/* Receives one frame by the deadline. A peer that closed the socket, before
 * or in the middle of a frame, gives ADAG_ERR_CLOSED (message "peer closed
 * the control socket"); a frame longer than ADAG_CTL_MAX_PAYLOAD gives
 * ADAG_ERR_PROTOCOL; the deadline ADAG_ERR_TIMEOUT. Received fds are
 * close-on-exec, above fd 2, and owned by msg. */
adag_status_t adag__ctl_recv(int sock, int64_t deadline, adag_ctl_msg_t *msg);

void adag__ctl_msg_free(adag_ctl_msg_t *msg);

#endif
