#include "dag/exec/class.h"

#include "common/error.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NRESERVED(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_MODULE_CLASSES 4096 /* bound on a module's class table (NULL-terminated) */

adag_status_t adag__class_validate(const adag_class_def_t *def, const char *where)
{
    if (def->abi_version != ADAG_ABI_VERSION)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: the class definition has abi_version %u, this library has "
                          "ADAG_ABI_VERSION %u (%s)",
                          where, def->abi_version, ADAG_ABI_VERSION,
                          def->abi_version == 0
                              ? "0 means it was never set: define the class with "
                                ".abi_version = ADAG_ABI_VERSION"
                              : "rebuild it against this adag.h");
    if (!def->name || !*def->name || strnlen(def->name, ADAG_MAX_NAME) >= ADAG_MAX_NAME)
        return adag__error(ADAG_ERR_INVALID, "%s: class name must be 1..%d bytes", where,
                          ADAG_MAX_NAME - 1);
    for (unsigned r = 0; r < NRESERVED(def->reserved); r++)
        if (def->reserved[r])
            return adag__error(ADAG_ERR_INVALID,
                              "%s: class %s: reserved[%u] is 0x%llx; the reserved words of "
                              "adag_class_def_t must be zero",
                              where, def->name, r, (unsigned long long)def->reserved[r]);
    if (def->nmethods == 0 || !def->methods)
        return adag__error(ADAG_ERR_INVALID, "%s: class %s has no methods", where, def->name);
    if (def->nmethods > ADAG_MAX_METHODS)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: class %s has %u methods, more than ADAG_MAX_METHODS (%d)", where,
                          def->name, def->nmethods, ADAG_MAX_METHODS);
    for (unsigned i = 0; i < def->nmethods; i++) {
        const adag_method_def_t *m = &def->methods[i];
        if (!m->fn || !adag__method_shape_ok(m->name, m->nargs, m->nreturns))
            return adag__error(ADAG_ERR_INVALID,
                              "%s: class %s method %u (%s) needs a name of 1..%d bytes, a "
                              "function, 0..%d args and 1..%d returns",
                              where, def->name, i, m->name ? m->name : "(null)",
                              ADAG_MAX_NAME - 1, ADAG_MAX_ARGS, ADAG_MAX_RETURNS);
        for (unsigned j = 0; j < i; j++)
            if (strcmp(def->methods[j].name, m->name) == 0)
                return adag__error(ADAG_ERR_INVALID, "%s: class %s defines method %s twice",
                                  where, def->name, m->name);
    }
    for (const char *const *c = def->capturable; c && *c; c++) {
        unsigned i = 0;
        while (i < def->nmethods && strcmp(def->methods[i].name, *c) != 0)
            i++;
        if (i == def->nmethods)
            return adag__error(ADAG_ERR_INVALID,
                              "%s: class %s: capturable names method %s, which the class does "
                              "not define", where, def->name, *c);
    }
    return ADAG_OK;
}

adag_status_t adag__class_methods(const adag_class_def_t *def, const char *where,
                                 adag_method_info_t **methods)
{
    adag_method_info_t *m = calloc(def->nmethods, sizeof(*m));
    if (!m)
        return adag__error(ADAG_ERR_NO_MEMORY, "%s: out of memory for the %u methods of class %s",
                          where, def->nmethods, def->name);
    for (unsigned i = 0; i < def->nmethods; i++) {
        snprintf(m[i].name, sizeof(m[i].name), "%s", def->methods[i].name);
        m[i].fn = def->methods[i].fn;
        m[i].nargs = def->methods[i].nargs;
        m[i].nreturns = def->methods[i].nreturns;
        for (const char *const *c = def->capturable; c && *c; c++)
            m[i].capturable |= strcmp(*c, m[i].name) == 0;
    }
    *methods = m;
    return ADAG_OK;
}

/* The module's ABI version: ADAG_OK if it is ours. */
static adag_status_t check_module_abi(void *handle, const char *path)
{
    const uint32_t *version = dlsym(handle, "adag_module_abi_version");
    if (!version)
        return adag__error(ADAG_ERR_INVALID,
                          "module %s has no ABI version (no adag_module_abi_version symbol: built "
                          "against an adag older than 0.2, or without ADAG_MODULE); this "
                          "adag-worker has ABI version %u: rebuild the module against its adag.h",
                          path, ADAG_ABI_VERSION);
    if (*version != ADAG_ABI_VERSION)
        return adag__error(ADAG_ERR_INVALID,
                          "module %s was built for adag ABI version %u, this adag-worker has ABI "
                          "version %u: rebuild the module against its adag.h",
                          path, *version, ADAG_ABI_VERSION);
    return ADAG_OK;
}

