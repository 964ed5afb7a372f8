/*
 * A job started by a PMIx launcher: `mpirun --allow-run-as-root -np 3
 * adag-worker --pmix -- pmix-driver` (tests/programs/pmix_driver.c). Rank 0
 * runs the driver, ranks 1 and 2 serve as agents found through PMIx
 * put/commit/fence/get; the driver's values cross both and come back
 * checked. (Ranks cannot sit in network namespaces of their own here: mpirun's
 * PMIx server is reached over loopback; tests/test_netns.c covers hosts
 * apart through agents.) Where mpirun or PMIx is missing: "skipped:
 * <reason>".
 */
#include "helpers.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORKER ADAG_TEST_BUILD_DIR "/adag-worker"
#define DRIVER ADAG_TEST_BUILD_DIR "/tests/pmix-driver"

static void skip_unless_mpirun(void)
{
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        cr_skip_test("skipped: no mpirun (Debian's openmpi-bin)");
    if (system(WORKER " --pmix 2>&1 | grep -q 'built without PMIx'") == 0)
        cr_skip_test("skipped: adag-worker was built without PMIx (libpmix-dev)");
}

/* Runs cmd (sh -c) with its output in *out (malloc'd); its exit status. */
static int run_capture(const char *cmd, char **out)
{
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "popen: %s", strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - 1 - len, f)) > 0 && len + n < cap - 1)
        len += n;
    buf[len] = '\0';
    int st = pclose(f);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *MPIRUN = "timeout -s KILL 90 mpirun --allow-run-as-root --oversubscribe "
                            "--mca btl self,tcp -np 3";

Test(pmix, mpirun_three_ranks, .timeout = 120)
{
    skip_unless_mpirun();
    char cmd[1024], *out;
    snprintf(cmd, sizeof(cmd), "%s %s --pmix -- %s 2>&1", MPIRUN, WORKER, DRIVER);
    int st = run_capture(cmd, &out);
    cr_assert_eq(st, 0, "mpirun exited %d:\n%s", st, out);
    cr_assert(strstr(out, "pmix driver: ok (3 ranks"), "the driver did not finish:\n%s", out);
    cr_assert(strstr(out, "hosts 1=") && strstr(out, ",2="), "no rank addresses:\n%s", out);
    cr_assert_null(strstr(out, "adag-token"), "a token path leaked into the output");
    free(out);
}
