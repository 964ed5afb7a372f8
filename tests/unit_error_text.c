/* Unit tests (suite "error_text"): a message formatted from this thread's
 * last error (adag__error(st, "...: %s", adag_last_error()), the way a
 * caller adds what it knows) keeps the old text whole, wherever it lands
 * in the new one (common/error.c formats into its own buffer first). */
#include "common/error.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

Test(error_text, a_message_may_quote_the_last_error)
{
    adag__error(ADAG_ERR_INVALID, "shard /tmp/x.bin: sample %d: refusing", 30);
    adag_status_t st = adag__error(ADAG_ERR_INVALID, "%s (and %d more)", adag_last_error(), 15);
    cr_assert_eq(st, ADAG_ERR_INVALID);
    cr_assert_str_eq(adag_last_error(), "shard /tmp/x.bin: sample 30: refusing (and 15 more)");

    adag__error(ADAG_ERR_IO, "connect refused");
    adag__error(ADAG_ERR_IO, "fetching %s: %s", "u", adag_last_error());
    cr_assert_str_eq(adag_last_error(), "fetching u: connect refused");

    adag__error(ADAG_ERR_IO, "inner");
    adag__error_errno(EPIPE, "outer: %s", adag_last_error());
    cr_assert(!strncmp(adag_last_error(), "outer: inner: ", 14), "%s", adag_last_error());

    /* a long last error quoted after a prefix: cut at the end, never torn */
    char big[ADAG_ERROR_MAX];
    memset(big, 'q', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    adag__error(ADAG_ERR_INVALID, "%s", big);
    adag__error(ADAG_ERR_INVALID, "ctx: %s", adag_last_error());
    const char *e = adag_last_error();
    cr_assert_eq(strlen(e), ADAG_ERROR_MAX - 1);
    cr_assert(!strncmp(e, "ctx: qqqq", 9), "%.16s", e);
    cr_assert_eq(strspn(e + 5, "q"), ADAG_ERROR_MAX - 6);
}
