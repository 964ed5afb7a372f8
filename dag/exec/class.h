/* Actor classes wherever they come from: adag_class_register (thread
 * actors, dag/runtime.c) and modules loaded by adag-worker (process actors,
 * dag/proc/worker.c) check a class definition here, the same way; the driver
 * checks the method table a worker replies with (dag/proc/actor.c) against the
 * same limits (adag__method_shape_ok). */
#ifndef ADAG_DAG_CLASS_H
#define ADAG_DAG_CLASS_H

#include "common/names.h"
#include "dag/exec/loop.h"

#include <adag.h>
#include <string.h>

/* Checks a class definition: abi_version == ADAG_ABI_VERSION (checked
 * first: nothing else is read from a definition of another ABI), reserved
 * words zero, a valid name, 1..ADAG_MAX_METHODS methods, each with a
 * function and within adag__method_shape_ok, no name twice. ADAG_ERR_INVALID
 * with a message that starts with `where` ("adag_class_register",
 * "module <path>") and names the class and the method. */
adag_status_t adag__class_validate(const adag_class_def_t *def, const char *where);

/* A copy of a validated class's method table (calloc'd; free() it). */
adag_status_t adag__class_methods(const adag_class_def_t *def, const char *where,
                                 adag_method_info_t **methods);

/* Loads module `path` (dlopen, RTLD_NOW | RTLD_LOCAL), checks that it was
 * built for this ADAG_ABI_VERSION (adag_module_abi_version; a missing
 * symbol or another version is ADAG_ERR_INVALID naming the path and both
 * versions), finds class `class_name` in its adag_module_classes or, when
 * the table lacks it, asks the module's resolver (adag_module_resolve,
 * given the actor's init bytes) to make it (ADAG_ERR_NOT_FOUND if the
 * module, the class or both exports are missing; a resolver's own status
 * and message otherwise) and validates it (adag__class_validate). On
 * success *handle is the dlopen handle and *def the class; on failure the
 * module is unloaded, unless its resolver ran. */
adag_status_t adag__module_load(const char *path, const char *class_name, const void *init,
                               size_t init_size, void **handle, const adag_class_def_t **def);

/* The most bytes of a message adag_init_fail keeps, its NUL included:
 * with the actor's and class's names it fits a control REPLY's message
 * (ADAG_ERROR_MAX), which carries it from a worker to the driver. */
#define ADAG_INIT_MSG_MAX 256

/* Runs def->init (not NULL) on this thread, where adag_init_fail records
 * why it fails. On failure (ADAG_ERR_NO_MEMORY stays itself, any other
 * status is ADAG_ERR_INVALID) reports "<who>: init of class <name> failed:
 * <message>", or "... returned <status>" from an init that gave none (no
 * "<who>: " when who is NULL). */
adag_status_t adag__class_init(const adag_class_def_t *def, void *state, const void *data,
                              size_t size, const char *who);

#endif
