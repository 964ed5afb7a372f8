/*
 * Suite "abi_data": the data stage is its own library. libadag-data.so
 * exports exactly the ADAG_API functions of include/adag/data.h (nothing of
 * the helpers it compiles in), libadag.so none of them; libadag-data.so
 * reaches libadag through the public API only (every adag symbol it needs
 * is one libadag.so exports) and alone links the data stage's libraries
 * (libarchive, libturbojpeg, libcurl, xxHash): libadag.so and adag-worker
 * need none of them.
 */
#include "abi_syms.h"
#include "helpers.h"

#include <string.h>

#define ATEST(name) Test(abi_data, name, .timeout = 30)

#define LIBADAG ADAG_TEST_BUILD_DIR "/libadag.so"
#define LIBDATA ADAG_TEST_BUILD_DIR "/libadag-data.so"

/* the sonames of the data stage's own dependencies, by prefix */
static const char *const data_deps[] = {"libarchive.so", "libturbojpeg.so", "libcurl",
                                        "libxxhash.so"};
#define NDATA_DEPS (sizeof(data_deps) / sizeof(data_deps[0]))

static const char *has_prefix(const symset_t *s, const char *prefix)
{
    for (unsigned i = 0; i < s->n; i++)
        if (strncmp(s->names[i], prefix, strlen(prefix)) == 0)
            return s->names[i];
    return NULL;
}

ATEST(data_library_exports_exactly_its_header_api)
{
    symset_t header = {0}, lib = {0};
    abi_data_api(&header);
    /* every defined dynamic symbol, whatever its name: its own copy of
     * common/'s helpers (adag__cpulist_parse, adag__out_printf, ...) stays
     * local */
    abi_elf_symbols(LIBDATA, "--defined-only", "", &lib);
    abi_assert_same_symbols(&header, &lib, "libadag-data.so", "adag-data.map");
    symset_free(&header);
    symset_free(&lib);
}

ATEST(runtime_library_exports_no_data_symbol)
{
    symset_t data = {0}, lib = {0};
    abi_data_api(&data);
    abi_elf_symbols(LIBADAG, "--defined-only", "", &lib);
    for (unsigned i = 0; i < data.n; i++)
        cr_expect(!symset_has(&lib, data.names[i]),
                  "libadag.so exports %s, a function of include/adag/data.h (libadag-data's)",
                  data.names[i]);
    const char *stray = has_prefix(&lib, "adag_data_");
    cr_expect_null(stray, "libadag.so exports %s", stray ? stray : "");
    stray = has_prefix(&lib, "adag_source_");
    cr_expect_null(stray, "libadag.so exports %s", stray ? stray : "");
    symset_free(&data);
    symset_free(&lib);
}

/* `nm -D --undefined-only libadag-data.so | grep adag`: each is libadag's
 * public API, exported by libadag.so (else the data stage would reach into
 * libadag's internals, which a program linking both could not resolve). */
ATEST(data_library_needs_only_the_public_api_of_libadag)
{
    symset_t needs = {0}, api = {0}, exported = {0}, libs = {0};
    abi_elf_symbols(LIBDATA, "--undefined-only", "adag", &needs);
    abi_runtime_api(&api);
    abi_elf_symbols(LIBADAG, "--defined-only", "", &exported);
    cr_assert(symset_has(&needs, "adag_fail") && symset_has(&needs, "adag_dag_reserve"),
              "libadag-data.so does not take adag_fail and adag_dag_reserve from libadag: "
              "the undefined-symbol list was not read (%u names)", needs.n);
    for (unsigned i = 0; i < needs.n; i++) {
        const char *n = needs.names[i];
        cr_expect(symset_has(&api, n) && symset_has(&exported, n),
                  "libadag-data.so needs %s, which is not libadag's public API (%s in adag.h or "
                  "stats.h, %s by libadag.so)",
                  n, symset_has(&api, n) ? "declared" : "not declared",
                  symset_has(&exported, n) ? "exported" : "not exported");
    }
    abi_elf_needed(LIBDATA, &libs);
    cr_expect(symset_has(&libs, "libadag.so.0"), "libadag-data.so does not need libadag.so.0");
    symset_free(&needs);
    symset_free(&api);
    symset_free(&exported);
    symset_free(&libs);
}

ATEST(only_the_data_library_links_the_data_dependencies)
{
    static const char *const runtime[] = {LIBADAG, ADAG_TEST_BUILD_DIR "/adag-worker"};
    for (unsigned r = 0; r < sizeof(runtime) / sizeof(runtime[0]); r++) {
        symset_t libs = {0};
        abi_elf_needed(runtime[r], &libs);
        cr_assert(has_prefix(&libs, "libc.so"), "%s: its NEEDED list was not read", runtime[r]);
        for (unsigned i = 0; i < NDATA_DEPS; i++) {
            const char *dep = has_prefix(&libs, data_deps[i]);
            cr_expect_null(dep, "%s needs %s, a library of the data stage (libadag-data's)",
                           runtime[r], dep ? dep : "");
        }
        symset_free(&libs);
    }
    symset_t libs = {0};
    abi_elf_needed(LIBDATA, &libs);
    for (unsigned i = 0; i < NDATA_DEPS; i++)
        cr_expect(has_prefix(&libs, data_deps[i]), "libadag-data.so does not need %s*",
                  data_deps[i]);
    symset_free(&libs);
}
