/*
 * Starting a worker process: `path --control-fd 3` with one end of a new
 * socketpair as fd 3.
 *
 * The worker is made so that it cannot outlive its driver, and so that the
 * host program's own process handling cannot hide its death:
 *   - it is created with clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD): no
 *     copy of the driver's memory, and a pidfd from the start (no pid reuse
 *     race). The pidfd alone says whether it lives: a host that ignores
 *     SIGCHLD or reaps every child may collect it first, and then
 *     adag__reap still reports it dead (with its exit status where the
 *     kernel keeps it for the pidfd: Linux 6.15 and later);
 *   - it gets a parent-death signal, SIGKILL, which the kernel sends when
 *     the *thread* that spawned it exits. So call this only from a thread
 *     that lives as long as the workers (the runtime's monitor thread);
 *     then a driver that dies in any way (SIGKILL, exec, a crash) takes
 *     its workers with it, even a worker that is stopped (SIGSTOP) or stuck
 *     in a method, and even while a forked child of the driver still holds
 *     the control socket;
 *   - it starts with no signal blocked, default dispositions, and fds 0-2
 *     open (on /dev/null where the driver's are closed), so its writes to
 *     stderr never land in a descriptor the runtime passes it later.
 */
#ifndef ADAG_TRANSPORT_SPAWN_H
#define ADAG_TRANSPORT_SPAWN_H

#include <adag.h>
#include <signal.h>

/* Spawns the worker. Returns its pid, a pidfd (readable once it exited) and
 * the driver's end of the control socket, all close-on-exec and above fd 2. */
adag_status_t adag__spawn_worker(const char *path, int *pid, int *pidfd, int *sock);

/* How a child spawned here ended, once its pidfd polled readable: collects
 * it (waitid on the pidfd) and
 * describes its end in `how` ("killed by signal 9 (SIGKILL)", "exited with
 * status 3"). Returns 1 if it was collected, 0 if it has not exited yet.
 * A child that another wait of this process already collected counts as
 * dead (how it ended from the pidfd's exit record, or "its exit status was
 * collected elsewhere"), never as running. */
int adag__reap(int pidfd, int nohang, char *how, size_t len);

/* Sends sig to the process of pidfd (no pid reuse race). */
int adag__pidfd_kill(int pidfd, int sig);

#endif
