/* Unit tests (suites "status", "class", "value"): the status table behind
 * adag_status_str / adag__status_name (common/error.c), and the one check of
 * class definitions and method limits shared by adag_class_register,
 * adag-worker and the driver (dag/exec/class.c). */
#include "common/error.h"
#include "common/value.h"
#include "dag/exec/class.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The strings callers may have matched on: they stay as they were. */
static const struct {
    adag_status_t code;
    const char *name;
    const char *str;
} expected[] = {
    {ADAG_OK, "ADAG_OK", "ADAG_OK: success"},
    {ADAG_ERR_INVALID, "ADAG_ERR_INVALID", "ADAG_ERR_INVALID: invalid argument"},
    {ADAG_ERR_NO_MEMORY, "ADAG_ERR_NO_MEMORY", "ADAG_ERR_NO_MEMORY: out of memory"},
    {ADAG_ERR_TIMEOUT, "ADAG_ERR_TIMEOUT", "ADAG_ERR_TIMEOUT: timed out"},
    {ADAG_ERR_AGAIN, "ADAG_ERR_AGAIN", "ADAG_ERR_AGAIN: would block"},
    {ADAG_ERR_METHOD, "ADAG_ERR_METHOD", "ADAG_ERR_METHOD: a method failed"},
    {ADAG_ERR_ACTOR_DIED, "ADAG_ERR_ACTOR_DIED", "ADAG_ERR_ACTOR_DIED: an actor died"},
    {ADAG_ERR_TOO_LARGE, "ADAG_ERR_TOO_LARGE", "ADAG_ERR_TOO_LARGE: value larger than its slot"},
    {ADAG_ERR_IO, "ADAG_ERR_IO", "ADAG_ERR_IO: system call failed"},
    {ADAG_ERR_CLOSED, "ADAG_ERR_CLOSED", "ADAG_ERR_CLOSED: closed"},
    {ADAG_ERR_NOT_FOUND, "ADAG_ERR_NOT_FOUND", "ADAG_ERR_NOT_FOUND: not found"},
    {ADAG_ERR_BUSY, "ADAG_ERR_BUSY", "ADAG_ERR_BUSY: in use"},
    {ADAG_ERR_PROTOCOL, "ADAG_ERR_PROTOCOL", "ADAG_ERR_PROTOCOL: malformed message"},
    {ADAG_ERR_INTERNAL, "ADAG_ERR_INTERNAL", "ADAG_ERR_INTERNAL: internal error"},
};
#define NEXPECTED (sizeof(expected) / sizeof(expected[0]))

Test(status, every_status_has_its_name_and_string)
{
    for (unsigned i = 0; i < NEXPECTED; i++) {
        cr_expect_str_eq(adag_status_str(expected[i].code), expected[i].str, "status %d",
                         (int)expected[i].code);
        const char *name = adag__status_name(expected[i].code);
        cr_expect(name && strcmp(name, expected[i].name) == 0, "adag__status_name(%d) is %s",
                  (int)expected[i].code, name ? name : "NULL");
    }
}

Test(status, values_that_are_no_status)
{
    static const int others[] = {1, 7, (int)ADAG_ERR_INTERNAL - 1, -100, -1000000, 0x7fffffff,
                                 (int)0x80000000u};
    for (unsigned i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        cr_expect_str_eq(adag_status_str((adag_status_t)others[i]), "unknown adag status",
                         "value %d", others[i]);
        cr_expect_null(adag__status_name((adag_status_t)others[i]), "value %d", others[i]);
    }
}

/* ---- dag/exec/class.c ---- */

static adag_status_t noop(void *state, adag_call_h call)
{
    (void)state;
    (void)call;
    return ADAG_OK;
}

static const adag_method_def_t two[] = {{"a", noop, 0, 1}, {"b", noop, 2, 3}};

static adag_class_def_t good_class(void)
{
    adag_class_def_t d = {.abi_version = ADAG_ABI_VERSION, .name = "k", .methods = two,
                          .nmethods = 2};
    return d;
}

Test(class, method_limits)
{
    char long_name[ADAG_MAX_NAME + 1];
    memset(long_name, 'm', sizeof(long_name));
    long_name[ADAG_MAX_NAME - 1] = '\0'; /* 63 bytes: the longest */
    cr_expect(adag__method_shape_ok(long_name, 0, 1));
    cr_expect(adag__method_shape_ok("m", ADAG_MAX_ARGS, ADAG_MAX_RETURNS));
    long_name[ADAG_MAX_NAME - 1] = 'm';
    long_name[ADAG_MAX_NAME] = '\0'; /* 64 bytes */
    cr_expect(!adag__method_shape_ok(long_name, 0, 1));
    cr_expect(!adag__method_shape_ok(NULL, 0, 1));
    cr_expect(!adag__method_shape_ok("", 0, 1));
    cr_expect(!adag__method_shape_ok("m", ADAG_MAX_ARGS + 1, 1));
    cr_expect(!adag__method_shape_ok("m", 0, 0));
    cr_expect(!adag__method_shape_ok("m", 0, ADAG_MAX_RETURNS + 1));
}

Test(class, validate_names_where_and_what)
{
    adag_class_def_t d = good_class();
    cr_assert_eq(adag__class_validate(&d, "here"), ADAG_OK, "%s", adag_last_error());

    d.abi_version = 0;
    cr_assert_eq(adag__class_validate(&d, "here"), ADAG_ERR_INVALID);
    cr_expect(strncmp(adag_last_error(), "here: ", 6) == 0, "%s", adag_last_error());
    cr_expect(strstr(adag_last_error(), "abi_version 0"), "%s", adag_last_error());

    /* with another abi_version nothing else is read: not even the name */
    d.abi_version = ADAG_ABI_VERSION + 1;
    d.name = (const char *)(uintptr_t)8; /* would crash if read */
    cr_assert_eq(adag__class_validate(&d, "here"), ADAG_ERR_INVALID);

    d = good_class();
    d.reserved[0] = 5;
    cr_assert_eq(adag__class_validate(&d, "here"), ADAG_ERR_INVALID);
    cr_expect(strstr(adag_last_error(), "class k: reserved[0]"), "%s", adag_last_error());

    adag_method_def_t bad[] = {{"a", noop, 0, 1}, {"b", noop, 0, 0}};
    d = good_class();
    d.methods = bad;
    cr_assert_eq(adag__class_validate(&d, "here"), ADAG_ERR_INVALID);
    cr_expect(strstr(adag_last_error(), "class k method 1 (b)"), "%s", adag_last_error());
    bad[1].nreturns = 1;
    bad[1].fn = NULL;
    cr_assert_eq(adag__class_validate(&d, "here"), ADAG_ERR_INVALID);
    cr_expect(strstr(adag_last_error(), "method 1 (b)"), "%s", adag_last_error());
}

Test(class, methods_copy)
{
    adag_class_def_t d = good_class();
    adag_method_info_t *m = NULL;
    cr_assert_eq(adag__class_methods(&d, "here", &m), ADAG_OK);
    cr_assert_str_eq(m[1].name, "b");
    cr_assert_eq(m[1].fn, noop);
    cr_assert_eq(m[1].nargs, 2);
    cr_assert_eq(m[1].nreturns, 3);
    free(m);
}

Test(value, bytes_sets_every_field)
{
    int x;
    adag_value_t v;
    memset(&v, 0xff, sizeof(v));
    v = adag__value_bytes(&x, 4);
    adag_value_t want;
    memset(&want, 0, sizeof(want));
    want.data = &x;
    want.size = 4;
    cr_assert(memcmp(&v, &want, sizeof(v)) == 0);
}
