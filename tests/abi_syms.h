/*
 * Symbol sets for the export checks (tests/test_abi.c, test_abi_data.c):
 * the ADAG_API functions a public header declares, the dynamic symbols and
 * NEEDED libraries of a built ELF file. Each function fails the calling
 * test (Criterion) on what it cannot read. tests/abi_syms.c.
 */
#ifndef ADAG_TESTS_ABI_SYMS_H
#define ADAG_TESTS_ABI_SYMS_H

#include <stddef.h>

#define MAX_SYMS 256

typedef struct {
    char *names[MAX_SYMS];
    unsigned n;
} symset_t;

void symset_add(symset_t *s, const char *name, size_t len);
int symset_has(const symset_t *s, const char *name);
void symset_free(symset_t *s);

/* Adds the functions the header at path declares with ADAG_API. */
void abi_header_api(const char *path, symset_t *out);
/* libadag's API: the ADAG_API functions of include/adag.h and
 * include/adag/stats.h. */
void abi_runtime_api(symset_t *out);
/* libadag-data's API: those of include/adag/data.h. */
void abi_data_api(symset_t *out);
/* Adds the dynamic symbols of the ELF file at path (nm -D `which`:
 * "--defined-only" or "--undefined-only") that start with prefix. */
void abi_elf_symbols(const char *path, const char *which, const char *prefix, symset_t *out);
/* Adds the sonames the ELF file at path needs (its NEEDED entries). */
void abi_elf_needed(const char *path, symset_t *out);
/* Fails naming every name in one set and not the other; map names the
 * export list to fix. */
void abi_assert_same_symbols(const symset_t *header, const symset_t *elf, const char *what,
                             const char *map);

#endif
