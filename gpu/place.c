/* Placement decisions and how they are applied (see gpu/place.h). */
#include "gpu/place.h"

#include "common/error.h"
#include "common/log.h"
#include "common/mempolicy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void adag__place_none(adag_place_t *out)
{
    memset(out, 0, sizeof(*out));
    out->gpu = -1;
    out->numa = -1;
    out->nic_dist = ADAG_TOPO_ACROSS_SOCKETS;
    out->this_system = 1;
    adag__cpus_allowed(&out->cpus);
}

static void list_numa(const adag_topo_t *t, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < t->nnuma && pos < len; i++) {
        int n = snprintf(buf + pos, len - pos, "%s%d", i ? ", " : "", t->numa[i].os_index);
        pos += n > 0 ? (size_t)n : 0;
    }
    if (!t->nnuma)
        snprintf(buf, len, "none");
}

static void list_nics(const adag_topo_t *t, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < t->nnics && pos < len; i++) {
        int n = snprintf(buf + pos, len - pos, "%s%s", i ? ", " : "", t->nics[i].name);
        pos += n > 0 ? (size_t)n : 0;
    }
    if (!t->nnics)
        snprintf(buf, len, "none");
}

static adag_status_t place_cpus(const adag_topo_t *t, const adag_place_request_t *req,
                                const char *who, adag_place_t *out)
{
    char allowed[ADAG_CPULIST_MAX];
    adag__cpulist_format(&t->allowed, allowed, sizeof(allowed));
    if (req->cpus) {
        const char *bad = NULL;
        cpu_set_t outside;
        if (adag__cpulist_parse(req->cpus, &out->cpus, &bad) != 0)
            return adag__error(ADAG_ERR_INVALID, "%s: cpus \"%s\" is not a CPU list like "
                              "\"0-3,8\" (at \"%s\")", who, req->cpus, bad);
        CPU_XOR(&outside, &out->cpus, &t->allowed);
        CPU_AND(&outside, &outside, &out->cpus);
        if (CPU_COUNT(&outside)) {
            char o[ADAG_CPULIST_MAX];
            adag__cpulist_format(&outside, o, sizeof(o));
            return adag__error(ADAG_ERR_INVALID, "%s: cpus \"%s\" names CPUs %s, outside "
                              "those this process may use (%s on %s)", who, req->cpus, o,
                              allowed, t->source);
        }
        out->given |= ADAG_PLACE_GIVEN_CPUS;
        return ADAG_OK;
    }
    const adag_topo_numa_t *m = out->numa >= 0 ? adag__topo_numa(t, out->numa) : NULL;
    if (m && CPU_COUNT(&m->cpus))
        out->cpus = m->cpus;
    else if (out->gpu >= 0 && req->automatic && CPU_COUNT(&t->gpus[out->gpu].cpus))
        out->cpus = t->gpus[out->gpu].cpus; /* its package, when the node is not known */
    else
        out->cpus = t->allowed;
    return ADAG_OK;
}

/* The closest RDMA NIC with an active port; GPUs that tie between
 * equally close NICs are spread over them by GPU index. */
static int choose_nic(const adag_topo_t *t, const adag_place_t *p, adag_topo_dist_t *dist)
{
    int best[64], nbest = 0;
    adag_topo_dist_t bd = ADAG_TOPO_ACROSS_SOCKETS;
    if (p->gpu < 0 && p->numa < 0)
        return -1; /* nothing to be close to: UCX chooses */
    for (unsigned i = 0; i < t->nnics; i++) {
        const adag_topo_dev_t *n = &t->nics[i];
        if (!n->rdma || !n->port)
            continue;
        adag_topo_dist_t d = p->gpu >= 0 ? adag__topo_dist(t, &t->gpus[p->gpu], n)
                                         : adag__topo_dist_numa(t, n, p->numa);
        if (nbest == 0 || d < bd) {
            bd = d;
            nbest = 0;
        }
        if (d == bd && nbest < 64)
            best[nbest++] = (int)i;
    }
    if (nbest == 0)
        return -1;
    *dist = bd;
    return best[(p->gpu >= 0 ? (unsigned)p->gpu : 0u) % (unsigned)nbest];
}

