/*
 * Modules that do not match this library's ABI, one per build flag
 * (Makefile: libbad_abi_<flag>.so); adag-worker must refuse each before
 * running anything from it (tests/test_abi.c):
 *   BAD_ABI_NEWER    adag_module_abi_version is ADAG_ABI_VERSION + 1, as if
 *                    built against a newer adag.h;
 *   BAD_ABI_MISSING  no adag_module_abi_version, as if built before modules
 *                    recorded it;
 *   BAD_ABI_CLASS    the module's version is right (ADAG_MODULE) but its class
 *                    leaves abi_version unset (0).
 * The symbols are defined by hand where ADAG_MODULE would get them right.
 */
#include <adag.h>

#include <stdlib.h>

/* never runs: the worker must refuse the module first */
static adag_status_t bad_init(void *state, const void *data, size_t size)
{
    (void)state;
    (void)data;
    (void)size;
    abort();
}

static adag_status_t bad_add(void *state, adag_call_h call)
{
    (void)state;
    (void)call;
    abort();
}

static const adag_method_def_t bad_methods[] = {{"add", bad_add, 1, 1}};

static const adag_class_def_t bad_class = {
#ifndef BAD_ABI_CLASS
    .abi_version = ADAG_ABI_VERSION,
#endif
    .name = "counter",
    .state_size = 8,
    .init = bad_init,
    .methods = bad_methods,
    .nmethods = 1,
};

#if defined(BAD_ABI_NEWER)
ADAG_API const uint32_t adag_module_abi_version = ADAG_ABI_VERSION + 1;
ADAG_API const adag_class_def_t *const adag_module_classes[] = {&bad_class, NULL};
#elif defined(BAD_ABI_MISSING)
ADAG_API const adag_class_def_t *const adag_module_classes[] = {&bad_class, NULL};
#elif defined(BAD_ABI_CLASS)
ADAG_MODULE(&bad_class);
#else
#error "build with -DBAD_ABI_NEWER, -DBAD_ABI_MISSING or -DBAD_ABI_CLASS"
#endif
