/* The process side of a process actor: adag-worker's main loop. Exported
 * only so tools/adag-worker.c can call it; not part of the public API. */
#ifndef ADAG_DAG_WORKER_H
#define ADAG_DAG_WORKER_H

#include <adag.h>

ADAG_API int adag_worker_main(int argc, char **argv);

#endif
