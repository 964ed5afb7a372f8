/* The process side of a process actor: adag-worker's main loop. Not part
 * of the public API and not exported by libadag.so: tools/adag-worker.c
 * links the static library (Makefile). */
#ifndef ADAG_DAG_WORKER_H
#define ADAG_DAG_WORKER_H

int adag_worker_main(int argc, char **argv);
/* adag-worker --agent (dag/agent.c): never returns unless it cannot start. */
int adag_agent_main(const char *addr, const char *port_file);

#endif
