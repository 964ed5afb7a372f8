#include "dag/proc/actor_place.h"

#include "common/error.h"
#include "common/log.h"
#include "gpu/device.h"

#include <stdio.h>
#include <string.h>

_Static_assert(ADAG_MSG_NIC_MAX == ADAG_NIC_NAME_MAX, "NIC names differ in size");
_Static_assert(ADAG_MSG_CPUS_MAX == ADAG_CPULIST_MAX, "CPU lists differ in size");

void adag__actor_place_request(const adag_actor_params_t *p, int automatic,
                              adag_msg_place_t *req)
{
    memset(req, 0, sizeof(*req));
    req->numa = -1;
    if (automatic)
        req->flags |= ADAG_MSG_PLACE_AUTOMATIC;
    if (p->field_mask & ADAG_ACTOR_PARAM_CPUS) {
        req->flags |= ADAG_MSG_PLACE_CPUS;
        snprintf(req->cpus, sizeof(req->cpus), "%s", p->cpus);
    }
    if (p->field_mask & ADAG_ACTOR_PARAM_NUMA) {
        req->flags |= ADAG_MSG_PLACE_NUMA_GIVEN;
        req->numa = p->numa;
    }
    if (p->field_mask & ADAG_ACTOR_PARAM_NIC) {
        req->flags |= ADAG_MSG_PLACE_NIC;
        snprintf(req->nic, sizeof(req->nic), "%s", p->nic);
    }
}

adag_status_t adag__actor_place_check(const adag_actor_params_t *p, const char *fn)
{
    if (p->field_mask & ADAG_ACTOR_PARAM_CPUS) {
        cpu_set_t set;
        const char *bad = "";
        if (!p->cpus)
            return adag__error(ADAG_ERR_INVALID, "%s: cpus is set (ADAG_ACTOR_PARAM_CPUS) but NULL",
                              fn);
        if (strlen(p->cpus) >= ADAG_CPULIST_MAX || adag__cpulist_parse(p->cpus, &set, &bad) != 0)
            return adag__error(ADAG_ERR_INVALID, "%s: cpus \"%.64s\" is not a CPU list like "
                              "\"0-3,8\" (at \"%.32s\")", fn, p->cpus, bad);
    }
    if ((p->field_mask & ADAG_ACTOR_PARAM_NUMA) && (p->numa < -1 || p->numa > 4095))
        return adag__error(ADAG_ERR_INVALID, "%s: numa %d is not a NUMA node number (0-4095, or "
                          "-1 for none)", fn, p->numa);
    if ((p->field_mask & ADAG_ACTOR_PARAM_NIC) &&
        (!p->nic || strlen(p->nic) >= ADAG_NIC_NAME_MAX))
        return adag__error(ADAG_ERR_INVALID, "%s: nic (ADAG_ACTOR_PARAM_NIC) must be a name of "
                          "at most %d bytes (\"\" for UCX's choice)", fn, ADAG_NIC_NAME_MAX - 1);
    return ADAG_OK;
}

/* The topology's GPU for an actor's device: a CUDA device by its bus id;
 * the emulated device stands for the map's GPUs in bus order (emu:i
 * is the i-th), so an XML map of a GPU server can be exercised anywhere. */
static int map_gpu(const adag_topo_t *t, const char *who, int32_t kind, unsigned index)
{
    if (kind == ADAG_DEV_EMULATED)
        return index < t->ngpus ? (int)index : -1;
    const adag_device_ops_t *ops = adag__device_backend((uint32_t)kind);
    char bus[32];
    if (!ops || !ops->pci_bus_id || ops->pci_bus_id(index, bus, sizeof(bus)) != ADAG_OK) {
        ADAG_LOG_INFO("%s: no PCI bus id for its device: placed as an actor without one", who);
        return -1;
    }
    int gpu = adag__topo_gpu_by_bus(t, bus);
    if (gpu < 0)
        ADAG_LOG_WARN("%s: its GPU %s is not in the topology of %s: placed as an actor without "
                      "one", who, bus, t->source);
    return gpu;
}