static adag_status_t place_nic(const adag_topo_t *t, const adag_place_request_t *req,
                               const char *who, adag_place_t *out)
{
    char names[256];
    if (!req->nic) {
        if (!req->automatic)
            return ADAG_OK;
        adag_topo_dist_t d = ADAG_TOPO_ACROSS_SOCKETS;
        int k = choose_nic(t, out, &d);
        if (k >= 0) {
            snprintf(out->nic, sizeof(out->nic), "%s:%d", t->nics[k].name, t->nics[k].port);
            out->nic_dist = d;
        }
        return ADAG_OK;
    }
    out->given |= ADAG_PLACE_GIVEN_NIC;
    if (!req->nic[0])
        return ADAG_OK; /* none: UCX chooses */
    char name[ADAG_NIC_NAME_MAX];
    snprintf(name, sizeof(name), "%s", req->nic);
    char *colon = strchr(name, ':');
    long port = 0;
    if (colon) {
        char *end;
        *colon = '\0';
        port = strtol(colon + 1, &end, 10);
        if (*end || port < 1 || port > ADAG_TOPO_MAX_PORTS)
            return adag__error(ADAG_ERR_INVALID, "%s: nic \"%s\": the port after ':' must be "
                              "1-%d", who, req->nic, ADAG_TOPO_MAX_PORTS);
    }
    int k = adag__topo_nic_by_name(t, name);
    if (k < 0) {
        list_nics(t, names, sizeof(names));
        return adag__error(ADAG_ERR_INVALID, "%s: unknown NIC \"%s\" (NICs of %s: %s)", who,
                          name, t->source, names);
    }
    const adag_topo_dev_t *n = &t->nics[k];
    if (n->rdma && !port && !n->port)
        return adag__error(ADAG_ERR_INVALID, "%s: NIC %s has no active port", who, n->name);
    if (n->rdma)
        snprintf(out->nic, sizeof(out->nic), "%s:%ld", n->name, port ? port : n->port);
    else
        snprintf(out->nic, sizeof(out->nic), "%s", n->netdev[0] ? n->netdev : n->name);
    out->nic_dist = out->gpu >= 0 ? adag__topo_dist(t, &t->gpus[out->gpu], n)
                    : out->numa >= 0 ? adag__topo_dist_numa(t, n, out->numa)
                                     : ADAG_TOPO_ACROSS_SOCKETS;
    return ADAG_OK;
}

adag_status_t adag__place(const adag_topo_t *t, const adag_place_request_t *req, const char *who,
                         adag_place_t *out)
{
    char nodes[128];
    adag__place_none(out);
    out->this_system = t->this_system;
    if (req->gpu >= 0) {
        if ((unsigned)req->gpu >= t->ngpus)
            return adag__error(ADAG_ERR_INVALID, "%s: GPU %d is not in the topology of %s "
                              "(%u GPUs)", who, req->gpu, t->source, t->ngpus);
        out->gpu = req->gpu;
        snprintf(out->gpu_bus_id, sizeof(out->gpu_bus_id), "%s", t->gpus[req->gpu].bus_id);
    }
    if (req->numa >= 0) {
        if (!adag__topo_numa(t, req->numa)) {
            list_numa(t, nodes, sizeof(nodes));
            return adag__error(ADAG_ERR_INVALID, "%s: NUMA node %d does not exist (nodes of "
                              "%s: %s)", who, req->numa, t->source, nodes);
        }
        out->numa = req->numa;
        out->given |= ADAG_PLACE_GIVEN_NUMA;
    } else if (req->numa_given) {
        out->given |= ADAG_PLACE_GIVEN_NUMA; /* -1: no node */
    } else if (req->automatic && out->gpu >= 0) {
        out->numa = t->gpus[out->gpu].numa;
    }
    adag_status_t st = place_cpus(t, req, who, out);
    if (st == ADAG_OK)
        st = place_nic(t, req, who, out);
    if (st != ADAG_OK)
        return st;
    out->bound = !CPU_EQUAL(&out->cpus, &t->allowed);
    return ADAG_OK;
}

adag_status_t adag__place_apply(const adag_place_t *p, const char *who)
{
    char cpus[ADAG_CPULIST_MAX];
    if (!p->this_system)
        return ADAG_OK;
    if (p->bound && sched_setaffinity(0, sizeof(p->cpus), &p->cpus) != 0) {
        adag__cpulist_format(&p->cpus, cpus, sizeof(cpus));
        return adag__error_errno(errno, "%s: binding to CPUs %s", who, cpus);
    }
    if (p->numa >= 0 && adag__mempolicy_thread(p->numa) != 0) {
        if (p->given & ADAG_PLACE_GIVEN_NUMA)
            return adag__error_errno(errno, "%s: memory on NUMA node %d (set_mempolicy)", who,
                                    p->numa);
        ADAG_LOG_WARN("%s: memory stays where the kernel puts it: set_mempolicy(NUMA node "
                      "%d): %s", who, p->numa, strerror(errno));
    }
    return ADAG_OK;
}

const char *adag__place_nic(const adag_place_t *p)
{
    return p->this_system && p->nic[0] ? p->nic : NULL;
}

void adag__place_format(const adag_place_t *p, char *buf, size_t len)
{
    char cpus[ADAG_CPULIST_MAX];
    adag__cpulist_format(&p->cpus, cpus, sizeof(cpus));
    int n = snprintf(buf, len, "CPUs %s%s", cpus, p->bound ? "" : " (not bound)");
    size_t pos = n > 0 && (size_t)n < len ? (size_t)n : len - 1;
    if (p->numa >= 0 && pos < len)
        pos += (size_t)snprintf(buf + pos, len - pos, ", NUMA %d", p->numa);
    if (p->gpu >= 0 && pos < len)
        pos += (size_t)snprintf(buf + pos, len - pos, ", GPU %s", p->gpu_bus_id);
    if (pos < len)
        pos += (size_t)snprintf(buf + pos, len - pos, ", NIC %s", p->nic[0] ? p->nic : "(UCX's choice)");
    if (p->nic[0] && pos < len)
        snprintf(buf + pos, len - pos, " (%s)", adag__topo_dist_name(p->nic_dist));
}
