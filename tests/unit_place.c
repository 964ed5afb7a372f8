/* Unit tests (suites "cpulist", "wait_policy"): CPU lists as text
 * (common/cpuset.c), and the wait policy each loop gets from the CPUs its
 * actor was placed on and the loops that share them (dag/driver/compile.c,
 * adag__dag_policy). */
#include "common/cpuset.h"
#include "common/settings.h"
#include "dag/driver/dag.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static void round_trip(const char *text, const char *canonical, int count)
{
    cpu_set_t set;
    char out[ADAG_CPULIST_MAX];
    const char *bad = NULL;
    cr_assert_eq(adag__cpulist_parse(text, &set, &bad), 0, "\"%s\" refused at \"%s\"", text,
                 bad ? bad : "");
    cr_assert_eq(CPU_COUNT(&set), count, "\"%s\"", text);
    adag__cpulist_format(&set, out, sizeof(out));
    cr_assert_str_eq(out, canonical);
}

Test(cpulist, parse_and_format)
{
    round_trip("0", "0", 1);
    round_trip("0-3,8", "0-3,8", 5);
    round_trip("8,0-3", "0-3,8", 5);
    round_trip("1,2,3,7", "1-3,7", 4);
    round_trip("5-5", "5", 1);
    round_trip("0-1023", "0-1023", 1024);
}

Test(cpulist, refusals_point_at_the_bad_part)
{
    const struct {
        const char *text, *at;
    } bad[] = {
        {"", ""},       {"-1", "-1"},     {"3-1", "3-1"},   {"0,,1", ",1"},
        {"0,", ","},    {"a", "a"},       {"1 2", "1 2"},   {"1024", "1024"},
        {"0-1024", "0-1024"}, {"1,x", "x"}, {"99999999999999999999", "99999999999999999999"},
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cpu_set_t set;
        const char *at = NULL;
        cr_assert_eq(adag__cpulist_parse(bad[i].text, &set, &at), -1, "\"%s\" accepted",
                     bad[i].text);
        cr_assert_str_eq(at, bad[i].at, "\"%s\"", bad[i].text);
        cr_assert_eq(CPU_COUNT(&set), 0);
    }
    cpu_set_t set;
    cr_assert_eq(adag__cpulist_parse(NULL, &set, NULL), -1);
}

Test(cpulist, format_truncates_safely)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c = 0; c < 200; c += 2)
        CPU_SET(c, &set);
    char small[16];
    adag__cpulist_format(&set, small, sizeof(small));
    cr_assert_lt(strlen(small), sizeof(small));
    cr_assert(strncmp(small, "0,2,4,6,8", 9) == 0, "%s", small);
}

/* A DAG of fake actors, each with a placement (cpus, host), enough for
 * adag__dag_policy: it reads the actors' places and hosts, and its
 * runtime's spins (values of their own, to tell them apart). */
#define FAKE_SPIN 111111
#define FAKE_SPIN_CROWDED 22222
typedef struct {
    struct adag_runtime rt;
    struct adag_dag dag;
    adag_dag_actor_t da[8];
    struct adag_actor actors[8];
} fake_dag_t;

static fake_dag_t *fake(unsigned n, const char *const *cpus, const char *const *hosts)
{
    fake_dag_t *f = calloc(1, sizeof(*f));
    f->rt.settings.spin_ns = FAKE_SPIN;
    f->rt.settings.spin_ns_crowded = FAKE_SPIN_CROWDED;
    f->dag.run.rt = &f->rt;
    f->dag.run.actors = f->da;
    f->dag.run.nactors = n;
    f->dag.wait.spin_ns = -1;
    for (unsigned i = 0; i < n; i++) {
        adag__place_none(&f->actors[i].place);
        cr_assert_eq(adag__cpulist_parse(cpus[i], &f->actors[i].place.cpus, NULL), 0);
        snprintf(f->actors[i].node, sizeof(f->actors[i].node), "%s", hosts ? hosts[i] : "");
        f->da[i].actor = &f->actors[i];
    }
    return f;
}

static void driver_on(const char *cpus)
{
    cpu_set_t set;
    cr_assert_eq(adag__cpulist_parse(cpus, &set, NULL), 0);
    cr_assert_eq(sched_setaffinity(0, sizeof(set), &set), 0, "this test needs CPUs %s", cpus);
}

Test(wait_policy, loops_on_their_own_cpus_spin)
{
    /* the driver on CPU 0; three actors on CPUs 4-7 (a socket of their
     * own), two on CPU 0 with the driver. 6 loops in all: the old rule
     * (loops + driver > CPUs) made every one yield. */
    driver_on("0");
    const char *cpus[] = {"4-7", "4-7", "4-7", "0", "0"};
    fake_dag_t *f = fake(5, cpus, NULL);
    for (int ai = 0; ai < 3; ai++) {
        adag_wait_policy_t p = adag__dag_policy(&f->dag, ai);
        cr_assert_eq(p.yield, 0, "actor %d: 3 loops on 4 CPUs", ai);
        cr_assert_eq(p.spin_ns, FAKE_SPIN);
    }
    for (int ai = 3; ai < 5; ai++) {
        adag_wait_policy_t p = adag__dag_policy(&f->dag, ai);
        cr_assert_eq(p.yield, 1, "actor %d: 3 loops (2 actors, the driver) on 1 CPU", ai);
        cr_assert_eq(p.spin_ns, FAKE_SPIN_CROWDED);
    }
    cr_assert_eq(adag__dag_policy(&f->dag, -1).yield, 1, "the driver shares CPU 0 with 2 loops");
    free(f);
    /* four actors on CPUs 4-7 and a fifth on CPU 5: five loops meet there */
    const char *four[] = {"4-7", "4-7", "4-7", "4-7", "5"};
    f = fake(5, four, NULL);
    cr_assert_eq(adag__dag_policy(&f->dag, 0).yield, 1, "5 loops meet CPUs 4-7");
    cr_assert_eq(adag__dag_policy(&f->dag, -1).yield, 0, "the driver alone on CPU 0");
    free(f);
}

Test(wait_policy, actors_on_other_hosts_do_not_count)
{
    driver_on("0");
    const char *cpus[] = {"0", "0", "0"};
    const char *hosts[] = {"", "10.0.0.2:7000", "10.0.0.3:7000"};
    fake_dag_t *f = fake(3, cpus, hosts);
    /* the local actor shares CPU 0 with the driver only */
    cr_assert_eq(adag__dag_policy(&f->dag, 0).yield, 1);
    /* each remote actor is alone on its host's CPU 0 */
    cr_assert_eq(adag__dag_policy(&f->dag, 1).yield, 0);
    cr_assert_eq(adag__dag_policy(&f->dag, 2).yield, 0);
    free(f);
    /* two on one remote host, one CPU there: they yield */
    const char *hosts2[] = {"", "10.0.0.2:7000", "10.0.0.2:7000"};
    f = fake(3, cpus, hosts2);
    cr_assert_eq(adag__dag_policy(&f->dag, 1).yield, 1);
    free(f);
}

Test(wait_policy, explicit_spin_replaces_the_maximum_only)
{
    driver_on("0");
    const char *cpus[] = {"0"};
    fake_dag_t *f = fake(1, cpus, NULL);
    f->dag.wait.spin_ns = 1234;
    adag_wait_policy_t p = adag__dag_policy(&f->dag, 0);
    cr_assert(p.yield == 1 && p.spin_ns == 1234);
    free(f);
}
