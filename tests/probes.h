/*
 * /proc probes of process hygiene, without Criterion (shared by helpers.c
 * and the fault matrix): open fds, memfd mappings, child processes, the
 * state of a process. Each returns -1 (or 0 where said) if /proc cannot be
 * read.
 */
#ifndef ADAG_TESTS_PROBES_H
#define ADAG_TESTS_PROBES_H

#include <stddef.h>
#include <sys/types.h>

/* Open fds of this process. */
int probe_count_fds(void);

/* Lines of /proc/self/maps that contain needle. */
int probe_count_maps(const char *needle);

/* The emulated device's objects a process holds: its memfds
 * ("adag-dev*" memory, "adag-event") open in /proc/<pid>/fd. */
int probe_device_objects(pid_t pid);

/* Bytes of the memfd mappings of processes pids[0..n) whose memfd name
 * starts with `name` ("adag-dev": the emulated device's memory; "adag:d1":
 * DAG d1's shared-memory segment), each memfd counted once (by inode:
 * memory another process imported, or one mapped twice, is one
 * allocation). -1 if a process's maps cannot be read. */
long long probe_memfd_bytes(const pid_t *pids, int n, const char *name);

/* ppid and state ('R', 'S', 'T', 'Z' ...) of /proc/<pid>/stat; either
 * pointer may be NULL. 0 on success, -1 if the process is gone. */
int probe_stat(pid_t pid, pid_t *ppid, char *state);

/* Children of `parent` (by ppid): up to max pids into out (may be NULL),
 * *zombies (may be NULL) = those in state Z. Returns their number. */
int probe_children(pid_t parent, pid_t *out, int max, int *zombies);

/* The command name of pid (/proc/<pid>/comm, set at exec) into out;
 * 0 on success, -1 if the process is gone. */
int probe_comm(pid_t pid, char *out, size_t n);

/* "/proc/<pid>/stat state S (sleeping), ppid .., wchan .., threads
 * (tid:state:wchan) .., cmd: .." for a report (what `ps -o
 * pid,stat,wchan,cmd` shows, with every thread's wait channel). */
void probe_describe(pid_t pid, char *out, size_t n);

#endif
