/*
 * "probe": an actor that reports where its code runs, for the placement
 * tests (tests/test_placement.c). In the module (process actors) and in
 * the test binary (thread actors).
 *   where() -> "cpus=<list> mode=<m> node=<n>": the calling thread's CPUs
 *              (sched_getaffinity) and memory policy (get_mempolicy)
 *   page_policy(x) -> "mode=<m> node=<n>": the policy of the page that
 *              holds its argument (the input slot, read in place)
 *   pass(x) -> x
 */
#include "probe_actors.h"

#include <linux/mempolicy.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void cpu_list(char *buf, size_t len)
{
    cpu_set_t set;
    size_t pos = 0;
    buf[0] = '\0';
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return;
    for (int c = 0; c < CPU_SETSIZE && pos + 16 < len; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        int hi = c;
        while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, &set))
            hi++;
        pos += (size_t)(hi == c ? snprintf(buf + pos, len - pos, "%s%d", pos ? "," : "", c)
                                : snprintf(buf + pos, len - pos, "%s%d-%d", pos ? "," : "", c,
                                           hi));
        c = hi;
    }
}

/* mode and first node of the policy (of the thread, or of addr's page) */
static void policy(void *addr, int *mode, int *node)
{
    unsigned long mask[2] = {0, 0};
    *mode = -1;
    *node = -1;
    if (syscall(SYS_get_mempolicy, mode, mask, (unsigned long)(8 * sizeof(mask) + 1), addr,
                addr ? MPOL_F_ADDR : 0) != 0)
        return;
    for (int i = 0; i < 128; i++)
        if (mask[i / 64] & (1ul << (i % 64))) {
            *node = i;
            break;
        }
}

static adag_status_t probe_where(void *state, adag_call_h call)
{
    (void)state;
    char cpus[256], out[320];
    int mode, node;
    cpu_list(cpus, sizeof(cpus));
    policy(NULL, &mode, &node);
    int n = snprintf(out, sizeof(out), "cpus=%s mode=%d node=%d", cpus, mode, node);
    return adag_call_set_output(call, 0, out, (size_t)n + 1);
}

static adag_status_t probe_page_policy(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t in;
    char out[64];
    int mode, node;
    if (adag_call_arg(call, 0, &in) != ADAG_OK || !in.data || in.size == 0)
        return adag_call_fail(call, "page_policy expects a value");
    policy((void *)in.data, &mode, &node);
    int n = snprintf(out, sizeof(out), "mode=%d node=%d", mode, node);
    return adag_call_set_output(call, 0, out, (size_t)n + 1);
}

static adag_status_t probe_pass(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t in;
    if (adag_call_arg(call, 0, &in) != ADAG_OK)
        return adag_call_fail(call, "pass expects a value");
    return adag_call_set_output(call, 0, in.data, in.size);
}

static const adag_method_def_t probe_methods[] = {
    {"where", probe_where, 0, 1},
    {"page_policy", probe_page_policy, 1, 1},
    {"pass", probe_pass, 1, 1},
};

const adag_class_def_t test_probe_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "probe",
    .state_size = 8,
    .methods = probe_methods,
    .nmethods = sizeof(probe_methods) / sizeof(probe_methods[0]),
};
