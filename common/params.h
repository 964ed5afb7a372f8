/* The field_mask rule of every public params struct (include/adag.h,
 * "Conventions"): a bit this library does not know is refused, and so is a
 * field that is not zero while its bit is clear (the caller set it and
 * forgot the bit, or set the bit of another field): both ADAG_ERR_INVALID
 * naming the struct, the field and the bit. Each params struct's reader
 * lists its fields once, in a table of adag_param_field_t; the bits it
 * knows are those of its table. Fields without a bit (required ones, e.g.
 * adag_data_params_t.shards) are not listed. The check reads every listed
 * field: the caller's struct has them all while the major version is 0
 * (its header is the library's); a library that accepts older minors must
 * stop at the caller's fields (docs/design.md, "Room to grow"). */
#ifndef ADAG_COMMON_PARAMS_H
#define ADAG_COMMON_PARAMS_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *field; /* "device" */
    const char *bit;   /* "ADAG_ACTOR_PARAM_DEVICE" */
    uint64_t mask;     /* the bit's value */
    size_t off, size;  /* where the field lies in the struct */
} adag_param_field_t;

/* The table entry of member `member` of params struct `type`, set by `bit`. */
#define ADAG_PARAM_FIELD(type, member, bit)                                                    \
    {#member, #bit, (uint64_t)(bit), offsetof(type, member), sizeof(((type *)0)->member)}

#define ADAG_PARAM_COUNT(table) ((unsigned)(sizeof(table) / sizeof((table)[0])))

/* Checks params struct `p` (of type `params`, read by `fn`) against its
 * table fields[0..n): ADAG_ERR_INVALID for the lowest bit of `mask` that no
 * field has ("fn: unknown field_mask bit 0x400 in <params> (this library
 * knows 0x3ff)"), or for the first listed field whose bytes are not all
 * zero while its bit is clear ("fn: <params>.<field> is set, but its bit
 * <BIT> is clear in field_mask: ..."); ADAG_OK otherwise. p may be NULL
 * (no field set) when mask is 0. */
adag_status_t adag__params_check(const char *fn, const char *params, const void *p,
                                uint64_t mask, const adag_param_field_t *fields, unsigned n);

#endif
