/*
 * What tests/test_abi.c and tests/test_abi_data.c read of the built
 * libraries and the public headers (tests/abi_syms.h).
 */
#include "abi_syms.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void symset_add(symset_t *s, const char *name, size_t len)
{
    cr_assert(s->n < MAX_SYMS, "more than %d symbols", MAX_SYMS);
    s->names[s->n] = strndup(name, len);
    cr_assert_not_null(s->names[s->n]);
    s->n++;
}

int symset_has(const symset_t *s, const char *name)
{
    for (unsigned i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return 1;
    return 0;
}

void symset_free(symset_t *s)
{
    for (unsigned i = 0; i < s->n; i++)
        free(s->names[i]);
    s->n = 0;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len + 4096 + 1 > cap) {
            cap = (cap ? cap * 2 : 65536);
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
        got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
    } while (got > 0);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

/* Blanks comments and preprocessor directives (with their continuation
 * lines) of C text, keeping everything else in place. */
static void strip_comments_and_directives(char *t)
{
    int line_start = 1;
    for (char *p = t; *p;) {
        if (p[0] == '/' && p[1] == '*') {
            char *e = strstr(p + 2, "*/");
            char *end = e ? e + 2 : p + strlen(p);
            for (; p < end; p++)
                if (*p != '\n')
                    *p = ' ';
            continue;
        }
        if (p[0] == '/' && p[1] == '/') {
            for (; *p && *p != '\n'; p++)
                *p = ' ';
            continue;
        }
        if (line_start && *p == '#') {
            char prev = 0;
            for (; *p && !(*p == '\n' && prev != '\\'); p++) {
                prev = *p;
                if (*p != '\n')
                    *p = ' ';
            }
            continue;
        }
        if (*p == '\n')
            line_start = 1;
        else if (!isspace((unsigned char)*p))
            line_start = 0;
        p++;
    }
}

/* The functions a public header declares with ADAG_API. */
void abi_header_api(const char *path, symset_t *out)
{
    char *text = read_file(path);
    strip_comments_and_directives(text);
    for (char *p = strstr(text, "ADAG_API"); p; p = strstr(p + 1, "ADAG_API")) {
        char *semi = strchr(p, ';');
        char *paren = strchr(p, '(');
        cr_assert(semi && paren && paren < semi,
                  "%s: an ADAG_API declaration that is no function: %.60s", path, p);
        char *e = paren;
        while (e > p && isspace((unsigned char)e[-1]))
            e--;
        char *b = e;
        while (b > p && (isalnum((unsigned char)b[-1]) || b[-1] == '_'))
            b--;
        cr_assert(e > b, "%s: no function name in: %.60s", path, p);
        symset_add(out, b, (size_t)(e - b));
    }
    free(text);
}

/* The dynamic symbols of an ELF file (nm -D, with `which`:
 * "--defined-only" or "--undefined-only"), those starting with `prefix`
 * ("" for all). */
void abi_elf_symbols(const char *path, const char *which, const char *prefix, symset_t *out)
{
    char cmd[1024], line[512];
    cr_assert(access(path, R_OK) == 0, "%s is missing", path);
    snprintf(cmd, sizeof(cmd), "nm -D %s '%s' 2>&1", which, path);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "cannot run %s", cmd);
    while (fgets(line, sizeof(line), f)) {
        /* "<address> <type> <name>", or "<type> <name>" for an undefined one */
        char w[3][400];
        int n = sscanf(line, "%399s %399s %399s", w[0], w[1], w[2]);
        cr_assert(n == 3 || n == 2, "unexpected nm output for %s: %s", path, line);
        const char *name = w[n - 1];
        if (strncmp(name, prefix, strlen(prefix)) == 0)
            symset_add(out, name, strlen(name));
    }
    int rc = pclose(f);
    cr_assert_eq(rc, 0, "%s failed (status %d)", cmd, rc);
}

/* The libraries an ELF file needs (readelf -d: its NEEDED entries). */
void abi_elf_needed(const char *path, symset_t *out)
{
    char cmd[1024], line[512];
    cr_assert(access(path, R_OK) == 0, "%s is missing", path);
    snprintf(cmd, sizeof(cmd), "readelf -d '%s' 2>&1", path);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "cannot run %s", cmd);
    while (fgets(line, sizeof(line), f)) {
        char *b = strstr(line, "(NEEDED)");
        if (!b || !(b = strchr(b, '[')))
            continue;
        char *e = strchr(b, ']');
        cr_assert_not_null(e, "unexpected readelf output for %s: %s", path, line);
        symset_add(out, b + 1, (size_t)(e - b - 1));
    }
    int rc = pclose(f);
    cr_assert_eq(rc, 0, "%s failed (status %d)", cmd, rc);
}

/* Fails naming every symbol in one set and not the other. */
void abi_assert_same_symbols(const symset_t *header, const symset_t *elf, const char *what,
                             const char *map)
{
    char missing[2048] = "", extra[2048] = "";
    for (unsigned i = 0; i < header->n; i++)
        if (!symset_has(elf, header->names[i]))
            snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " %s",
                     header->names[i]);
    for (unsigned i = 0; i < elf->n; i++)
        if (!symset_has(header, elf->names[i]))
            snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), " %s",
                     elf->names[i]);
    cr_assert(!missing[0] && !extra[0],
              "%s: declared ADAG_API in its headers but not exported:%s; exported but not "
              "declared ADAG_API:%s (the export list is %s)",
              what, missing[0] ? missing : " (none)", extra[0] ? extra : " (none)", map);
}

void abi_runtime_api(symset_t *out)
{
    /* adag.h and the parts it includes, in its order */
    static const char *const parts[] = {"core", "value", "class", "config",
                                        "actor", "graph", "dag", "stats"};
    char path[512];
    abi_header_api(ADAG_TEST_SRC_DIR "/include/adag.h", out);
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        snprintf(path, sizeof(path), "%s/include/adag/%s.h", ADAG_TEST_SRC_DIR, parts[i]);
        abi_header_api(path, out);
    }
    /* a parser that found nothing would make the comparisons vacuous */
    cr_assert(out->n >= 30, "found only %u ADAG_API functions in adag.h", out->n);
    cr_assert(symset_has(out, "adag_dag_execute") && symset_has(out, "adag_call_arg") &&
                  symset_has(out, "adag_stats_print"),
              "the header parser missed known functions");
}

void abi_data_api(symset_t *out)
{
    abi_header_api(ADAG_TEST_SRC_DIR "/include/adag/data.h", out);
    cr_assert(out->n >= 10 && symset_has(out, "adag_data_open") &&
                  symset_has(out, "adag_data_next_exec"),
              "the header parser missed known functions of adag/data.h (found %u)", out->n);
}
