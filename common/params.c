#include "common/params.h"

#include "common/error.h"

static int all_zero(const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

adag_status_t adag__params_check(const char *fn, const char *params, const void *p,
                                uint64_t mask, const adag_param_field_t *fields, unsigned n)
{
    uint64_t known = 0;
    for (unsigned i = 0; i < n; i++)
        known |= fields[i].mask;
    uint64_t unknown = mask & ~known;
    if (unknown)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: unknown field_mask bit 0x%llx in %s (this library knows 0x%llx)",
                          fn, (unsigned long long)(unknown & -unknown), params,
                          (unsigned long long)known);
    for (unsigned i = 0; p && i < n; i++) {
        const adag_param_field_t *f = &fields[i];
        if (!(mask & f->mask) && !all_zero((const unsigned char *)p + f->off, f->size))
            return adag__error(ADAG_ERR_INVALID,
                              "%s: %s.%s is set, but its bit %s is clear in field_mask: a "
                              "field whose bit is clear must be zero (set %s, or leave the "
                              "field zero for its default)",
                              fn, params, f->field, f->bit, f->bit);
    }
    return ADAG_OK;
}
