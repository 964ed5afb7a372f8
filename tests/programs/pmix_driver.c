/*
 * The driver of tests/test_pmix.c: rank 0 of
 *   mpirun -np N adag-worker --pmix -- pmix-driver
 * Every other rank serves as an agent; adag-worker --pmix gave this program
 * ADAG_HOSTS (rank numbers as host names) and ADAG_TOKEN. It places a
 * "counter" on each rank (offset 10^rank), chains them, checks 100 values
 * and a second DAG over the same actors, prints "pmix driver: ok" and exits
 * 0; anything else exits 1 saying what.
 */
#include <adag.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 8

static int fail(const char *what, adag_status_t st)
{
    fprintf(stderr, "pmix driver: %s: %s: %s\n", what, adag_status_str(st), adag_last_error());
    return 1;
}

static adag_status_t run(adag_dag_h dag, int64_t x, int64_t *y)
{
    adag_value_t in = {.data = &x, .size = sizeof(x)}, out;
    adag_ref_t ref;
    adag_status_t st = adag_dag_execute(dag, &in, 1, 0, &ref);
    if (st == ADAG_OK && (st = adag_dag_get(dag, ref, &out, 1, 20000)) == ADAG_OK) {
        if (out.size == sizeof(*y))
            memcpy(y, out.data, sizeof(*y));
        else
            st = ADAG_ERR_PROTOCOL;
        adag_dag_release(dag, ref);
    }
    return st;
}

static adag_status_t chain(adag_runtime_h rt, adag_actor_h *a, unsigned n, adag_dag_h *dag)
{
    adag_graph_h g;
    adag_status_t st = adag_graph_create(rt, &g);
    if (st != ADAG_OK)
        return st;
    adag_node_h cur;
    if ((st = adag_graph_input(g, 0, &cur)) != ADAG_OK)
        return st;
    for (unsigned i = 0; i < n && st == ADAG_OK; i++) {
        adag_node_h next;
        if ((st = adag_graph_bind(g, a[i], "add", &cur, 1, &next)) == ADAG_OK)
            cur = next;
    }
    if (st == ADAG_OK && (st = adag_graph_output(g, &cur, 1)) == ADAG_OK)
        st = adag_graph_compile(g, NULL, dag);
    adag_graph_destroy(g);
    return st;
}

int main(void)
{
    const char *hosts = getenv("ADAG_HOSTS");
    if (!hosts || !*hosts) {
        fprintf(stderr, "pmix driver: no ADAG_HOSTS: not run by adag-worker --pmix\n");
        return 1;
    }
    unsigned nranks = 1;
    for (const char *p = hosts; *p; p++)
        nranks += *p == ',';
    nranks += 1; /* rank 0: this one */
    if (nranks > MAX_RANKS)
        nranks = MAX_RANKS;
    adag_runtime_h rt;
    adag_status_t st = adag_runtime_create(NULL, &rt);
    if (st != ADAG_OK)
        return fail("adag_runtime_create", st);
    adag_actor_h a[MAX_RANKS];
    int64_t want = 0;
    for (unsigned r = 1; r < nranks; r++) {
        char name[16], host[16];
        int64_t offset = 1;
        for (unsigned k = 0; k < r; k++)
            offset *= 10;
        want += offset;
        snprintf(name, sizeof(name), "rank%u", r);
        snprintf(host, sizeof(host), "%u", r);
        adag_actor_params_t p = {
            .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME |
                          ADAG_ACTOR_PARAM_MODULE | ADAG_ACTOR_PARAM_PLACEMENT |
                          ADAG_ACTOR_PARAM_INIT | ADAG_ACTOR_PARAM_NODE,
            .class_name = "counter",
            .name = name,
            .module_path = ADAG_TEST_MODULE,
            .placement = ADAG_PLACEMENT_REMOTE,
            .init_data = &offset,
            .init_size = sizeof(offset),
            .node = host,
        };
        if ((st = adag_actor_create(rt, &p, &a[r - 1])) != ADAG_OK)
            return fail(name, st);
    }
    unsigned n = nranks - 1;
    adag_dag_h dag, back;
    if ((st = chain(rt, a, n, &dag)) != ADAG_OK)
        return fail("compiling the chain", st);
    adag_actor_h rev[MAX_RANKS];
    for (unsigned i = 0; i < n; i++)
        rev[i] = a[n - 1 - i];
    if ((st = chain(rt, rev, n, &back)) != ADAG_OK)
        return fail("compiling the reverse chain", st);
    for (int64_t i = 0; i < 100; i++) {
        int64_t y = 0;
        if ((st = run(i % 2 ? back : dag, i, &y)) != ADAG_OK)
            return fail("an execution", st);
        if (y != i + want) {
            fprintf(stderr, "pmix driver: execution %lld gave %lld, want %lld\n", (long long)i,
                    (long long)y, (long long)(i + want));
            return 1;
        }
    }
    adag_dag_destroy(dag);
    adag_dag_destroy(back);
    if ((st = adag_runtime_destroy(rt)) != ADAG_OK)
        return fail("adag_runtime_destroy", st);
    printf("pmix driver: ok (%u ranks, hosts %s)\n", nranks, hosts);
    return 0;
}