adag_status_t adag__actor_place_decide(const char *who, int32_t device_kind, unsigned device_index,
                                      const adag_msg_place_t *req, adag_place_t *out)
{
    int automatic = (req->flags & ADAG_MSG_PLACE_AUTOMATIC) != 0;
    int asked = (req->flags & (ADAG_MSG_PLACE_CPUS | ADAG_MSG_PLACE_NIC)) || req->numa >= 0;
    int numa_given = (req->flags & ADAG_MSG_PLACE_NUMA_GIVEN) != 0;
    if (!asked && !(automatic && device_kind >= 0)) {
        adag__place_none(out);
        return ADAG_OK;
    }
    const adag_topo_t *t;
    adag_status_t st = adag__topo_get(&t);
    if (st != ADAG_OK) {
        adag__error_prefix("%s", who);
        return st;
    }
    adag_place_request_t r = {
        .gpu = automatic && device_kind >= 0 ? map_gpu(t, who, device_kind, device_index) : -1,
        .cpus = (req->flags & ADAG_MSG_PLACE_CPUS) ? req->cpus : NULL,
        .numa = req->numa,
        .numa_given = numa_given,
        .nic = (req->flags & ADAG_MSG_PLACE_NIC) ? req->nic : NULL,
        .automatic = automatic,
    };
    return adag__place(t, &r, who, out);
}

void adag__place_to_msg(const adag_place_t *p, adag_msg_place_t *m)
{
    memset(m, 0, sizeof(*m));
    m->flags = (p->bound ? ADAG_MSG_PLACE_BOUND : 0) |
               (p->this_system ? ADAG_MSG_PLACE_THIS_SYSTEM : 0) |
               ((p->given & ADAG_PLACE_GIVEN_NUMA) ? ADAG_MSG_PLACE_NUMA_GIVEN : 0) |
               ((p->given & ADAG_PLACE_GIVEN_CPUS) ? ADAG_MSG_PLACE_CPUS : 0) |
               ((p->given & ADAG_PLACE_GIVEN_NIC) ? ADAG_MSG_PLACE_NIC : 0);
    m->numa = p->numa;
    adag__cpulist_format(&p->cpus, m->cpus, sizeof(m->cpus));
    snprintf(m->nic, sizeof(m->nic), "%s", p->nic);
    snprintf(m->gpu, sizeof(m->gpu), "%s", p->gpu_bus_id);
    m->nic_dist = p->nic[0] ? (uint32_t)p->nic_dist : 0;
}

adag_status_t adag__place_from_msg(const adag_msg_place_t *m, adag_place_t *p)
{
    adag__place_none(p);
    if (adag__cpulist_parse(m->cpus, &p->cpus, NULL) != 0)
        return adag__error(ADAG_ERR_PROTOCOL, "the worker's placement names CPUs \"%.64s\"",
                          m->cpus);
    p->bound = (m->flags & ADAG_MSG_PLACE_BOUND) != 0;
    p->this_system = (m->flags & ADAG_MSG_PLACE_THIS_SYSTEM) != 0;
    p->given = ((m->flags & ADAG_MSG_PLACE_NUMA_GIVEN) ? ADAG_PLACE_GIVEN_NUMA : 0) |
               ((m->flags & ADAG_MSG_PLACE_CPUS) ? ADAG_PLACE_GIVEN_CPUS : 0) |
               ((m->flags & ADAG_MSG_PLACE_NIC) ? ADAG_PLACE_GIVEN_NIC : 0);
    p->numa = m->numa;
    snprintf(p->nic, sizeof(p->nic), "%s", m->nic);
    snprintf(p->gpu_bus_id, sizeof(p->gpu_bus_id), "%s", m->gpu);
    p->gpu = m->gpu[0] ? 0 : -1; /* the driver knows the bus id, not the worker's index */
    p->nic_dist = m->nic_dist >= ADAG_TOPO_SAME_SWITCH && m->nic_dist <= ADAG_TOPO_ACROSS_SOCKETS
                      ? (adag_topo_dist_t)m->nic_dist
                      : ADAG_TOPO_ACROSS_SOCKETS;
    return ADAG_OK;
}

int adag__place_share(const adag_place_t *a, const char *host_a, const adag_place_t *b,
                     const char *host_b)
{
    cpu_set_t both;
    if (strcmp(host_a, host_b) != 0)
        return 0;
    CPU_AND(&both, &a->cpus, &b->cpus);
    return CPU_COUNT(&both) > 0;
}
