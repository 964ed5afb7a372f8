/*
 * A module that makes its classes when asked (ADAG_MODULE_RESOLVER), the
 * way a language binding's module does (tests/test_module_resolver.c):
 *   "scale<k>"   a class made for that name: mul(x) = x * k (int64), and
 *                init bytes, when given, are an int64 added after (x*k + b);
 *   "empty"      a class with no methods (the worker must refuse it);
 *   "refuse"     fails with ADAG_ERR_INVALID and a message (adag_fail),
 *                which reads the actor's init bytes as text;
 *   "quiet"      fails with ADAG_ERR_IO and no message;
 *   anything else: ADAG_ERR_NOT_FOUND with a message.
 * Each class made is leaked on purpose: it must outlive the module's use
 * (the worker's life).
 */
#include <adag.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t k, b;
} scale_state_t;

static adag_status_t scale_init(void *state, const void *data, size_t size)
{
    scale_state_t *s = state;
    /* k comes from the class's name (made->k); b from the init bytes */
    if (size == sizeof(int64_t))
        memcpy(&s->b, data, sizeof(s->b));
    else if (size != 0)
        return adag_init_fail("init: 8 bytes (an int64) or none, got %zu", size);
    return ADAG_OK;
}

typedef struct {
    adag_class_def_t def;
    adag_method_def_t methods[1];
    char name[ADAG_MAX_NAME];
    int64_t k;
} made_class_t;

/* The made class of the running worker (one actor per worker). */
static made_class_t *made;

static adag_status_t scale_mul(void *state, adag_call_h call)
{
    scale_state_t *s = state;
    adag_value_t in;
    adag_status_t st = adag_call_arg(call, 0, &in);
    if (st != ADAG_OK)
        return st;
    if (in.size != sizeof(int64_t))
        return adag_call_fail(call, "mul: 8 bytes, got %zu", in.size);
    int64_t x;
    memcpy(&x, in.data, sizeof(x));
    x = x * made->k + s->b;
    return adag_call_set_output(call, 0, &x, sizeof(x));
}

static adag_status_t resolve(const char *name, const void *init, size_t init_size,
                             const adag_class_def_t **def)
{
    if (strcmp(name, "refuse") == 0)
        return adag_fail(ADAG_ERR_INVALID, "refused because %.*s", (int)init_size,
                         (const char *)init);
    if (strcmp(name, "quiet") == 0)
        return ADAG_ERR_IO;
    int is_empty = strcmp(name, "empty") == 0;
    char *end = NULL;
    long long k = strncmp(name, "scale", 5) == 0 ? strtoll(name + 5, &end, 10) : 0;
    if (!is_empty && (!end || end == name + 5 || *end))
        return adag_fail(ADAG_ERR_NOT_FOUND, "no class %s here: scale<k>, empty, refuse or quiet",
                         name);
    made_class_t *c = calloc(1, sizeof(*c));
    if (!c)
        return adag_fail(ADAG_ERR_NO_MEMORY, "out of memory for class %s", name);
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->k = k;
    c->methods[0] = (adag_method_def_t){"mul", scale_mul, 1, 1};
    c->def = (adag_class_def_t){
        .abi_version = ADAG_ABI_VERSION,
        .name = c->name,
        .state_size = sizeof(scale_state_t),
        .init = scale_init,
        .methods = c->methods,
        .nmethods = is_empty ? 0 : 1,
    };
    made = c;
    *def = &c->def;
    return ADAG_OK;
}

ADAG_MODULE_RESOLVER(resolve);
