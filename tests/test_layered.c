/*
 * Suite "layered": what code built on libadag (a writer's fn, a data map,
 * a library of its own such as libadag-data) reports and reads through the
 * public API. adag_fail records the per-thread message adag_last_error()
 * gives, also quoting it; a writer that fails with it has its message in
 * the writing function's; adag_config_get reads a setting back as text,
 * process-wide ones included, and refuses what adag.h says it refuses.
 */
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LTEST(name) Test(layered, name, .timeout = 30)

LTEST(fail_records_the_message_and_returns_the_status)
{
    cr_assert_eq(adag_fail(ADAG_ERR_IO, "cannot open %s (%d)", "/x/y", 7), ADAG_ERR_IO);
    cr_assert_str_eq(adag_last_error(), "cannot open /x/y (7)");
    /* quoting the message it replaces */
    cr_assert_eq(adag_fail(ADAG_ERR_INVALID, "shard 3: %s", adag_last_error()), ADAG_ERR_INVALID);
    cr_assert_str_eq(adag_last_error(), "shard 3: cannot open /x/y (7)");
    /* an empty message clears it; a NULL format says so */
    cr_assert_eq(adag_fail(ADAG_OK, "%s", ""), ADAG_OK);
    cr_assert_str_eq(adag_last_error(), "");
    cr_assert_eq(adag_fail(ADAG_ERR_METHOD, NULL), ADAG_ERR_METHOD);
    cr_assert_str_eq(adag_last_error(), "(no message)");
    /* cut at the message's size, never past it */
    char big[2000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    adag_fail(ADAG_ERR_IO, "%s", big);
    cr_assert(strlen(adag_last_error()) > 100 && strlen(adag_last_error()) < sizeof(big) - 1,
              "a 1999-byte message left %zu bytes", strlen(adag_last_error()));
}

static adag_status_t full_disk(void *ctx, const void *buf, size_t n)
{
    (void)buf;
    ++*(unsigned *)ctx;
    return adag_fail(ADAG_ERR_IO, "disk full with %zu bytes to go", n);
}

/* A writing function passes on its writer's adag_fail text. */
LTEST(a_writer_says_why_with_fail)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2];
    h_counters(rt, ADAG_PLACEMENT_THREAD, "l", 2, NULL, a);
    adag_dag_h dag = h_compile(h_chain_graph(rt, a, 2, "add"), 0, 0);
    unsigned calls = 0;
    ASSERT_ST(adag_dag_write_dot(dag, (adag_writer_t){full_disk, &calls}), ADAG_ERR_IO);
    cr_assert_eq(calls, 1, "the failed writer was called %u times", calls);
    ASSERT_MSG_HAS("adag_dag_write_dot: writing failed after 0 bytes: disk full with ");
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

LTEST(config_get_reads_back_each_kind_of_setting)
{
    adag_config_h c;
    char buf[256];
    size_t need = 0;
    ASSERT_OK(adag_config_read(&c));
    ASSERT_OK(adag_config_modify(c, "ADAG_DATA_FETCHES", "7"));
    ASSERT_OK(adag_config_get(c, "ADAG_DATA_FETCHES", buf, sizeof(buf), &need));
    cr_assert_str_eq(buf, "7");
    cr_assert_eq(need, 2);
    /* a string setting, set and unset */
    ASSERT_OK(adag_config_modify(c, "ADAG_DATA_CACHE_DIR", "/var/tmp/shards"));
    ASSERT_OK(adag_config_get(c, "ADAG_DATA_CACHE_DIR", buf, sizeof(buf), NULL));
    cr_assert_str_eq(buf, "/var/tmp/shards");
    ASSERT_OK(adag_config_modify(c, "ADAG_DATA_CACHE_DIR", ""));
    ASSERT_OK(adag_config_get(c, "ADAG_DATA_CACHE_DIR", buf, sizeof(buf), &need));
    cr_assert_str_eq(buf, "");
    cr_assert_eq(need, 1);
    /* a process-wide one: this process's value, the one adag_config_print shows */
    ASSERT_OK(adag_config_get(c, "ADAG_LOG_LEVEL", buf, sizeof(buf), NULL));
    char *end;
    long level = strtol(buf, &end, 10);
    cr_assert(end != buf && !*end && level >= 0, "ADAG_LOG_LEVEL reads \"%s\"", buf);
    /* the size first, then what fits */
    ASSERT_OK(adag_config_modify(c, "ADAG_DATA_CACHE_DIR", "/a/rather/long/directory"));
    ASSERT_ST(adag_config_get(c, "ADAG_DATA_CACHE_DIR", NULL, 0, &need), ADAG_ERR_TOO_LARGE);
    cr_assert_eq(need, strlen("/a/rather/long/directory") + 1);
    ASSERT_ST(adag_config_get(c, "ADAG_DATA_CACHE_DIR", buf, 7, &need), ADAG_ERR_TOO_LARGE);
    cr_assert_str_eq(buf, "/a/rat");
    ASSERT_MSG_HAS("adag_config_get: ADAG_DATA_CACHE_DIR takes 25 bytes, the buffer has 7");
    adag_config_release(c);
}

LTEST(config_get_refuses_what_it_cannot_read)
{
    adag_config_h c;
    char buf[64] = "untouched";
    ASSERT_OK(adag_config_read(&c));
    ASSERT_ST(adag_config_get(c, "ADAG_NO_SUCH", buf, sizeof(buf), NULL), ADAG_ERR_NOT_FOUND);
    ASSERT_MSG_HAS("adag_config_get: there is no setting ADAG_NO_SUCH");
    ASSERT_OK(adag_config_modify(c, "ADAG_TOKEN", "hunter2"));
    ASSERT_ST(adag_config_get(c, "ADAG_TOKEN", buf, sizeof(buf), NULL), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("ADAG_TOKEN is secret");
    cr_assert_str_eq(buf, "untouched");
    ASSERT_ST(adag_config_get(NULL, "ADAG_SPIN_NS", buf, sizeof(buf), NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_config_get(c, NULL, buf, sizeof(buf), NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_config_get(c, "ADAG_SPIN_NS", NULL, 5, NULL), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("buf is NULL but len is not 0");
    adag_config_release(c);
}
