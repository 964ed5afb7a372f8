/*
 * Python classes as adag classes: what the extension (python/src/pyactor.c)
 * gives the package's worker module (python/src/worker/pyworker.c), which
 * adag-worker loads for an actor whose class is written in Python.
 *
 * The worker module starts the interpreter, imports adag._adag and takes
 * this table from its capsule adag._adag._worker_api; its resolver
 * (ADAG_MODULE_RESOLVER) then hands the class name and the actor's init
 * bytes to resolve(), which makes the class (adag/_actor.py: import the
 * class, describe its methods). Called with the GIL held.
 */
#ifndef ADAGPY_PYACTOR_H
#define ADAGPY_PYACTOR_H

#include <adag.h>

#define ADAGPY_WORKER_API_VERSION 1
#define ADAGPY_WORKER_API_CAPSULE "adag._adag._worker_api"

typedef struct {
    unsigned version; /* ADAGPY_WORKER_API_VERSION */
    adag_status_t (*resolve)(const char *class_name, const void *init, size_t init_size,
                             const adag_class_def_t **def);
} adagpy_worker_api_t;

#endif
