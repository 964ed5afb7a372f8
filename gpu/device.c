/* The table of device backends, by kind; device specs ("cuda:1") and
 * adag_device_count. */
#include "gpu/device.h"

#include "common/error.h"

#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

extern const adag_device_ops_t adag_device_emu_ops;
extern const adag_device_ops_t adag_device_cuda_ops;

static const adag_device_ops_t *const backends[ADAG_DEVICE_KIND_COUNT] = {
    [ADAG_DEV_EMULATED] = &adag_device_emu_ops,
    [ADAG_DEV_CUDA] = &adag_device_cuda_ops,
};

const adag_device_ops_t *adag__device_backend(uint32_t kind)
{
    return kind < ADAG_DEVICE_KIND_COUNT ? backends[kind] : NULL;
}

void adag__dev_handle_close(adag_dev_handle_t *h)
{
    for (unsigned i = 0; i < h->nfds && i < ADAG_DEVICE_MAX_FDS; i++) {
        if (h->fds[i] >= 0)
            close(h->fds[i]);
        h->fds[i] = -1;
    }
    h->nfds = 0;
}

const adag_device_ops_t *adag__device_backend_named(const char *name)
{
    for (uint32_t k = 0; k < ADAG_DEVICE_KIND_COUNT; k++)
        if (backends[k] && strcmp(backends[k]->name, name) == 0)
            return backends[k];
    return NULL;
}

/* "emu, cuda" */
static void known_backends(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < ADAG_DEVICE_KIND_COUNT && used < len; k++)
        if (backends[k])
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                                     backends[k]->name);
}

adag_status_t adag__device_parse(const char *spec, adag_device_kind_t *kind, unsigned *index)
{
    char name[ADAG_DEVICE_SPEC_MAX], known[128];
    if (!spec)
        return adag__error(ADAG_ERR_INVALID, "device is NULL");
    size_t len = strnlen(spec, ADAG_DEVICE_SPEC_MAX);
    if (len >= ADAG_DEVICE_SPEC_MAX)
        return adag__error(ADAG_ERR_INVALID, "device \"%.*s...\" is longer than %d bytes",
                          ADAG_DEVICE_SPEC_MAX / 2, spec, ADAG_DEVICE_SPEC_MAX - 1);
    const char *colon = strchr(spec, ':');
    const char *digits = colon ? colon + 1 : NULL;
    if (!colon || colon == spec || !*digits || strspn(digits, "0123456789") != strlen(digits))
        return adag__error(ADAG_ERR_INVALID,
                          "device \"%s\" is not \"<backend>:<index>\" (e.g. \"cuda:0\", "
                          "\"emu:1\")",
                          spec);
    uint64_t v = 0;
    for (const char *p = digits; *p; p++) {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > ADAG_DEVICE_INDEX_MAX)
            return adag__error(ADAG_ERR_INVALID, "device \"%s\": the index must be 0..%d", spec,
                              ADAG_DEVICE_INDEX_MAX);
    }
    memcpy(name, spec, (size_t)(colon - spec));
    name[colon - spec] = '\0';
    const adag_device_ops_t *ops = adag__device_backend_named(name);
    if (!ops) {
        known_backends(known, sizeof(known));
        return adag__error(ADAG_ERR_NOT_FOUND, "device \"%s\": unknown backend \"%s\" (known: %s)",
                          spec, name, known);
    }
    *kind = ops->kind;
    *index = (unsigned)v;
    return ADAG_OK;
}

adag_status_t adag_device_count(const char *backend, unsigned *count)
{
    char why[ADAG_ERROR_MAX / 2] = "", known[128];
    if (!backend || !count)
        return adag__error(ADAG_ERR_INVALID, "adag_device_count: backend and count must not be "
                                            "NULL");
    const adag_device_ops_t *ops = adag__device_backend_named(backend);
    if (!ops) {
        known_backends(known, sizeof(known));
        return adag__error(ADAG_ERR_NOT_FOUND,
                          "adag_device_count: unknown device backend \"%s\" (known: %s)", backend,
                          known);
    }
    *count = ops->probe(why, sizeof(why));
    if (*count == 0)
        adag__error(ADAG_OK, "adag_device_count: %s: no device: %s", ops->name,
                   why[0] ? why : "(no reason given)");
    return ADAG_OK;
}

void adag__device_page_span(void *ptr, size_t size, void **base, size_t *len)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)ptr & ~(page - 1);
    uintptr_t hi = ((uintptr_t)ptr + (size ? size : 1) + page - 1) & ~(page - 1);
    *base = (void *)lo;
    *len = (size_t)(hi - lo);
}
