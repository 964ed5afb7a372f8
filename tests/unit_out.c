/*
 * Unit test (suite "out"): common/out.c, the one output path of the
 * library's text writers. Texts that cross the 8 KiB stage at every offset,
 * pieces larger than the stage, printf and write mixed: a writer gets every
 * byte in order, in few calls; a buffer gets the text cut at every length
 * with the size it needs; the first failure sticks.
 */
#include "common/out.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *text;
    size_t len, cap;
    unsigned calls, fail_at;
} sink_t;

static adag_status_t sink(void *ctx, const void *buf, size_t n)
{
    sink_t *k = ctx;
    k->calls++;
    cr_assert(n > 0);
    if (k->calls == k->fail_at)
        return ADAG_ERR_CLOSED;
    if (k->len + n + 1 > k->cap) {
        k->cap = (k->len + n + 1) * 2;
        k->text = realloc(k->text, k->cap);
        cr_assert_not_null(k->text);
    }
    memcpy(k->text + k->len, buf, n);
    k->len += n;
    k->text[k->len] = '\0';
    return ADAG_OK;
}

/* Piece i of a text: i's decimal digits, then `i % 97` letters, a newline;
 * every 50th piece is 20000 bytes (more than the stage), written raw. */
static void emit(adag_out_t *o, char *expect, size_t *elen, unsigned npieces)
{
    static char big[20001];
    for (unsigned i = 0; i < npieces; i++) {
        if (i % 50 == 49) {
            memset(big, 'A' + (int)(i % 26), 20000);
            adag__out_write(o, big, 20000);
            memcpy(expect + *elen, big, 20000);
            *elen += 20000;
            continue;
        }
        char piece[256];
        int n = snprintf(piece, sizeof(piece), "%u:%.*s\n", i, (int)(i % 97),
                         "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstu"
                         "vwxyzabcdefghijklmnopqrstuvwxyz");
        if (i % 3 == 0) {
            adag__out_printf(o, "%u:%.*s", i, (int)(i % 97),
                            "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopq"
                            "rstuvwxyzabcdefghijklmnopqrstuvwxyz");
            adag__out_putc(o, '\n');
        } else {
            adag__out_write(o, piece, (size_t)n);
        }
        memcpy(expect + *elen, piece, (size_t)n);
        *elen += (size_t)n;
    }
    expect[*elen] = '\0';
}

Test(out, writer_gets_every_byte_in_few_calls)
{
    char *expect = malloc(1 << 22);
    size_t elen = 0;
    sink_t k = {0};
    adag_out_t o;
    adag__out_writer(&o, (adag_writer_t){sink, &k});
    emit(&o, expect, &elen, 2000);
    cr_assert_eq(adag__out_end(&o, "test", NULL), ADAG_OK);
    cr_assert_eq(k.len, elen);
    cr_assert(memcmp(k.text, expect, elen) == 0, "the text differs");
    /* a call per stage or per large piece */
    cr_assert_leq(k.calls, elen / ADAG_OUT_STAGE + 2 * (2000 / 50) + 2, "%u calls for %zu bytes",
                  k.calls, elen);
    free(k.text);
    free(expect);
}

/* A printf longer than the stage. */
Test(out, printf_larger_than_the_stage)
{
    char *big = malloc(3 * ADAG_OUT_STAGE + 1);
    memset(big, 'q', 3 * ADAG_OUT_STAGE);
    big[3 * ADAG_OUT_STAGE] = '\0';
    sink_t k = {0};
    adag_out_t o;
    adag__out_writer(&o, (adag_writer_t){sink, &k});
    adag__out_printf(&o, "<%s>", "x");
    adag__out_printf(&o, "[%s]", big);
    adag__out_printf(&o, "<%s>", "y");
    cr_assert_eq(adag__out_end(&o, "test", NULL), ADAG_OK);
    cr_assert_eq(k.len, 3 * ADAG_OUT_STAGE + 8);
    cr_assert(strncmp(k.text, "<x>[qqq", 7) == 0 && strcmp(k.text + k.len - 5, "q]<y>") == 0);
    free(k.text);
    free(big);
}

/* Into a buffer of every length around the text's: cut, NUL-terminated,
 * the size needed, ADAG_ERR_TOO_LARGE unless it all fit. */
Test(out, buffer_cut_at_every_length)
{
    char *expect = malloc(1 << 22);
    size_t elen = 0;
    adag_out_t o;
    adag__out_buffer(&o, NULL, 0);
    emit(&o, expect, &elen, 120);
    size_t needed = 0;
    cr_assert_eq(adag__out_end(&o, "test", &needed), ADAG_ERR_TOO_LARGE);
    cr_assert_eq(needed, elen + 1);
    char *buf = malloc(elen + 2);
    size_t lens[] = {1, 2, 3, 100, 4095, 4096, 4097, 20000, elen - 1, elen, elen + 1, elen + 2};
    for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        size_t len = lens[i];
        memset(buf, 'Z', elen + 2);
        size_t tmp = 0;
        adag__out_buffer(&o, buf, len);
        emit(&o, expect, &tmp, 120);
        adag_status_t st = adag__out_end(&o, "fmt", &needed);
        cr_assert_eq(needed, elen + 1);
        cr_assert_eq(st, len > elen ? ADAG_OK : ADAG_ERR_TOO_LARGE, "len %zu", len);
        size_t kept = len > elen ? elen : len - 1;
        cr_assert_eq(strlen(buf), kept, "len %zu: %zu bytes kept", len, strlen(buf));
        cr_assert(memcmp(buf, expect, kept) == 0, "len %zu: not the text's start", len);
        if (len + 1 < elen + 2)
            cr_assert_eq(buf[len], 'Z', "len %zu: written past the buffer", len);
        if (st != ADAG_OK) {
            char want[96];
            snprintf(want, sizeof(want),
                     "fmt: the text is %zu bytes (%zu with its NUL); the "
                     "buffer holds %zu",
                     elen, elen + 1, len);
            cr_assert(strstr(adag_last_error(), want), "%s", adag_last_error());
        }
    }
    free(buf);
    free(expect);
}

/* The first failure sticks: nothing after it reaches the writer. */
Test(out, first_failure_sticks)
{
    char *expect = malloc(1 << 22);
    size_t elen = 0;
    sink_t k = {.fail_at = 2};
    adag_out_t o;
    adag__out_writer(&o, (adag_writer_t){sink, &k});
    emit(&o, expect, &elen, 400);
    cr_assert_eq(adag__out_end(&o, "test", NULL), ADAG_ERR_CLOSED);
    cr_assert_eq(k.calls, 2);
    char want[96];
    snprintf(want, sizeof(want),
             "test: writing failed after %zu bytes: it returned ADAG_ERR_CLOSED", k.len);
    cr_assert(strstr(adag_last_error(), want), "%s", adag_last_error());
    cr_assert(memcmp(k.text, expect, k.len) == 0);
    free(k.text);
    /* a NULL fn */
    adag__out_writer(&o, (adag_writer_t){NULL, NULL});
    adag__out_printf(&o, "x");
    cr_assert_eq(adag__out_end(&o, "test", NULL), ADAG_ERR_INVALID);
    free(expect);
}