adag_status_t adag__module_load(const char *path, const char *class_name, const void *init,
                               size_t init_size, void **handle, const adag_class_def_t **def)
{
    const adag_class_def_t *found = NULL;
    char where[PATH_MAX + 16];
    adag_status_t st;
    int ran_resolver = 0;

    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return adag__error(ADAG_ERR_NOT_FOUND, "cannot load module %s: %s", path, dlerror());
    const adag_module_resolve_fn *resolve = NULL;
    if ((st = check_module_abi(h, path)) != ADAG_OK)
        goto fail;
    const adag_class_def_t *const *classes = dlsym(h, "adag_module_classes");
    resolve = dlsym(h, "adag_module_resolve");
    if (!classes && !resolve) {
        st = adag__error(ADAG_ERR_NOT_FOUND,
                        "module %s exports no classes (neither ADAG_MODULE nor "
                        "ADAG_MODULE_RESOLVER)",
                        path);
        goto fail;
    }
    for (unsigned i = 0; classes && classes[i] && i < MAX_MODULE_CLASSES && !found; i++)
        if (classes[i]->name && strcmp(classes[i]->name, class_name) == 0)
            found = classes[i];
    if (!found && resolve && *resolve) {
        ran_resolver = 1;
        /* the module makes the class: what it reports (adag_fail) is the
         * message; a status without one is named here */
        adag__error_clear();
        st = (*resolve)(class_name, init, init_size, &found);
        if (st == ADAG_OK && !found)
            st = adag__error(ADAG_ERR_INTERNAL,
                            "module %s: its resolver returned ADAG_OK and no class for %s", path,
                            class_name);
        if (st != ADAG_OK) {
            if (!adag_last_error()[0])
                adag__error(st, "module %s cannot make class %s (%s)", path, class_name,
                           adag_status_str(st));
            else
                adag__error_prefix("module %s, class %s", path, class_name);
            goto fail;
        }
    }
    if (!found) {
        st = adag__error(ADAG_ERR_NOT_FOUND, "module %s has no class %s", path, class_name);
        goto fail;
    }
    snprintf(where, sizeof(where), "module %s", path);
    if ((st = adag__class_validate(found, where)) != ADAG_OK)
        goto fail;
    *handle = h;
    *def = found;
    return ADAG_OK;
fail:
    /* a resolver that ran may have started threads (an interpreter): the
     * module stays */
    if (!ran_resolver)
        dlclose(h);
    return st;
}

/* ---- init: running it, and why it failed ---- */

/* The init running on this thread (adag__class_init) and the first message
 * it gave adag_init_fail. Thread-local: an init runs on the thread that
 * creates the actor (a thread actor's) or the worker's main thread. */
typedef struct {
    int running, failed;
    char msg[ADAG_INIT_MSG_MAX];
} init_call_t;
/* "actor <name>: init of class <name> failed: <msg>" fits a REPLY's message */
_Static_assert(ADAG_INIT_MSG_MAX + 2 * ADAG_MAX_NAME + 32 <= ADAG_ERROR_MAX,
               "an init's message with the actor's and class's names fits ADAG_ERROR_MAX");
static _Thread_local init_call_t init_call;

adag_status_t adag_init_fail(const char *fmt, ...)
{
    if (!init_call.running)
        return adag__error(ADAG_ERR_INVALID, "adag_init_fail: no class's init runs on this thread");
    if (!init_call.failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(init_call.msg, sizeof(init_call.msg), fmt ? fmt : "(no message)", ap);
        va_end(ap);
        init_call.failed = 1;
    }
    return ADAG_ERR_INVALID;
}

adag_status_t adag__class_init(const adag_class_def_t *def, void *state, const void *data,
                              size_t size, const char *who)
{
    /* an init may create an actor whose init runs here too: its record
     * is its own, and this one's comes back after it */
    init_call_t outer = init_call;
    init_call.running = 1;
    init_call.failed = 0;
    adag_status_t st = def->init(state, data, size);
    init_call_t done = init_call;
    init_call = outer;
    if (st == ADAG_OK)
        return ADAG_OK;
    adag_status_t ret = st == ADAG_ERR_NO_MEMORY ? st : ADAG_ERR_INVALID;
    if (done.failed)
        return adag__error(ret, "%s%sinit of class %s failed: %s", who ? who : "", who ? ": " : "",
                          def->name, done.msg);
    return adag__error(ret, "%s%sinit of class %s returned %s", who ? who : "", who ? ": " : "",
                      def->name, adag_status_str(st));
}
