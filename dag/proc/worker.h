/* The process side of a process actor: adag-worker's main loop. Not part
 * of the public API and not exported by libadag.so: tools/adag-worker.c
 * links the static library (Makefile). */
#ifndef ADAG_DAG_WORKER_H
#define ADAG_DAG_WORKER_H

#include <stddef.h>

int adag__worker_main(int argc, char **argv);
/* adag-worker --agent (dag/proc/agent.c): never returns unless it cannot start. */
int adag__agent_main(const char *addr, const char *port_file);
/* The agent's loop on a listening socket `lfd` (its address `bound`),
 * checking `token`: returns 0 once stop_fd (-1: none) polls readable, 2 if
 * it cannot start (no memory, its own executable not found). */
int adag__agent_serve(int lfd, const char *bound, const char *token, size_t token_len,
                     int stop_fd);
/* adag-worker --pmix [-- PROGRAM ARGS...] (tools/worker_pmix.c): one rank of
 * a job started by mpirun or srun. */
int adag__pmix_main(int argc, char **argv);

#endif
